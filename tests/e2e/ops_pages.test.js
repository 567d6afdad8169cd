'use strict';
// End to end: the dashboard behind --metrics-token and on --metrics-port,
// with its cluster and webhook panels, and the console's members'
// user_info, test event and socket inspector, in Debian's Chromium
// (headless, playwright-core) against the real binary
// (docs/OPERATIONS.md, "Dashboard and console"). Every wait is on a
// condition.
//
// Screenshots: tests/artifacts/dashboard-ops.png, console-ops.png
// (gitignored).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const INTEGRATION = path.resolve(__dirname, '../integration');
const { startHub, waitFor, ROOT } = require(path.join(INTEGRATION, 'lib/hub'));
const {
  APP, configFile, rawClient, signIn, rest,
} = require(path.join(INTEGRATION, 'lib/clients'));
const { startRedis, startNode, allUp, joined } = require(path.join(INTEGRATION, 'lib/cluster'));
const { freePort } = require(path.join(INTEGRATION, 'lib/redis'));
const { startReceiver } = require(path.join(INTEGRATION, 'lib/receiver'));
const requireNpm = createRequire(path.join(INTEGRATION, 'package.json'));
const { chromium } = requireNpm('playwright-core');

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'tests/artifacts');
const WEB_ROOT = path.join(ROOT, 'web');
const METRICS_TOKEN = 'metrics-e2e-token-0123456789';
const ADMIN_TOKEN = 'console-e2e-token-0123456789';
const WAIT = { timeout: 20000 };

async function browserFor(t) {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run deploy/install-deps.sh test`);
  }
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic',
      '--disable-background-networking', '--no-first-run',
      '--disable-component-update', '--disable-sync'],
  });
  t.after(() => browser.close());
  return browser;
}

async function pageOf(browser, errors) {
  const context = await browser.newContext({ viewport: { width: 1366, height: 1400 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  return page;
}

const text = (page, sel) => page.locator(sel).textContent();

test('dashboard: behind --metrics-token, on --metrics-port, cluster and webhook panels', async (t) => {
  const redis = await startRedis(t);
  const rx = await startReceiver(t, APP);
  const mport = await freePort();
  const node = await startNode(t, redis.url(), 'dash1', ['--web-root', WEB_ROOT,
    '--metrics-port', String(mport), '--metrics-token', METRICS_TOKEN,
    '--config', configFile(t, { apps: [{ ...APP, webhooks: [{ url: rx.url(), event_types: ['channel_occupied', 'channel_vacated'] }] }] })]);
  // Its /stats is on the metrics port, behind the token.
  node.stats = async () => (await fetch(`http://127.0.0.1:${mport}/stats`,
    { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).json();
  await allUp([node]);
  // Traffic for the panels: a publish through Redis, a webhook sent.
  const c = await rawClient(t, node);
  await c.subscribed('dash-news');
  await waitFor(() => rx.requests.length > 0, 'a webhook delivered', 20000);
  const browser = await browserFor(t);
  const errors = [];
  const page = await pageOf(browser, errors);
  const urls = [];
  page.on('request', (r) => urls.push(r.url()));

  // The main port says where /stats went.
  await page.goto(node.url('/dashboard'));
  await page.locator('#moved-panel').waitFor({ state: 'visible', ...WAIT });

  // The metrics port serves the dashboard; it asks for the token.
  await page.goto(`http://127.0.0.1:${mport}/dashboard`);
  await page.locator('#token-panel').waitFor({ state: 'visible', ...WAIT });
  await page.fill('#metrics-token', 'not-the-token-000000');
  await page.click('#token-button');
  await page.locator('#token-error', { hasText: 'refused' }).waitFor(WAIT);
  await page.fill('#metrics-token', METRICS_TOKEN);
  await page.click('#token-button');
  await page.locator('#feed-state', { hasText: 'live' }).waitFor(WAIT);
  assert.equal(await page.locator('#token-panel').isHidden(), true);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('lubdub.metricsToken')), METRICS_TOKEN);

  // Cluster panel.
  await page.locator('#cluster-panel').waitFor({ state: 'visible', ...WAIT });
  assert.equal(await text(page, '#cl-node'), 'dash1');
  assert.equal(await text(page, '#cl-state'), 'up');
  await page.waitForFunction(() => Number(document.getElementById('cl-nodes').textContent) >= 1, null, WAIT);
  const sdkPublish = await rest(node, 'POST', `/apps/${APP.id}/events`,
    { body: JSON.stringify({ name: 'ev', channel: 'dash-news', data: '{}' }) });
  assert.equal(sdkPublish.status, 200, sdkPublish.body);
  await page.waitForFunction(() => Number(document.getElementById('cl-published').textContent) >= 1, null, WAIT);
  for (const id of ['cl-lost', 'cl-gaps', 'cl-gaps-filled', 'cl-hist-w', 'cl-hist-r']) {
    assert.match(await text(page, `#${id}`), /^\d/, id);
  }

  // Webhook panel.
  await page.locator('#webhooks-panel').waitFor({ state: 'visible', ...WAIT });
  await page.waitForFunction(() => Number(document.getElementById('wh-sent').textContent) >= 1, null, WAIT);
  for (const id of ['wh-queued', 'wh-failed', 'wh-dead']) {
    assert.match(await text(page, `#${id}`), /^\d/, id);
  }
  assert.equal(await text(page, '#wh-up'), '1 / 1');
  assert.equal(await page.locator('#webhooks-body tr').count(), 1);
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-ops.png'), fullPage: true });

  // The token never in a URL.
  assert.ok(!urls.some((u) => u.includes(METRICS_TOKEN)), 'the metrics token in a URL');
  assert.deepEqual(errors, []);
});

test('dashboard: --metrics-token on the main port', async (t) => {
  const hub = await startHub(['--web-root', WEB_ROOT, '--metrics-token', METRICS_TOKEN], { t, loops: 2 });
  const browser = await browserFor(t);
  const errors = [];
  const page = await pageOf(browser, errors);
  await page.goto(hub.url('/dashboard'));
  await page.locator('#token-panel').waitFor({ state: 'visible', ...WAIT });
  await page.fill('#metrics-token', METRICS_TOKEN);
  await page.click('#token-button');
  await page.locator('#feed-state', { hasText: 'live' }).waitFor(WAIT);
  await page.waitForFunction(() => document.getElementById('loops').textContent === '2', null, WAIT);
  // One node: no cluster panel.
  assert.equal(await page.locator('#cluster-panel').isHidden(), true);
  assert.deepEqual(errors, []);
});

test('console: user_info, a test event, the socket inspector', async (t) => {
  const hub = await startHub(['--web-root', WEB_ROOT, '--admin-token', ADMIN_TOKEN], { t, loops: 2 });
  const browser = await browserFor(t);
  const errors = [];
  const page = await pageOf(browser, errors);
  await page.goto(hub.url('/console'));
  await page.fill('#token', ADMIN_TOKEN);
  await page.click('#login-button');
  await page.waitForFunction(() => document.getElementById('state').dataset.state === 'signed-in',
    null, WAIT);

  // Members with their user_info.
  const alice = await joined(t, hub, 'presence-room', 'alice', { name: 'Alice' });
  await alice.subscribed('news');
  await page.locator('tr[data-channel="presence-room"] button.inspect').click(WAIT);
  await page.locator('#members .member[data-user="alice"] .info', { hasText: '"name":"Alice"' }).waitFor(WAIT);

  // A test event reaches the WebSocket client; a bad one is refused.
  await page.fill('#publish-channel', 'news');
  await page.fill('#publish-event', 'console-e2e');
  await page.fill('#publish-data', '{"from":"the page"}');
  await page.click('#publish-send');
  await page.locator('#publish-result[data-state="published"]').waitFor(WAIT);
  const got = await alice.next((m) => m.event === 'console-e2e', 'the test event');
  assert.deepEqual(JSON.parse(got.data), { from: 'the page' });
  await page.fill('#publish-channel', 'no spaces allowed');
  await page.click('#publish-send');
  await page.locator('#publish-result[data-state="refused"]', { hasText: '400' }).waitFor(WAIT);

  // The inspector: a live socket.
  await page.fill('#inspect-id', alice.socketId);
  await page.click('#inspect-go');
  await page.locator('#inspect-verdict[data-state="done"]', { hasText: 'found' }).waitFor(WAIT);
  const rec = page.locator(`#inspect-out .record.socket[data-socket="${alice.socketId}"]`);
  await rec.waitFor(WAIT);
  assert.match(await rec.locator('.subs').textContent(), /presence-room/);
  assert.match(await rec.locator('.subs').textContent(), /news/);
  const written = Number((await rec.locator('.written').textContent()).match(/(\d+) bytes/)[1]);
  assert.ok(written > 0, `bytes written ${written}`);

  // A closed one: its last close with its code.
  const bob = await signIn(await rawClient(t, hub), 'bob');
  const term = await rest(hub, 'POST', `/apps/${APP.id}/users/bob/terminate_connections`, { body: '{}' });
  assert.equal(term.status, 200, term.body);
  await bob.waitClose();
  await page.fill('#inspect-id', bob.socketId);
  await page.click('#inspect-go');
  const closed = page.locator(`#inspect-out .record.close[data-socket="${bob.socketId}"]`);
  await closed.waitFor(WAIT);
  assert.equal(await closed.getAttribute('data-code'), '4009');
  assert.match(await closed.locator('.code').textContent(), /4009/);

  // Unknown.
  await page.fill('#inspect-id', '424242.4242');
  await page.click('#inspect-go');
  await page.locator('#inspect-verdict[data-state="done"]', { hasText: 'not on this node' }).waitFor(WAIT);
  assert.equal(await page.locator('#inspect-out .record').count(), 0);
  await page.screenshot({ path: path.join(ARTIFACTS, 'console-ops.png'), fullPage: true });
  assert.deepEqual(errors, []);
});
