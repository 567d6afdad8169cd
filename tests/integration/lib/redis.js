'use strict';
// A throwaway redis-server for the cluster tests (Debian's binary): on a
// free loopback port, no persistence, killed by PID when the test ends
// (and on exit, even after a failure). redisCli runs Debian's redis-cli
// for the few checks a test makes on Redis itself (PUBSUB NUMSUB).
//
// The nodes run as the Redis 7 ACL user docs/SCALING.md gives ("What lives
// in Redis": its ACL SETUSER line is read from there, so the docs and the
// suite cannot drift), r.url() carries its credentials, and the default
// user is off: a command, key or channel the line does not allow fails
// the test (the nodes' errors, and the ACL LOG checked when it ends).
// redis-cli (r.cli, redisCli) is the admin user, for the tests' own
// checks (FLUSHALL, CLIENT KILL, ...). With --requirepass in extra the
// default user stays on with that password (the tests of a refused
// password), and r.url() has no credentials.
//
// TLS (issue 33): startRedis(t, { tls: certs }) (a lib/tls_certs.js set)
// serves TLS only (--port 0 --tls-port P) with certs.server, or the one
// named by tlsCert ('wrongName'), and asks clients for a certificate when
// tlsAuthClients is true. r.url() is then rediss://, r.nodeArgs() the
// flags a node needs to trust it (and its client certificate when asked
// for), r.cli speaks TLS. LUBDUB_TEST_REDIS_TLS=1 runs every Redis over TLS
// with one shared set (=client: client certificates required too), and
// lib/cluster.js gives every node envNodeArgs(): the cluster suite over TLS.
const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { waitFor } = require('./hub');
const { sharedCerts } = require('./tls_certs');

const NODE_USER = 'lubdub';
const NODE_PASS = 'lubdub-node-pass';
const ADMIN = ['--user', 'admin', '--pass', 'lubdub-admin-pass', '--no-auth-warning'];
// The admin's AUTH in RESP, for a test's own raw connection (its reply:
// "+OK\r\n").
const ADMIN_AUTH = '*3\r\n$4\r\nAUTH\r\n$5\r\nadmin\r\n$17\r\nlubdub-admin-pass\r\n';

// The "user" directive of the documented ACL SETUSER line, for prefix.
function aclUser(prefix = 'lubdub') {
  const doc = fs.readFileSync(path.join(__dirname, '../../../docs/SCALING.md'), 'utf8');
  const line = doc.split('\n').find((l) => l.startsWith(`ACL SETUSER ${NODE_USER} `));
  if (!line) throw new Error('docs/SCALING.md: no ACL SETUSER line');
  return line.split(/\s+/).slice(2).map((w) => w.replace('>CHANGE-ME', `>${NODE_PASS}`)
    .replace(/^([~&])lubdub:/, `$1${prefix}:`));
}

// The URL the nodes use for a Redis of startRedis's on port (also before
// it is started): rediss:// under LUBDUB_TEST_REDIS_TLS.
const redisUrl = (port, db = 0, sch = scheme()) => `${sch}://${NODE_USER}:${NODE_PASS}@127.0.0.1:${port}/${db}`;

const REDIS_SERVER = process.env.REDIS_SERVER || '/usr/bin/redis-server';
const REDIS_CLI = process.env.REDIS_CLI || '/usr/bin/redis-cli';

const running = new Set();
process.on('exit', () => {
  for (const c of running) {
    try { process.kill(c.pid, 'SIGKILL'); } catch (_) { /* gone */ }
  }
});

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const ENV_TLS = process.env.LUBDUB_TEST_REDIS_TLS || '';
const envTls = () => (ENV_TLS && ENV_TLS !== '0' ? sharedCerts() : null);
// 'rediss' when every Redis of this process is TLS, for URLs a test builds.
const scheme = () => (envTls() ? 'rediss' : 'redis');

function tlsServerArgs(certs, which, authClients) {
  return ['--port', '0', '--tls-cert-file', certs[which].cert, '--tls-key-file', certs[which].key,
    '--tls-ca-cert-file', certs.ca.cert, '--tls-auth-clients', authClients ? 'yes' : 'no',
    '--tls-replication', 'yes'];
}
const tlsCliArgs = (certs) => ['--tls', '--cacert', certs.ca.cert,
  '--cert', certs.client.cert, '--key', certs.client.key];
function tlsNodeArgs(certs, authClients) {
  return ['--redis-tls-ca-file', certs.ca.cert, ...(authClients
    ? ['--redis-tls-cert-file', certs.client.cert, '--redis-tls-key-file', certs.client.key] : [])];
}
// What a node started against url needs under LUBDUB_TEST_REDIS_TLS.
const envNodeArgs = (url) => (envTls() && /^rediss:/.test(url)
  ? tlsNodeArgs(envTls(), ENV_TLS === 'client') : []);

// A stand-in for node:net in a test's own raw connection to its Redis
// (redisNet.connect(port, host, onConnect)): TLS with the shared CA and
// client certificate under LUBDUB_TEST_REDIS_TLS, else net.connect.
const redisNet = {
  connect(port, host, onConnect) {
    const c = envTls();
    if (!c) return net.connect(port, host, onConnect);
    const pem = (f) => require('node:fs').readFileSync(f);
    return require('node:tls').connect({ host, port, ca: pem(c.ca.cert), cert: pem(c.client.cert),
      key: pem(c.client.key) }, onConnect);
  },
};

function redisCli(port, ...args) {
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(port), ...ADMIN, ...args],
      { timeout: 10000 }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim())));
  });
}

// Start redis-server; resolves once it answers PING. extra: more args.
// It is killed when t ends, or through defer(stop) when given (lib/cluster.js
// stops it after the nodes that use it). r.pause()/r.resume() stop and
// continue it (SIGSTOP/SIGCONT; continued at the end too); r.again() starts
// a new one on the same port with the same args, after r.stop().
async function startRedis(t, opts = {}) {
  const { port, extra = [], defer, tlsCert = 'server' } = opts;
  const tls = opts.tls === undefined ? envTls() : opts.tls;
  const authClients = opts.tlsAuthClients === undefined ? ENV_TLS === 'client' : opts.tlsAuthClients;
  const p = port || await freePort();
  const ownPass = extra.includes('--requirepass');
  const users = ['--user', 'admin', 'on', '>lubdub-admin-pass', '~*', '&*', '+@all',
    '--user', ...aclUser(), ...(ownPass ? [] : ['--user', 'default', 'off'])];
  const listen = tls ? ['--tls-port', String(p), ...tlsServerArgs(tls, tlsCert, authClients)]
    : ['--port', String(p)];
  const child = spawn(REDIS_SERVER, [...listen, '--bind', '127.0.0.1',
    '--save', '', '--appendonly', 'no', '--protected-mode', 'no', ...users, ...extra],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  const r = { child, pid: child.pid, port: p, out: '', exit: null };
  child.stdout.on('data', (d) => { r.out += d; });
  child.stderr.on('data', (d) => { r.out += d; });
  r.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    running.delete(child);
    r.exit = { code, signal };
    resolve(r.exit);
  }));
  r.stop = async (signal = 'SIGKILL') => {
    if (r.exit) return r.exit;
    try { process.kill(r.pid, signal); } catch (_) { /* gone */ }
    return r.exited;
  };
  r.tls = tls;
  r.scheme = tls ? 'rediss' : 'redis';
  r.url = (db = 0) => (ownPass ? `${r.scheme}://127.0.0.1:${p}/${db}` : redisUrl(p, db, r.scheme));
  r.nodeArgs = () => (tls ? tlsNodeArgs(tls, authClients) : []);
  r.cli = (...args) => redisCli(p, ...(tls ? tlsCliArgs(tls) : []), ...args);
  r.paused = false;
  r.pause = () => { r.paused = true; process.kill(r.pid, 'SIGSTOP'); };
  r.resume = () => {
    if (!r.paused) return;
    r.paused = false;
    try { process.kill(r.pid, 'SIGCONT'); } catch (_) { /* gone */ }
  };
  r.again = () => startRedis(t, { ...opts, tls, port: p });
  const cleanup = async () => {
    r.resume();
    const denied = r.exit ? '' : await aclDenied(r);
    await r.stop();
    if (denied) throw new Error(`redis ${p}: the node user was refused: ${denied}`);
  };
  if (defer) defer(cleanup);
  else if (t) t.after(cleanup);
  await waitFor(async () => {
    if (r.exit) throw new Error(`redis-server exited: ${r.out}`);
    return (await r.cli('PING').catch(() => '')) === 'PONG';
  }, `redis-server on ${p}`, 10000, 50);
  return r;
}

// What ACL LOG says the node user was refused (a command, key or channel;
// refused AUTHs are some tests' point): "" when nothing.
async function aclDenied(r) {
  const log = await r.cli('ACL', 'LOG').catch(() => '');
  const out = [];
  for (const e of log.split(/\n(?=count\n)/)) {
    const f = e.split('\n');
    const get = (k) => f[f.indexOf(k) + 1];
    if (get('username') === NODE_USER && get('reason') !== 'auth') out.push(`${get('reason')} ${get('object')}`);
  }
  return out.join(', ');
}

// How many subscribers Redis counts for a channel (nodes subscribed).
async function numsub(redis, channel) {
  const out = await redis.cli('PUBSUB', 'NUMSUB', channel);
  const lines = out.split('\n');
  return Number(lines[1]);
}

module.exports = {
  startRedis, freePort, redisCli, redisUrl, numsub, ADMIN_AUTH,
  scheme, envNodeArgs, tlsServerArgs, tlsCliArgs, tlsNodeArgs, redisNet,
};
