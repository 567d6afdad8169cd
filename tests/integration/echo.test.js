'use strict';
// Laravel Echo 2 with its Pusher connector (pusher-js 8 underneath), as a
// Laravel front end uses it, against the hub on two loops: namespaced event
// names (`.listen('OrderShipped')` is `App\Events\OrderShipped` on the wire,
// published here with the pusher SDK the way Laravel's broadcaster does),
// whispers, presence here/joining/leaving, and toOthers() via socket_id.
const test = require('node:test');
const assert = require('node:assert/strict');
const Pusher = require('pusher-js');
const { startHub, waitFor } = require('./lib/hub');
const { serverSdk, onLoop } = require('./lib/clients');

// laravel-echo 2.3.7 ships its CommonJS build as .js inside a "type":
// "module" package, so require() fails; its ES module build loads fine.
let Echo;
test.before(async () => {
  ({ default: Echo } = await import('laravel-echo'));
});

// An Echo instance whose authorizer plays Laravel's /broadcasting/auth.
function makeEcho(t, hub, user) {
  const sdk = serverSdk(hub);
  const echo = new Echo({
    broadcaster: 'pusher', key: 'app-key', cluster: 'x',
    wsHost: hub.host, wsPort: hub.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true, Pusher,
    authorizer: (channel) => ({
      authorize: (socketId, callback) => {
        try {
          const presence = channel.name.startsWith('presence-')
            ? { user_id: user.id, user_info: user } : undefined;
          callback(null, sdk.authorizeChannel(socketId, channel.name, presence));
        } catch (e) {
          callback(e, null);
        }
      },
    }),
  });
  t.after(() => echo.disconnect());
  return echo;
}

async function echoOnLoop(t, hub, loop, user) {
  const c = await onLoop(loop, async () => {
    const echo = makeEcho(t, hub, user);
    await waitFor(() => echo.connectionStatus() === 'connected' && echo.socketId(), 'echo connected');
    return { echo, socketId: echo.socketId(), close: () => echo.disconnect() };
  });
  return c.echo;
}

test('Echo: listen on private and presence channels, whisper, here/joining/leaving', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const alice = { id: 1, name: 'Alice' };
  const bob = { id: 2, name: 'Bob' };
  const echoA = await echoOnLoop(t, hub, 0, alice);
  const echoB = await echoOnLoop(t, hub, 1, bob);

  // Private channel with Laravel's event name formatting.
  const shipped = { a: [], b: [] };
  let subA = false;
  let subB = false;
  echoA.private('orders.1').listen('OrderShipped', (e) => shipped.a.push(e)).subscribed(() => { subA = true; });
  echoB.private('orders.1').listen('OrderShipped', (e) => shipped.b.push(e)).subscribed(() => { subB = true; });
  const raw = [];
  const rawA = [];
  echoB.private('orders.1').listen('.raw-name', (e) => raw.push(e));
  echoA.private('orders.1').listen('.raw-name', (e) => rawA.push(e));
  await waitFor(() => subA && subB, 'private subscribed');
  await sdk.trigger('private-orders.1', 'App\\Events\\OrderShipped', { order: { id: 1 } });
  await sdk.trigger('private-orders.1', 'raw-name', { ok: true });
  await waitFor(() => shipped.a.length === 1 && shipped.b.length === 1 && raw.length === 1, 'OrderShipped');
  assert.deepEqual(shipped.a[0], { order: { id: 1 } });
  assert.deepEqual(raw[0], { ok: true });

  // toOthers(): Laravel passes the X-Socket-Id as socket_id.
  await sdk.trigger('private-orders.1', 'App\\Events\\OrderShipped', { order: { id: 2 } },
    { socket_id: echoA.socketId() });
  await waitFor(() => shipped.b.length === 2, 'b got the toOthers event');
  await sdk.trigger('private-orders.1', 'raw-name', { ok: 2 });
  await waitFor(() => raw.length === 2 && rawA.length === 2, 'marker at both');
  // The marker reached a after the toOthers event would have: a was excluded.
  assert.equal(shipped.a.length, 1);

  // Private whisper across loops.
  const typing = [];
  echoA.private('orders.1').listenForWhisper('typing', (e) => typing.push(e));
  echoB.private('orders.1').whisper('typing', { name: 'Bob' });
  await waitFor(() => typing.length === 1, 'whisper on private');
  assert.deepEqual(typing[0], { name: 'Bob' });

  // Presence.
  let hereA = null;
  let hereB = null;
  const joining = [];
  const leaving = [];
  const messages = [];
  const chatA = echoA.join('chat')
    .here((users) => { hereA = users; })
    .joining((u) => joining.push(u))
    .leaving((u) => leaving.push(u))
    .listen('MessageSent', (e) => messages.push(e));
  await waitFor(() => hereA !== null, 'a here');
  assert.deepEqual(hereA, [alice]);
  const chatB = echoB.join('chat').here((users) => { hereB = users; });
  await waitFor(() => hereB !== null && joining.length === 1, 'b here, a sees joining');
  assert.deepEqual(hereB.map((u) => u.id).sort(), [1, 2]);
  assert.deepEqual(joining[0], bob);

  const whispers = [];
  chatA.listenForWhisper('typing', (e) => whispers.push(e));
  chatB.whisper('typing', { typing: true });
  await waitFor(() => whispers.length === 1, 'presence whisper');
  assert.deepEqual(whispers[0], { typing: true });

  await sdk.trigger('presence-chat', 'App\\Events\\MessageSent', { text: 'hi' });
  await waitFor(() => messages.length === 1, 'MessageSent');
  assert.deepEqual(messages[0], { text: 'hi' });

  echoB.leave('chat');
  await waitFor(() => leaving.length === 1, 'leaving');
  assert.deepEqual(leaving[0], bob);
});

test('Echo: a second tab of the same user does not trigger joining/leaving', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const watcher = await echoOnLoop(t, hub, 0, { id: 'w', name: 'W' });
  const tab1 = await echoOnLoop(t, hub, 1, { id: 'u', name: 'U' });
  const tab2 = await echoOnLoop(t, hub, 0, { id: 'u', name: 'U' });
  const joining = [];
  const leaving = [];
  let here = null;
  watcher.join('room').here((u) => { here = u; }).joining((u) => joining.push(u)).leaving((u) => leaving.push(u));
  await waitFor(() => here !== null, 'watcher here');
  let h1 = null;
  let h2 = null;
  tab1.join('room').here((u) => { h1 = u; });
  await waitFor(() => h1 !== null && joining.length === 1, 'tab1 joined');
  tab2.join('room').here((u) => { h2 = u; });
  await waitFor(() => h2 !== null, 'tab2 joined');
  assert.equal(h2.length, 2);
  tab1.leave('room');
  await waitFor(async () => {
    const r = await sdk.get({ path: '/channels/presence-room', params: { info: 'subscription_count' } });
    return (await r.json()).subscription_count === 2;
  }, 'tab1 left');
  const marks = [];
  watcher.join('room').listen('.mark', () => marks.push(1));
  await sdk.trigger('presence-room', 'mark', {});
  await waitFor(() => marks.length === 1, 'marker');
  assert.equal(joining.length, 1);
  assert.equal(leaving.length, 0);
  tab2.disconnect();
  await waitFor(() => leaving.length === 1, 'leaving after the last tab');
  assert.deepEqual(leaving[0], { id: 'u', name: 'U' });
});
