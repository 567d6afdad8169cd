'use strict';
// The console's API beyond the page (docs/OPERATIONS.md, "Dashboard and
// console"): presence members with their user_info (the REST API still
// answers ids only), a test event published as a REST trigger is (received,
// refused for a bad name and for too much data, logged), and the socket
// inspector: a live socket (its loop, subscriptions, bytes written), a
// closed one (its last close with code), an unknown one ("not on this
// node"), and in a two-node cluster a socket on node 2 found from node 1.
// Every wait is on a condition.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor } = require('./lib/hub');
const { APP, rawClient, rest, signIn } = require('./lib/clients');
const { startCluster, joined } = require('./lib/cluster');

const ADMIN_TOKEN = 'admin-token-inspect-0123456789';
const H = { authorization: `Bearer ${ADMIN_TOKEN}` };

const api = async (hub, p, body) => {
  const r = await request(body === undefined ? 'GET' : 'POST', hub.url(`/console/api/${p}`),
    body === undefined ? undefined : JSON.stringify(body), H);
  return { status: r.status, body: r.body ? JSON.parse(r.body) : null };
};

// Start a query and poll it until its answer is complete.
async function inspect(hub, what) {
  const r = await api(hub, 'inspect', { app: APP.id, ...what });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  let a;
  await waitFor(async () => {
    a = (await api(hub, `inspect?query=${r.body.query}`)).body;
    return a.state === 'done';
  }, 'the inspection to be answered');
  return a;
}

test('console: user_info, a test event, the inspector on one node', async (t) => {
  const hub = await startHub(['--admin-token', ADMIN_TOKEN], { t, loops: 2 });

  // Members with their user_info; REST keeps Pusher's ids-only answer.
  const alice = await joined(t, hub, 'presence-room', 'alice', { name: 'Alice' });
  await alice.subscribed('news');
  const users = await api(hub, `users?app=${APP.id}&channel=presence-room`);
  assert.deepEqual(users.body.users, [{ id: 'alice', user_info: { name: 'Alice' } }]);
  const restUsers = await rest(hub, 'GET', `/apps/${APP.id}/channels/presence-room/users`);
  assert.deepEqual(JSON.parse(restUsers.body).users, [{ id: 'alice' }]);

  // A test event reaches the subscriber; bad ones are refused as REST
  // refuses them; no token, no publish.
  const ok = await api(hub, 'publish', { app: APP.id, channel: 'news', event: 'console-test', data: '{"n":1}' });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  const got = await alice.next((m) => m.event === 'console-test', 'the test event');
  assert.equal(got.channel, 'news');
  assert.deepEqual(JSON.parse(got.data), { n: 1 });
  assert.equal((await api(hub, 'publish', { app: APP.id, channel: 'bad name!', event: 'e', data: 'x' })).status, 400);
  const big = await api(hub, 'publish', { app: APP.id, channel: 'news', event: 'e', data: 'x'.repeat(20000) });
  assert.equal(big.status, 413, JSON.stringify(big.body));
  assert.equal((await api(hub, 'publish', { app: 'nope', channel: 'news', event: 'e', data: 'x' })).status, 404);
  const anon = await request('POST', hub.url('/console/api/publish'),
    JSON.stringify({ app: APP.id, channel: 'news', event: 'e', data: 'x' }));
  assert.equal(anon.status, 401);
  await waitFor(() => /console: test event console-test to news of app app-id \(7 bytes\): 200/.test(hub.stderr),
    'the publish logged');

  // A live socket: where it is, what it holds, what it was sent.
  const live = await inspect(hub, { socket_id: alice.socketId });
  assert.equal(live.verdict, 'found');
  assert.equal(live.sockets.length, 1);
  const s = live.sockets[0];
  assert.equal(s.socket_id, alice.socketId);
  assert.equal(s.user_id, 'alice');
  assert.deepEqual([...s.subscriptions].sort(), ['news', 'presence-room']);
  assert.ok(s.bytes_written > 0, JSON.stringify(s));
  assert.ok(s.loop === 0 || s.loop === 1);
  assert.equal(typeof s.queued_bytes, 'number');
  // By user id too.
  const byUser = await inspect(hub, { user_id: 'alice' });
  assert.equal(byUser.sockets[0].socket_id, alice.socketId);

  // A closed socket: its last close, with the hub's code (a signed-in
  // user's connections terminated: 4009).
  const bob = await signIn(await rawClient(t, hub), 'bob');
  const term = await rest(hub, 'POST', `/apps/${APP.id}/users/bob/terminate_connections`, { body: '{}' });
  assert.equal(term.status, 200, term.body);
  await bob.waitClose();
  const gone = await inspect(hub, { socket_id: bob.socketId });
  assert.equal(gone.verdict, 'found');
  assert.equal(gone.sockets.length, 0);
  assert.equal(gone.closes[0].socket_id, bob.socketId);
  assert.equal(gone.closes[0].code, 4009);
  assert.equal(gone.closes[0].user_id, 'bob');

  // Unknown.
  const none = await inspect(hub, { socket_id: '12345.67890' });
  assert.equal(none.verdict, 'not on this node');
  assert.deepEqual([none.sockets, none.closes], [[], []]);

  // Bad requests.
  assert.equal((await api(hub, 'inspect', { app: APP.id })).status, 400);
  assert.equal((await api(hub, 'inspect', { app: 'nope', socket_id: '1.2' })).status, 404);
  assert.equal((await api(hub, 'inspect?query=999999')).status, 404);

  // A caller that never stops asking: the hub holds at most 16 queries
  // (answers are kept a minute for their poll), then answers 503, and the
  // rest of the console keeps working.
  let accepted = 0;
  let busy = 0;
  for (let i = 0; i < 40 && busy === 0; i++) {
    const r = await api(hub, 'inspect', { app: APP.id, socket_id: '1.1' });
    if (r.status === 202) accepted++;
    else if (r.status === 503) busy++;
    else assert.fail(`unexpected ${r.status}: ${JSON.stringify(r.body)}`);
  }
  assert.equal(busy, 1, 'a flood of inspections is refused with 503');
  assert.ok(accepted <= 16, `at most 16 queries held (${accepted} new ones accepted)`);
  assert.equal((await api(hub, 'apps')).status, 200);
});

test('console: the inspector across a two-node cluster', async (t) => {
  const { nodes } = await startCluster(t, { n: 2, args: ['--admin-token', ADMIN_TOKEN] });
  const [n1, n2] = nodes;
  // Each node knows of the other (the lease) before it is asked.
  await waitFor(async () => (await n1.stats()).backplane.nodes === 2, 'node 1 sees 2 nodes');
  const c = await rawClient(t, n2);
  await c.subscribed('far-away');
  const a = await inspect(n1, { socket_id: c.socketId });
  assert.equal(a.verdict, 'found');
  assert.equal(a.sockets.length, 1, JSON.stringify(a));
  assert.equal(a.sockets[0].node, 'n2');
  assert.deepEqual(a.sockets[0].subscriptions, ['far-away']);
  assert.ok(a.sockets[0].bytes_written > 0);
  assert.deepEqual(a.nodes_answered, ['n2']);
  // Nowhere: said with the nodes that answered.
  const none = await inspect(n1, { socket_id: '1.1' });
  assert.equal(none.verdict, 'not found on any of the 2 nodes that answered (n1, n2)');
});
