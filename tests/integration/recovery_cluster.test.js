'use strict';
// Recovery across nodes (issue 35, items 4 and 5; docs/RECOVERY.md "In a
// cluster"): pusher-js (the pinned 8.4 and 8.6) with the helper the hub
// serves, three nodes, one Redis, an app with history.
//
// - Five cuts, each reconnect to another node: a proxy of the test's own
//   (lib/cutproxy.js) sends each new connection to the next node in turn
//   and cuts the client's connection at five seeded random moments of a
//   1,000-event stream that a publisher sends through the SDK to the three
//   nodes in turn, a few hundred a second, on a public and a private
//   channel, with client events from a second client in it. Every event
//   reaches the app's channel.bind handler exactly once, and the events of
//   each origin (the node that took them in) in the order they were
//   published. That is what the design promises in a cluster
//   (docs/PROTOCOL.md 9.1): one origin's events keep their order on every
//   connection; two origins' interleave as Redis delivered them, which for
//   a publisher that alternates nodes is not always its publication order
//   (the diagnostics count how often it was not). No lubdub: message
//   reaches an app handler, no resume fails, the helper counted no
//   duplicate.
// - The client's node killed (kill -9): the client on node 1, events
//   published through nodes 2 and 3, node 1 killed at a seeded random
//   moment, the proxy sending the reconnect to node 2: every event reaches
//   the app exactly once; node 2 resumed both channels and replayed at
//   least what it took in itself while the client was away.
//
// Seeds are printed (t.diagnostic); LUBDUB_TEST_SEED replays one. On a
// failure, lib/cluster.js keeps every node's and Redis's log.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor, configFile } = require('./lib/hub');
const { cutProxy, prng } = require('./lib/cutproxy');
const { startRedis, startNode, allUp } = require('./lib/cluster');
const {
  PUSHER_JS, pusherJs, historyApp, loadHelper, pusherVia, record, cutPoints, stream, clientTraffic,
  assertClientEvents, endAndWait, assertExactlyOncePerOrigin, statOf,
} = require('./lib/recovery');

const N = 1000;
const RATE = 200;
const CHANNELS = ['stream', 'private-stream'];

// A Redis and n nodes n1..nn of the app with history, all up.
async function cluster(t, n = 3) {
  const redis = await startRedis(t);
  const cfg = configFile(t, { apps: [historyApp()] });
  const nodes = [];
  for (let k = 1; k <= n; k++) nodes.push(await startNode(t, redis.url(), `n${k}`, ['--config', cfg]));
  await allUp(nodes);
  return nodes;
}

// The backplane's counters that tell where an event could have gone
// astray (docs/OPERATIONS.md): what a node sent and received, pub/sub
// holes, history writes and reads that failed.
const BACKPLANE = ['state', 'published', 'received', 'own_ignored', 'lost', 'gaps', 'bad',
  'history_write_failed', 'history_read_failed'];

// What the nodes say of recovery and of their Redis link, for the
// diagnostics (and a bug report): per node its resume counters and the
// backplane's counters; the sums. A killed node is left out.
async function recoveryFigures(nodes) {
  const keys = ['resume_sessions', 'resumes', 'resumes_failed', 'replayed_events'];
  const per = {};
  const sum = Object.fromEntries(keys.map((k) => [k, 0]));
  for (const n of nodes) {
    if (n.killed) continue;
    const st = await n.stats();
    const mine = Object.fromEntries(keys.map((k) => [k, statOf(st, k)]));
    for (const k of keys) sum[k] += mine[k] || 0;
    const bp = st.backplane || {};
    const counters = Object.fromEntries(BACKPLANE.map((k) => [k, bp[k]]));
    per[n.id] = { ...mine, history_events: st.history && st.history.events, backplane: counters };
  }
  return { sum, per };
}

for (const { version, module } of PUSHER_JS) {
  test(`pusher-js ${version}, three nodes: 1,000 events, five cuts, each reconnect to another node, exactly once`, async (t) => {
    const { Pusher, version: got } = pusherJs(module);
    assert.equal(got, version);
    const nodes = await cluster(t);
    // Clients are closed with the node that stops first (the last
    // started), so no node stops under a client that would reconnect.
    const last = nodes[nodes.length - 1];
    const { resume } = await loadHelper(t, nodes[0]);
    const proxy = await cutProxy(t, nodes[0], { name: `pusher-js ${version}`, targets: nodes });
    t.diagnostic(`seed ${proxy.seed} (LUBDUB_TEST_SEED=${proxy.seed} replays the cuts)`);
    const client = pusherVia(t, last, Pusher, proxy);
    const helper = resume(client);
    const rec = record(client, CHANNELS, { clientEvents: ['client-seq', 'client-own'] });
    // The sender of client events, on node 2 directly (never cut).
    const sender = pusherVia(t, last, Pusher, nodes[1]);
    const senderCh = sender.subscribe('private-stream');
    await waitFor(() => CHANNELS.every((c) => client.channel(c).subscribed) && senderCh.subscribed,
      'both clients subscribed', 60000);

    const traffic = clientTraffic(client, senderCh);
    const originOf = (seq) => nodes[(seq - 1) % nodes.length].id;
    const points = cutPoints(prng(proxy.seed ^ 0x5eed), N, 5);
    t.diagnostic(`cut points (events published before each cut): ${points.join(', ')}`);
    const started = Date.now();
    const r = await stream(t, nodes[0], {
      channels: CHANNELS, n: N, rate: RATE, proxy, client, points, between: traffic.between,
      publishTo: (seq) => nodes[(seq - 1) % nodes.length],
    });
    const took = Date.now() - started;
    await endAndWait(nodes, rec, CHANNELS, N);

    const { sent, own } = traffic.counts;
    t.diagnostic(`${N} events x ${CHANNELS.length} channels through ${nodes.length} nodes in turn in ` +
      `${took} ms, ${sent} client events (the sender on ${nodes[1].id}), ${own} of the client's own`);
    t.diagnostic(proxy.describe());
    t.diagnostic(`helper: ${JSON.stringify(helper.stats())}; subscription_succeeded per channel ` +
      `${JSON.stringify(rec.subscribed)}`);
    const figures = await recoveryFigures(nodes);
    t.diagnostic(`resumes ${figures.sum.resumes}, replayed events ${figures.sum.replayed_events}, ` +
      `resumes failed ${figures.sum.resumes_failed}; per node: ${JSON.stringify(figures.per)}`);

    assert.equal(r.cuts, 5);
    assert.equal(proxy.cuts, 5);
    assert.ok(proxy.accepted >= 6, `${proxy.accepted} connections: the client came back after each cut`);
    // In turn: the six connections at least went to every node.
    assert.deepEqual(Object.keys(proxy.byTarget).map(Number).sort(), nodes.map((n) => n.port).sort());
    assert.deepEqual(rec.failed, [], 'no resume may fail within the ttl');
    for (const c of CHANNELS) {
      const inversions = assertExactlyOncePerOrigin(rec.seqs[c], N, originOf, c);
      t.diagnostic(`${c}: ${N} events once each, every origin in order; ${inversions} came before ` +
        'an event another node took in earlier');
    }
    await assertClientEvents(rec, traffic);
    assert.deepEqual(rec.client['stream client-seq'], []);
    assert.deepEqual(rec.leaks, [], 'lubdub: messages reached app handlers');
    assert.equal(helper.stats().duplicates, 0, 'the hub sent an event twice (the helper hid it)');
    // What was missed came by the replay (200 events a second, and each
    // reconnect takes pusher-js a second), not only live; the last
    // connection, never cut, resumed both channels.
    assert.ok(figures.sum.resumes >= 2 && figures.sum.replayed_events > 0, JSON.stringify(figures.sum));
    assert.equal(figures.sum.resumes_failed, 0);
  });

  test(`pusher-js ${version}, three nodes: the client's node killed (kill -9), every event once`, async (t) => {
    const { Pusher } = pusherJs(module);
    const nodes = await cluster(t);
    const [n1, n2, n3] = nodes;
    const { resume } = await loadHelper(t, n2);
    const proxy = await cutProxy(t, n1, { name: `kill ${version}`, targets: [n1] });
    const n = 600;
    const killAt = Math.floor(n * (0.2 + 0.7 * prng(proxy.seed)()));
    t.diagnostic(`seed ${proxy.seed}: node 1 killed after event ${killAt} of ${n}`);
    const client = pusherVia(t, n3, Pusher, proxy);
    const helper = resume(client);
    const rec = record(client, CHANNELS);
    await waitFor(() => CHANNELS.every((c) => client.channel(c).subscribed), 'subscribed on node 1', 60000);
    assert.equal(proxy.byTarget[n1.port], 1);

    // Through nodes 2 and 3 in turn; n1 is killed from within the stream,
    // once the client had an event of each channel (it holds a position).
    const publishTo = (seq) => (seq % 2 ? n2 : n3);
    let oldSocket = null;
    let back = false;
    let awayOnN2 = 0;
    const between = async (seq) => {
      if (seq === killAt) {
        await waitFor(() => CHANNELS.every((c) => rec.seqs[c].length > 0), 'an event on each channel', 60000);
        oldSocket = client.connection.socket_id;
        proxy.route([n2]);
        await n1.kill9();
        return;
      }
      if (oldSocket === null || back) return;
      const isBack = () => client.connection.state === 'connected' && client.connection.socket_id !== oldSocket;
      back = isBack();
      // Taken in by node 2 after node 1 died and before the client had
      // even seen its new connection (so before it resubscribed there):
      // in node 2's read of the stream, which follows node 2's own writes.
      if (!back && publishTo(seq) === n2) awayOnN2++;
      // The stream's last events wait for the client: some come live
      // after the resume, whatever the machine's speed.
      if (!back && seq === n - 20) back = await waitFor(isBack, 'the client back on node 2', 30000);
    };
    await stream(t, n2, { channels: CHANNELS, n, rate: RATE, proxy, client, between, publishTo });
    await endAndWait([n2, n3], rec, CHANNELS, n);

    t.diagnostic(proxy.describe());
    t.diagnostic(`helper: ${JSON.stringify(helper.stats())}; subscription_succeeded per channel ` +
      `${JSON.stringify(rec.subscribed)}`);
    const figures = await recoveryFigures(nodes);
    t.diagnostic(`${awayOnN2} events taken in by n2 while the client was away; resumes ` +
      `${figures.sum.resumes}, replayed events ${figures.sum.replayed_events}; per node: ` +
      `${JSON.stringify(figures.per)}`);

    assert.ok(oldSocket, 'node 1 was killed under the client');
    assert.equal(proxy.byTarget[n2.port], proxy.accepted - 1, 'every reconnect went to node 2');
    assert.deepEqual(rec.failed, [], 'no resume may fail within the ttl');
    for (const c of CHANNELS) {
      const inversions = assertExactlyOncePerOrigin(rec.seqs[c], n, (seq) => publishTo(seq).id, c);
      t.diagnostic(`${c}: ${n} events once each, every origin in order; ${inversions} inversions across origins`);
    }
    assert.deepEqual(rec.leaks, [], 'lubdub: messages reached app handlers');
    assert.equal(helper.stats().duplicates, 0, 'the hub sent an event twice (the helper hid it)');
    const on2 = figures.per[n2.id];
    assert.ok(on2.resumes >= CHANNELS.length, `node 2 resumed both channels: ${JSON.stringify(on2)}`);
    assert.equal(on2.resumes_failed, 0);
    assert.ok(on2.replayed_events >= awayOnN2 * CHANNELS.length,
      `node 2 replayed ${on2.replayed_events}, fewer than the ${awayOnN2} events x ${CHANNELS.length} ` +
      'channels it took in while the client was away');
  });
}
