'use strict';
// The corked write path with real clients: bursts of small frames and
// frames of 64 KiB and more (8-byte length header) concatenated into one
// write must reach node `ws` and pusher-js intact, on both loops.
const test = require('node:test');
const assert = require('node:assert/strict');
const WebSocket = require('ws');
const Pusher = require('pusher-js');
const PusherServer = require('pusher');
const { waitFor } = require('./lib/hub');
const { loopOf } = require('./lib/clients');
const { payload, startBigEventHub, assertBatchesCorked } = require('./lib/corked');

test('bursts and >= 64 KiB frames arrive intact through the corked path', async (t) => {
  const hub = await startBigEventHub(t);

  // Raw ws clients from several source addresses, at least eight, and more
  // until both loops hold some: SO_REUSEPORT places a connection by the
  // hash of its addresses, so a fixed few can all land on one loop.
  const raws = [];
  t.after(() => raws.forEach((c) => c.ws.terminate()));
  const openRaw = (i) => {
    const ws = new WebSocket(hub.wsUrl(), { localAddress: `127.0.0.${2 + (i % 4)}` });
    const c = { ws, got: [], batch: 0, subscribed: false, socketId: null };
    raws.push(c);
    ws.on('message', (data) => {
      const m = JSON.parse(String(data));
      if (m.event === 'pusher:connection_established') {
        c.socketId = JSON.parse(m.data).socket_id;
        ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'cork' } }));
      } else if (m.event === 'pusher_internal:subscription_succeeded') {
        c.subscribed = true;
      } else if (m.event === 'blob') {
        c.got.push(JSON.parse(m.data).p);
      } else if (m.event === 'batch') {
        c.batch++;
      }
    });
    return c;
  };
  const loops = () => new Set(raws.map((c) => loopOf(c.socketId))).size;
  for (let i = 0; raws.length < 8 || loops() < 2; i++) {
    assert.ok(i < 64, 'raw clients on both loops');
    const c = openRaw(i);
    await waitFor(() => c.subscribed, `raw client ${i} subscribed`);
  }
  const pj = new Pusher('app-key', { wsHost: hub.host, wsPort: hub.port, forceTLS: false,
    enabledTransports: ['ws'], cluster: 'local' });
  t.after(() => pj.disconnect());
  const pjGot = [];
  const ch = pj.subscribe('cork');
  ch.bind('blob', (d) => pjGot.push(d.p));
  let pjBatch = 0;
  ch.bind('batch', () => { pjBatch++; });
  await waitFor(() => ch.subscribed && raws.every((c) => c.subscribed), 'all subscriptions');
  const stats = await hub.stats();
  assert.ok(stats.per_loop.every((l) => l.sessions > 0), 'both loops hold subscribers');

  const server = new PusherServer({ appId: 'app-id', key: 'app-key', secret: 'app-secret',
    host: hub.host, port: hub.port, useTLS: false });
  const sizes = [];
  for (let i = 0; i < 40; i++) sizes.push(32);
  sizes.push(65536, 70000, 200000, 125, 126, 65535);
  for (let i = 0; i < 40; i++) sizes.push(32);
  const sent = sizes.map((n, i) => payload(`m${i}`, n));
  // Fired together so many land between two writes and leave corked.
  const res = await Promise.all(sent.map((p) => server.trigger('cork', 'blob', { p })));
  assert.ok(res.every((r) => r.status === 200));

  const want = [...sent].sort();
  for (const got of [pjGot, ...raws.map((c) => c.got)]) {
    await waitFor(() => got.length >= sent.length, `${sent.length} events`, 20000);
    assert.equal(got.length, sent.length);
    assert.deepEqual([...got].sort(), want);
  }
  const { frames, writes } = await assertBatchesCorked(hub, server, 'cork',
    () => pjBatch + raws.reduce((a, c) => a + c.batch, 0), raws.length + 1);
  t.diagnostic(`batched phase: ${frames} frames in ${writes} writes`);
});
