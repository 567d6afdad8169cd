'use strict';
// Cache channels (cache-, private-cache-, private-encrypted-cache-,
// presence-cache-) end to end across two loops: pusher-js subscribers, the
// pusher SDK publishing and reading info=cache, raw clients for the wire
// order (the cached event right after subscription_succeeded), expiry with
// a short TTL, the per-app byte cap (eviction and oversize events), and the
// counters in /stats and /metrics. docs/PROTOCOL.md 3.6.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor, request } = require('./lib/hub');
const {
  APP, serverSdk, pusherOnLoop, rawClient, rawOnLoop,
} = require('./lib/clients');

function total(stats, key) {
  return stats.totals[key] !== undefined ? stats.totals[key]
    : stats.per_loop.reduce((a, l) => a + l[key], 0);
}

// A pusher-js client on loop `loop` subscribed to channel, recording every
// event bound on the channel (cached ones included) in order.
async function subscriber(t, hub, loop, channel, opts) {
  const c = await pusherOnLoop(t, hub, loop, opts);
  const ch = c.subscribe(channel);
  const got = [];
  ch.bind_global((event, data) => got.push({ event, data }));
  await waitFor(() => ch.subscribed, `subscribed to ${channel}`);
  return { c, ch, got };
}

// The next message after subscription_succeeded on a raw client.
async function firstAfterSucceeded(raw, channel, opts) {
  const r = await raw.subscribed(channel, opts);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  const i = raw.msgs.indexOf(r);
  return raw.next(() => true, `the message after succeeded on ${channel}`, 10000, i + 1);
}

test('cache-: a subscriber on either loop gets the last event right after subscription_succeeded', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  assert.equal((await sdk.trigger('cache-score', 'score', { home: 1, away: 0 })).status, 200);
  assert.equal((await sdk.trigger('cache-score', 'score', { home: 2, away: 0 })).status, 200);
  let last = { home: 2, away: 0 };
  for (const loop of [0, 1]) {
    const s = await subscriber(t, hub, loop, 'cache-score');
    await waitFor(() => s.got.some((g) => g.event === 'score'), `cached event on loop ${loop}`);
    const events = s.got.map((g) => g.event);
    assert.deepEqual(events.filter((e) => e !== 'pusher:subscription_succeeded'), ['score']);
    assert.deepEqual(s.got.find((g) => g.event === 'score').data, last);
    last = { home: 3, away: loop };
    // Later events arrive as on any channel.
    await sdk.trigger('cache-score', 'score', { home: 3, away: loop });
    await waitFor(() => s.got.filter((g) => g.event === 'score').length === 2, 'live event');
  }
  // The wire order, exactly: succeeded, then the cached event.
  const raw = await rawOnLoop(t, hub, 1);
  const m = await firstAfterSucceeded(raw, 'cache-score');
  assert.equal(m.event, 'score');
  assert.equal(m.channel, 'cache-score');
  assert.deepEqual(JSON.parse(m.data), { home: 3, away: 1 });
  const st = await hub.stats();
  assert.equal(total(st, 'cache_hits'), 3);
  assert.equal(total(st, 'cache_stores'), 4);
  assert.equal(st.cache.entries, 1);
  assert.ok(st.cache.bytes > 0);
});

test('cache-: with nothing cached a subscriber gets pusher:cache_miss', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const s = await subscriber(t, hub, 0, 'cache-empty');
  await waitFor(() => s.got.some((g) => g.event === 'pusher:cache_miss'), 'cache_miss');
  const raw = await rawClient(t, hub);
  const m = await firstAfterSucceeded(raw, 'cache-empty');
  assert.deepEqual(m, { event: 'pusher:cache_miss', channel: 'cache-empty' });
  // A plain channel gets neither.
  const r = await raw.subscribed('plain-channel');
  assert.equal(r.event, 'pusher_internal:subscription_succeeded');
  await raw.subscribed('plain-channel-2');
  assert.equal(raw.count('pusher:cache_miss'), 1);
  assert.equal(total(await hub.stats(), 'cache_misses'), 2);
  // Client events are not cached (as on Pusher).
  const priv = await rawClient(t, hub);
  assert.equal((await priv.subscribed('private-cache-chat')).event,
    'pusher_internal:subscription_succeeded');
  priv.send({ event: 'client-typing', channel: 'private-cache-chat', data: { a: 1 } });
  await priv.send({ event: 'pusher:ping', data: {} });
  await priv.event('pusher:pong');
  const late = await rawClient(t, hub);
  const m2 = await firstAfterSucceeded(late, 'private-cache-chat');
  assert.equal(m2.event, 'pusher:cache_miss');
});

test('cache-: an event expires after the configured TTL (per app)', async (t) => {
  const hub = await startHub([], {
    t, loops: 2,
    apps: [{ id: APP.id, key: APP.key, secret: APP.secret, cache_ttl: '400ms' }],
  });
  const sdk = serverSdk(hub);
  await sdk.trigger('cache-ttl', 'state', { v: 1 });
  // The HTTP API shows it with its remaining life, then null once expired.
  const r = await sdk.get({ path: '/channels/cache-ttl', params: { info: 'cache' } });
  assert.equal(r.status, 200);
  const body = await r.json();
  assert.equal(body.occupied, false);
  if (body.cache !== null) {
    assert.equal(body.cache.data, JSON.stringify({ v: 1 }));
    assert.ok(body.cache.ttl >= 0 && body.cache.ttl <= 1, JSON.stringify(body));
  }
  await waitFor(async () => {
    const x = await (await sdk.get({ path: '/channels/cache-ttl', params: { info: 'cache' } })).json();
    return x.cache === null;
  }, 'the cached event to expire', 20000, 50);
  const raw = await rawClient(t, hub);
  assert.equal((await firstAfterSucceeded(raw, 'cache-ttl')).event, 'pusher:cache_miss');
  // The reclaim (once a heartbeat run) empties the store.
  await waitFor(async () => (await hub.stats()).cache.entries === 0, 'reclaimed');
  // info=cache is only for cache channels.
  await assert.rejects(sdk.get({ path: '/channels/plain', params: { info: 'cache' } }),
    (e) => e.status === 400 && /only for cache channels/.test(e.body));
});

test('private-cache-: the subscription still needs a signature, then gets the cached event', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  await sdk.trigger('private-cache-orders', 'order', { id: 42 });
  const raw = await rawClient(t, hub);
  const bad = await raw.subscribed('private-cache-orders', { auth: `${APP.key}:${'0'.repeat(64)}` });
  assert.equal(bad.event, 'pusher:subscription_error');
  assert.equal(bad.data.status, 401);
  assert.equal(raw.count('order'), 0);
  const s = await subscriber(t, hub, 1, 'private-cache-orders');
  await waitFor(() => s.got.some((g) => g.event === 'order'), 'cached order');
  assert.deepEqual(s.got.find((g) => g.event === 'order').data, { id: 42 });
});

test('presence-cache-: members and the cached event, in that order', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  await sdk.trigger('presence-cache-room', 'topic', 'lunch');
  const s = await subscriber(t, hub, 0, 'presence-cache-room',
    { presence: { user_id: 'u1', user_info: { n: 1 } } });
  await waitFor(() => s.got.some((g) => g.event === 'topic'), 'cached topic');
  assert.equal(s.ch.members.count, 1);
  assert.equal(s.got.find((g) => g.event === 'topic').data, 'lunch');
  const raw = await rawOnLoop(t, hub, 1);
  const m = await firstAfterSucceeded(raw, 'presence-cache-room',
    { channelData: { user_id: 'u2' } });
  assert.equal(m.event, 'topic');
  await waitFor(() => s.ch.members.count === 2, 'member_added reached the first member');
});

test('private-encrypted-cache-: the cached ciphertext decrypts in pusher-js', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  await sdk.trigger('private-encrypted-cache-vault', 'secret', { code: 'x_y_z' });
  const s = await subscriber(t, hub, 1, 'private-encrypted-cache-vault');
  await waitFor(() => s.got.some((g) => g.event === 'secret'), 'cached secret');
  assert.deepEqual(s.got.find((g) => g.event === 'secret').data, { code: 'x_y_z' });
  // The hub kept ciphertext only.
  const r = await sdk.get({ path: '/channels/private-encrypted-cache-vault', params: { info: 'cache' } });
  const body = await r.json();
  assert.ok(!body.cache.data.includes('x_y_z'));
  assert.ok(JSON.parse(body.cache.data).ciphertext);
});

test('cache byte cap: oldest evicted, an event over the cap is not cached, all counted', async (t) => {
  const hub = await startHub([], {
    t, loops: 2,
    apps: [{ id: APP.id, key: APP.key, secret: APP.secret, cache_max_bytes: '4KiB' }],
  });
  const sdk = serverSdk(hub);
  const data = 'x'.repeat(900);
  for (let i = 0; i < 10; i++) {
    assert.equal((await sdk.trigger(`cache-c${i}`, 'e', data)).status, 200);
  }
  let st = await hub.stats();
  assert.ok(st.cache.bytes <= 4096, JSON.stringify(st.cache));
  assert.ok(st.cache.entries >= 3 && st.cache.entries < 10, JSON.stringify(st.cache));
  assert.equal(total(st, 'cache_evictions'), 10 - st.cache.entries);
  // The newest survived, the oldest went.
  const raw = await rawClient(t, hub);
  assert.equal((await firstAfterSucceeded(raw, 'cache-c9')).event, 'e');
  assert.equal((await firstAfterSucceeded(raw, 'cache-c0')).event, 'pusher:cache_miss');
  // An event bigger than the whole cap replaces nothing: the channel's
  // older event goes too, so nobody gets stale state.
  await sdk.trigger('cache-c9', 'e', 'y'.repeat(5000));
  st = await hub.stats();
  assert.equal(total(st, 'cache_oversize'), 1);
  const late = await rawClient(t, hub);
  assert.equal((await firstAfterSucceeded(late, 'cache-c9')).event, 'pusher:cache_miss');
  const text = (await request('GET', hub.url('/metrics'))).body;
  assert.match(text, /lubdub_cache_oversize_total\{loop="\d"\} 1/);
  assert.match(text, new RegExp(`lubdub_cache_entries\\{app="${APP.id}"\\} ${st.cache.entries}`));
  assert.match(text, /lubdub_cache_bytes\{app="app-id"\} \d+/);
});
