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

// RFC 9112 9.6: a request with "Connection: close" gets the option back in
// the answer, then the server closes; without it the connection stays for
// the next request (keep-alive).
test('Connection: close is answered in kind; keep-alive otherwise', async (t) => {
  const net = require('node:net');
  const hub = await startHub([]);
  t.after(() => hub.stop());
  const exchange = (requests) => new Promise((resolve, reject) => {
    const sock = net.connect(hub.port, hub.host);
    let data = '';
    sock.setTimeout(10000, () => { sock.destroy(); reject(new Error(`timeout: ${data}`)); });
    sock.on('connect', () => sock.write(requests));
    sock.on('data', (d) => { data += d; if (/ready\n$/.test(data)) sock.end(); });
    sock.on('close', () => resolve(data));
    sock.on('error', reject);
  });
  // The first request asks to close: one answer, with the option, then EOF
  // (the pipelined second request is never answered).
  const closed = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' +
    'GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal((closed.match(/HTTP\/1\.1 200/g) || []).length, 1, closed);
  assert.match(closed, /\r\nconnection: close\r\n/i);
  // Keep-alive: two requests on one connection, two answers, no close option.
  const kept = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' +
    'GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal((kept.match(/HTTP\/1\.1 200/g) || []).length, 2, kept);
  assert.doesNotMatch(kept, /connection: close/i);
});
