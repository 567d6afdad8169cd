'use strict';
// Client events (docs/PROTOCOL.md 4.1): relayed on private and presence channels
// to the other subscribers on every loop, never echoed to the sender,
// user_id added on presence, rate limited per connection (pusher:error
// 4301), refused on public and encrypted channels, when not subscribed, and
// when the app disables them.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const {
  serverSdk, rawOnLoop, pusherOnLoop, APP, rawClient, configFile,
} = require('./lib/clients');

test('pusher-js client events on private and presence: relay, no echo, user_id', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const a = await pusherOnLoop(t, hub, 0, { presence: { user_id: 'ann' } });
  const b = await pusherOnLoop(t, hub, 1, { presence: { user_id: 'bob' } });
  const got = { a: [], b: [] };
  for (const name of ['private-chat', 'presence-chat']) {
    const chA = a.subscribe(name);
    const chB = b.subscribe(name);
    chA.bind('client-typing', (d, meta) => got.a.push([name, d, meta]));
    chB.bind('client-typing', (d, meta) => got.b.push([name, d, meta]));
    await waitFor(() => chA.subscribed && chB.subscribed, `subscribed ${name}`);
  }
  await waitFor(() => a.channel('presence-chat').members.count === 2, 'both present');
  assert.ok(a.channel('private-chat').trigger('client-typing', { who: 'ann' }));
  assert.ok(a.channel('presence-chat').trigger('client-typing', { who: 'ann' }));
  await waitFor(() => got.b.length === 2, 'b got both');
  const byCh = Object.fromEntries(got.b.map(([n, d, m]) => [n, [d, m]]));
  assert.deepEqual(byCh['private-chat'][0], { who: 'ann' });
  assert.equal(byCh['private-chat'][1].user_id, undefined);
  assert.deepEqual(byCh['presence-chat'][0], { who: 'ann' });
  assert.equal(byCh['presence-chat'][1].user_id, 'ann');
  // Not echoed: a later server event on the same channel arrives at a, and
  // the client event did not arrive before it.
  const marks = [];
  a.channel('private-chat').bind('mark', () => marks.push(1));
  await serverSdk(hub).trigger('private-chat', 'mark', {});
  await waitFor(() => marks.length === 1, 'marker at a');
  assert.equal(got.a.length, 0);
});

test('raw client events: exact relay frames and refusals', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const s = await rawOnLoop(t, hub, 0);
  const r = await rawOnLoop(t, hub, 1);
  await s.subscribed('private-x');
  await r.subscribed('private-x');
  await s.subscribed('presence-x', { channelData: { user_id: 'sender' } });
  await r.subscribed('presence-x', { channelData: { user_id: 'receiver' } });
  await s.subscribed('public-x');
  await r.subscribed('public-x');
  await s.subscribed('private-encrypted-x');
  await r.subscribed('private-encrypted-x');

  s.send({ event: 'client-a', channel: 'private-x', data: { k: [1, 'two'] } });
  const m1 = await r.event('client-a', 'private-x');
  // Relayed as sent (client events carry a JSON value, not a string).
  assert.deepEqual(m1, { event: 'client-a', channel: 'private-x', data: { k: [1, 'two'] } });
  s.send({ event: 'client-b', channel: 'presence-x', data: 'str' });
  const m2 = await r.event('client-b', 'presence-x');
  assert.deepEqual(m2, { event: 'client-b', channel: 'presence-x', data: 'str', user_id: 'sender' });

  const errorsBefore = s.count('pusher:error');
  const nextError = () => s.next((m) => m.event === 'pusher:error', 'pusher:error', 10000,
    s.msgs.findLastIndex((m) => m.event === 'pusher:error') + 1);
  s.send({ event: 'client-c', channel: 'public-x', data: {} });
  let e = await nextError();
  assert.deepEqual(e.data, { code: null, message: 'Client events are only allowed on private and presence channels' });
  s.send({ event: 'client-c', channel: 'private-encrypted-x', data: {} });
  e = await nextError();
  assert.equal(e.data.code, null);
  s.send({ event: 'client-c', channel: 'private-not-joined', data: {} });
  e = await nextError();
  assert.match(e.data.message, /not subscribed/);
  assert.equal(s.count('pusher:error'), errorsBefore + 3);

  // None of the refused events reached r; a marker proves ordering.
  await serverSdk(hub).trigger('public-x', 'mark', '');
  await serverSdk(hub).trigger('private-encrypted-x', 'mark', '');
  await r.event('mark', 'public-x');
  await r.event('mark', 'private-encrypted-x');
  assert.equal(r.count('client-c'), 0);
  // The sender never got its own events back.
  assert.equal(s.count('client-a') + s.count('client-b'), 0);
  assert.equal(s.closed, null);
});

test('rate limit: over 10 client events a second gives pusher:error 4301', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const s = await rawOnLoop(t, hub, 0);
  const r = await rawOnLoop(t, hub, 1);
  await s.subscribed('private-burst');
  await r.subscribed('private-burst');
  const N = 100;
  for (let i = 0; i < N; i++) s.send({ event: 'client-burst', channel: 'private-burst', data: { i } });
  const rejected = () => s.msgs.filter((m) => m.event === 'pusher:error' && m.data.code === 4301);
  // Every event is either relayed or rejected, and the burst (sent in far
  // less than a second even on a busy machine) cannot all pass.
  await waitFor(() => rejected().length + r.count('client-burst') === N, 'all accounted for');
  assert.ok(rejected().length >= 1, 'some rejected');
  assert.ok(r.count('client-burst') >= 10, 'the first ten pass');
  assert.equal(rejected()[0].data.message, 'Client event rejected due to rate limit');
  // Non-fatal: the connection stays up.
  s.send({ event: 'pusher:ping', data: {} });
  await s.event('pusher:pong');
  assert.equal(s.closed, null);
});

test('client events refused when the app disables them', async (t) => {
  const hub = await startHub([], {
    t, loops: 2,
    apps: [APP, { id: 'quiet-id', key: 'quiet-key', secret: 'quiet-secret', client_events: false }],
  });
  const s = await rawOnLoop(t, hub, 0, 'quiet-key');
  const r = await rawOnLoop(t, hub, 1, 'quiet-key');
  const opts = { key: 'quiet-key', secret: 'quiet-secret' };
  assert.equal((await s.subscribed('private-q', opts)).event, 'pusher_internal:subscription_succeeded');
  assert.equal((await r.subscribed('private-q', opts)).event, 'pusher_internal:subscription_succeeded');
  s.send({ event: 'client-x', channel: 'private-q', data: {} });
  const e = await s.event('pusher:error');
  assert.deepEqual(e.data, { code: 4301, message: 'Client events are disabled for this app' });
  const sdk = serverSdk(hub, { id: 'quiet-id', key: 'quiet-key', secret: 'quiet-secret' });
  await sdk.trigger('private-q', 'mark', '');
  await r.event('mark', 'private-q');
  assert.equal(r.count('client-x'), 0);
  // The default app in the same hub still relays them.
  const s2 = await rawOnLoop(t, hub, 0);
  const r2 = await rawOnLoop(t, hub, 1);
  await s2.subscribed('private-q');
  await r2.subscribed('private-q');
  s2.send({ event: 'client-x', channel: 'private-q', data: {} });
  await r2.event('client-x', 'private-q');
  // Apps are isolated: the quiet app's subscriber saw nothing of it.
  await sdk.trigger('private-q', 'mark2', '');
  await r.event('mark2', 'private-q');
  assert.equal(r.count('client-x'), 0);
});

// The read bypass delivers the client events of one read in one walk per
// run of them (hub/loop/publish.h, hub_defer_begin). 200 events written in one
// write, with a run on another channel and a ping in the middle: every
// receiver gets every event meant for it exactly once, in the order sent,
// and the sender none.
test('client events of one read arrive whole and in order', async (t) => {
  const file = configFile(t, { apps: [{ ...APP, client_event_rate: 0 }] });
  const hub = await startHub(['--config', file], { t, loops: 1, drainTimeout: null });
  const s = await rawClient(t, hub);
  const both = await rawClient(t, hub);
  const one = await rawClient(t, hub);
  for (const c of [s, both]) {
    await c.subscribed('private-b');
    await c.subscribed('private-o');
  }
  await one.subscribed('private-b');
  const sent = [];
  for (let i = 0; i < 200; i++) {
    const channel = i >= 120 && i < 125 ? 'private-o' : 'private-b';
    sent.push({ event: 'client-n', channel, data: { i } });
  }
  const reads0 = (await hub.stats()).per_loop[0].ws_direct_reads;
  const sock = s.ws._socket;
  sock.cork();
  for (let i = 0; i < sent.length; i++) {
    if (i === 150) s.send({ event: 'pusher:ping', data: {} });
    s.send(sent[i]);
  }
  process.nextTick(() => sock.uncork());
  const got = (c) => c.msgs.filter((m) => m.event === 'client-n');
  await waitFor(() => got(both).length === 200 && got(one).length === 195,
    'every event at both receivers');
  await s.event('pusher:pong');
  assert.deepEqual(got(both), sent);
  assert.deepEqual(got(one), sent.filter((m) => m.channel === 'private-b'));
  assert.equal(got(s).length, 0);
  // Read by the bypass, in a few reads (not one per event).
  const reads = (await hub.stats()).per_loop[0].ws_direct_reads - reads0;
  assert.ok(reads > 0 && reads < 100, `reads ${reads}`);
  // Nothing more arrives (no duplicate from a held batch).
  await serverSdk(hub).trigger('private-b', 'mark', {});
  await both.event('mark', 'private-b');
  assert.equal(got(both).length, 200);
});
