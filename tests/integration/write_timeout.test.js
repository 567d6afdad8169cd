'use strict';
// Write deadline: a reader that stops reading a low-rate channel never
// reaches --max-queue, so only --write-timeout can end it. Once the kernel
// buffers are full and the hub's own queue for it holds bytes the socket
// takes none of, it is closed with 4100 and counted as write_timeout,
// while a subscriber of the same channel that keeps reading stays.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PusherServer = require('pusher');
const { startHub, waitFor, request } = require('./lib/hub');
const { open, subscribe, stopAll } = require('./lib/ws');
// The queues fill with plain bytes: compressed (node ws offers
// permessage-deflate), these repetitive payloads shrink a hundredfold.
const PLAIN = { perMessageDeflate: false };

const EVENT_BYTES = 200 * 1000;
const MAX_FLOOD_BYTES = 256 * 1024 * 1024; // far beyond any kernel buffer

test('a paused reader is closed 4100 (write_timeout); a reading one stays', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-wt-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'hub.json');
  fs.writeFileSync(cfg, JSON.stringify({ apps: [{
    id: 'app-id', key: 'app-key', secret: 'app-secret', max_event_bytes: 300000,
  }] }));
  // max_queue far above what the test queues: only the write deadline may
  // act; a long ping interval keeps the heartbeat out of it.
  const hub = await startHub(['--loops', '2', '--config', cfg, '--write-timeout', '3s',
    '--max-queue', '256MiB', '--ping-interval', '120s']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const slow = await open(hub, PLAIN);
  const healthy = await open(hub, PLAIN);
  clients.push(slow, healthy);
  await subscribe(slow, 'ticks');
  await subscribe(healthy, 'ticks');
  let healthyGot = 0;
  healthy.ws.on('message', (d) => { if (String(d).includes('"tick"')) healthyGot++; });
  slow.ws._socket.pause();

  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  const payload = { blob: 'x'.repeat(EVENT_BYTES) };
  let published = 0;
  // One event at a time, the next only once the healthy reader has it:
  // its queue is empty between publishes by construction, so whatever the
  // hub still holds is the paused reader's. lws keeps at most one frame
  // the socket would not take (the hub writes the next only once that is
  // out), and only the newest frame can still be on its way: two frames
  // queued means one sits behind a full socket for good.
  let st;
  for (;;) {
    const r = await server.trigger('ticks', 'tick', payload);
    assert.equal(r.status, 200);
    published++;
    await waitFor(() => healthyGot >= published, 'the healthy reader to get each tick', 30000, 5);
    st = await hub.stats();
    if (st.totals.queued_bytes >= 2 * EVENT_BYTES) break;
    assert.ok(published * EVENT_BYTES < MAX_FLOOD_BYTES, 'the hub never queued anything');
  }
  const queuedAt = Date.now();
  // Publishing stops: nothing more arrives, the queue just sits there.
  st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.closed.write_timeout >= 1 && s;
  }, 'the write deadline to close the paused reader', 30000, 50).catch(async (e) => {
    const s = await hub.stats();
    throw new Error(`${e.message}: ${JSON.stringify(s.per_loop.map((l) => [l.queued_bytes, l.wheel.pending, l.sessions, l.closed]))}`);
  });
  const took = Date.now() - queuedAt;
  assert.equal(st.totals.closed.write_timeout, 1);
  assert.equal(st.totals.closed['4100'], 0, 'not a queue-full close');
  assert.equal(st.totals.closed['4202'], 0, 'not idle');
  assert.equal(st.totals.closed.queue_budget, 0);
  assert.equal(healthy.closed, null, 'the reading subscriber stays');
  assert.equal(st.config.write_timeout_ms, 3000);

  // The healthy reader still gets what is published.
  await server.trigger('ticks', 'tick', { blob: 'after' });
  published++;
  await waitFor(() => healthyGot >= published, 'the healthy reader to get the last tick', 30000, 5);
  assert.equal(healthy.closed, null);

  const m = await request('GET', hub.url('/metrics'));
  assert.match(m.body, /lubdub_sessions_closed_total\{loop="\d",reason="write_timeout"\} 1/);

  // Resumed, the paused peer sees its connection end: 4100 if the close
  // frame got out before the close timeout, else a plain drop.
  slow.ws._socket.resume();
  await slow.waitClose(15000);
  assert.ok([4100, 1006].includes(slow.closed.code), `close ${slow.closed.code}`);
  if (slow.closed.code === 4100) {
    const err = slow.find('pusher:error');
    assert.ok(err && err.data.code === 4100 && /Write timeout/.test(err.data.message));
  }
  t.diagnostic(`hub queued bytes after ${published} ticks of ${EVENT_BYTES} B; ` +
    `closed ${took} ms later (write timeout 3 s); slow peer close ${slow.closed.code}`);
});
