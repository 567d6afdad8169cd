'use strict';
// lib/direct.js: what the read bypass's tests (direct_read.test.js,
// tls_direct_read.test.js) share: counters summed over loops, the
// pusher:ping they send and the pusher:pong answers they count, and a
// writer that sends a buffer in small pieces, each after the last was
// flushed (a segment each on plain TCP, a record each on TLS).
const assert = require('node:assert/strict');
const { frame, OP } = require('./rawws');

// stats.per_loop[...][key], summed over the loops.
function sum(stats, key) {
  return stats.per_loop.reduce((n, l) => n + l[key], 0);
}

function pingMsg(text) {
  return Buffer.from(JSON.stringify({ event: 'pusher:ping', data: { text } }));
}

// The pusher:pong frames a RawWs got so far.
function pongs(c) {
  return c.frames.filter((f) => f.opcode === OP.TEXT && /pusher:pong/.test(f.payload.toString()));
}

async function trickle(c, buf, piece = 1) {
  c.sock.setNoDelay(true);
  for (let i = 0; i < buf.length; i += piece) {
    const ok = c.sock.write(buf.subarray(i, i + piece));
    await new Promise((resolve) => (ok ? setImmediate(resolve) : c.sock.once('drain', resolve)));
  }
}

// A 60 KiB message and 50 small ones in one write: 51 pusher:pongs.
async function bigAndSmall(c) {
  const frames = [frame(OP.TEXT, pingMsg('z'.repeat(60 * 1024)))];
  for (let i = 0; i < 50; i++) frames.push(frame(OP.TEXT, pingMsg(String(i))));
  c.send(Buffer.concat(frames));
  await c.until(() => pongs(c).length === 51, '51 pusher:pongs');
}

// A ping between the fragments of a message: answered at once, and the
// message, finished later in pieces, still arrives.
async function pingInFragments(c) {
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
}

// A message and a ping sent in the same write as the upgrade request
// (open(request) opens the socket): lws holds them at ESTABLISHED, so the
// session stays on lws's read path (ws_direct_declined), and nothing is
// lost, then or after.
async function pipelinedStaysWithLws(hub, open, upgradeRequest) {
  const before = await hub.stats();
  const request = Buffer.concat([Buffer.from(upgradeRequest(hub)),
    frame(OP.TEXT, pingMsg('pipelined')), frame(OP.PING, 'p')]);
  const c = open(request);
  await c.until(() => pongs(c).length === 1, 'pusher:pong for the pipelined message');
  await c.until(() => c.frames.some((f) => f.opcode === OP.PONG), 'the pong');
  const s = await hub.stats();
  assert.ok(sum(s, 'ws_direct_declined') > sum(before, 'ws_direct_declined'), JSON.stringify(s.per_loop));
  c.send(frame(OP.TEXT, pingMsg('later')));
  await c.until(() => pongs(c).length === 2, 'pusher:pong afterwards');
}

module.exports = { sum, pingMsg, pongs, trickle, bigAndSmall, pingInFragments, pipelinedStaysWithLws };
