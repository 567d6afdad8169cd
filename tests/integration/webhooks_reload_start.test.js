'use strict';
// A reload that brings the first webhooks starts the sender (docs/WEBHOOKS.md,
// "Reloads"): a hub started with an app without webhooks, then a SIGHUP
// whose file gives the app a webhook.
//   - one node with --state-dir: channel_occupied and channel_vacated
//     arrive, every request valid for the pusher SDK; then, the receiver
//     failing, a batch is stored, the hub is killed with -9 and restarted:
//     the batch is delivered from the store the reload's sender opened;
//   - two nodes with --redis, both reloaded: the edges go through the app's
//     stream (ids `<app>-<entry id>`), each once.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, waitFor } = require('./lib/hub');
const { APP, configFile, rawClient } = require('./lib/clients');
const { startRedis, startCluster, joined } = require('./lib/cluster');
const { startReceiver, edgeOf: strip, isEdge: is } = require('./lib/receiver');

const EDGES = ['channel_occupied', 'channel_vacated'];
const count = (hub, re) => (hub.stderr.match(re) || []).length;

function stateDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-whstart-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// Rewrite the file and SIGHUP each hub; resolves once each has logged the
// apps' reload line and the sender's.
async function reloadAll(hubs, file, apps) {
  const before = hubs.map((h) => [count(h, /apps: reloaded/g), count(h, /webhooks: reloaded/g)]);
  fs.writeFileSync(file, JSON.stringify({ apps }));
  for (const h of hubs) process.kill(h.pid, 'SIGHUP');
  await waitFor(() => hubs.every((h, k) => count(h, /apps: reloaded/g) > before[k][0] &&
    count(h, /webhooks: reloaded/g) > before[k][1]), 'every hub reloaded', 20000, 20);
}

test('one node: a reload brings the first webhook, the sender starts with its store', async (t) => {
  const dir = stateDir(t);
  const rx = await startReceiver(t, APP);
  const file = configFile(t, { apps: [APP] });
  const args = ['--config', file, '--state-dir', dir, '--webhook-delay', '200ms',
    '--webhook-backoff-max', '1s'];
  const hub = await startHub(args, { t, loops: 2, clean: false });
  assert.match(hub.stderr, /webhooks: none configured; --state-dir is used once a reload brings some/);
  assert.ok(!(await hub.stats()).webhooks, 'no sender before the reload');

  await reloadAll([hub], file, [{ ...APP, webhooks: [{ url: rx.url(), event_types: EDGES }] }]);
  assert.match(hub.stderr, /webhooks: the reloaded apps have the first webhooks since the start; starting the sender/);
  assert.match(hub.stderr, /webhooks\.db/);
  assert.doesNotMatch(hub.stderr, /restart to send them/);

  const c = await rawClient(t, hub, APP.key);
  await c.subscribed('room');
  await rx.waitEvents(is('channel_occupied', 'room'), 1, 'room occupied', 30000);
  c.close();
  await rx.waitEvents(is('channel_vacated', 'room'), 1, 'room vacated', 30000);
  assert.deepEqual(rx.delivered().map(strip), [{ name: 'channel_occupied', channel: 'room' },
    { name: 'channel_vacated', channel: 'room' }]);
  assert.equal((await hub.stats()).webhooks.endpoints.length, 1);

  // The store is the one --state-dir names: a batch kept there across kill -9.
  rx.mode = 'status';
  const k = await rawClient(t, hub, APP.key);
  await k.subscribed('kept');
  await waitFor(async () => (await hub.stats()).webhooks.endpoints[0].failed >= 1, 'a failure',
    30000, 50);
  await hub.stop('SIGKILL');
  rx.mode = 'ok';
  const hub2 = await startHub(args, { t, loops: 2 });
  await rx.waitEvents(is('channel_occupied', 'kept'), 1, 'kept occupied after the restart', 30000);
  await waitFor(async () => (await hub2.stats()).webhooks.endpoints[0].queue_depth === 0, 'drained',
    30000, 50);
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});

test('two nodes with --redis: the reload-started senders go through the stream', async (t) => {
  const P = 'lubdub';
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const cfg = configFile(t, { apps: [APP] });
  const { nodes } = await startCluster(t, {
    n: 2, redis,
    args: ['--node-lease', '2s', '--webhook-delay', '200ms', '--webhook-backoff-max', '1s',
      '--config', cfg],
  });
  await reloadAll(nodes, cfg, [{ ...APP, webhooks: [{ url: rx.url(), event_types: EDGES }] }]);
  await waitFor(async () => nodes.map((n) => n.id)
    .includes(await redis.cli('GET', `${P}:whl:${APP.id}`)), 'a node holds the webhook lease',
  30000, 50);

  const c = await joined(t, nodes[1], 'x-room');
  await rx.waitEvents(is('channel_occupied', 'x-room'), 1, 'x-room occupied', 30000);
  c.close();
  await rx.waitEvents(is('channel_vacated', 'x-room'), 1, 'x-room vacated', 30000);
  assert.ok(Number(await redis.cli('HGET', `${P}:whn:${APP.id}`, 'queued')) >= 2,
    'the edges went through the app\'s stream');
  const got = rx.events();
  assert.deepEqual(got.map(strip), [{ name: 'channel_occupied', channel: 'x-room' },
    { name: 'channel_vacated', channel: 'x-room' }], JSON.stringify(got));
  for (const e of got) assert.match(e.id, new RegExp(`^${APP.id}-\\d+-\\d+$`));
  assert.equal(rx.invalid, 0, 'every request valid for the pusher SDK');
});
