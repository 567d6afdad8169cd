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
const { startSentinels, sentinelCli } = require('./lib/sentinel');
const { makeCerts } = require('./lib/tls_certs');

async function twoFailovers(t, s) {
  for (let k = 1; k <= 2; k++) {
    const before = await s.master();
    const p = await s.primary();
    assert.equal(await p.cli('SET', 'marker', `before-${k}`), 'OK');
    // Replicated before the kill: the replica has acknowledged it.
    assert.equal(await p.cli('WAIT', '1', '5000'), '1');
    const f = await s.failover();
    assert.notEqual(f.newPort, before.port, 'a new master');
    t.diagnostic(`failover ${k}: +switch-master ${f.switchMs} ms after the SIGKILL`);
    // The sentinels' master (a loaded machine may have made them fail over
    // once more since, between synced servers) says so itself, has the
    // write, and the other server replicates from it: the old primary
    // came back as a replica.
    const np = await s.primary();
    if (np.port !== f.newPort) t.diagnostic(`failover ${k}: the sentinels failed over again, to ${np.port}`);
    assert.match(await np.cli('ROLE'), /^master/);
    assert.equal(await np.cli('GET', 'marker'), `before-${k}`);
    const other = s.servers.find((r) => r !== np);
    assert.match(await other.cli('ROLE'), new RegExp(`^slave\n127\.0\.0\.1\n${np.port}\n`));
    assert.equal(await other.cli('GET', 'marker'), `before-${k}`);
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
  const bare = await sentinelCli(s.sentinels[0].port, '--tls', '--cacert', certs.ca.cert,
    'SENTINEL', 'get-master-addr-by-name', s.name);
  assert.match(bare, /NOAUTH|Authentication required/i);
  await twoFailovers(t, s);
});
