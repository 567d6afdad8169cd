'use strict';
// The resume helper (web/lubdub-resume.js) inside the real pusher-js, with
// no hub: a fake server of the test's own (a WebSocket server speaking just
// enough of the Pusher protocol, and the hub's side of the lubdub: messages
// as docs/PROTOCOL.md spells them) sends what the test scripts, records
// what the client sends, in wire order, and cuts the connection. pusher-js
// is the real one, over its real transport, so every message takes the
// path a hub's would: the helper's connection.bind_global first, then
// pusher-js's own dispatch to channel.bind and pusher.bind_global.
//
// What it checks: lubdub:id commits an id, lubdub:pos sets a channel's
// position, a duplicate is neutralized and counted, the app never sees
// lubdub:id / lubdub:pos / lubdub:resumed while lubdub:resume_failed
// reaches pusher.bind, and the lubdub:resume after a reconnect (before
// every pusher:subscribe on the wire) holds the positions, the previous
// socket ids and away_ms, in parts under 8 KB, without the channels the
// app left. resume() on an open connection and stop() too, and Laravel
// Echo through resume(Echo.connector.pusher).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Pusher = require('pusher-js');

// pusher-js 8.6 beside the pinned 8.4, as the npm alias pusher-js-86
// (tests/integration/package.json): the first test runs under both.
let Pusher86 = null;
try {
  Pusher86 = require('pusher-js-86');
} catch (_) { /* not installed here: that run is skipped, saying so */ }
const { WebSocketServer } = require('ws');
const { waitFor } = require('./lib/hub');

const HELPER = path.resolve(__dirname, '../../web/lubdub-resume.js');

let resume;
test.before(async () => {
  // An ES module: imported from its text, as a browser would take it.
  const src = fs.readFileSync(HELPER).toString('base64');
  ({ resume } = await import(`data:text/javascript;base64,${src}`));
});

// The fake server. conns: one record per connection, {ws, socketId, rx
// (every message the client sent, parsed, in order), resumed (it sent a
// lubdub:resume)}. pos(conn, channel): the lubdub:pos ids to send before
// a subscription_succeeded, or null for none; sent only to a connection
// that asked for resume, as the hub does.
async function fakeHub(t, pos = () => null) {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => wss.once('listening', resolve));
  const hub = { conns: [], port: wss.address().port };
  hub.send = (c, msg) => c.ws.send(JSON.stringify(msg));
  // A history event as the hub writes it: its id, then the event.
  hub.pair = (c, channel, id, event, data) => {
    hub.send(c, { event: 'lubdub:id', data: id });
    hub.send(c, { event, channel, data: JSON.stringify(data) });
  };
  hub.last = () => hub.conns[hub.conns.length - 1];
  wss.on('connection', (ws) => {
    const c = { ws, socketId: `${hub.conns.length + 1}.${1000 + hub.conns.length}`, rx: [], resumed: false };
    hub.conns.push(c);
    ws.on('message', (m) => {
      const msg = JSON.parse(m);
      c.rx.push(msg);
      if (msg.event === 'lubdub:resume') c.resumed = true;
      if (msg.event !== 'pusher:subscribe') return;
      const ch = msg.data.channel;
      const ids = c.resumed ? pos(c, ch) : null;
      if (ids) hub.send(c, { event: 'lubdub:pos', data: { channel: ch, ids } });
      hub.send(c, { event: 'pusher_internal:subscription_succeeded', channel: ch, data: '{}' });
    });
    hub.send(c, {
      event: 'pusher:connection_established',
      data: JSON.stringify({ socket_id: c.socketId, activity_timeout: 120 }),
    });
  });
  t.after(() => {
    for (const c of hub.conns) c.ws.terminate();
    wss.close();
  });
  return hub;
}

// A pusher-js client of the fake server, and what the app sees: every name
// its channel handlers and its pusher.bind_global get.
function client(t, hub, P = Pusher) {
  const pusher = new P('app-key', {
    cluster: 'x', wsHost: '127.0.0.1', wsPort: hub.port, forceTLS: false,
    enabledTransports: ['ws'], disableStats: true,
  });
  t.after(() => pusher.disconnect());
  const seen = { global: [], channel: [] };
  pusher.bind_global((name) => seen.global.push(name));
  return { pusher, seen };
}

function subscribe(pusher, seen, name) {
  const ch = pusher.subscribe(name);
  ch.bind_global((ev) => seen.channel.push(ev));
  return ch;
}

// The lubdub:resume messages c sent, and where they sit among its
// pusher:subscribe messages.
function resumesOf(c) {
  const idx = (e) => c.rx.map((m, i) => (m.event === e ? i : -1)).filter((i) => i >= 0);
  return { msgs: c.rx.filter((m) => m.event === 'lubdub:resume').map((m) => m.data),
    at: idx('lubdub:resume'), subscribes: idx('pusher:subscribe') };
}

// Cut the connection the way a dead network does for the client (no close
// handshake) and wait for pusher-js to come back and resubscribe n channels.
async function cut(hub, n) {
  const before = hub.conns.length;
  hub.last().ws.terminate();
  await waitFor(() => hub.conns.length === before + 1 &&
    resumesOf(hub.last()).subscribes.length >= n, 'the client back and resubscribed', 15000);
  return hub.last();
}

for (const [version, P] of [['8.4', Pusher], ['8.6', Pusher86]]) {
test(`pusher-js ${version}: markers commit ids, lubdub:pos sets the start, duplicates are neutralized, the app sees no lubdub: message`,
  { skip: !P && 'pusher-js-86 is not installed' }, async (t) => {
  const hub = await fakeHub(t, () => ({ b1: 5 }));
  const { pusher, seen } = client(t, hub, P);
  const dups = [];
  const helper = resume(pusher, { onDuplicate: (...a) => dups.push(a) });
  const got = [];
  const ch = subscribe(pusher, seen, 'c');
  ch.bind('e', (d) => got.push(d.n));
  await waitFor(() => ch.subscribed, 'subscribed');
  const c1 = hub.last();

  // The first connect: resume enabled, no positions yet, before the subscribe.
  const r1 = resumesOf(c1);
  assert.deepEqual(r1.msgs, [{ v: 1, away_ms: 0, sockets: [], channels: {} }]);
  assert.ok(r1.at[0] < r1.subscribes[0], 'lubdub:resume is written before pusher:subscribe');

  hub.pair(c1, 'c', ['b1', 6], 'e', { n: 6 });
  // A string data is the same id once pusher-js has parsed it.
  hub.send(c1, { event: 'lubdub:id', data: JSON.stringify(['b1', 7]) });
  hub.send(c1, { event: 'e', channel: 'c', data: JSON.stringify({ n: 7 }) });
  hub.pair(c1, 'c', ['b1', 6], 'e', { n: 6 }); // passed already
  hub.pair(c1, 'c', ['b1', 5], 'e', { n: 5 }); // covered by lubdub:pos
  hub.pair(c1, 'c', ['n2', 1], 'e', { n: 100 }); // another origin
  hub.send(c1, { event: 'lubdub:resumed', data: { channel: 'c', replayed: 0 } });
  hub.send(c1, { event: 'e', channel: 'c', data: JSON.stringify({ n: 0 }) }); // no marker
  await waitFor(() => got.includes(0), 'the last event');
  assert.deepEqual(got, [6, 7, 100, 0]);
  assert.deepEqual(dups, [['c', 'b1', 6], ['c', 'b1', 5]]);
  assert.deepEqual(helper.stats(), { duplicates: 2, markers: 5, resumes: 1 });
  for (const name of [...seen.channel, ...seen.global]) {
    assert.ok(!name.startsWith('lubdub:') && !name.startsWith('pusher_internal:'), `the app saw ${name}`);
  }
  assert.ok(seen.global.includes('e') && seen.channel.includes('e'), 'the app sees the events');

  // A marker whose event the cut took is not committed: replayed later.
  hub.send(c1, { event: 'lubdub:id', data: ['b1', 8] });
  const c2 = await cut(hub, 1);
  const r2 = resumesOf(c2);
  assert.equal(r2.msgs.length, 1);
  assert.deepEqual(r2.msgs[0].channels, { c: { b1: 7, n2: 1 } });
  assert.deepEqual(r2.msgs[0].sockets, [c1.socketId]);
  // pusher-js waits 1 s before it reconnects; away_ms counts from the last
  // message received (a lower bound only: a slow machine adds to it).
  assert.ok(r2.msgs[0].away_ms >= 900, `away_ms ${r2.msgs[0].away_ms}`);
  assert.ok(r2.at[0] < r2.subscribes[0], 'lubdub:resume is written before the resubscribe');
  assert.equal(helper.stats().resumes, 2);

  // A third socket: the list of previous ones grows, newest last.
  await waitFor(() => ch.subscribed, 'subscribed again');
  const c3 = await cut(hub, 1);
  assert.deepEqual(resumesOf(c3).msgs[0].sockets, [c1.socketId, c2.socketId]);
});
}

test('lubdub:resume_failed reaches the app and clears the channel; channels the app left are forgotten', async (t) => {
  const hub = await fakeHub(t, () => ({ b1: 1 }));
  const { pusher, seen } = client(t, hub);
  resume(pusher);
  const failed = [];
  pusher.bind('lubdub:resume_failed', (d) => failed.push(d));
  const a = subscribe(pusher, seen, 'a');
  const b = subscribe(pusher, seen, 'b');
  const gone = subscribe(pusher, seen, 'gone');
  await waitFor(() => a.subscribed && b.subscribed && gone.subscribed, 'subscribed');
  const c1 = hub.last();
  hub.pair(c1, 'gone', ['b1', 2], 'e', {});
  pusher.unsubscribe('gone');
  // A node id may be any name, this one too (a table without a prototype).
  hub.pair(c1, 'a', ['__proto__', 9], 'e', {});
  hub.send(c1, { event: 'lubdub:resume_failed', data: { channels: ['b'], reason: 'expired' } });
  await waitFor(() => failed.length === 1, 'resume_failed');
  assert.deepEqual(failed, [{ channels: ['b'], reason: 'expired' }]);
  assert.ok(seen.global.includes('lubdub:resume_failed'), 'pusher.bind_global sees it too');

  // b: succeeded, then told resume_failed, and no lubdub:pos came before
  // the cut: it has no position, and says so (null), so the hub answers
  // resume_failed again rather than start it silently.
  const c2 = await cut(hub, 2);
  assert.deepEqual(resumesOf(c2).msgs[0].channels, JSON.parse('{"a":{"b1":1,"__proto__":9},"b":null}'));
});

test('a long resume goes in parts under 8 KB that together hold every channel, all before the first resubscribe', async (t) => {
  const N = 300;
  const name = (i) => `a-channel-with-a-long-name-for-the-test-${String(i).padStart(4, '0')}`;
  const ids = {};
  for (let o = 1; o <= 8; o++) ids[`node-${o}`] = 1234567 + o;
  const hub = await fakeHub(t, () => ids);
  const { pusher, seen } = client(t, hub);
  resume(pusher);
  const chans = [];
  for (let i = 0; i < N; i++) chans.push(subscribe(pusher, seen, name(i)));
  await waitFor(() => chans.every((ch) => ch.subscribed), 'all subscribed', 15000);

  const c2 = await cut(hub, N);
  const r = resumesOf(c2);
  assert.ok(r.msgs.length > 1, `${r.msgs.length} parts`);
  const all = {};
  for (const m of r.msgs) {
    const bytes = JSON.stringify({ event: 'lubdub:resume', data: m }).length;
    assert.ok(bytes < 8500, `a part of ${bytes} bytes`);
    assert.equal(m.v, 1);
    assert.deepEqual(m.sockets, r.msgs[0].sockets);
    assert.equal(m.away_ms, r.msgs[0].away_ms);
    Object.assign(all, m.channels);
  }
  const want = {};
  for (let i = 0; i < N; i++) want[name(i)] = ids;
  assert.deepEqual(all, want);
  assert.ok(Math.max(...r.at) < Math.min(...r.subscribes), 'every part before the first resubscribe');
});

test('resume() on an open connection sends at once; stop() unbinds it', async (t) => {
  const hub = await fakeHub(t);
  const { pusher, seen } = client(t, hub);
  const ch = subscribe(pusher, seen, 'c');
  await waitFor(() => ch.subscribed, 'subscribed');
  const c1 = hub.last();
  assert.equal(resumesOf(c1).msgs.length, 0);

  const helper = resume(pusher);
  await waitFor(() => resumesOf(c1).msgs.length === 1, 'lubdub:resume');
  assert.deepEqual(resumesOf(c1).msgs[0], { v: 1, away_ms: 0, sockets: [], channels: {} });
  // Markers from now on: a channel without a lubdub:pos starts at its first id.
  hub.pair(c1, 'c', ['b1', 3], 'e', {});
  await waitFor(() => seen.channel.includes('e'), 'event');
  const c2 = await cut(hub, 1);
  assert.deepEqual(resumesOf(c2).msgs[0].channels, { c: { b1: 3 } });
  assert.deepEqual(resumesOf(c2).msgs[0].sockets, [c1.socketId]);

  helper.stop();
  await waitFor(() => ch.subscribed, 'subscribed again');
  hub.send(c2, { event: 'lubdub:id', data: ['b1', 4] });
  await waitFor(() => seen.global.includes('lubdub:id'), 'markers reach the app once stopped');
  assert.deepEqual(helper.stats(), { duplicates: 0, markers: 1, resumes: 2 });
  const c3 = await cut(hub, 1);
  assert.equal(resumesOf(c3).msgs.length, 0, 'no lubdub:resume once stopped');
});

test('Laravel Echo: resume(Echo.connector.pusher); listen() gets each event once, listenToAll() no lubdub: name', async (t) => {
  const { default: Echo } = await import('laravel-echo');
  const hub = await fakeHub(t, () => ({ b1: 1 }));
  const echo = new Echo({
    broadcaster: 'pusher', key: 'app-key', cluster: 'x', wsHost: '127.0.0.1', wsPort: hub.port,
    forceTLS: false, enabledTransports: ['ws'], disableStats: true, Pusher,
  });
  t.after(() => echo.disconnect());
  const helper = resume(echo.connector.pusher);
  const got = [];
  const all = [];
  let subscribed = false;
  echo.channel('orders').listen('.shipped', (e) => got.push(e.n))
    .listenToAll((name) => all.push(name)).subscribed(() => { subscribed = true; });
  await waitFor(() => subscribed, 'subscribed');
  const c1 = hub.last();
  hub.pair(c1, 'orders', ['b1', 2], 'shipped', { n: 2 });
  hub.pair(c1, 'orders', ['b1', 2], 'shipped', { n: 2 });
  hub.pair(c1, 'orders', ['b1', 3], 'shipped', { n: 3 });
  await waitFor(() => got.includes(3), 'events');
  assert.deepEqual(got, [2, 3]);
  assert.deepEqual(all, ['.shipped', '.shipped']);
  assert.equal(helper.stats().duplicates, 1);
  const c2 = await cut(hub, 1);
  assert.deepEqual(resumesOf(c2).msgs[0].channels, { orders: { b1: 3 } });
});
