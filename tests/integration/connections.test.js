'use strict';
// Connection-level refusals (docs/PROTOCOL.md 1 and 5): the per-app
// max_connections quota counted across both loops (pusher:error 4004, then
// close 4004), unknown app keys (4001), disabled apps (4003), unsupported
// protocol versions (4007), and pusher-js giving up on 4004 rather than
// reconnecting.
const test = require('node:test');
const assert = require('node:assert/strict');
const Pusher = require('pusher-js');
const { startHub, waitFor } = require('./lib/hub');
const { RawClient, rawClient, rawOnLoop, APP } = require('./lib/clients');

const CAPPED = { id: 'capped-id', key: 'capped-key', secret: 'capped-secret', max_connections: 3 };
const OFF = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false };

async function refused(hub, key, query) {
  const url = query ? `ws://${hub.host}:${hub.port}/app/${key}?${query}` : hub.wsUrl(key);
  const c = new RawClient(url);
  const err = await c.event('pusher:error');
  const closed = await c.whenClosed();
  return { err, closed, c };
}

test('max_connections per app: the next connection gets 4004 on any loop', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [APP, CAPPED] });
  // Fill the quota with connections on both loops.
  const held = [await rawOnLoop(t, hub, 0, CAPPED.key), await rawOnLoop(t, hub, 1, CAPPED.key)];
  // rawOnLoop may have closed extra tries; wait until only ours remain.
  await waitFor(async () => (await hub.stats()).totals.sessions === 2, 'two capped sessions');
  held.push(await rawClient(t, hub, CAPPED.key));
  for (let i = 0; i < 4; i++) {
    const { err, closed, c } = await refused(hub, CAPPED.key);
    assert.deepEqual(err.data, { code: 4004, message: 'Application is over connection quota' });
    assert.equal(closed.code, 4004);
    // Refused before connection_established.
    assert.equal(c.count('pusher:connection_established'), 0);
  }
  // Another app is not affected.
  const other = await rawClient(t, hub);
  assert.match(other.socketId, /^\d+\.\d+$/);
  // A freed slot can be taken again.
  held[1].close();
  await waitFor(async () => (await hub.stats()).totals.sessions === 3, 'a capped session left');
  const again = await rawClient(t, hub, CAPPED.key);
  assert.match(again.socketId, /^\d+\.\d+$/);
  const { err } = await refused(hub, CAPPED.key);
  assert.equal(err.data.code, 4004);
});

test('pusher-js stops on 4004 instead of reconnecting', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [APP, { ...CAPPED, max_connections: 1 }] });
  await rawClient(t, hub, CAPPED.key);
  const client = new Pusher(CAPPED.key, {
    wsHost: hub.host, wsPort: hub.port, forceTLS: false, enabledTransports: ['ws'], cluster: 'x',
  });
  t.after(() => client.disconnect());
  const errors = [];
  client.connection.bind('error', (e) => errors.push(e));
  await waitFor(() => errors.length > 0, 'pusher-js error');
  // pusher-js wraps the handshake's pusher:error in a WebSocketError.
  assert.equal(errors[0].error.data.code, 4004);
  await waitFor(() => client.connection.state === 'disconnected', 'pusher-js gave up');
  const stats = await hub.stats();
  // One held connection plus one refused attempt; no reconnect storm.
  assert.ok(stats.totals.accepted <= 3, JSON.stringify(stats.totals));
});

test('unknown key 4001, disabled app 4003, unsupported protocol 4007', async (t) => {
  const hub = await startHub([], { t, loops: 2, apps: [APP, OFF] });
  let r = await refused(hub, 'no-such-key');
  assert.equal(r.err.data.code, 4001);
  assert.equal(r.closed.code, 4001);
  r = await refused(hub, OFF.key);
  assert.deepEqual(r.err.data, { code: 4003, message: 'Application is disabled' });
  assert.equal(r.closed.code, 4003);
  r = await refused(hub, APP.key, 'protocol=4&client=js&version=1.0');
  assert.equal(r.err.data.code, 4007);
  assert.equal(r.closed.code, 4007);
  // Protocol 5..7 and a missing protocol are accepted.
  for (const q of ['protocol=5', 'protocol=6', 'protocol=7&client=js&version=8.4.0&flash=false', '']) {
    const c = new RawClient(`ws://${hub.host}:${hub.port}/app/${APP.key}${q ? '?' + q : ''}`);
    t.after(() => c.close());
    await c.open();
    assert.match(c.socketId, /^\d+\.\d+$/);
  }
});

test('pusher:ping gets pusher:pong; bad messages get pusher:error and the connection stays', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const c = await rawClient(t, hub);
  c.send({ event: 'pusher:ping', data: {} });
  const pong = await c.event('pusher:pong');
  assert.deepEqual(pong, { event: 'pusher:pong', data: '{}' });
  c.send('not json');
  const e1 = await c.event('pusher:error');
  assert.equal(e1.data.code, null);
  assert.match(e1.data.message, /^Invalid message/);
  c.send({ event: 'pusher:subscribe', data: { channel: 42 } });
  await waitFor(() => c.count('pusher:error') === 2, 'second error');
  c.send({ event: 'pusher:ping', data: {} });
  await waitFor(() => c.count('pusher:pong') === 2, 'still serviced');
  assert.equal(c.closed, null);
});
