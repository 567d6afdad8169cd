'use strict';
// SIGTERM drain: /readyz turns 503 at once, every client gets
// pusher:error 4200 and close 4200 (spread over the drain window), and the
// process exits 0 within --drain-timeout + 1 s. A second signal during the
// drain exits at once.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { startHub, waitFor, watchLateness } = require('./lib/hub');
const { open, firstError, stopAll, assertNoSanitizerReport } = require('./lib/ws');

// One kept-alive HTTP connection, opened before the signal: once draining
// the hub stops accepting, so a new connection would only wait in the
// backlog.
function keepAliveGet(agent, url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body, at: Date.now() }));
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error(`timeout ${url}`)));
  });
}

async function openSpread(hub, n) {
  const clients = [];
  // Different source addresses spread the SO_REUSEPORT hash over the loops.
  for (let i = 0; i < n; i++) {
    clients.push(open(hub, { localAddress: `127.0.0.${2 + (i % 4)}` }));
  }
  return Promise.all(clients);
}

test('SIGTERM drains every client with 4200 and exits 0 in time', async (t) => {
  const DRAIN = 2000;
  const N = 50;
  const hub = await startHub(['--loops', '2', '--drain-timeout', `${DRAIN}ms`,
    '--close-timeout', '500ms']);
  const clients = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => { agent.destroy(); return stopAll(hub, clients); });
  clients.push(...await openSpread(hub, N));
  const st = await hub.stats();
  assert.equal(st.totals.sessions, N);
  assert.ok(st.per_loop.every((l) => l.sessions > 0), 'both loops have sessions');
  assert.equal((await keepAliveGet(agent, hub.url('/readyz'))).status, 200);

  const late = watchLateness(hub);
  t.after(() => late.stop());
  const t0 = Date.now();
  process.kill(hub.pid, 'SIGTERM');
  // Right after the signal: the hub may take a moment to see it, but must
  // say 503 long before the drain is over.
  const ready = await waitFor(async () => {
    const r = await keepAliveGet(agent, hub.url('/readyz'));
    return r.status === 503 && r;
  }, '/readyz 503', DRAIN);
  assert.match(ready.body, /draining/);
  const exit = await hub.exited;
  const took = Date.now() - t0;
  assert.deepEqual(exit, { code: 0, signal: null });
  await late.stop();
  // The drain window, a second for the last close handshakes, and how late
  // the hub's timers and this process ran (lib/hub.js watchLateness).
  assert.ok(took <= DRAIN + 1000 + late.allowanceMs(),
    `exited ${took} ms after SIGTERM (${late.describe()})`);
  assertNoSanitizerReport(hub);
  await waitFor(() => clients.every((c) => c.closed), 'every client closed', 2000);
  const codes = {};
  for (const c of clients) {
    codes[c.closed.code] = (codes[c.closed.code] || 0) + 1;
    assert.equal(c.closed.code, 4200, `close ${JSON.stringify(c.closed)}`);
    assert.equal(firstError(c) && firstError(c).code, 4200);
  }
  const spread = clients.map((c) => c.closed.at - t0);
  t.diagnostic(`readyz 503 ${ready.at - t0} ms after SIGTERM; closes at ` +
    `${Math.min(...spread)}..${Math.max(...spread)} ms; exit 0 after ${took} ms ` +
    `(drain timeout ${DRAIN} ms)`);
});

test('a second SIGTERM during the drain exits at once', async (t) => {
  const DRAIN = 10000;
  const N = 20;
  const hub = await startHub(['--loops', '2', '--drain-timeout', `${DRAIN}ms`,
    '--close-timeout', '500ms']);
  const clients = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => { agent.destroy(); return stopAll(hub, clients); });
  clients.push(...await openSpread(hub, N));
  assert.equal((await keepAliveGet(agent, hub.url('/readyz'))).status, 200);
  const late = watchLateness(hub);
  t.after(() => late.stop());
  process.kill(hub.pid, 'SIGTERM');
  await waitFor(async () => (await keepAliveGet(agent, hub.url('/readyz'))).status === 503,
    'the drain to start', 5000);
  // Closes are spread over ~9 s, so nearly all clients are still open.
  const stillOpen = clients.filter((c) => !c.closed).length;
  const t1 = Date.now();
  process.kill(hub.pid, 'SIGTERM');
  const exit = await hub.exited;
  const took = Date.now() - t1;
  assert.ok(stillOpen > 0, 'the drain was still going');
  assert.equal(exit.code, 1);
  await late.stop();
  // At once: far less than the ~9 s the drain had left, allowing for how
  // late the hub's timers and this process ran.
  assert.ok(took < 1000 + late.allowanceMs(),
    `exited ${took} ms after the second signal (${late.describe()})`);
  t.diagnostic(`second SIGTERM with ${stillOpen}/${N} open: exit ${exit.code} after ${took} ms`);
});
