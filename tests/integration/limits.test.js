'use strict';
// Limits and refusals: message size (whole and fragmented), unknown app
// key, Origin allow-list, the connection cap, unknown HTTP paths and
// invalid JSON.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor, watchLateness } = require('./lib/hub');
const { connect, open, firstError, stopAll } = require('./lib/ws');

const MAX = 2048;

// A pusher:ping padded to exactly n bytes of JSON.
function pingOf(n) {
  const base = JSON.stringify({ event: 'pusher:ping', data: { pad: '' } });
  const s = JSON.stringify({ event: 'pusher:ping', data: { pad: 'x'.repeat(n - base.length) } });
  assert.equal(s.length, n);
  return s;
}

test('messages over --max-message close with 1009, whole or fragmented', async (t) => {
  const hub = await startHub(['--loops', '2', '--max-message', '2KiB']);
  const clients = [];
  t.after(() => stopAll(hub, clients));

  // At the limit: answered. Over it by one byte: 1009.
  const ok = await open(hub);
  clients.push(ok);
  ok.send(pingOf(MAX));
  await ok.waitEvent('pusher:pong');
  // The same size in fragments is reassembled and answered too.
  const msg = pingOf(MAX);
  ok.ws.send(msg.slice(0, 700), { fin: false });
  ok.ws.send(msg.slice(700, 1400), { fin: false });
  ok.ws.send(msg.slice(1400), { fin: true });
  await waitFor(() => ok.all('pusher:pong').length === 2, 'the second pong');

  const big = await open(hub);
  clients.push(big);
  big.send(pingOf(MAX + 1));
  await big.waitClose();
  assert.equal(big.closed.code, 1009);
  assert.equal(big.find('pusher:pong'), undefined);

  // Fragments that each fit but add up to more than the limit.
  const frag = await open(hub);
  clients.push(frag);
  const chunk = 'x'.repeat(900);
  frag.ws.send(`{"event":"pusher:ping","data":{"pad":"${chunk}`, { fin: false });
  frag.ws.send(chunk, { fin: false });
  frag.ws.send(chunk, { fin: false });
  frag.ws.send('"}}', { fin: true });
  await frag.waitClose();
  assert.equal(frag.closed.code, 1009);

  // A much bigger one (the hub reads it in 1 KiB pieces).
  const huge = await open(hub);
  clients.push(huge);
  huge.send(pingOf(200 * 1024));
  await huge.waitClose();
  assert.equal(huge.closed.code, 1009);

  assert.equal(ok.closed, null);
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.closed['1009'] === 3 && s;
  }, 'three 1009 closes counted');
  assert.equal(st.totals.sessions, 1);
});

test('an unknown app key gets pusher:error 4001 and close 4001', async (t) => {
  const hub = await startHub(['--loops', '2']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const c = connect(hub, { key: 'no-such-key' });
  clients.push(c);
  await c.waitClose();
  assert.equal(c.closed.code, 4001);
  assert.equal(firstError(c).code, 4001);
  assert.equal(c.find('pusher:connection_established'), undefined);
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.sessions === 0 && s;
  }, 'the session to go');
  assert.equal(st.totals.closed.app, 1);
});

test('a bad Origin is refused with 403 before the upgrade', async (t) => {
  const hub = await startHub(['--loops', '2', '--allowed-origins', 'http://ok.example']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const bad = connect(hub, { origin: 'http://evil.example' });
  const none = connect(hub);
  clients.push(bad, none);
  await waitFor(() => bad.unexpected, 'the refusal');
  assert.equal(bad.unexpected.status, 403);
  await waitFor(() => none.unexpected || none.error, 'the refusal without Origin');
  assert.equal(none.unexpected && none.unexpected.status, 403);
  const good = await open(hub, { origin: 'http://ok.example' });
  clients.push(good);
  assert.ok(good.socketId);
  const st = await hub.stats();
  assert.equal(st.totals.accepted, 1);
  assert.equal(st.per_loop.reduce((a, l) => a + l.rejected_http, 0), 2);
});

test('--max-connections 5 refuses the sixth upgrade with 503', async (t) => {
  const hub = await startHub(['--loops', '2', '--max-connections', '5']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  for (let i = 0; i < 5; i++) clients.push(await open(hub));
  const sixth = connect(hub);
  clients.push(sixth);
  await waitFor(() => sixth.unexpected, 'the refusal');
  assert.equal(sixth.unexpected.status, 503);
  // A slot frees up when one leaves.
  clients[0].close();
  await waitFor(async () => (await hub.stats()).totals.sessions === 4, 'one to leave');
  const again = await open(hub);
  clients.push(again);
  assert.ok(again.socketId);
  assert.equal(clients.slice(1, 5).filter((c) => c.closed).length, 0);
});

test('an unknown HTTP path gets a prompt 404', async (t) => {
  const hub = await startHub(['--loops', '2']);
  t.after(() => stopAll(hub));
  const late = watchLateness(hub);
  t.after(() => late.stop());
  for (const p of ['/no/such/path', '/app', '/statsx', '/apps']) {
    const t0 = Date.now();
    const r = await request('GET', hub.url(p));
    const took = Date.now() - t0;
    assert.equal(r.status, 404, `${p}: ${r.status}`);
    // lws's own timeouts are 5-10 s; a prompt answer is far below them
    // (allowing for how late the hub and this process ran).
    assert.ok(took < 2000 + late.allowanceMs(), `${p} took ${took} ms (${late.describe()})`);
  }
  // A WebSocket upgrade on a path that is not /app/... is a 404 too.
  const c = connect(hub, { url: `ws://${hub.host}:${hub.port}/nope` });
  await waitFor(() => c.unexpected, 'the refusal');
  assert.equal(c.unexpected.status, 404);
});

test('invalid JSON gets pusher:error and the connection stays open', async (t) => {
  const hub = await startHub(['--loops', '2']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const c = await open(hub);
  clients.push(c);
  for (const bad of ['{not json', '[]', '"str"', '{"event":42}', '{"data":{}}']) {
    const before = c.all('pusher:error').length;
    c.send(bad);
    await waitFor(() => c.all('pusher:error').length > before, `an error for ${bad}`);
  }
  c.send({ event: 'pusher:ping', data: {} });
  await c.waitEvent('pusher:pong');
  assert.equal(c.closed, null);
  const st = await hub.stats();
  assert.ok(st.per_loop.reduce((a, l) => a + l.bad_messages, 0) >= 5);
  assert.equal(st.totals.sessions, 1);
});
