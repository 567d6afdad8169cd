'use strict';
// What the cluster tests share (cluster.test.js, cluster_cache.test.js):
// a node started against a Redis URL that must exit 0 when the test ends,
// the /stats backplane block of a node, and a wait until every node of a
// list says its backplane is up.
const { startHub, waitFor } = require('./hub');
// (contractNode, agree and presenceView are for cluster_accept.test.js and
// any other test of the cluster-wide directory.)
const { closeTracked } = require('./clients');

// A two-loop node with the given --node-id; its tracked clients are closed
// and its exit status checked when t ends. extra: more flags.
async function startNode(t, redisUrl, id, extra = []) {
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s',
    '--redis', redisUrl, '--node-id', id, ...extra]);
  t.after(async () => {
    await closeTracked(hub);
    const exit = await hub.stop();
    if (exit.code !== 0) {
      throw new Error(`node ${id} exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-4000)}`);
    }
  });
  return hub;
}

const bp = async (hub) => (await hub.stats()).backplane;

async function allUp(nodes) {
  await waitFor(async () => {
    for (const n of nodes) if ((await bp(n)).state !== 'up') return false;
    return true;
  }, 'every node up', 20000, 50);
}

// A node started as issue 11's contract spells it:
//   lubdub --port P --redis URL --node-id ID   (the default app)
// plus extra flags (a short drain by default, so that cleanup is quick).
// P is a free loopback port chosen here. The node may be killed (kill9),
// stopped and continued (pause/resume) by the test; cleanup continues a
// stopped node, closes its tracked clients, stops it with SIGTERM and
// expects exit 0, unless the test killed it on purpose.
async function contractNode(t, redisUrl, id, extra = ['--drain-timeout', '1s'], opts = {}) {
  const { freePort } = require('./redis');
  const port = await freePort();
  const hub = await startHub(['--port', String(port), '--redis', redisUrl, '--node-id', id,
    ...extra], { exactArgs: true, ...opts });
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
  t.after(async () => {
    hub.resume();
    if (hub.killed) {
      await hub.kill9();
      for (const close of hub.clientCloses || []) {
        try { close(); } catch (_) { /* closed */ }
      }
      hub.clientCloses = [];
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

module.exports = { startNode, bp, allUp, contractNode, agree, presenceView };
