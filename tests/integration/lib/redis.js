'use strict';
// A throwaway redis-server for the cluster tests (Debian's binary): on a
// free loopback port, no persistence, killed by PID when the test ends
// (and on exit, even after a failure). redisCli runs Debian's redis-cli
// for the few checks a test makes on Redis itself (PUBSUB NUMSUB).
const { spawn, execFile } = require('node:child_process');
const net = require('node:net');
const { waitFor } = require('./hub');

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

function redisCli(port, ...args) {
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(port), ...args],
      { timeout: 10000 }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim())));
  });
}

// Start redis-server; resolves once it answers PING. extra: more args.
// It is killed when t ends, or through defer(stop) when given (lib/cluster.js
// stops it after the nodes that use it). r.pause()/r.resume() stop and
// continue it (SIGSTOP/SIGCONT; continued at the end too); r.again() starts
// a new one on the same port with the same args, after r.stop().
async function startRedis(t, { port, extra = [], defer } = {}) {
  const p = port || await freePort();
  const child = spawn(REDIS_SERVER, ['--port', String(p), '--bind', '127.0.0.1',
    '--save', '', '--appendonly', 'no', '--protected-mode', 'no', ...extra],
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
  r.url = (db = 0) => `redis://127.0.0.1:${p}/${db}`;
  r.cli = (...args) => redisCli(p, ...args);
  r.paused = false;
  r.pause = () => { r.paused = true; process.kill(r.pid, 'SIGSTOP'); };
  r.resume = () => {
    if (!r.paused) return;
    r.paused = false;
    try { process.kill(r.pid, 'SIGCONT'); } catch (_) { /* gone */ }
  };
  r.again = () => startRedis(t, { port: p, extra, defer });
  const cleanup = () => { r.resume(); return r.stop(); };
  if (defer) defer(cleanup);
  else if (t) t.after(cleanup);
  const auth = extra.includes('--requirepass') ? ['-a', extra[extra.indexOf('--requirepass') + 1], '--no-auth-warning'] : [];
  await waitFor(async () => {
    if (r.exit) throw new Error(`redis-server exited: ${r.out}`);
    return (await r.cli(...auth, 'PING')) === 'PONG';
  }, `redis-server on ${p}`, 10000, 50);
  return r;
}

// How many subscribers Redis counts for a channel (nodes subscribed).
async function numsub(redis, channel) {
  const out = await redis.cli('PUBSUB', 'NUMSUB', channel);
  const lines = out.split('\n');
  return Number(lines[1]);
}

module.exports = { startRedis, freePort, redisCli, numsub };
