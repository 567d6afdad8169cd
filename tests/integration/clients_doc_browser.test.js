'use strict';
// docs/CLIENTS.md's browser pages in headless Chromium (lib/browser.js),
// as written in the doc with only the host, port and app key replaced
// (lib/docsnippets.js), against a hub without TLS and one with TLS (a
// throwaway certificate Chromium is told to accept): each page loads
// pusher-js from js.pusher.com, answered here by the same version from
// npm (the version in the URL must be the one installed, or the test
// fails), subscribes, and prints the event published to it on the
// console. Every other outside request is refused, so a page that needed
// the network would fail. Then the demo page: the pusher-js snippet it
// shows (web/demo.js) names the page's own host, port, TLS or not and app
// key, and works as shown, pasted into a page of another origin.
// A snippet counts as run once proven; the last test fails when a browser
// page of the doc was not run. Registered with the e2e label and the
// chromium lock (one browser at a time, never under a sanitizer).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { startHub, ROOT } = require('./lib/hub');
const { publish } = require('./lib/clients');
const { launch, appServer } = require('./lib/browser');
const {
  DOC_APP, load, fill, testCert, waitOccupied, SNIPPET_TIMEOUT_MS,
} = require('./lib/docsnippets');

const APP = DOC_APP;
const WAIT = { timeout: SNIPPET_TIMEOUT_MS };
const PUSHER_JS = require('pusher-js/package.json').version;
const BUNDLE = fs.readFileSync(require.resolve('pusher-js/dist/web/pusher.min.js'));
const CDN_RE = /<script src="(https:\/\/js\.pusher\.com\/([\d.]+)\/pusher\.min\.js)"><\/script>/;
const { snippets } = load();
const ran = new Set();

// One Chromium for the file (it is the slowest thing to start), closed
// after the last test; each test's pages live in a context of its own,
// closed before that test's hub stops.
let browser = null;
async function chromium() {
  if (!browser) browser = await launch({ after() {} });
  return browser;
}
test.after(() => browser && browser.close());

let cert;
test.before(() => { cert = testCert(); });

async function hubFor(t, tls) {
  const hub = await startHub([...(tls ? ['--tls-cert', cert.cert, '--tls-key', cert.key] : []),
    '--web-root', path.join(ROOT, 'web')], { t, apps: [APP] });
  hub.ca = tls ? cert.ca : undefined;
  hub.origin = `${tls ? 'https' : 'http'}://${hub.host}:${hub.port}`;
  return hub;
}

// A browser context that accepts the test's certificate, answers the
// pusher-js CDN URL with npm's bundle of the same version, lets requests
// to this machine through and refuses every other.
async function context(t) {
  const ctx = await (await chromium()).newContext({ ignoreHTTPSErrors: true });
  t.after(() => ctx.close());
  ctx.cdnHits = [];
  await ctx.route('**/*', (route) => {
    const url = route.request().url();
    const cdn = /^https:\/\/js\.pusher\.com\/([\d.]+)\/pusher\.min\.js$/.exec(url);
    if (cdn && cdn[1] === PUSHER_JS) {
      ctx.cdnHits.push(url);
      return route.fulfill({ status: 200, contentType: 'text/javascript', body: BUNDLE });
    }
    if (new URL(url).hostname === '127.0.0.1') return route.continue();
    return route.abort();
  });
  return ctx;
}

// Open html (a page of the doc's kind) from an app origin of its own;
// resolves with the page, whose console calls are collected in
// page.logged as arrays of their arguments' values.
async function openPage(t, ctx, html) {
  const m = CDN_RE.exec(html);
  assert.ok(m, `the page loads pusher-js from js.pusher.com:\n${html}`);
  assert.equal(m[2], PUSHER_JS, 'the pusher-js version the page names is the one the tests install');
  const page = await ctx.newPage();
  page.logged = [];
  page.errors = [];
  page.on('console', (msg) => {
    Promise.all(msg.args().map((a) => a.jsonValue().catch(() => undefined)))
      .then((args) => page.logged.push(args));
  });
  page.on('pageerror', (e) => page.errors.push(e.message));
  await page.goto(await appServer(t, html));
  return page;
}

// Publish event on channel, and wait for the page to log it (its name,
// then its data).
async function publishAndSee(hub, page, channel, event) {
  await waitOccupied(hub, APP, channel, () => (page.errors.length
    ? `page errors ${JSON.stringify(page.errors)}, console ${JSON.stringify(page.logged)}` : null));
  const data = { message: `hello ${channel} ${event} ${process.pid}` };
  await publish(hub, { name: event, channel, data }, { app: APP, ca: hub.ca, expect: 200 });
  const deadline = Date.now() + SNIPPET_TIMEOUT_MS;
  for (;;) {
    const got = page.logged.find((args) => args[0] === event);
    if (got) {
      assert.deepEqual(got[1], data);
      break;
    }
    if (Date.now() > deadline) {
      throw new Error(`the page never logged ${event}: console ${JSON.stringify(page.logged)}, ` +
        `errors ${JSON.stringify(page.errors)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.deepEqual(page.errors, []);
}

for (const tls of [false, true]) {
  const name = tls ? 'pusher-js-browser-tls' : 'pusher-js-browser';
  test(`${name}: the page subscribes and gets the event published to it`, async (t) => {
    const s = snippets.get(name);
    assert.ok(s, `docs/CLIENTS.md has no snippet ${name}`);
    const ctx = await context(t);
    const hub = await hubFor(t, tls);
    const page = await openPage(t, ctx, fill(s, { hub, tls, app: APP }));
    await publishAndSee(hub, page, 'my-channel', 'my-event');
    assert.equal(ctx.cdnHits.length, 1, 'pusher-js came from the (answered) CDN URL');
    await page.close();
    ran.add(name);
  });
}

for (const tls of [false, true]) {
  const over = tls ? 'https' : 'http';
  test(`the demo page over ${over} shows a pusher-js snippet for its hub, and it works`, async (t) => {
    const ctx = await context(t);
    const hub = await hubFor(t, tls);
    const demo = await ctx.newPage();
    await demo.goto(`${hub.origin}/?key=${APP.key}`);
    await demo.waitForFunction(() => document.getElementById('client-snippet').textContent !== '',
      null, WAIT);
    const shown = await demo.locator('#client-snippet').textContent(WAIT);
    assert.ok(shown.includes(`new Pusher('${APP.key}', {`), shown);
    assert.ok(shown.includes("wsHost: '127.0.0.1',"), shown);
    assert.ok(shown.includes(`${tls ? 'wssPort' : 'wsPort'}: ${hub.port},`), shown);
    assert.ok(shown.includes(`forceTLS: ${tls},`), shown);
    assert.ok(shown.includes("cluster: 'lubdub'"), shown);
    assert.ok(shown.includes("pusher.subscribe('news')"), shown);
    await demo.close();

    // Pasted as shown into a page of another origin.
    const page = await openPage(t, ctx, shown);
    await publishAndSee(hub, page, 'news', 'headline');
    await page.close();
  });
}

test('every browser page of docs/CLIENTS.md ran', () => {
  const want = [...snippets.values()].filter((s) => s.lang === 'html').map((s) => s.name).sort();
  assert.deepEqual([...ran].sort(), want);
});
