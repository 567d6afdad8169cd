'use strict';
// Webhooks in a cluster (issue 12, docs/SCALING.md "Webhooks"): a
// redis-server of our own and three nodes (--redis, --node-id n1..n3) with
// the same app and one webhook to one receiver (every request checked with
// the pusher SDK's validator). Clients on all three nodes subscribe and
// leave public channels and a presence channel with users on two nodes:
// the receiver gets exactly one channel_occupied and one channel_vacated
// per channel and one member_added and one member_removed per user,
// whichever node made the edge. Then kill -9 of the node holding a
// channel's last subscriber and a user's last connection: exactly one
// channel_vacated and one member_removed, sent by the reaper.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const { APP, configFile } = require('./lib/clients');
const {
  startRedis, startNode, startCluster, bp, allUp, joined, drained, webhookMarkers: markers,
} = require('./lib/cluster');
const { startReceiver, edgeOf: strip, isEdge: is } = require('./lib/receiver');

const P = 'lubdub';
const LEASE = ['--node-lease', '2s'];
const TYPES = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'];
// The delay path is exercised, but short: a test waits on it.
const DELAY = ['--webhook-delay', '200ms'];

async function setup(t) {
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const cfg = configFile(t, { apps: [{ ...APP, webhooks: [{ url: rx.url(), event_types: TYPES }] }] });
  return { redis, rx, args: [...LEASE, ...DELAY, '--config', cfg] };
}

test('three nodes: each edge is sent once, whichever node made it', async (t) => {
  const { rx, redis, args } = await setup(t);
  const { nodes } = await startCluster(t, { redis, args });

  // Three public channels: channel k is opened through node k and closed
  // through node k + 1, with a subscriber on every node in between.
  const pubs = [0, 1, 2].map((k) => `wh-pub-${k}`);
  const subs = {};
  for (const [k, ch] of pubs.entries()) {
    subs[ch] = [];
    for (let j = 0; j < 3; j++) subs[ch].push(await joined(t, nodes[(k + j) % 3], ch));
  }
  // Presence: ann on n1 and n2, bea on n2 and n3, cid on n3 only.
  const pres = 'presence-wh';
  const ann1 = await joined(t, nodes[0], pres, 'ann');
  const ann2 = await joined(t, nodes[1], pres, 'ann');
  const bea2 = await joined(t, nodes[1], pres, 'bea');
  const bea3 = await joined(t, nodes[2], pres, 'bea');
  const cid3 = await joined(t, nodes[2], pres, 'cid');
  await rx.waitEvents((e) => e.name === 'channel_occupied', 4, 'four channels occupied', 30000);
  await rx.waitEvents((e) => e.name === 'member_added', 3, 'three members added', 30000);

  // Leaves: the first two subscribers of each public channel, then the
  // last one (on node k + 1 for channel k: subs[ch][1] was joined there
  // second, so close in the order 0, 2, 1).
  for (const ch of pubs) {
    subs[ch][0].close();
    subs[ch][2].close();
  }
  for (const ch of pubs) subs[ch][1].close();
  ann1.close();
  bea3.close();
  cid3.close();
  await rx.waitEvents(is('member_removed', pres, 'cid'), 1, 'cid removed', 30000);
  ann2.close();
  bea2.close();
  await rx.waitEvents((e) => e.name === 'channel_vacated' && !e.channel.startsWith('marker'),
    4, 'four channels vacated', 30000);
  await markers(t, nodes, rx, 'a');

  const got = rx.delivered((e) => !e.channel.startsWith('marker')).map(strip);
  const count = (pred) => got.filter(pred).length;
  for (const ch of [...pubs, pres]) {
    assert.equal(count(is('channel_occupied', ch)), 1, `${ch} occupied once: ${JSON.stringify(got)}`);
    assert.equal(count(is('channel_vacated', ch)), 1, `${ch} vacated once: ${JSON.stringify(got)}`);
  }
  for (const u of ['ann', 'bea', 'cid']) {
    assert.equal(count(is('member_added', pres, u)), 1, `${u} added once: ${JSON.stringify(got)}`);
    assert.equal(count(is('member_removed', pres, u)), 1, `${u} removed once: ${JSON.stringify(got)}`);
  }
  assert.equal(got.length, 4 * 2 + 3 * 2, JSON.stringify(got));
  // No edge was queued twice: what the scripts put in the app's stream
  // (docs/WEBHOOKS.md, "In a cluster") is what the receiver has (markers
  // included), and no node's local engine made any.
  const queued = Number(await redis.cli('HGET', `${P}:whn:${APP.id}`, 'queued'));
  assert.equal(queued, rx.delivered().length, `queued ${queued}, delivered ${JSON.stringify(rx.delivered().map(strip))}`);
  for (const n of nodes) assert.equal((await n.stats()).webhooks.events_enqueued, 0);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('kill -9 of the node with the last subscriber: one vacated and one removed, from the reaper', async (t) => {
  const { rx, redis, args } = await setup(t);
  const nodes = [];
  for (let k = 1; k <= 2; k++) nodes.push(await startNode(t, redis.url(), `n${k}`, args));
  // The victim is killed on purpose: stopped by PID whatever happens.
  const victim = await startNode(t, redis.url(), 'n3', args, { victim: true });
  await allUp([...nodes, victim]);

  const ch = 'wh-dead';
  const pres = 'presence-dead';
  const p1 = await joined(t, nodes[0], ch);
  const p3 = await joined(t, victim, ch);
  const d2 = await joined(t, nodes[1], pres, 'dan');
  const d3 = await joined(t, victim, pres, 'dan');
  const e1 = await joined(t, nodes[0], pres, 'eve'); // stays: never removed
  await rx.waitEvents(is('channel_occupied', ch), 1, `${ch} occupied`, 30000);
  await rx.waitEvents(is('member_added', pres, 'dan'), 1, 'dan added', 30000);
  await rx.waitEvents(is('member_added', pres, 'eve'), 1, 'eve added', 30000);
  // The survivors' subscriber and connection leave; wait until Redis has
  // their leaves, so the victim holds the last of each.
  p1.close();
  d2.close();
  await waitFor(async () => (await redis.cli('HGET', `${P}:gs:${APP.id}`, ch)) === '1' &&
    (await redis.cli('HGET', `${P}:gm:${APP.id}:${pres}`, 'dan')) === '1',
  'the victim holds the last subscriber and dan\'s last connection', 20000, 50);
  await drained([...nodes, victim]);
  assert.equal(rx.delivered(is('channel_vacated', ch)).length, 0);
  assert.equal(rx.delivered(is('member_removed', pres)).length, 0);

  const reaped = async () => {
    let n = 0;
    for (const h of nodes) n += (await bp(h)).reaped;
    return n;
  };
  const before = await reaped();
  const queuedBefore = Number(await redis.cli('HGET', `${P}:whn:${APP.id}`, 'queued'));
  await victim.kill9();
  void p3; void d3;
  await rx.waitEvents(is('channel_vacated', ch), 1, `${ch} vacated by the reaper`, 30000);
  await rx.waitEvents(is('member_removed', pres, 'dan'), 1, 'dan removed by the reaper', 30000);
  await waitFor(async () => (await reaped()) === before + 1, 'one node reaped', 20000, 50);
  await markers(t, nodes, rx, 'k');

  assert.equal(rx.delivered(is('channel_vacated', ch)).length, 1, JSON.stringify(rx.delivered().map(strip)));
  assert.equal(rx.delivered(is('member_removed', pres, 'dan')).length, 1, JSON.stringify(rx.delivered().map(strip)));
  assert.equal(rx.delivered(is('member_removed', pres, 'eve')).length, 0);
  assert.equal(rx.delivered(is('channel_vacated', pres)).length, 0);
  assert.equal(rx.delivered(is('channel_occupied', ch)).length, 1);
  assert.equal(rx.delivered(is('member_added', pres, 'dan')).length, 1);
  // Both edges were queued once, by the reap script: the stream grew by
  // them and the two markers' four edges.
  const reaper = [];
  for (const h of nodes) reaper.push((await bp(h)).reaped);
  assert.ok(reaper.some((r) => r > 0), `a reaper among ${JSON.stringify(reaper)}`);
  const grew = Number(await redis.cli('HGET', `${P}:whn:${APP.id}`, 'queued')) - queuedBefore;
  assert.equal(grew, 2 + 4, `the stream grew by ${grew}`);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
  e1.close();
});
