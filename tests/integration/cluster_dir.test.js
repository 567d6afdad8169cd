'use strict';
// The cluster-wide directory (docs/SCALING.md, "The cluster-wide
// directory"): a redis-server of our own and three nodes. A presence user
// on two nodes is one member, subscription_succeeded lists the members of
// every node, REST channel reads answer the same from every node, a
// publication right after subscription_succeeded on another node is never
// missed, member lists converge after Redis restarts mid-presence, webhook
// edges go once cluster-wide, and a join waiting on Redis when it dies is
// answered locally, and joins still waiting at shutdown leave nothing behind.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const {
  APP, rest, publish, pusherClient, connected, rawClient: client, signIn,
} = require('./lib/clients');
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const {
  startRedis, startNode, startCluster, bp, allUp, allDown, joined, memberIds: view, webhookMarkers: markers,
  redisUrl,
} = require('./lib/cluster');

// A raw client in presence channel ch as uid; resolves with the client
// once subscription_succeeded came.
const member = (t, hub, ch, uid, info = { name: uid }) => joined(t, hub, ch, uid, info);

function events(c, ch, name, uid) {
  return c.msgs.filter((m) => m.channel === ch && m.event === name &&
    (uid === undefined || JSON.parse(m.data).user_id === uid)).length;
}

// Equal JSON, whatever the order of object keys.
function canon(v) {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])]));
  }
  return v;
}
const same = (a, b) => JSON.stringify(canon(a)) === JSON.stringify(canon(b));

async function get(hub, path, params = {}) {
  const r = await rest(hub, 'GET', `/apps/${APP.id}${path}`, { params });
  assert.equal(r.status, 200, r.body);
  const j = JSON.parse(r.body);
  // Pusher does not order users; compare them sorted.
  if (Array.isArray(j.users)) j.users.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return j;
}

async function everyNodeSays(nodes, path, params, want, what) {
  let got;
  await waitFor(async () => {
    for (const n of nodes) {
      got = await get(n, path, params);
      if (!same(got, want)) return false;
    }
    return true;
  }, what, 20000, 50).catch((e) => {
    throw new Error(`${e.message}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  });
}

// A TCP proxy to Redis that holds everything a node's subscriber
// connection sends (from its first SUBSCRIBE on) for delayMs, in order:
// that node's SUBSCRIBE confirmations come late, so a join answered
// before its SUBSCRIBE was confirmed would let a publication miss it.
async function slowSubscriberProxy(t, redis, delayMs) {
  const socks = new Set();
  const timers = new Set();
  // Over TLS (LUBDUB_TEST_REDIS_TLS) the proxy ends the node's TLS and
  // opens its own to Redis, so that it still sees the commands.
  const c = redis.tls;
  const pem = (f) => fs.readFileSync(f);
  const listen = (fn) => (c ? tls.createServer({ cert: pem(c.server.cert), key: pem(c.server.key) }, fn)
    : net.createServer(fn));
  const server = listen((client) => {
    const upstream = c ? tls.connect({ host: '127.0.0.1', port: redis.port, ca: pem(c.ca.cert),
      cert: pem(c.client.cert), key: pem(c.client.key) }) : net.connect(redis.port, '127.0.0.1');
    socks.add(client);
    socks.add(upstream);
    let slow = false;
    let chain = Promise.resolve();
    client.on('data', (d) => {
      if (!slow && d.includes('SUBSCRIBE')) slow = true;
      if (!slow) { upstream.write(d); return; }
      chain = chain.then(() => new Promise((resolve) => {
        const tm = setTimeout(() => {
          timers.delete(tm);
          upstream.write(d);
          resolve();
        }, delayMs);
        timers.add(tm);
      }));
    });
    upstream.on('data', (d) => client.write(d));
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const tm of timers) clearTimeout(tm);
    for (const s of socks) s.destroy();
    server.close();
  });
  return server.address().port;
}

test('three nodes: one cluster-wide directory', async (t) => {
  const { redis, nodes } = await startCluster(t);
  await waitFor(async () => (await Promise.all(nodes.map(bp))).every((s) => s.rejoins >= 1),
    'every node rejoined', 20000, 50);

  await t.test('a presence user on two nodes is one member', async () => {
    const ch = 'presence-two';
    const w1 = await member(t, nodes[0], ch, 'w1');
    const w3 = await member(t, nodes[2], ch, 'w3');
    // subscription_succeeded lists members of the other nodes.
    assert.deepEqual(view(w3, ch), ['w1', 'w3']);
    await waitFor(() => events(w1, ch, 'pusher_internal:member_added', 'w3') === 1,
      'w1 hears w3', 15000);
    const a1 = await member(t, nodes[0], ch, 'alice');
    const a2 = await member(t, nodes[1], ch, 'alice');
    assert.deepEqual(view(a2, ch), ['alice', 'w1', 'w3']);
    // pusher-js on the third node sees all three.
    const pj = pusherClient(t, nodes[2], { presence: { user_id: 'pj', user_info: { n: 1 } } });
    await connected(pj);
    const chan = pj.subscribe(ch);
    await new Promise((resolve) => chan.bind('pusher:subscription_succeeded', resolve));
    assert.equal(chan.members.count, 4);
    assert.ok(chan.members.get('alice'));
    // One member_added for alice on each other subscriber, whatever two
    // nodes she joined through; bob's join after it is the marker.
    const bob = await member(t, nodes[1], ch, 'bob');
    for (const w of [w1, w3]) {
      await waitFor(() => events(w, ch, 'pusher_internal:member_added', 'bob') === 1,
        'marker', 15000);
      assert.equal(events(w, ch, 'pusher_internal:member_added', 'alice'), 1);
    }
    // Her first connection leaves: she is still a member everywhere.
    a1.close();
    await waitFor(async () => (await redis.cli('HGET', `lubdub:gm:${APP.id}:${ch}`, 'alice')) === '1',
      'one connection of alice left in redis', 15000);
    bob.close();
    for (const w of [w1, w3]) {
      await waitFor(() => events(w, ch, 'pusher_internal:member_removed', 'bob') === 1,
        'bob removed', 15000);
      assert.equal(events(w, ch, 'pusher_internal:member_removed', 'alice'), 0);
    }
    // Her last one: member_removed once everywhere.
    a2.close();
    for (const w of [w1, w3]) {
      await waitFor(() => events(w, ch, 'pusher_internal:member_removed', 'alice') === 1,
        'alice removed', 15000);
    }
    await waitFor(() => chan.members.count === 3, 'pusher-js sees alice leave', 15000);
    for (const w of [w1, w3]) assert.deepEqual(view(w, ch), ['pj', 'w1', 'w3']);
    pj.unsubscribe(ch);
    for (const w of [w1, w3]) {
      await waitFor(() => events(w, ch, 'pusher_internal:member_removed', 'pj') === 1,
        'pj removed', 15000);
      assert.equal(events(w, ch, 'pusher_internal:member_added', 'alice'), 1);
      assert.equal(events(w, ch, 'pusher_internal:member_removed', 'alice'), 1);
    }
    w1.close();
    w3.close();
    const st = await Promise.all(nodes.map(bp));
    for (const s of st) {
      assert.equal(s.member_gaps, 0);
      assert.equal(s.bad, 0);
      assert.ok(s.member_events > 0);
    }
  });

  await t.test('REST reads answer the same from every node', async () => {
    const subs = [];
    subs.push(await (async () => { const c = await client(t, nodes[0]); await c.subscribed('pub-a'); return c; })());
    subs.push(await (async () => { const c = await client(t, nodes[0]); await c.subscribed('pub-a'); return c; })());
    subs.push(await (async () => { const c = await client(t, nodes[1]); await c.subscribed('pub-a'); return c; })());
    subs.push(await (async () => { const c = await client(t, nodes[2]); await c.subscribed('private-b'); return c; })());
    const ch = 'presence-rest';
    subs.push(await member(t, nodes[0], ch, 'u1'));
    subs.push(await member(t, nodes[1], ch, 'u1'));
    subs.push(await member(t, nodes[2], ch, 'u2'));
    await everyNodeSays(nodes, '/channels/pub-a', { info: 'subscription_count' },
      { occupied: true, subscription_count: 3 }, 'pub-a counted cluster-wide');
    await everyNodeSays(nodes, `/channels/${ch}`, { info: 'subscription_count,user_count' },
      { occupied: true, subscription_count: 3, user_count: 2 }, 'presence counted');
    await everyNodeSays(nodes, `/channels/${ch}/users`, {},
      { users: [{ id: 'u1' }, { id: 'u2' }] }, 'users from every node');
    const all = await get(nodes[1], '/channels');
    assert.ok(all.channels['pub-a'] && all.channels['private-b'] && all.channels[ch], JSON.stringify(all));
    await everyNodeSays(nodes, '/channels', {}, all, 'GET /channels the same everywhere');
    await everyNodeSays(nodes, '/channels', { filter_by_prefix: 'presence-', info: 'user_count' },
      { channels: { [ch]: { user_count: 2 } } }, 'user_count by prefix');
    // info= on publish, from every node.
    for (const n of nodes) {
      const r = await publish(n, { name: 'ev', channel: 'pub-a', data: '{}', info: 'subscription_count' },
        { expect: 200 });
      assert.deepEqual(JSON.parse(r.body), { channels: { 'pub-a': { subscription_count: 3 } } });
    }
    // Vacated: gone from every node's answer.
    for (const c of subs) c.close();
    await everyNodeSays(nodes, '/channels/pub-a', { info: 'subscription_count' },
      { occupied: false, subscription_count: 0 }, 'pub-a vacated everywhere');
    await everyNodeSays(nodes, '/channels', {}, { channels: {} }, 'no channel left');
  });

  await t.test('a publication right after subscription_succeeded is never missed', async () => {
    // The subscribing node reaches Redis through a proxy that delays its
    // subscriber connection by 40 ms; the publisher is node 1.
    const proxyPort = await slowSubscriberProxy(t, redis, 40);
    const slow = await startNode(t, redisUrl(proxyPort), 'n4');
    await allUp([slow]);
    // Fresh channels (each one's first SUBSCRIBE on that node), 50 per
    // connection (under max_subscriptions).
    const N = 200;
    const cs = [];
    let missed = 0;
    for (let i = 0; i < N; i++) {
      if (i % 50 === 0) cs.push(await client(t, slow));
      const c = cs[cs.length - 1];
      const ch = `race-${i}`;
      const ok = await c.subscribed(ch);
      assert.equal(ok.event, 'pusher_internal:subscription_succeeded');
      await publish(nodes[0], { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
    }
    const got = (i) => events(cs[Math.floor(i / 50)], `race-${i}`, 'ev');
    // Each publication either arrives or never will; wait until all did
    // (generously), then count the ones that did not.
    await waitFor(() => {
      missed = 0;
      for (let i = 0; i < N; i++) if (got(i) !== 1) missed++;
      return missed === 0;
    }, 'every publication after subscription_succeeded', 20000, 50).catch(() => {});
    assert.equal(missed, 0, `${missed} of ${N} publications missed`);
    for (const c of cs) c.close();
  });

  await t.test('redis restarted mid-presence: member lists converge', async () => {
    const ch = 'presence-restart';
    const w1 = await member(t, nodes[0], ch, 'w1');
    const w2 = await member(t, nodes[1], ch, 'w2');
    const w3 = await member(t, nodes[2], ch, 'w3');
    await waitFor(() => [w1, w2, w3].every((w) => same(view(w, ch), ['w1', 'w2', 'w3'])),
      'everyone sees everyone', 15000);
    await redis.stop('SIGKILL');
    await allDown(nodes);
    // While down: a user joins on node 2 (served locally), w3 leaves.
    const late = await member(t, nodes[1], ch, 'late');
    w3.close();
    const redis2 = await redis.again();
    await allUp(nodes);
    const want = ['late', 'w1', 'w2'];
    await waitFor(() => [w1, w2].every((w) => same(view(w, ch), want)),
      'the watchers converge', 30000, 50).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify([view(w1, ch), view(w2, ch), w1.msgs.slice(-6)])}`);
    });
    await waitFor(() => same(view(late, ch), want), 'the late joiner converges', 30000, 50);
    await everyNodeSays(nodes, `/channels/${ch}/users`, {},
      { users: want.map((id) => ({ id })) }, 'users after the restart');
    const fresh = await member(t, nodes[2], ch, 'fresh');
    assert.deepEqual(view(fresh, ch), ['fresh', ...want].sort());
    assert.equal(await redis2.cli('HGET', `lubdub:gm:${APP.id}:${ch}`, 'w3'), '');
    for (const c of [w1, w2, late, fresh]) c.close();
  });
});

test('webhook edges are sent once cluster-wide', async (t) => {
  const { startReceiver, edgeOf: strip } = require('./lib/receiver');
  const { configFile } = require('./lib/clients');
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const file = configFile(t, { apps: [{ ...APP, client_events: true, webhooks: [{
    url: rx.url(),
    event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'],
  }] }] });
  const { nodes } = await startCluster(t, { redis, n: 2, prefix: 'wh', args: ['--config', file] });
  const ch = 'presence-hooks';
  // One user through both nodes, one more on the second.
  const a1 = await member(t, nodes[0], ch, 'ann');
  const a2 = await member(t, nodes[1], ch, 'ann');
  const b = await member(t, nodes[1], ch, 'bea');
  await rx.waitEvents(() => true, 3, 'occupied, ann, bea');
  a1.close();
  b.close();
  await rx.waitEvents((e) => e.name === 'member_removed', 1, 'bea removed');
  a2.close();
  await rx.waitEvents((e) => e.name === 'channel_vacated', 1, 'vacated').catch((e) => { throw new Error(e.message + JSON.stringify(rx.delivered().map(strip))); });
  // A marker through every node: anything sent twice came before it.
  await markers(t, nodes, rx, 'dir');
  const got = rx.delivered((e) => e.channel === ch).map(strip);
  const count = (want) => got.filter((e) => same(e, want)).length;
  assert.equal(count({ name: 'channel_occupied', channel: ch }), 1, JSON.stringify(got));
  assert.equal(count({ name: 'member_added', channel: ch, user_id: 'ann' }), 1, JSON.stringify(got));
  assert.equal(count({ name: 'member_added', channel: ch, user_id: 'bea' }), 1, JSON.stringify(got));
  assert.equal(count({ name: 'member_removed', channel: ch, user_id: 'bea' }), 1, JSON.stringify(got));
  assert.equal(count({ name: 'member_removed', channel: ch, user_id: 'ann' }), 1, JSON.stringify(got));
  assert.equal(count({ name: 'channel_vacated', channel: ch }), 1, JSON.stringify(got));
  assert.equal(got.length, 6, JSON.stringify(got));
  assert.equal(rx.invalid, 0);
});

test('a join waiting on Redis when it dies is answered locally', async (t) => {
  const redis = await startRedis(t);
  // The node's SUBSCRIBEs reach Redis only after 3 s: its joins wait.
  const proxyPort = await slowSubscriberProxy(t, redis, 3000);
  const node = await startNode(t, redisUrl(proxyPort), 'p1');
  await allUp([node]);
  const c = await client(t, node);
  const from = c.msgs.length;
  c.subscribe('presence-wait', { channelData: { user_id: 'solo' } });
  await waitFor(async () => (await bp(node)).dir_pending === 1, 'the join waits', 10000, 20);
  await redis.stop('SIGKILL');
  const r = await c.next((m) => m.channel === 'presence-wait', 'the answer', 15000, from);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  assert.deepEqual(JSON.parse(r.data).presence.ids, ['solo']);
  const st = await bp(node);
  assert.equal(st.dir_pending, 0);
  assert.ok(st.dir_local >= 1);
  // Served locally meanwhile: REST answers this node's own state.
  const info = await get(node, '/channels/presence-wait', { info: 'user_count' });
  assert.deepEqual(info, { occupied: true, user_count: 1 });
});

// A user that signs in and goes while its signin still waits for the
// SUBSCRIBE of its user channel (its node unsubscribes the channel before
// Redis confirmed it): the signin and the signout run then, in order.
// They used to stay parked for as long as the Redis connection lasted (a
// client could pile them up, each later op scanning them), since the late
// confirmation of an unsubscribed channel does not count.
test('a signin still waiting when its user goes does not stay parked', async (t) => {
  const redis = await startRedis(t);
  const proxyPort = await slowSubscriberProxy(t, redis, 60000);
  const slow = await startNode(t, redisUrl(proxyPort), 'r1');
  await allUp([slow]);
  const users = [];
  for (const id of ['brief1', 'brief2']) users.push(await signIn(await client(t, slow), id));
  await waitFor(async () => (await bp(slow)).dir_parked === 2, 'two signins parked', 10000, 20);
  for (const c of users) c.close();
  await waitFor(async () => (await slow.stats()).totals.sessions === 0, 'both gone', 10000, 20);
  await waitFor(async () => (await bp(slow)).dir_parked === 0,
    'nothing parked once both users went', 20000, 20);
});

test('joins still waiting on Redis at shutdown: the node exits clean', async (t) => {
  const redis = await startRedis(t);
  // The node's SUBSCRIBEs reach Redis only after 30 s: its joins wait
  // (parked on the SUBSCRIBE) when it is stopped.
  const proxyPort = await slowSubscriberProxy(t, redis, 30000);
  const node = await startNode(t, redisUrl(proxyPort), 'q1', [], { victim: true });
  await allUp([node]);
  const c = await client(t, node);
  c.subscribe('presence-shut', { channelData: { user_id: 'solo' } });
  c.subscribe('private-shut');
  await waitFor(async () => (await bp(node)).dir_pending === 2, 'two joins wait', 10000, 20);
  // SIGTERM: the loops go, then the backplane thread with the joins still
  // parked; each pending record is released (ASan's LeakSanitizer runs at
  // exit: a report fails this file), and the exit status is 0.
  const exit = await node.stop('SIGTERM');
  assert.equal(exit.code, 0, node.stderr.slice(-3000));
  assert.doesNotMatch(node.stderr, /LeakSanitizer|AddressSanitizer/);
});
