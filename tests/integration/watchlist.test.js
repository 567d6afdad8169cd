'use strict';
// Watchlists, authorized connections and presence identity from signin
// (docs/PROTOCOL.md 4.2-4.4): pusher-js user.watchlist online/offline
// events across loops, a user on two connections going offline only when
// both leave, malformed and over-limit watchlists refused without closing,
// enable_user_authentication closing a connection that never signs in
// (4009) and sparing one that does, and a presence subscription without
// channel_data taking the signed-in user's identity.
const test = require('node:test');
const assert = require('node:assert/strict');
const Pusher = require('pusher-js');
const { startHub, waitFor } = require('./lib/hub');
const {
  serverSdk, onLoop, rawClient, sign, APP, pusherClient,
} = require('./lib/clients');

// A pusher-js client signing in as user (an object with id, and maybe
// user_info and watchlist), recording watchlist events.
function watcherClient(t, hub, user) {
  const client = pusherClient(t, hub, { user });
  const events = [];
  client.user.watchlist.bind('online', (e) => events.push(['online', ...e.user_ids]));
  client.user.watchlist.bind('offline', (e) => events.push(['offline', ...e.user_ids]));
  const close = () => client.disconnect();
  return { client, events, close };
}

async function signedIn(t, hub, loop, user) {
  const c = await onLoop(loop, async () => {
    const w = watcherClient(t, hub, user);
    await waitFor(() => w.client.connection.state === 'connected', 'connected');
    return { ...w, socketId: w.client.connection.socket_id };
  });
  c.client.signin();
  await waitFor(() => c.client.user.user_data && c.client.user.serverToUserChannel &&
    c.client.user.serverToUserChannel.subscribed, `${user.id} signed in`);
  return c;
}

// Everything published to userId's channel before now has reached c: a
// REST event to the user goes behind it in every loop's inbox.
async function barrier(hub, c, userId) {
  const got = [];
  const h = (d) => got.push(d);
  c.client.user.bind('barrier', h);
  const sdk = serverSdk(hub);
  const n = Math.random();
  await sdk.sendToUser(userId, 'barrier', { n });
  await waitFor(() => got.some((d) => d.n === n), 'barrier');
  c.client.user.unbind('barrier', h);
}

async function sessions(hub) {
  return (await hub.stats()).totals.sessions;
}

function statSum(stats, key) {
  return stats.per_loop.reduce((a, l) => a + l[key], 0);
}

test('watchlist: initial state, online and offline edges across loops', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  // Y is online before W signs in: W's first event lists it.
  const y = await signedIn(t, hub, 1, { id: 'y' });
  const w = await signedIn(t, hub, 0, { id: 'w', watchlist: ['x', 'y', 'nobody'] });
  await waitFor(() => w.events.length === 1, 'initial online');
  assert.deepEqual(w.events[0], ['online', 'y']);

  // X's first connection (the other loop) is the online edge; its second
  // (W's loop) is not a new one.
  const x1 = await signedIn(t, hub, 1, { id: 'x' });
  await waitFor(() => w.events.length === 2, 'x online');
  assert.deepEqual(w.events[1], ['online', 'x']);
  const x2 = await signedIn(t, hub, 0, { id: 'x' });
  await barrier(hub, w, 'w');
  assert.equal(w.events.length, 2);

  // One of X's connections leaves: still online.
  let before = await sessions(hub);
  x1.close();
  await waitFor(async () => (await sessions(hub)) === before - 1, 'x1 gone');
  await barrier(hub, w, 'w');
  assert.equal(w.events.length, 2);
  // The last one leaves: offline, once.
  before = await sessions(hub);
  x2.close();
  await waitFor(() => w.events.length === 3, 'x offline');
  assert.deepEqual(w.events[2], ['offline', 'x']);
  y.close();
  await waitFor(() => w.events.length === 4, 'y offline');
  assert.deepEqual(w.events[3], ['offline', 'y']);
  await waitFor(async () => (await sessions(hub)) === before - 2, 'x2 and y gone');
  await barrier(hub, w, 'w');
  assert.equal(w.events.length, 4);

  const stats = await hub.stats();
  assert.equal(statSum(stats, 'watchlist_events'), 4);
  assert.equal(statSum(stats, 'watchlist_events_dropped'), 0);
});

test('watchlist: every connection of the watcher hears, on either loop', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const w0 = await signedIn(t, hub, 0, { id: 'w', watchlist: ['x'] });
  const w1 = await signedIn(t, hub, 1, { id: 'w', watchlist: ['x'] });
  const x = await signedIn(t, hub, 1, { id: 'x' });
  await waitFor(() => w0.events.length === 1 && w1.events.length === 1, 'both hear x online');
  x.close();
  await waitFor(() => w0.events.length === 2 && w1.events.length === 2, 'both hear x offline');
  assert.deepEqual(w0.events, [['online', 'x'], ['offline', 'x']]);
  assert.deepEqual(w1.events, [['online', 'x'], ['offline', 'x']]);
});

// A raw signin with hand-made user_data (the SDK would refuse some).
async function rawSignin(t, hub, userData) {
  const c = await rawClient(t, hub);
  const ud = typeof userData === 'string' ? userData : JSON.stringify(userData);
  c.send({
    event: 'pusher:signin',
    data: { auth: `${APP.key}:${sign(APP.secret, `${c.socketId}::user::${ud}`)}`, user_data: ud },
  });
  await c.event('pusher:signin_success');
  return c;
}

test('watchlist: malformed and over-limit lists are refused, the signin stands', async (t) => {
  const hub = await startHub([], {
    t, loops: 2,
    apps: [{ ...APP, max_watchlist: 3, max_watchers: 1, max_user_id_len: 8 }],
  });
  const bad = [
    [{ id: 'a', watchlist: 'x' }, /must be an array/],
    [{ id: 'a', watchlist: ['x', 7] }, /entry 1 is not a user id/],
    [{ id: 'a', watchlist: ['x', ''] }, /entry 1 is not a user id/],
    [{ id: 'a', watchlist: ['x', { id: 'y' }] }, /entry 1 is not a user id/],
    [{ id: 'a', watchlist: ['123456789'] }, /entry 0 is not a user id/],
    [{ id: 'a', watchlist: ['p', 'q', 'r', 's'] }, /4 user ids, the limit is 3/],
  ];
  for (const [ud, re] of bad) {
    const c = await rawSignin(t, hub, ud);
    const e = await c.event('pusher:error');
    assert.match(e.data.message, re);
    assert.equal(e.data.code, null);
    // Still connected, still signed in: the user channel works.
    await serverSdk(hub).sendToUser('a', 'hello', {});
    await c.event('hello');
    assert.equal(c.closed, null);
    c.close();
  }
  // Duplicates and the user's own id are merged away: one watch of x.
  const x = await rawSignin(t, hub, { id: 'x' });
  const d = await rawSignin(t, hub, { id: 'd', watchlist: ['x', 'x', 'd', 'x'] });
  const first = await d.event('pusher_internal:watchlist_events');
  assert.deepEqual(JSON.parse(first.data), { events: [{ name: 'online', user_ids: ['x'] }] });
  // max_watchers 1: x already has its watcher.
  const e2 = await rawSignin(t, hub, { id: 'e', watchlist: ['x'] });
  const err = await e2.event('pusher:error');
  assert.match(err.data.message, /user x already has the most watchers allowed \(1\)/);
  x.close();
  const off = await d.next((m) => m.event === 'pusher_internal:watchlist_events' &&
    JSON.parse(m.data).events[0].name === 'offline', 'offline');
  assert.deepEqual(JSON.parse(off.data), { events: [{ name: 'offline', user_ids: ['x'] }] });
  assert.equal(e2.count('pusher_internal:watchlist_events'), 0);
  assert.equal(d.count('pusher:error'), 0);
});

test('authorized connections: closed 4009 unless signed in or on a private channel in time', async (t) => {
  const other = { id: 'other-id', key: 'other-key', secret: 'other-secret' };
  const hub = await startHub([], {
    t, loops: 2,
    apps: [{ ...APP, enable_user_authentication: true, user_authentication_timeout: '2s' },
      other],
  });
  // An app without the option: never closed for not signing in.
  const free = await rawClient(t, hub, other.key);
  // Closed by the client before its deadline: nothing fires for it.
  const gone = await rawClient(t, hub);
  gone.close();
  await gone.whenClosed();
  // Signs in in time; opened before the one that never does, so its
  // deadline has passed by the time that one is closed.
  const ok = await rawSignin(t, hub, { id: 'u' });
  // Pusher's rule: a private channel authorizes the connection too.
  const priv = await rawClient(t, hub);
  assert.equal((await priv.subscribed('private-p')).event, 'pusher_internal:subscription_succeeded');
  // A public channel does not.
  const pub = await rawClient(t, hub);
  assert.equal((await pub.subscribed('news')).event, 'pusher_internal:subscription_succeeded');
  const lazy = await rawClient(t, hub);
  const e = await lazy.event('pusher:error');
  assert.equal(e.data.code, 4009);
  assert.match(e.data.message, /not authorized within timeout/);
  assert.equal((await lazy.whenClosed()).code, 4009);
  assert.equal((await pub.whenClosed()).code, 4009);
  assert.equal(ok.closed, null);
  assert.equal(priv.closed, null);
  assert.equal(free.closed, null);
  await serverSdk(hub).sendToUser('u', 'still-here', {});
  await ok.event('still-here');
  const stats = await hub.stats();
  assert.equal(statSum(stats, 'unauthorized_closes'), 2);

  // pusher-js signing in at once is never closed.
  const p = await signedIn(t, hub, 0, { id: 'pjs' });
  const late = await rawClient(t, hub);
  await late.whenClosed(15000);
  assert.equal(p.client.connection.state, 'connected');
});

test('presence without channel_data takes the signed-in identity', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const a = await signedIn(t, hub, 0, { id: 'ada', user_info: { name: 'Ada' } });
  const chA = a.client.subscribe('presence-room');
  await waitFor(() => chA.subscribed, 'a subscribed');
  assert.equal(chA.members.me.id, 'ada');
  assert.deepEqual(chA.members.me.info, { name: 'Ada' });

  const added = [];
  chA.bind('pusher:member_added', (m) => added.push(m));
  const b = await signedIn(t, hub, 1, { id: 'bob', user_info: { name: 'Bob' } });
  const chB = b.client.subscribe('presence-room');
  await waitFor(() => chB.subscribed && added.length === 1, 'b subscribed, a told');
  assert.deepEqual(added[0], { id: 'bob', info: { name: 'Bob' } });
  assert.equal(chB.members.count, 2);
  assert.deepEqual(chB.members.get('ada').info, { name: 'Ada' });

  // Raw: the signature covers "<socket_id>:<channel>" only.
  const r = await rawSignin(t, hub, { id: 'raw' });
  const ok = await r.subscribed('presence-room');
  assert.equal(ok.event, 'pusher_internal:subscription_succeeded');
  const p = JSON.parse(ok.data).presence;
  assert.equal(p.count, 3);
  assert.ok(p.ids.includes('raw'));
  // A signature over something else is refused.
  const bad = await r.subscribed('presence-other', { auth: `${APP.key}:${'0'.repeat(64)}` });
  assert.equal(bad.event, 'pusher:subscription_error');
  assert.equal(bad.data.status, 401);

  // Not signed in and no channel_data: the old refusal.
  const anon = await rawClient(t, hub);
  const no = await anon.subscribed('presence-room');
  assert.equal(no.event, 'pusher:subscription_error');
  assert.equal(no.data.status, 401);
  assert.match(no.data.error, /channel_data/);
});
