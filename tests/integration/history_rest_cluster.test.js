'use strict';
// The HTTP API's read of a channel's history in a cluster (docs/PROTOCOL.md
// 6.2, docs/RECOVERY.md "From a backend: the HTTP API"): each node answers
// GET .../channels/{name}/events from the channel's stream in Redis, so
// the answer holds what every node took in, in the stream's order; paging
// with after= crosses origins; complete follows the cluster's rule (a
// trimmed stream is incomplete); 404 as on one node; 503 with Redis away.

const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor, configFile } = require('./lib/hub');
const { APP, serverSdk } = require('./lib/clients');
const { events, refused } = require('./lib/history');
const { startRedis, startNode, allUp } = require('./lib/cluster');

const HISTORY_APP = {
  id: APP.id, key: APP.key, secret: APP.secret,
  history: { ttl: '120s', size: 100, channels: ['news*'] },
};
// Keeps 5 a channel: Redis trims the stream by whole nodes of 100 entries.
const SMALL = {
  id: 'small-id', key: 'small-key', secret: 'small-secret',
  history: { ttl: '120s', size: 5 },
};
const PLAIN = { id: 'plain-id', key: 'plain-key', secret: 'plain-secret' };
// Keeps 1000 a channel: a stream longer than one scan of the script (500).
const LONG = {
  id: 'long-id', key: 'long-key', secret: 'long-secret',
  history: { ttl: '120s', size: 1000 },
};

async function cluster(t) {
  const redis = await startRedis(t);
  const cfg = configFile(t, { apps: [HISTORY_APP, SMALL, PLAIN, LONG] });
  const nodes = [];
  for (let k = 1; k <= 2; k++) nodes.push(await startNode(t, redis.url(), `n${k}`, ['--config', cfg]));
  await allUp(nodes);
  return { redis, nodes };
}

const nums = (body) => body.events.map((e) => JSON.parse(e.data).i);

// A node answers the HTTP API before its backplane thread wrote the event
// to the stream: the order of two nodes' events in the stream is the order
// Redis took them. So before the other node publishes, wait until event i
// is in the stream (one node's events keep their order among themselves).
async function inStream(sdk, channel, i) {
  await waitFor(async () => nums(await events(sdk, channel, { limit: 1000 })).includes(i),
    `event ${i} in the stream of ${channel}`);
}
const origins = (body) => new Set(body.events.map((e) => e.id.split(':')[0]));

test('either node answers with the events both took in, in order; after= pages across origins', async (t) => {
  const { nodes } = await cluster(t);
  const [n1, n2] = nodes;
  const sdk = [serverSdk(n1), serverSdk(n2)];
  const before = Date.now();
  for (let i = 1; i <= 7; i++) {
    await sdk[i % 2].trigger('news', 'seq', { i });
    await inStream(sdk[(i + 1) % 2], 'news', i);
  }
  for (const s of sdk) {
    const all = await events(s, 'news');
    assert.deepEqual(nums(all), [1, 2, 3, 4, 5, 6, 7]);
    assert.equal(origins(all).size, 2);
    assert.equal(all.complete, true);
    assert.ok(all.events.every((e) => e.time_ms >= before - 5000 && e.time_ms <= Date.now() + 5000));
    // Pages of 3: 3, 3, 1, each complete, across both origins.
    const seen = [];
    let after;
    for (let page = 0; page < 4; page++) {
      const body = await events(s, 'news', after ? { after, limit: 3 } : { limit: 3 });
      assert.equal(body.complete, true, JSON.stringify(body));
      seen.push(...nums(body));
      if (body.events.length < 3) break;
      after = body.events[body.events.length - 1].id;
    }
    assert.deepEqual(seen, [1, 2, 3, 4, 5, 6, 7]);
    // since: now minus a second is within the ttl; since=0 reaches back
    // before the stream.
    const recent = await events(s, 'news', { since: before - 1000 });
    assert.deepEqual(nums(recent), [1, 2, 3, 4, 5, 6, 7]);
    assert.equal(recent.complete, true);
    assert.equal((await events(s, 'news', { since: 0 })).complete, false);
    // An id of an origin the stream never had: everything, incomplete.
    const other = await events(s, 'news', { after: 'b00000000:5' });
    assert.deepEqual(nums(other), [1, 2, 3, 4, 5, 6, 7]);
    assert.equal(other.complete, false);
  }
  // A channel with history and nothing written: empty, complete.
  assert.deepEqual(await events(sdk[0], 'news-empty'), { events: [], complete: true });
});

test('a page starts where after= or since= says past the first 500 entries of the stream, and holds limit events', async (t) => {
  const { nodes } = await cluster(t);
  const sdk = [serverSdk(nodes[0], LONG), serverSdk(nodes[1], LONG)];
  // 1..300 through one node, then 301..600 through the other.
  for (let b = 0; b < 60; b++) {
    await sdk[b < 30 ? 0 : 1].triggerBatch(Array.from({ length: 10 }, (_, k) => (
      { channel: 'long', name: 'seq', data: { i: b * 10 + k + 1 } })));
    if (b === 29) await inStream(sdk[1], 'long', 300);
  }
  await inStream(sdk[0], 'long', 600);
  const first = await events(sdk[0], 'long', { limit: 1000 });
  assert.equal(first.events.length, 600);
  assert.deepEqual(nums(first), Array.from({ length: 600 }, (_, k) => k + 1));
  assert.equal(first.complete, true);
  const at = first.events[549];
  const rest = await events(sdk[1], 'long', { after: at.id, limit: 20 });
  assert.deepEqual(nums(rest), Array.from({ length: 20 }, (_, k) => 551 + k));
  assert.equal(rest.complete, true);
  // since= the time of event 580: from the first event kept at or after
  // it, 5 of them.
  const since = first.events[579].time_ms;
  const later = await events(sdk[1], 'long', { since, limit: 5 });
  const from = first.events.findIndex((e) => e.time_ms >= since);
  assert.deepEqual(nums(later), nums(first).slice(from, from + 5));
  assert.equal(later.complete, true);
});

test('a trimmed stream answers what it keeps, incomplete from before the trim; 404 and 503 as documented', async (t) => {
  const { redis, nodes } = await cluster(t);
  const [n1, n2] = nodes;
  const sdk = [serverSdk(n1, SMALL), serverSdk(n2, SMALL)];
  const start = Date.now();
  // 150 events, half through each node: MAXLEN ~ 5 drops whole listpack
  // nodes, so the first 100 go.
  for (let b = 0; b < 15; b++) {
    await sdk[b % 2].triggerBatch(Array.from({ length: 10 }, (_, k) => (
      { channel: 'ticks', name: 'seq', data: { i: b * 10 + k + 1 } })));
    await inStream(sdk[(b + 1) % 2], 'ticks', b * 10 + 10);
  }
  const all = await events(sdk[1], 'ticks', { limit: 1000 });
  assert.ok(all.events.length >= 5 && all.events.length < 150, `${all.events.length} kept`);
  const kept = nums(all);
  assert.equal(kept[kept.length - 1], 150);
  assert.deepEqual(kept, kept.slice().sort((a, b) => a - b));
  assert.equal(all.complete, false, 'trimmed within the ttl');
  assert.equal((await events(sdk[0], 'ticks', { since: start - 1000 })).complete, false);
  // after= a kept id: complete, the rest; after= the last: nothing more.
  const mid = all.events[1];
  const rest = await events(sdk[0], 'ticks', { after: mid.id, limit: 1000 });
  assert.deepEqual(nums(rest), kept.slice(2));
  assert.equal(rest.complete, true);
  const end = await events(sdk[0], 'ticks', { after: all.events[all.events.length - 1].id });
  assert.deepEqual(end.events, []);
  assert.equal(end.complete, true);
  // 404s unchanged.
  await refused(serverSdk(n1, PLAIN), 'ticks', {}, 404, /history is not enabled for this app/);
  await refused(serverSdk(n2), 'other', {}, 404, /history is not enabled for this channel/);
  // Redis away: 503, saying so.
  await redis.stop('SIGKILL');
  await waitFor(async () => {
    try {
      await sdk[0].get({ path: '/channels/ticks/events' });
      return false;
    } catch (e) {
      assert.equal(e.status, 503, e.body);
      assert.match(JSON.parse(e.body).error, /history unavailable/);
      return true;
    }
  }, 'a 503 with Redis away');
});
