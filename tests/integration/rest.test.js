'use strict';
// The Pusher HTTP API (docs/PROTOCOL.md 6) through the pusher 5 SDK and, for
// requests the SDK refuses to make, requests signed by hand: multi-channel
// trigger with socket_id exclusion, batches, channel queries, `info` on
// publish, and every refusal with its status. Success is always 200 with a
// JSON object body whose `channels` member (when present) is an object.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor } = require('./lib/hub');
const {
  serverSdk, rawOnLoop, rawClient, rest, signedPath, APP,
} = require('./lib/clients');

test('trigger to 100 channels reaches subscribers on both loops, except socket_id', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const channels = Array.from({ length: 100 }, (_, i) => `fan-${i}`);
  const a = await rawOnLoop(t, hub, 0);
  const b = await rawOnLoop(t, hub, 1);
  const me = await rawOnLoop(t, hub, 1);
  for (const c of [a, b, me]) {
    for (const ch of ['fan-0', 'fan-57', 'fan-99', 'marker']) await c.subscribed(ch);
  }
  const res = await sdk.trigger(channels, 'wide', { big: true }, { socket_id: me.socketId });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {});
  for (const c of [a, b]) {
    for (const ch of ['fan-0', 'fan-57', 'fan-99']) {
      const m = await c.event('wide', ch);
      assert.equal(m.data, '{"big":true}');
    }
  }
  await sdk.trigger('marker', 'mark', '');
  await me.event('mark', 'marker');
  assert.equal(me.count('wide'), 0, 'the excluded socket got nothing');
  assert.equal(a.count('wide'), 3);
});

test('trigger with info returns channel attributes', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const a = await rawOnLoop(t, hub, 0);
  const b = await rawOnLoop(t, hub, 1);
  await a.subscribed('presence-i', { channelData: { user_id: '1' } });
  await b.subscribed('presence-i', { channelData: { user_id: '2' } });
  await b.subscribed('public-i');
  const res = await sdk.trigger(['presence-i', 'public-i', 'empty-i'], 'e', 'd',
    { info: 'user_count,subscription_count' });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    channels: {
      'presence-i': { user_count: 2, subscription_count: 2 },
      'public-i': { subscription_count: 1 },
      'empty-i': { subscription_count: 0 },
    },
  });
});

test('triggerBatch: up to 10 events, each to its channel, with info', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const a = await rawOnLoop(t, hub, 0);
  const b = await rawOnLoop(t, hub, 1);
  await a.subscribed('batch-a');
  await b.subscribed('batch-b');
  await b.subscribed('presence-batch', { channelData: { user_id: 'u' } });
  const batch = [];
  for (let i = 0; i < 9; i++) batch.push({ channel: i % 2 ? 'batch-b' : 'batch-a', name: `ev${i}`, data: { i } });
  batch.push({ channel: 'presence-batch', name: 'evp', data: 'p', info: 'user_count' });
  const res = await sdk.triggerBatch(batch);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.batch.length, 10);
  assert.deepEqual(body.batch[9], { user_count: 1 });
  await b.event('evp', 'presence-batch');
  await waitFor(() => a.count('ev8') === 1 && b.count('ev7') === 1, 'batch delivered');
  // Order within a channel follows the batch.
  const seenA = a.msgs.filter((m) => m.channel === 'batch-a').map((m) => m.event);
  assert.deepEqual(seenA.filter((e) => e.startsWith('ev')), ['ev0', 'ev2', 'ev4', 'ev6', 'ev8']);
  // Without info the reply is an empty object.
  const plain = await sdk.triggerBatch([{ channel: 'batch-a', name: 'x', data: '' }]);
  assert.deepEqual(await plain.json(), {});
  // 11 events: 400, and nothing of the batch is published.
  const eleven = Array.from({ length: 11 }, (_, i) => ({ channel: 'batch-a', name: 'eleven', data: String(i) }));
  const r = await rest(hub, 'POST', `/apps/${APP.id}/batch_events`, { body: { batch: eleven } });
  assert.equal(r.status, 400);
  assert.equal(typeof r.json.error, 'string');
  // A bad event anywhere in a batch publishes none of it.
  const mixed = [{ channel: 'batch-a', name: 'good', data: '' }, { channel: 'bad name', name: 'bad', data: '' }];
  const r2 = await rest(hub, 'POST', `/apps/${APP.id}/batch_events`, { body: { batch: mixed } });
  assert.equal(r2.status, 400);
  await sdk.trigger('batch-a', 'mark', '');
  await a.event('mark', 'batch-a');
  assert.equal(a.count('eleven') + a.count('good'), 0);
});

test('GET /channels, /channels/<name>, /channels/<name>/users', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sdk = serverSdk(hub);
  const a = await rawOnLoop(t, hub, 0);
  const b = await rawOnLoop(t, hub, 1);
  await a.subscribed('presence-one', { channelData: { user_id: 'x', user_info: { secret: 'not listed' } } });
  await b.subscribed('presence-one', { channelData: { user_id: 'y' } });
  await b.subscribed('presence-one-b', { channelData: { user_id: 'y' } });
  await a.subscribed('private-p');
  await b.subscribed('public-q');
  await a.subscribed('public-q');
  // An odd but legal name with punctuation.
  // (';' is a legal channel character too, but lws cuts a request path at
  // ';', so such names cannot be queried by path; see COMPATIBILITY.md.)
  await b.subscribed('presence-a@b=c,d.e_f', { channelData: { user_id: 'z' } });

  let r = await sdk.get({ path: '/channels', params: { filter_by_prefix: 'presence-', info: 'user_count' } });
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), {
    channels: {
      'presence-one': { user_count: 2 },
      'presence-one-b': { user_count: 1 },
      'presence-a@b=c,d.e_f': { user_count: 1 },
    },
  });
  r = await sdk.get({ path: '/channels' });
  assert.deepEqual(await r.json(), {
    channels: {
      'presence-one': {}, 'presence-one-b': {}, 'private-p': {}, 'public-q': {},
      'presence-a@b=c,d.e_f': {},
    },
  });
  r = await sdk.get({ path: '/channels', params: { filter_by_prefix: 'nothing-' } });
  assert.deepEqual(await r.json(), { channels: {} });
  r = await sdk.get({ path: '/channels', params: { filter_by_prefix: 'presence-a@b=' } });
  assert.deepEqual(await r.json(), { channels: { 'presence-a@b=c,d.e_f': {} } });

  r = await sdk.get({ path: '/channels/public-q', params: { info: 'subscription_count' } });
  assert.deepEqual(await r.json(), { occupied: true, subscription_count: 2 });
  r = await sdk.get({ path: '/channels/public-q' });
  assert.deepEqual(await r.json(), { occupied: true });
  r = await sdk.get({ path: '/channels/presence-one', params: { info: 'user_count,subscription_count' } });
  assert.deepEqual(await r.json(), { occupied: true, user_count: 2, subscription_count: 2 });
  r = await sdk.get({ path: '/channels/nobody-here', params: { info: 'subscription_count' } });
  assert.deepEqual(await r.json(), { occupied: false, subscription_count: 0 });
  // SDKs put the name in the path as it is (no percent-encoding).
  r = await sdk.get({ path: '/channels/presence-a@b=c,d.e_f', params: { info: 'user_count' } });
  assert.deepEqual(await r.json(), { occupied: true, user_count: 1 });

  r = await sdk.get({ path: '/channels/presence-one/users' });
  const users = (await r.json()).users;
  assert.deepEqual(users.sort((p, q) => p.id.localeCompare(q.id)), [{ id: 'x' }, { id: 'y' }]);
  r = await sdk.get({ path: '/channels/presence-empty/users' });
  assert.deepEqual(await r.json(), { users: [] });
});

test('REST refusals: 400 for user_count on non-presence, users of non-presence, bad bodies', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const id = APP.id;
  const isError = (r, status) => {
    assert.equal(r.status, status, r.body);
    assert.equal(typeof r.json, 'object');
    assert.equal(typeof r.json.error, 'string');
  };
  isError(await rest(hub, 'GET', `/apps/${id}/channels`, { params: { info: 'user_count' } }), 400);
  isError(await rest(hub, 'GET', `/apps/${id}/channels`,
    { params: { info: 'user_count', filter_by_prefix: 'private-' } }), 400);
  isError(await rest(hub, 'GET', `/apps/${id}/channels/public-a`, { params: { info: 'user_count' } }), 400);
  isError(await rest(hub, 'GET', `/apps/${id}/channels/private-a/users`), 400);
  const channels101 = Array.from({ length: 101 }, (_, i) => `c${i}`);
  isError(await rest(hub, 'POST', `/apps/${id}/events`,
    { body: { name: 'e', data: '', channels: channels101 } }), 400);
  isError(await rest(hub, 'POST', `/apps/${id}/events`, { body: { name: 'e', data: '' } }), 400);
  isError(await rest(hub, 'POST', `/apps/${id}/events`, { body: { name: 'e', data: '', channel: 'bad name' } }), 400);
  isError(await rest(hub, 'POST', `/apps/${id}/events`, { body: { name: 'e', data: '', channels: ['a'], socket_id: 'x.1' } }), 400);
  isError(await rest(hub, 'POST', `/apps/${id}/events`, { body: '{not json' }), 400);
  isError(await rest(hub, 'POST', `/apps/${id}/events`,
    { body: { name: 'e', data: '', channels: ['private-encrypted-a', 'b'] } }), 400);
  isError(await rest(hub, 'POST', `/apps/${id}/events`,
    { body: { name: 'x'.repeat(201), data: '', channels: ['a'] } }), 400);
  // Unknown app, unknown route.
  isError(await rest(hub, 'POST', '/apps/no-such-app/events', { body: { name: 'e', data: '', channels: ['a'] } }), 404);
  isError(await rest(hub, 'GET', `/apps/${id}/nothing`), 404);
});

test('REST auth: bad signature and stale timestamp are 401 and publish nothing', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sub = await rawOnLoop(t, hub, 1);
  await sub.subscribed('guarded');
  const body = { name: 'forged', data: 'x', channels: ['guarded'] };
  const path = `/apps/${APP.id}/events`;

  let r = await rest(hub, 'POST', path, { body, signOpts: { secret: 'wrong-secret' } });
  assert.equal(r.status, 401);
  assert.equal(typeof r.json.error, 'string');
  // Stale: an hour old, well outside the 600 s window.
  r = await rest(hub, 'POST', path, { body, signOpts: { timestamp: Math.floor(Date.now() / 1000) - 3600 } });
  assert.equal(r.status, 401);
  // And from the future.
  r = await rest(hub, 'POST', path, { body, signOpts: { timestamp: Math.floor(Date.now() / 1000) + 3600 } });
  assert.equal(r.status, 401);
  // A body changed after signing (body_md5 recomputed by the hub).
  r = await rest(hub, 'POST', path, {
    body, tamper: (p) => p,
  });
  assert.equal(r.status, 200, 'control: the same request signed properly passes');
  const text = JSON.stringify(body);
  const p = signedPath('POST', path, {}, text);
  const forgedText = text.replace('"x"', '"y"');
  const forged = await request('POST', hub.url(p), forgedText,
    { 'content-type': 'application/json', 'content-length': forgedText.length });
  assert.equal(forged.status, 401);
  // A chunked body (no Content-Length) is refused, not misread.
  const chunked = await request('POST', hub.url(p), text,
    { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'content-length': undefined });
  assert.equal(chunked.status, 411);
  assert.equal(chunked.headers.connection, 'close');
  // Wrong key, missing signature.
  r = await rest(hub, 'POST', path, { body, signOpts: { key: 'other-key' } });
  assert.equal(r.status, 401);
  r = await rest(hub, 'POST', path, { body, tamper: (q) => q.replace(/&auth_signature=[0-9a-f]+/, '') });
  assert.equal(r.status, 401);
  // Exactly one delivery: the control request.
  await serverSdk(hub).trigger('guarded', 'mark', '');
  await sub.event('mark', 'guarded');
  assert.equal(sub.count('forged'), 1);
  assert.equal(sub.msgs.find((m) => m.event === 'forged').data, 'x');
});

test('REST limits: data over 10 KiB is 413; exactly 10 KiB passes', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sub = await rawClient(t, hub);
  await sub.subscribed('sized');
  const path = `/apps/${APP.id}/events`;
  let r = await rest(hub, 'POST', path, { body: { name: 'big', data: 'x'.repeat(10241), channels: ['sized'] } });
  assert.equal(r.status, 413);
  assert.equal(typeof r.json.error, 'string');
  r = await rest(hub, 'POST', path, { body: { name: 'fits', data: 'x'.repeat(10240), channels: ['sized'] } });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json, {});
  const m = await sub.event('fits', 'sized');
  assert.equal(m.data.length, 10240);
  assert.equal(sub.count('big'), 0);
  // The SDK's own path for a too-large event surfaces the 413.
  await assert.rejects(serverSdk(hub).trigger('sized', 'big', 'y'.repeat(20000)),
    (e) => e.status === 413);
});

test('REST: Laravel-style event names with backslashes and data strings pass verbatim', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  const sub = await rawClient(t, hub);
  await sub.subscribed('private-orders.1');
  const sdk = serverSdk(hub);
  await sdk.trigger('private-orders.1', 'App\\Events\\OrderShipped', '{"already":"json"}');
  const m = await sub.event('App\\Events\\OrderShipped', 'private-orders.1');
  // The SDK sends strings as they are; the hub relays the same string.
  assert.equal(m.data, '{"already":"json"}');
});
