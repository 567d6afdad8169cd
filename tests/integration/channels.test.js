'use strict';
// Channel classes end to end with unmodified clients, across two loops:
// pusher-js 8 subscribers, the pusher 5 SDK publishing and authorising
// (public, private, presence, private-encrypted), plus the subscribe rules
// checked on the wire with a raw client: idempotent re-subscribe,
// unsubscribe, name validation and bad signatures.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const {
  serverSdk, pusherOnLoop, pusherClient, connected, rawClient,
  rawOnLoop, loopOf, bothLoopsBusy,
} = require('./lib/clients');

// One subscriber on each loop; a REST publish reaches both.
async function relayOnBothLoops(t, hub, channel, clientOpts = {}) {
  const a = await pusherOnLoop(t, hub, 0, clientOpts);
  const b = await pusherOnLoop(t, hub, 1, clientOpts);
  await bothLoopsBusy(hub);
  const got = { a: [], b: [] };
  const chA = a.subscribe(channel);
  const chB = b.subscribe(channel);
  chA.bind('evt', (d) => got.a.push(d));
  chB.bind('evt', (d) => got.b.push(d));
  await waitFor(() => chA.subscribed && chB.subscribed, `both subscribed to ${channel}`);
  const sdk = serverSdk(hub);
  const res = await sdk.trigger(channel, 'evt', { n: 1, text: 'héllo "quoted" \\ ✓' });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {});
  await waitFor(() => got.a.length === 1 && got.b.length === 1, `delivery on ${channel}`);
  assert.deepEqual(got.a[0], { n: 1, text: 'héllo "quoted" \\ ✓' });
  assert.deepEqual(got.b[0], got.a[0]);
  return { a, b, chA, chB };
}

test('public channel: REST publish reaches pusher-js on both loops', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  await relayOnBothLoops(t, hub, 'public-news');
});

test('private channel: SDK-signed auth, relay on both loops', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  await relayOnBothLoops(t, hub, 'private-orders');
});

test('presence channel: relay on both loops, members seen from each side', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const a = await pusherOnLoop(t, hub, 0, { presence: { user_id: 'u-a', user_info: { name: 'A' } } });
  const b = await pusherOnLoop(t, hub, 1, { presence: { user_id: 7, user_info: { name: 'B' } } });
  const chA = a.subscribe('presence-room');
  await waitFor(() => chA.subscribed, 'a subscribed');
  const chB = b.subscribe('presence-room');
  await waitFor(() => chB.subscribed, 'b subscribed');
  await waitFor(() => chA.members.count === 2, 'a sees 2 members');
  assert.equal(chB.members.count, 2);
  // Numeric user ids are canonicalised to strings (docs/PROTOCOL.md 3.4).
  assert.deepEqual(chB.members.get('7').info, { name: 'B' });
  assert.deepEqual(chA.members.get('7').info, { name: 'B' });
  assert.deepEqual(chB.members.get('u-a').info, { name: 'A' });
  const got = [];
  chA.bind('evt', (d) => got.push(['a', d]));
  chB.bind('evt', (d) => got.push(['b', d]));
  await serverSdk(hub).trigger('presence-room', 'evt', 'plain string');
  await waitFor(() => got.length === 2, 'both got the event');
  assert.deepEqual(got.map((g) => g[1]), ['plain string', 'plain string']);
});

test('private-encrypted channel: SDK encrypts, hub relays ciphertext, pusher-js decrypts', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const { a, b } = await relayOnBothLoops(t, hub, 'private-encrypted-vault');
  assert.ok(a && b);
  // The hub saw only ciphertext: a raw subscriber receives the envelope.
  const raw = await rawClient(t, hub);
  const r = await raw.subscribed('private-encrypted-vault');
  assert.equal(r.event, 'pusher_internal:subscription_succeeded');
  // The marker has '_', which base64 never produces, so the check below
  // cannot be fooled by ciphertext that happens to spell it.
  await serverSdk(hub).trigger('private-encrypted-vault', 'evt', { secret: 'plain_text_marker' });
  const m = await raw.event('evt', 'private-encrypted-vault');
  const env = JSON.parse(m.data);
  assert.ok(typeof env.nonce === 'string' && typeof env.ciphertext === 'string');
  assert.ok(!m.data.includes('plain_text_marker'));
  assert.ok(!m.data.includes('secret'));
});

test('re-subscribe is idempotent: success again, one delivery per event', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = await rawClient(t, hub);
  for (const ch of ['pub-x', 'private-x']) {
    assert.equal((await c.subscribed(ch)).event, 'pusher_internal:subscription_succeeded');
    const again = await c.subscribed(ch);
    assert.equal(again.event, 'pusher_internal:subscription_succeeded');
    assert.equal(again.data, '{}');
  }
  const p1 = await c.subscribed('presence-x', { channelData: { user_id: 'u1' } });
  const p2 = await c.subscribed('presence-x', { channelData: { user_id: 'u1' } });
  assert.deepEqual(JSON.parse(p2.data), JSON.parse(p1.data));
  assert.deepEqual(JSON.parse(p2.data).presence, { ids: ['u1'], hash: { u1: {} }, count: 1 });
  const sdk = serverSdk(hub);
  await sdk.trigger(['pub-x', 'private-x', 'presence-x'], 'once', 'x');
  await sdk.trigger('pub-x', 'marker', 'm');
  await c.event('marker', 'pub-x');
  assert.equal(c.count('once'), 3, 'one delivery per channel');
  const info = await sdk.get({ path: '/channels/private-x', params: { info: 'subscription_count' } });
  assert.deepEqual(await info.json(), { occupied: true, subscription_count: 1 });
  const pinfo = await sdk.get({ path: '/channels/presence-x', params: { info: 'user_count' } });
  assert.deepEqual(await pinfo.json(), { occupied: true, user_count: 1 });
});

test('unsubscribe: no more events, channel vacated', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sub = await rawOnLoop(t, hub, 1);
  await sub.subscribed('news');
  await sub.subscribed('marker');
  const sdk = serverSdk(hub);
  await sdk.trigger('news', 'before', '1');
  await sub.event('before', 'news');
  sub.send({ event: 'pusher:unsubscribe', data: { channel: 'news' } });
  await waitFor(async () => {
    const r = await sdk.get({ path: '/channels/news' });
    return (await r.json()).occupied === false;
  }, 'news vacated');
  await sdk.trigger('news', 'after', '2');
  await sdk.trigger('marker', 'marker', '3');
  await sub.event('marker', 'marker');
  assert.equal(sub.count('after'), 0);
  // Unsubscribing from a channel never joined is silently ignored.
  sub.send({ event: 'pusher:unsubscribe', data: { channel: 'never' } });
  sub.send({ event: 'pusher:ping', data: {} });
  await sub.event('pusher:pong');
  assert.equal(sub.count('pusher:error'), 0);
});

test('pusher-js unsubscribe stops delivery', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = pusherClient(t, hub);
  await connected(c);
  const got = [];
  const ch = c.subscribe('private-stop');
  ch.bind('evt', (d) => got.push(d));
  const marker = c.subscribe('marker');
  const marks = [];
  marker.bind('m', (d) => marks.push(d));
  await waitFor(() => ch.subscribed && marker.subscribed, 'subscribed');
  const sdk = serverSdk(hub);
  await sdk.trigger('private-stop', 'evt', 1);
  await waitFor(() => got.length === 1, 'first event');
  c.unsubscribe('private-stop');
  await waitFor(async () => !(await (await sdk.get({ path: '/channels/private-stop' })).json()).occupied,
    'vacated');
  await sdk.trigger('private-stop', 'evt', 2);
  await sdk.trigger('marker', 'm', 'x');
  await waitFor(() => marks.length === 1, 'marker');
  assert.deepEqual(got, [1]);
});

test('channel names: too long or bad characters give pusher:subscription_error', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = await rawClient(t, hub);
  const cases = ['a'.repeat(201), 'bad name', 'bad/slash', 'ünïcode', 'private-a*b',
    '#not-a-user-channel', ''];
  for (const name of cases) {
    const r = await c.subscribed(name);
    assert.equal(r.event, 'pusher:subscription_error', name);
    assert.equal(r.data.type, 'InvalidChannel');
    assert.equal(r.data.status, 4009);
    assert.equal(typeof r.data.error, 'string');
  }
  // The longest allowed name and every allowed character work.
  const ok = await c.subscribed('a'.repeat(200));
  assert.equal(ok.event, 'pusher_internal:subscription_succeeded');
  const chars = await c.subscribed('Az09_-=@,.;');
  assert.equal(chars.event, 'pusher_internal:subscription_succeeded');
  // Still connected and serviceable.
  c.send({ event: 'pusher:ping', data: {} });
  await c.event('pusher:pong');
  assert.equal(c.closed, null);
});

test('pusher-js sees subscription_error for a bad signature; nothing is joined', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = pusherClient(t, hub, {
    authOverride: (p) => ({ auth: `app-key:${'0'.repeat(64)}` }),
  });
  await connected(c);
  const ch = c.subscribe('private-denied');
  const [status] = await new Promise((resolve) => ch.bind('pusher:subscription_error', (e) => resolve([e])));
  assert.equal(status.status, 401);
  assert.equal(status.type, 'AuthError');
  const sdk = serverSdk(hub);
  const r = await sdk.get({ path: '/channels/private-denied' });
  assert.deepEqual(await r.json(), { occupied: false });
});

test('raw subscribe errors: wrong key, missing auth, presence without channel_data', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = await rawClient(t, hub);
  let r = await c.subscribed('private-a', { key: 'other-key' });
  assert.deepEqual(r.data, { type: 'AuthError', error: 'Missing or malformed auth', status: 401 });
  r = await c.subscribed('private-a', { auth: '' });
  assert.equal(r.data.status, 401);
  r = await c.subscribed('private-a', { secret: 'wrong' });
  assert.deepEqual(r.data, { type: 'AuthError', error: 'Invalid signature', status: 401 });
  r = await c.subscribed('presence-a', { auth: 'app-key:00' });
  assert.equal(r.event, 'pusher:subscription_error');
  assert.equal(r.data.status, 401);
  // A signature for another socket id fails too (ids are part of the HMAC).
  const other = await rawClient(t, hub);
  assert.notEqual(other.socketId, c.socketId);
  const { sign } = require('./lib/clients');
  r = await c.subscribed('private-b', { auth: `app-key:${sign('app-secret', `${other.socketId}:private-b`)}` });
  assert.equal(r.data.status, 401);
});

test('connection_established: socket id format and activity_timeout', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const seen = new Set();
  for (let i = 0; i < 6; i++) {
    const c = await rawClient(t, hub);
    assert.match(c.socketId, /^\d+\.\d+$/);
    assert.ok(c.activityTimeout > 0 && c.activityTimeout <= 120);
    assert.ok(loopOf(c.socketId) < 2);
    seen.add(c.socketId);
  }
  assert.equal(seen.size, 6);
});
