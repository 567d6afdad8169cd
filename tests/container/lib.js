'use strict';
// Shared by the container tests: a rootful podman of their own (its own
// storage root, run root, tmp dir and network config dir under one
// directory: the store ctest's fixture makes for the run, ./store.js, or a
// temp directory of the test's own when run without it) and a Debian
// bookworm minbase base image made here, since no registry and no Docker
// engine are reachable.
//
// The base: debootstrap a minbase bookworm rootfs from the Debian mirror apt
// already uses, trim it like the slim image, and `podman import` it as
// docker.io/library/debian:bookworm-slim so FROM never pulls. The rootfs
// tarball is cached in /var/cache/lubdub-ci (LUBDUB_CI_CACHE) for a week; a
// missing or broken cache only costs a debootstrap.
//
// The containers.conf suits this machine: runc (crun rejects the host's
// cgroup layout), cgroupfs, file events, and ulimits within the sandbox's
// hard caps. What a test runs is removed at its end, even on failure; the
// images go with the store (./store.js cleanup), or with the test's own
// temp directory.
const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');
const CACHE_DIR = process.env.LUBDUB_CI_CACHE || '/var/cache/lubdub-ci';
const CACHE_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
const SUITE = 'bookworm';
const BASE_IMAGE = 'docker.io/library/debian:bookworm-slim';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const skipUnlessRoot = !isRoot || process.platform !== 'linux' ? 'needs root on Linux' : false;

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
    child.stdout.on('data', (d) => { stdout += d; if (opts.onData) opts.onData(String(d)); });
    child.stderr.on('data', (d) => { stderr += d; if (opts.onData) opts.onData(String(d)); });
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

// Mount points at or below dir, deepest first.
function mountsBelow(dir) {
  try {
    return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
      .map((l) => l.split(' ')[4])
      .filter((m) => m && (m === dir || m.startsWith(`${dir}/`)))
      .sort((a, b) => b.length - a.length);
  } catch (_) { return []; /* no /proc */ }
}

// Unmount anything still mounted below dir, then remove it.
async function removeTree(dir) {
  for (const m of mountsBelow(dir)) await run('umount', ['-l', m]);
  fs.rmSync(dir, { recursive: true, force: true });
}

// removeTree() for a signal handler, where nothing asynchronous runs.
function removeTreeSync(dir) {
  for (const m of mountsBelow(dir)) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
  fs.rmSync(dir, { recursive: true, force: true });
}

// Phase timings, reported as test diagnostics.
function phases(t) {
  const list = [];
  return {
    list,
    done(name, since) {
      list.push(`${name} ${((Date.now() - since) / 1000).toFixed(1)}s`);
      t.diagnostic(list[list.length - 1]);
    },
  };
}

// The podman of a store directory: its storage root, run root, tmp dir and
// network config dir, and a containers.conf that suits this machine. Makes
// what is missing; returns { podmanArgs, env, podman(args, opts) }.
function podmanOf(dir) {
  for (const d of ['root', 'runroot', 'tmp', 'networks']) {
    fs.mkdirSync(path.join(dir, d), { recursive: true });
  }
  const conf = path.join(dir, 'containers.conf');
  fs.writeFileSync(conf, [
    '[containers]',
    'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
    '[engine]',
    'runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    `tmp_dir = "${path.join(dir, 'tmp')}"`,
    '[network]',
    `network_config_dir = "${path.join(dir, 'networks')}"`,
    '',
  ].join('\n'));
  const env = { ...process.env, CONTAINERS_CONF: conf, TMPDIR: path.join(dir, 'tmp') };
  const podmanArgs = ['--root', path.join(dir, 'root'), '--runroot', path.join(dir, 'runroot'),
    '--storage-driver', process.env.LUBDUB_CI_STORAGE_DRIVER || 'overlay'];
  const podman = (args, opts = {}) => run('podman', [...podmanArgs, ...args], { env, ...opts });
  return { podmanArgs, env, podman };
}

// The store shared by the container tests of one ctest run
// (LUBDUB_CT_STORE, set by tests/container/CMakeLists.txt; made by the
// container_store_setup fixture, removed by container_store_cleanup even
// when a test fails), or '' when a test runs without ctest.
const SHARED_STORE = process.env.LUBDUB_CT_STORE || '';

// A private podman for test t: { tmp, tag, podman(args, opts), podmanArgs,
// env, cleanups }. Installs podman, runc and debootstrap if missing.
//
// In the shared store (SHARED_STORE), the images stay for the next test:
// the base image is imported once, and each image is built once, a later
// `podman build` of the same Dockerfile and context finding every layer in
// the cache. The test gets a scratch directory of its own there (tmp), and
// its containers, pods, volumes and secrets go in t.after.
// Alone, everything is private to the test and removed in t.after.
// Either way a signal (ctest's kill, a person's Ctrl-C) skips t.after: the
// signal handlers (here, and hub.js's) call process.exit(), and the 'exit'
// listener cleans up synchronously, where nothing async runs.
async function podmanSandbox(t) {
  await run(path.join(ROOT, 'deploy', 'install-deps.sh'), ['container'],
    { check: true, timeoutMs: 900000 });
  const tag = crypto.randomBytes(4).toString('hex');
  const tmpParent = fs.existsSync('/var/tmp') ? '/var/tmp' : os.tmpdir();
  // Rootful podman keeps a blob-info cache in /var/lib/containers/cache
  // whatever --root says; remove it afterwards if this test (or, shared,
  // the setup) created it.
  const hadVarLibContainers = SHARED_STORE ? true : fs.existsSync('/var/lib/containers');
  const storeDir = SHARED_STORE || fs.mkdtempSync(path.join(tmpParent, 'lubdub-ct-'));
  const { podmanArgs, env, podman } = podmanOf(storeDir);
  const tmp = SHARED_STORE ? fs.mkdtempSync(path.join(SHARED_STORE, 'work-')) : storeDir;
  // podmanArgs and env let other tools (podman-compose's --podman-path
  // wrapper) drive the same podman.
  const sandbox = { tmp, tag, podman, podmanArgs, env, cleanups: [], shared: !!SHARED_STORE };
  const spawnPodman = (args) => spawnSync('podman', [...podmanArgs, ...args],
    { env, stdio: 'ignore', timeout: 60000 });
  let cleaned = false;
  const onExit = () => {
    if (cleaned) return;
    cleaned = true;
    spawnPodman(['rm', '--all', '--force', '--time', '0']);
    if (SHARED_STORE) {
      spawnPodman(['pod', 'rm', '--all', '--force']);
      spawnPodman(['volume', 'prune', '--force']);
    } else {
      spawnPodman(['system', 'reset', '--force']);
    }
    removeTreeSync(tmp);
    if (!hadVarLibContainers) fs.rmSync('/var/lib/containers', { recursive: true, force: true });
  };
  const onSignal = () => process.exit(1);
  const signals = ['SIGTERM', 'SIGINT', 'SIGHUP'];
  process.on('exit', onExit);
  for (const s of signals) process.on(s, onSignal);
  t.after(async () => {
    for (const c of sandbox.cleanups.reverse()) await c();
    if (SHARED_STORE) {
      // What the test left running goes; the images stay for the next one.
      await podman(['rm', '--all', '--force', '--time', '0']);
      await podman(['pod', 'rm', '--all', '--force']);
      await podman(['volume', 'prune', '--force']);
      const secrets = await podman(['secret', 'ls', '--format', '{{.Name}}']);
      for (const s of secrets.stdout.split('\n').filter(Boolean)) await podman(['secret', 'rm', s]);
    } else {
      await podman(['rmi', '--all', '--force']);
    }
    await removeTree(tmp);
    if (!hadVarLibContainers) fs.rmSync('/var/lib/containers', { recursive: true, force: true });
    cleaned = true;
    process.removeListener('exit', onExit);
    for (const s of signals) process.removeListener(s, onSignal);
  });
  return sandbox;
}

// Import the bookworm minbase base image into the sandbox as BASE_IMAGE;
// returns how it was made ('cached' or 'debootstrap'), or 'shared' when the
// store already has it.
async function importBase(t, sandbox) {
  const { tmp, tag, podman } = sandbox;
  if ((await podman(['image', 'exists', BASE_IMAGE])).code === 0) return 'shared';
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
  let how = 'cached';
  if (!tarball) {
    how = 'debootstrap';
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
  await podman(['import', '--change', 'CMD ["bash"]', tarball, BASE_IMAGE],
    { check: true, timeoutMs: 300000 });
  return how;
}

module.exports = {
  ROOT, BASE_IMAGE, SHARED_STORE, skipUnlessRoot, run, freePort, removeTree, removeTreeSync,
  phases, podmanOf, podmanSandbox, importBase,
};
