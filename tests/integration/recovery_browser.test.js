'use strict';
// Recovery in a browser (issue 35, item 5): Debian's Chromium, headless,
// driven by playwright-core as tests/e2e/browser.test.js drives it. The
// page is the hub's own (a --web-root of the test's: the page and
// pusher-js's browser bundle), and imports /lubdub-resume.js, which the
// hub serves whatever the web root is. pusher-js connects through the
// cutting proxy (lib/cutproxy.js); its private channel is signed by the
// hub's development endpoint (POST /auth). 300 events on a public and a
// private channel, two cuts at seeded random moments: the page's
// channel.bind handlers see each exactly once, in order, and no lubdub:
// name reaches its bind_global handlers.
// Registered with the e2e label and the chromium lock (tests/e2e's rule:
// one browser at a time, never under a sanitizer).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, TIME_SCALE } = require('./lib/hub');
const { serverSdk } = require('./lib/clients');
const { cutProxy, prng } = require('./lib/cutproxy');
const { launch } = require('./lib/browser');
const { historyApp, cutPoints, stream, assertExactlyOnce } = require('./lib/recovery');

const CHANNELS = ['stream', 'private-stream'];
const N = 300;

// The page: pusher-js from the page's origin (the hub), the helper
// imported from it, everything the app's handlers see in window.seen.
const PAGE = `<!doctype html><meta charset="utf-8"><title>recovery</title>
<script src="/pusher.min.js"></script>
<script type="module">
  import { resume } from '/lubdub-resume.js';
  const q = new URLSearchParams(location.search);
  const pusher = new Pusher('app-key', { wsHost: '127.0.0.1', wsPort: Number(q.get('port')),
    forceTLS: false, enabledTransports: ['ws'], cluster: 'local', disableStats: true,
    channelAuthorization: { endpoint: '/auth', transport: 'ajax' } });
  window.helper = resume(pusher);
  const seen = { seqs: {}, ends: {}, leaks: [] };
  const ours = (name) => String(name).includes('lubdub');
  pusher.bind_global((name) => { if (ours(name)) seen.leaks.push('pusher: ' + name); });
  for (const name of ${JSON.stringify(CHANNELS)}) {
    const ch = pusher.subscribe(name);
    seen.seqs[name] = [];
    seen.ends[name] = 0;
    ch.bind('seq', (d) => seen.seqs[name].push(d.seq));
    ch.bind('end', () => { seen.ends[name]++; });
    ch.bind_global((ev) => { if (ours(ev)) seen.leaks.push(name + ': ' + ev); });
  }
  window.seen = seen;
  window.pusher = pusher;
</script>`;

test('Chromium: the hub\'s page with pusher-js and /lubdub-resume.js, 300 events, two cuts, exactly once', async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-recovery-web-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.writeFileSync(path.join(root, 'recovery.html'), PAGE);
  fs.copyFileSync(path.join(__dirname, 'node_modules/pusher-js/dist/web/pusher.min.js'),
    path.join(root, 'pusher.min.js'));
  // Closed before the hub stops (the hub's t.after comes later).
  const browser = await launch(t);
  const hub = await startHub(['--dev-auth-endpoint', '--web-root', root],
    { t, loops: 2, apps: [historyApp()] });
  const proxy = await cutProxy(t, hub, { name: 'chromium' });
  t.diagnostic(`seed ${proxy.seed} (LUBDUB_TEST_SEED=${proxy.seed} replays the cuts)`);
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    // Chromium logs each socket the proxy cut, and each failed load (the
    // responses below name them); nothing else may be an error.
    if (m.type() === 'error' && !/WebSocket|Failed to load resource/.test(m.text())) errors.push(m.text());
  });
  page.on('response', (res) => {
    if (res.status() >= 400 && !res.url().endsWith('/favicon.ico')) errors.push(`${res.status()} ${res.url()}`);
  });
  await page.goto(hub.url(`/recovery.html?port=${proxy.port}`));
  const WAIT = { timeout: 20000 * TIME_SCALE };
  await page.waitForFunction((names) => window.pusher &&
    names.every((c) => window.pusher.channel(c) && window.pusher.channel(c).subscribed), CHANNELS, WAIT);

  const points = cutPoints(prng(proxy.seed), N, 2);
  t.diagnostic(`cut points: ${points.join(', ')}`);
  const connection = () => page.evaluate(() => ({
    state: window.pusher.connection.state, socketId: window.pusher.connection.socket_id,
  }));
  const r = await stream(t, hub, { channels: CHANNELS, n: N, rate: 200, proxy, connection, points });
  await serverSdk(hub).trigger(CHANNELS, 'end', {});
  await page.waitForFunction((names) => names.every((c) => window.seen.ends[c] >= 1), CHANNELS,
    { timeout: 60000 * TIME_SCALE }).catch(async (e) => {
    const counts = await page.evaluate(() => Object.values(window.seen.seqs).map((s) => s.length));
    throw new Error(`${e.message}: the page has ${counts} events`);
  });
  const seen = await page.evaluate(() => ({ ...window.seen, stats: window.helper.stats() }));
  t.diagnostic(`${proxy.describe()}; helper ${JSON.stringify(seen.stats)}`);
  assert.equal(r.cuts, 2);
  assert.ok(proxy.accepted >= 3, `${proxy.accepted} connections`);
  for (const c of CHANNELS) assertExactlyOnce(seen.seqs[c], N, c);
  assert.deepEqual(seen.leaks, []);
  assert.equal(seen.stats.duplicates, 0);
  await browser.close();
  assert.deepEqual(errors, []);
});
