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

let hub;

before(async () => {
  hub = await startHub(['--loops', '2', '--ws-direct-read', 'on']);
});

after(async () => {
  const exit = await hub.stop();
  assertNoSanitizerReport(hub);
  assert.equal(exit.code, 0, `lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-3000)}`);
});

function sum(stats, key) {
  return stats.per_loop.reduce((n, l) => n + l[key], 0);
}

function pingMsg(text) {
  return Buffer.from(JSON.stringify({ event: 'pusher:ping', data: { text } }));
}

function pongs(c) {
  return c.frames.filter((f) => f.opcode === OP.TEXT && /pusher:pong/.test(f.payload.toString()));
}

// Write buf one small piece at a time, each after the last was flushed, so
// the hub reads the frames in many segments.
async function trickle(c, buf, piece = 1) {
  c.sock.setNoDelay(true);
  for (let i = 0; i < buf.length; i += piece) {
    const ok = c.sock.write(buf.subarray(i, i + piece));
    await new Promise((resolve) => (ok ? setImmediate(resolve) : c.sock.once('drain', resolve)));
  }
}

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
  const c = await rawWs(t, hub).open();
  const frames = [frame(OP.TEXT, pingMsg('z'.repeat(60 * 1024)))];
  for (let i = 0; i < 50; i++) frames.push(frame(OP.TEXT, pingMsg(String(i))));
  c.send(Buffer.concat(frames));
  await c.until(() => pongs(c).length === 51, '51 pusher:pongs');
});

test('a ping inside a fragmented message is answered, the message still arrives', async (t) => {
  const c = await rawWs(t, hub).open();
  const m = pingMsg('fragmented');
  c.send(Buffer.concat([
    frame(OP.TEXT, m.subarray(0, 10), { fin: false }),
    frame(OP.PING, 'hello'),
    frame(OP.CONT, m.subarray(10, 20), { fin: false }),
  ]));
  await c.until(() => c.frames.some((f) => f.opcode === OP.PONG), 'a pong');
  assert.equal(c.frames.find((f) => f.opcode === OP.PONG).payload.toString(), 'hello');
  await trickle(c, frame(OP.CONT, m.subarray(20)), 3);
  await c.until(() => pongs(c).length === 1, 'pusher:pong for the reassembled message');
});

test('a client that sends right after the 101', async (t) => {
  const c = rawWs(t, hub);
  await c.status();
  c.send(frame(OP.TEXT, pingMsg('early')));
  await c.until(() => pongs(c).length === 1, 'pusher:pong');
});

test('bytes sent with the upgrade request are not lost', async (t) => {
  const before = await hub.stats();
  const request = Buffer.concat([Buffer.from(upgradeRequest(hub)),
    frame(OP.TEXT, pingMsg('pipelined')), frame(OP.PING, 'p')]);
  const c = rawWs(t, hub, { request });
  await c.until(() => pongs(c).length === 1, 'pusher:pong for the pipelined message');
  await c.until(() => c.frames.some((f) => f.opcode === OP.PONG), 'the pong');
  // lws held those bytes: the session stays on lws's read path.
  const s = await hub.stats();
  assert.ok(sum(s, 'ws_direct_declined') > sum(before, 'ws_direct_declined'), JSON.stringify(s.per_loop));
  c.send(frame(OP.TEXT, pingMsg('later')));
  await c.until(() => pongs(c).length === 2, 'pusher:pong afterwards');
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
