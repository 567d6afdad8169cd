'use strict';
// Readiness that tells the truth (issue 33, item 4; docs/SCALING.md,
// "Readiness"): with --redis, /readyz is 503 until the node has reached
// Redis and joined (its REJOIN done), with what it waits for in the body;
// a wrong password keeps it out, the reason in /stats and the attempts
// growing; an outage after the join is 200 "degraded" (local delivery goes
// on), or 503 with --ready-requires-redis. Every wait is on a condition.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor, request, getJson } = require('./lib/hub');
const { rawClient, publish } = require('./lib/clients');
const { startRedis, startNode, bp, freePort, redisUrl } = require('./lib/cluster');

const readyz = (hub, url = hub.url('/readyz')) => request('GET', url);

// Both ports answer /readyz the same (server/ops/ops.c).
async function readyOn(hub) {
  const main = await readyz(hub);
  if (!hub.metricsUrl) return main;
  const m = await readyz(hub, hub.metricsUrl('/readyz'));
  assert.equal(m.status, main.status, `metrics port ${m.body} vs ${main.body}`);
  return main;
}

async function waitReady(hub, msg) {
  let last;
  await waitFor(async () => {
    last = await readyOn(hub);
    return last.status === 200 && last.body === 'ready\n';
  }, msg, 20000, 50).catch((e) => { throw new Error(`${e.message}: last ${last.status} ${last.body}`); });
}

function metric(text, name) {
  const m = text.match(new RegExp(`^lubdub_${name} (\\d+)$`, 'm'));
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

const unreachableLines = (hub) => hub.stderr.split('\n').filter((l) => /backplane: .*unreachable/.test(l));

test('a node that never reached Redis is 503 with the reason, then 200 once joined', async (t) => {
  const port = await freePort();
  const mport = await freePort();
  const n1 = await startNode(t, redisUrl(port), 'early', ['--metrics-port', String(mport)]);
  n1.metricsUrl = (p) => `http://127.0.0.1:${mport}${p}`;
  n1.stats = () => getJson(n1.metricsUrl('/stats'));

  // Not ready from the start: before its first attempt failed, and after.
  const first = await readyOn(n1);
  assert.equal(first.status, 503, first.body);
  assert.match(first.headers['content-type'], /^text\/plain/);
  // (Before the backplane thread's first connect: no address yet.)
  assert.match(first.body, new RegExp(`^waiting: redis \\(connecting( to 127\\.0\\.0\\.1:${port})?[;)]`));
  let r;
  await waitFor(async () => {
    r = await readyOn(n1);
    return /attempt [2-9]\d* failed/.test(r.body) || /attempt \d\d+ failed/.test(r.body);
  }, 'two attempts failed', 20000, 50);
  assert.equal(r.status, 503);
  assert.match(r.body, new RegExp(`^waiting: redis \\(connecting to 127\\.0\\.0\\.1:${port}; attempt \\d+ failed: .*refused.*\\)\\n$`, 'i'));
  const s = await bp(n1);
  assert.equal(s.state, 'down');
  assert.equal(s.phase, 'connecting');
  assert.equal(s.joined, 0);
  assert.ok(s.connect_attempts >= 2, JSON.stringify(s));
  assert.ok(s.connect_failures >= s.connect_attempts, JSON.stringify(s));
  assert.match(s.last_error, /refused/i);
  assert.match(s.not_joined_since, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const m = (await request('GET', n1.metricsUrl('/metrics'))).body;
  assert.equal(metric(m, 'backplane_joined'), 0);
  assert.ok(metric(m, 'backplane_connect_attempts') >= 2);
  assert.ok(metric(m, 'backplane_connect_failures_total') >= 2);
  // The local clients are served meanwhile, as before.
  const c = await rawClient(t, n1);
  await c.subscribed('early-1');
  await publish(n1, { name: 'ev', channel: 'early-1', data: { i: 1 } }, { expect: 200 });
  await waitFor(() => c.msgs.some((x) => x.channel === 'early-1' && x.event === 'ev'), 'local delivery');

  await startRedis(t, { port });
  await waitReady(n1, '/readyz 200 once joined');
  // 200 came after the REJOIN had finished, not at the connect.
  const j = await bp(n1);
  assert.equal(j.phase, 'joined');
  assert.equal(j.joined, 1);
  assert.equal(j.state, 'up');
  assert.ok(j.rejoins >= 1, JSON.stringify(j));
  assert.equal(j.connect_attempts, 0);
  assert.ok(j.connect_failures >= 2);
  assert.equal(j.not_joined_since, null);
  assert.match(j.last_error, /refused/i, 'the last reason stays for the record');
  assert.equal(unreachableLines(n1).length, 1, n1.stderr);
});

test('a wrong password: 503, the reason in /readyz and /stats, attempts growing, one log line', async (t) => {
  const redis = await startRedis(t, { extra: ['--requirepass', 's3cret'] });
  const bad = await startNode(t, `redis://:wrong@127.0.0.1:${redis.port}/0`, 'badpass');
  let s;
  await waitFor(async () => (s = await bp(bad)).connect_attempts >= 2, 'two refused attempts', 20000, 50);
  assert.match(s.last_error, /WRONGPASS|invalid|password/i);
  assert.equal(s.phase, 'connecting');
  const r = await readyz(bad);
  assert.equal(r.status, 503);
  assert.match(r.body, /^waiting: redis \(connecting to 127\.0\.0\.1:\d+; attempt \d+ failed: .*(WRONGPASS|invalid|password).*\)\n$/i);
  const before = s.connect_attempts;
  await waitFor(async () => (await bp(bad)).connect_attempts > before, 'attempts keep growing', 20000, 50);
  assert.equal((await readyz(bad)).status, 503);
  // The same reason each time: the one line of the first failure only.
  assert.equal(unreachableLines(bad).length, 1, bad.stderr);
});

test('an outage after the join: 200 degraded, or 503 with --ready-requires-redis; back: ready', async (t) => {
  let redis = await startRedis(t);
  const soft = await startNode(t, redis.url(), 'soft');
  const strict = await startNode(t, redis.url(), 'strict', ['--ready-requires-redis']);
  await waitReady(soft, 'soft joined');
  await waitReady(strict, 'strict joined');
  const c = await rawClient(t, soft);
  await c.subscribed('outage-1');

  await redis.stop('SIGKILL');
  const degraded = /^degraded: redis down since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(.+\); serving local subscribers only\n$/;
  let a;
  let b;
  await waitFor(async () => {
    a = await readyz(soft);
    b = await readyz(strict);
    return /refused/i.test(a.body) && /refused/i.test(b.body);
  }, 'both see Redis refuse', 20000, 50);
  assert.equal(a.status, 200, a.body);
  assert.match(a.body, degraded);
  assert.equal(b.status, 503, b.body);
  assert.match(b.body, degraded);
  const s = await bp(soft);
  assert.equal(s.phase, 'down');
  assert.equal(s.joined, 0);
  assert.match(s.not_joined_since, /Z$/);
  // Local delivery goes on.
  await publish(soft, { name: 'ev', channel: 'outage-1', data: { i: 1 } }, { expect: 200 });
  await waitFor(() => c.msgs.some((x) => x.channel === 'outage-1' && x.event === 'ev'), 'local delivery in the outage');
  // One line for the loss, one when the reason changed to a refused
  // connect (Redis is gone, not just the connection), no more.
  await waitFor(() => /backplane: redis .* still unreachable, now: .*refused/i.test(soft.stderr),
    'the changed reason logged');
  await waitFor(async () => (await bp(soft)).connect_attempts >= 3, 'more refused attempts', 20000, 50);
  assert.equal(soft.stderr.split('\n').filter((l) => /backplane: down/.test(l)).length, 1, soft.stderr);
  assert.equal(soft.stderr.split('\n').filter((l) => /still unreachable/.test(l)).length, 1, soft.stderr);

  redis = await redis.again();
  await waitReady(soft, 'soft joined again');
  await waitReady(strict, 'strict joined again');
  assert.equal((await bp(strict)).phase, 'joined');
});
