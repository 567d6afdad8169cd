'use strict';
// redis_tls.test.js: the backplane over TLS (issue 33, item 2). Debian's
// redis-server serves TLS only (tls-port, no plaintext port) with a CA and
// certificates this file makes with openssl (lib/tls_certs.js): nodes
// given a rediss:// URL and --redis-tls-ca-file join and deliver across
// nodes; a wrong CA, a certificate for another name, a missing client
// certificate where Redis asks for one, and a plaintext redis:// URL
// against the TLS port each leave the node degraded (serving alone), with
// one clear log line saying why, never a crash; --redis-tls-server-name
// and a client certificate (--redis-tls-cert-file, --redis-tls-key-file)
// make the refused ones join.
//
// A refused node retries: Redis logs each refused handshake ("Error
// accepting a client connection"), so a test waits for two of them before
// it counts the node's log lines (one per state change, not per retry).
const test = require('node:test');
const assert = require('node:assert/strict');
const { waitFor } = require('./lib/hub');
const { APP, publish, rawClient: client } = require('./lib/clients');
const { startRedis, startNode, bp, allUp, numsub } = require('./lib/cluster');
const { makeCerts } = require('./lib/tls_certs');

const certs = makeCerts(null);

function ids(c, channel) {
  return c.msgs.filter((m) => m.channel === channel && m.event === 'ev')
    .map((m) => JSON.parse(m.data).i);
}

async function subscriber(t, hub, channel) {
  const c = await client(t, hub);
  const r = await c.subscribed(channel);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded', JSON.stringify(r));
  return c;
}

// Cross-node delivery: a subscriber on `to`, Redis hears the channel from
// it, a publication through `from` reaches it once.
async function delivers(t, redis, from, to, channel) {
  const c = await subscriber(t, to, channel);
  await waitFor(async () => (await numsub(redis, `lubdub:${APP.id}:${channel}`)) >= 1,
    `Redis hears ${channel}`, 15000, 30);
  await publish(from, { name: 'ev', channel, data: { i: 1 } }, { expect: 200 });
  await waitFor(() => ids(c, channel).length === 1, `${channel} delivered across nodes`);
  assert.deepEqual(ids(c, channel), [1]);
}

const refusals = (redis) => (redis.out.match(/Error accepting a client connection/g) || []).length;
// The line saying the link went down (a later "still unreachable, now:
// REASON" is the one line per change of reason, not counted here).
const unreachable = (n) => n.stderr.split('\n').filter((l) => /backplane: .* unreachable \(/.test(l));

// A node refused by Redis: it runs degraded (state down, local delivery
// still works), it retried (Redis refused it twice or more), and it said
// so once, in a line that matches each of res. Returns that line. (The
// node is the first one refused by that Redis: the count is its own.)
async function refused(t, redis, node, res, what) {
  await waitFor(() => unreachable(node).length >= 1, `${what}: the node's log line`, 20000, 50);
  await waitFor(() => refusals(redis) >= 2, `${what}: the node retries`, 30000, 50);
  assert.equal(node.exit, null, `${what}: the node runs`);
  assert.equal((await bp(node)).state, 'down', `${what}: not joined`);
  const lines = unreachable(node);
  assert.equal(lines.length, 1, `${what}: one line, not one per retry:\n${node.stderr}`);
  for (const re of res) assert.match(lines[0], re, `${what}: ${lines[0]}`);
  if (process.env.LUBDUB_TEST_VERBOSE) process.stderr.write(`${what}: ${lines[0]}\n`);
  // Degraded, not dead: local delivery goes on.
  const ch = `local-${node.id}`;
  const c = await subscriber(t, node, ch);
  await publish(node, { name: 'ev', channel: ch, data: { i: 1 } }, { expect: 200 });
  await waitFor(() => ids(c, ch).length === 1, `${what}: local delivery`);
  return lines[0];
}

test('rediss:// with the right CA: two nodes join and deliver across', async (t) => {
  const redis = await startRedis(t, { tls: certs });
  assert.match(redis.url(), /^rediss:\/\/([^@/]*@)?127\.0\.0\.1:\d+\/0$/);
  const n1 = await startNode(t, redis.url(), 'tls1', ['--redis-tls-ca-file', certs.ca.cert]);
  const n2 = await startNode(t, redis.url(), 'tls2', ['--redis-tls-ca-file', certs.ca.cert]);
  await allUp([n1, n2]);
  // Redis has no plaintext port (--port 0): whatever reached it spoke TLS.
  await delivers(t, redis, n1, n2, 'tls-a');
  await delivers(t, redis, n2, n1, 'tls-b');
  assert.equal(refusals(redis), 0, redis.out);
  assert.deepEqual(unreachable(n1), []);
});

test('a CA that did not sign Redis\'s certificate: refused, one line naming the verification', async (t) => {
  const redis = await startRedis(t, { tls: certs });
  const n = await startNode(t, redis.url(), 'wrongca', ['--redis-tls-ca-file', certs.otherCa.cert]);
  // e.g. "backplane: redis 127.0.0.1:P unreachable (TLS: certificate verify failed: ...)"
  await refused(t, redis, n, [/certificate/i, /verif/i, new RegExp(`127\\.0\\.0\\.1:${redis.port}`)], 'wrong CA');
});

test('a certificate for another name: refused; --redis-tls-server-name with its name joins', async (t) => {
  const redis = await startRedis(t, { tls: certs, tlsCert: 'wrongName' });
  const n = await startNode(t, redis.url(), 'badname', ['--redis-tls-ca-file', certs.ca.cert]);
  // OpenSSL names it "hostname mismatch" or "IP address mismatch".
  await refused(t, redis, n, [/certificate|verif/i, /mismatch/i], 'name mismatch');
  const ok = await startNode(t, redis.url(), 'goodname',
    ['--redis-tls-ca-file', certs.ca.cert, '--redis-tls-server-name', 'redis.test']);
  const other = await startNode(t, redis.url(), 'goodname2',
    ['--redis-tls-ca-file', certs.ca.cert, '--redis-tls-server-name', 'redis.test']);
  await allUp([ok, other]);
  await delivers(t, redis, ok, other, 'tls-named');
  // The refused node is still refused (nothing relaxed for it).
  assert.equal((await bp(n)).state, 'down');
});

test('Redis asking for client certificates: refused without one, joins with one', async (t) => {
  const redis = await startRedis(t, { tls: certs, tlsAuthClients: true });
  assert.deepEqual(redis.nodeArgs(), ['--redis-tls-ca-file', certs.ca.cert,
    '--redis-tls-cert-file', certs.client.cert, '--redis-tls-key-file', certs.client.key]);
  const n = await startNode(t, redis.url(), 'nocert', ['--redis-tls-ca-file', certs.ca.cert]);
  await refused(t, redis, n, [], 'no client certificate');
  const a = await startNode(t, redis.url(), 'cert1', redis.nodeArgs());
  const b = await startNode(t, redis.url(), 'cert2', redis.nodeArgs());
  await allUp([a, b]);
  await delivers(t, redis, a, b, 'tls-mutual');
});

test('redis:// against the TLS port, rediss:// against a plaintext one: neither joins', async (t) => {
  const redis = await startRedis(t, { tls: certs });
  const plain = await startNode(t, `redis://127.0.0.1:${redis.port}/0`, 'plain-to-tls');
  await refused(t, redis, plain, [new RegExp(`127\\.0\\.0\\.1:${redis.port}`)], 'plaintext to TLS');

  // The other way round: a TLS client hello to a plaintext Redis, which
  // waits for the rest of what it takes for an inline command: the node
  // gives up on the handshake (the product says "connect timed out").
  const clear = await startRedis(t, { tls: null });
  const tlsNode = await startNode(t, `rediss://127.0.0.1:${clear.port}/0`, 'tls-to-plain',
    ['--redis-tls-ca-file', certs.ca.cert]);
  await waitFor(() => unreachable(tlsNode).length >= 1, 'TLS to plaintext: the node\'s log line', 20000, 50);
  assert.equal(tlsNode.exit, null);
  assert.equal((await bp(tlsNode)).state, 'down');
  assert.match(unreachable(tlsNode)[0], /TLS|SSL|handshake|version|protocol|timed out/i, unreachable(tlsNode)[0]);
});
