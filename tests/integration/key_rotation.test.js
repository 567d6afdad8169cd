'use strict';
// Key rotation (docs/CONFIG.md "Key rotation"): an app of two key/secret
// pairs in "keys". pusher-js clients connect on each key and subscribe to
// private channels with auth signed by their own pair (the pusher SDK as
// the app server); a raw client on one key is also authorized by the
// other pair, and refused with one key's name and another's secret; REST
// is accepted signed with either pair and refused with a wrong secret or
// an unknown key; sign-in works on the second key; webhooks carry the
// first pair's key and signature (checked by the pusher SDK's own
// validator); /stats lists both keys and no secret. Then SIGHUP reloads:
// removing pair 2 closes only key 2's connections (pusher:error 4001,
// close 4001) while key 1's stay and keep receiving, and adding a pair
// lets its key connect at once. Two loops, so every reload crosses loops.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { startHub, waitFor } = require('./lib/hub');
const {
  configFile, pusherClient, rawClient, rawOnLoop, serverSdk, publish, signIn,
  RawClient,
} = require('./lib/clients');
const { startReceiver } = require('./lib/receiver');

const ID = 'rot-app';
const PAIR1 = { id: ID, key: 'rot-key-1', secret: 'rot-secret-1' };
const PAIR2 = { id: ID, key: 'rot-key-2', secret: 'rot-secret-2' };
const PAIR3 = { id: ID, key: 'rot-key-3', secret: 'rot-secret-3' };
const pair = (p) => ({ key: p.key, secret: p.secret });
const creds = (p) => ({ key: p.key, secret: p.secret });

// Rewrite the config file and SIGHUP the hub; resolves with the reload's
// "apps: reloaded" line once the hub has logged it.
async function reload(hub, file, apps) {
  const lines = () => hub.stderr.split('\n').filter((l) => /apps: reloaded|not reloaded/.test(l));
  const before = lines().length;
  fs.writeFileSync(file, JSON.stringify({ apps }));
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => lines().length > before, 'the reload line', 10000);
  return lines().pop();
}

// A pusher-js client on pair p's key, subscribed to channel with auth the
// SDK signs with p; resolves once the subscription succeeded.
async function pusherOn(t, hub, p, channel) {
  const client = pusherClient(t, hub, { app: p });
  const ch = client.subscribe(channel);
  await new Promise((resolve, reject) => {
    ch.bind('pusher:subscription_succeeded', resolve);
    ch.bind('pusher:subscription_error', (e) => reject(new Error(`${channel}: ${JSON.stringify(e)}`)));
  });
  return { client, ch };
}

// The next event name on a pusher-js channel.
const nextEvent = (ch, name) => new Promise((resolve) => ch.bind(name, resolve));

test('two pairs: either key connects, each pair authorizes and signs REST, webhooks by the first', async (t) => {
  // Pair 2's secret comes from a file, by the secret files' rules.
  const file = configFile(t, {});
  const secretFile = path.join(path.dirname(file), 'pair2.secret');
  fs.writeFileSync(secretFile, `${PAIR2.secret}\n`, { mode: 0o600 });
  const rx = await startReceiver(t, PAIR1);
  fs.writeFileSync(file, JSON.stringify({ apps: [{
    id: ID,
    keys: [pair(PAIR1), { key: PAIR2.key, secret_file: secretFile }],
    webhooks: [{ url: rx.url(), event_types: ['channel_occupied'] }],
    client_events: true,
  }] }));
  const hub = await startHub(['--config', file, '--webhook-delay', '0ms'], { t, loops: 2 });

  // pusher-js on each key, authorized by its own pair through the SDK.
  const one = await pusherOn(t, hub, PAIR1, 'private-one');
  const two = await pusherOn(t, hub, PAIR2, 'private-two');
  const got1 = nextEvent(one.ch, 'hello');
  const got2 = nextEvent(two.ch, 'hello');
  // The SDK publishes signed with either pair.
  await serverSdk(hub, PAIR1).trigger('private-one', 'hello', { via: 1 });
  await serverSdk(hub, PAIR2).trigger('private-two', 'hello', { via: 2 });
  assert.deepStrictEqual(await got1, { via: 1 });
  assert.deepStrictEqual(await got2, { via: 2 });

  // A raw client on key 2: authorized by either pair (an app server signs
  // with one pair while clients connect on both keys), refused when the
  // key names one pair and the secret is another's.
  const raw = await rawClient(t, hub, PAIR2.key);
  assert.strictEqual((await raw.subscribed('private-own', creds(PAIR2))).event,
    'pusher_internal:subscription_succeeded');
  assert.strictEqual((await raw.subscribed('private-other', creds(PAIR1))).event,
    'pusher_internal:subscription_succeeded');
  assert.strictEqual((await raw.subscribed('private-mixed',
    { key: PAIR2.key, secret: PAIR1.secret })).event, 'pusher:subscription_error');
  assert.strictEqual((await raw.subscribed('private-unknown',
    { key: 'rot-key-9', secret: PAIR2.secret })).event, 'pusher:subscription_error');
  // Sign-in on key 2, signed with pair 2.
  await signIn(raw, 'user-2', PAIR2);

  // REST: either pair accepted; a wrong secret or an unknown key refused.
  const ev = { name: 'rest', channel: 'private-own', data: 'x' };
  assert.strictEqual((await publish(hub, ev, { app: PAIR1 })).status, 200);
  assert.strictEqual((await publish(hub, ev, { app: PAIR2 })).status, 200);
  assert.strictEqual((await publish(hub, ev, { app: PAIR2, secret: PAIR1.secret })).status, 401);
  assert.strictEqual((await publish(hub, ev, { app: PAIR1, secret: 'wrong' })).status, 401);
  assert.strictEqual((await publish(hub, ev, { app: { ...PAIR1, key: 'rot-key-9' } })).status, 401);
  await waitFor(() => raw.count('rest', 'private-own') === 2, 'both accepted publishes');

  // Webhooks: the first pair's key and signature, valid for the SDK.
  await rx.waitEvents((e) => e.name === 'channel_occupied', 4, 'four channels occupied');
  assert.ok(rx.requests.length > 0);
  assert.strictEqual(rx.invalid, 0, 'every webhook valid for the pusher SDK with pair 1');
  for (const r of rx.requests) assert.strictEqual(r.headers['x-pusher-key'], PAIR1.key);
  const occupied = rx.delivered((e) => e.name === 'channel_occupied').map((e) => e.channel).sort();
  assert.deepStrictEqual(occupied, ['private-one', 'private-other', 'private-own', 'private-two']);

  // /stats lists both keys, first pair first, and never a secret.
  const res = await fetch(hub.url('/stats'));
  const text = await res.text();
  assert.deepStrictEqual(JSON.parse(text).apps[ID].keys, [PAIR1.key, PAIR2.key]);
  assert.ok(!text.includes('rot-secret'), 'no secret in /stats');
});

test('reload: removing pair 2 closes only key 2 (4001), adding pair 3 lets key 3 connect', async (t) => {
  const file = configFile(t, { apps: [{ id: ID, keys: [pair(PAIR1), pair(PAIR2)] }] });
  const hub = await startHub(['--config', file], { t, loops: 2 });
  const k1 = [await rawOnLoop(t, hub, 0, PAIR1.key), await rawOnLoop(t, hub, 1, PAIR1.key)];
  const k2 = [await rawOnLoop(t, hub, 0, PAIR2.key), await rawOnLoop(t, hub, 1, PAIR2.key)];
  for (const c of [...k1, ...k2]) {
    assert.strictEqual((await c.subscribed('private-room', creds(PAIR1))).event,
      'pusher_internal:subscription_succeeded');
  }

  // Pair 2 removed: its two connections get pusher:error 4001 and close
  // 4001; key 1's stay open and keep receiving.
  const line = await reload(hub, file, [{ id: ID, keys: [pair(PAIR1)] }]);
  assert.match(line, /0 added, 0 removed, 1 changed \(rot-app\)/);
  assert.match(hub.stderr, /keys: app rot-app: removed rot-key-2 \(its connections close with 4001\)/);
  for (const c of k2) {
    const err = await c.event('pusher:error');
    assert.strictEqual(err.data.code, 4001);
    assert.strictEqual((await c.whenClosed()).code, 4001);
  }
  assert.strictEqual((await publish(hub, { name: 'after', channel: 'private-room', data: 'x' },
    { app: PAIR1 })).status, 200);
  for (const c of k1) {
    await c.event('after', 'private-room');
    assert.strictEqual(c.closed, null);
  }
  // Key 2 is gone for new connections and REST alike.
  const late = new RawClient(hub.wsUrl(PAIR2.key));
  t.after(() => late.close());
  assert.strictEqual((await late.event('pusher:error')).data.code, 4001);
  assert.strictEqual((await late.whenClosed()).code, 4001);
  assert.strictEqual(late.find('pusher:connection_established'), undefined);
  assert.strictEqual((await publish(hub, { name: 'x', channel: 'c', data: 'x' }, { app: PAIR2 })).status, 401);

  // Pair 3 added in front: key 3 connects at once and its pair authorizes;
  // key 1's connections still stand.
  const line3 = await reload(hub, file, [{ id: ID, keys: [pair(PAIR3), pair(PAIR1)] }]);
  assert.match(line3, /1 changed \(rot-app\)/);
  assert.match(hub.stderr, /keys: app rot-app: added rot-key-3/);
  const k3 = await rawOnLoop(t, hub, 1, PAIR3.key);
  assert.strictEqual((await k3.subscribed('private-room', creds(PAIR3))).event,
    'pusher_internal:subscription_succeeded');
  assert.strictEqual((await publish(hub, { name: 'three', channel: 'private-room', data: 'x' },
    { app: PAIR3 })).status, 200);
  for (const c of [...k1, k3]) {
    await c.event('three', 'private-room');
    assert.strictEqual(c.closed, null);
  }
  await waitFor(async () => (await hub.stats()).apps[ID].sessions === 3,
    'key 1 and key 3 sessions only');
  assert.deepStrictEqual((await hub.stats()).apps[ID].keys, [PAIR3.key, PAIR1.key]);

  // A reload that gives "keys" beside "key" is refused, naming the file,
  // the app and both keys; nothing changes.
  const bad = await reload(hub, file, [{ id: ID, key: PAIR1.key, keys: [pair(PAIR3)] }]);
  assert.match(bad, /SIGHUP: configuration not reloaded.*config\.json: apps\[0\] \(app "rot-app"\): "keys" and "key" are both given/);
  assert.strictEqual((await publish(hub, { name: 'still', channel: 'private-room', data: 'x' },
    { app: PAIR1 })).status, 200);
  await k3.event('still', 'private-room');
});

test('reload: the keys lines name the first 4 apps and count the rest', async (t) => {
  // Seven apps, each gains a pair: four "keys: app" lines, then one line
  // counting the other three (none of them named).
  const apps = (n) => Array.from({ length: 7 }, (_, i) => ({
    id: `many-${i}`,
    keys: Array.from({ length: n }, (__, k) => ({ key: `many-${i}-key-${k}`, secret: `s-${i}-${k}` })),
  }));
  const file = configFile(t, { apps: apps(1) });
  const hub = await startHub(['--config', file], { t, loops: 2 });
  const from = hub.stderr.length;
  const line = await reload(hub, file, apps(2));
  assert.match(line, /7 changed/);
  const out = hub.stderr.slice(from);
  const named = out.split('\n').filter((l) => /keys: app many-/.test(l));
  assert.strictEqual(named.length, 4, out);
  assert.match(out, /keys: 3 more apps' keys changed/);
});
