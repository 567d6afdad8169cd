'use strict';
// User authentication (docs/COMPATIBILITY.md, signin): pusher-js signin() with the pusher
// SDK's authenticateUser(), sendToUser() reaching every socket of that user
// on both loops, terminateUserConnections() closing them with 4009, and a
// bad signin refused with 4009.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const {
  serverSdk, onLoop, rawClient, sign, APP, pusherClient,
} = require('./lib/clients');

function signedInClient(t, hub, user) {
  return pusherClient(t, hub, { user });
}

async function signedInOnLoop(t, hub, loop, user) {
  const c = await onLoop(loop, async () => {
    const client = signedInClient(t, hub, user);
    await waitFor(() => client.connection.state === 'connected', 'connected');
    return { client, socketId: client.connection.socket_id, close: () => client.disconnect() };
  });
  const { client } = c;
  const got = [];
  client.user.bind('notice', (d) => got.push(d));
  client.signin();
  await waitFor(() => client.user.user_data && client.user.serverToUserChannel &&
    client.user.serverToUserChannel.subscribed, 'signed in and subscribed');
  return { client, got };
}

test('signin, sendToUser across loops, terminateUserConnections', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const u = { id: 'user-42', user_info: { name: 'Ada' } };
  const a = await signedInOnLoop(t, hub, 0, u);
  const b = await signedInOnLoop(t, hub, 1, u);
  const other = await signedInOnLoop(t, hub, 1, { id: 'someone-else' });
  assert.deepEqual(a.client.user.user_data, u);

  const res = await sdk.sendToUser('user-42', 'notice', { n: 1 });
  assert.equal(res.status, 200);
  await waitFor(() => a.got.length === 1 && b.got.length === 1, 'both sockets of the user');
  assert.deepEqual(a.got[0], { n: 1 });
  await sdk.sendToUser('someone-else', 'notice', { n: 2 });
  await waitFor(() => other.got.length === 1, 'other user');
  assert.equal(a.got.length, 1);

  // The user channels are internal: not listed by the REST API.
  const list = await (await sdk.get({ path: '/channels' })).json();
  assert.deepEqual(list, { channels: {} });

  // pusher-js reports the pusher:error (and the close) as several 'error'
  // events; each carries 4009.
  const errs = { a: [], b: [] };
  a.client.connection.bind('error', (e) => errs.a.push(e));
  b.client.connection.bind('error', (e) => errs.b.push(e));
  // pusher-js answers a 4000-4099 close by calling disconnect() from inside
  // its close handler, which closes the already-closed faye-websocket
  // again; faye then arms a 30 s close timer nothing clears, and the test
  // process lingered 30 s after its last test. Clear it once closed.
  const fayeSockets = [a, b].map((x) => x.client.connection.connection.transport.socket);
  const term = await sdk.terminateUserConnections('user-42');
  assert.equal(term.status, 200);
  assert.deepEqual(await term.json(), {});
  // 4009 tells pusher-js not to reconnect.
  await waitFor(() => a.client.connection.state === 'disconnected' &&
    b.client.connection.state === 'disconnected', 'both disconnected');
  for (const sock of fayeSockets) clearTimeout(sock._closeTimer);
  for (const list of [errs.a, errs.b]) {
    assert.ok(list.length >= 1);
    for (const e of list) assert.equal((e.data || e.error.data).code, 4009);
  }
  assert.equal(other.client.connection.state, 'connected');
});

test('signin refused: bad signature, missing id', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  let c = await rawClient(t, hub);
  c.send({ event: 'pusher:signin', data: { auth: `${APP.key}:${'0'.repeat(64)}`, user_data: '{"id":"1"}' } });
  let e = await c.event('pusher:error');
  assert.equal(e.data.code, 4009);
  assert.equal((await c.whenClosed()).code, 4009);
  c = await rawClient(t, hub);
  // The SDK refuses user data without an id; sign it by hand.
  const ud = '{"name":"no id"}';
  c.send({ event: 'pusher:signin', data: { auth: `${APP.key}:${sign(APP.secret, `${c.socketId}::user::${ud}`)}`, user_data: ud } });
  e = await c.event('pusher:error');
  assert.equal(e.data.code, 4009);
  // #server-to-user- channels are refused without signin.
  c = await rawClient(t, hub);
  const r = await c.subscribed('#server-to-user-1');
  assert.equal(r.event, 'pusher:subscription_error');
  assert.equal(r.data.status, 403);
});
