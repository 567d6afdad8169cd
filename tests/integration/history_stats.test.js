'use strict';
// What recovery's history holds, as operators see it (docs/OPERATIONS.md,
// "Recovery"): /stats `history` (hub-wide) and `apps.<id>.history_*`, and
// the /metrics series lubdub_history_*; the channel's `size` and the hub's
// --history-max-bytes evict the oldest, counted in `evicted`; the ttl
// expires them, counted in `expired`.

const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor } = require('./lib/hub');
const { APP, serverSdk } = require('./lib/clients');

// The record a channel's history costs besides its events
// (HUB_HISTORY_RECORD_OVERHEAD, hub/channel/history.h; docs/RELIABILITY.md).
const RECORD_OVERHEAD = 192;

function historyApp(history) {
  return { id: APP.id, key: APP.key, secret: APP.secret, history };
}

// name{labels} value -> the value of the sample whose labels include these.
function sample(text, name, labels = {}) {
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] || '').matchAll(/(\w+)="([^"]*)"/g)]
      .map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

async function metrics(hub) {
  const res = await request('GET', hub.url('/metrics'));
  assert.equal(res.status, 200);
  return res.body;
}

test('a channel keeps its last size events: /stats and /metrics count what it holds and what it evicted', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [historyApp({ ttl: '120s', size: 3 })] });
  const sdk = serverSdk(hub);
  const before = await hub.stats();
  assert.deepEqual(before.history,
    { channels: 0, events: 0, bytes: 0, max_bytes: 64 * 1024 * 1024, evicted: 0, expired: 0 });
  assert.equal(before.apps[APP.id].history_events, 0);
  assert.equal(before.apps[APP.id].history_bytes, 0);

  for (let i = 1; i <= 5; i++) {
    const r = await sdk.trigger('news', 'seq', { i, pad: 'x'.repeat(100) });
    assert.equal(r.status, 200);
  }
  // The REST answer goes after the event is kept: /stats has it already.
  const st = await hub.stats();
  const h = st.history;
  assert.equal(h.channels, 1, JSON.stringify(h));
  assert.equal(h.events, 3, JSON.stringify(h));
  assert.equal(h.evicted, 2, JSON.stringify(h));
  assert.equal(h.expired, 0, JSON.stringify(h));
  assert.equal(h.max_bytes, 64 * 1024 * 1024);
  assert.ok(h.bytes > 0);
  const app = st.apps[APP.id];
  assert.equal(app.history_events, 3, JSON.stringify(app));
  // The hub's figure adds the channel's record to the app's events.
  assert.equal(h.bytes, app.history_bytes + RECORD_OVERHEAD + 'news'.length);
  // Three events of one size: each charged twice its frame plus 352 B.
  assert.equal(app.history_bytes % 3, 0);
  assert.ok(app.history_bytes / 3 > 2 * 100 + 352, `${app.history_bytes}`);
  assert.equal((app.history_bytes / 3 - 352) % 2, 0);

  const m = await metrics(hub);
  assert.equal(sample(m, 'lubdub_history_channels'), 1);
  assert.equal(sample(m, 'lubdub_history_events', { app: APP.id }), 3);
  assert.equal(sample(m, 'lubdub_history_bytes', { app: APP.id }), app.history_bytes);
  assert.equal(sample(m, 'lubdub_history_evicted_total'), 2);
  assert.equal(sample(m, 'lubdub_history_expired_total'), 0);
  assert.equal(sample(m, 'lubdub_history_max_bytes'), 64 * 1024 * 1024);
  assert.match(m, /^# TYPE lubdub_history_evicted_total counter$/m);
  assert.match(m, /^# TYPE lubdub_history_events gauge$/m);
});

test('--history-max-bytes bounds what history holds, over channels: the oldest are evicted', async (t) => {
  const hub = await startHub(['--history-max-bytes', '64KiB'],
    { t, loops: 2, apps: [historyApp({ ttl: '120s', size: 1000 })] });
  const sdk = serverSdk(hub);
  const data = 'x'.repeat(8000);
  let evicted = 0;
  let full = false;
  for (let i = 1; i <= 12; i++) {
    const r = await sdk.trigger(i % 2 ? 'news-a' : 'news-b', 'big', { i, data });
    assert.equal(r.status, 200);
    const h = (await hub.stats()).history;
    assert.ok(h.bytes <= 64 * 1024, `after ${i}: ${JSON.stringify(h)}`);
    assert.equal(h.max_bytes, 64 * 1024);
    assert.equal(h.events + h.evicted, i, `after ${i}: ${JSON.stringify(h)}`);
    // Each event is charged over 16 KB (twice its 8 KB frame): at most
    // four fit in 64 KiB, so from the fifth on every one evicts.
    assert.ok(h.events <= 4, `after ${i}: ${JSON.stringify(h)}`);
    if (full) assert.ok(h.evicted > evicted, `after ${i}: evicted grows: ${JSON.stringify(h)}`);
    full = full || h.evicted > 0;
    evicted = h.evicted;
  }
  assert.ok(evicted >= 8, `${evicted} evicted of 12`);
  const st = await hub.stats();
  assert.ok(st.apps[APP.id].history_bytes <= 64 * 1024);
  const m = await metrics(hub);
  assert.equal(sample(m, 'lubdub_history_max_bytes'), 64 * 1024);
  assert.equal(sample(m, 'lubdub_history_evicted_total'), st.history.evicted);
  assert.equal(sample(m, 'lubdub_history_events', { app: APP.id }), st.history.events);
  assert.ok(sample(m, 'lubdub_history_bytes', { app: APP.id }) <= 64 * 1024);
});

test('events expire at the ttl: expired grows and the channel goes', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [historyApp({ ttl: '1s', size: 10 })] });
  const sdk = serverSdk(hub);
  for (let i = 1; i <= 2; i++) {
    assert.equal((await sdk.trigger('news', 'seq', { i })).status, 200);
  }
  assert.equal((await hub.stats()).history.events, 2);
  // Reclaimed on loop 0's heartbeat once the ttl has passed.
  await waitFor(async () => (await hub.stats()).history.expired === 2, 'both expired');
  const h = (await hub.stats()).history;
  assert.deepEqual({ channels: h.channels, events: h.events, bytes: h.bytes, evicted: h.evicted },
    { channels: 0, events: 0, bytes: 0, evicted: 0 });
  const m = await metrics(hub);
  assert.equal(sample(m, 'lubdub_history_expired_total'), 2);
  assert.equal(sample(m, 'lubdub_history_channels'), 0);
  assert.equal(sample(m, 'lubdub_history_events', { app: APP.id }), 0);
});
