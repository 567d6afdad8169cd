'use strict';
// Issue 36's configuration commands and messages on the real binary:
// --version against /stats and /metrics, an unknown LUBDUB_* variable
// warned about once with a suggestion, an unknown JSON key refused with
// one, --print-config's sources and masks, and --new-app's app accepted by
// a hub (docs/CONFIG.md, "Commands"; docs/OPERATIONS.md, "Versions").
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {
  startHub, request, waitFor, BINARY, TIME_SCALE, ROOT, configFile,
} = require('./lib/hub');
const { rest } = require('./lib/clients');

// Run the binary to its exit (a command: it never serves), bounded in
// time: { code, stdout, stderr }.
function run(args, env = {}) {
  return new Promise((resolve, reject) => {
    execFile(BINARY, args, {
      env: { ...process.env, ...env }, timeout: 30000 * TIME_SCALE,
    }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        reject(new Error(`${BINARY} ${args.join(' ')}: ${err.message}`));
        return;
      }
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

// A private directory for files a test writes; removed when it ends.
function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-ux-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('--version names the version and commit /stats and lubdub_build_info report', async (t) => {
  const v = await run(['--version']);
  assert.equal(v.code, 0, v.stderr);
  const m = /^lubdub (\d+\.\d+\.\d+) \(commit ([0-9A-Za-z._+-]+)\)\n$/.exec(v.stdout);
  assert.ok(m, `--version printed ${JSON.stringify(v.stdout)}`);
  const [, version, commit] = m;
  // A checkout's build names one of its commits (12 hex digits, maybe
  // -dirty); a build given -DLUBDUB_COMMIT, or none from git, says so.
  const hex = /^([0-9a-f]{12})(-dirty)?$/.exec(commit);
  if (hex && fs.existsSync(path.join(ROOT, '.git'))) {
    execFileSync('git', ['-C', ROOT, 'cat-file', '-e', `${hex[1]}^{commit}`]);
  }

  const hub = await startHub([], { t });
  const stats = await hub.stats();
  assert.equal(stats.version, version);
  assert.equal(stats.commit, commit);
  const metrics = (await request('GET', hub.url('/metrics'))).body;
  assert.ok(metrics.split('\n').includes(
    `lubdub_build_info{version="${version}",commit="${commit}"} 1`),
  `no lubdub_build_info line for ${version} ${commit}`);
});

test('an unknown LUBDUB_ variable is warned about once, with the option it meant', async (t) => {
  const dir = scratch(t);
  const cfg = path.join(dir, 'lubdub.json');
  fs.writeFileSync(cfg, JSON.stringify({ apps: [{ id: '1', key: 'k1', secret: 's1' }] }));
  const hub = await startHub(['--config', cfg], {
    t,
    env: { LUBDUB_PING_INTERVALL: '3s', LUBDUB_QWERTYUIOPASDF: '1', LUBDUB_TEST_NOT_WARNED: '1' },
  });
  const warned = () => hub.stderr.split('\n').filter((l) => /not a lubdub option/.test(l));
  await waitFor(() => warned().length >= 2, 'the warnings');
  const lines = warned();
  assert.equal(lines.length, 2, lines.join('\n'));
  assert.ok(lines.some((l) => /LUBDUB_PING_INTERVALL: not a lubdub option, ignored; did you mean LUBDUB_PING_INTERVAL\?/.test(l)),
    lines.join('\n'));
  assert.ok(lines.some((l) => /LUBDUB_QWERTYUIOPASDF: not a lubdub option, ignored$/.test(l)), lines.join('\n'));
  // A warning, not an error, and the typo changed nothing.
  assert.equal((await hub.stats()).config.ping_interval_ms, 25000);
  // A reload reads the environment again, and warns no more.
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => /apps: reloaded/.test(hub.stderr), 'the reload');
  assert.equal(warned().length, 2);

  // The commands that exit say it on stderr, before refusing a
  // configuration the typo may have broken.
  const r = await run(['--check-config', '--bind', '0.0.0.0'], { LUBDUB_APP_SECRT: 'long-random-secret' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^lubdub: warning: LUBDUB_APP_SECRT: not a lubdub option, ignored; did you mean LUBDUB_APP_SECRET\?\n/);
  assert.match(r.stderr, /default secret/);
});

test('an unknown JSON key is an error that names the key it meant', async (t) => {
  const dir = scratch(t);
  const top = path.join(dir, 'top.json');
  fs.writeFileSync(top, '{"ping_intervall": "3s"}');
  let r = await run(['--config', top, '--check-config']);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, `lubdub: ${top}: "ping_intervall": unknown key; did you mean "ping_interval"?\n`);

  const app = path.join(dir, 'app.json');
  fs.writeFileSync(app, JSON.stringify({ apps: [{ id: '1', key: 'k', secret: 's', client_event: true }] }));
  r = await run(['--config', app]);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, `lubdub: ${app}: apps[0].client_event: unknown key; did you mean "client_events"?\n`);
});

test('--print-config shows each value\'s source and never a secret', async (t) => {
  const dir = scratch(t);
  const secrets = {
    app: 'file-app-secret-0123456789',
    admin: 'admin-token-in-a-file-98765',
    metrics: 'metrics-token-on-the-flag-4242',
    redis: 'redis-password-in-url-1357',
  };
  const tok = path.join(dir, 'admin');
  fs.writeFileSync(tok, `${secrets.admin}\n`);
  const cfg = path.join(dir, 'lubdub.json');
  fs.writeFileSync(cfg, JSON.stringify({
    tick: '200ms',
    redis: `redis://:${secrets.redis}@127.0.0.1:1/0`,
    apps: [{ id: '1001', key: 'key-1001', secret: secrets.app }],
  }));
  const r = await run(['--config', cfg, '--port', '7123', '--metrics-token', secrets.metrics, '--print-config'],
    { LUBDUB_LOG_LEVEL: 'debug', LUBDUB_ADMIN_TOKEN_FILE: tok });
  assert.equal(r.code, 0, r.stderr);
  const line = (name) => {
    const l = r.stdout.split('\n').find((x) => x.startsWith(`${name} `));
    assert.ok(l, `no line for ${name}:\n${r.stdout}`);
    const m = /^(\S+)\s+= (.*?)   \((.+)\)$/.exec(l);
    assert.ok(m, `line ${JSON.stringify(l)}`);
    return { value: m[2], source: m[3] };
  };
  assert.deepEqual(line('port'), { value: '7123', source: 'flag' });
  assert.deepEqual(line('log_level'), { value: 'debug', source: 'env' });
  assert.deepEqual(line('tick'), { value: '200ms', source: 'file' });
  assert.deepEqual(line('bind'), { value: '127.0.0.1', source: 'default' });
  assert.deepEqual(line('config'), { value: cfg, source: 'flag' });
  assert.deepEqual(line('metrics_token'), { value: '****', source: 'flag' });
  assert.deepEqual(line('admin_token'), { value: '****', source: 'env via admin_token_file' });
  assert.deepEqual(line('admin_token_file'), { value: tok, source: 'env' });
  assert.deepEqual(line('redis'), { value: 'redis://****@127.0.0.1:1/0', source: 'file' });
  assert.match(r.stdout, /\napps \(file\):\n {2}id=1001 key=key-1001 secret=\*\*\*\*\n/);
  for (const [what, s] of Object.entries(secrets)) {
    assert.ok(!r.stdout.includes(s) && !r.stderr.includes(s), `the ${what} secret shows`);
  }
});

test('--new-app prints an app a config file takes and a hub accepts signed REST calls for', async (t) => {
  const r = await run(['--new-app']);
  assert.equal(r.code, 0, r.stderr);
  const app = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(app), ['id', 'key', 'secret']);
  assert.match(app.id, /^[1-9]\d{6}$/);
  assert.match(app.key, /^[0-9a-f]{20}$/);
  assert.match(app.secret, /^[0-9a-f]{32}$/);
  const again = JSON.parse((await run(['--new-app'])).stdout);
  assert.notEqual(again.secret, app.secret);

  // On a public bind: the secret is a real one, so the hub starts.
  const file = configFile(t, { apps: [app] });
  const check = await run(['--config', file, '--bind', '0.0.0.0', '--check-config']);
  assert.equal(check.code, 0, check.stderr);
  const hub = await startHub(['--config', file], { t });
  const body = { name: 'hello', channel: 'new-app', data: '{}' };
  const ok = await rest(hub, 'POST', `/apps/${app.id}/events`,
    { body, signOpts: { key: app.key, secret: app.secret } });
  assert.equal(ok.status, 200, ok.body);
  const bad = await rest(hub, 'POST', `/apps/${app.id}/events`,
    { body, signOpts: { key: app.key, secret: again.secret } });
  assert.equal(bad.status, 401, bad.body);
});
