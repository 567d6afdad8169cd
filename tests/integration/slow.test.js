'use strict';
// Slow consumer: a subscriber that stops reading while a publisher floods
// its channel is closed with 4100 once its send queue passes --max-queue,
// the hub's memory stays bounded, and a subscriber that keeps reading is
// not affected.
//
// The reading subscriber is healthy by construction, on any machine: the
// publishers keep at most WINDOW events ahead of what it has received, so
// its queue in the hub never holds more than WINDOW x 8 KB (far below
// --max-queue) however slowly this process, the hub or the machine runs.
// The paused subscriber falls behind without bound and must be closed.
const test = require('node:test');
const assert = require('node:assert/strict');
const PusherServer = require('pusher');
const { startHub, waitFor } = require('./lib/hub');
const { open, subscribe, rssKiB, stopAll, isAsan } = require('./lib/ws');
// The queues fill with plain bytes: compressed (node ws offers
// permessage-deflate), these repetitive payloads shrink a hundredfold.
const PLAIN = { perMessageDeflate: false };

const MAX_FLOOD_BYTES = 256 * 1024 * 1024; // give up well after any buffer
const RSS_GROWTH_LIMIT_KIB = 64 * 1024;
const WINDOW = 8; // publishes ahead of the healthy subscriber
const CREDIT_WAIT_MS = 60000; // a healthy subscriber that gets nothing this long is a failure

test('a reader that stops reading is closed with 4100; RSS stays bounded', async (t) => {
  const hub = await startHub(['--loops', '2', '--max-queue', '256KiB']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const slow = await open(hub, PLAIN);
  const healthy = await open(hub, PLAIN);
  clients.push(slow, healthy);
  await subscribe(slow, 'flood');
  await subscribe(healthy, 'flood');
  let healthyGot = 0;
  let waiting = [];
  healthy.ws.on('message', () => {
    healthyGot++;
    const w = waiting;
    waiting = [];
    for (const wake of w) wake();
  });
  // Stop reading: the kernel buffers fill, then the hub's queue.
  slow.ws._socket.pause();

  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  const payload = { blob: 'x'.repeat(8000) };
  const rss0 = rssKiB(hub.pid);
  let rssMax = rss0;
  let published = 0;
  let sent = 0;
  let bytes = 0;
  let slowClosed = false;
  const t0 = Date.now();
  // Resolves once the healthy subscriber has received something more.
  const nextReceipt = () => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(
      `the reading subscriber got nothing for ${CREDIT_WAIT_MS} ms ` +
      `(${healthyGot} of ${sent} sent)`)), CREDIT_WAIT_MS);
    waiting.push(() => { clearTimeout(timer); resolve(); });
  });
  const publisher = async () => {
    while (!slowClosed && bytes < MAX_FLOOD_BYTES) {
      if (sent - healthyGot >= WINDOW) {
        await nextReceipt();
        continue;
      }
      sent++;
      const r = await server.trigger('flood', 'blob', payload);
      assert.equal(r.status, 200);
      published++;
      bytes += 8000;
    }
  };
  const watcher = async () => {
    while (!slowClosed && bytes < MAX_FLOOD_BYTES) {
      rssMax = Math.max(rssMax, rssKiB(hub.pid));
      const st = await hub.stats();
      if (st.totals.closed['4100'] > 0) slowClosed = true;
    }
  };
  // The publishers stop at the first 4100.
  await Promise.all([publisher(), publisher(), publisher(), publisher(), watcher()]);
  const took = Date.now() - t0;
  rssMax = Math.max(rssMax, rssKiB(hub.pid));
  assert.ok(slowClosed, `no 4100 after ${published} publishes (${bytes} bytes)`);
  const st = await hub.stats();
  assert.equal(st.totals.closed['4100'], 1);
  // The session is gone before we resume the peer: lws either gave up on
  // the write or the close timeout ended it (the peer cannot answer the
  // close frame while paused); which one depends on the socket buffers.
  assert.equal(st.totals.sessions, 1);
  const closeTimeouts = st.per_loop.reduce((a, l) => a + l.close_timeouts, 0);
  assert.ok(closeTimeouts <= 1);
  assert.equal(healthy.closed, null, 'the reading subscriber stays');
  await waitFor(() => healthyGot >= published, 'the healthy subscriber to catch up', 30000);

  // The paused peer, once it reads again, sees its connection end.
  slow.ws._socket.resume();
  await slow.waitClose(15000);
  const blobs = slow.all('blob').length;
  // 4100 with its pusher:error if the close frame got out before the
  // close timeout; a plain drop (1006) if the hub had to kill it.
  assert.ok([4100, 1006].includes(slow.closed.code), `close ${slow.closed.code}`);
  if (slow.closed.code === 4100) {
    const err = slow.find('pusher:error');
    assert.ok(err && err.data.code === 4100, 'pusher:error 4100 before the close');
  }
  const growth = rssMax - rss0;
  // Under ASan freed memory sits in its quarantine: report, don't bound.
  const asan = isAsan(hub.pid);
  if (!asan) assert.ok(growth < RSS_GROWTH_LIMIT_KIB, `RSS grew ${growth} KiB`);
  t.diagnostic(`4100 after ${published} publishes (${(bytes / 1048576).toFixed(1)} MiB, ` +
    `${took} ms, close timeouts ${closeTimeouts}); slow peer got ${blobs} then ` +
    `close ${slow.closed.code}; ` +
    `hub RSS ${rss0} -> max ${rssMax} KiB (+${growth} KiB${asan ? ', ASan: not bounded' : ''})`);
});
