'use strict';
// Recovery's wire protocol (docs/PROTOCOL.md "Recovery"), byte-level, with a
// raw client: what a session that sends lubdub:resume gets around its
// subscriptions and before each history event, the replay a resumed
// subscription gets (exactly what it missed, in order, once), and the
// failures. pusher-js and the helper end to end: recovery.test.js.

const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const { APP, serverSdk, rawClient } = require('./lib/clients');

const HISTORY_APP = {
  id: APP.id, key: APP.key, secret: APP.secret,
  history: { ttl: '120s', size: 50, channels: ['news*', 'private-*', 'cache-*'] },
};

async function hubWithHistory(t, loops = 2) {
  return startHub([], { t, loops, apps: [HISTORY_APP] });
}

// A raw client that asked to resume: data as the helper sends it.
async function resumer(t, hub, data = {}) {
  const c = await rawClient(t, hub);
  c.send({ event: 'lubdub:resume', data: { v: 1, channels: {}, ...data } });
  return c;
}

function ofEvent(c, name) { return c.messages.filter((m) => m.event === name); }

// The messages after index i, without pings and pongs.
function after(c, i) {
  return c.messages.slice(i).filter((m) => !/^pusher:p[io]ng$/.test(m.event));
}

async function publishN(sdk, channel, from, n) {
  for (let i = from; i < from + n; i++) {
    const r = await sdk.trigger(channel, 'seq', { i });
    assert.equal(r.status, 200);
  }
}

test('a session that resumes gets lubdub:pos before subscription_succeeded and lubdub:id before each history event; others get neither', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  const r = await resumer(t, hub);
  const plain = await rawClient(t, hub);
  const i0 = r.msgs.length;
  const res = await r.subscribed('news');
  assert.equal(res.event, 'pusher_internal:subscription_succeeded');
  await plain.subscribed('news');
  const head = after(r, i0);
  assert.equal(head[0].event, 'lubdub:pos', JSON.stringify(head));
  assert.equal(head[0].channel, undefined, 'markers carry no channel');
  assert.equal(head[0].data.channel, 'news');
  const [origin] = Object.keys(head[0].data.ids);
  assert.match(origin, /^b[0-9a-f]{8}$/);
  const start = head[0].data.ids[origin];
  await publishN(sdk, 'news', 1, 3);
  await waitFor(() => ofEvent(r, 'seq').length === 3 && ofEvent(plain, 'seq').length === 3,
    'three events on both');
  const seen = after(r, r.msgs.indexOf(res) + 1);
  assert.deepEqual(seen.map((m) => m.event),
    ['lubdub:id', 'seq', 'lubdub:id', 'seq', 'lubdub:id', 'seq'], JSON.stringify(seen));
  const ids = seen.filter((m) => m.event === 'lubdub:id').map((m) => m.data);
  for (const [o, s] of ids) {
    assert.equal(o, origin);
    assert.ok(s > start, `${s} > ${start}`);
  }
  assert.ok(ids[0][1] < ids[1][1] && ids[1][1] < ids[2][1], JSON.stringify(ids));
  assert.deepEqual(ofEvent(r, 'seq').map((m) => m.data.i), [1, 2, 3]);
  // The plain client never hears of recovery.
  assert.equal(plain.messages.filter((m) => m.event.startsWith('lubdub:')).length, 0);
  // A channel without history: no marker, no pos.
  const j = r.msgs.length;
  await r.subscribed('other');
  await sdk.trigger('other', 'seq', { i: 9 });
  await waitFor(() => ofEvent(r, 'seq').length === 4, 'the event on other');
  assert.deepEqual(after(r, j).map((m) => m.event),
    ['pusher_internal:subscription_succeeded', 'seq']);
});

test('a resumed subscription gets exactly what it missed, in order, then lubdub:resumed, then live events once', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  const a = await resumer(t, hub);
  await a.subscribed('news');
  await publishN(sdk, 'news', 1, 2);
  await waitFor(() => ofEvent(a, 'seq').length === 2, 'two events');
  const ids = ofEvent(a, 'lubdub:id').map((m) => m.data);
  const [origin, last] = ids[1];
  a.terminate();
  // Missed while away: 3..7.
  await publishN(sdk, 'news', 3, 5);
  const b = await resumer(t, hub, { away_ms: 50, channels: { news: { [origin]: last } } });
  const i0 = b.msgs.length;
  await b.subscribed('news');
  await waitFor(() => b.find('lubdub:resumed'), 'lubdub:resumed');
  await publishN(sdk, 'news', 8, 2);
  await waitFor(() => ofEvent(b, 'seq').length === 7, 'replay and live');
  const got = after(b, i0);
  assert.equal(got[0].event, 'pusher_internal:subscription_succeeded', JSON.stringify(got));
  const names = got.map((m) => m.event);
  assert.deepEqual(names.slice(1, 11),
    ['lubdub:id', 'seq', 'lubdub:id', 'seq', 'lubdub:id', 'seq', 'lubdub:id', 'seq', 'lubdub:id', 'seq']);
  assert.equal(names[11], 'lubdub:resumed');
  assert.deepEqual(got[11].data, { channel: 'news', replayed: 5 });
  assert.deepEqual(ofEvent(b, 'seq').map((m) => m.data.i), [3, 4, 5, 6, 7, 8, 9]);
  assert.equal(b.count('lubdub:pos'), 0, 'a resumed subscription gets no new start');
  const st = await hub.stats();
  assert.equal(st.totals.resumes, 1);
  assert.equal(st.totals.replayed_events, 5);
});

test('a resume that history cannot serve says lubdub:resume_failed, then a fresh start', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  await publishN(sdk, 'news', 1, 1);
  // An origin this hub never was (an earlier run), and a channel without
  // history, and a malformed vector.
  const b = await resumer(t, hub, {
    away_ms: 10,
    channels: { news: { b00000000: 5 }, other: { b00000000: 1 }, 'news-2': { x: 'bad' } },
  });
  for (const [ch, reason] of [['news', 'unknown_origin'], ['other', 'no_history'], ['news-2', 'invalid']]) {
    const i0 = b.msgs.length;
    await b.subscribed(ch);
    const got = after(b, i0).map((m) => m.event);
    const want = ch === 'other'
      ? ['lubdub:resume_failed', 'pusher_internal:subscription_succeeded']
      : ['lubdub:resume_failed', 'lubdub:pos', 'pusher_internal:subscription_succeeded'];
    assert.deepEqual(got, want, ch);
    const failed = after(b, i0)[0];
    assert.deepEqual(failed.data, { channels: [ch], reason });
  }
  assert.equal((await hub.stats()).totals.resumes_failed, 3);
});

test('a resumed subscription does not get back the client events its own earlier socket sent', async (t) => {
  const hub = await hubWithHistory(t);
  const a = await resumer(t, hub);
  const other = await resumer(t, hub);
  await a.subscribed('private-room');
  await other.subscribed('private-room');
  other.send({ event: 'client-msg', channel: 'private-room', data: { from: 'other', i: 1 } });
  await waitFor(() => ofEvent(a, 'client-msg').length === 1, 'a got the first');
  const [origin, last] = ofEvent(a, 'lubdub:id').at(-1).data;
  // a sends one (never echoed to it), then drops; the other sends again.
  a.send({ event: 'client-msg', channel: 'private-room', data: { from: 'a', i: 2 } });
  await waitFor(() => ofEvent(other, 'client-msg').length === 1, 'the other got a\'s');
  a.terminate();
  other.send({ event: 'client-msg', channel: 'private-room', data: { from: 'other', i: 3 } });
  const b0 = await resumer(t, hub, { away_ms: 10, channels: { 'private-room': { [origin]: last } } });
  // Without its old socket id it would get its own back ...
  await b0.subscribed('private-room');
  await waitFor(() => b0.find('lubdub:resumed'), 'resumed');
  assert.deepEqual(ofEvent(b0, 'client-msg').map((m) => m.data.i), [2, 3]);
  // ... with it, only what the others sent.
  const b = await resumer(t, hub, {
    away_ms: 10, sockets: [a.socketId], channels: { 'private-room': { [origin]: last } },
  });
  await b.subscribed('private-room');
  await waitFor(() => b.find('lubdub:resumed'), 'resumed');
  assert.deepEqual(ofEvent(b, 'client-msg').map((m) => m.data.i), [3]);
});
