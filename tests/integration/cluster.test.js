'use strict';
// Scale-out through Redis (docs/SCALING.md): a redis-server of our own and
// three nodes, clients spread over them. Every message is counted (exactly
// once per subscriber), socket_id exclusion, client events, sendToUser and
// terminate across nodes, a node without subscribers hears nothing, Redis
// killed and restarted mid-traffic, and a node started before its Redis.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { waitFor, request, BINARY } = require('./lib/hub');
const {
  APP, serverSdk, rest, rawClient: client, signIn, publish,
} = require('./lib/clients');
const {
  startRedis, startNode, startCluster, bp, allUp, freePort, numsub, redisUrl,
} = require('./lib/cluster');
const { promtool } = require('./lib/promtool');

async function subscriber(t, hub, channel) {
  const c = await client(t, hub);
  const r = await c.subscribed(channel);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded');
  return c;
}

// Wait until n nodes hold a Redis subscription for the channel (app-id).
async function heardBy(redis, channel, n) {
  await waitFor(async () => (await numsub(redis, `lubdub:${APP.id}:${channel}`)) === n,
    `${n} nodes subscribed to ${channel}`, 15000, 30);
}

function ids(c, channel) {
  return c.msgs.filter((m) => m.channel === channel && m.event === 'ev')
    .map((m) => JSON.parse(m.data).i);
}


const signedIn = async (t, hub, user) => signIn(await client(t, hub), user);

test('three nodes: delivery, exclusion, client events, users, silence', async (t) => {
  const { redis, nodes } = await startCluster(t);

  await t.test('socket ids are unique and keep the Pusher format', async () => {
    const seen = new Set();
    for (const n of nodes) {
      for (let i = 0; i < 3; i++) {
        const c = await client(t, n);
        assert.match(c.socketId, /^\d+\.\d+$/);
        assert.ok(!seen.has(c.socketId));
        seen.add(c.socketId);
        c.close();
      }
    }
  });

  await t.test('REST and batch events reach every node exactly once', async () => {
    const ch = 'cross-1';
    const subs = [];
    for (const n of nodes) for (let i = 0; i < 2; i++) subs.push(await subscriber(t, n, ch));
    await heardBy(redis, ch, 3);
    const N = 60;
    for (let i = 0; i < N; i++) await publish(nodes[i % 3], { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
    // A batch through the third node.
    const batch = [];
    for (let i = N; i < N + 10; i++) batch.push({ name: 'ev', channel: ch, data: JSON.stringify({ i }) });
    const r = await rest(nodes[2], 'POST', `/apps/${APP.id}/batch_events`, { body: { batch } });
    assert.equal(r.status, 200, r.body);
    // Every event on every subscriber, then a marker from every origin: a
    // duplicate from any node would have arrived before its marker (one
    // publisher's order holds on one channel through Redis).
    await waitFor(() => subs.every((c) => ids(c, ch).length >= N + 10),
      'every event on every subscriber', 20000);
    for (const n of nodes) await publish(n, { name: 'ev', channel: ch, data: { i: -1 } }, { expect: 200 });
    await waitFor(() => subs.every((c) => ids(c, ch).filter((i) => i === -1).length === 3),
      'markers on every subscriber', 20000);
    for (const c of subs) {
      const got = ids(c, ch).filter((i) => i >= 0).sort((a, b) => a - b);
      assert.deepEqual(got, Array.from({ length: N + 10 }, (_, i) => i));
    }
    const st = await Promise.all(nodes.map(bp));
    for (const s of st) {
      assert.equal(s.gaps, 0);
      assert.equal(s.lost, 0);
      assert.equal(s.bad, 0);
      assert.ok(s.own_ignored > 0, 'each node hears its own envelopes and drops them');
    }
  });

  await t.test('socket_id exclusion across nodes', async () => {
    const ch = 'excl-1';
    const a = await subscriber(t, nodes[0], ch);
    const b = await subscriber(t, nodes[1], ch);
    const c = await subscriber(t, nodes[2], ch);
    await heardBy(redis, ch, 3);
    await publish(nodes[0], { name: 'ev', channel: ch, data: { i: 1 }, socket_id: b.socketId }, { expect: 200 });
    await publish(nodes[1], { name: 'ev', channel: ch, data: { i: 2 }, socket_id: b.socketId }, { expect: 200 });
    await waitFor(() => [a, c].every((x) => ids(x, ch).length === 2), 'a and c have both');
    for (const n of nodes) await publish(n, { name: 'ev', channel: ch, data: { i: -1 } }, { expect: 200 });
    await waitFor(() => [a, b, c].every((x) => ids(x, ch).filter((i) => i === -1).length === 3),
      'markers');
    assert.deepEqual(ids(a, ch).filter((i) => i > 0).sort(), [1, 2]);
    assert.deepEqual(ids(c, ch).filter((i) => i > 0).sort(), [1, 2]);
    assert.deepEqual(ids(b, ch).filter((i) => i > 0), []);
  });

  await t.test('client events cross nodes, the sender excluded', async () => {
    const ch = 'private-chat-1';
    const a = await subscriber(t, nodes[0], ch);
    const b = await subscriber(t, nodes[1], ch);
    const c = await subscriber(t, nodes[2], ch);
    await heardBy(redis, ch, 3);
    for (let i = 0; i < 5; i++) a.send({ event: 'client-typing', channel: ch, data: { i } });
    await waitFor(() => b.count('client-typing', ch) === 5 && c.count('client-typing', ch) === 5,
      'client events on the other nodes');
    // A marker from every node. At b and c, n1's marker follows n1's
    // client events through Redis, so a duplicate of one would be in by
    // then; at a, the markers of n2 and n3 reach n1 through Redis after
    // the echo of a's own events, so a copy that n1 failed to drop would
    // be in too.
    for (const n of nodes) await publish(n, { name: 'ev', channel: ch, data: { i: -1 } }, { expect: 200 });
    await waitFor(() => [a, b, c].every((x) => ids(x, ch).filter((i) => i === -1).length === 3),
      'markers');
    assert.equal(a.count('client-typing', ch), 0);
    assert.equal(b.count('client-typing', ch), 5);
    assert.equal(c.count('client-typing', ch), 5);
  });

  await t.test('sendToUser and terminate_connections across nodes', async () => {
    const u1 = await signedIn(t, nodes[1], 'user-7');
    const u2 = await signedIn(t, nodes[2], 'user-7');
    const other = await signedIn(t, nodes[2], 'user-8');
    await heardBy(redis, '#server-to-user-user-7', 2);
    const sdk = serverSdk(nodes[0]);
    const res = await sdk.sendToUser('user-7', 'notice', { n: 1 });
    assert.equal(res.status, 200);
    await waitFor(() => u1.count('notice') === 1 && u2.count('notice') === 1, 'both sockets of the user');
    const term = await sdk.terminateUserConnections('user-7');
    assert.equal(term.status, 200);
    assert.equal((await u1.whenClosed()).code, 4009);
    assert.equal((await u2.whenClosed()).code, 4009);
    assert.equal(other.closed, null);
    assert.equal(other.count('notice'), 0);
  });

  await t.test('garbage published on a lubdub channel is counted, never delivered', async () => {
    const ch = 'hostile-1';
    const a = await subscriber(t, nodes[0], ch);
    await heardBy(redis, ch, 1);
    const before = (await bp(nodes[0])).bad;
    await redis.cli('PUBLISH', `lubdub:${APP.id}:${ch}`, 'LDB1\x01garbage');
    await redis.cli('PUBLISH', `lubdub:${APP.id}:${ch}`, '');
    await waitFor(async () => (await bp(nodes[0])).bad === before + 2, 'bad counted');
    await publish(nodes[1], { name: 'ev', channel: ch, data: { i: 1 } }, { expect: 200 });
    await waitFor(() => ids(a, ch).length === 1, 'the node still serves');
    assert.equal(a.msgs.filter((m) => m.channel === ch && m.event !== 'ev' &&
      !m.event.startsWith('pusher_internal:')).length, 0);
  });

  await t.test('/metrics carries the backplane series and passes promtool', async () => {
    const r = await request('GET', nodes[0].url('/metrics'));
    assert.equal(r.status, 200);
    assert.match(r.body, /^lubdub_backplane_up 1$/m);
    assert.match(r.body, /^lubdub_backplane_published_total [1-9]\d*$/m);
    assert.match(r.body, /^lubdub_backplane_rtt_seconds_count \d+$/m);
    const p = await promtool(r.body);
    assert.equal(p.code, 0, p.out);
  });

  await t.test('a node without subscribers of a channel receives nothing', async () => {
    const ch = 'quiet-1';
    const a = await subscriber(t, nodes[0], ch);
    const b = await subscriber(t, nodes[1], ch);
    await heardBy(redis, ch, 2);
    const before = await Promise.all(nodes.map(bp));
    for (let i = 0; i < 20; i++) await publish(nodes[0], { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
    await waitFor(() => ids(b, ch).length === 20 && ids(a, ch).length === 20, 'b has all 20');
    const after = await Promise.all(nodes.map(bp));
    assert.equal(after[1].received - before[1].received, 20);
    assert.equal(after[2].received - before[2].received, 0, 'node 3 heard nothing');
    assert.equal(after[2].own_ignored - before[2].own_ignored, 0);
    // The last local subscriber leaving unsubscribes the node.
    a.close();
    b.close();
    await heardBy(redis, ch, 0);
  });
});

test('Redis killed and restarted mid-traffic', async (t) => {
  const started = await startCluster(t, { n: 2, prefix: 'r' });
  const [n1, n2] = started.nodes;
  let { redis } = started;
  const ch = 'restart-1';
  const local = await subscriber(t, n1, ch);
  const remote = await subscriber(t, n2, ch);
  await heardBy(redis, ch, 2);
  let i = 0;
  for (; i < 10; i++) await publish(n1, { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
  await waitFor(() => ids(remote, ch).length === 10, 'remote before the outage');
  // Joined (its REJOIN done): what the outage's /readyz below is told from.
  await waitFor(async () => (await request('GET', n1.url('/readyz'))).status === 200, 'n1 ready');

  await redis.stop('SIGKILL');
  await waitFor(async () => (await bp(n1)).state === 'down' && (await bp(n2)).state === 'down',
    'both nodes see Redis down');
  const ready = await request('GET', n1.url('/readyz'));
  assert.equal(ready.status, 200, 'a Redis outage keeps nodes in the load balancer');
  assert.match(ready.body, /^degraded: redis down since \S+Z \(.+\); serving local subscribers only\n$/);
  // Local delivery goes on, every message.
  for (; i < 30; i++) await publish(n1, { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
  await waitFor(() => ids(local, ch).length >= 30, 'local delivery during the outage');
  // Counted on n1's backplane thread when it takes each publish off its
  // queue with Redis down, after the REST answer.
  await waitFor(async () => (await bp(n1)).lost >= 1, 'cross-node messages counted lost');

  redis = await redis.again();
  await allUp([n1, n2]);
  await heardBy(redis, ch, 2);
  const s1 = await bp(n1);
  assert.ok(s1.reconnects >= 1);
  for (; i < 40; i++) await publish(n1, { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
  await waitFor(() => ids(remote, ch).includes(39) && ids(local, ch).length >= 40,
    'cross-node delivery resumed');
  // The local subscriber may sit on the other loop: order across REST
  // requests is not promised, every message once is.
  assert.deepEqual(ids(local, ch).sort((x, y) => x - y), Array.from({ length: 40 }, (_, k) => k));
  const got = ids(remote, ch);
  assert.deepEqual(got, [...Array.from({ length: 10 }, (_, k) => k), ...Array.from({ length: 10 }, (_, k) => 30 + k)]);
  // The envelopes lost in the outage show as a gap on the receiver.
  assert.ok((await bp(n2)).gaps >= 1);
  // One line per state change, not one per failed retry.
  const downs = n1.stderr.split('\n').filter((l) => /backplane: down/.test(l));
  assert.equal(downs.length, 1, n1.stderr);
});

test('Redis stopped (SIGSTOP): nodes notice by PING, local delivery never waits', async (t) => {
  const { redis, nodes: [n1, n2] } = await startCluster(t, { n: 2, prefix: 's' });
  const ch = 'stall-1';
  const local = await subscriber(t, n1, ch);
  const remote = await subscriber(t, n2, ch);
  await heardBy(redis, ch, 2);
  redis.pause();
  // Redis takes nothing now; publishing and local delivery go on.
  for (let i = 0; i < 20; i++) await publish(n1, { name: 'ev', channel: ch, data: { i } }, { expect: 200 });
  await waitFor(() => ids(local, ch).length >= 20, 'local delivery while Redis hangs');
  await waitFor(async () => (await bp(n1)).state === 'down', 'n1 sees Redis down (no PING reply)', 20000);
  redis.resume();
  await allUp([n1, n2]);
  await heardBy(redis, ch, 2);
  await publish(n1, { name: 'ev', channel: ch, data: { i: 100 } }, { expect: 200 });
  await waitFor(() => ids(remote, ch).includes(100), 'cross-node delivery after SIGCONT');
  assert.ok(n1.stderr.includes('no reply to PING'), n1.stderr);
});

test('a node started before its Redis serves locally, then joins', async (t) => {
  const port = await freePort();
  const n1 = await startNode(t, redisUrl(port), 'early');
  const s = await bp(n1);
  assert.equal(s.state, 'down');
  assert.equal(s.up, 0);
  const a = await subscriber(t, n1, 'early-1');
  await publish(n1, { name: 'ev', channel: 'early-1', data: { i: 1 } }, { expect: 200 });
  await waitFor(() => ids(a, 'early-1').length === 1, 'local delivery without Redis');
  await waitFor(() => /backplane: redis 127\.0\.0\.1:\d+ unreachable/.test(n1.stderr), 'the one log line');
  const redis = await startRedis(t, { port });
  await allUp([n1]);
  await heardBy(redis, 'early-1', 1);
  assert.equal(n1.stderr.split('\n').filter((l) => /unreachable/.test(l)).length, 1);
});

test('a refused password: degraded, one line; the right one connects', async (t) => {
  const redis = await startRedis(t, { extra: ['--requirepass', 's3cret'] });
  const bad = await startNode(t, `${redis.scheme}://:wrong@127.0.0.1:${redis.port}/0`, 'badpass');
  await waitFor(() => /backplane: redis .* unreachable \(.*(WRONGPASS|invalid|password).*\)/i.test(bad.stderr),
    'auth failure logged');
  assert.equal((await bp(bad)).state, 'down');
  const good = await startNode(t, `${redis.scheme}://:s3cret@127.0.0.1:${redis.port}/0`, 'goodpass');
  await allUp([good]);
});

test('--check-config refuses a bad Redis URL in one line', () => {
  for (const [url, re] of [
    ['http://x:1/0', /--redis: not a redis:\/\/ URL/],
    ['redis://127.0.0.1:99999/0', /--redis: port must be 1\.\.65535/],
    ['redis://127.0.0.1:6379/x', /--redis: db must be/],
    ['redis://:6379/0', /--redis: no host/],
  ]) {
    const r = spawnSync(BINARY, ['--check-config', '--redis', url], { encoding: 'utf8' });
    assert.equal(r.status, 2, url);
    assert.match(r.stderr, re);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  }
  const env = spawnSync(BINARY, ['--check-config'], {
    encoding: 'utf8', env: { ...process.env, LUBDUB_REDIS_URL: 'redis//nope' },
  });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /--redis: not a redis:\/\/ URL/);
  const ok = spawnSync(BINARY, ['--check-config', '--redis', 'redis://u:p%40ss@[::1]:6380/3',
    '--node-id', 'n1', '--redis-prefix', 'blue:lubdub'], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  const id = spawnSync(BINARY, ['--check-config', '--node-id', 'bad id'], { encoding: 'utf8' });
  assert.equal(id.status, 2);
  assert.match(id.stderr, /--node-id: 1 to 64 characters/);
});
