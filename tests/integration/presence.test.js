'use strict';
// Presence is per user, not per connection (docs/PROTOCOL.md 3.4): a user's
// second connection emits no member_added, only the last one leaving emits
// member_removed, user_count counts users, subscription_succeeded carries
// the whole member list, and max_presence_members refuses the next user.
// Connections are spread over both loops so the directory's hub-wide view
// is what is being tested.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const { serverSdk, rawOnLoop, pusherOnLoop, APP } = require('./lib/clients');

const CH = 'presence-lobby';

async function userCount(sdk, ch = CH) {
  const r = await sdk.get({ path: `/channels/${ch}`, params: { info: 'user_count' } });
  return (await r.json()).user_count;
}

test('two connections of one user: one member_added, one member_removed', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const watcher = await rawOnLoop(t, hub, 0);
  await watcher.subscribed(CH, { channelData: { user_id: 'w', user_info: { role: 'watch' } } });

  // The user's first connection, on the other loop.
  const u1 = await rawOnLoop(t, hub, 1);
  const s1 = await u1.subscribed(CH, { channelData: { user_id: 'alice', user_info: { n: 1 } } });
  assert.equal(s1.event, 'pusher_internal:subscription_succeeded');
  const list = JSON.parse(s1.data).presence;
  assert.equal(list.count, 2);
  assert.deepEqual(list.ids.slice().sort(), ['alice', 'w']);
  assert.deepEqual(list.hash, { w: { role: 'watch' }, alice: { n: 1 } });
  const added = await watcher.event('pusher_internal:member_added', CH);
  assert.deepEqual(JSON.parse(added.data), { user_id: 'alice', user_info: { n: 1 } });
  // The joiner never hears about itself.
  assert.equal(u1.count('pusher_internal:member_added'), 0);

  // Same user again, on loop 0: no member_added anywhere, count stays 2.
  const u2 = await rawOnLoop(t, hub, 0);
  const s2 = await u2.subscribed(CH, { channelData: { user_id: 'alice', user_info: { n: 1 } } });
  assert.equal(JSON.parse(s2.data).presence.count, 2);
  assert.equal(await userCount(sdk), 2);
  const chInfo = await sdk.get({ path: `/channels/${CH}`, params: { info: 'user_count,subscription_count' } });
  assert.deepEqual(await chInfo.json(), { occupied: true, user_count: 2, subscription_count: 3 });
  const users = await sdk.get({ path: `/channels/${CH}/users` });
  assert.deepEqual((await users.json()).users.map((u) => u.id).sort(), ['alice', 'w']);

  // Marker: a REST event after the join; when it arrives, anything the join
  // produced has arrived before it.
  await sdk.trigger(CH, 'mark1', '');
  await watcher.event('mark1', CH);
  await u1.event('mark1', CH);
  assert.equal(watcher.count('pusher_internal:member_added'), 1);
  assert.equal(u1.count('pusher_internal:member_added'), 0);

  // First connection leaves: alice still present through u2.
  u1.close();
  await waitFor(async () => {
    const r = await sdk.get({ path: `/channels/${CH}`, params: { info: 'user_count,subscription_count' } });
    return (await r.json()).subscription_count === 2;
  }, 'first alice connection gone');
  await sdk.trigger(CH, 'mark2', '');
  await watcher.event('mark2', CH);
  assert.equal(watcher.count('pusher_internal:member_removed'), 0);
  assert.equal(await userCount(sdk), 2);

  // Last connection leaves (unsubscribe this time): member_removed once.
  u2.send({ event: 'pusher:unsubscribe', data: { channel: CH } });
  const removed = await watcher.event('pusher_internal:member_removed', CH);
  assert.deepEqual(JSON.parse(removed.data), { user_id: 'alice' });
  assert.equal(await userCount(sdk), 1);
  await sdk.trigger(CH, 'mark3', '');
  await watcher.event('mark3', CH);
  assert.equal(watcher.count('pusher_internal:member_removed'), 1);
});

test('numeric and string user ids are the same member', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const a = await rawOnLoop(t, hub, 0);
  const b = await rawOnLoop(t, hub, 1);
  await a.subscribed(CH, { channelData: { user_id: 10 } });
  const r = await b.subscribed(CH, { channelData: { user_id: '10' } });
  assert.deepEqual(JSON.parse(r.data).presence, { ids: ['10'], hash: { 10: {} }, count: 1 });
  assert.equal(await userCount(sdk), 1);
  const users = await sdk.get({ path: `/channels/${CH}/users` });
  assert.deepEqual(await users.json(), { users: [{ id: '10' }] });
});

test('pusher-js members: here, added, removed across loops', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const a = await pusherOnLoop(t, hub, 0, { presence: { user_id: 'a', user_info: { name: 'Ann' } } });
  const b1 = await pusherOnLoop(t, hub, 1, { presence: { user_id: 'b', user_info: { name: 'Bob' } } });
  const b2 = await pusherOnLoop(t, hub, 0, { presence: { user_id: 'b', user_info: { name: 'Bob' } } });
  const events = [];
  const chA = a.subscribe(CH);
  chA.bind('pusher:member_added', (m) => events.push(['added', m.id]));
  chA.bind('pusher:member_removed', (m) => events.push(['removed', m.id]));
  await waitFor(() => chA.subscribed, 'a subscribed');
  const chB1 = b1.subscribe(CH);
  await waitFor(() => chB1.subscribed && chA.members.count === 2, 'b1 joined');
  const chB2 = b2.subscribe(CH);
  await waitFor(() => chB2.subscribed, 'b2 joined');
  assert.equal(chB2.members.count, 2);
  assert.deepEqual(chB2.members.get('a').info, { name: 'Ann' });
  b1.disconnect();
  const sdk = serverSdk(hub);
  await waitFor(async () => {
    const r = await sdk.get({ path: `/channels/${CH}`, params: { info: 'subscription_count' } });
    return (await r.json()).subscription_count === 2;
  }, 'b1 gone');
  b2.unsubscribe(CH);
  await waitFor(() => events.length === 2, 'removed');
  assert.deepEqual(events, [['added', 'b'], ['removed', 'b']]);
  assert.equal(chA.members.count, 1);
});

test('max_presence_members: the next user gets pusher:subscription_error', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [{ ...APP, max_presence_members: 2 }] });
  const sdk = serverSdk(hub);
  const a = await rawOnLoop(t, hub, 0);
  const b = await rawOnLoop(t, hub, 1);
  const c = await rawOnLoop(t, hub, 0);
  assert.equal((await a.subscribed(CH, { channelData: { user_id: 'a' } })).event,
    'pusher_internal:subscription_succeeded');
  assert.equal((await b.subscribed(CH, { channelData: { user_id: 'b' } })).event,
    'pusher_internal:subscription_succeeded');
  const full = await c.subscribed(CH, { channelData: { user_id: 'c' } });
  assert.equal(full.event, 'pusher:subscription_error');
  assert.deepEqual(full.data, { type: 'LimitReached', error: 'Presence channel is full', status: 4100 });
  // An existing member's extra connection still fits: limits count users.
  const a2 = await c.subscribed(CH, { channelData: { user_id: 'a' } });
  assert.equal(a2.event, 'pusher_internal:subscription_succeeded');
  assert.equal(JSON.parse(a2.data).presence.count, 2);
  assert.equal(await userCount(sdk), 2);
  // The refused attempt joined nothing; when b leaves, c fits.
  b.close();
  await waitFor(async () => (await userCount(sdk)) === 1, 'b left');
  const d = await rawOnLoop(t, hub, 1);
  assert.equal((await d.subscribed(CH, { channelData: { user_id: 'c' } })).event,
    'pusher_internal:subscription_succeeded');
  // Still connected after the refusal.
  assert.equal(c.closed, null);
});

test('presence channel_data limits: user_info size, user_id length and type', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = await rawOnLoop(t, hub, 0);
  let r = await c.subscribed(CH, { channelData: { user_id: 'x', user_info: { s: 'y'.repeat(1100) } } });
  assert.equal(r.event, 'pusher:subscription_error');
  assert.equal(r.data.type, 'LimitReached');
  r = await c.subscribed(CH, { channelData: { user_id: 'x'.repeat(129) } });
  assert.equal(r.event, 'pusher:subscription_error');
  r = await c.subscribed(CH, { channelData: { user_id: { nested: 1 } } });
  assert.equal(r.event, 'pusher:subscription_error');
  r = await c.subscribed(CH, { channelData: { user_info: {} } });
  assert.equal(r.event, 'pusher:subscription_error');
  r = await c.subscribed(CH, { channelData: { user_id: 'x'.repeat(128) } });
  assert.equal(r.event, 'pusher_internal:subscription_succeeded');
});
