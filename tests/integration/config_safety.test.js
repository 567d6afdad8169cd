'use strict';
// Configuration that would make the hub unsafe is refused (docs/CONFIG.md):
// --dev-auth-endpoint, which signs any subscription for anyone, starts
// only on a loopback bind (127.0.0.1 and ::1 work, 0.0.0.0 and :: are one
// line and exit 2); an app id outside A-Z a-z 0-9 - _ . (a ':' above all,
// which would let two apps' Redis channels share a name) is refused at
// start, and a SIGHUP that brings one keeps the old apps with one line;
// Redis's TLS and Sentinel options are checked by --check-config (issue 33).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const { startHub, request, waitFor, BINARY } = require('./lib/hub');
const { configFile, publish } = require('./lib/clients');

// The event the publishes below send (their status is what counts).
const NEWS = { name: 'e', channel: 'news', data: '{}' };

// Run the hub as a start would (not --check-config), bounded: a refused
// configuration exits at once; one that starts is killed at the timeout
// and fails the assertion on the status.
function start(args, env = {}) {
  return spawnSync(BINARY, ['--port', '0', ...args], {
    encoding: 'utf8', timeout: 10000, env: { ...process.env, ...env },
  });
}

test('--dev-auth-endpoint refuses to start on a non-loopback bind', () => {
  const cases = [
    { args: ['--bind', '0.0.0.0', '--dev-auth-endpoint', '--app-secret', 'a-real-secret'], bind: '0.0.0.0' },
    // --allow-default-secret does not lift it.
    { args: ['--bind', '0.0.0.0', '--dev-auth-endpoint', '--allow-default-secret'], bind: '0.0.0.0' },
    { args: ['--bind', '::', '--app-secret', 'a-real-secret'], env: { LUBDUB_DEV_AUTH_ENDPOINT: 'true' }, bind: '::' },
  ];
  for (const c of cases) {
    const r = start(c.args, c.env);
    assert.equal(r.status, 2, `${c.args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], /^lubdub: --dev-auth-endpoint: POST \/auth signs any private or presence subscription/);
    assert.match(lines[0], new RegExp(`only for a loopback bind .*, not ${c.bind.replace(/\./g, '\\.')};`));
  }
});

// A form POST to /auth: the dev endpoint's answer.
async function devAuth(url) {
  const body = 'socket_id=1234.5678&channel_name=private-x';
  return request('POST', url, body, { 'content-type': 'application/x-www-form-urlencoded' });
}

test('--dev-auth-endpoint starts on 127.0.0.1 and ::1 and signs', async (t) => {
  for (const bind of ['127.0.0.1', '::1']) {
    const hub = await startHub(['--loops', '1', '--drain-timeout', '1s', '--dev-auth-endpoint'], { bind });
    t.after(() => hub.stop());
    const host = bind.includes(':') ? `[${bind}]` : bind;
    const r = await devAuth(`http://${host}:${hub.port}/auth`);
    assert.equal(r.status, 200, `${bind}: ${r.body}`);
    assert.match(JSON.parse(r.body).auth, /^app-key:[0-9a-f]{64}$/);
    const exit = await hub.stop();
    assert.equal(exit.code, 0, hub.stderr);
  }
});

test('an app id with a character outside A-Z a-z 0-9 - _ . is refused at start', (t) => {
  const bad = [
    ['--app-id', 'eu:1', /--app-id: app id "eu:1" has ':' at offset 2.*Redis channel names collide/],
    ['--app-id', 'a b', /--app-id: app id "a b" has byte 0x20 at offset 1/],
  ];
  for (const [flag, id, want] of bad) {
    const r = start([flag, id]);
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1);
    assert.match(r.stderr, want);
  }
  const env = start([], { LUBDUB_APP_ID: 'x/y' });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /--app-id: app id "x\/y" has '\/' at offset 1/);
  const file = configFile(t, { apps: [{ id: '1001', key: 'k1', secret: 's1' },
    { id: 'tenant:2', key: 'k2', secret: 's2' }] });
  const r = start(['--config', file]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^lubdub: apps\[1\]: app id "tenant:2" has ':' at offset 6/);
});

test('a SIGHUP that brings a bad app id keeps the old apps, with one line', async (t) => {
  const a = { id: '1001', key: 'k1', secret: 'secret-1' };
  const file = configFile(t, { apps: [a] });
  const hub = await startHub(['--config', file], { t, loops: 2 });
  assert.equal((await publish(hub, NEWS, { app: a })).status, 200);

  const refused = /SIGHUP: configuration not reloaded, keeping the old apps and secrets: [^\n]*/g;
  fs.writeFileSync(file, JSON.stringify({ apps: [{ ...a, secret: 'secret-new' },
    { id: 'eu:2', key: 'k2', secret: 's2' }] }));
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => (hub.stderr.match(refused) || []).length > 0, 'the refusal line');
  const lines = hub.stderr.match(refused);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /apps\[1\]: app id "eu:2" has ':' at offset 2/);
  assert.doesNotMatch(hub.stderr, /apps: reloaded/);
  // The old apps, with the old secret, are still served.
  assert.equal((await publish(hub, NEWS, { app: a })).status, 200);
  assert.equal((await publish(hub, NEWS, { app: { ...a, secret: 'secret-new' } })).status, 401);
});

// Issue 33: rediss:// URLs, the --redis-tls-* options and Sentinel's are
// checked before anything connects; a bad combination is one line, exit 2.
test('--check-config: Redis TLS and Sentinel options, good and refused', (t) => {
  const check = (args, env = {}) => spawnSync(BINARY, ['--check-config', ...args], {
    encoding: 'utf8', timeout: 10000, env: { ...process.env, ...env },
  });
  const ca = `/tmp/lubdub-cfg-ca-${process.pid}.pem`;
  fs.writeFileSync(ca, 'not checked until a connect\n');
  t.after(() => fs.rmSync(ca, { force: true }));
  for (const args of [
    ['--redis', 'rediss://:p@cache.example:6380/0', '--redis-tls-ca-file', ca],
    ['--redis-sentinel', '127.0.0.1:26379,[::1]', '--redis-master', 'mymaster'],
    ['--redis-sentinel', 's1', '--redis-master', 'm', '--redis', 'rediss://x/2',
      '--redis-tls-server-name', 'redis.internal'],
  ]) {
    const r = check(args);
    assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
  }
  for (const [args, env, re] of [
    [['--redis', 'redis://h:1/0', '--redis-tls-ca-file', ca], {},
      /^lubdub: --redis-tls-ca-file: needs a rediss:\/\/ URL in --redis, not redis:\/\/$/],
    [['--redis-sentinel', 's1:26379'], {}, /^lubdub: --redis-sentinel: needs --redis-master$/],
    [[], { LUBDUB_REDIS_SENTINEL: 's1,,s2', LUBDUB_REDIS_MASTER: 'm' },
      /^lubdub: --redis-sentinel: sentinel 2 \(""\): empty/],
    [['--redis', 'rediss://h', '--redis-tls-cert-file', ca], {},
      /^lubdub: --redis-tls-key-file: required when --redis-tls-cert-file is set$/],
  ]) {
    const r = check(args, env);
    assert.equal(r.status, 2, `${args.join(' ')} ${JSON.stringify(env)}: ${r.stderr}`);
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], re);
  }
});
