'use strict';
// Recovery's wire protocol across nodes (docs/RECOVERY.md "In a cluster"):
// a client that knew events of two origins comes back to the other node
// and gets exactly what it missed, read from the channel's stream in Redis.

const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor, configFile } = require('./lib/hub');
const { APP, serverSdk, rawClient, rest } = require('./lib/clients');
const { startRedis, startNode, allUp } = require('./lib/cluster');

const HISTORY_APP = {
  id: APP.id, key: APP.key, secret: APP.secret,
  history: { ttl: '120s', size: 100 },
};

async function cluster(t, n = 2, history = HISTORY_APP.history) {
  const redis = await startRedis(t);
  const cfg = configFile(t, { apps: [{ ...HISTORY_APP, history }] });
  const nodes = [];
  for (let k = 1; k <= n; k++) nodes.push(await startNode(t, redis.url(), `n${k}`, ['--config', cfg]));
  await allUp(nodes);
  return { redis, nodes };
}

// Two nodes, the second dropping every nth message it receives
// (LUBDUB_TEST_DROP_RX, read at its start), as Redis's pub/sub may.
async function droppingCluster(t, every) {
  const redis = await startRedis(t);
  const cfg = configFile(t, { apps: [HISTORY_APP] });
  const n1 = await startNode(t, redis.url(), 'n1', ['--config', cfg]);
  process.env.LUBDUB_TEST_DROP_RX = String(every);
  let n2;
  try {
    n2 = await startNode(t, redis.url(), 'n2', ['--config', cfg]);
  } finally {
    delete process.env.LUBDUB_TEST_DROP_RX;
  }
  await allUp([n1, n2]);
  return [n1, n2];
}

async function resumer(t, hub, data = {}) {
  const c = await rawClient(t, hub);
  c.send({ event: 'lubdub:resume', data: { v: 1, channels: {}, ...data } });
  return c;
}

const seqs = (c) => c.messages.filter((m) => m.event === 'seq').map((m) => m.data.i);

// The client's position as the helper keeps it: lubdub:pos, then each
// marker's id.
function position(c, channel) {
  const h = {};
  let pending = null;
  for (const m of c.messages) {
    if (m.event === 'lubdub:pos' && m.data.channel === channel) Object.assign(h, m.data.ids);
    else if (m.event === 'lubdub:id') pending = m.data;
    else if (pending && m.channel === channel) { h[pending[0]] = pending[1]; pending = null; }
  }
  return h;
}

test('a client that comes back to another node gets what both nodes took in while it was away, once, in order', async (t) => {
  const { nodes } = await cluster(t);
  const [n1, n2] = nodes;
  const sdk1 = serverSdk(n1);
  const sdk2 = serverSdk(n2);
  const a = await resumer(t, n1);
  const ok = await a.subscribed('news');
  assert.equal(ok.event, 'pusher_internal:subscription_succeeded');
  await waitFor(() => a.find('lubdub:pos'), 'lubdub:pos in a cluster', 60000);
  // Live, from both nodes: each with its marker.
  await sdk1.trigger('news', 'seq', { i: 1 });
  await sdk2.trigger('news', 'seq', { i: 2 });
  await waitFor(() => seqs(a).length === 2, 'two live events', 60000);
  assert.equal(a.all('lubdub:id').length, 2);
  const h = position(a, 'news');
  assert.equal(Object.keys(h).length, 2, JSON.stringify(h));
  a.terminate();
  for (let i = 3; i <= 7; i++) await (i % 2 ? sdk1 : sdk2).trigger('news', 'seq', { i });
  const b = await resumer(t, n2, { away_ms: 100, channels: { news: h } });
  await b.subscribed('news');
  await waitFor(() => b.find('lubdub:resumed'), 'lubdub:resumed', 60000);
  await sdk1.trigger('news', 'seq', { i: 8 });
  await waitFor(() => seqs(b).length === 6, 'the replay and one live event', 60000);
  // Once each, in order per entry node (RECOVERY.md "What is
  // guaranteed"): node 1 took in 3, 5, 7 and node 2 took in 4, 6. The
  // stream may hold 7 before 6: node 2's trigger answers before its
  // stream write reaches Redis, and node 1's next write can overtake it.
  // 8 came after lubdub:resumed, so it is last.
  const got = seqs(b);
  assert.deepEqual([...got].sort((x, y) => x - y), [3, 4, 5, 6, 7, 8], JSON.stringify(got));
  assert.deepEqual(got.filter((i) => i !== 8 && i % 2 === 1), [3, 5, 7], `node 1's order: ${JSON.stringify(got)}`);
  assert.deepEqual(got.filter((i) => i % 2 === 0 && i !== 8), [4, 6], `node 2's order: ${JSON.stringify(got)}`);
  assert.equal(got[got.length - 1], 8, JSON.stringify(got));
  assert.deepEqual(b.find('lubdub:resumed').data, { channel: 'news', replayed: 5 });
  assert.equal(b.count('lubdub:resume_failed'), 0);
  const st = await n2.stats();
  assert.equal(st.totals.resumes, 1);
  assert.equal(st.totals.replayed_events, 5);
});

test('a fresh subscription in a cluster starts at the stream\'s last ids, and a resume from there replays nothing twice', async (t) => {
  const { nodes } = await cluster(t);
  const [n1, n2] = nodes;
  const sdk1 = serverSdk(n1);
  for (let i = 1; i <= 3; i++) await sdk1.trigger('news', 'seq', { i });
  const a = await resumer(t, n2);
  await a.subscribed('news');
  const pos = await waitFor(() => a.find('lubdub:pos'), 'lubdub:pos', 60000);
  assert.ok(Object.keys(pos.data.ids).length <= 1, JSON.stringify(pos.data));
  // What node 1 wrote is in the stream (its writes are asynchronous: one
  // still on its way when a subscribed reaches a live, above its position).
  const kept = await waitFor(async () => {
    const r = await rest(n2, 'GET', `/apps/${APP.id}/channels/news/events`);
    return r.status === 200 && r.json.events.length === 3 && r.json;
  }, 'the three events in the stream', 60000);
  const [origin, last] = kept.events[2].id.split(':');
  // a knows them all: at or under its position, or received live above it.
  await waitFor(() => (position(a, 'news')[origin] || 0) >= Number(last), 'a\'s position past them', 60000);
  const start = pos.data.ids[origin] || 0;
  const live = a.all('lubdub:id').map((m) => m.data[1]);
  assert.ok(live.every((s) => s > start), `live ${live} above ${start}`);
  assert.equal(seqs(a).length, live.length);
  const h = position(a, 'news');
  a.terminate();
  const b = await resumer(t, n1, { away_ms: 50, channels: { news: h } });
  await b.subscribed('news');
  await waitFor(() => b.find('lubdub:resumed'), 'resumed', 60000);
  assert.deepEqual(b.find('lubdub:resumed').data, { channel: 'news', replayed: 0 });
  assert.deepEqual(seqs(b), []);
});

test('a position naming a node whose events are gone from the stream, after a long absence, is told resume_failed', async (t) => {
  const { nodes } = await cluster(t);
  const [n1] = nodes;
  const b = await resumer(t, n1, { away_ms: 3600 * 1000, channels: { news: { b0badc0de: 5 } } });
  await b.subscribed('news');
  const f = await waitFor(() => b.find('lubdub:resume_failed'), 'resume_failed', 60000);
  assert.deepEqual(f.data, { channels: ['news'], reason: 'expired' });
  await waitFor(() => b.find('lubdub:pos'), 'a fresh start', 60000);
});

test('a gap the stream no longer holds (trimmed to its size) is told resume_failed, never replayed in part', async (t) => {
  // MAXLEN ~ trims whole listpack nodes: a size far under the events
  // published leaves the client's position behind for sure.
  const { nodes } = await cluster(t, 2, { ttl: '120s', size: 1 });
  const [n1, n2] = nodes;
  const sdk = serverSdk(n1);
  const a = await resumer(t, n1);
  await a.subscribed('news');
  await waitFor(() => a.find('lubdub:pos'), 'lubdub:pos', 60000);
  await sdk.trigger('news', 'seq', { i: 1 });
  await waitFor(() => seqs(a).length === 1, 'one event', 60000);
  const h = position(a, 'news');
  a.terminate();
  for (let i = 2; i <= 400; i++) await sdk.trigger('news', 'seq', { i });
  const b = await resumer(t, n2, { away_ms: 100, channels: { news: h } });
  await b.subscribed('news');
  const f = await waitFor(() => b.find('lubdub:resume_failed'), 'resume_failed', 60000);
  assert.deepEqual(f.data, { channels: ['news'], reason: 'evicted' });
  const failedAt = b.messages.indexOf(f);
  assert.deepEqual(b.messages.slice(0, failedAt).filter((m) => m.event === 'seq'), [],
    'nothing of the gap before resume_failed');
  await sdk.trigger('news', 'seq', { i: 401 });
  await waitFor(() => seqs(b).includes(401), 'live again', 60000);
  // After the fresh start, only what follows its position: node 1's writes
  // are asynchronous, so the last events published before the resume
  // (400 here) may reach Redis after node 2 read the stream; they are then
  // above the fresh position and come live, once, in order.
  const fresh = b.messages.slice(failedAt);
  const pos = fresh.find((m) => m.event === 'lubdub:pos');
  assert.ok(pos && fresh.indexOf(pos) < fresh.findIndex((m) => m.event === 'seq'), 'lubdub:pos first');
  let marker = null;
  for (const m of fresh) {
    if (m.event === 'lubdub:id') marker = m.data;
    else if (m.event === 'seq') {
      assert.ok(marker && marker[1] > (pos.data.ids[marker[0]] || 0),
        `${m.data.i} (id ${JSON.stringify(marker)}) above the fresh position ${JSON.stringify(pos.data.ids)}`);
      marker = null;
    }
  }
  const got = seqs(b);
  assert.equal(got[got.length - 1], 401, JSON.stringify(got));
  assert.ok(got.every((i, k) => k === 0 || i === got[k - 1] + 1), `once, in order: ${JSON.stringify(got)}`);
});

test('a node that misses publications of Redis\'s pub/sub fills them from the stream: a client that never disconnects gets every one, in order', async (t) => {
  // Node 2 drops every 5th message it receives (LUBDUB_TEST_DROP_RX): the
  // hole is seen at the next one, whose arrival waits for the read.
  const [n1, n2] = await droppingCluster(t, 5);
  const sdk = serverSdk(n1);
  const plain = await rawClient(t, n2);
  await plain.subscribed('news');
  const r = await resumer(t, n2);
  await r.subscribed('news');
  await waitFor(() => r.find('lubdub:pos'), 'lubdub:pos', 60000);
  const N = 60;
  for (let i = 1; i <= N; i++) await sdk.trigger('news', 'seq', { i });
  // The last one may itself be dropped (nothing after it shows the hole):
  // one more, then the first N must all be there.
  await sdk.trigger('news', 'seq', { i: N + 1 });
  await waitFor(() => seqs(plain).includes(N) && seqs(r).includes(N), `event ${N} on node 2`, 60000);
  const want = Array.from({ length: N }, (_, k) => k + 1);
  assert.deepEqual(seqs(plain).slice(0, N), want);
  assert.deepEqual(seqs(r).slice(0, N), want);
  const bp = (await n2.stats()).backplane;
  assert.ok(bp.gaps >= 5, `gaps ${bp.gaps}`);
  assert.ok(bp.gaps_filled >= 5, `gaps_filled ${bp.gaps_filled}`);
  t.diagnostic(`gaps ${bp.gaps}, filled ${bp.gaps_filled}`);
});

test('holes that open while another is being filled are filled too, in the entry node\'s order', async (t) => {
  // Every other message dropped and publications in bursts: more holes
  // open while the first one's read is out (held behind it, each noted).
  const [n1, n2] = await droppingCluster(t, 2);
  const sdk = serverSdk(n1);
  const ref = await rawClient(t, n1);
  await ref.subscribed('news');
  const far = await rawClient(t, n2);
  await far.subscribed('news');
  const N = 48;
  for (let i = 1; i <= N; i += 8) {
    await Promise.all(Array.from({ length: 8 }, (_, k) => sdk.trigger('news', 'seq', { i: i + k })));
  }
  // Two more one at a time: the last of the burst may be a dropped one.
  await sdk.trigger('news', 'seq', { i: N + 1 });
  await sdk.trigger('news', 'seq', { i: N + 2 });
  await waitFor(() => seqs(ref).length === N + 2, 'every event on node 1', 60000);
  const want = seqs(ref).filter((i) => i <= N);
  await waitFor(() => want.every((i) => seqs(far).includes(i)), 'every event on node 2', 60000)
    .catch((e) => { throw new Error(`${e.message}: node 2 got ${seqs(far)}`); });
  assert.deepEqual(seqs(far).filter((i) => i <= N), want, 'node 1\'s order, each once');
  const bp = (await n2.stats()).backplane;
  t.diagnostic(`gaps ${bp.gaps}, filled ${bp.gaps_filled}`);
  assert.ok(bp.gaps_filled >= 10, `gaps_filled ${bp.gaps_filled}`);
});
