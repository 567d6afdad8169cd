'use strict';
// pusher_internal:subscription_count (an app with subscription_count on):
// pusher-js sets channel.subscriptionCount and emits
// pusher:subscription_count; a subscribe storm across two loops comes out
// as a handful of events, at most one per channel per sub_count_interval. And the per-connection
// subscription cap: a client asking for 10,000 channels gets
// max_subscriptions of them and a clear refusal for the rest, and stays
// connected. docs/PROTOCOL.md 3.7 and 3.1.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const { APP, pusherOnLoop, rawClient } = require('./lib/clients');

const INTERVAL_MS = 300;

function total(stats, key) {
  return stats.per_loop.reduce((a, l) => a + l[key], 0);
}

test('subscription_count: pusher-js sees the hub-wide count, a storm is coalesced', async (t) => {
  const hub = await startHub(['--sub-count-interval', `${INTERVAL_MS}ms`], {
    t, loops: 2,
    apps: [{ id: APP.id, key: APP.key, secret: APP.secret, subscription_count: true }],
  });
  const watcher = await pusherOnLoop(t, hub, 0);
  const ch = watcher.subscribe('room');
  const seen = [];
  ch.bind('pusher:subscription_count', (d) => seen.push(d.subscription_count));
  await waitFor(() => ch.subscriptionCount === 1, 'the watcher counted itself');
  assert.deepEqual(seen, [1]);

  // A presence channel never gets one.
  const pres = await rawClient(t, hub);
  await pres.subscribed('presence-lobby', { channelData: { user_id: 'p' } });

  const N = 1000;
  const raws = [];
  const start = Date.now();
  for (let i = 0; i < N; i++) raws.push(rawClient(t, hub));
  const clients = await Promise.all(raws);
  await Promise.all(clients.map((c) => c.subscribed('room')));
  await waitFor(() => ch.subscriptionCount === N + 1, `count ${N + 1}`, 30000);
  const elapsed = Date.now() - start;
  const during = seen.length - 1;
  // At most one per interval hub-wide, plus the one in flight.
  const bound = Math.ceil(elapsed / INTERVAL_MS) + 1;
  assert.ok(during <= bound, `${during} events in ${elapsed} ms (bound ${bound})`);
  assert.ok(during < N / 3, `${during} events for ${N} subscriptions`);
  t.diagnostic(`${N} subscriptions in ${elapsed} ms: ${during} subscription_count events`);
  // Subscribers get the same count: the directory's, hub-wide.
  const last = clients[N - 1];
  await waitFor(() => last.msgs.some((m) => m.event === 'pusher_internal:subscription_count' &&
    JSON.parse(m.data).subscription_count === N + 1), 'a raw subscriber saw the final count');
  assert.equal(pres.count('pusher_internal:subscription_count'), 0);

  // Leaving counts too.
  for (const c of clients) c.close();
  await waitFor(() => ch.subscriptionCount === 1, 'back to 1', 30000);
  const st = await hub.stats();
  assert.equal(total(st, 'subscription_count_events'), seen.length);
  assert.equal(total(st, 'subscription_count_dropped'), 0);
});

test('subscription_count is off unless the app turns it on', async (t) => {
  const hub = await startHub(['--sub-count-interval', '50ms'], { t, loops: 2 });
  const a = await rawClient(t, hub);
  const b = await rawClient(t, hub);
  await a.subscribed('room');
  await b.subscribed('room');
  // No event is the claim: wait out the interval many times over, on the
  // hub's own clock (a heartbeat run per loop is 1 s, the interval 50 ms).
  const runs = (await hub.stats()).per_loop.map((l) => l.heartbeat.runs);
  await waitFor(async () => (await hub.stats()).per_loop.every((l, i) => l.heartbeat.runs > runs[i] + 1),
    'two heartbeat runs on each loop');
  assert.equal(a.count('pusher_internal:subscription_count'), 0);
  assert.equal(total(await hub.stats(), 'subscription_count_events'), 0);
});

// Subscribe to names[] in batches (each batch answered before the next, so
// the answers never pile up past max_queue); returns every answer.
async function subscribeAll(raw, names, batch = 500) {
  const answers = [];
  for (let i = 0; i < names.length; i += batch) {
    const part = names.slice(i, i + batch);
    const from = raw.msgs.length;
    for (const n of part) raw.send({ event: 'pusher:subscribe', data: { channel: n } });
    await waitFor(() => raw.msgs.length - from >= part.length, `answers ${i}..${i + part.length}`, 30000);
    answers.push(...raw.msgs.slice(from, from + part.length));
  }
  return answers;
}

test('subscription cap: 10,000 subscribes get 100 channels and 9,900 clear refusals, the connection lives', async (t) => {
  // Past --subscribe-rate's burst too: that limit (abuse.test.js) is off
  // here, so that this one is seen alone.
  const hub = await startHub(['--subscribe-rate', '0'], { t, loops: 2 });
  const raw = await rawClient(t, hub);
  const names = Array.from({ length: 10000 }, (_, i) => `c-${i}`);
  const answers = await subscribeAll(raw, names);
  const ok = answers.filter((m) => m.event === 'pusher_internal:subscription_succeeded');
  const refused = answers.filter((m) => m.event === 'pusher:subscription_error');
  assert.equal(ok.length, 100);
  assert.equal(refused.length, 9900);
  assert.deepEqual(ok.map((m) => m.channel), names.slice(0, 100));
  assert.equal(refused[0].data.type, 'LimitReached');
  assert.equal(refused[0].data.status, 4100);
  assert.match(refused[0].data.error, /the limit is 100/);
  // Still connected and answering.
  raw.send({ event: 'pusher:ping', data: {} });
  await raw.event('pusher:pong');
  assert.equal(raw.closed, null);
  const st = await hub.stats();
  assert.equal(st.totals.subscriptions, 100);
  assert.equal(st.totals.subscriptions_refused, 9900);
  // Unsubscribing frees a place.
  raw.send({ event: 'pusher:unsubscribe', data: { channel: 'c-0' } });
  assert.equal((await raw.subscribed('c-100')).event, 'pusher_internal:subscription_succeeded');
});

test('subscription cap per app: max_subscriptions in the app wins over the hub-wide one', async (t) => {
  const hub = await startHub([], {
    t, loops: 2,
    apps: [{ id: APP.id, key: APP.key, secret: APP.secret, max_subscriptions: 5 }],
  });
  const raw = await rawClient(t, hub);
  const answers = await subscribeAll(raw, ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
  assert.deepEqual(answers.map((m) => m.event), [
    ...Array(5).fill('pusher_internal:subscription_succeeded'),
    'pusher:subscription_error', 'pusher:subscription_error']);
  assert.match(answers[5].data.error, /the limit is 5\)/);
  // Re-subscribing to a channel it holds is never refused.
  assert.equal((await raw.subscribed('a')).event, 'pusher_internal:subscription_succeeded');
});
