'use strict';
// Recovery (issue 35, item 5) on one node: pusher-js as apps run it (the
// pinned 8.4 and 8.6), plus the helper exactly as the hub serves it
// (/lubdub-resume.js), behind a proxy of the test's own that cuts the
// connection abruptly at seeded random moments (lib/cutproxy.js: both
// directions reset, bytes in flight lost, sometimes inside a frame).
//
// - 1,000 events at a few hundred a second on a public and a private
//   channel, client events from a second client in the same stream, five
//   cuts: every event reaches the app's channel.bind handler exactly once
//   and in order, the client's own client events never come back, and no
//   app-level handler (channel.bind_global, pusher.bind_global) sees a
//   lubdub: message; the helper counted no duplicate (the hub sends none).
//   A third channel subscribed to in the middle of the stream (a fresh
//   subscription) gets a contiguous tail of it, each event once.
// - A gap longer than the ttl: lubdub:resume_failed names the channel on
//   pusher.bind_global, and nothing of the gap is replayed (not even the
//   part history still holds).
// - Laravel Echo: resume(Echo.connector.pusher); listen('.seq') sees every
//   event exactly once through two cuts.
// - A client without the helper gets no lubdub: message at all.
//
// The seed of each run's cuts is printed (t.diagnostic); LUBDUB_TEST_SEED
// replays it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor, TIME_SCALE } = require('./lib/hub');
const { APP, serverSdk, rawClient } = require('./lib/clients');
const { cutProxy, prng } = require('./lib/cutproxy');
const {
  PUSHER_JS, pusherJs, historyApp, loadHelper, pusherOptions, pusherVia, record, upTo, cutPoints,
  stream, clientTraffic, assertClientEvents, endAndWait, assertExactlyOnce, historyStats, historyOf,
} = require('./lib/recovery');

const N = 1000;
const RATE = 200;

for (const { version, module } of PUSHER_JS) {
  test(`pusher-js ${version}: 1,000 events, five random cuts, public, private and client events exactly once`, async (t) => {
    const { Pusher, version: got } = pusherJs(module);
    assert.equal(got, version);
    const hub = await startHub([], { t, loops: 2, apps: [historyApp()] });
    const { resume } = await loadHelper(t, hub);
    const proxy = await cutProxy(t, hub, { name: `pusher-js ${version}` });
    t.diagnostic(`seed ${proxy.seed} (LUBDUB_TEST_SEED=${proxy.seed} replays the cuts)`);
    const channels = ['stream', 'private-stream'];
    const client = pusherVia(t, hub, Pusher, proxy);
    const helper = resume(client);
    const rec = record(client, channels, { clientEvents: ['client-seq', 'client-own'] });

    // The sender of client events, through a proxy of its own that never
    // cuts: what it sends all reaches the hub.
    const senderProxy = await cutProxy(t, hub, { name: 'sender' });
    const sender = pusherVia(t, hub, Pusher, senderProxy);
    const senderCh = sender.subscribe('private-stream');
    const ownAtSender = [];
    senderCh.bind('client-own', (d) => ownAtSender.push(d.seq));
    await waitFor(() => channels.every((c) => client.channel(c).subscribed) && senderCh.subscribed,
      'both clients subscribed', 60000);

    const traffic = clientTraffic(client, senderCh);
    // A channel the stream publishes to from the start, subscribed to
    // (fresh) in the middle of it: from its lubdub:pos on, a contiguous
    // tail, each once (nothing taken for a duplicate).
    const lateAt = 100 + Math.floor(prng(proxy.seed ^ 0x1a7e)() * 300);
    const between = (seq) => {
      if (seq === lateAt) rec.watch('late');
      traffic.between(seq);
    };
    const points = cutPoints(prng(proxy.seed ^ 0x5eed), N, 5);
    t.diagnostic(`cut points (events published before each cut): ${points.join(', ')}`);
    const started = Date.now();
    const r = await stream(t, hub, {
      channels: [...channels, 'late'], n: N, rate: RATE, proxy, client, points, between,
    });
    const took = Date.now() - started;
    await endAndWait(hub, rec, [...channels, 'late'], N);

    const { sent, own } = traffic.counts;
    t.diagnostic(`${N} events x ${channels.length} channels in ${took} ms, ${sent} client events, ` +
      `${own} of the client's own`);
    t.diagnostic(proxy.describe());
    t.diagnostic(`helper: ${JSON.stringify(helper.stats())}; subscription_succeeded per channel ` +
      `${JSON.stringify(rec.subscribed)}`);
    const hs = await historyStats(hub);
    t.diagnostic(`hub: ${JSON.stringify(hs)}`);

    assert.equal(r.cuts, 5);
    assert.equal(proxy.cuts, 5);
    assert.ok(proxy.accepted >= 6, `${proxy.accepted} connections: the client came back after each cut`);
    assert.deepEqual(rec.failed, [], 'no resume may fail within the ttl');
    for (const c of channels) assertExactlyOnce(rec.seqs[c], N, c);
    const late = rec.seqs.late;
    t.diagnostic(`late: subscribed after event ${lateAt}, got ${late[0]}..${late[late.length - 1]}`);
    assert.ok(late[0] > 1, `a fresh subscription got history it never asked for: ${late[0]}`);
    assert.deepEqual(late, upTo(N).slice(late[0] - 1), 'late: not a contiguous tail, each once');
    await assertClientEvents(rec, traffic);
    assert.deepEqual(rec.client['stream client-seq'], []);
    assert.deepEqual(rec.leaks, [], 'lubdub: messages reached app handlers');
    assert.equal(helper.stats().duplicates, 0, 'the hub sent an event twice (the helper hid it)');
    // What was missed came by the replay (200 events a second, and each
    // reconnect takes pusher-js a second), not only live.
    assert.ok(hs.resumes >= 1 && hs.replayed_events > 0, JSON.stringify(hs));
    t.diagnostic(`the sender got ${ownAtSender.length} of the client's own ${own} client events`);
  });
}

// Whether a resume of channel from ids is told lubdub:resume_failed (a
// raw client of its own, closed after the answer).
async function gapExpired(t, hub, channel, ids) {
  const c = await rawClient(t, hub);
  c.send({ event: 'lubdub:resume', data: { v: 1, channels: { [channel]: ids } } });
  c.subscribe(channel);
  const m = await c.next((x) => x.event === 'lubdub:resume_failed' || x.event === 'lubdub:resumed',
    'the probe\'s answer', 10000 * TIME_SCALE);
  c.close();
  return m.event === 'lubdub:resume_failed';
}

test('a gap longer than the ttl: lubdub:resume_failed on pusher.bind_global, no partial replay', async (t) => {
  const { Pusher } = pusherJs('pusher-js');
  const hub = await startHub([], { t, apps: [historyApp({ ttl: '1s', size: 100 })] });
  const { resume } = await loadHelper(t, hub);
  const proxy = await cutProxy(t, hub, { name: 'ttl' });
  const sdk = serverSdk(hub);
  const client = pusherVia(t, hub, Pusher, proxy);
  const helper = resume(client);
  const rec = record(client, ['gap']);
  // A watcher that asked for markers: where the client stands, as ids.
  const watcher = await rawClient(t, hub);
  watcher.send({ event: 'lubdub:resume', data: { v: 1, channels: {} } });
  await watcher.subscribed('gap');
  await waitFor(() => client.channel('gap').subscribed, 'subscribed', 60000);
  for (let seq = 1; seq <= 5; seq++) await sdk.trigger('gap', 'seq', { seq });
  await waitFor(() => rec.seqs.gap.length === 5 && watcher.count('seq') === 5, 'the live events', 60000);
  const [origin, last] = watcher.all('lubdub:id').pop().data;
  const pos = { [origin]: last };

  // Away: cut, and hold the client off while the gap is published and
  // then passes the ttl.
  proxy.pause();
  const before = client.connection.socket_id;
  assert.equal(await proxy.cut(), 1);
  const since = Date.now() - 1;
  for (let seq = 6; seq <= 10; seq++) await sdk.trigger('gap', 'seq', { seq });
  const right = await historyOf(hub, 'gap', { since });
  t.diagnostic(`history right after the gap: ${right.status} ${right.body}`);
  // Past the ttl once the hub itself says so: a probe that resumes from
  // where the client stands (the watcher's last id) is told resume_failed
  // (and GET .../events since the gap began answers nothing, incomplete).
  let probes = 0;
  await waitFor(async () => { probes++; return gapExpired(t, hub, 'gap', pos); },
    'the gap to pass the ttl', 20000, 100);
  t.diagnostic(`the gap was past the ttl at probe ${probes}, ${Date.now() - since} ms after it began`);
  const expired = await historyOf(hub, 'gap', { since });
  t.diagnostic(`history then: ${expired.status} ${expired.body}`);
  // The HTTP API agrees: not complete, and the gap's first event is gone
  // (its newest may still be kept for a few ms more: they expire one by
  // one, a ttl after each was kept).
  assert.equal(expired.status, 200, expired.body);
  assert.equal(expired.json.complete, false, expired.body);
  const left = expired.json.events.map((e) => JSON.parse(e.data).seq);
  assert.ok(!left.includes(6), `the gap's first event still kept: ${left}`);
  assert.deepEqual(left, left.length ? [...Array(left.length)].map((_, i) => 11 - left.length + i) : [],
    'what is left is the gap\'s newest events');
  // The end of the gap is still in history when the client comes back: a
  // replay of it alone would be a partial gap.
  for (let seq = 11; seq <= 13; seq++) await sdk.trigger('gap', 'seq', { seq });
  t.diagnostic(`hub before the reconnect: ${JSON.stringify(await historyStats(hub))}`);
  proxy.resume();
  await waitFor(() => rec.failed.length >= 1 && client.connection.socket_id !== before &&
    client.channel('gap').subscribed, 'lubdub:resume_failed and the new subscription', 30000);
  t.diagnostic(`resume_failed: ${JSON.stringify(rec.failed)}`);
  assert.ok(rec.failed[0].channels.includes('gap'), JSON.stringify(rec.failed[0]));

  // Live again from a fresh start.
  await sdk.trigger('gap', 'seq', { seq: 14 });
  await endAndWait(hub, rec, ['gap'], 14);
  assert.deepEqual(rec.seqs.gap, [1, 2, 3, 4, 5, 14], 'nothing of the gap replayed');
  assert.equal(rec.failed.length, 1);
  assert.deepEqual(rec.leaks, []);
  assert.equal(helper.stats().duplicates, 0);
  t.diagnostic(`helper: ${JSON.stringify(helper.stats())}; hub: ${JSON.stringify(await historyStats(hub))}`);
});

test('Laravel Echo: listen() sees every event exactly once through two cuts', async (t) => {
  const { default: Echo } = await import('laravel-echo');
  const { Pusher } = pusherJs('pusher-js');
  const hub = await startHub([], { t, loops: 2, apps: [historyApp()] });
  const { resume } = await loadHelper(t, hub);
  const proxy = await cutProxy(t, hub, { name: 'echo' });
  t.diagnostic(`seed ${proxy.seed}`);
  // pusher-js's own options (Echo hands them to new Pusher): the same
  // client as the other tests', its private channel signed by the SDK.
  const echo = new Echo({ broadcaster: 'pusher', key: APP.key, Pusher, ...pusherOptions(hub, proxy) });
  t.after(() => echo.disconnect());
  const pusher = echo.connector.pusher;
  const helper = resume(pusher);
  const seqs = { news: [], 'private-orders': [] };
  const ends = { news: 0, 'private-orders': 0 };
  const leaks = [];
  pusher.bind_global((name) => { if (String(name).startsWith('lubdub:')) leaks.push(name); });
  const subs = [echo.channel('news'), echo.private('orders')];
  let subscribed = 0;
  for (const [ch, name] of [[subs[0], 'news'], [subs[1], 'private-orders']]) {
    ch.listen('.seq', (e) => seqs[name].push(e.seq))
      .listen('.end', () => { ends[name]++; })
      .subscribed(() => { subscribed++; });
  }
  // Echo's listenToAll sees every event of a channel (bind_global).
  subs[0].listenToAll((name) => { if (String(name).includes('lubdub')) leaks.push(`news: ${name}`); });
  await waitFor(() => subscribed >= 2, 'Echo subscribed', 60000);
  const n = 300;
  const points = cutPoints(prng(proxy.seed), n, 2);
  const r = await stream(t, hub, {
    channels: ['news', 'private-orders'], n, rate: RATE, proxy, client: pusher, points,
  });
  await endAndWait(hub, { ends, seqs }, ['news', 'private-orders'], n).catch((e) => {
    throw new Error(`${e.message}: news ${seqs.news.length}, orders ${seqs['private-orders'].length}`);
  });
  t.diagnostic(`${proxy.describe()}; helper ${JSON.stringify(helper.stats())}`);
  assert.equal(r.cuts, 2);
  assertExactlyOnce(seqs.news, n, 'news');
  assertExactlyOnce(seqs['private-orders'], n, 'private-orders');
  assert.deepEqual(leaks, []);
  assert.equal(helper.stats().duplicates, 0);
});

test('a client without the helper gets no lubdub: message at all', async (t) => {
  const { Pusher } = pusherJs('pusher-js');
  const hub = await startHub([], { t, loops: 2, apps: [historyApp()] });
  const { resume } = await loadHelper(t, hub);
  // A client with the helper on the same channel, so the hub does build
  // the markers: they must go to it alone.
  const withHelper = pusherVia(t, hub, Pusher, hub);
  const helper = resume(withHelper);
  const rec = record(withHelper, ['mixed']);
  const raw = await rawClient(t, hub);
  assert.equal((await raw.subscribed('mixed')).event, 'pusher_internal:subscription_succeeded');
  await waitFor(() => withHelper.channel('mixed').subscribed, 'the helper client subscribed', 60000);
  const sdk = serverSdk(hub);
  const n = 50;
  for (let seq = 1; seq <= n; seq++) await sdk.trigger('mixed', 'seq', { seq });
  await endAndWait(hub, rec, ['mixed'], n);
  await raw.event('end', 'mixed');
  assertExactlyOnce(rec.seqs.mixed, n, 'the helper client');
  assert.ok(helper.stats().markers >= n, `the helper got markers: ${JSON.stringify(helper.stats())}`);
  const ours = raw.msgs.filter((m) => /lubdub/.test(m.event));
  assert.deepEqual(ours, [], 'lubdub: messages sent to a client that never asked');
  // Its events are the plain frames, exactly as without history.
  const events = raw.msgs.filter((m) => m.event === 'seq');
  assert.deepEqual(events, upTo(n).map((seq) => ({ event: 'seq', channel: 'mixed', data: JSON.stringify({ seq }) })));
  assert.deepEqual(raw.msgs.map((m) => m.event),
    ['pusher:connection_established', 'pusher_internal:subscription_succeeded', ...upTo(n).map(() => 'seq'), 'end']);
});
