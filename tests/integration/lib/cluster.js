'use strict';
// What the cluster tests share (every cluster*.test.js): a redis-server of
// the test's own, nodes started against it, and what they are asked.
//
// Start-up: startRedis(t) (lib/redis.js's, on a free loopback port with no
// persistence), startNode(t, url, id, args) for a two-loop node,
// contractNode(...) for one started exactly as issue 11's contract spells
// it, startCluster(t, {n, args}) for a Redis and n nodes, all up.
// Every node can be killed (node.kill9()), stopped and continued
// (node.pause(), node.resume()); so can Redis (redis.stop('SIGKILL'),
// redis.again() on the same port, redis.pause(), redis.resume()).
//
// Teardown: when t ends, what was started on it is stopped in reverse
// order (nodes before the Redis they use): a stopped process continued,
// the node's tracked clients closed, SIGTERM and exit status 0 expected,
// unless the test killed the node on purpose or started it as a victim
// ({victim: true}: killed with SIGKILL at the end, its exit not checked).
// Everything is still killed by PID at exit whatever happened (lib/hub.js,
// lib/redis.js).
//
// Redis over TLS: with LUBDUB_TEST_REDIS_TLS=1 every Redis started here
// serves TLS (lib/redis.js) and every node started against a rediss:// URL
// gets the flags that trust it (envNodeArgs): the same tests, over TLS.
// A test that builds a URL by hand uses scheme() for its scheme.
//
// Logs: when a test or the file fails, the output of every node and Redis
// the file started is written to a new directory (under $LUBDUB_TEST_LOGS,
// else the system's temporary directory) named on stderr.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, waitFor, watchLateness } = require('./hub');
const redisLib = require('./redis');
const { closeTracked, rawClient } = require('./clients');

// -------------------------------------------------------- logs on failure

const logs = [];            // {name, text()}: every process started here
let logDir = null;

function keepLogs(why) {
  if (!logs.length) return;
  try {
    if (!logDir) {
      const file = require.main ? path.basename(require.main.filename, '.test.js') : 'cluster';
      logDir = fs.mkdtempSync(path.join(process.env.LUBDUB_TEST_LOGS || os.tmpdir(), `lubdub-${file}-`));
    }
    for (const l of logs) fs.writeFileSync(path.join(logDir, `${l.name}.log`), l.text());
    process.stderr.write(`${why}: the logs of ${logs.length} processes are in ${logDir}\n`);
  } catch (e) {
    process.stderr.write(`${why}: logs not kept (${e.message})\n`);
  }
}
process.on('exit', () => { if (process.exitCode) keepLogs('this file failed'); });

function logged(id, text) {
  logs.push({ name: `${String(logs.length + 1).padStart(2, '0')}-${id}`, text });
}

// ------------------------------------------------ teardown in reverse order

const scopes = new WeakMap();

// Run fn when t ends, before whatever was deferred on t earlier (last:
// after all of it).
function defer(t, fn, { last = false } = {}) {
  let stack = scopes.get(t);
  if (!stack) {
    stack = [];
    scopes.set(t, stack);
    t.after(async () => {
      let first = null;
      while (stack.length) {
        try { await stack.pop()(); } catch (e) { first = first || e; }
      }
      if (first || t.passed === false) keepLogs(`test '${t.name}' ${first ? 'teardown ' : ''}failed`);
      if (first) throw first;
    });
  }
  if (last) stack.unshift(fn);
  else stack.push(fn);
}

// A redis-server for t (lib/redis.js), stopped after the nodes started on
// t. redis.again(): a new one on the same port, same args.
async function startRedis(t, opts = {}) {
  const r = await redisLib.startRedis(t, { ...opts, defer: (fn) => defer(t, fn, { last: true }) });
  logged(`redis-${r.port}`, () => r.out);
  r.again = () => startRedis(t, { ...opts, port: r.port });
  return r;
}

// A started node: its controls and its teardown (see the top).
function adopt(t, hub, id, victim) {
  hub.id = id;
  hub.killed = false;
  hub.paused = false;
  hub.kill9 = async () => {
    hub.killed = true;
    try { process.kill(hub.pid, 'SIGKILL'); } catch (_) { /* gone */ }
    return hub.exited;
  };
  hub.pause = () => { hub.paused = true; process.kill(hub.pid, 'SIGSTOP'); };
  hub.resume = () => {
    if (!hub.paused) return;
    hub.paused = false;
    try { process.kill(hub.pid, 'SIGCONT'); } catch (_) { /* gone */ }
  };
  logged(id, () => hub.stdout + hub.stderr);
  defer(t, async () => {
    hub.resume();
    if (hub.killed || victim) {
      for (const close of hub.clientCloses || []) {
        try { close(); } catch (_) { /* closed */ }
      }
      hub.clientCloses = [];
      await hub.stop('SIGKILL');
      return;
    }
    await closeTracked(hub);
    const exit = await hub.stop();
    if (exit.code !== 0) {
      throw new Error(`node ${id} exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-4000)}`);
    }
  });
  return hub;
}

// A two-loop node with the given --node-id and a short drain; extra: more
// flags (a null URL: no --redis, e.g. a node that finds Redis through
// --redis-sentinel). opts.victim: the test kills it or checks its exit itself.
// LUBDUB_TEST_CLUSTER_KEY_FILE: every such node also gets that
// --cluster-key-file (to run the cluster tests with a cluster key).
async function startNode(t, redisUrl, id, extra = [], { victim = false } = {}) {
  const keyed = process.env.LUBDUB_TEST_CLUSTER_KEY_FILE && !extra.includes('--cluster-key-file')
    ? ['--cluster-key-file', process.env.LUBDUB_TEST_CLUSTER_KEY_FILE] : [];
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s',
    ...(redisUrl ? ['--redis', redisUrl] : []), '--node-id', id, ...keyed, ...tlsArgs(redisUrl, extra),
    ...extra]);
  return adopt(t, hub, id, victim);
}

// LUBDUB_TEST_REDIS_TLS's node flags, unless the test gives its own.
const tlsArgs = (url, extra) => (extra.includes('--redis-tls-ca-file') ? [] : redisLib.envNodeArgs(url));

const bp = async (hub) => (await hub.stats()).backplane;

// Every node's webhook queue empty and nothing waiting in its delay: all
// it made is at the receiver (or was never made). A node that has died
// (kill -9) has no stats to ask: leave it out.
async function drained(nodes) {
  await waitFor(async () => {
    for (const n of nodes) {
      const w = (await n.stats()).webhooks;
      if (!w) continue;
      if (w.pending_bytes !== 0) return false;
      if (w.endpoints.some((e) => e.queue_depth !== 0)) return false;
    }
    return true;
  }, 'every node\'s webhooks drained', 20000, 50);
}

// A marker channel joined and left through every node: once each one's
// channel_vacated is at the receiver and every node has drained, anything
// a node queued before its marker has been delivered too, so an edge sent
// twice would be in by then.
async function webhookMarkers(t, nodes, rx, tag) {
  const { isEdge } = require('./receiver');
  for (const [k, n] of nodes.entries()) {
    const ch = `marker-${tag}-${k}`;
    const c = await joined(t, n, ch);
    c.close();
    await rx.waitEvents(isEdge('channel_vacated', ch), 1, `${ch} vacated`, 30000);
  }
  await drained(nodes);
}

// watchLateness (lib/hub.js) over several nodes: an upper bound on how
// long the cluster took to act adds the latest any of them ran (the
// survivors of a kill, say: the ones doing the work).
function watchClusterLateness(nodes) {
  const w = nodes.map((n) => watchLateness(n));
  const worst = () => w.reduce((a, b) => (b.allowanceMs() > a.allowanceMs() ? b : a));
  return {
    allowanceMs: () => worst().allowanceMs(),
    describe: () => worst().describe(),
    async stop() { await Promise.all(w.map((x) => x.stop())); },
  };
}

// Up: the node reached Redis and its directory is the cluster's (the REJOIN
// snapshot taken): a join before that is served by the node alone, and its
// webhook edges by its own engine.
async function allUp(nodes) {
  await waitFor(async () => {
    for (const n of nodes) {
      const s = await bp(n);
      if (s.state !== 'up' || s.directory !== 'up') return false;
    }
    return true;
  }, 'every node up', 20000, 50);
}

async function allDown(nodes, msg = 'every node down') {
  await waitFor(async () => (await Promise.all(nodes.map(bp))).every((s) => s.state === 'down'),
    msg, 20000, 50);
}

// A node started as issue 11's contract spells it:
//   lubdub --port P --redis URL --node-id ID   (the default app)
// plus extra flags (a short drain by default, so that cleanup is quick).
// P is a free loopback port chosen here.
async function contractNode(t, redisUrl, id, extra = ['--drain-timeout', '1s'], opts = {}) {
  const { victim = false, ...hubOpts } = opts;
  const port = await redisLib.freePort();
  const hub = await startHub(['--port', String(port), '--redis', redisUrl, '--node-id', id,
    ...tlsArgs(redisUrl, extra), ...extra], { exactArgs: true, ...hubOpts });
  return adopt(t, hub, id, victim);
}

// A Redis of the test's own (or opts.redis) and n nodes <prefix>1..<prefix>n
// started with args (contract: as contractNode), every one up.
async function startCluster(t, { n = 3, prefix = 'n', args, redis, contract = false } = {}) {
  const r = redis || await startRedis(t);
  const nodes = [];
  for (let k = 1; k <= n; k++) {
    nodes.push(await (contract ? contractNode : startNode)(t, r.url(), `${prefix}${k}`, args));
  }
  await allUp(nodes);
  return { redis: r, nodes };
}

// ------------------------------------------------------------ the clients

// A raw client (closed when t ends) subscribed to channel, as presence
// member uid with user_info info when uid is given.
async function joined(t, hub, channel, uid, info = { n: uid }) {
  const c = await rawClient(t, hub);
  const r = await c.subscribed(channel, uid ? { channelData: { user_id: uid, user_info: info } } : undefined);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  return c;
}

// The member ids a raw client was told of (subscription_succeeded's ids,
// then its member_added and member_removed), sorted; null before it.
function memberIds(c, ch) {
  let ids = null;
  for (const m of c.msgs) {
    if (m.channel !== ch) continue;
    if (m.event === 'pusher_internal:subscription_succeeded') {
      ids = new Set(JSON.parse(m.data).presence.ids);
    } else if (ids && m.event === 'pusher_internal:member_added') {
      ids.add(JSON.parse(m.data).user_id);
    } else if (ids && m.event === 'pusher_internal:member_removed') {
      ids.delete(JSON.parse(m.data).user_id);
    }
  }
  return ids ? [...ids].sort() : null;
}

// Wait until every node's answer to ask(node) deep-equals want (a value,
// or a function of the node). Returns the answers. REST state in a cluster
// converges within a round trip or two, so tests poll for agreement.
async function agree(nodes, ask, want, msg, timeoutMs = 20000) {
  const { isDeepStrictEqual } = require('node:util');
  let last;
  await waitFor(async () => {
    last = [];
    let same = true;
    for (const n of nodes) {
      const got = await ask(n);
      last.push(got);
      if (!isDeepStrictEqual(got, typeof want === 'function' ? want(n) : want)) same = false;
    }
    return same;
  }, `${msg} on every node`, timeoutMs, 50).catch((e) => {
    throw new Error(`${e.message}; answers: ${JSON.stringify(last)}; wanted ${JSON.stringify(typeof want === 'function' ? nodes.map(want) : want)}`);
  });
  return last;
}

// What a presence subscriber (a RawClient) has been told about a channel,
// replayed in order the way pusher-js keeps its members: the member list
// of subscription_succeeded, then member_added (set) and member_removed
// (delete). contradictions counts events that disagree with the list so
// far (an add of a member already there, a removal of one not there).
function presenceView(c, channel) {
  let members = null;
  const added = {};
  const removed = {};
  let contradictions = 0;
  const log = [];
  for (const m of c.msgs) {
    if (m.channel !== channel) continue;
    if (m.event === 'pusher_internal:subscription_succeeded') {
      const p = JSON.parse(m.data).presence;
      members = new Map(Object.entries(p.hash).map(([k, v]) => [String(k), v]));
      log.push(['list', [...members.keys()].sort()]);
    } else if (m.event === 'pusher_internal:member_added') {
      const d = JSON.parse(m.data);
      const uid = String(d.user_id);
      added[uid] = (added[uid] || 0) + 1;
      if (!members || members.has(uid)) contradictions++;
      if (members) members.set(uid, d.user_info);
      log.push(['+', uid]);
    } else if (m.event === 'pusher_internal:member_removed') {
      const uid = String(JSON.parse(m.data).user_id);
      removed[uid] = (removed[uid] || 0) + 1;
      if (!members || !members.has(uid)) contradictions++;
      if (members) members.delete(uid);
      log.push(['-', uid]);
    }
  }
  return {
    ids: members ? [...members.keys()].sort() : null, members, added, removed,
    contradictions, log,
  };
}

module.exports = {
  startRedis, startNode, contractNode, startCluster, defer, bp, allUp, allDown, drained, webhookMarkers,
  watchClusterLateness,
  joined, memberIds, agree, presenceView,
  freePort: redisLib.freePort, numsub: redisLib.numsub, redisCli: redisLib.redisCli, redisUrl: redisLib.redisUrl,
  scheme: redisLib.scheme, logged,
};
