'use strict';
// Shared harness for lubdub's integration tests: start the real binary on a
// free port, wait on conditions (never fixed sleeps), read /stats, and
// always stop what we started, by PID, even when a test fails.
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');

const ROOT = path.resolve(__dirname, '../../..');
const BINARY = process.env.LUBDUB_BINARY || path.join(ROOT, 'build', 'lubdub');

// Sanitizer builds run the hub several times slower (TSan 5-15x): ctest
// sets LUBDUB_TIME_SCALE there, and every wait below (start, waitFor, once,
// HTTP requests) allows that many times longer. Waits end on their
// condition, so a scale costs nothing when the hub is fast; assertions keep
// their bounds.
const TIME_SCALE = Math.max(1, Number(process.env.LUBDUB_TIME_SCALE) || 1);

// A sanitizer report in any hub's stderr fails the test file, even when the
// test itself never looks (reports often come only at exit).
const SANITIZER_RE = /ERROR: (AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer|runtime error:/;
const reports = [];
process.on('exit', () => {
  if (!reports.length) return;
  for (const r of reports) process.stderr.write(`\nsanitizer report from lubdub pid ${r.pid}:\n${r.text}\n`);
  process.exitCode = 1;
});

const started = new Set();
function killAll() {
  for (const p of started) {
    try { process.kill(p.pid, 'SIGKILL'); } catch (_) { /* gone */ }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => { killAll(); process.exit(1); });
}

// Start lubdub: the one way the tests start a hub (lib/cluster.js's nodes
// too). Resolves when it prints its listening line. args: extra flags,
// after those the options below add. opts:
//   t           the test that owns the hub: when it ends, the clients
//               tracked on the hub (trackClient) are closed, the hub gets
//               SIGTERM and must exit 0 with no sanitizer report (unless
//               clean is false, or the hub died of a SIGKILL the test sent)
//   clean       false: the exit status is the test's business
//   loops       --loops n
//   drainTimeout --drain-timeout; a hub with t gets 1s by default (its
//               clients are closed before the stop, so there is nothing
//               to drain), null keeps the hub's own default
//   apps        the apps of a config file written for the test (needs t;
//               its path is hub.configFile)
//   env         more environment variables
//   bind, logLevel, binary, startTimeoutMs
//   wrap        a command that execs the hub, e.g. ['prlimit', '--nofile=150']
//   exactArgs   args is the whole command line (no --port 0 etc. in
//               front), for tests that start the hub exactly as a
//               contract spells it
async function startHub(args = [], opts = {}) {
  const { t } = opts;
  const owned = [];
  if (opts.loops !== undefined) owned.push('--loops', String(opts.loops));
  const drain = opts.drainTimeout !== undefined ? opts.drainTimeout : (t ? '1s' : null);
  if (drain !== null && !args.includes('--drain-timeout')) owned.push('--drain-timeout', drain);
  let configPath;
  if (opts.apps) {
    if (!t) throw new Error('startHub: apps needs the test (opts.t) to remove the file');
    configPath = configFile(t, { apps: opts.apps });
    owned.push('--config', configPath);
  }
  const hub = await spawnHub([...owned, ...args], opts);
  if (configPath) hub.configFile = configPath;
  if (t) {
    t.after(async () => {
      // Close the clients while the hub can still answer their close
      // frames: a client library closing a connection whose peer is gone
      // waits 30 s for the close reply (faye-websocket in pusher-js, ws),
      // which kept the test process alive long after its last test.
      await closeTracked(hub);
      const exit = await hub.stop();
      // A clean exit is part of every test: under the ASan build a leak or
      // a late memory error shows up only as the exit status.
      if (opts.clean === false || exit.signal === 'SIGKILL') return;
      if (exit.code !== 0) {
        throw new Error(`lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-4000)}`);
      }
      assertNoSanitizerReport(hub);
    });
  }
  return hub;
}

// Write a JSON config file; removed when the test ends.
function configFile(t, obj) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-cfg-'));
  const file = path.join(dir, 'config.json');
  fs.writeFileSync(file, JSON.stringify(obj));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return file;
}

// Clients of a hub started with opts.t are closed by its cleanup, before
// the hub stops (their own t.after hooks run after the hub's, too late).
function trackClient(hub, close) {
  if (!hub.clientCloses) hub.clientCloses = [];
  hub.clientCloses.push(close);
}

async function closeTracked(hub) {
  const closes = hub.clientCloses || [];
  hub.clientCloses = [];
  for (const close of closes) {
    try { close(); } catch (_) { /* already closed */ }
  }
  if (closes.length === 0 || hub.exit) return;
  // Until the hub has seen every close (other connections a test made
  // itself may keep some sessions open: then give up after a while, the
  // hub's drain closes them).
  await waitFor(async () => (await hub.stats()).totals.sessions === 0,
    'tracked clients to close', 5000, 20).catch(() => {});
}

// Fail on any sanitizer report in the hub's stderr (the ASan build's
// binary runs the same files).
function assertNoSanitizerReport(hub) {
  const m = SANITIZER_RE.exec(hub.stderr);
  if (m) {
    const at = Math.max(0, m.index - 200);
    throw new Error(`sanitizer report in the hub's stderr:\n${hub.stderr.slice(at, at + 4000)}`);
  }
}

function spawnHub(args, opts) {
  const argv = opts.exactArgs ? args : ['--port', '0', '--bind', opts.bind || '127.0.0.1',
    '--log-level', opts.logLevel || 'info', ...args];
  const cmd = opts.wrap ? opts.wrap[0] : (opts.binary || BINARY);
  const cmdArgs = opts.wrap ? [...opts.wrap.slice(1), opts.binary || BINARY, ...argv] : argv;
  const child = spawn(cmd, cmdArgs, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...(opts.env || {}) },
  });
  started.add(child);
  const hub = {
    child, pid: child.pid, port: 0, host: opts.bind || '127.0.0.1',
    stdout: '', stderr: '', exit: null,
  };
  child.stdout.on('data', (d) => { hub.stdout += d; });
  child.stderr.on('data', (d) => {
    hub.stderr += d;
    if (process.env.LUBDUB_TEST_VERBOSE) process.stderr.write(d);
  });
  hub.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      started.delete(child);
      hub.exit = { code, signal };
      const m = SANITIZER_RE.exec(hub.stderr);
      if (m) {
        const at = Math.max(0, m.index - 200);
        reports.push({ pid: child.pid, text: hub.stderr.slice(at, at + 6000) });
      }
      resolve(hub.exit);
    });
  });
  hub.url = (p = '') => `http://${hub.host}:${hub.port}${p}`;
  hub.wsUrl = (key = 'app-key') =>
    `ws://${hub.host}:${hub.port}/app/${key}?protocol=7&client=js&version=8.4.0&flash=false`;
  hub.stats = () => getJson(hub.url('/stats'));
  hub.stop = async (signal = 'SIGTERM') => {
    if (hub.exit) return hub.exit;
    try { process.kill(hub.pid, signal); } catch (_) { /* gone */ }
    return hub.exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`lubdub did not start: ${hub.stderr}`));
    }, (opts.startTimeoutMs || 15000) * TIME_SCALE);
    const onData = () => {
      const m = /listening on \S+:(\d+)/.exec(hub.stdout);
      if (m) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        hub.port = Number(m[1]);
        resolve(hub);
      }
    };
    child.stdout.on('data', onData);
    hub.exited.then((e) => {
      clearTimeout(timer);
      if (!hub.port) reject(new Error(`lubdub exited ${JSON.stringify(e)}: ${hub.stderr}`));
    });
  });
}

// An HTTP request (https when url says so; opts.ca: the CA to trust), with
// a timeout: resolves with {status, headers, body}.
function request(method, url, body, headers = {}, opts = {}) {
  // A body goes with its Content-Length, as the Pusher SDKs send it (the
  // hub refuses chunked POST bodies with 411).
  // Pass 'content-length': undefined to send a chunked body instead.
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length')) {
    headers = { ...headers, 'content-length': Buffer.byteLength(body) };
  }
  headers = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined));
  return new Promise((resolve, reject) => {
    const tls = url.startsWith('https:');
    const req = (tls ? https : http).request(url, { method, headers, ...(tls ? { ca: opts.ca } : {}) }, (res) => {
      let data = '';
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    req.setTimeout(10000 * TIME_SCALE, () => req.destroy(new Error(`timeout ${method} ${url}`)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

async function getJson(url) {
  const r = await request('GET', url);
  return JSON.parse(r.body);
}

// Poll fn until it returns a truthy value; fail with msg after timeoutMs.
async function waitFor(fn, msg, timeoutMs = 10000, everyMs = 20) {
  const deadline = Date.now() + timeoutMs * TIME_SCALE;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) { last = e; }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${msg} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

// Resolve with the next event of an EventEmitter, or reject after timeoutMs.
function once(emitter, event, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out waiting for '${event}'`)), timeoutMs * TIME_SCALE);
    emitter.once(event, (...args) => { clearTimeout(t); resolve(args); });
  });
}

// Scheduling allowance for an upper bound on how long the hub took to act.
// A loaded machine delays the hub's loops and this test process alike, and
// neither says the hub's design is wrong, so a bound on elapsed time adds
// how late both ran: the hub's own measure (the largest lateness of a
// timer on any loop's wheel, polled from /stats while watched, so it is
// known even after the hub exits) and this process's event-loop delay.
// Usage: const late = watchLateness(hub); ...; bound + late.allowanceMs().
function watchLateness(hub, everyMs = 100) {
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  let hubMax = 0;
  let stopped = false;
  const poll = async () => {
    while (!stopped && !hub.exit) {
      try {
        const st = await hub.stats();
        for (const l of st.per_loop) {
          hubMax = Math.max(hubMax, (l.wheel && l.wheel.max_lateness_ms) || 0);
        }
      } catch (_) { /* exiting */ }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  };
  const running = poll();
  return {
    hubMs: () => hubMax,
    selfMs: () => lag.max / 1e6,
    allowanceMs: () => Math.ceil(hubMax + lag.max / 1e6),
    describe: () => `allowance ${Math.ceil(hubMax + lag.max / 1e6)} ms ` +
      `(hub timers late ${hubMax} ms, test process ${(lag.max / 1e6).toFixed(0)} ms)`,
    async stop() { stopped = true; lag.disable(); await running; },
  };
}

// The complete HTTP responses at the start of data, a string read off a
// raw keep-alive socket (every hub response has a Content-Length):
// [{head, body}], a trailing partial one left out.
function responses(data) {
  const out = [];
  let at = 0;
  for (;;) {
    const e = data.indexOf('\r\n\r\n', at);
    if (e < 0) break;
    const head = data.slice(at, e);
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    const len = m ? Number(m[1]) : 0;
    if (data.length < e + 4 + len) break;
    out.push({ head, body: data.slice(e + 4, e + 4 + len) });
    at = e + 4 + len;
  }
  return out;
}

// A self-signed RSA certificate for localhost and 127.0.0.1 in dir:
// { key, cert } paths.
function makeCert(dir) {
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes',
    '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
  return { key, cert };
}

module.exports = {
  responses, makeCert,
  startHub, request, getJson, waitFor, once, watchLateness, ROOT, BINARY, TIME_SCALE,
  SANITIZER_RE, configFile, trackClient, closeTracked, assertNoSanitizerReport,
};
