'use strict';
// Watchlists and online state across nodes (docs/SCALING.md, "Watchlists
// and online state"; docs/PROTOCOL.md 4.3): a redis-server of our own and
// three nodes. pusher-js clients sign in with a watchlist: a watcher on n1
// hears a user come online and go offline on n2; a user on two nodes is
// online once and offline once; the initial state lists a user online on
// another node; kill -9 of a node gives its users' watchers an offline
// within the lease bound; with Redis gone each node's own users count (as
// on a single node), and once Redis is back the state converges.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const { pusherClient, serverSdk, configFile, APP } = require('./lib/clients');
const { startRedis } = require('./lib/redis');
const {
  startNode, contractNode, bp, allUp, watchClusterLateness,
} = require('./lib/cluster');

// A pusher-js client on hub signed in as user, recording its watchlist
// events in order as [name, ...ids].
async function signedIn(t, hub, user) {
  const client = pusherClient(t, hub, { user });
  const events = [];
  client.user.watchlist.bind('online', (e) => events.push(['online', ...e.user_ids]));
  client.user.watchlist.bind('offline', (e) => events.push(['offline', ...e.user_ids]));
  await waitFor(() => client.connection.state === 'connected', `${user.id} connected`, 20000);
  client.signin();
  await waitFor(() => client.user.user_data && client.user.serverToUserChannel &&
    client.user.serverToUserChannel.subscribed, `${user.id} signed in`, 20000);
  const c = { client, events, close: () => client.disconnect(), hub };
  return c;
}

// What the events say about uid at the end: true online, false offline,
// undefined never mentioned.
function state(c, uid) {
  let s;
  for (const [name, ...ids] of c.events) if (ids.includes(uid)) s = name === 'online';
  return s;
}

const count = (c, name, uid) =>
  c.events.filter(([n, ...ids]) => n === name && ids.includes(uid)).length;

// Everything Redis published on c's user channel before now has reached c:
// a sendToUser through another node (via) reaches c's node through the
// same Redis channel, behind it. (Through c's own node it would be
// delivered locally at once.) Callers first wait until Redis holds the
// change whose events they count.
async function barrier(c, userId, via) {
  assert.notEqual(via, c.hub, 'the barrier must come through another node');
  const got = [];
  const h = (d) => got.push(d);
  c.client.user.bind('barrier', h);
  const n = Math.random();
  await serverSdk(via).sendToUser(userId, 'barrier', { n });
  await waitFor(() => got.some((d) => d.n === n), 'barrier', 20000);
  c.client.user.unbind('barrier', h);
}

const users = async (hub) => (await hub.stats()).totals.sessions;

// The nodes Redis counts user uid signed in on ('' = offline).
const goCount = (redis, uid) => redis.cli('HGET', 'lubdub:go:app-id', uid);

test('watchlist across nodes: edges, a user on two nodes, the initial state', async (t) => {
  const redis = await startRedis(t);
  const nodes = [];
  for (let k = 1; k <= 3; k++) nodes.push(await startNode(t, redis.url(), `n${k}`));
  await allUp(nodes);
  const [n1, n2, n3] = nodes;

  // y is online on n3 before w signs in on n1: w's first event lists it.
  const y = await signedIn(t, n3, { id: 'y' });
  const w = await signedIn(t, n1, { id: 'w', watchlist: ['x', 'y', 'nobody'] });
  await waitFor(() => state(w, 'y') === true, 'initial state lists y (on n3)', 20000);
  assert.deepEqual(w.events[0], ['online', 'y']);
  // A second connection of w, on n2, keeps w's list (no watchlist of its own).
  const w2 = await signedIn(t, n2, { id: 'w' });
  await waitFor(() => state(w2, 'y') === true, 'w on n2 gets the state too', 20000);

  // x connects on n2: both of w's connections hear it, once.
  const x1 = await signedIn(t, n2, { id: 'x' });
  await waitFor(() => state(w, 'x') === true && state(w2, 'x') === true, 'x online', 20000);
  // x's second connection, on n3: not a new edge.
  const x2 = await signedIn(t, n3, { id: 'x' });
  await waitFor(async () => (await goCount(redis, 'x')) === '2', 'x on two nodes', 20000);
  await barrier(w, 'w', n3);
  await barrier(w2, 'w', n3);
  assert.equal(count(w, 'online', 'x'), 1);
  assert.equal(count(w2, 'online', 'x'), 1);

  // x leaves n2: still online through n3.
  x1.close();
  await waitFor(async () => (await goCount(redis, 'x')) === '1', 'x on one node', 20000);
  await barrier(w, 'w', n3);
  await barrier(w2, 'w', n3);
  assert.equal(count(w, 'offline', 'x'), 0);
  // x's last connection leaves: offline once, on both of w's connections.
  x2.close();
  await waitFor(() => state(w, 'x') === false && state(w2, 'x') === false, 'x offline', 20000);
  await barrier(w, 'w', n3);
  await barrier(w2, 'w', n3);
  assert.equal(count(w, 'offline', 'x'), 1);
  assert.equal(count(w2, 'offline', 'x'), 1);
  assert.equal(count(w, 'online', 'x'), 1);

  // y leaves n3: offline.
  y.close();
  await waitFor(() => state(w, 'y') === false, 'y offline', 20000);
  // Redis numbered w's events (per watcher, whichever node decided the
  // edge) and no node saw a hole in that sequence.
  assert.ok(Number(await redis.cli('HGET', 'lubdub:wq:app-id:w', 'n')) >= 5);
  for (const n of nodes) assert.equal((await bp(n)).gaps, 0, n.nodeId);

  // The watchlist goes with w's last connection: Redis keeps nothing.
  w.close();
  w2.close();
  await waitFor(async () => (await redis.cli('KEYS', 'lubdub:w*')) === '' &&
    (await redis.cli('HLEN', 'lubdub:go:app-id')) === '0',
  'no watchlist or online key left in Redis', 20000).catch(async (e) => {
    throw new Error(`${e.message}: ${await redis.cli('KEYS', 'lubdub:*')}`);
  });
});

test('watchlist across nodes: kill -9 of a node sends its users offline', async (t) => {
  const redis = await startRedis(t);
  const extra = ['--loops', '2', '--drain-timeout', '1s', '--node-lease', '2s'];
  const n1 = await contractNode(t, redis.url(), 'n1', extra);
  const n2 = await contractNode(t, redis.url(), 'n2', extra);
  const n3 = await contractNode(t, redis.url(), 'n3', extra);
  await allUp([n1, n2, n3]);
  const w = await signedIn(t, n1, { id: 'w', watchlist: ['v', 'u', 'z'] });
  const v = await signedIn(t, n2, { id: 'v' });
  const u1 = await signedIn(t, n2, { id: 'u' });
  const u2 = await signedIn(t, n1, { id: 'u' });
  await waitFor(() => state(w, 'v') === true && state(w, 'u') === true, 'v and u online', 20000);

  const late = watchClusterLateness([n1, n3]);
  t.after(() => late.stop());
  const t0 = Date.now();
  await n2.kill9();
  await waitFor(() => state(w, 'v') === false, 'v offline after n2 died', 20000);
  const took = Date.now() - t0;
  await late.stop();
  t.diagnostic(`kill -9 to offline: ${took} ms (lease 2 s; ${late.describe()})`);
  // Bound: lease + one tick + round trips, generous on a loaded machine,
  // plus how late the survivors and this process ran meanwhile.
  assert.ok(took < 10000 + late.allowanceMs(), `${took} ms; ${late.describe()}`);
  // u is still signed in on n1: no offline for it.
  await waitFor(async () => (await goCount(redis, 'v')) === '', 'v gone from Redis', 20000);
  await barrier(w, 'w', n3);
  assert.equal(count(w, 'offline', 'u'), 0);
  assert.equal(state(w, 'u'), true);

  // SIGTERM of n3: its users sign out as it drains (z offline at once,
  // no lease to wait for).
  const z = await signedIn(t, n3, { id: 'z' });
  await waitFor(() => state(w, 'z') === true, 'z online (n3)', 20000);
  const t1 = Date.now();
  assert.equal((await n3.stop()).code, 0);
  await waitFor(() => state(w, 'z') === false, 'z offline after n3 stopped', 20000);
  t.diagnostic(`SIGTERM to offline: ${Date.now() - t1} ms`);
  assert.equal(count(w, 'offline', 'z'), 1);
  void v; void u1; void u2; void z;
});

test('watchlist across nodes: Redis down is local, Redis back converges', async (t) => {
  const redis = await startRedis(t);
  const n1 = await startNode(t, redis.url(), 'n1');
  const n2 = await startNode(t, redis.url(), 'n2');
  await allUp([n1, n2]);
  const w = await signedIn(t, n1, { id: 'w', watchlist: ['a', 'b', 'c'] });
  // w on n2 too, without a list of its own: n2's rejoin must keep w's.
  const w2 = await signedIn(t, n2, { id: 'w' });
  const c = await signedIn(t, n2, { id: 'c' });
  await waitFor(() => state(w, 'c') === true && state(w2, 'c') === true,
    'c online (n2)', 20000);

  await redis.stop();
  await waitFor(async () => (await bp(n1)).state !== 'up' && (await bp(n2)).state !== 'up',
    'both nodes see Redis down', 20000);
  // Local behaviour: a on n1 is seen by w at once; b on n2 is not.
  const a = await signedIn(t, n1, { id: 'a' });
  await waitFor(() => state(w, 'a') === true, 'a online (n1, local)', 20000);
  const b = await signedIn(t, n2, { id: 'b' });
  // c leaves n2 meanwhile: w cannot hear it now.
  c.close();
  await waitFor(async () => (await users(n2)) === 2, 'c gone from n2', 20000);
  assert.notEqual(state(w, 'b'), true);

  // Redis back, empty: every node re-registers its users and w gets the
  // state as it is: a and b online, c offline.
  await startRedis(t, { port: redis.port });
  await allUp([n1, n2]);
  const conv = (x) => state(x, 'a') === true && state(x, 'b') === true &&
    state(x, 'c') === false;
  await waitFor(() => conv(w) && conv(w2), 'w converges on both nodes: a, b online; c offline',
    30000).catch((e) => {
    throw new Error(`${e.message}: n1 ${JSON.stringify(w.events)}; n2 ${JSON.stringify(w2.events)}`);
  });
  assert.equal(await redis.cli('SCARD', 'lubdub:wl:app-id:w'), '3');
  // One log line per rejoin with online users.
  await waitFor(() => /backplane: rejoined online state: 2 signed-in users/.test(n1.stderr),
    'n1 logs its online rejoin', 20000).catch((e) => {
    throw new Error(`${e.message}: ${n1.stderr.slice(-2000)}`);
  });
  // And edges work again across nodes, to both of w's connections.
  b.close();
  await waitFor(() => state(w, 'b') === false && state(w2, 'b') === false,
    'b offline after Redis returned', 20000);
  void a;
});

test('watchlist across nodes: max_watchers counts the watchers of every node', async (t) => {
  const redis = await startRedis(t);
  const cfg = configFile(t, {
    apps: [{ id: APP.id, key: APP.key, secret: APP.secret, max_watchers: 1 }],
  });
  const n1 = await startNode(t, redis.url(), 'n1', ['--config', cfg]);
  const n2 = await startNode(t, redis.url(), 'n2', ['--config', cfg]);
  await allUp([n1, n2]);
  // a watches x on n1; b on n2 would be x's second watcher: n2's own
  // registry has none, so only the script can tell, and leaves x out.
  const a = await signedIn(t, n1, { id: 'a', watchlist: ['x'] });
  const b = await signedIn(t, n2, { id: 'b', watchlist: ['x', 'y'] });
  await waitFor(async () => (await bp(n2)).watch_skipped === 1, 'n2 skipped x for b', 20000);
  const x = await signedIn(t, n2, { id: 'x' });
  const y = await signedIn(t, n1, { id: 'y' });
  await waitFor(() => state(a, 'x') === true && state(b, 'y') === true, 'a hears x, b hears y',
    20000);
  await waitFor(async () => (await goCount(redis, 'x')) === '1', 'x counted', 20000);
  await barrier(b, 'b', n1);
  assert.equal(state(b, 'x'), undefined);
  assert.equal(await redis.cli('SMEMBERS', 'lubdub:wl:app-id:b'), 'y');
  assert.ok((await bp(n2)).online_edges >= 1);
  void x; void y;
});

test('watchlist across nodes: an initial state never contradicts a later edge', async (t) => {
  const redis = await startRedis(t);
  const n1 = await startNode(t, redis.url(), 'n1');
  const n2 = await startNode(t, redis.url(), 'n2');
  await allUp([n1, n2]);
  // x comes and goes on n2 while watchers keep signing in on n1; each
  // watcher's events about x must alternate (a repeated online is the
  // idempotent initial state only when it is the first event) and end
  // with what Redis says.
  const watchers = [];
  let x = null;
  for (let i = 0; i < 12; i++) {
    if (x) {
      x.close();
      x = null;
    } else {
      x = await signedIn(t, n2, { id: 'x' });
    }
    watchers.push(await signedIn(t, n1, { id: `w${i}`, watchlist: ['x'] }));
  }
  if (x) x.close();
  await waitFor(async () => (await goCount(redis, 'x')) === '', 'x offline in Redis', 20000);
  for (const w of watchers) {
    await barrier(w, w.client.user.user_data.id, n2);
    const seq = w.events.map(([n]) => n);
    for (let k = 1; k < seq.length; k++) {
      assert.notEqual(seq[k], seq[k - 1], `${w.client.user.user_data.id}: ${seq.join(',')}`);
    }
    assert.notEqual(state(w, 'x'), true, `${w.client.user.user_data.id}: ${seq.join(',')}`);
  }
});

test('watchlist across nodes: a node stopped past its lease is reaped, then comes back', async (t) => {
  const redis = await startRedis(t);
  const extra = ['--loops', '2', '--drain-timeout', '1s', '--node-lease', '2s'];
  const n1 = await contractNode(t, redis.url(), 'n1', extra);
  const n2 = await contractNode(t, redis.url(), 'n2', extra);
  await allUp([n1, n2]);
  const w = await signedIn(t, n1, { id: 'w', watchlist: ['p'] });
  const p = await signedIn(t, n2, { id: 'p' });
  await waitFor(() => state(w, 'p') === true, 'p online (n2)', 20000);
  // SIGSTOP n2 past its lease: n1 reaps it, p goes offline for w.
  n2.pause();
  await waitFor(() => state(w, 'p') === false, 'p offline once n2 was reaped', 20000);
  // SIGCONT: n2 finds it was reaped, re-registers what it has: p is back.
  n2.resume();
  await waitFor(() => state(w, 'p') === true, 'p online again after n2 re-registered', 30000)
    .catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(w.events)}`); });
  assert.equal(await goCount(redis, 'p'), '1');
  void p;
});
