'use strict';
// The HTTP API's read of a channel's history (docs/PROTOCOL.md 6.2,
// docs/RECOVERY.md): GET /apps/{app_id}/channels/{channel_name}/events,
// signed like every GET (the pusher SDK's get() signs it), with since= or
// after= and limit=. An app keeps 5 events per channel: what the answer
// holds (the last five, oldest first, data byte for byte as subscribers
// got it, client events too), what `complete` says in each case, paging
// with after=, since= in wall-clock ms, and the 400s, 401, 404s and 429.

const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const { APP, serverSdk, rawClient, rest } = require('./lib/clients');
const { events, refused } = require('./lib/history');

// History on every channel of the app, 5 events each.
const KEEPS5 = { ...APP, history: { ttl: '120s', size: 5 } };
// History only on news*.
const NARROW = {
  id: 'narrow-id', key: 'narrow-key', secret: 'narrow-secret',
  history: { ttl: '120s', size: 5, channels: ['news*'] },
};
// No history.
const PLAIN = { id: 'plain-id', key: 'plain-key', secret: 'plain-secret' };
// Few reads a second.
const SLOW = {
  id: 'slow-id', key: 'slow-key', secret: 'slow-secret',
  max_read_requests_per_second: 2, history: { ttl: '120s', size: 5 },
};

async function hubWithHistory(t) {
  return startHub([], { t, loops: 2, apps: [KEEPS5, NARROW, PLAIN, SLOW] });
}

const seqOf = (id) => Number(id.split(':')[1]);
const names = (body) => body.events.map((e) => e.event);

// Data that must come back byte for byte: unicode (BMP and astral),
// quotes, backslashes, control characters, empty, JSON text.
const DATAS = [
  'plain', '{"a":1,"b":[true,null]}', 'üñíçødé ☃ 😀', 'with "quotes" and \\ backslash',
  'tab\there\nnewline', '', 'ctl\u0001\u001finside', JSON.stringify({ x: 'é"\\', y: [1.5, -2] }),
];

async function publish(sdk, channel, from, to) {
  for (let i = from; i <= to; i++) {
    const r = await sdk.trigger(channel, `e${i}`, DATAS[(i - 1) % DATAS.length]);
    assert.equal(r.status, 200);
  }
}

test('the last `size` events, oldest first, data byte for byte as subscribers got it; complete false once some were trimmed', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  // Kept but nothing published yet: empty, and nothing of the ttl missing.
  assert.deepEqual(await events(sdk, 'news'), { events: [], complete: true });
  const sub = await rawClient(t, hub);
  await sub.subscribed('news');
  const t0 = Date.now();
  await publish(sdk, 'news', 1, 2);
  // Two of five: all of it, complete.
  const two = await events(sdk, 'news');
  assert.deepEqual(names(two), ['e1', 'e2']);
  assert.equal(two.complete, true);
  await publish(sdk, 'news', 3, 8);
  await waitFor(() => sub.msgs.filter((m) => /^e\d$/.test(m.event)).length === 8, 'the subscriber got all 8');
  const all = await events(sdk, 'news');
  assert.deepEqual(names(all), ['e4', 'e5', 'e6', 'e7', 'e8']);
  // e1..e3 were trimmed within the ttl: what is kept no longer covers it.
  assert.equal(all.complete, false);
  // Byte for byte: what was published, and what the subscriber got.
  const got = Object.fromEntries(sub.msgs.filter((m) => /^e\d$/.test(m.event)).map((m) => [m.event, m.data]));
  for (const [i, e] of all.events.entries()) {
    assert.equal(e.data, DATAS[i + 3], e.event);
    assert.equal(e.data, got[e.event], e.event);
  }
  // One origin, seq rising (shared by all channels: not contiguous).
  assert.equal(new Set(all.events.map((e) => e.id.split(':')[0])).size, 1);
  for (let i = 1; i < 5; i++) assert.ok(seqOf(all.events[i].id) > seqOf(all.events[i - 1].id));
  // time_ms is wall-clock ms (not the hub's monotonic clock), in order.
  for (const [i, e] of all.events.entries()) {
    assert.ok(e.time_ms >= t0 - 1000 && e.time_ms <= Date.now() + 1000, `${e.time_ms} vs ${t0}`);
    if (i) assert.ok(e.time_ms >= all.events[i - 1].time_ms);
  }
  // limit= cuts from the oldest; complete is still about the start point.
  const cut = await events(sdk, 'news', { limit: 2 });
  assert.deepEqual(names(cut), ['e4', 'e5']);
  assert.equal(cut.complete, false);
  // since=0 asks for everything ever: the hub cannot vouch for that.
  const ever = await events(sdk, 'news', { since: 0 });
  assert.deepEqual(names(ever), ['e4', 'e5', 'e6', 'e7', 'e8']);
  assert.equal(ever.complete, false);
  // Another channel of the app is its own.
  await publish(sdk, 'news-other', 1, 1);
  assert.deepEqual(names(await events(sdk, 'news-other')), ['e1']);
});

test('after= pages through what is kept; complete says whether the history still reaches back to that id', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  await publish(sdk, 'pages', 1, 3);
  const first = (await events(sdk, 'pages')).events[0];
  assert.equal(first.event, 'e1');
  await publish(sdk, 'pages', 4, 8);
  // From e1, trimmed since: what is kept after it, and incomplete (e2, e3
  // are gone).
  const stale = await events(sdk, 'pages', { after: first.id, limit: 2 });
  assert.deepEqual(names(stale), ['e4', 'e5']);
  assert.equal(stale.complete, false);
  // From e5, still kept: page by page, each complete, until an empty page.
  const pages = [];
  let after = stale.events[1].id;
  for (;;) {
    const p = await events(sdk, 'pages', { after, limit: 2 });
    assert.equal(p.complete, true, JSON.stringify(p));
    pages.push(names(p));
    if (!p.events.length) break;
    after = p.events.at(-1).id;
  }
  assert.deepEqual(pages, [['e6', 'e7'], ['e8'], []]);
  // An id of an origin this hub is not (an earlier run): everything kept,
  // incomplete.
  const foreign = await events(sdk, 'pages', { after: 'b00000000:1' });
  assert.deepEqual(names(foreign), ['e4', 'e5', 'e6', 'e7', 'e8']);
  assert.equal(foreign.complete, false);
});

test('since= is wall-clock ms: the events kept at or after it; complete when nothing since then was lost', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  await publish(sdk, 'since', 1, 2);
  // A clear gap in time between e2 and e3 (a condition on the clock, not a
  // sleep: the hub stamps e3 after this returns).
  const gapFrom = Date.now();
  await waitFor(() => Date.now() >= gapFrom + 30, 'the clock moved on', 5000, 5);
  await publish(sdk, 'since', 3, 4);
  const all = await events(sdk, 'since');
  assert.deepEqual(names(all), ['e1', 'e2', 'e3', 'e4']);
  assert.equal(all.complete, true);
  const [t1, , t3] = all.events.map((e) => e.time_ms);
  assert.ok(t3 - all.events[1].time_ms >= 20, JSON.stringify(all.events));
  const late = await events(sdk, 'since', { since: t3 - 10 });
  assert.deepEqual(names(late), ['e3', 'e4']);
  assert.equal(late.complete, true);
  for (const e of late.events) assert.ok(e.time_ms >= t3 - 10);
  const whole = await events(sdk, 'since', { since: t1 });
  assert.deepEqual(names(whole), ['e1', 'e2', 'e3', 'e4']);
  assert.equal(whole.complete, true);
  const one = await events(sdk, 'since', { since: t1, limit: 1 });
  assert.deepEqual(names(one), ['e1']);
  assert.equal(one.complete, true);
  const future = await events(sdk, 'since', { since: Date.now() + 60000 });
  assert.deepEqual(future, { events: [], complete: true });
  // Trimmed after since: incomplete.
  await publish(sdk, 'since', 5, 7);
  const trimmed = await events(sdk, 'since', { since: t1 });
  assert.deepEqual(names(trimmed), ['e3', 'e4', 'e5', 'e6', 'e7']);
  assert.equal(trimmed.complete, false);
});

test('client events are kept and read back as the JSON text subscribers got', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  const a = await rawClient(t, hub);
  const b = await rawClient(t, hub);
  await a.subscribed('private-chat');
  await b.subscribed('private-chat');
  const sent = { from: 'a', text: 'say "hi" ☃ 😀', n: [1, 2.5, null] };
  a.send({ event: 'client-msg', channel: 'private-chat', data: sent });
  const got = await b.event('client-msg');
  await sdk.trigger('private-chat', 'server-msg', 'from the backend');
  const body = await events(sdk, 'private-chat');
  assert.deepEqual(names(body), ['client-msg', 'server-msg']);
  assert.equal(body.events[0].data, JSON.stringify(sent));
  assert.deepEqual(JSON.parse(body.events[0].data), got.data);
  assert.equal(body.events[1].data, 'from the backend');
});

test('signed like every GET: 401 for a bad signature, 400 for bad parameters, 404 without history, 429 over the read limit', async (t) => {
  const hub = await hubWithHistory(t);
  const sdk = serverSdk(hub);
  await publish(sdk, 'news', 1, 1);
  const path = `/apps/${APP.id}/channels/news/events`;
  // Signed by hand: 200; a wrong secret or a parameter changed after
  // signing: 401.
  const ok = await rest(hub, 'GET', path, { params: { limit: '1' } });
  assert.equal(ok.status, 200, ok.body);
  assert.deepEqual(ok.json.events.map((e) => e.event), ['e1']);
  const badSecret = await rest(hub, 'GET', path, { params: { limit: '1' }, signOpts: { secret: 'nope' } });
  assert.equal(badSecret.status, 401, badSecret.body);
  const tampered = await rest(hub, 'GET', path,
    { params: { limit: '1' }, tamper: (p) => p.replace('limit=1', 'limit=2') });
  assert.equal(tampered.status, 401, tampered.body);
  // Parameters.
  await refused(sdk, 'news', { since: 1, after: 'b1:1' }, 400, /since or after, not both/);
  for (const since of ['-1', 'soon', '1.5', '']) {
    await refused(sdk, 'news', { since }, 400, /since must be a time in ms/);
  }
  for (const after of ['nocolon', 'b1:', ':7', 'b1:x']) {
    await refused(sdk, 'news', { after }, 400, /after must be an event id/);
  }
  for (const limit of ['0', '1001', 'ten', '-5']) {
    await refused(sdk, 'news', { limit }, 400, /limit must be between 1 and 1000/);
  }
  assert.equal((await events(sdk, 'news', { limit: 1000 })).events.length, 1);
  // No history: the app's, or that channel's.
  await refused(serverSdk(hub, PLAIN), 'news', {}, 404, /^history is not enabled for this app$/);
  await refused(serverSdk(hub, NARROW), 'other', {}, 404, /^history is not enabled for this channel$/);
  assert.deepEqual(await events(serverSdk(hub, NARROW), 'news-1'), { events: [], complete: true });
  // An unknown app: as every route.
  const unknown = await rest(hub, 'GET', '/apps/nope/channels/news/events');
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error, 'unknown app');
  // The app's read rate limit counts these reads.
  const slow = serverSdk(hub, SLOW);
  const results = await Promise.all(Array.from({ length: 20 }, () =>
    slow.get({ path: '/channels/news/events' }).then((r) => r.status, (e) => {
      if (e.status === 429) assert.match(e.body, /"error":"rate limit exceeded/);
      return e.status;
    })));
  assert.ok(results.includes(200) && results.includes(429), `${results}`);
  assert.ok(results.every((x) => x === 200 || x === 429), `${results}`);
});
