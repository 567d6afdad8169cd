'use strict';
// End to end: the operator console (/console, --admin-token) in Debian's
// Chromium, headless, driven by playwright-core, against the real binary.
// A wrong token is refused; the right one signs in (kept in sessionStorage,
// never in a URL); a channel with its counts appears when a pusher-js
// client subscribes; the presence inspector lists the members; a live tail
// shows a REST publish. Every HTTP body and WebSocket frame the page got is
// checked for the app secret. Every wait is on a condition.
//
// Screenshot: tests/artifacts/console.png (gitignored).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const INTEGRATION = path.resolve(__dirname, '../integration');
const { startHub, waitFor, ROOT } = require(path.join(INTEGRATION, 'lib/hub'));
const { pusherClient, connected, configFile } = require(path.join(INTEGRATION, 'lib/clients'));
const requireNpm = createRequire(path.join(INTEGRATION, 'package.json'));
const { chromium } = requireNpm('playwright-core');
const { publish } = require(path.join(ROOT, 'tools/publish.js'));

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'tests/artifacts');
const WEB_ROOT = path.join(ROOT, 'web');
const ADMIN_TOKEN = 'console-e2e-token-0123456789';
const SECRET = 'e2e-secret-never-shown-42';
const APP = { id: 'app-id', key: 'app-key', secret: SECRET };
const WAIT = { timeout: 20000 };

test('console: sign in, channels, presence, live tail', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run deploy/install-deps.sh test`);
  }
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s', '--web-root', WEB_ROOT,
    '--config', configFile(t, { apps: [APP] })],
  { env: { LUBDUB_ADMIN_TOKEN: ADMIN_TOKEN } });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic',
      '--disable-background-networking', '--no-first-run',
      '--disable-component-update', '--disable-sync'],
  });
  t.after(async () => {
    await browser.close();
    const exit = await hub.stop();
    assert.equal(exit.code, 0, hub.stderr.slice(-2000));
  });

  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  const seen = [];       // every body and frame the page received
  const urls = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('request', (r) => urls.push(r.url()));
  page.on('response', async (r) => {
    try { seen.push(await r.text()); } catch (_) { /* redirects, aborted */ }
  });
  page.on('websocket', (ws) => {
    urls.push(ws.url());
    ws.on('framereceived', (f) => seen.push(String(f.payload)));
  });
  await page.goto(hub.url('/console'));

  // A wrong token is refused and nothing is shown.
  await page.fill('#token', 'not-the-admin-token-000');
  await page.click('#login-button');
  await page.locator('#login-error', { hasText: 'refused' }).waitFor(WAIT);
  assert.equal(await page.locator('#app').isHidden(), true);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('lubdub.adminToken')), null);

  // The right one signs in and stays in this tab's sessionStorage.
  await page.fill('#token', ADMIN_TOKEN);
  await page.click('#login-button');
  await page.waitForFunction(() => document.getElementById('state').dataset.state === 'signed-in',
    null, WAIT);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('lubdub.adminToken')), ADMIN_TOKEN);
  assert.match(await page.locator('#app-select').textContent(), /app-id/);

  // A pusher-js client joins a presence channel and a public one.
  const sdkApp = { id: APP.id, key: APP.key, secret: SECRET };
  const client = pusherClient(t, hub, { app: sdkApp, presence: { user_id: 'alice', user_info: { name: 'Alice' } } });
  await connected(client);
  client.subscribe('presence-room');
  client.subscribe('news');
  const room = page.locator('tr[data-channel="presence-room"]');
  await room.waitFor(WAIT);
  await page.waitForFunction(() => {
    const r = document.querySelector('tr[data-channel="presence-room"]');
    return r && r.querySelector('.subs').textContent === '1' && r.querySelector('.users').textContent === '1';
  }, null, WAIT);
  await page.locator('tr[data-channel="news"] .subs', { hasText: '1' }).waitFor(WAIT);

  // The presence inspector.
  await room.locator('button.inspect').click();
  await page.locator('#members .member', { hasText: 'alice' }).waitFor(WAIT);

  // A live tail on "news" shows a published event.
  await page.fill('#tail-channel', 'news');
  await page.click('#tail-start');
  await page.waitForFunction(() => document.getElementById('tail-state').dataset.state === 'tailing',
    null, WAIT);
  const r = await publish({ url: hub.url(), appId: APP.id, key: APP.key, secret: SECRET },
    'news', 'breaking', JSON.stringify({ headline: 'hello from the e2e test' }));
  assert.equal(r.status, 200, r.body);
  await page.locator('#tail .line.event', { hasText: 'hello from the e2e test' }).waitFor(WAIT);
  await page.screenshot({ path: path.join(ARTIFACTS, 'console.png'), fullPage: true });

  // A second user shows in the count while the page watches.
  const bob = pusherClient(t, hub, { app: sdkApp, presence: { user_id: 'bob' } });
  await connected(bob);
  bob.subscribe('presence-room');
  await page.locator('#members .member', { hasText: 'bob' }).waitFor(WAIT);
  await page.locator('tr[data-channel="presence-room"] .users', { hasText: '2' }).waitFor(WAIT);

  client.disconnect();
  bob.disconnect();
  await page.click('#tail-stop');
  await waitFor(async () => (await hub.stats()).totals.sessions === 0, 'clients gone');

  // Never the secret, never the token in a URL (nor in the hub's logs).
  await waitFor(() => seen.length > 5, 'responses captured');
  assert.ok(!seen.some((s) => s.includes(SECRET)), 'the app secret reached the console');
  assert.ok(!urls.some((u) => u.includes(ADMIN_TOKEN)), 'the admin token in a URL');
  assert.ok(!hub.stderr.includes(ADMIN_TOKEN) && !hub.stdout.includes(ADMIN_TOKEN));
  assert.deepEqual(errors, []);
});
