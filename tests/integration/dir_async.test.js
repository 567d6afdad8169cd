'use strict';
// The hub side of an asynchronous directory (hub/loop/backplane.h join_async,
// query_async) against the real server: LUBDUB_TEST_DIR_DELAY_MS makes the
// in-process directory answer every subscribe and REST read late
// (hub/loop/dirdelay_harness.h), as a Redis-backed one would. A subscription gets no
// event before its subscription_succeeded; presence lists and events stay
// right; REST reads and info= are answered late on a keep-alive
// connection; a connection (HTTP or WebSocket) that goes before its answer
// leaves nothing behind and nothing crashes (run under ASan too).
const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { startHub, waitFor, responses } = require('./lib/hub');
const {
  rawClient, rest, signedPath, APP, publish,
} = require('./lib/clients');

const DELAY_MS = 400;

async function slowHub(t, loops = 1, delayMs = DELAY_MS) {
  const hub = await startHub([], { t, loops, env: { LUBDUB_TEST_DIR_DELAY_MS: String(delayMs) } });
  await waitFor(() => /LUBDUB_TEST_DIR_DELAY_MS=\d+: the directory answers late/.test(hub.stderr),
    'the hook on');
  return hub;
}



function rawGet(p) {
  return `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`;
}

function rawPost(p, body) {
  return `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

test('a subscription waits for the directory: no event before its confirmation', async (t) => {
  const hub = await slowHub(t, 2);
  const a = await rawClient(t, hub);
  const from = a.msgs.length;
  a.subscribe('public-news');
  // Published while the join is pending: a must not get it before its
  // subscription_succeeded (it is not subscribed yet).
  const early = await publish(hub, { name: 'evt', channels: ['public-news'], data: { n: 1 } });
  assert.equal(early.status, 200);
  await a.event('pusher_internal:subscription_succeeded', 'public-news', from);
  const late = await publish(hub, { name: 'evt', channels: ['public-news'], data: { n: 2 } });
  assert.equal(late.status, 200);
  await waitFor(() => a.msgs.some((m) => m.event === 'evt' && JSON.parse(m.data).n === 2),
    'the event published after the confirmation');
  const ok = a.msgs.findIndex((m) => m.event === 'pusher_internal:subscription_succeeded');
  const first = a.msgs.findIndex((m) => m.event === 'evt');
  assert.ok(first > ok, `no event before the confirmation: ${JSON.stringify(a.msgs)}`);
  assert.equal(a.count('pusher_internal:subscription_succeeded', 'public-news'), 1);

  // A second subscribe while pending is ignored: one confirmation.
  const from2 = a.msgs.length;
  a.subscribe('public-two');
  a.subscribe('public-two');
  a.send({ event: 'pusher:ping', data: {} });
  await a.event('pusher:pong', undefined, from2);
  // Both were in while the first was pending (the pong came first).
  const bothPending = a.count('pusher_internal:subscription_succeeded', 'public-two') === 0;
  await a.event('pusher_internal:subscription_succeeded', 'public-two', from2);
  const r = await rest(hub, 'GET', `/apps/${APP.id}/channels/public-two`,
    { params: { info: 'subscription_count' } });
  assert.deepEqual(r.json, { occupied: true, subscription_count: 1 });
  if (bothPending) assert.equal(a.count('pusher_internal:subscription_succeeded', 'public-two'), 1);
});

test('presence through a late directory: lists, member events, REST counts', async (t) => {
  const hub = await slowHub(t, 2);
  const ch = 'presence-room';
  const w = await rawClient(t, hub);
  await w.subscribed(ch, { channelData: { user_id: 'w', user_info: { r: 1 } } });
  const u = await rawClient(t, hub);
  const s = await u.subscribed(ch, { channelData: { user_id: 'alice' } });
  assert.equal(s.event, 'pusher_internal:subscription_succeeded');
  assert.deepEqual(JSON.parse(s.data).presence.ids.sort(), ['alice', 'w']);
  const added = await w.event('pusher_internal:member_added', ch);
  assert.deepEqual(JSON.parse(added.data), { user_id: 'alice' });
  // The same user again gets the list again, and the counts stay.
  const again = await u.subscribed(ch, { channelData: { user_id: 'alice' } });
  assert.equal(again.event, 'pusher_internal:subscription_succeeded');
  const users = await rest(hub, 'GET', `/apps/${APP.id}/channels/${ch}/users`);
  assert.equal(users.status, 200);
  assert.deepEqual(users.json.users.map((x) => x.id).sort(), ['alice', 'w']);
  const info = await rest(hub, 'GET', `/apps/${APP.id}/channels/${ch}`,
    { params: { info: 'user_count,subscription_count' } });
  assert.deepEqual(info.json, { occupied: true, user_count: 2, subscription_count: 2 });
  const list = await rest(hub, 'GET', `/apps/${APP.id}/channels`,
    { params: { filter_by_prefix: 'presence-', info: 'user_count' } });
  assert.deepEqual(list.json, { channels: { [ch]: { user_count: 2 } } });
  u.close();
  const removed = await w.event('pusher_internal:member_removed', ch);
  assert.deepEqual(JSON.parse(removed.data), { user_id: 'alice' });
  assert.equal(w.count('pusher_internal:member_added', ch), 1);
});

test('late REST answers on one keep-alive connection; info= on publish', async (t) => {
  const hub = await slowHub(t, 1);
  const a = await rawClient(t, hub);
  await a.subscribed('public-k');
  const ev = JSON.stringify({
    name: 'evt', channels: ['public-k', 'public-none'], data: 'x', info: 'subscription_count',
  });
  const reqs = [
    rawGet(signedPath('GET', `/apps/${APP.id}/channels/public-k`, { info: 'subscription_count' })),
    rawGet(signedPath('GET', `/apps/${APP.id}/channels`, {})),
    rawPost(signedPath('POST', `/apps/${APP.id}/events`, {}, ev), ev),
  ];
  const got = await new Promise((resolve, reject) => {
    const sock = net.connect(hub.port, hub.host);
    let data = '';
    let next = 0;
    sock.setTimeout(15000, () => { sock.destroy(); reject(new Error(`timeout: ${data}`)); });
    sock.on('connect', () => sock.write(reqs[next++]));
    sock.on('data', (d) => {
      data += d;
      const rs = responses(data);
      if (rs.length === next && next < reqs.length) sock.write(reqs[next++]);
      else if (rs.length === reqs.length) { sock.destroy(); resolve(rs); }
    });
    sock.on('close', () => reject(new Error(`closed early: ${data}`)));
    sock.on('error', reject);
  });
  assert.equal(got.length, 3);
  for (const r of got) {
    assert.match(r.head, /^HTTP\/1\.1 200/);
    assert.doesNotMatch(r.head, /connection: close/i);
  }
  assert.deepEqual(JSON.parse(got[0].body), { occupied: true, subscription_count: 1 });
  assert.deepEqual(JSON.parse(got[1].body), { channels: { 'public-k': {} } });
  assert.deepEqual(JSON.parse(got[2].body), {
    channels: { 'public-k': { subscription_count: 1 }, 'public-none': { subscription_count: 0 } },
  });
  await a.event('evt', 'public-k');
  const batch = await rest(hub, 'POST', `/apps/${APP.id}/batch_events`, {
    body: { batch: [{ name: 'b1', channel: 'public-k', data: 'x' },
      { name: 'b2', channel: 'public-k', data: 'y', info: 'subscription_count' }] },
  });
  assert.equal(batch.status, 200);
  assert.deepEqual(batch.json, { batch: [{}, { subscription_count: 1 }] });
  await a.event('b2', 'public-k');
});

test('a connection that goes before its answer: dropped safely', async (t) => {
  const hub = await slowHub(t, 1);
  const a = await rawClient(t, hub);
  await a.subscribed('public-gone');
  const body = JSON.stringify({ name: 'orphan', channels: ['public-gone'], data: 'x', info: 'subscription_count' });
  const orphans = [
    rawGet(signedPath('GET', `/apps/${APP.id}/channels`, {})),
    rawGet(signedPath('GET', `/apps/${APP.id}/channels/presence-gone/users`, {})),
    rawPost(signedPath('POST', `/apps/${APP.id}/events`, {}, body), body),
  ];
  // Each sent whole; once the hub has all three waiting (its /stats says
  // so, answered at once), each socket is reset before the answers.
  const socks = orphans.map((text) => {
    const sock = net.connect(hub.port, hub.host);
    sock.on('connect', () => sock.write(text));
    sock.on('data', () => {});
    sock.on('error', () => {});
    return sock;
  });
  const loop0 = async () => (await hub.stats()).per_loop[0];
  await waitFor(async () => (await loop0()).rest_waiting === 3, 'three requests waiting');
  for (const sock of socks) sock.resetAndDestroy();
  // Each answer is then dropped (counted when the hub saw the reset
  // first: a waiting GET's socket is probed) or written into the dead
  // socket (a reset that came after the answer).
  await waitFor(async () => (await loop0()).rest_waiting === 0, 'no request waiting');
  assert.ok((await loop0()).rest_answers_dropped <= 3);
  // The publish still goes out (the request was whole; only its answer is
  // dropped)...
  await a.event('orphan', 'public-gone');
  // ...and the hub answers the next read as usual (ASan: at exit, nothing
  // of them was used after its free or leaked).
  const r = await rest(hub, 'GET', `/apps/${APP.id}/channels/public-gone`,
    { params: { info: 'subscription_count' } });
  assert.deepEqual(r.json, { occupied: true, subscription_count: 1 });
});

test('a client that leaves while its GET waits is forgotten before the answer', async (t) => {
  // The directory answers in 5 s: long enough that "before the answer" is
  // a state the test can see (rest_waiting still 1), not a race.
  const hub = await slowHub(t, 1, 5000);
  const loop0 = async () => (await hub.stats()).per_loop[0];
  const cpu = () => {
    const f = require('node:fs').readFileSync(`/proc/${hub.pid}/stat`, 'utf8')
      .split(') ')[1].split(' ');
    return Number(f[11]) + Number(f[12]);
  };
  for (const how of ['fin', 'reset']) {
    const base = (await loop0()).rest_answers_dropped;
    const sock = net.connect(hub.port, hub.host);
    let closed = false;
    sock.on('error', () => {});
    sock.on('data', () => {});
    sock.on('close', () => { closed = true; });
    sock.on('connect', () => sock.write(rawGet(signedPath('GET', `/apps/${APP.id}/channels`, {}))));
    await waitFor(async () => (await loop0()).rest_waiting === 1, `${how}: the GET waits`);
    const before = cpu();
    if (how === 'fin') sock.end(); else sock.resetAndDestroy();
    // Forgotten (counted dropped) while the directory has not answered
    // yet, and (FIN) the hub closed the connection: no answer is written
    // into it later.
    await waitFor(async () => (await loop0()).rest_answers_dropped === base + 1,
      `${how}: the answer forgotten`, 4000);
    assert.equal((await loop0()).rest_waiting, 1, `${how}: still before the answer`);
    if (how === 'fin') await waitFor(() => closed, 'fin: closed by the hub', 4000);
    // Nothing spins meanwhile (lws does not read a waiting GET's socket:
    // its POLLIN is off): far less than a core over the wait.
    await waitFor(async () => (await loop0()).rest_waiting === 0, `${how}: the late answer`, 20000);
    assert.ok(cpu() - before < 150, `${how}: ${cpu() - before} ticks of CPU while waiting`);
  }
  // The hub goes on answering (ASan: nothing used after its free, no leak).
  const r = await rest(hub, 'GET', `/apps/${APP.id}/channels`, {});
  assert.deepEqual(r.json, { channels: {} });
});

test('a POST with info= and a request pipelined behind it is refused, not published', async (t) => {
  const hub = await slowHub(t, 1);
  const a = await rawClient(t, hub);
  await a.subscribed('public-pipe');
  const body = JSON.stringify({ name: 'refused', channels: ['public-pipe'], data: 'x', info: 'subscription_count' });
  // The POST and a GET behind it in one write: lws cannot keep the
  // connection while the POST waits for the directory, so the hub answers
  // at once, and what would wait is refused with a clear 400.
  const text = rawPost(signedPath('POST', `/apps/${APP.id}/events`, {}, body), body) +
    rawGet(signedPath('GET', `/apps/${APP.id}/channels`, {}));
  const got = await new Promise((resolve, reject) => {
    const sock = net.connect(hub.port, hub.host);
    let data = '';
    sock.setTimeout(15000, () => { sock.destroy(); reject(new Error(`timeout: ${data}`)); });
    sock.on('connect', () => sock.write(text));
    sock.on('data', (d) => { data += d; });
    sock.on('close', () => resolve(responses(data)));
    sock.on('error', reject);
  });
  assert.equal(got.length, 1, JSON.stringify(got));
  assert.match(got[0].head, /^HTTP\/1\.1 400/);
  assert.match(got[0].head, /connection: close/i);
  assert.match(JSON.parse(got[0].body).error, /pipelined .*nothing was published/);
  // Not published: an event sent after it through the same late directory
  // (its wait fires after the refused one's would have) arrives alone.
  const after = await publish(hub,
    { name: 'evt', channels: ['public-pipe'], data: { n: 2 }, info: 'subscription_count' });
  assert.equal(after.status, 200);
  await a.event('evt', 'public-pipe');
  assert.equal(a.count('refused', 'public-pipe'), 0);
  // The same POST alone is published and answered as usual.
  const ok = await rest(hub, 'POST', `/apps/${APP.id}/events`, { body: JSON.parse(body) });
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.json, { channels: { 'public-pipe': { subscription_count: 1 } } });
  await a.event('refused', 'public-pipe');
});

test('a WebSocket that goes while its subscription is pending leaves it', async (t) => {
  const hub = await slowHub(t, 1);
  const ch = 'presence-brief';
  const w = await rawClient(t, hub);
  await w.subscribed(ch, { channelData: { user_id: 'w' } });
  const b = await rawClient(t, hub);
  b.subscribe(ch, { channelData: { user_id: 'bob' } });
  b.subscribe('private-brief');
  // The hub answers messages in order: its pong says both subscribes are
  // in (pending) well before the directory answers them.
  b.send({ event: 'pusher:ping', data: {} });
  await b.event('pusher:pong');
  assert.equal(b.count('pusher_internal:subscription_succeeded'), 0);
  b.ws.terminate();
  // The join was counted when the directory answered, after the session
  // went: the hub leaves it, as a subscribe and an unsubscribe would.
  await w.event('pusher_internal:member_removed', ch);
  assert.equal(w.count('pusher_internal:member_added', ch), 1);
  const users = await rest(hub, 'GET', `/apps/${APP.id}/channels/${ch}/users`);
  assert.deepEqual(users.json, { users: [{ id: 'w' }] });
  const priv = await rest(hub, 'GET', `/apps/${APP.id}/channels/private-brief`,
    { params: { info: 'subscription_count' } });
  assert.deepEqual(priv.json, { occupied: false, subscription_count: 0 });
  await waitFor(async () => (await hub.stats()).totals.sessions === 1, 'one session left');
});
