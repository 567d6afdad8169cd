'use strict';
// Secrets in files (docs/CONFIG.md, "Secrets in files"): --app-secret-file,
// an app's "secret_file", --admin-token-file, --metrics-token-file and
// --redis-password-file are read at start, and again on SIGHUP (with or
// without --config); the new value applies to the next check (a REST
// signature, a /metrics or console request, a Redis reconnect), the old
// one is refused from then on, and a file that cannot be read on a reload
// keeps every old value with one error line naming the file.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { startHub, request, waitFor, BINARY } = require('./lib/hub');
const { APP, rawOnLoop, configFile, publish } = require('./lib/clients');

// The event the publishes below send (their status is what counts).
const NEWS = { name: 'e', channel: 'news', data: '{}' };

const REFUSED = /SIGHUP: configuration not reloaded, keeping the old apps and secrets: [^\n]*/g;

function secretDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-secrets-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// Replace a secret file whole (a temporary name, then rename), as the
// docs say to, so the hub never reads half a file.
function writeSecret(file, text) {
  fs.writeFileSync(`${file}.tmp`, text, { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

const count = (hub, re) => (hub.stderr.match(re) || []).length;

// SIGHUP and wait until the hub logged one more line matching re.
async function hup(hub, re, what) {
  const before = count(hub, re);
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => count(hub, re) > before, what, 10000);
  return hub.stderr.match(re).pop();
}


test('--app-secret-file: read at start, rotated by SIGHUP, kept when unreadable', async (t) => {
  const dir = secretDir(t);
  const file = path.join(dir, 'app-secret');
  const first = 'first-secret-0001';
  const second = 'second-secret-0002';
  writeSecret(file, `${first}\n`);
  const hub = await startHub(['--app-secret-file', file], { t, loops: 2 });

  // The newline is not part of the secret; the default secret is not it.
  assert.equal((await publish(hub, NEWS, { secret: first })).status, 200);
  assert.equal((await publish(hub, NEWS, { secret: `${first}\n` })).status, 401);
  assert.equal((await publish(hub, NEWS, { secret: APP.secret })).status, 401);
  // A subscriber on each loop stays through the rotation and receives.
  const subs = [await rawOnLoop(t, hub, 0), await rawOnLoop(t, hub, 1)];
  for (const c of subs) await c.subscribed('news');

  writeSecret(file, `${second}\r\n`);
  const line = await hup(hub, /apps: reloaded from [^\n]*/g, 'the apps line');
  assert.match(line, /from the flags and environment: 0 added, 0 removed, 1 changed \(app-id\)/);
  // Applied once the loops ran the swap: poll the new secret (bounded),
  // then the old one must be refused.
  await waitFor(async () => (await publish(hub, { ...NEWS, name: 'probe' }, { secret: second })).status === 200,
    'the new secret accepted', 10000, 50);
  assert.equal((await publish(hub, NEWS, { secret: first })).status, 401);
  assert.equal((await publish(hub, { ...NEWS, name: 'after' }, { secret: second })).status, 200);
  for (const c of subs) {
    await c.event('after', 'news');
    assert.equal(c.closed, null);
  }

  // Unreadable on a reload: one error line naming the file and errno's
  // text, the secret in force unchanged.
  fs.rmSync(file);
  const err = await hup(hub, REFUSED, 'the refusal');
  assert.match(err, new RegExp(`--app-secret-file: cannot read "${file}": No such file or directory$`));
  assert.equal(count(hub, REFUSED), 1);
  assert.equal((await publish(hub, NEWS, { secret: second })).status, 200);
  assert.equal((await publish(hub, NEWS, { secret: first })).status, 401);

  // Back, with an empty file: refused too, nothing changes.
  writeSecret(file, '\n');
  assert.match(await hup(hub, REFUSED, 'the second refusal'), /--app-secret-file: "[^"]+" is empty$/);
  assert.equal((await publish(hub, NEWS, { secret: second })).status, 200);
});

test('--admin-token-file and --metrics-token-file: the next request checks the new token', async (t) => {
  const dir = secretDir(t);
  const adminFile = path.join(dir, 'admin');
  const metricsFile = path.join(dir, 'metrics');
  const tokens = { admin: 'admin-token-aaaaaaaaaa', metrics: 'metrics-token-bbbbbbbbb' };
  writeSecret(adminFile, `${tokens.admin}\n`);
  writeSecret(metricsFile, tokens.metrics);
  const hub = await startHub(['--admin-token-file', adminFile,
    '--metrics-token-file', metricsFile], { t, loops: 2 });
  const bearer = (tok) => ({ authorization: `Bearer ${tok}` });
  const get = async (p, tok) => (await request('GET', hub.url(p), undefined, bearer(tok))).status;
  // The harness reads /stats when the test ends: with the token in force.
  hub.stats = async () => JSON.parse((await request('GET', hub.url('/stats'), undefined,
    bearer(tokens.metrics))).body);

  assert.equal(await get('/metrics', tokens.metrics), 200);
  assert.equal((await request('GET', hub.url('/metrics'))).status, 401);
  assert.equal(await get('/console/api/apps', tokens.admin), 200);
  assert.equal(await get('/console/api/apps', tokens.metrics), 401);

  const old = { ...tokens };
  tokens.admin = 'admin-token-cccccccccc';
  tokens.metrics = 'metrics-token-ddddddddd';
  writeSecret(adminFile, `${tokens.admin}\n`);
  writeSecret(metricsFile, `${tokens.metrics}\n`);
  const line = await hup(hub, /secrets: reloaded: [^\n]*/g, 'the secrets line');
  assert.match(line, /admin token, metrics token replaced$/);
  // The values are never logged.
  assert.ok(!hub.stderr.includes(tokens.admin) && !hub.stderr.includes(old.admin));
  // The live copies are replaced before the line is written; poll anyway.
  await waitFor(async () => (await get('/metrics', tokens.metrics)) === 200,
    'the new metrics token accepted', 10000, 50);
  assert.equal(await get('/metrics', old.metrics), 401);
  assert.equal(await get('/stats', old.metrics), 401);
  assert.equal(await get('/stats', tokens.metrics), 200);
  assert.equal(await get('/console/api/apps', tokens.admin), 200);
  assert.equal(await get('/console/api/apps', old.admin), 401);

  // Nothing changed: one line says so.
  assert.match(await hup(hub, /secrets: reloaded: [^\n]*/g, 'the no-change line'), /no change$/);

  // The admin token file unreadable: the reload is refused whole (the
  // metrics token, changed as well, stays too), one line naming the file.
  fs.rmSync(adminFile);
  writeSecret(metricsFile, 'metrics-token-eeeeeeeee');
  const err = await hup(hub, REFUSED, 'the refusal');
  assert.match(err, new RegExp(`--admin-token-file: cannot read "${adminFile}": No such file or directory$`));
  assert.equal(await get('/console/api/apps', tokens.admin), 200);
  assert.equal(await get('/metrics', tokens.metrics), 200);
  assert.equal(await get('/metrics', 'metrics-token-eeeeeeeee'), 401);
});

test('an app\'s "secret_file" in --config is read again on SIGHUP', async (t) => {
  const dir = secretDir(t);
  const file = path.join(dir, 'app-1');
  writeSecret(file, 'file-secret-one\n');
  const cfg = configFile(t, { apps: [
    { id: APP.id, key: APP.key, secret_file: file },
    { id: 'other', key: 'other-key', secret: 'other-secret' },
  ] });
  const hub = await startHub(['--config', cfg], { t, loops: 2 });
  assert.equal((await publish(hub, NEWS, { secret: 'file-secret-one' })).status, 200);

  // Only the secret file changes; the config file is the same.
  writeSecret(file, 'file-secret-two\n');
  assert.match(await hup(hub, /apps: reloaded from [^\n]*/g, 'the apps line'),
    /1 changed \(app-id\), 1 unchanged \(2 apps\)/);
  await waitFor(async () => (await publish(hub, NEWS, { secret: 'file-secret-two' })).status === 200,
    'the new secret accepted', 10000, 50);
  assert.equal((await publish(hub, NEWS, { secret: 'file-secret-one' })).status, 401);

  // Unreadable: refused, naming the app and the file.
  fs.rmSync(file);
  assert.match(await hup(hub, REFUSED, 'the refusal'),
    new RegExp(`apps\\[0\\]\\.secret_file \\(app "app-id"\\): cannot read "${file}": No such file or directory$`));
  assert.equal((await publish(hub, NEWS, { secret: 'file-secret-two' })).status, 200);
});

test('a secret file that cannot be read at start is one line and exit 2', () => {
  const missing = path.join(os.tmpdir(), `lubdub-no-such-secret-${process.pid}`);
  for (const flag of ['--app-secret-file', '--admin-token-file', '--metrics-token-file']) {
    const r = spawnSync(BINARY, ['--port', '0', flag, missing], { encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 2, `${flag}: ${r.stderr}`);
    assert.equal(r.stderr, `lubdub: ${flag}: cannot read "${missing}": No such file or directory\n`);
  }
  const env = spawnSync(BINARY, ['--port', '0'], {
    encoding: 'utf8', timeout: 10000, env: { ...process.env, LUBDUB_APP_SECRET_FILE: missing },
  });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /^lubdub: --app-secret-file: cannot read/);
});

test('--redis-password-file: used at the next reconnect after a SIGHUP', async (t) => {
  const { startRedis } = require('./lib/redis');
  const redis = await startRedis(t, { extra: ['--requirepass', 'redis-pass-one'] });
  const dir = secretDir(t);
  const file = path.join(dir, 'redis');
  writeSecret(file, 'redis-pass-one\n');
  const hub = await startHub(['--redis', redis.url(), '--node-id', 'pw1',
    '--redis-password-file', file], { t, loops: 2 });
  const state = async () => (await hub.stats()).backplane.state;
  await waitFor(async () => (await state()) === 'up', 'the backplane up', 20000, 50);

  // Redis changes its password and drops every client: the hub, still
  // with the old one, cannot get back in. (redis.cli is the admin user.)
  const cli = (pw, ...args) => redis.cli(...args);
  await cli('redis-pass-one', 'CONFIG', 'SET', 'requirepass', 'redis-pass-two');
  await cli('redis-pass-two', 'CLIENT', 'KILL', 'TYPE', 'normal');
  await cli('redis-pass-two', 'CLIENT', 'KILL', 'TYPE', 'pubsub');
  await waitFor(async () => (await state()) === 'down', 'the backplane down', 20000, 50);
  // Redis logs the AUTHs it refused (ACL LOG): the hub's retries with the
  // old password (redis-cli authenticates right, so they are the hub's).
  await waitFor(async () => /\bauth\b/.test(await cli('redis-pass-two', 'ACL', 'LOG')),
    'a retry refused by Redis', 20000, 50);

  // The new password in the file and a SIGHUP: the next reconnect (within
  // the 5 s backoff cap) uses it.
  const ups = count(hub, /backplane: up/g);
  writeSecret(file, 'redis-pass-two\n');
  assert.match(await hup(hub, /secrets: reloaded: [^\n]*/g, 'the secrets line'),
    /Redis password replaced \(the Redis password applies from the next reconnect\)$/);
  await waitFor(() => count(hub, /backplane: up/g) > ups, 'the backplane up again', 20000, 50);
  assert.equal(await state(), 'up');
});
