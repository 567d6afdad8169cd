'use strict';
// REJOIN in chunks (docs/SCALING.md, "Redis down, Redis back: REJOIN"): a
// node whose share is larger than one script call takes (2,506 fields over
// five sockets) re-registers it in several calls of at most 1,000 fields
// after Redis restarts empty and after a stall it comes back from with its
// old share, and counts and member lists converge on both nodes; the old
// share's rest (connections that closed while Redis was away) is swept in
// steps. Redis's MONITOR shows every script call within the bound.
const test = require('node:test');
const assert = require('node:assert/strict');
// Raw connections to the test's Redis: TLS under LUBDUB_TEST_REDIS_TLS.
const net = require('./lib/redis').redisNet;
const { waitFor } = require('./lib/hub');
const { APP, rest, rawClient } = require('./lib/clients');
const {
  startCluster, allUp, allDown, memberIds: view,
} = require('./lib/cluster');
const { ADMIN_AUTH } = require('./lib/redis');

const SOCKETS = 5;
const PER = 500;                   // public channels per socket
const CH = 'presence-rj';

// Redis's MONITOR on a connection of its own: the REJOIN chunks among the
// top-level script calls (not the commands they run, shown as "[0 lua]"),
// each as {node, first, fields}. A chunk's ARGV: P node first n_s
// (field count)*n_s n_m (field conns info)*n_m.
function monitor(t, port) {
  const m = { chunks: [], buf: '' };
  const sock = net.connect(port, '127.0.0.1', () => sock.write(`${ADMIN_AUTH}MONITOR\r\n`));
  sock.on('data', (d) => {
    m.buf += d.toString('latin1');
    let at;
    while ((at = m.buf.indexOf('\r\n')) >= 0) {
      const line = m.buf.slice(0, at);
      m.buf = m.buf.slice(at + 2);
      if (!/^\+\d+\.\d+ \[\d+ [\d.]+:\d+\] "EVAL(SHA)?"/i.test(line)) continue;
      const w = line.replace(/"$/, '').split('" "');
      if (w[3] !== 'lubdub' || !/^n\d$/.test(w[4]) || !/^[01]$/.test(w[5])) continue;
      const ns = Number(w[6]);
      const nm = Number(w[7 + 2 * ns]);
      m.chunks.push({ node: w[4], first: w[5] === '1', fields: ns + nm });
    }
  });
  sock.on('error', () => {});
  t.after(() => sock.destroy());
  return m;
}

async function redisNum(redis, ...args) {
  return Number(await redis.cli(...args)) || 0;
}

test('a share of several chunks rejoins after a restart and after a stall', async (t) => {
  const started = await startCluster(t,
    { n: 2, args: ['--max-subscriptions', '0', '--node-lease', '20s'] });
  const { nodes } = started;
  let { redis } = started;
  const [n1, n2] = nodes;
  const gs = `lubdub:gs:${APP.id}`;

  // n1: five sockets, 500 public channels and one presence membership each.
  const socks = [];
  for (let i = 0; i < SOCKETS; i++) {
    const c = await rawClient(t, n1);
    for (let k = 0; k < PER; k++) c.subscribe(`public-rj-${i * PER + k}`);
    c.subscribe(CH, { channelData: { user_id: `u${i}`, user_info: { i } } });
    await waitFor(() => c.count('pusher_internal:subscription_succeeded') === PER + 1,
      `socket ${i}: ${PER + 1} subscriptions`, 30000, 50);
    socks.push(c);
  }
  // n2: a presence watcher, and a second subscriber of public-rj-0.
  const w = await rawClient(t, n2);
  await w.subscribed(CH, { channelData: { user_id: 'w', user_info: {} } });
  await w.subscribed('public-rj-0');
  const users = (n) => ['w', ...Array.from({ length: n }, (_, i) => `u${i}`)].sort();
  await waitFor(() => JSON.stringify(view(w, CH)) === JSON.stringify(users(SOCKETS)),
    'the watcher sees every member', 20000, 50);
  assert.equal(await redisNum(redis, 'HLEN', gs), SOCKETS * PER + 1);

  // What every node and Redis must agree on with `open` sockets of n1 left.
  async function converged(open, what) {
    const want = users(open);
    await waitFor(() => JSON.stringify(view(w, CH)) === JSON.stringify(want),
      `${what}: the watcher's list`, 30000, 50).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(view(w, CH))}`);
    });
    await waitFor(async () => {
      if (await redisNum(redis, 'HLEN', gs) !== open * PER + 1) return false;
      if (await redisNum(redis, 'HLEN', 'lubdub:ns:n1') !== open * PER + 1) return false;
      if (await redisNum(redis, 'HGET', gs, 'public-rj-0') !== 2) return false;
      if (await redisNum(redis, 'HGET', gs, CH) !== open + 1) return false;
      return true;
    }, `${what}: the counts in redis`, 30000, 50).catch(async (e) => {
      throw new Error(`${e.message}: gs ${await redis.cli('HLEN', gs)}, ` +
        `ns ${await redis.cli('HLEN', 'lubdub:ns:n1')}`);
    });
    for (const n of nodes) {
      const u = await rest(n, 'GET', `/apps/${APP.id}/channels/${CH}/users`);
      assert.deepEqual(u.json.users.map((x) => x.id).sort(), want, `${what}: users`);
      const c = await rest(n, 'GET', `/apps/${APP.id}/channels/public-rj-${PER}`,
        { params: { info: 'subscription_count' } });
      assert.deepEqual(c.json, open > 1 ? { occupied: true, subscription_count: 1 }
        : { occupied: false, subscription_count: 0 }, `${what}: a public channel`);
      const l = await rest(n, 'GET', `/apps/${APP.id}/channels`, { params: { filter_by_prefix: 'public-' } });
      assert.equal(Object.keys(l.json.channels).length, open * PER, `${what}: channel list`);
    }
  }
  const rejoins = () => (n1.stderr.match(/rejoined the directory: /g) || []).length;

  // 1. Redis restarted empty; socket 4 closes meanwhile (served locally).
  await redis.stop('SIGKILL');
  await allDown(nodes);
  const before = rejoins();
  socks[4].close();
  await waitFor(async () => (await n1.stats()).totals.sessions === SOCKETS - 1, 'socket 4 gone');
  redis = await redis.again();
  await allUp(nodes);
  await converged(4, 'after the restart');
  await waitFor(() => rejoins() > before, 'the rejoin line');
  assert.match(n1.stderr.slice(-20000),
    /rejoined the directory: 2004 subscriptions on 2001 channels, 4 presence members \(4 users appeared, 0 left cluster-wide\)/);

  // 2. Redis stalls long enough for both nodes to count it down; sockets 2
  // and 3 close meanwhile. Redis still has n1's old share: the rejoin
  // replaces it and sweeps the 1,002 fields n1 no longer has
  // (two sweep steps).
  const mon = monitor(t, redis.port);
  await waitFor(async () => / flags=O /.test(await redis.cli('CLIENT', 'LIST')),
    'the monitor on');
  redis.pause();
  await allDown(nodes, 'every node down (stalled redis)');
  const mid = rejoins();
  socks[2].close();
  socks[3].close();
  await waitFor(async () => (await n1.stats()).totals.sessions === 2, 'sockets 2 and 3 gone');
  redis.resume();
  await allUp(nodes);
  await converged(2, 'after the stall');
  await waitFor(() => rejoins() > mid, 'the rejoin line');
  assert.match(n1.stderr.slice(-20000),
    /rejoined the directory: 1002 subscriptions on 1001 channels, 2 presence members \(0 users appeared, 2 left cluster-wide\)/);
  // n1's share (1,001 channel fields, 2 member fields) went in two chunks
  // of at most 1,000 fields.
  const mine = mon.chunks.filter((c) => c.node === 'n1');
  assert.deepEqual(mine.map((c) => c.first), [true, false], JSON.stringify(mon.chunks));
  assert.deepEqual(mine.map((c) => c.fields), [1000, 3]);
  for (const c of socks.slice(0, 2)) c.close();
  w.close();
});

// Redis loses its scripts while the node stays connected (SCRIPT FLUSH, or
// a failover to a replica that never loaded them): the lease tick's
// EVALSHA gets NOSCRIPT once, the next tick goes as EVAL, and the node
// loads the script again, so its ticks are EVALSHA once more (they stayed
// EVAL, the whole text each second, until the next reconnect).
test('SCRIPT FLUSH while connected: the lease reloads its script', async (t) => {
  const { redis, nodes } = await startCluster(t, { n: 1 });
  const [n1] = nodes;
  await allUp(nodes);
  const calls = async (cmd) => {
    const m = (await redis.cli('INFO', 'commandstats')).match(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`));
    return m ? Number(m[1]) : 0;
  };
  await waitFor(async () => (await calls('evalsha')) > 0, 'the lease on EVALSHA');
  await redis.cli('SCRIPT', 'FLUSH');
  await waitFor(() => /lease renewal failed \(NOSCRIPT/.test(n1.stderr), 'the NOSCRIPT renewal');
  await waitFor(() => /lease renewed again/.test(n1.stderr), 'the lease renewed again');
  const eval0 = await calls('eval');
  const sha0 = await calls('evalsha');
  await waitFor(async () => (await calls('evalsha')) >= sha0 + 3, 'three more ticks by EVALSHA');
  // At most the tick that was already on its way went as EVAL.
  assert.ok((await calls('eval')) <= eval0 + 1, `EVAL calls ${eval0} -> ${await calls('eval')}`);
});
