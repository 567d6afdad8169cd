'use strict';
// Durable cluster webhooks across a SIGHUP reload (docs/WEBHOOKS.md, "In a
// cluster" and "Reloads"): a redis-server of our own and two nodes with
// one config file. App A starts with two webhooks (/one and /two); the
// reload, sent to both nodes, removes A's /two and adds app B with a
// webhook to its own receiver. Each receiver checks every request with the
// pusher SDK's validator.
//   - B's edges go through Redis like a start-configured app's: its lease
//     is taken, channel_occupied and channel_vacated arrive once each with
//     the stream's ids (`<app>-<entry id>`), and no request is sent twice;
//   - A's /two: its consumer group is destroyed (XINFO GROUPS keeps only
//     /one's) and nothing more is sent to it, while /one goes on;
//   - B removed again by a second reload: its lease is released.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { waitFor } = require('./lib/hub');
const { APP, configFile, rawClient } = require('./lib/clients');
const { startRedis, startCluster, joined } = require('./lib/cluster');
const { startReceiver, edgeOf: strip, isEdge: is } = require('./lib/receiver');

const P = 'lubdub';
const EDGES = ['channel_occupied', 'channel_vacated'];
const B = { id: 'app-b', key: 'key-b', secret: 'secret-b' };
const C = { id: 'app-c', key: 'key-c', secret: 'secret-c' };

// The consumer group names of a stream, from redis-cli's XINFO GROUPS.
async function groups(redis, app) {
  const out = await redis.cli('XINFO', 'GROUPS', `${P}:wh:${app}`);
  return out.split('\n').filter((l) => /^wh-[0-9a-f]{16}$/.test(l)).sort();
}

// Rewrite the config and SIGHUP every node; resolves once each has logged
// the apps' reload line and the sender's.
async function reloadAll(nodes, file, apps) {
  const count = (n, re) => (n.stderr.match(re) || []).length;
  const before = nodes.map((n) => [count(n, /apps: reloaded/g), count(n, /webhooks: reloaded/g)]);
  fs.writeFileSync(file, JSON.stringify({ apps }));
  for (const n of nodes) process.kill(n.pid, 'SIGHUP');
  await waitFor(() => nodes.every((n, k) => count(n, /apps: reloaded/g) > before[k][0] &&
    count(n, /webhooks: reloaded/g) > before[k][1]), 'every node reloaded', 20000, 20);
}

test('a reload adds an app and removes a webhook on every node', async (t) => {
  const redis = await startRedis(t);
  const rxA = await startReceiver(t, APP);
  const rxB = await startReceiver(t, B);
  const hookA = (p) => ({ url: rxA.url(p), event_types: EDGES });
  const appA = { ...APP, webhooks: [hookA('/one'), hookA('/two')] };
  const cfg = configFile(t, { apps: [appA] });
  const { nodes } = await startCluster(t, {
    n: 2, redis,
    args: ['--node-lease', '2s', '--webhook-delay', '200ms', '--webhook-backoff-max', '1s',
      '--config', cfg],
  });
  const holderOf = async (app) => {
    let who = null;
    await waitFor(async () => {
      const id = await redis.cli('GET', `${P}:whl:${app}`);
      who = nodes.find((n) => n.id === id);
      return !!who;
    }, `a node holds ${app}'s webhook lease`, 30000, 50);
    return who;
  };

  // Before: A's two endpoints each get their events through their group.
  await holderOf(APP.id);
  const before = await joined(t, nodes[0], 'pre-room');
  for (const p of ['/one', '/two']) {
    await rxA.waitEvents((e) => e._path === p && is('channel_occupied', 'pre-room')(e), 1,
      `pre-room occupied at ${p}`, 30000);
  }
  await waitFor(async () => (await groups(redis, APP.id)).length === 2, 'two groups', 20000, 50);
  before.close();
  for (const p of ['/one', '/two']) {
    await rxA.waitEvents((e) => e._path === p && is('channel_vacated', 'pre-room')(e), 1,
      `pre-room vacated at ${p}`, 30000);
  }
  const oneGroup = (await groups(redis, APP.id));

  // The reload: A keeps /one only, B comes with its webhook.
  const appB = { ...B, webhooks: [{ url: rxB.url(), event_types: EDGES }] };
  await reloadAll(nodes, cfg, [{ ...APP, webhooks: [hookA('/one')] }, appB]);
  const twoSeen = rxA.requests.filter((r) => r.path === '/two').length;

  // B: its lease is taken, its edges are queued in Redis by the scripts.
  const holderB = await holderOf(B.id);
  const other = nodes.find((n) => n !== holderB);
  const c = await rawClient(t, other, B.key);
  const r = await c.subscribed('b-room', { key: B.key, secret: B.secret });
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  await rxB.waitEvents(is('channel_occupied', 'b-room'), 1, 'b-room occupied', 30000);
  c.close();
  await rxB.waitEvents(is('channel_vacated', 'b-room'), 1, 'b-room vacated', 30000);
  assert.ok(Number(await redis.cli('HGET', `${P}:whn:${B.id}`, 'queued')) >= 2,
    'B\'s edges went through its stream');
  const got = rxB.events();
  assert.deepEqual(got.map(strip), [{ name: 'channel_occupied', channel: 'b-room' },
    { name: 'channel_vacated', channel: 'b-room' }], JSON.stringify(got));
  for (const e of got) assert.match(e.id, new RegExp(`^${B.id}-\\d+-\\d+$`));
  assert.equal(rxB.invalid, 0, 'every request to B valid for the pusher SDK');

  // A's /two: its group goes; /one goes on, /two hears nothing more.
  await waitFor(async () => (await groups(redis, APP.id)).length === 1,
    'the removed webhook\'s group destroyed', 20000, 50);
  const left = await groups(redis, APP.id);
  assert.ok(oneGroup.includes(left[0]), `${left} was there before`);
  const after = await joined(t, nodes[1], 'post-room');
  await rxA.waitEvents((e) => e._path === '/one' && is('channel_occupied', 'post-room')(e), 1,
    'post-room occupied at /one', 30000);
  after.close();
  await rxA.waitEvents((e) => e._path === '/one' && is('channel_vacated', 'post-room')(e), 1,
    'post-room vacated at /one', 30000);
  assert.equal(rxA.requests.filter((q) => q.path === '/two').length, twoSeen,
    'nothing sent to the removed webhook after the reload');
  let destroyed = 0;
  for (const n of nodes) destroyed += (await n.stats()).webhooks.stream.groups_destroyed;
  assert.equal(destroyed, 1);
  assert.ok(nodes.some((n) => /destroyed consumer group wh-[0-9a-f]{16} of a webhook no longer configured/
    .test(n.stderr)), 'the holder logged it');

  // B removed again: its lease is given up, its keys left to expire.
  await reloadAll(nodes, cfg, [{ ...APP, webhooks: [hookA('/one')] }]);
  await waitFor(async () => (await redis.cli('GET', `${P}:whl:${B.id}`)) === '',
    'B\'s lease released', 20000, 50);
  await waitFor(async () => Number(await redis.cli('PTTL', `${P}:wh:${B.id}`)) > 0,
    'B\'s stream expires', 20000, 50);
  assert.equal(rxA.invalid, 0, 'every request to A valid for the pusher SDK');
});

// The reaper follows the reload: an app added by SIGHUP on both nodes has
// the closing edges of a node killed with -9 queued in its stream by the
// survivor's reap script (before, the reaper knew the apps of the start
// only, and the edge was lost).
test('a dead node\'s closing edge of an app a reload added is queued by the reaper', async (t) => {
  const redis = await startRedis(t);
  const rxA = await startReceiver(t, APP);
  const rxC = await startReceiver(t, C);
  const appA = { ...APP, webhooks: [{ url: rxA.url(), event_types: EDGES }] };
  const cfg = configFile(t, { apps: [appA] });
  const { nodes } = await startCluster(t, {
    n: 2, redis,
    args: ['--node-lease', '2s', '--webhook-delay', '200ms', '--webhook-backoff-max', '1s',
      '--config', cfg],
  });
  await reloadAll(nodes, cfg, [appA, { ...C, webhooks: [{ url: rxC.url(), event_types: EDGES }] }]);
  const [n1, n2] = nodes;

  const c = await rawClient(t, n2, C.key);
  const r = await c.subscribed('c-room', { key: C.key, secret: C.secret });
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  await rxC.waitEvents(is('channel_occupied', 'c-room'), 1, 'c-room occupied', 30000);
  const queued = async () => Number(await redis.cli('HGET', `${P}:whn:${C.id}`, 'queued')) || 0;
  const before = await queued();

  await n2.kill9();
  await rxC.waitEvents(is('channel_vacated', 'c-room'), 1, 'c-room vacated by the reaper', 30000);
  await waitFor(async () => (await n1.stats()).backplane.reaped >= 1, 'n1 reaped n2', 20000, 50);
  // A marker through the survivor: once its vacated is in, anything queued
  // before it is too.
  const mc = await rawClient(t, n1, C.key);
  await mc.subscribed('c-marker', { key: C.key, secret: C.secret });
  await rxC.waitEvents(is('channel_occupied', 'c-marker'), 1, 'c-marker occupied', 30000);
  mc.close();
  await rxC.waitEvents(is('channel_vacated', 'c-marker'), 1, 'c-marker vacated', 30000);

  assert.equal(rxC.delivered(is('channel_vacated', 'c-room')).length, 1,
    JSON.stringify(rxC.delivered().map(strip)));
  assert.equal(await queued() - before, 1 + 2, 'the reaper\'s edge and the marker\'s two went through the stream');
  for (const e of rxC.delivered()) assert.match(e.id, new RegExp(`^${C.id}-\\d+-\\d+$`));
  assert.equal(rxC.invalid, 0, 'every request to C valid for the pusher SDK');
});
