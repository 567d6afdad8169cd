'use strict';
// Peer strings never break a cluster encoding (docs/SCALING.md, "Peer
// strings in keys and messages"): user ids holding a newline, ':', the
// byte 0x1f, a line that looks like a member event of the old format, and
// 1 KiB of bytes (max_user_id_len raised in the app config) are seen
// exactly as sent from every other node: presence member_added and
// member_removed, the member list of subscription_succeeded, REST /users,
// watchlist online and offline events (to watchers whose own ids are odd
// too) and terminate_connections; users whose ids are a prefix or a piece
// ("split") of an odd id never hear of it nor are touched by it. A NUL
// (JSON "\u0000") is refused with a clear error, not carried.
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const { APP, configFile, rest, rawClient, sign } = require('./lib/clients');
const { startCluster, presenceView, agree, bp } = require('./lib/cluster');

const ODD = [
  'a\nb',                      // the old member-event format's delimiter
  'a:b',                       // the key separator
  'a\x1fb',                    // the share hashes' field separator
  'v\n{"evil":1}',             // old format: uid "v" with this user_info
  '7\n-1\na',                  // a whole event of the new format inside
  `${'k'.repeat(1023)}\n`,     // 1 KiB (and a trailing newline)
];
// A prefix and the pieces of the odd ids: never mentioned by them.
const PLAIN = ['a', 'b', 'v', '7'];

const CFG = { apps: [{ ...APP, max_user_id_len: 2048, max_user_info_bytes: 4096 }] };
const nodeArgs = (t) => ['--config', configFile(t, CFG)];

// A raw client on hub signed in as id with an optional watchlist.
async function signedIn(t, hub, id, watchlist) {
  const c = await rawClient(t, hub);
  const ud = JSON.stringify(watchlist ? { id, watchlist } : { id });
  c.send({ event: 'pusher:signin', data: {
    auth: `${APP.key}:${sign(APP.secret, `${c.socketId}::user::${ud}`)}`, user_data: ud,
  } });
  await c.event('pusher:signin_success');
  return c;
}

// [name, id] for every watchlist event c got, in order.
function watchEvents(c) {
  const out = [];
  for (const m of c.msgs) {
    if (m.event !== 'pusher_internal:watchlist_events') continue;
    for (const e of JSON.parse(m.data).events) for (const id of e.user_ids) out.push([e.name, id]);
  }
  return out;
}

const member = async (t, hub, ch, uid) => {
  const c = await rawClient(t, hub);
  const r = await c.subscribed(ch, { channelData: { user_id: uid, user_info: { n: uid } } });
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  return c;
};

async function users(hub, ch) {
  const r = await rest(hub, 'GET', `/apps/${APP.id}/channels/${ch}/users`);
  assert.equal(r.status, 200, r.body);
  return r.json.users.map((u) => u.id).sort();
}

test('odd user ids across nodes: presence, REST, watchlists, terminate', async (t) => {
  const { nodes } = await startCluster(t, { args: nodeArgs(t) });
  const [n1, n2, n3] = nodes;
  const ch = 'presence-ids';

  await t.test('presence members and REST /users are the same bytes everywhere', async () => {
    const w = await member(t, n1, ch, 'w');
    const plain = await member(t, n3, ch, 'a');
    const odd = [];
    for (const id of ODD) odd.push(await member(t, n2, ch, id));
    const all = ['w', 'a', ...ODD].sort();
    await waitFor(() => {
      const v = presenceView(w, ch);
      return v.ids && JSON.stringify(v.ids) === JSON.stringify(all);
    }, 'w sees every member', 20000).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(presenceView(w, ch).log)}`);
    });
    const v = presenceView(w, ch);
    assert.equal(v.contradictions, 0, JSON.stringify(v.log));
    for (const id of ODD) {
      assert.equal(v.added[id], 1, JSON.stringify(id));
      assert.deepEqual(v.members.get(id), { n: id });
    }
    for (const id of PLAIN.filter((p) => p !== 'a')) assert.equal(v.added[id], undefined, id);
    // A newcomer on a third node gets them all in its list.
    const late = await member(t, n3, ch, 'late');
    const lv = presenceView(late, ch);
    assert.deepEqual(lv.ids, [...all, 'late'].sort());
    for (const id of ODD) assert.deepEqual(lv.members.get(id), { n: id });
    // REST /users from every node.
    await agree(nodes, (n) => users(n, ch), [...all, 'late'].sort(), 'REST /users');

    // Each odd member leaves: one member_removed with its exact id; the
    // plain 'a' stays.
    for (const c of odd) c.close();
    await waitFor(() => JSON.stringify(presenceView(w, ch).ids) ===
      JSON.stringify(['a', 'late', 'w']), 'odd members removed', 20000).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(presenceView(w, ch).log)}`);
    });
    const v2 = presenceView(w, ch);
    assert.equal(v2.contradictions, 0, JSON.stringify(v2.log));
    for (const id of ODD) assert.equal(v2.removed[id], 1, JSON.stringify(id));
    assert.equal(v2.removed.a, undefined);
    await agree(nodes, (n) => users(n, ch), ['a', 'late', 'w'], 'REST /users after');
    plain.close();
    late.close();
    w.close();
    for (const n of nodes) assert.equal((await bp(n)).bad, 0, n.id);
  });

  await t.test('watchlists: online and offline with the exact ids, odd watchers too', async () => {
    // A plain watcher of every odd id and of the plain ones, on n1.
    const w = await signedIn(t, n1, 'watcher', [...ODD, ...PLAIN]);
    // Odd watchers (on n3) of a plain user 'p'.
    const oddWatchers = [];
    for (const id of ODD) oddWatchers.push(await signedIn(t, n3, id, ['p']));
    // Their signins on n3 were their online edges: w, on n1, heard each
    // once, with the exact id.
    const all = ODD.map((id) => ['online', id]);
    await waitFor(() => ODD.every((id) => watchEvents(w).some(([n, u]) => n === 'online' && u === id)),
      'watcher sees every odd id online', 20000).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(watchEvents(w))}`);
    });
    assert.deepEqual(watchEvents(w).filter(([, u]) => PLAIN.includes(u)), []);
    assert.deepEqual(watchEvents(w).sort(), all.sort());

    // p comes online on n2: every odd watcher (on n3, its user channel
    // named with its odd id) hears it once.
    const p = await signedIn(t, n2, 'p');
    await waitFor(() => oddWatchers.every((c) => watchEvents(c).some(([n, u]) => n === 'online' && u === 'p')),
      'odd watchers hear p online', 20000);
    p.close();
    await waitFor(() => oddWatchers.every((c) => watchEvents(c).some(([n, u]) => n === 'offline' && u === 'p')),
      'odd watchers hear p offline', 20000);
    for (const c of oddWatchers) {
      assert.deepEqual(watchEvents(c), [['online', 'p'], ['offline', 'p']]);
    }

    // terminate_connections through n1 closes exactly that user's
    // connections on n3; 'a' and 'b' signed in on n2 stay. (Only ids the
    // REST path can carry: lws decodes the path before the signature is
    // checked and drops the query of a path with a %0A; server/http/http.c.)
    const a = await signedIn(t, n2, 'a');
    const b = await signedIn(t, n2, 'b');
    const long = await signedIn(t, n3, 'L'.repeat(300));
    const r1 = await rest(n1, 'POST', `/apps/${APP.id}/users/a:b/terminate_connections`, { body: {} });
    assert.equal(r1.status, 200, r1.body);
    assert.equal((await oddWatchers[ODD.indexOf('a:b')].whenClosed(20000)).code, 4009);
    const r2 = await rest(n1, 'POST', `/apps/${APP.id}/users/${'L'.repeat(300)}/terminate_connections`, { body: {} });
    assert.equal(r2.status, 200, r2.body);
    assert.equal((await long.whenClosed(20000)).code, 4009);
    for (const c of oddWatchers) c.close();
    await waitFor(() => ODD.every((id) => watchEvents(w).some(([n, u]) => n === 'offline' && u === id)),
      'watcher sees every odd id offline', 20000);
    assert.equal(a.closed, null);
    assert.equal(b.closed, null);
    assert.deepEqual(watchEvents(w).filter(([n, u]) => n === 'offline' && ODD.includes(u)).length, ODD.length);
    // 'a' and 'b' (on w's list) came online; no plain id was taken for
    // an odd one.
    await waitFor(() => watchEvents(w).filter(([, u]) => PLAIN.includes(u)).length === 2,
      'a and b online', 20000);
    assert.deepEqual(watchEvents(w).filter(([, u]) => PLAIN.includes(u)).sort(),
      [['online', 'a'], ['online', 'b']]);
    a.close();
    b.close();
    w.close();
    for (const n of nodes) assert.equal((await bp(n)).bad, 0, n.id);
  });

  await t.test('a NUL in an id is refused with a clear error', async () => {
    const c = await rawClient(t, n1);
    const cd = '{"user_id":"a\\u0000b"}';
    const from = c.msgs.length;
    // Signed by hand: channel_data is sent as this exact text.
    c.send({ event: 'pusher:subscribe', data: {
      channel: 'presence-nul', channel_data: cd,
      auth: `${APP.key}:${sign(APP.secret, `${c.socketId}:presence-nul:${cd}`)}`,
    } });
    const err = await c.next((m) => m.event === 'pusher:subscription_error' &&
      m.channel === 'presence-nul', 'subscription_error', 10000, from);
    assert.match(err.data.error, /must not contain \\u0000 \(NUL\)/);
    // The signin: pusher:error and the connection closed (4009).
    const s = await rawClient(t, n2);
    const ud = '{"id":"a\\u0000b"}';
    s.send({ event: 'pusher:signin', data: {
      auth: `${APP.key}:${sign(APP.secret, `${s.socketId}::user::${ud}`)}`, user_data: ud,
    } });
    const e = await s.event('pusher:error');
    assert.match(JSON.parse(typeof e.data === 'string' ? e.data : JSON.stringify(e.data)).message,
      /user_data must not contain \\u0000 \(NUL\)/);
    // A %00 in a REST user id is refused (it would cut the id short and
    // terminate 'a'): lws hangs up on it, or the hub answers 400.
    const a = await (async () => {
      const c2 = await rawClient(t, n1);
      const ud = JSON.stringify({ id: 'a' });
      c2.send({ event: 'pusher:signin', data: {
        auth: `${APP.key}:${sign(APP.secret, `${c2.socketId}::user::${ud}`)}`, user_data: ud,
      } });
      await c2.event('pusher:signin_success');
      return c2;
    })();
    const st = await rest(n3, 'POST', `/apps/${APP.id}/users/a%00b/terminate_connections`, { body: {} })
      .then((r) => r.status, () => 'hung up');
    assert.ok(st === 400 || st === 'hung up', String(st));
    // n3 still serves, and 'a' was not terminated.
    const r = await rest(n3, 'POST', `/apps/${APP.id}/users/zz/terminate_connections`, { body: {} });
    assert.equal(r.status, 200, r.body);
    assert.equal(a.closed, null);
  });
});
