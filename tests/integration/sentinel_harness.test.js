'use strict';
// sentinel_harness.test.js: the Sentinel deployment redis_sentinel.test.js
// runs its nodes against (lib/sentinel.js), checked on its own, with no
// lubdub in it: a primary, a replica and three sentinels on loopback; a
// SIGKILL of the primary makes the sentinels promote the replica (a write
// made before the kill and replicated is on the new primary), and the old
// primary comes back as a replica of the new one, ready for the next
// failover. The same over TLS with sentinels that require a password. A
// failure here is the harness's (or Debian's Redis's), not the product's.
const test = require('node:test');
const assert = require('node:assert/strict');
const { redisCli } = require('./lib/redis');
const { startSentinels } = require('./lib/sentinel');
const { makeCerts } = require('./lib/tls_certs');

async function twoFailovers(t, s) {
  for (let k = 1; k <= 2; k++) {
    const before = await s.master();
    const p = await s.primary();
    assert.equal(await p.cli('SET', 'marker', `before-${k}`), 'OK');
    // Replicated before the kill: the replica has acknowledged it.
    assert.equal(await p.cli('WAIT', '1', '5000'), '1');
    const f = await s.failover();
    const after = await s.master();
    assert.notEqual(after.port, before.port, 'a new master');
    assert.equal(after.port, f.newPort);
    const np = await s.primary();
    assert.match(await np.cli('ROLE'), /^master/);
    assert.equal(await np.cli('GET', 'marker'), `before-${k}`);
    // The old primary is back, as a replica of the new one.
    const old = s.servers.find((r) => r.port === before.port);
    assert.match(await old.cli('ROLE'), /^slave\n127\.0\.0\.1\n\d+/);
    t.diagnostic(`failover ${k}: +switch-master ${f.switchMs} ms after the SIGKILL`);
  }
}

test('a primary, a replica, three sentinels: SIGKILL of the primary fails over', async (t) => {
  const s = await startSentinels(t);
  assert.equal(s.addrs().split(',').length, 3);
  assert.deepEqual(s.nodeArgs().slice(0, 4), ['--redis-sentinel', s.addrs(), '--redis-master', s.name]);
  await twoFailovers(t, s);
});

test('over TLS, sentinels requiring a password: the same', async (t) => {
  const certs = makeCerts(t);
  const s = await startSentinels(t, { tls: certs, sentinelPassword: 'sentinel-secret' });
  assert.match(s.url(), /^rediss:/);
  assert.ok(s.nodeArgs().includes('--redis-sentinel-password-file'));
  // Without the password a sentinel refuses to answer.
  const bare = await redisCli(s.sentinels[0].port, '--tls', '--cacert', certs.ca.cert,
    'SENTINEL', 'get-master-addr-by-name', s.name);
  assert.match(bare, /NOAUTH|Authentication required/i);
  await twoFailovers(t, s);
});
