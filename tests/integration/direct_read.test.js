'use strict';
// The read bypass (--ws-direct-read, server/lws/direct.c): the cases the bypass
// could break that rfc6455.test.js does not reach. Frames split over many
// TCP segments, a big message in one read, several frames in one read, a
// ping inside a fragmented message, a client that sends right after the
// 101, and one that does not wait for the 101 at all (lws then holds its
// bytes and the session stays on lws's read path: nothing may be lost).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const { assertNoSanitizerReport } = require('./lib/ws');
const { frame, OP, upgradeRequest, rawWs } = require('./lib/rawws');
const {
  sum, pingMsg, pongs, trickle, bigAndSmall, pingInFragments, pipelinedStaysWithLws,
} = require('./lib/direct');

let hub;

before(async () => {
  hub = await startHub(['--loops', '2', '--ws-direct-read', 'on']);
});

after(async () => {
  const exit = await hub.stop();
  assertNoSanitizerReport(hub);
  assert.equal(exit.code, 0, `lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-3000)}`);
});

test('sessions are read by the bypass, and give lws\'s receive buffer back', async (t) => {
  const s0 = await hub.stats();
  const before = sum(s0, 'ws_direct_sessions');
  const released = sum(s0, 'ws_direct_rx_released');
  const c = await rawWs(t, hub).open();
  c.send(frame(OP.TEXT, pingMsg('x')));
  await c.until(() => pongs(c).length === 1, 'pusher:pong');
  const s = await hub.stats();
  assert.ok(sum(s, 'ws_direct_sessions') > before, JSON.stringify(s.per_loop));
  assert.ok(sum(s, 'ws_direct_reads') > 0);
  // Its buffer went back at the handover (server/lws/rxpool.h), and the
  // session still answers: lws never reads it again.
  assert.ok(sum(s, 'ws_direct_rx_released') > released, JSON.stringify(s.per_loop));
  c.send(frame(OP.TEXT, pingMsg('x2')));
  await c.until(() => pongs(c).length === 2, 'a second pusher:pong');
});

test('a frame split over many segments, byte by byte', async (t) => {
  const c = await rawWs(t, hub).open();
  const msg = frame(OP.TEXT, pingMsg('y'.repeat(300)));
  await trickle(c, Buffer.concat([msg, msg]));
  await c.until(() => pongs(c).length === 2, 'two pusher:pongs');
});

test('a 60 KiB message and many small frames in one write', async (t) => {
  await bigAndSmall(await rawWs(t, hub).open());
});

test('a ping inside a fragmented message is answered, the message still arrives', async (t) => {
  await pingInFragments(await rawWs(t, hub).open());
});

test('a client that sends right after the 101', async (t) => {
  const c = rawWs(t, hub);
  await c.status();
  c.send(frame(OP.TEXT, pingMsg('early')));
  await c.until(() => pongs(c).length === 1, 'pusher:pong');
});

test('bytes sent with the upgrade request are not lost', async (t) => {
  await pipelinedStaysWithLws(hub, (request) => rawWs(t, hub, { request }), upgradeRequest);
});

test('EOF mid-frame closes the session once', async (t) => {
  // The earlier tests' sessions close in their cleanup, maybe still on the
  // way: count from when none is left, so only this close is counted.
  await waitFor(async () => (await hub.stats()).totals.sessions === 0, 'earlier sessions to close');
  const before = await hub.stats();
  const c = await rawWs(t, hub).open();
  c.send(frame(OP.TEXT, pingMsg('cut')).subarray(0, 20));
  c.sock.end();
  await c.end();
  const want = before.totals.closed.peer + 1;
  let now = 0;
  await waitFor(async () => (now = (await hub.stats()).totals.closed.peer) >= want, 'the peer close counted');
  assert.equal(now, want);
});
