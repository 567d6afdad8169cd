'use strict';
// The resume helper in a browser, as docs/RECOVERY.md tells an app to load
// it: Debian's Chromium, headless (playwright-core, as
// tests/e2e/browser.test.js drives it), an app page on another origin with
// pusher-js's browser bundle and a module script that imports
// http://<hub>/lubdub-resume.js by its full URL (a cross-origin module
// import: it needs the hub's access-control-allow-origin) and calls
// resume(pusher) right after new Pusher(). The page connects, subscribes,
// sends its lubdub:resume and receives a published event once, and no
// lubdub: name reaches its pusher.bind_global. What holds whether or not
// the hub answers the resume (the replay itself is the recovery tests').
// Chromium and the app's origin: lib/browser.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub } = require('./lib/hub');
const { serverSdk } = require('./lib/clients');
const { launch, appServer } = require('./lib/browser');

const WAIT = { timeout: 20000 };

// The app's page, on an origin of its own.
function appPage(t, hub) {
  return appServer(t, `<!doctype html><meta charset="utf-8"><title>app</title>
<script src="/pusher.min.js"></script>
<script type="module">
  import { resume } from '${hub.url('/lubdub-resume.js')}';
  const pusher = new Pusher('app-key', { wsHost: '127.0.0.1', wsPort: ${hub.port},
    forceTLS: false, enabledTransports: ['ws'], cluster: 'local', disableStats: true });
  window.helper = resume(pusher);
  window.got = [];
  window.global = [];
  pusher.bind_global((name) => window.global.push(name));
  const channel = pusher.subscribe('news');
  channel.bind('headline', (d) => window.got.push(d));
  window.pusher = pusher;
  window.channel = channel;
</script>`);
}

test('Chromium: an app on another origin imports /lubdub-resume.js and runs it with pusher-js', async (t) => {
  const browser = await launch(t);
  const hub = await startHub([], { t });
  const url = await appPage(t, hub);
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(url);
  await page.waitForFunction(() => window.channel && window.channel.subscribed, null, WAIT);
  assert.deepEqual(errors, []);

  await serverSdk(hub).trigger('news', 'headline', { n: 1 });
  await page.waitForFunction(() => window.got.length === 1, null, WAIT);
  const seen = await page.evaluate(() => ({
    got: window.got, global: window.global, stats: window.helper.stats(),
  }));
  assert.deepEqual(seen.got, [{ n: 1 }]);
  assert.equal(seen.stats.resumes, 1, 'lubdub:resume sent on connect');
  assert.equal(seen.stats.duplicates, 0);
  assert.ok(seen.global.includes('headline'));
  assert.deepEqual(seen.global.filter((n) => n.startsWith('lubdub:')), []);
});
