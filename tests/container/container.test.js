'use strict';
// Container: build deploy/Dockerfile with podman and run the image the way
// an operator would. No registry and no Docker engine are reachable here, so
// the test makes its own base: debootstrap a minbase bookworm rootfs from
// the Debian mirror apt already uses, trim it like the slim image, and
// `podman import` it as docker.io/library/debian:bookworm-slim so FROM never
// pulls (the build runs with --pull=never).
//
// Podman runs with a private storage root, run root, tmp dir and network
// config dir under one temp directory, and a containers.conf that suits this
// machine: runc (crun rejects the host's cgroup layout), cgroupfs, file
// events, and ulimits within the sandbox's hard caps. Everything the test
// creates is removed at the end, even on failure. The base rootfs tarball is
// cached in /var/cache/lubdub-ci (LUBDUB_CI_CACHE) for a week, but a missing
// or broken cache only costs a debootstrap.
//
// Needs root (debootstrap, rootful podman); skipped otherwise. Missing
// podman/runc/debootstrap are installed through deploy/install-deps.sh.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');
const NODE_MODULES = path.join(ROOT, 'tests', 'integration', 'node_modules');
const { request, waitFor, once } = require('../integration/lib/hub');

const CACHE_DIR = process.env.LUBDUB_CI_CACHE || '/var/cache/lubdub-ci';
const CACHE_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
const SUITE = 'bookworm';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

// Run a command; resolve { code, stdout, stderr } (never reject on a non-zero
// exit unless opts.check). Output is also kept for failure messages.
function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: [opts.input ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      env: opts.env || process.env,
      cwd: opts.cwd,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    if (opts.input) {
      opts.input.pipe(child.stdin);
    }
    const timer = opts.timeoutMs ? setTimeout(() => {
      try { child.kill('SIGKILL'); } catch (_) { /* gone */ }
    }, opts.timeoutMs) : null;
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      const r = { code, signal, stdout, stderr };
      if (opts.check && code !== 0) {
        reject(new Error(`${cmd} ${args.join(' ')} exited ${code}${signal ? ` (${signal})` : ''}\n` +
          `${stdout.slice(-4000)}\n${stderr.slice(-4000)}`));
      } else {
        resolve(r);
      }
    });
  });
}

// The first Debian mirror in apt's sources (deb822 URIs: or one-line deb).
function debianMirror() {
  const files = [];
  if (fs.existsSync('/etc/apt/sources.list')) files.push('/etc/apt/sources.list');
  if (fs.existsSync('/etc/apt/sources.list.d')) {
    for (const f of fs.readdirSync('/etc/apt/sources.list.d').sort()) {
      if (/\.(sources|list)$/.test(f)) files.push(path.join('/etc/apt/sources.list.d', f));
    }
  }
  for (const f of files) {
    for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
      const l = line.trim();
      let m = /^URIs:\s*(\S+)/i.exec(l);
      if (!m) m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s/.exec(l);
      if (m && /\/debian\/?$/.test(m[1])) return m[1].replace(/\/$/, '');
    }
  }
  return 'http://deb.debian.org/debian';
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// Unmount anything still mounted below dir (deepest first), then remove it.
async function removeTree(dir) {
  let mounts = [];
  try {
    mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
      .map((l) => l.split(' ')[4])
      .filter((m) => m && (m === dir || m.startsWith(`${dir}/`)))
      .sort((a, b) => b.length - a.length);
  } catch (_) { /* no /proc */ }
  for (const m of mounts) await run('umount', ['-l', m]);
  fs.rmSync(dir, { recursive: true, force: true });
}

test('the container image builds, serves Pusher clients and drains on SIGTERM',
  { skip: !isRoot || process.platform !== 'linux' ? 'needs root on Linux' : false },
  async (t) => {
    const t0 = Date.now();
    const phases = [];
    const phase = (name, since) => {
      phases.push(`${name} ${((Date.now() - since) / 1000).toFixed(1)}s`);
      t.diagnostic(phases[phases.length - 1]);
    };

    await run(path.join(ROOT, 'deploy', 'install-deps.sh'), ['container'],
      { check: true, timeoutMs: 900000 });

    // Rootful podman keeps a blob-info cache in /var/lib/containers/cache
    // whatever --root says; remove it afterwards if this test created it.
    const hadVarLibContainers = fs.existsSync('/var/lib/containers');
    const tmp = fs.mkdtempSync(path.join(fs.existsSync('/var/tmp') ? '/var/tmp' : os.tmpdir(),
      'lubdub-ct-'));
    const tag = crypto.randomBytes(4).toString('hex');
    const image = `localhost/lubdub-ci:${tag}`;
    const name = `lubdub-ci-${tag}`;
    for (const d of ['root', 'runroot', 'tmp', 'networks']) fs.mkdirSync(path.join(tmp, d));
    const conf = path.join(tmp, 'containers.conf');
    fs.writeFileSync(conf, [
      '[containers]',
      'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
      '[engine]',
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `tmp_dir = "${path.join(tmp, 'tmp')}"`,
      '[network]',
      `network_config_dir = "${path.join(tmp, 'networks')}"`,
      '',
    ].join('\n'));
    const env = { ...process.env, CONTAINERS_CONF: conf, TMPDIR: path.join(tmp, 'tmp') };
    const podmanArgs = ['--root', path.join(tmp, 'root'), '--runroot', path.join(tmp, 'runroot'),
      '--storage-driver', process.env.LUBDUB_CI_STORAGE_DRIVER || 'overlay'];
    const podman = (args, opts = {}) => run('podman', [...podmanArgs, ...args], { env, ...opts });

    t.after(async () => {
      await podman(['rm', '--force', '--time', '0', name]);
      await podman(['rmi', '--all', '--force']);
      await removeTree(tmp);
      if (!hadVarLibContainers) fs.rmSync('/var/lib/containers', { recursive: true, force: true });
      t.diagnostic(`container test total ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    });

    // Base image: a cached rootfs tarball if fresh and readable, else a new
    // debootstrap (whose tarball then refreshes the cache).
    let since = Date.now();
    const mirror = debianMirror();
    const cached = path.join(CACHE_DIR, `${SUITE}-minbase.tar`);
    let tarball = null;
    try {
      const st = fs.statSync(cached);
      if (Date.now() - st.mtimeMs < CACHE_MAX_AGE_MS &&
          (await run('tar', ['-tf', cached], { timeoutMs: 120000 })).code === 0) {
        tarball = cached;
      }
    } catch (_) { /* no cache */ }
    if (!tarball) {
      const rootfs = path.join(tmp, 'rootfs');
      await run('debootstrap', ['--variant=minbase', SUITE, rootfs, mirror],
        { check: true, timeoutMs: 900000 });
      // Like the official slim image: no package caches, lists, docs or
      // locales; the updates and security suites in deb822 sources.
      for (const d of ['var/cache/apt', 'var/lib/apt/lists', 'usr/share/doc',
        'usr/share/man', 'usr/share/locale', 'usr/share/info']) {
        const p = path.join(rootfs, d);
        for (const e of fs.existsSync(p) ? fs.readdirSync(p) : []) {
          if (e !== 'partial') fs.rmSync(path.join(p, e), { recursive: true, force: true });
        }
      }
      fs.rmSync(path.join(rootfs, 'etc/apt/sources.list'), { force: true });
      const security = mirror.replace(/\/debian$/, '/debian-security');
      fs.writeFileSync(path.join(rootfs, 'etc/apt/sources.list.d/debian.sources'),
        `Types: deb\nURIs: ${mirror}\nSuites: ${SUITE} ${SUITE}-updates\n` +
        'Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' +
        `Types: deb\nURIs: ${security}\nSuites: ${SUITE}-security\n` +
        'Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n');
      tarball = path.join(tmp, 'rootfs.tar');
      await run('tar', ['--numeric-owner', '-C', rootfs, '-cf', tarball, '.'],
        { check: true, timeoutMs: 300000 });
      await removeTree(rootfs);
      try {
        fs.mkdirSync(CACHE_DIR, { recursive: true });
        const part = `${cached}.${tag}.part`;
        fs.copyFileSync(tarball, part);
        fs.renameSync(part, cached);
      } catch (e) {
        t.diagnostic(`base rootfs not cached: ${e.message}`);
      }
    }
    phase(tarball === cached ? 'base rootfs (cached)' : 'base rootfs (debootstrap)', since);

    since = Date.now();
    await podman(['import', '--change', 'CMD ["bash"]', tarball,
      'docker.io/library/debian:bookworm-slim'], { check: true, timeoutMs: 300000 });
    phase('podman import', since);

    // --format docker keeps HEALTHCHECK (the OCI format has none).
    since = Date.now();
    await podman(['build', '--network=host', '--pull=never', '--format', 'docker',
      '-f', path.join(ROOT, 'deploy', 'Dockerfile'), '-t', image, ROOT],
    { check: true, timeoutMs: 900000 });
    phase('podman build', since);

    const inspect = JSON.parse((await podman(['image', 'inspect', image], { check: true })).stdout)[0];
    const cfg = inspect.Config;
    assert.equal(cfg.User, '10001:10001', 'runs as a non-root user');
    assert.ok(cfg.ExposedPorts && cfg.ExposedPorts['6001/tcp'], 'exposes 6001');
    assert.ok(cfg.Env.includes('LUBDUB_BIND=0.0.0.0'), 'binds 0.0.0.0 by default');
    const health = inspect.Healthcheck || cfg.Healthcheck;
    assert.ok(health && health.Test.join(' ').includes('lubdub-healthcheck'),
      'has a HEALTHCHECK (built with --format docker)');
    assert.match(String(cfg.StopSignal), /^(SIGTERM|15)$/);

    // The public default bind refuses the default secret (in a network
    // namespace of its own, so nothing could listen on a real interface)...
    since = Date.now();
    const refused = await podman(['run', '--rm', '--network=none', '--no-healthcheck', image],
      { timeoutMs: 120000 });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /default secret/);
    // ...unless explicitly allowed.
    const allowed = await podman(['run', '--rm', '--network=none', '--no-healthcheck',
      '-e', 'LUBDUB_ALLOW_DEFAULT_SECRET=true', image, '--check-config'], { timeoutMs: 120000 });
    assert.equal(allowed.code, 0, allowed.stderr);
    phase('default-secret checks', since);

    // A real run: configured by a mounted JSON file plus env, on loopback.
    since = Date.now();
    const port = await freePort();
    const secret = crypto.randomBytes(16).toString('hex');
    const app = { id: 'ci-app', key: 'ci-key', secret };
    const cfgFile = path.join(tmp, 'lubdub.json');
    fs.writeFileSync(cfgFile, JSON.stringify({
      apps: [app], log_format: 'json', drain_timeout: '5s', loops: 2,
    }));
    fs.chmodSync(cfgFile, 0o644);
    await podman(['run', '--detach', '--name', name, '--network=host',
      '-v', `${cfgFile}:/etc/lubdub/lubdub.json:ro`,
      '-e', 'LUBDUB_CONFIG=/etc/lubdub/lubdub.json',
      '-e', 'LUBDUB_BIND=127.0.0.1', '-e', `LUBDUB_PORT=${port}`, image],
    { check: true, timeoutMs: 120000 });
    const base = `http://127.0.0.1:${port}`;
    const logs = async () => {
      const r = await podman(['logs', name]);
      return r.stdout + r.stderr;
    };
    await waitFor(async () => (await request('GET', `${base}/healthz`)).status === 200,
      'the container to answer /healthz', 60000, 100)
      .catch(async (e) => { throw new Error(`${e.message}\n${await logs()}`); });
    assert.equal((await request('GET', `${base}/readyz`)).status, 200);
    // The web pages come from /usr/share/lubdub/web (the default root "web"
    // resolves there), when the checkout has them.
    if (fs.existsSync(path.join(ROOT, 'web', 'index.html'))) {
      const page = await request('GET', `${base}/`);
      assert.equal(page.status, 200);
      assert.match(page.headers['content-type'], /text\/html/);
    }
    const hc = await podman(['healthcheck', 'run', name], { timeoutMs: 60000 });
    assert.equal(hc.code, 0, `healthcheck: ${hc.stdout}${hc.stderr}`);
    phase('container start', since);

    // A Pusher client: handshake, subscribe, then a signed REST publish.
    const WebSocket = require(path.join(NODE_MODULES, 'ws'));
    const PusherServer = require(path.join(NODE_MODULES, 'pusher'));
    const ws = new WebSocket(
      `ws://127.0.0.1:${port}/app/${app.key}?protocol=7&client=js&version=8.4.0&flash=false`);
    t.after(() => ws.terminate());
    const inbox = [];
    ws.on('message', (d) => inbox.push(JSON.parse(String(d))));
    const closed = once(ws, 'close', 120000);
    await waitFor(() => inbox.find((m) => m.event === 'pusher:connection_established'),
      'pusher:connection_established');
    const est = JSON.parse(inbox[0].data);
    assert.match(est.socket_id, /^\d+\.\d+$/);
    assert.ok(est.activity_timeout > 0);
    ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'ci' } }));
    await waitFor(() => inbox.find((m) => m.event === 'pusher_internal:subscription_succeeded'),
      'subscription_succeeded');
    const rest = new PusherServer({
      appId: app.id, key: app.key, secret: app.secret,
      host: '127.0.0.1', port, useTLS: false,
    });
    const res = await rest.trigger('ci', 'hello', { from: 'container' });
    assert.equal(res.status, 200);
    const got = await waitFor(() => inbox.find((m) => m.event === 'hello'), 'the published event');
    assert.deepEqual(JSON.parse(got.data), { from: 'container' });

    const metrics = await request('GET', `${base}/metrics`);
    assert.equal(metrics.status, 200);
    const live = metrics.body.split('\n').filter((l) => l.startsWith('lubdub_sessions{'))
      .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
    assert.equal(live, 1, metrics.body);
    const stats = JSON.parse((await request('GET', `${base}/stats`)).body);
    assert.equal(stats.totals.sessions, 1);
    assert.equal(stats.loops, 2);

    // The log is JSON lines (from the mounted file's log_format).
    const lines = (await logs()).split('\n').filter((l) => l.startsWith('{'));
    assert.ok(lines.length > 0);
    for (const l of lines) assert.ok(JSON.parse(l).msg, l);

    // SIGTERM (podman stop) drains: the client gets 4200, the hub exits 0.
    since = Date.now();
    const stop = await podman(['stop', '--time', '60', name], { timeoutMs: 120000 });
    assert.equal(stop.code, 0, stop.stderr);
    const [code] = await closed;
    assert.equal(code, 4200);
    const state = JSON.parse((await podman(['inspect', name], { check: true })).stdout)[0].State;
    assert.equal(state.ExitCode, 0, await logs());
    assert.match(await logs(), /drained; bye/);
    phase('drain and stop', since);
    t.diagnostic(`phases: ${phases.join(', ')}`);
  });
