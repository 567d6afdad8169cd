'use strict';
// Cache channels across a Redis cluster (docs/SCALING.md, docs/PROTOCOL.md
// 3.6): a redis-server of our own and three nodes. An event published on
// one node to a cache channel nobody subscribes to anywhere is the first
// event of a pusher-js subscriber on another node; a node started after
// the publish loads it from Redis; a short TTL expires on every node;
// cache_miss stays right; hostile cache envelopes are counted, not kept.
// Raw connections to the test's Redis: TLS under LUBDUB_TEST_REDIS_TLS.
const net = require('./lib/redis').redisNet;
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const {
  APP, pusherClient, connected, rest, trackClient, rawClient, publish,
} = require('./lib/clients');
const {
  startNode, startCluster, bp, allUp, numsub,
} = require('./lib/cluster');

async function allUpAndCaching(redis, nodes) {
  await allUp(nodes);
  // Every node listens to the cache channel, subscribers or not.
  await waitFor(async () => (await numsub(redis, 'lubdub:cache')) === nodes.length,
    `${nodes.length} nodes on lubdub:cache`, 15000, 30);
}


async function cacheInfo(hub, channel) {
  const r = await rest(hub, 'GET', `/apps/${APP.id}/channels/${channel}`,
    { params: { info: 'cache' } });
  assert.equal(r.status, 200, r.body);
  return r.json.cache;
}

// A cache envelope (hub/cluster/cluster_envelope.h, kind 3) as another node writes it.
function cacheEnvelope({ origin, app, channel, payload, ttlMs }) {
  const u16 = (n) => { const b = Buffer.alloc(2); b.writeUInt16BE(n); return b; };
  const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
  const str = (x) => Buffer.from(x);
  const data = str(payload);
  return Buffer.concat([str('LDB1'), Buffer.from([3, 0]), u16(origin.length), str(origin),
    Buffer.alloc(8, 1), Buffer.alloc(8, 0), u16(app.length), str(app),
    u16(channel.length), str(channel), Buffer.alloc(8 + 4 + 8, 0),
    u32(data.length), data, u32(ttlMs)]);
}

// One command with binary arguments over RESP (redis-cli takes argv only),
// after an AUTH as lib/redis.js's admin user: the reply to the command (a
// one-line one).
function respCommand(port, args) {
  return new Promise((resolve, reject) => {
    const parts = [];
    for (const cmd of [['AUTH', 'admin', 'lubdub-admin-pass'], args]) {
      parts.push(Buffer.from(`*${cmd.length}\r\n`));
      for (const a of cmd) {
        const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
        parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
      }
    }
    const sock = net.connect(port, '127.0.0.1', () => sock.write(Buffer.concat(parts)));
    let out = '';
    sock.on('data', (d) => {
      out += d;
      const lines = out.split('\r\n');
      if (lines.length > 2) { sock.end(); resolve(lines[1]); }
    });
    sock.on('error', reject);
  });
}

// A pusher-js subscriber recording every event bound on the channel.
async function pusherSub(t, hub, channel) {
  const client = pusherClient(t, hub);
  await connected(client);
  trackClient(hub, () => client.disconnect());
  const ch = client.subscribe(channel);
  const got = [];
  ch.bind_global((event, data) => got.push({ event, data }));
  await waitFor(() => ch.subscribed, `subscribed to ${channel}`);
  return { client, got };
}

// raw(t, hub): a RawClient opened on hub, closed after the test.
const raw = rawClient;

// The message right after subscription_succeeded on a raw client.
async function firstAfterSucceeded(c, channel) {
  const r = await c.subscribed(channel);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  return c.next(() => true, `the message after succeeded on ${channel}`, 10000,
    c.msgs.indexOf(r) + 1);
}

test('a cache channel is cluster-wide: replicas, a late node, live events once', async (t) => {
  const { redis, nodes } = await startCluster(t, { prefix: 'c' });
  await allUpAndCaching(redis, nodes);

  await t.test('published on A with no subscribers anywhere, a subscriber on C gets it', async () => {
    await publish(nodes[0], { name: 'score', channel: 'cache-score', data: { home: 1 } }, { expect: 200 });
    await publish(nodes[0], { name: 'score', channel: 'cache-score', data: { home: 2 } }, { expect: 200 });
    // Replicas are written when the envelope arrives: node 2 is read
    // below too, so both receivers must have it (on a loaded machine one
    // backplane thread can lag the other).
    await waitFor(async () => (await bp(nodes[1])).cache_received >= 2 &&
      (await bp(nodes[2])).cache_received >= 2, 'nodes 2 and 3 received both entries', 15000);
    const s = await pusherSub(t, nodes[2], 'cache-score');
    await waitFor(() => s.got.some((g) => g.event === 'score'), 'the cached event on node 3');
    const events = s.got.map((g) => g.event).filter((e) => e !== 'pusher:subscription_succeeded');
    assert.deepEqual(events, ['score']);
    assert.deepEqual(s.got.find((g) => g.event === 'score').data, { home: 2 });
    // The wire order on node 2: succeeded, then the cached event.
    const c = await raw(t, nodes[1]);
    const m = await firstAfterSucceeded(c, 'cache-score');
    assert.equal(m.event, 'score');
    assert.deepEqual(JSON.parse(m.data), { home: 2 });
    // The HTTP API answers from any node's replica.
    assert.deepEqual((await cacheInfo(nodes[1], 'cache-score')).data, JSON.stringify({ home: 2 }));
    // And the entry is in Redis, with the writer's TTL.
    const pttl = Number(await redis.cli('PTTL', `lubdub:cache:${APP.id}:cache-score`));
    assert.ok(pttl > 0 && pttl <= 30 * 60 * 1000, `pttl ${pttl}`);
  });

  await t.test('live events on a cache channel reach remote subscribers exactly once', async () => {
    const subs = [await raw(t, nodes[1]), await raw(t, nodes[2])];
    for (const c of subs) await firstAfterSucceeded(c, 'cache-live');
    for (let i = 0; i < 10; i++) {
      await publish(nodes[0], { name: 'score', channel: 'cache-live', data: { i } }, { expect: 200 });
    }
    await publish(nodes[1], { name: 'score', channel: 'cache-live', data: { i: 10 } }, { expect: 200 });
    const got = (c) => c.msgs.filter((m) => m.channel === 'cache-live' && m.event === 'score')
      .map((m) => JSON.parse(m.data).i);
    await waitFor(() => subs.every((c) => got(c).includes(10) && got(c).length >= 11),
      'every event on both nodes', 20000);
    // A marker from node 1 after node 1's last: duplicates would show before it.
    await publish(nodes[0], { name: 'score', channel: 'cache-live', data: { i: 11 } }, { expect: 200 });
    await waitFor(() => subs.every((c) => got(c).includes(11)), 'the marker', 20000);
    for (const c of subs) {
      assert.deepEqual(got(c).filter((i) => i !== 10), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]);
      assert.equal(got(c).filter((i) => i === 10).length, 1);
    }
    // The last event, whichever node published it, on every node.
    await waitFor(async () => {
      for (const n of nodes) {
        const x = await cacheInfo(n, 'cache-live');
        if (!x || x.data !== JSON.stringify({ i: 11 })) return false;
      }
      return true;
    }, 'every replica holds the last event', 15000);
  });

  await t.test('a node started after the publish loads the entries from Redis', async () => {
    const late = await startNode(t, redis.url(), 'c4');
    nodes.push(late);
    await allUpAndCaching(redis, nodes);
    await waitFor(async () => (await bp(late)).cache_loaded >= 2, 'entries loaded', 15000);
    const s = await pusherSub(t, late, 'cache-score');
    await waitFor(() => s.got.some((g) => g.event === 'score'), 'the cached event on the late node');
    assert.deepEqual(s.got.find((g) => g.event === 'score').data, { home: 2 });
    assert.equal(s.got.filter((g) => g.event === 'pusher:cache_miss').length, 0);
  });

  await t.test('cache_miss on an empty cache channel, on every node', async () => {
    for (const n of nodes) {
      const c = await raw(t, n);
      const m = await firstAfterSucceeded(c, 'cache-nothing-here');
      assert.deepEqual(m, { event: 'pusher:cache_miss', channel: 'cache-nothing-here' });
    }
  });

  await t.test('hostile bytes on the cache channel or in a cache key are counted, not kept', async () => {
    const before = (await bp(nodes[0])).bad;
    await redis.cli('PUBLISH', 'lubdub:cache', 'LDB1\x03garbage');
    await redis.cli('PUBLISH', 'lubdub:cache', '');
    await waitFor(async () => (await bp(nodes[0])).bad >= before + 2, 'bad counted');
    await redis.cli('SET', `lubdub:cache:${APP.id}:cache-junk`, 'not an envelope', 'PX', '60000');
    const late = await startNode(t, redis.url(), 'c5');
    nodes.push(late);
    await allUpAndCaching(redis, nodes);
    await waitFor(async () => (await bp(late)).bad >= 1, 'the junk key counted bad', 15000);
    assert.equal(await cacheInfo(late, 'cache-junk'), null);
    assert.deepEqual((await cacheInfo(late, 'cache-score')).data, JSON.stringify({ home: 2 }));
  });
});

test('a node whose Redis connections drop loads the entries again', async (t) => {
  const { redis, nodes } = await startCluster(t, { n: 2, prefix: 'r' });
  await allUpAndCaching(redis, nodes);
  // An entry another node wrote while these two were not listening.
  const channel = 'cache-injected';
  const payload = JSON.stringify({ event: 'score', channel, data: JSON.stringify({ v: 7 }) });
  const env = cacheEnvelope({ origin: 'elsewhere', app: APP.id, channel, payload, ttlMs: 60000 });
  assert.equal(await respCommand(redis.port,
    ['SET', `lubdub:cache:${APP.id}:${channel}`, env, 'PX', 60000]), '+OK');
  assert.equal(await cacheInfo(nodes[0], channel), null);
  const before = await Promise.all(nodes.map(bp));
  await redis.cli('CLIENT', 'KILL', 'TYPE', 'pubsub');
  await waitFor(async () => {
    for (let i = 0; i < nodes.length; i++) {
      const b = await bp(nodes[i]);
      if (b.reconnects <= before[i].reconnects || b.cache_loaded < before[i].cache_loaded + 1) return false;
    }
    return true;
  }, 'both nodes reconnected and loaded the entry', 20000, 50);
  for (const n of nodes) {
    const c = await raw(t, n);
    const m = await firstAfterSucceeded(c, channel);
    assert.equal(m.event, 'score');
    assert.deepEqual(JSON.parse(m.data), { v: 7 });
    const x = await cacheInfo(n, channel);
    assert.ok(x.ttl > 0 && x.ttl <= 60, `ttl ${x.ttl}`);
  }
});

test('a short TTL expires on every node, Redis included', async (t) => {
  const { redis, nodes } = await startCluster(t, { prefix: 't', args: ['--cache-ttl', '3s'] });
  await allUpAndCaching(redis, nodes);
  await publish(nodes[0], { name: 'score', channel: 'cache-brief', data: { v: 1 } }, { expect: 200 });
  await waitFor(async () => (await bp(nodes[1])).cache_received >= 1 &&
    (await bp(nodes[2])).cache_received >= 1, 'replicated on both receivers', 15000);
  // A replica never outlives the writer's TTL.
  for (const n of nodes) {
    const x = await cacheInfo(n, 'cache-brief');
    if (x) assert.ok(x.ttl >= 0 && x.ttl <= 3, `ttl ${x.ttl}`);
  }
  await waitFor(async () => Number(await redis.cli('PTTL', `lubdub:cache:${APP.id}:cache-brief`)) === -2,
    'expired in Redis', 15000, 100);
  await waitFor(async () => {
    for (const n of nodes) if (await cacheInfo(n, 'cache-brief') !== null) return false;
    return true;
  }, 'expired on every node', 15000, 100);
  for (const n of nodes) {
    const c = await raw(t, n);
    const m = await firstAfterSucceeded(c, 'cache-brief');
    assert.deepEqual(m, { event: 'pusher:cache_miss', channel: 'cache-brief' });
  }
  // A node started now loads nothing expired.
  const late = await startNode(t, redis.url(), 't4', ['--cache-ttl', '3s']);
  nodes.push(late);
  await allUpAndCaching(redis, nodes);
  const c = await raw(t, late);
  assert.deepEqual(await firstAfterSucceeded(c, 'cache-brief'),
    { event: 'pusher:cache_miss', channel: 'cache-brief' });
  assert.equal((await bp(late)).cache_loaded, 0);
});
