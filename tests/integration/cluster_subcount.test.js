'use strict';
// pusher_internal:subscription_count across nodes (docs/SCALING.md,
// "Subscription counts"): a redis-server of our own and three nodes of an
// app with subscription_count on. Every subscriber, on whichever node,
// ends with the cluster-wide count (what REST answers from Redis), the
// events stay throttled, and a node with no subscriber of the channel
// hears nothing of it and sends nothing. With Redis gone each node counts
// its own subscribers again, as a single node does; when Redis returns the
// counts are cluster-wide again without waiting for a change.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const {
  APP, rest, pusherClient, connected, configFile,
} = require('./lib/clients');
const {
  startCluster, bp, allUp, joined,
} = require('./lib/cluster');

const INTERVAL_MS = 300;
const CH = 'room';

// A raw subscriber of CH.
const raw = (t, hub) => joined(t, hub, CH);

// The last count a raw client was sent (0: none yet).
function lastCount(c) {
  const m = c.msgs.filter((x) => x.channel === CH &&
    x.event === 'pusher_internal:subscription_count');
  return m.length ? JSON.parse(m[m.length - 1].data).subscription_count : 0;
}

async function watcher(t, hub) {
  const p = pusherClient(t, hub);
  await connected(p);
  const ch = p.subscribe(CH);
  const seen = [];
  ch.bind('pusher:subscription_count', (d) => seen.push(d.subscription_count));
  return { p, ch, seen };
}

async function restCount(hub) {
  const r = await rest(hub, 'GET', `/apps/${APP.id}/channels/${CH}`,
    { params: { info: 'subscription_count' } });
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body).subscription_count || 0;
}

// Redis's command counts (INFO commandstats): name -> calls.
async function cmdstats(redis) {
  const out = {};
  for (const line of (await redis.cli('INFO', 'commandstats')).split('\n')) {
    const m = /^cmdstat_([a-z|]+):calls=(\d+)/.exec(line.trim());
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

// The nodes' flags: an app with subscription_count on, a short interval.
function countingArgs(t) {
  const cfg = configFile(t, {
    apps: [{ id: APP.id, key: APP.key, secret: APP.secret, subscription_count: true }],
  });
  return ['--config', cfg, '--sub-count-interval', `${INTERVAL_MS}ms`];
}

const perLoop = async (hub, key) =>
  (await hub.stats()).per_loop.reduce((a, l) => a + l[key], 0);

test('subscription_count is cluster-wide on every node, throttled, and costs a node without subscribers nothing', async (t) => {
  const { redis, nodes } = await startCluster(t, { args: countingArgs(t) });
  const [n1, n2, n3] = nodes;
  const start = Date.now();
  const cs0 = await cmdstats(redis);

  const w1 = await watcher(t, n1);
  const w2 = await watcher(t, n2);
  const all = (want) => w1.ch.subscriptionCount === want && w2.ch.subscriptionCount === want;
  await waitFor(() => all(2), 'both watchers count 2 (one per node)', 20000);

  // Ten subscribers on n2, four on n1: everyone ends at 16.
  const on2 = [];
  for (let i = 0; i < 10; i++) on2.push(await raw(t, n2));
  const on1 = [];
  for (let i = 0; i < 4; i++) on1.push(await raw(t, n1));
  await waitFor(() => all(16) && [...on1, ...on2].every((c) => lastCount(c) === 16),
    'every subscriber on both nodes counts 16', 20000);
  for (const n of nodes) assert.equal(await restCount(n), 16);

  // The ten on n2 leave: n1's subscribers learn it from n2's notice.
  for (const c of on2) c.close();
  await waitFor(() => all(6) && on1.every((c) => lastCount(c) === 6),
    'every subscriber counts 6 after n2 lost ten', 20000);
  for (const n of nodes) assert.equal(await restCount(n), 6);

  // Throttled: at most one event per interval per node, plus one in flight.
  const elapsed = Date.now() - start;
  const bound = Math.ceil(elapsed / INTERVAL_MS) + 2;
  for (const w of [w1, w2]) {
    assert.ok(w.seen.length <= bound, `${w.seen.length} events in ${elapsed} ms (bound ${bound})`);
  }
  t.diagnostic(`w1 saw ${w1.seen.join(',')}; w2 saw ${w2.seen.join(',')}`);
  const cs1 = await cmdstats(redis);
  const d = (k) => (cs1[k] || 0) - (cs0[k] || 0);
  t.diagnostic(`redis commands for 16 joins, 10 leaves: publish ${d('publish')}, ` +
    `evalsha ${d('evalsha')}, eval ${d('eval')} (joins, leaves, count reads, REST reads)`);

  // n3 has no subscriber of the channel: it heard none of the notices and
  // sent no event.
  assert.equal((await bp(n3)).received, 0);
  assert.equal(await perLoop(n3, 'subscription_count_events'), 0);
  for (const n of [n1, n2]) assert.equal(await perLoop(n, 'subscription_count_dropped'), 0);

  // A third node's first subscriber gets the cluster-wide count too, and
  // the others hear of it.
  const w3 = await watcher(t, n3);
  await waitFor(() => all(7) && w3.ch.subscriptionCount === 7 &&
    on1.every((c) => lastCount(c) === 7), 'all three nodes count 7', 20000);
});

test('subscription_count while Redis is down: each node counts its own; cluster-wide again once it is back', async (t) => {
  const { redis, nodes: [n1, n2] } = await startCluster(t, { n: 2, args: countingArgs(t) });
  const a = await raw(t, n1);
  const b = await raw(t, n2);
  const b2 = await raw(t, n2);
  await waitFor(() => [a, b, b2].every((c) => lastCount(c) === 3), 'all count 3', 20000);

  await redis.stop();
  await waitFor(async () => (await bp(n1)).state !== 'up' && (await bp(n2)).state !== 'up',
    'both nodes see Redis down', 20000);
  // n1 counts its own two (not the cluster's 4); n2's are not told of it.
  const a2 = await raw(t, n1);
  await waitFor(() => lastCount(a) === 2 && lastCount(a2) === 2, 'n1 sends its own count', 20000);
  assert.ok([2, 3].includes(lastCount(b)), `n2 ${lastCount(b)}: its own or the last read`);

  // Redis back (empty): each node rejoins, reads its channels' counts anew
  // and tells the others, so everyone converges on 4 without a change.
  await redis.again();
  await allUp([n1, n2]);
  await waitFor(() => [a, a2, b, b2].every((c) => lastCount(c) === 4),
    'every subscriber counts 4 after Redis returned', 30000);
  for (const n of [n1, n2]) assert.equal(await restCount(n), 4);
});
