'use strict';
// The cutting proxy of the recovery tests (lib/cutproxy.js) checked on its
// own, against a hub without history: a cut is abrupt in both directions
// (the client gets a reset, never a close frame; the hub sees its session
// end without one), a cut inside a chunk delivers a strict prefix of a
// frame and loses the rest, pause() holds new connections until resume(),
// the connection bound holds, several targets are taken in turn, and one
// seed gives one sequence of moments.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const { startHub, waitFor } = require('./lib/hub');
const { RawClient, serverSdk } = require('./lib/clients');
const { cutProxy, prng } = require('./lib/cutproxy');

function proxied(proxy) {
  return `ws://127.0.0.1:${proxy.port}/app/app-key?protocol=7&client=js&version=8.4.0&flash=false`;
}

async function openVia(t, proxy) {
  const c = new RawClient(proxied(proxy));
  t.after(() => c.terminate());
  return c.open();
}

test('a cut resets both sides: the client gets ECONNRESET, the hub loses the session', async (t) => {
  const hub = await startHub([], { t });
  const proxy = await cutProxy(t, hub, { name: 'plain' });
  t.diagnostic(`seed ${proxy.seed}`);
  const c = await openVia(t, proxy);
  assert.equal((await c.subscribed('news')).event, 'pusher_internal:subscription_succeeded');
  await serverSdk(hub).trigger('news', 'one', { n: 1 });
  await c.event('one', 'news');
  assert.equal(proxy.accepted, 1);
  assert.equal(proxy.live, 1);
  assert.equal(await proxy.cut(), 1);
  const closed = await c.waitClose();
  // 1006: no close frame came.
  assert.equal(closed.code, 1006);
  await waitFor(async () => (await hub.stats()).totals.sessions === 0, 'the hub to drop the session');
  assert.equal(proxy.cuts, 1);
  assert.equal(proxy.live, 0);
  // Nothing is left to cut.
  assert.equal(await proxy.cut(), 0);

  // A reset, not a FIN: a plain socket (ws does not report its socket's
  // errors) in the middle of a keep-alive HTTP exchange gets ECONNRESET.
  const sock = net.connect(proxy.port, '127.0.0.1');
  t.after(() => sock.destroy());
  let got = '';
  sock.on('data', (d) => { got += d; });
  const ended = new Promise((resolve) => {
    sock.on('error', (e) => resolve(e.code));
    sock.on('end', () => resolve('FIN'));
  });
  sock.write('GET /stats HTTP/1.1\r\nHost: x\r\n\r\n');
  await waitFor(() => got.includes('\r\n\r\n'), 'the /stats answer through the proxy');
  await proxy.cut();
  assert.equal(await ended, 'ECONNRESET');
  t.diagnostic(proxy.describe());
});

test('a cut inside a chunk forwards a strict prefix of the frame and loses the rest', async (t) => {
  const hub = await startHub([], { t });
  const proxy = await cutProxy(t, hub, { name: 'mid-chunk' });
  t.diagnostic(`seed ${proxy.seed}`);
  const c = await openVia(t, proxy);
  await c.subscribed('news');
  const before = proxy.bytesDown;
  const cutting = proxy.cut({ midChunk: true, armMs: 10000 });
  // One event of 8,000 random characters (the client offers
  // permessage-deflate: a repeated byte would compress to a few dozen): a
  // frame of many bytes, some forwarded and some not.
  await serverSdk(hub).trigger('news', 'big', { pad: crypto.randomBytes(4000).toString('hex') });
  assert.equal(await cutting, 1);
  await c.waitClose();
  const entry = proxy.log[0];
  assert.ok(!entry.fallback, 'cut inside the chunk, not by the fallback');
  assert.ok(entry.forwarded >= 1 && entry.dropped >= 1, JSON.stringify(entry));
  assert.equal(proxy.bytesDown - before, entry.forwarded);
  assert.equal(c.count('big'), 0, 'the client never got the whole event');
  assert.equal(c.closed.code, 1006);
  t.diagnostic(`forwarded ${entry.forwarded} bytes of the chunk, dropped ${entry.dropped}`);
});

test('pause holds new connections until resume; the connection bound refuses past it', async (t) => {
  const hub = await startHub([], { t });
  const proxy = await cutProxy(t, hub, { name: 'pause', maxConnections: 2 });
  proxy.pause();
  const held = new RawClient(proxied(proxy));
  t.after(() => held.terminate());
  await waitFor(() => proxy.accepted === 1, 'the proxy to accept the held connection');
  // Held: the hub has no session for it (a hub round trip proves the hub
  // had every chance to see one).
  assert.equal((await hub.stats()).totals.sessions, 0);
  assert.equal(held.msgs.length, 0);
  proxy.resume();
  await held.open();
  assert.equal((await hub.stats()).totals.sessions, 1);
  const second = await openVia(t, proxy);
  assert.ok(second.socketId);
  const third = new RawClient(proxied(proxy));
  t.after(() => third.terminate());
  await third.waitClose();
  assert.equal(proxy.refused, 1);
  assert.equal(proxy.accepted, 2);
  t.diagnostic(proxy.describe());
});

test('several targets: each new connection goes to the next one in turn; route() changes them', async (t) => {
  const a = await startHub([], { t });
  const b = await startHub([], { t });
  const proxy = await cutProxy(t, a, { name: 'turns', targets: [a, b] });
  const sessions = async () => [(await a.stats()).totals.sessions, (await b.stats()).totals.sessions];
  await openVia(t, proxy);
  assert.deepEqual(await sessions(), [1, 0]);
  await openVia(t, proxy);
  assert.deepEqual(await sessions(), [1, 1]);
  await openVia(t, proxy);
  assert.deepEqual(await sessions(), [2, 1]);
  // A target gone: the next connections all go to the other.
  proxy.route([b]);
  await openVia(t, proxy);
  await openVia(t, proxy);
  assert.deepEqual(await sessions(), [2, 3]);
  assert.deepEqual(proxy.byTarget, { [a.port]: 2, [b.port]: 3 });
  t.diagnostic(proxy.describe());
});

test('one seed, one sequence of moments', () => {
  const a = prng(12345);
  const b = prng(12345);
  const c = prng(54321);
  const sa = Array.from({ length: 8 }, a);
  assert.deepEqual(Array.from({ length: 8 }, b), sa);
  assert.notDeepEqual(Array.from({ length: 8 }, c), sa);
  for (const x of sa) assert.ok(x >= 0 && x < 1);
});
