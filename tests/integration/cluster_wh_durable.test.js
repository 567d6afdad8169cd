'use strict';
// Durable webhooks in a cluster (issue 12, docs/WEBHOOKS.md "In a
// cluster"): a redis-server of our own and three nodes with the same app
// and one webhook to one receiver that checks every request with the
// pusher SDK's validator. Edges are decided, delayed and cancelled in
// Redis; one node per app (the holder of <prefix>:whl:<app>) reads the
// app's stream through a consumer group and acknowledges an entry only
// once its batch is delivered.
//   a) a refresh that leaves on one node and rejoins on another within the
//      delay sends nothing;
//   b) every edge exactly once (by id) with clients spread over the nodes;
//   c) kill -9 of the lease holder while the receiver fails: after it
//      recovers every event arrives, from a survivor;
//   d) kill -9 of the holder while closing edges wait out their delay in
//      Redis: a survivor sends them;
//   e) client events seen by a node that does not hold the lease go to
//      the stream and out through the holder, with their fields;
//   f) a holder killed with -9 while the receiver fails and restarted with
//      the same --node-id reads its own pending list and sends it all.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const { APP, configFile, rawClient } = require('./lib/clients');
const {
  startRedis, startNode, startCluster, allUp, joined,
} = require('./lib/cluster');
const { startReceiver, edgeOf: strip, isEdge: is } = require('./lib/receiver');

const P = 'lubdub';
const TYPES = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'];

// The flags of every node here: a 2 s lease, the given webhook delay and
// a 1 s backoff cap.
const whArgs = (delay, cfg) => ['--node-lease', '2s', '--webhook-delay', delay,
  '--webhook-backoff-max', '1s', '--config', cfg];

// Three nodes n1..n3; any of them may be killed with -9 by the test
// (node.kill9()); the others must exit 0 at the end.
async function cluster(t, delay, extra = [], types = TYPES) {
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const cfg = configFile(t, { apps: [{ ...APP, client_events: true, webhooks: [{ url: rx.url(), event_types: types }] }] });
  const { nodes } = await startCluster(t, { redis, args: [...whArgs(delay, cfg), ...extra] });
  const holder = async () => {
    let who = null;
    await waitFor(async () => {
      const id = await redis.cli('GET', `${P}:whl:${APP.id}`);
      who = nodes.find((n) => n.id === id && !n.killed);
      return !!who;
    }, 'a live node holds the app\'s webhook lease', 30000, 50);
    return who;
  };
  return { redis, rx, nodes, holder };
}

const counter = async (redis, f) => Number(await redis.cli('HGET', `${P}:whn:${APP.id}`, f)) || 0;

// A marker channel opened and closed through node n: its vacated waits the
// same delay, so once it is in, every closing edge due before it is too.
async function marker(t, n, rx, tag) {
  const ch = `marker-${tag}`;
  const c = await joined(t, n, ch);
  c.close();
  await rx.waitEvents(is('channel_vacated', ch), 1, `${ch} vacated`, 60000);
}

test('a) a refresh that rejoins on another node within the delay sends nothing', async (t) => {
  const { redis, rx, nodes } = await cluster(t, '3s');
  const pres = 'presence-refresh';
  const a1 = await joined(t, nodes[0], pres, 'ann');
  await rx.waitEvents(is('member_added', pres, 'ann'), 1, 'ann added', 30000);
  await rx.waitEvents(is('channel_occupied', pres), 1, 'occupied', 30000);
  // The page reloads: the old connection goes on n1, the new one comes on n2.
  a1.close();
  await waitFor(async () => Number(await redis.cli('ZCARD', `${P}:whd:${APP.id}`)) === 2,
    'the vacated and removed wait in redis', 20000, 20);
  const a2 = await joined(t, nodes[1], pres, 'ann');
  assert.equal(Number(await redis.cli('ZCARD', `${P}:whd:${APP.id}`)), 0, 'both closing edges cancelled');
  assert.equal(await counter(redis, 'cancelled'), 2);
  await marker(t, nodes[2], rx, 'a');
  const got = rx.delivered((e) => e.channel === pres).map(strip);
  assert.deepEqual(got, [{ name: 'channel_occupied', channel: pres },
    { name: 'member_added', channel: pres, user_id: 'ann' }], JSON.stringify(got));
  // A real leave after that sends one of each, after the delay.
  a2.close();
  await rx.waitEvents(is('member_removed', pres, 'ann'), 1, 'ann removed', 30000);
  await rx.waitEvents(is('channel_vacated', pres), 1, 'vacated', 30000);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('b) each edge exactly once, with clients spread over three nodes', async (t) => {
  const { redis, rx, nodes } = await cluster(t, '200ms');
  const pres = 'presence-spread';
  const users = ['u0', 'u1', 'u2', 'u3', 'u4', 'u5'];
  const conns = [];
  // Every user on two nodes, every public channel on all three.
  for (const [k, u] of users.entries()) {
    conns.push(await joined(t, nodes[k % 3], pres, u));
    conns.push(await joined(t, nodes[(k + 1) % 3], pres, u));
  }
  const pubs = ['spread-0', 'spread-1', 'spread-2'];
  for (const ch of pubs) for (const n of nodes) conns.push(await joined(t, n, ch));
  await rx.waitEvents((e) => e.name === 'member_added', users.length, 'every user added', 30000);
  for (const c of conns) c.close();
  await rx.waitEvents((e) => e.name === 'member_removed', users.length, 'every user removed', 30000);
  await rx.waitEvents((e) => e.name === 'channel_vacated' && !e.channel.startsWith('marker'),
    pubs.length + 1, 'every channel vacated', 30000);
  await marker(t, nodes[0], rx, 'b');
  const got = rx.delivered((e) => !e.channel.startsWith('marker')).map(strip);
  for (const ch of [...pubs, pres]) {
    assert.equal(got.filter(is('channel_occupied', ch)).length, 1, `${ch} occupied once: ${JSON.stringify(got)}`);
    assert.equal(got.filter(is('channel_vacated', ch)).length, 1, `${ch} vacated once: ${JSON.stringify(got)}`);
  }
  for (const u of users) {
    assert.equal(got.filter(is('member_added', pres, u)).length, 1, `${u} added once`);
    assert.equal(got.filter(is('member_removed', pres, u)).length, 1, `${u} removed once`);
  }
  assert.equal(got.length, 2 * (pubs.length + 1) + 2 * users.length, JSON.stringify(got));
  // Nothing was sent twice either (a healthy receiver, one holder), and
  // the ids are the stream's.
  const all = rx.events((e) => !e.channel.startsWith('marker'));
  assert.equal(all.length, got.length, 'no resends');
  for (const e of all) assert.match(e.id, new RegExp(`^${APP.id}-\\d+-\\d+$`));
  assert.equal(await counter(redis, 'queued'), rx.delivered().length);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('c) kill -9 of the lease holder while the receiver fails: every event arrives from a survivor', async (t) => {
  const { redis, rx, nodes, holder } = await cluster(t, '200ms');
  const first = await holder();
  rx.mode = 'status';
  rx.status = 500;
  const N = 30;
  const chans = [];
  for (let i = 0; i < N; i++) {
    const ch = `fail-${i}`;
    chans.push(ch);
    await joined(t, nodes[i % 3], ch);
  }
  // Every edge is in the stream (the holder among the entry nodes), and
  // the holder has read some into batches that keep failing. How many it
  // read depends on how the joins fell into batches: at most two batches
  // wait per endpoint (WEBHOOKS.md), the rest stays unread in Redis.
  await waitFor(async () => Number(await redis.cli('XLEN', `${P}:wh:${APP.id}`)) >= N,
    'every edge in the stream', 30000, 50);
  await waitFor(async () => (await first.stats()).webhooks.stream.read >= 1,
    'the holder read entries', 30000, 50);
  await waitFor(() => rx.requests.length >= 2, 'the receiver refused batches', 30000, 50);
  // Nothing is acknowledged (every batch failed): all it read is pending.
  const read = (await first.stats()).webhooks.stream.read;
  await first.kill9();
  const next = await holder();
  assert.notEqual(next.id, first.id);
  await waitFor(async () => (await next.stats()).webhooks.stream.claimed >= read,
    `the new holder claimed the dead one's ${read} pending entries`, 30000, 50);
  rx.mode = 'ok';
  await rx.waitEvents((e) => e.name === 'channel_occupied', N, 'every occupied after recovery', 60000);
  const got = rx.delivered((e) => e.name === 'channel_occupied').map((e) => e.channel).sort();
  assert.deepEqual(got, [...chans].sort());
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('d) kill -9 of the holder with closing edges waiting in redis: a survivor sends them', async (t) => {
  const { redis, rx, holder } = await cluster(t, '3s');
  const h = await holder();
  const ch = 'dying-pub';
  const pres = 'presence-dying';
  const c1 = await joined(t, h, ch);
  const c2 = await joined(t, h, pres, 'zed');
  await rx.waitEvents(is('member_added', pres, 'zed'), 1, 'zed added', 30000);
  await rx.waitEvents(is('channel_occupied', ch), 1, `${ch} occupied`, 30000);
  c1.close();
  c2.close();
  await waitFor(async () => Number(await redis.cli('ZCARD', `${P}:whd:${APP.id}`)) === 3,
    'three closing edges wait in redis', 20000, 20);
  await h.kill9();
  await holder();
  await rx.waitEvents(is('channel_vacated', ch), 1, `${ch} vacated`, 60000);
  await rx.waitEvents(is('member_removed', pres, 'zed'), 1, 'zed removed', 60000);
  await rx.waitEvents(is('channel_vacated', pres), 1, `${pres} vacated`, 60000);
  assert.equal(rx.delivered(is('channel_vacated', ch)).length, 1);
  assert.equal(rx.delivered(is('member_removed', pres, 'zed')).length, 1);
  assert.equal(rx.delivered(is('channel_vacated', pres)).length, 1);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('e) client events from every node go through the stream, with their fields', async (t) => {
  const { redis, rx, nodes, holder } = await cluster(t, '200ms', [], [...TYPES, 'client_event', 'cache_miss']);
  const h = await holder();
  const senders = [];
  for (const n of nodes) {
    const c = await joined(t, n, 'private-ce');
    senders.push(c);
  }
  for (const [k, c] of senders.entries()) {
    c.send({ event: 'client-hi', channel: 'private-ce', data: { k } });
  }
  await rx.waitEvents((e) => e.name === 'client_event', nodes.length, 'every client event', 30000);
  const got = rx.delivered((e) => e.name === 'client_event');
  assert.deepEqual(got.map((e) => e.data).sort(), ['{"k":0}', '{"k":1}', '{"k":2}']);
  for (const e of got) {
    assert.equal(e.channel, 'private-ce');
    assert.equal(e.event, 'client-hi');
    assert.ok(senders.some((c) => c.socketId === e.socket_id), `socket_id ${e.socket_id}`);
    assert.match(e.id, new RegExp(`^${APP.id}-\\d+-\\d+$`));
  }
  // Two came from nodes that do not hold the lease. Each node counts its
  // own XADD when its webhook thread reads the reply, which can be after
  // the holder has already posted the event: wait for the sum.
  const addedByOthers = async () => {
    let added = 0;
    for (const n of nodes) if (n !== h) added += (await n.stats()).webhooks.stream.added;
    return added;
  };
  await waitFor(async () => (await addedByOthers()) >= 2, 'two XADDs counted by the others', 15000);
  assert.equal(await addedByOthers(), 2);
  assert.ok(Number(await redis.cli('HGET', `${P}:whn:${APP.id}`, 'queued')) >= 4);
  // Cache misses on two nodes at once: through the stream too, at most one
  // per channel per batch.
  const m1 = await rawClient(t, nodes[0]);
  const m2 = await rawClient(t, nodes[1]);
  await Promise.all([m1.subscribed('cache-news'), m2.subscribed('cache-news')]);
  await rx.waitEvents((e) => e.name === 'cache_miss', 1, 'cache_miss', 30000);
  for (const e of rx.delivered((e) => e.name === 'cache_miss')) {
    assert.deepEqual(strip(e), { name: 'cache_miss', channel: 'cache-news' });
    assert.match(e.id, new RegExp(`^${APP.id}-\\d+-\\d+$`));
  }
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('f) a holder killed with -9 and restarted with the same node id sends its own pending entries', async (t) => {
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const cfg = configFile(t, { apps: [{ ...APP, webhooks: [{ url: rx.url(), event_types: TYPES }] }] });
  const args = whArgs('200ms', cfg);
  const first = await startNode(t, redis.url(), 'solo', args, { victim: true });
  await allUp([first]);
  await waitFor(async () => (await redis.cli('GET', `${P}:whl:${APP.id}`)) === 'solo', 'solo holds the lease', 30000, 50);
  rx.mode = 'status';
  rx.status = 503;
  const N = 25;
  for (let i = 0; i < N; i++) await joined(t, first, `solo-${i}`);
  await waitFor(async () => (await first.stats()).webhooks.stream.read >= N, 'read every entry', 30000, 50);
  await first.kill9();
  // Its entries are pending for consumer "solo" in Redis, nowhere else.
  const group = (await redis.cli('XINFO', 'GROUPS', `${P}:wh:${APP.id}`)).split('\n')[1];
  assert.match(group, /^wh-[0-9a-f]{16}$/);
  rx.mode = 'ok';
  await startNode(t, redis.url(), 'solo', args);
  await rx.waitEvents((e) => e.name === 'channel_occupied', N, 'every occupied after the restart', 60000);
  const got = rx.delivered((e) => e.name === 'channel_occupied').map((e) => e.channel);
  assert.equal(new Set(got).size, N);
  // Every entry acknowledged once delivered (the kill -9 vacated them all too).
  await rx.waitEvents((e) => e.name === 'channel_vacated', N, 'the reaped channels vacated', 60000);
  await waitFor(async () => {
    const p = (await redis.cli('XPENDING', `${P}:wh:${APP.id}`, group)).split('\n')[0];
    return p === '0';
  }, 'nothing pending', 30000, 100);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});
