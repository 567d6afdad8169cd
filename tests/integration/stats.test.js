'use strict';
// /stats against what the test did: sessions spread over both loops, and
// accepted, closed-by-reason, messages in/out, pings/pongs and
// subscriptions matching the clients' own records.
const test = require('node:test');
const assert = require('node:assert/strict');
const PusherServer = require('pusher');
const { startHub, waitFor } = require('./lib/hub');
const { open, subscribe, stopAll } = require('./lib/ws');

const sum = (a, f) => a.reduce((s, x) => s + f(x), 0);

test('both loops get sessions', async (t) => {
  const N = 40;
  const hub = await startHub(['--loops', '2']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const pending = [];
  for (let i = 0; i < N; i++) {
    pending.push(open(hub, { localAddress: `127.0.0.${2 + (i % 4)}` }));
  }
  clients.push(...await Promise.all(pending));
  const st = await hub.stats();
  assert.equal(st.loops, 2);
  assert.equal(st.per_loop.length, 2);
  assert.equal(st.totals.sessions, N);
  assert.equal(sum(st.per_loop, (l) => l.sessions), N);
  assert.equal(sum(st.per_loop, (l) => l.accepted), N);
  for (const l of st.per_loop) assert.ok(l.sessions > 0, `loop ${l.loop}: ${l.sessions}`);
  // Socket ids are unique across loops.
  assert.equal(new Set(clients.map((c) => c.socketId)).size, N);
  t.diagnostic(`sessions per loop: ${st.per_loop.map((l) => l.sessions).join('/')}`);
});

test('/stats counters match what the clients did', async (t) => {
  // A long pong timeout: only the muted client may be closed for it, even
  // when this process is slow to answer on a loaded box.
  const hub = await startHub(['--loops', '2', '--ping-interval', '300ms',
    '--pong-timeout', '1s', '--tick', '50ms', '--max-message', '4KiB']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const sent = []; // every complete message a client sent
  const track = (c) => {
    const orig = c.send.bind(c);
    c.send = (obj) => {
      const s = typeof obj === 'string' ? obj : JSON.stringify(obj);
      sent.push(s);
      orig(s);
    };
    return c;
  };
  const K = 6;
  const pending = [];
  for (let i = 0; i < K; i++) {
    pending.push(open(hub, { localAddress: `127.0.0.${2 + (i % 4)}` }));
  }
  const subs = (await Promise.all(pending)).map(track);
  clients.push(...subs);
  // Each subscribes to its own channel and to a shared one.
  for (let i = 0; i < K; i++) {
    await subscribe(subs[i], `room-${i}`);
    await subscribe(subs[i], 'shared');
  }
  let st = await hub.stats();
  assert.equal(st.totals.subscriptions, 2 * K);
  // Three pusher:ping each, plus one invalid message from the first.
  for (const c of subs) for (let j = 0; j < 3; j++) c.send({ event: 'pusher:ping', data: {} });
  subs[0].send('{oops');
  await waitFor(() => subs.every((c) => c.all('pusher:pong').length === 3), 'the pongs');
  await waitFor(() => subs[0].find('pusher:error'), 'the error');
  // Two REST publishes to the shared channel reach all K.
  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  await server.trigger('shared', 'news', { n: 1 });
  await server.trigger('shared', 'news', { n: 2 });
  await waitFor(() => subs.every((c) => c.all('news').length === 2), 'the publishes');
  // Heartbeat pings are answered (ws answers them by itself).
  await waitFor(async () => (await hub.stats()).totals.pongs >= K, 'pongs', 5000);

  // A client that does not answer pings (4201), one that sends too much
  // (1009).
  const mute = track(await open(hub, { autoPong: false }));
  const big = track(await open(hub));
  clients.push(mute, big);
  big.ws.send(JSON.stringify({ event: 'pusher:ping', data: { pad: 'x'.repeat(5000) } }));
  await Promise.all([mute.waitClose(8000), big.waitClose()]);
  assert.equal(mute.closed.code, 4201);
  assert.equal(big.closed.code, 1009);

  st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.sessions === K && s;
  }, 'the two closed sessions to go');
  assert.equal(st.totals.accepted, K + 2);
  assert.equal(st.totals.subscriptions, 2 * K);
  // The peers close; then every count is final.
  for (const c of subs) c.close();
  await waitFor(() => subs.every((c) => c.closed), 'the clients to close');
  st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.sessions === 0 && s;
  }, 'sessions to be gone');
  const received = sum(clients, (c) => c.messages.length);
  assert.equal(st.totals.accepted, K + 2);
  assert.deepEqual(st.totals.closed, { 4201: 1, 4202: 0, 4100: 0, 1009: 1,
    peer: K, drain: 0, app: 0, error: 0, write_timeout: 0, queue_budget: 0 });
  assert.equal(st.totals.msgs_in, sent.length);
  assert.equal(st.totals.bytes_in, sum(sent, (s) => Buffer.byteLength(s)));
  assert.equal(st.totals.msgs_out, received);
  assert.ok(st.totals.bytes_out > sum(clients, (c) => c.messages.length * 2));
  assert.equal(st.totals.subscriptions, 0);
  assert.ok(st.totals.pings_sent > 0);
  assert.ok(st.totals.pongs > 0);
  assert.ok(st.totals.pings_sent >= st.totals.pongs);
  assert.ok(st.totals.pings_sent >= sum(clients, (c) => c.pings.length));
  assert.equal(sum(st.per_loop, (l) => l.pusher_pings), 3 * K);
  assert.equal(sum(st.per_loop, (l) => l.bad_messages), 1);
  assert.ok(sum(st.per_loop, (l) => l.publishes) >= 2);
  // Per-loop figures add up to the totals.
  for (const f of ['accepted', 'msgs_in', 'msgs_out', 'pongs', 'pings_sent']) {
    assert.equal(sum(st.per_loop, (l) => l[f]), st.totals[f], f);
  }
  t.diagnostic(`msgs in ${st.totals.msgs_in}, out ${st.totals.msgs_out}, ` +
    `pings ${st.totals.pings_sent}, pongs ${st.totals.pongs}`);
});
