'use strict';
// Every close() the hub makes closes a descriptor it still owns. A second
// close of a number that another thread has since been given takes that
// thread's socket or file away from it: at shutdown the backplane's Redis
// sockets, the webhook sender's connections and its SQLite store are still
// in use while the loops go (docs/RELIABILITY.md, series 10: a node aborted
// in libev because its backplane's socket was closed under it). lws closes
// what it has adopted (the listeners) itself, so the hub must not.
//
// Two set-ups: a backplane retrying a lost Redis (series 10), and the
// webhook sender with a request in flight and its SQLite store open.
// strace watches every thread's close() calls from attach to exit; with
// no descriptor reused in between, a double close fails with EBADF, so any
// failed close is the bug, whether or not it happened to hit a live fd.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, waitFor, getJson, request } = require('./lib/hub');
const { open, subscribe, assertNoSanitizerReport } = require('./lib/ws');
const { startRedis, freePort } = require('./lib/redis');
const { startReceiver } = require('./lib/receiver');
const { configFile, APP } = require('./lib/clients');

const STRACE = process.env.STRACE || '/usr/bin/strace';

// Attach strace to every thread of pid; resolves once it has attached.
function traceCloses(t, pid) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-fd-'));
  const out = path.join(dir, 'closes.txt');
  const child = spawn(STRACE, ['-f', '-p', String(pid), '-e', 'trace=close',
    '-e', 'status=failed', '-o', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const trace = { ended: false };
  child.on('exit', () => { trace.ended = true; });
  t.after(() => {
    try { process.kill(child.pid, 'SIGKILL'); } catch (_) { /* gone */ }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return waitFor(() => {
    if (/Operation not permitted|Could not attach/.test(err)) throw new Error(`strace: ${err}`);
    return /attached/.test(err);
  }, 'strace attached', 10000).then(() => Object.assign(trace, {
    lines: () => fs.readFileSync(out, 'utf8').split('\n').filter((l) => /close\(/.test(l)),
  }));
}

// n sessions spread over the loops (different source addresses), each
// subscribed to a channel of its own.
async function sessions(hub, n) {
  const clients = [];
  for (let i = 0; i < n; i++) {
    const c = await open(hub, { localAddress: `127.0.0.${2 + i}` });
    clients.push(c);
    await subscribe(c, `room-${i}`);
  }
  return clients;
}

// LeakSanitizer cannot run under ptrace: leaks are the other tests' job.
const ENV = { ASAN_OPTIONS: [process.env.ASAN_OPTIONS, 'detect_leaks=0'].filter(Boolean).join(':') };

// Attach, close the clients, SIGTERM: the hub exits 0 and no close() failed.
async function shutdownTraced(t, hub, clients) {
  const trace = await traceCloses(t, hub.pid);
  for (const c of clients) c.terminate();
  const exit = await hub.stop('SIGTERM');
  await waitFor(() => trace.ended, 'strace ended with the hub', 15000);
  assertNoSanitizerReport(hub);
  assert.deepEqual(exit, { code: 0, signal: null }, hub.stderr.slice(-2000));
  assert.deepEqual(trace.lines(), [], 'close() calls that failed (a descriptor closed twice)');
}

test('no close() fails at shutdown while the backplane retries a lost Redis', async (t) => {
  const redis = await startRedis(t);
  const metricsPort = await freePort();
  const hub = await startHub(['--loops', '2', '--metrics-port', String(metricsPort),
    '--redis', redis.url(), '--node-id', 'fd1', '--drain-timeout', '1s'],
  { env: ENV });
  t.after(() => hub.stop('SIGKILL'));
  // With --metrics-port, /stats is served there only.
  const stats = () => getJson(`http://127.0.0.1:${metricsPort}/stats`);
  const bp = async () => (await stats()).backplane.state;
  await waitFor(async () => (await bp()) === 'up', 'backplane up', 15000);

  // Some of everything that owns descriptors: sessions on both loops, an
  // HTTP request on each port, then Redis gone so that the backplane opens
  // and drops sockets of its own while the hub shuts down.
  const clients = await sessions(hub, 4);
  assert.equal((await stats()).totals.sessions, clients.length);
  assert.equal((await request('GET', hub.url('/healthz'))).status, 200);
  await redis.stop();
  await waitFor(async () => (await bp()) === 'down', 'backplane down', 15000);

  await shutdownTraced(t, hub, clients);
});

test('no close() fails at shutdown with webhooks in flight and their store open', async (t) => {
  const ok = await startReceiver(t, APP);
  const hang = await startReceiver(t, APP);
  hang.mode = 'hang';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-fdstate-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = configFile(t, { apps: [{ ...APP, webhooks: [
    { url: ok.url(), event_types: ['channel_occupied', 'channel_vacated'] },
    { url: hang.url(), event_types: ['channel_occupied', 'channel_vacated'] }] }] });
  const hub = await startHub(['--loops', '2', '--config', file, '--state-dir', dir,
    '--webhook-delay', '0ms', '--drain-timeout', '1s'], { env: ENV });
  t.after(() => hub.stop('SIGKILL'));
  const clients = await sessions(hub, 4);
  // Delivered to the one, held open by the other: the sender has a
  // connection in flight and its SQLite store open when the signal comes.
  await waitFor(() => ok.requests.length >= 1, 'a webhook delivered', 15000);
  await waitFor(() => hang.requests.length >= 1, 'a webhook held by the receiver', 15000);
  await shutdownTraced(t, hub, clients);
});

test('started with stdin and stderr closed, it holds them on /dev/null', async (t) => {
  // Otherwise the first listener or socket would take fd 0 or 2 and every
  // log line (debug: several per connection) would be written into it.
  const hub = await startHub(['--loops', '2', '--log-level', 'debug'],
    { wrap: ['sh', '-c', 'exec "$0" "$@" <&- 2>&-'], env: ENV });
  t.after(() => hub.stop('SIGKILL'));
  for (const fd of [0, 2]) {
    assert.equal(fs.readlinkSync(`/proc/${hub.pid}/fd/${fd}`), '/dev/null', `fd ${fd}`);
  }
  const clients = await sessions(hub, 4);
  for (const c of clients) c.terminate();
  assert.deepEqual(await hub.stop('SIGTERM'), { code: 0, signal: null });
});
