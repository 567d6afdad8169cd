'use strict';
// The hub-wide queue budget (--max-queued-total) and the per-connection
// subscription cap (--max-subscriptions).
//
// Budget: twenty readers stop reading a busy channel; ten of them (far)
// also hold a second channel, so they fall behind ten times as fast.
// The hub's queued total never passes the budget, the far readers are
// closed first (4100, queue_budget), RSS stays under the budget plus a
// constant, and a reader that keeps up stays.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PusherServer = require('pusher');
const { startHub, waitFor } = require('./lib/hub');
const { open, subscribe, rssKiB, stopAll, isAsan } = require('./lib/ws');
// The queues fill with plain bytes: compressed (node ws offers
// permessage-deflate), these repetitive payloads shrink a hundredfold.
const PLAIN = { perMessageDeflate: false };

const BUDGET = 2 * 1024 * 1024;
const EVENT_BYTES = 20 * 1000; // one fan-out (21 x 20 kB) is a fifth of it
const MAX_FLOOD_BYTES = 100 * 1024 * 1024;
const RSS_CONSTANT_KIB = 32 * 1024;
const N = 10; // far and near readers each

test('the queue budget holds; the furthest behind are closed first', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-qb-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'hub.json');
  fs.writeFileSync(cfg, JSON.stringify({ apps: [{
    id: 'app-id', key: 'app-key', secret: 'app-secret', max_event_bytes: 300000,
  }] }));
  // No write deadline and a long ping interval: only the budget may act.
  const hub = await startHub(['--loops', '2', '--config', cfg,
    '--max-queued-total', '2MiB', '--max-queue', '1MiB', '--write-timeout', '0',
    '--ping-interval', '120s']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const far = [];
  const near = [];
  for (let i = 0; i < N; i++) {
    const f = await open(hub, PLAIN);
    await subscribe(f, 'busy');
    await subscribe(f, 'extra');
    far.push(f);
    const n = await open(hub, PLAIN);
    await subscribe(n, 'busy');
    near.push(n);
  }
  const healthy = await open(hub, PLAIN);
  await subscribe(healthy, 'busy');
  clients.push(...far, ...near, healthy);
  let healthyGot = 0;
  healthy.ws.on('message', (d) => { if (String(d).includes('"blob"')) healthyGot++; });
  for (const c of [...far, ...near]) c.ws._socket.pause();
  const farIds = new Set(far.map((c) => c.socketId));
  const nearIds = new Set(near.map((c) => c.socketId));

  const st0 = await hub.stats();
  assert.equal(st0.config.max_queued_total, BUDGET);
  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  const data = { blob: 'x'.repeat(EVENT_BYTES) };
  // A round is one batch: 1 event on busy, 9 on extra (far only). The
  // healthy reader's queue holds at most one event (20 kB), well under an
  // even share of a loop's budget however the kernel spreads the sessions.
  const batch = [];
  for (let i = 0; i < 10; i++) batch.push({ channel: i < 1 ? 'busy' : 'extra', name: 'blob', data });
  const rss0 = rssKiB(hub.pid);
  let rssMax = rss0;
  let queuedMax = 0;
  let rounds = 0;
  let st = st0;
  // Every 4100 close in order (the log line at the start of each close):
  // queue_budget, or max_queue when one reader got that far alone first.
  const closes4100 = () => [...hub.stderr.matchAll(/socket (\S+): closing 4100 \(([^)]*)\)/g)]
    .map((m) => ({ id: m[1], why: m[2] }));
  while (closes4100().filter((c) => farIds.has(c.id)).length < N) {
    assert.ok(rounds * 10 * EVENT_BYTES < MAX_FLOOD_BYTES, `no budget closes after ${rounds} rounds: ${JSON.stringify(st.totals)} ${hub.stderr.slice(0, 3000)}`);
    const r = await server.triggerBatch(batch);
    assert.equal(r.status, 200);
    rounds++;
    // The healthy reader keeps up by construction: the next round waits
    // for it to have this one.
    await waitFor(() => healthyGot >= rounds, 'the healthy reader to keep up', 30000, 5);
    st = await hub.stats();
    queuedMax = Math.max(queuedMax, st.totals.queued_bytes);
    rssMax = Math.max(rssMax, rssKiB(hub.pid));
    assert.ok(st.totals.queued_bytes <= BUDGET, `queued ${st.totals.queued_bytes} > budget`);
  }
  const closes = closes4100();
  // The first to go were the furthest behind.
  const first = closes.slice(0, 5);
  assert.ok(first.every((c) => farIds.has(c.id)), `first closes ${JSON.stringify(first)} not all far`);
  const nearClosed = closes.filter((c) => nearIds.has(c.id)).length;
  const byBudget = closes.filter((c) => /queue budget/.test(c.why)).length;
  assert.ok(byBudget >= 1, 'the budget closed someone');
  // Counted when each session ends (the paused peers never finish the
  // close: after close_timeout).
  st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.closed.queue_budget >= byBudget && s;
  }, 'the queue_budget closes to be counted', 30000, 50);
  assert.ok(st.totals.queued_bytes <= BUDGET);
  assert.equal(healthy.closed, null, 'the reader that keeps up stays');
  assert.equal(st.totals.closed.write_timeout, 0);
  const growth = rssMax - rss0;
  const asan = isAsan(hub.pid);
  if (!asan) {
    assert.ok(growth < BUDGET / 1024 + RSS_CONSTANT_KIB, `RSS grew ${growth} KiB`);
  }
  t.diagnostic(`${rounds} rounds (${(rounds * 10 * EVENT_BYTES / 1048576).toFixed(1)} MiB ` +
    `published); queued max ${queuedMax} of ${BUDGET}; budget closes ${closes.length} ` +
    `(${byBudget} by the budget, near ${nearClosed}, max_queue ${st.totals.closed['4100']}), drops ${st.totals.queue_budget_drops}; RSS ${rss0} -> ${rssMax} KiB ` +
    `(+${growth}${asan ? ', ASan: not bounded' : ''})`);
});

test('a connection past --max-subscriptions is refused and stays healthy', async (t) => {
  // 10,000 subscribes from one connection: past --subscribe-rate's burst,
  // a limit of its own (abuse.test.js); off here.
  const hub = await startHub(['--loops', '2', '--subscribe-rate', '0']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const c = await open(hub, PLAIN);
  clients.push(c);
  const TOTAL = 10000;
  // A window of outstanding subscribes: the answers come back in order.
  let sent = 0;
  const answers = () => c.messages.filter((m) => m.event === 'pusher_internal:subscription_succeeded' ||
    m.event === 'pusher:subscription_error').length;
  while (sent < TOTAL) {
    const upto = Math.min(TOTAL, answers() + 200);
    for (; sent < upto; sent++) c.send({ event: 'pusher:subscribe', data: { channel: `ch-${sent}` } });
    await waitFor(() => answers() >= sent - 100, 'subscribe answers', 30000, 5);
  }
  await waitFor(() => answers() >= TOTAL, 'every subscribe answered', 60000, 10);
  const ok = c.all('pusher_internal:subscription_succeeded');
  const refused = c.all('pusher:subscription_error');
  assert.equal(ok.length, 100);
  assert.equal(refused.length, TOTAL - 100);
  assert.deepEqual(ok.map((m) => m.channel), Array.from({ length: 100 }, (_, i) => `ch-${i}`));
  assert.equal(refused[0].channel, 'ch-100');
  assert.equal(refused[0].data.type, 'LimitReached');
  assert.match(refused[0].data.error, /Too many subscriptions.*limit is 100/);
  const st = await hub.stats();
  assert.equal(st.totals.subscriptions_refused, TOTAL - 100);
  assert.equal(st.totals.subscriptions, 100);
  // Still healthy: pusher:ping is answered and a publish arrives.
  c.send({ event: 'pusher:ping', data: {} });
  await c.waitEvent('pusher:pong');
  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  await server.trigger('ch-99', 'hello', { n: 1 });
  await waitFor(() => c.messages.find((m) => m.event === 'hello' && m.channel === 'ch-99'), 'the event');
  assert.equal(c.closed, null);
});
