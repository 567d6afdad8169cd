'use strict';
// Smoke: pusher-js connects, subscribes and receives a REST publish made
// with the pusher SDK, across two loops.
const test = require('node:test');
const assert = require('node:assert/strict');
const Pusher = require('pusher-js');
const PusherServer = require('pusher');
const { startHub, waitFor } = require('./lib/hub');

for (const loop of ['libev', 'poll']) test(`pusher-js receives an event published through the REST API (${loop})`, async (t) => {
  const hub = await startHub(['--loops', '2', '--event-loop', loop]);
  t.after(() => hub.stop());
  const client = new Pusher('app-key', {
    wsHost: hub.host, wsPort: hub.port, forceTLS: false,
    enabledTransports: ['ws'], cluster: 'local',
  });
  t.after(() => client.disconnect());
  const got = [];
  const ch = client.subscribe('smoke');
  ch.bind('greeting', (d) => got.push(d));
  await waitFor(() => ch.subscribed, 'subscription');
  const server = new PusherServer({
    appId: 'app-id', key: 'app-key', secret: 'app-secret',
    host: hub.host, port: hub.port, useTLS: false,
  });
  const res = await server.trigger('smoke', 'greeting', { hello: 'world' });
  assert.equal(res.status, 200);
  await waitFor(() => got.length === 1, 'the event');
  assert.deepEqual(got[0], { hello: 'world' });
  const stats = await hub.stats();
  assert.equal(stats.totals.sessions, 1);
  assert.equal(stats.loops, 2);
});
