'use strict';
// Webhooks (docs/WEBHOOKS.md): node receivers started here check every
// request with the pusher SDK's validator; events, fields, filters,
// batching, the vacate delay, retries and dedup by id, kill -9 and
// restart, dead letters and replay, https with a CA file, and receivers
// that misbehave. Waits are on conditions; bounds are generous.
const test = require('node:test');
const assert = require('node:assert');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, waitFor, BINARY } = require('./lib/hub');
const { rawClient, configFile } = require('./lib/clients');
const { startReceiver } = require('./lib/receiver');
const { startRedis } = require('./lib/redis');

const APP = { id: 'wh-app', key: 'wh-key', secret: 'wh-secret' };
const ALL = ['channel_occupied', 'channel_vacated', 'member_added',
  'member_removed', 'client_event', 'cache_miss'];

function stateDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-state-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// A hub with apps [{...APP, webhooks, ...extra}], stopped (cleanly) at the end.
const hubWith = (t, webhooks, { args = [], app = {}, dir, clean = true } = {}) =>
  startHub([...(dir ? ['--state-dir', dir] : []), ...args], {
    t, loops: 2, clean, apps: [{ ...APP, client_events: true, webhooks, ...app }],
  });

const sub = (c, ch, opts) => c.subscribed(ch, { secret: APP.secret, key: APP.key, ...opts });

// Absence is checked with a marker, never a sleep: a test that must see
// that nothing more came causes an event on MARK, waits for it, and looks
// only at what a webhook delivered before it (beforeMarker).
const MARK = 'presence-marker-b';
const beforeMarker = (events) => {
  const i = events.findIndex((e) => e.channel === MARK);
  assert.ok(i >= 0, 'the marker arrived');
  return events.slice(0, i);
};

const strip = (e) => { const { _path, _mode, id, ...rest } = e; return rest; };

test('every event type with exactly its fields, signed for the pusher SDK', async (t) => {
  const rx = await startReceiver(t, APP);
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ALL }],
    { args: ['--webhook-delay', '300ms'] });
  const a = await rawClient(t, hub, APP.key);
  const b = await rawClient(t, hub, APP.key);
  await sub(a, 'presence-room', { channelData: { user_id: 'u1', user_info: { n: 1 } } });
  await sub(b, 'presence-room', { channelData: { user_id: 'u2' } });
  a.send({ event: 'client-hello', channel: 'presence-room', data: { x: 1 } });
  await sub(a, 'private-p');
  a.send({ event: 'client-str', channel: 'private-p', data: 'plain' });
  await rx.waitEvents((e) => e.name === 'client_event', 2, 'two client events');
  b.close();
  await rx.waitEvents((e) => e.name === 'member_removed', 1, 'member_removed');
  a.close();
  await rx.waitEvents((e) => e.name === 'channel_vacated', 2, 'both channels vacated');
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
  for (const r of rx.requests) {
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.headers['x-pusher-key'], APP.key);
    assert.match(r.headers['x-pusher-signature'], /^[0-9a-f]{64}$/);
    assert.ok(r.headers['idempotency-key']);
    assert.equal(r.headers['x-lubdub-idempotency-key'], r.headers['idempotency-key']);
    assert.equal(typeof r.body.time_ms, 'number');
    assert.ok(Math.abs(r.body.time_ms - Date.now()) < 600000);
  }
  const ev = rx.delivered();
  for (const e of ev) assert.match(e.id, /^[0-9a-f]{16}-\d+$/);
  assert.equal(new Set(ev.map((e) => e.id)).size, ev.length, 'ids are unique');
  const room = ev.filter((e) => e.channel === 'presence-room').map(strip);
  assert.deepStrictEqual(room, [
    { name: 'channel_occupied', channel: 'presence-room' },
    { name: 'member_added', channel: 'presence-room', user_id: 'u1' },
    { name: 'member_added', channel: 'presence-room', user_id: 'u2' },
    { name: 'client_event', channel: 'presence-room', event: 'client-hello',
      data: '{"x":1}', socket_id: a.socketId, user_id: 'u1' },
    { name: 'member_removed', channel: 'presence-room', user_id: 'u2' },
    { name: 'member_removed', channel: 'presence-room', user_id: 'u1' },
    { name: 'channel_vacated', channel: 'presence-room' },
  ]);
  const priv = ev.filter((e) => e.channel === 'private-p').map(strip);
  assert.deepStrictEqual(priv, [
    { name: 'channel_occupied', channel: 'private-p' },
    { name: 'client_event', channel: 'private-p', event: 'client-str', data: 'plain',
      socket_id: a.socketId },
    { name: 'channel_vacated', channel: 'private-p' },
  ]);
});

test('cache_miss: a subscription to an empty cache channel, one per channel per batch', async (t) => {
  const rx = await startReceiver(t, APP);
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ['cache_miss'] }]);
  const a = await rawClient(t, hub, APP.key);
  const b = await rawClient(t, hub, APP.key);
  // Both misses at once: one event when they share a batch window (a
  // loaded machine may split them; never more than one each).
  await Promise.all([sub(a, 'cache-news'), sub(b, 'cache-news')]);
  await rx.waitEvents(() => true, 1, 'cache_miss');
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[0].queue_depth === 0, 'sent');
  const got = rx.delivered().map(strip);
  assert.ok(got.length >= 1 && got.length <= 2, JSON.stringify(got));
  for (const e of got) assert.deepStrictEqual(e, { name: 'cache_miss', channel: 'cache-news' });
  assert.equal(rx.invalid, 0);
});

test('filters apply per event: each webhook gets only what matches it', async (t) => {
  const rx = await startReceiver(t, APP);
  const hub = await hubWith(t, [
    { url: rx.url('/all'), event_types: ['channel_occupied'] },
    { url: rx.url('/pre'), event_types: ['channel_occupied'],
      filter: { channel_name_starts_with: 'presence-' } },
    { url: rx.url('/suf'), event_types: ['channel_occupied', 'member_added'],
      filter: { channel_name_ends_with: '-b' }, headers: { 'X-Custom': 'yes' } },
  ]);
  const a = await rawClient(t, hub, APP.key);
  for (const ch of ['public-a', 'public-b', 'presence-a', 'presence-b']) {
    await sub(a, ch, ch.startsWith('presence-') ? { channelData: { user_id: 'u' } } : undefined);
  }
  await rx.waitEvents((e) => e._path === '/all', 4, '/all gets 4');
  await rx.waitEvents((e) => e._path === '/pre', 2, '/pre gets 2');
  await rx.waitEvents((e) => e._path === '/suf', 3, '/suf gets 3');
  // Nothing more arrives: a marker channel every webhook matches, joined
  // now, comes after anything the four subscriptions above still caused
  // (each webhook sends in order), so what came before it is all they got.
  await sub(a, MARK, { channelData: { user_id: 'u' } });
  for (const p of ['/all', '/pre', '/suf']) {
    await rx.waitEvents((e) => e._path === p && e.channel === MARK, 1, `the marker on ${p}`);
  }
  const by = (p) => beforeMarker(rx.delivered((e) => e._path === p))
    .map((e) => `${e.name}:${e.channel}`).sort();
  assert.deepStrictEqual(by('/all'), ['channel_occupied:presence-a', 'channel_occupied:presence-b',
    'channel_occupied:public-a', 'channel_occupied:public-b']);
  assert.deepStrictEqual(by('/pre'), ['channel_occupied:presence-a', 'channel_occupied:presence-b']);
  assert.deepStrictEqual(by('/suf'), ['channel_occupied:presence-b', 'channel_occupied:public-b',
    'member_added:presence-b']);
  for (const r of rx.requests.filter((q) => q.path === '/suf')) assert.equal(r.headers['x-custom'], 'yes');
  assert.equal(rx.invalid, 0);
});

test('batching: a burst goes in few POSTs of at most 20 events; off sends one each', async (t) => {
  const rx = await startReceiver(t, APP);
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ['channel_occupied'] }]);
  const a = await rawClient(t, hub, APP.key);
  for (let i = 0; i < 30; i++) a.subscribe(`c-${i}`);
  await rx.waitEvents(() => true, 30, '30 occupied');
  assert.ok(rx.requests.length <= 6, `30 events in ${rx.requests.length} POSTs`);
  for (const r of rx.requests) assert.ok(r.body.events.length <= 20);
  assert.ok(rx.requests.some((r) => r.body.events.length > 1), 'some POST carries several events');

  const rx2 = await startReceiver(t, APP);
  const hub2 = await hubWith(t, [{ url: rx2.url(), event_types: ['channel_occupied'] }],
    { app: { webhook_batching: false } });
  const b = await rawClient(t, hub2, APP.key);
  for (let i = 0; i < 5; i++) b.subscribe(`d-${i}`);
  await rx2.waitEvents(() => true, 5, '5 occupied');
  assert.equal(rx2.requests.length, 5);
  for (const r of rx2.requests) assert.equal(r.body.events.length, 1);
});

test('the 3 s delay: a refresh sends nothing, a real leave sends exactly one', async (t) => {
  const rx = await startReceiver(t, APP);
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ALL }]);
  const a = await rawClient(t, hub, APP.key);
  await sub(a, 'presence-r', { channelData: { user_id: 'ann' } });
  await rx.waitEvents((e) => e.name === 'member_added', 1, 'member_added');
  // The refresh: the only connection goes, a new one joins at once.
  a.close();
  await waitFor(async () => (await hub.stats()).totals.sessions === 0, 'old session gone');
  const a2 = await rawClient(t, hub, APP.key);
  await sub(a2, 'presence-r', { channelData: { user_id: 'ann' } });
  // Wait past the delay, on the hub's own count of cancelled edges.
  await waitFor(async () => {
    const s = (await hub.stats()).webhooks;
    return s.edges_cancelled >= 2 && s.edges_delayed === 0;
  }, 'the reversed edges cancelled', 20000);
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[0].queue_depth === 0, 'queue drained');
  assert.deepStrictEqual(rx.delivered().map((e) => e.name), ['channel_occupied', 'member_added']);
  // A real leave: exactly one member_removed and one channel_vacated.
  const left = Date.now();
  a2.close();
  await rx.waitEvents((e) => e.name === 'channel_vacated', 1, 'vacated', 20000);
  assert.ok(Date.now() - left >= 2900, `sent after the delay (${Date.now() - left} ms)`);
  // Nothing more for presence-r: a marker channel occupied now comes after
  // anything the leave still caused.
  const m = await rawClient(t, hub, APP.key);
  await sub(m, MARK, { channelData: { user_id: 'mark' } });
  await rx.waitEvents((e) => e.channel === MARK, 1, 'the marker');
  assert.deepStrictEqual(beforeMarker(rx.delivered()).map((e) => e.name),
    ['channel_occupied', 'member_added', 'member_removed', 'channel_vacated']);
  assert.equal(rx.invalid, 0);
});

test('SIGTERM: a vacated still in its delay is sent before the hub exits', async (t) => {
  const rx = await startReceiver(t, APP);
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ['channel_occupied', 'channel_vacated'] }]);
  const a = await rawClient(t, hub, APP.key);
  await sub(a, 'bye');
  await rx.waitEvents(() => true, 1, 'occupied');
  a.close();
  await waitFor(async () => (await hub.stats()).webhooks.edges_delayed === 1, 'the vacate waiting');
  const exit = await hub.stop();
  assert.equal(exit.code, 0);
  assert.deepStrictEqual(rx.delivered().map((e) => e.name), ['channel_occupied', 'channel_vacated']);
  assert.equal(rx.invalid, 0);
});

test('a receiver failing for 20 s then recovering gets every event exactly once by id', async (t) => {
  const rx = await startReceiver(t, APP);
  rx.mode = 'status';
  rx.status = 503;
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ['channel_occupied'] }],
    { args: ['--webhook-backoff-max', '2s', '--webhook-delay', '0'] });
  const a = await rawClient(t, hub, APP.key);
  const started = Date.now();
  let n = 0;
  // Events keep coming while the receiver fails.
  while (Date.now() - started < 20000) {
    a.subscribe(`f-${n++}`);
    await new Promise((r) => setTimeout(r, 400));
  }
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[0].retried >= 3, 'retries');
  const st = (await hub.stats()).webhooks.endpoints[0];
  assert.equal(st.up, false);
  assert.equal(st.sent, 0);
  rx.mode = 'ok';
  await rx.waitEvents(() => true, n, `all ${n} events`, 60000);
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[0].queue_depth === 0, 'queue drained', 30000);
  const got = rx.delivered().map((e) => e.channel);
  assert.equal(got.length, n);
  assert.deepStrictEqual(got, Array.from({ length: n }, (_, i) => `f-${i}`), 'in order, once each');
  assert.match(hub.stderr, /failing \(HTTP 503\)/);
  assert.match(hub.stderr, /up again/);
  // One log line per state change, not per failure.
  assert.equal((hub.stderr.match(/: failing \(/g) || []).length, 1);
  assert.equal(rx.invalid, 0);
});

test('kill -9 with undelivered webhooks: delivered after the restart', async (t) => {
  const dir = stateDir(t);
  const rx = await startReceiver(t, APP);
  rx.mode = 'status';
  const hooks = [{ url: rx.url(), event_types: ['channel_occupied'] }];
  const hub = await hubWith(t, hooks, { dir, clean: false, args: ['--webhook-backoff-max', '1s'] });
  const a = await rawClient(t, hub, APP.key);
  for (let i = 0; i < 5; i++) await sub(a, `k-${i}`);
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[0].failed >= 2, 'failures');
  assert.equal(rx.delivered().length, 0);
  await hub.stop('SIGKILL');
  rx.mode = 'ok';
  const hub2 = await hubWith(t, hooks, { dir });
  assert.match(hub2.stderr, /webhooks\.db/);
  await rx.waitEvents(() => true, 5, 'the 5 events after restart', 30000);
  assert.deepStrictEqual(rx.delivered().map((e) => e.channel).sort(),
    ['k-0', 'k-1', 'k-2', 'k-3', 'k-4']);
  await waitFor(async () => (await hub2.stats()).webhooks.endpoints[0].queue_depth === 0, 'drained');
  assert.equal(rx.invalid, 0);
});

test('a receiver that never answers is retried, then dead-lettered; replay delivers it', async (t) => {
  const dir = stateDir(t);
  const rx = await startReceiver(t, APP);
  rx.mode = 'hang';
  const other = await startReceiver(t, APP);
  const hub = await hubWith(t, [
    { url: rx.url(), event_types: ['channel_occupied'] },
    { url: other.url(), event_types: ['channel_occupied'] },
  ], { dir, args: ['--webhook-timeout', '500ms', '--webhook-retry-window', '3s',
    '--webhook-backoff-max', '500ms'] });
  const a = await rawClient(t, hub, APP.key);
  await sub(a, 'dead-1');
  // The hanging endpoint blocks neither the loop nor the other endpoint.
  await other.waitEvents(() => true, 1, 'the healthy endpoint');
  const st = await waitFor(async () => {
    const e = (await hub.stats()).webhooks.endpoints[0];
    return e.dead_lettered === 1 && e;
  }, 'dead letter', 30000);
  assert.ok(st.retried >= 2, `retried ${st.retried} times`);
  assert.ok(rx.requests.length >= 3, `attempts ${rx.requests.length}`);
  assert.equal(st.queue_depth, 0);
  assert.match(hub.stderr, /dead-lettered after \d+ attempts/);
  // The operator lists it, then replays it while the hub runs.
  const list = execFileSync(BINARY, ['--state-dir', dir, '--webhook-dead-letters']).toString()
    .trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(list.length, 1);
  assert.equal(list[0].url, rx.url());
  assert.equal(list[0].app, APP.id);
  assert.equal(JSON.parse(list[0].body).events[0].channel, 'dead-1');
  rx.mode = 'ok';
  const out = execFileSync(BINARY, ['--state-dir', dir, '--webhook-replay', 'all']).toString();
  assert.match(out, /1 dead letters queued/);
  await rx.waitEvents(() => true, 1, 'the replayed batch', 30000);
  assert.equal(rx.delivered()[0].channel, 'dead-1');
  assert.equal(rx.invalid, 0);
});

test('https with a self-signed CA given by --webhook-ca-file; hostile answers stay bounded', async (t) => {
  const dir = stateDir(t);
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key,
    '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
  { stdio: 'ignore' });
  const rx = await startReceiver(t, APP, { tls: { key: fs.readFileSync(key), cert: fs.readFileSync(cert) } });
  const bad = await startReceiver(t, APP);
  bad.mode = 'huge';
  const hub = await hubWith(t, [
    { url: rx.url(), event_types: ['channel_occupied'] },
    { url: bad.url(), event_types: ['channel_occupied'] },
  ], { args: ['--webhook-ca-file', cert, '--webhook-backoff-max', '300ms'] });
  const a = await rawClient(t, hub, APP.key);
  await sub(a, 'tls-1');
  await rx.waitEvents(() => true, 1, 'over https');
  await bad.waitEvents(() => true, 1, 'the huge-body receiver');
  // A 2xx with a huge body counts as delivered; then a reset, a 302, a 400.
  for (const [mode, status] of [['reset'], ['status', 302], ['status', 400]]) {
    bad.mode = mode;
    if (status) bad.status = status;
    const before = (await hub.stats()).webhooks.endpoints[1].failed;
    await sub(a, `tls-${mode}-${status || 0}`);
    await waitFor(async () => (await hub.stats()).webhooks.endpoints[1].failed > before,
      `${mode} ${status || ''} counted as a failure`);
  }
  bad.mode = 'ok';
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[1].queue_depth === 0, 'bad drained', 30000);
  const st = (await hub.stats()).webhooks.endpoints;
  assert.ok(st[0].sent >= 1 && st[0].failed === 0, JSON.stringify(st[0]));
  const metrics = await (await fetch(hub.url('/metrics'))).text();
  assert.match(metrics, /lubdub_webhook_sent_total\{app="wh-app",url="https:/);
  assert.match(metrics, /lubdub_webhook_delivery_latency_seconds_bucket\{/);
  assert.equal(rx.invalid + bad.invalid, 0);
});

test('memory stays bounded: past --webhook-max-pending new batches are dropped, counted, logged once', async (t) => {
  const rx = await startReceiver(t, APP);
  rx.mode = 'status';
  const hub = await hubWith(t, [{ url: rx.url(), event_types: ['channel_occupied'] }],
    { app: { webhook_batching: false },
      args: ['--webhook-max-pending', '64KiB', '--max-subscriptions', '0', '--webhook-backoff-max', '5s'] });
  const a = await rawClient(t, hub, APP.key);
  for (let i = 0; i < 1500; i++) a.subscribe(`m-${i}`);
  const st = await waitFor(async () => {
    const w = (await hub.stats()).webhooks;
    const e = w.endpoints[0];
    return e.queue_depth + e.dropped === 1500 && w;
  }, 'every batch held or dropped', 30000);
  const e = st.endpoints[0];
  assert.ok(e.dropped > 0, JSON.stringify(e));
  assert.ok(st.pending_bytes <= 65536, `pending ${st.pending_bytes}`);
  assert.equal((hub.stderr.match(/reached --webhook-max-pending/g) || []).length, 1);
  // The loops never waited: the hub still answers at once.
  const b = await rawClient(t, hub, APP.key);
  assert.equal((await sub(b, 'still-here')).event, 'pusher_internal:subscription_succeeded');
});

test('with --redis each node sends the edges its own directory counts', async (t) => {
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const hooks = [{ url: rx.url(), event_types: ['channel_occupied', 'member_added'] }];
  const hub = await hubWith(t, hooks, { args: ['--redis', redis.url(), '--node-id', 'wh-1'] });
  assert.doesNotMatch(hub.stderr, /reports no channel edges/);
  const a = await rawClient(t, hub, APP.key);
  await sub(a, 'presence-x', { channelData: { user_id: 'u' } });
  await rx.waitEvents(() => true, 2, 'occupied and added through the cluster directory');
  assert.deepStrictEqual(rx.delivered().map(strip), [
    { name: 'channel_occupied', channel: 'presence-x' },
    { name: 'member_added', channel: 'presence-x', user_id: 'u' },
  ]);
});

test('SIGHUP reload: a rotated secret signs the next webhook, an added app sends, a removed webhook stops', async (t) => {
  const PusherServer = require('pusher');
  const rx = await startReceiver(t, APP);        // validates with the old secret
  const gone = await startReceiver(t, APP);
  const APP2 = { id: 'wh-app2', key: 'wh-key2', secret: 'wh-secret2' };
  const rx2 = await startReceiver(t, APP2);
  const occ = ['channel_occupied'];
  const dir = stateDir(t);
  const hub = await hubWith(t, [{ url: rx.url(), event_types: occ },
    { url: gone.url(), event_types: occ }], { dir, args: ['--webhook-retry-window', '10m'] });
  const a = await rawClient(t, hub, APP.key);
  await sub(a, 'private-before');
  await rx.waitEvents((e) => e.channel === 'private-before', 1, 'before, kept endpoint');
  await gone.waitEvents((e) => e.channel === 'private-before', 1, 'before, removed endpoint');
  // A batch the second endpoint refuses: still pending at the reload.
  gone.mode = 'status';
  await sub(a, 'private-mid');
  await waitFor(() => gone.requests.some((r) => r.body && r.body.events
    .some((e) => e.channel === 'private-mid')), 'a failed attempt', 20000);

  // The reload: a new secret, the second webhook removed, an app added.
  const NEW = { ...APP, secret: 'wh-secret-rotated' };
  fs.writeFileSync(hub.configFile, JSON.stringify({ apps: [
    { ...NEW, client_events: true, webhooks: [{ url: rx.url(), event_types: occ }] },
    { ...APP2, webhooks: [{ url: rx2.url(), event_types: occ }] },
  ] }));
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => /webhooks: reloaded: 2 endpoints \(1 new, 1 removed/.test(hub.stderr),
    'the sender took the reload', 20000);
  const seen = gone.requests.length;
  assert.match(hub.stderr, /removed by a reload with 1 pending batches: moved to the dead letters/);
  const dead = execFileSync(BINARY, ['--state-dir', dir, '--webhook-dead-letters']).toString()
    .trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(dead.length, 1);
  assert.equal(dead[0].url, gone.url());
  assert.equal(dead[0].last_error, 'webhook removed by a reload');
  assert.equal(JSON.parse(dead[0].body).events[0].channel, 'private-mid');
  const st = await hub.stats();
  assert.deepStrictEqual(st.webhooks.endpoints.map((e) => [e.app, e.url]).sort(),
    [[APP.id, rx.url()], [APP2.id, rx2.url()]]);

  await sub(a, 'private-after', { secret: NEW.secret });
  const b = await rawClient(t, hub, APP2.key);
  await b.subscribed('private-other', { secret: APP2.secret, key: APP2.key });

  // rx checks with the old secret: the request carrying private-after is
  // invalid there and valid with the new one.
  const carries = (r, ch) => r.body && r.body.events.some((e) => e.channel === ch);
  await waitFor(() => rx.requests.some((r) => carries(r, 'private-after')),
    'private-after at the kept endpoint', 20000);
  const after = rx.requests.find((r) => carries(r, 'private-after'));
  const sdk = (s) => new PusherServer({ appId: APP.id, key: APP.key, secret: s });
  assert.equal(after.valid, false, 'not signed with the old secret');
  assert.equal(sdk(NEW.secret).webhook({ headers: after.headers, rawBody: after.rawBody }).isValid(),
    true, 'signed with the rotated secret');
  assert.equal(after.headers['x-pusher-key'], APP.key);
  await rx2.waitEvents((e) => e.channel === 'private-other', 1, 'the added app\'s event');
  assert.equal(rx2.invalid, 0);
  // The removed endpoint got nothing after the reload (private-after went
  // out in the same batch flush as at the kept endpoint, which has it).
  assert.equal(gone.requests.filter((r) => carries(r, 'private-after')).length, 0);
  assert.equal(gone.requests.length, seen);
});

test('--check-config refuses bad webhooks with one line each', async (t) => {
  const bad = [
    [{ url: 'ftp://x/', event_types: ['channel_occupied'] }, /must start with http:\/\/ or https:\/\//],
    [{ url: 'http://x/', event_types: ['channel_opened'] }, /is not an event type/],
    [{ url: 'http://x/', event_types: [] }, /non-empty array/],
    [{ url: 'http://x/', event_types: ['cache_miss'], headers: { 'X-A': 'a\r\nB: c' } }, /CR, LF/],
    [{ url: 'http://x/', event_types: ['cache_miss'], headers: { 'Bad Name': 'x' } }, /not a valid header name/],
    [{ url: 'http://x/', event_types: ['cache_miss'], headers: { 'X-Pusher-Signature': 'x' } }, /cannot be overridden/],
    [Array.from({ length: 17 }, () => ({ url: 'http://x/', event_types: ['cache_miss'] })), /at most 16/],
    [{ url: 'http://x/', event_types: ['cache_miss'], lambda: {} }, /unknown key/],
  ];
  for (const [hooks, re] of bad) {
    const file = configFile(t, { apps: [{ ...APP, webhooks: Array.isArray(hooks) ? hooks : [hooks] }] });
    const r = spawnSync(BINARY, ['--config', file, '--check-config']);
    assert.equal(r.status, 2, r.stderr.toString());
    const err = r.stderr.toString();
    assert.match(err, re);
    assert.equal(err.trim().split('\n').length, 1, err);
    assert.match(err, /apps\[0\]\.webhooks/);
  }
  const good = configFile(t, { apps: [{ ...APP, webhook_batching: false, webhooks: [{
    url: 'https://example.invalid/hook', event_types: ALL,
    filter: { channel_name_starts_with: 'a', channel_name_ends_with: 'b' }, headers: { 'X-T': 'v' } }] }] });
  const r = spawnSync(BINARY, ['--config', good, '--check-config', '--state-dir', '/tmp']);
  assert.equal(r.status, 0, r.stderr.toString());
});
