'use strict';
// Compression in a browser (issue 34): Debian's Chromium, headless, driven
// by playwright-core as tests/e2e/browser.test.js drives it. Chromium's
// WebSocket offers permessage-deflate on every upgrade, so the demo page
// (served by the hub from web/) and pusher-js loaded into a page negotiate
// it with nothing changed in either: the native socket's .extensions
// names the extension with both no-context-takeover parameters, the 1 KiB
// corpus event published through the HTTP API arrives byte-exact (the
// same text a plain ws client gets), and what the pages send (Chromium
// compresses every message it sends) is inflated by the hub. An init
// script wraps the page's WebSocket so the test sees every native socket
// and every text it received, whoever opened it.
// Registered with the e2e label and the chromium lock (tests/e2e's rule:
// one browser at a time, never under a sanitizer).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { startHub, waitFor, ROOT } = require('./lib/hub');
const { corpus1k, publishEvent, textClient, compression } = require('./lib/pmd');

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';
const WAIT = { timeout: 20000 };
const CORPUS = corpus1k();

function assertDeflate(ext, who) {
  assert.match(ext, /^permessage-deflate\b/, `${who}: extensions '${ext}'`);
  assert.match(ext, /server_no_context_takeover/, who);
  assert.match(ext, /client_no_context_takeover/, who);
}

// In every page, before its scripts: each native WebSocket in __ws, each
// text any of them received in __in.
function recordSockets() {
  const Native = window.WebSocket;
  window.__ws = [];
  window.__in = [];
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      window.__ws.push(this);
      this.addEventListener('message', (e) => {
        if (typeof e.data === 'string') window.__in.push(e.data);
      });
    }
  };
}

// The first text a page's sockets received that includes needle.
function received(page, needle) {
  return page.waitForFunction((n) => window.__in.find((x) => x.includes(n)), needle, WAIT)
    .then((h) => h.jsonValue());
}

// A page from another origin serving pusher-js's browser bundle, as an
// app would load it; resolves with its server.
async function pusherPageServer(t, hub) {
  const bundle = path.join(__dirname, 'node_modules/pusher-js/dist/web/pusher.min.js');
  const html = `<!doctype html><meta charset="utf-8"><title>pusher-js</title>
<script src="/pusher.min.js"></script>
<script>
  window.got = [];
  const p = new Pusher('app-key', { wsHost: '127.0.0.1', wsPort: ${hub.port},
    forceTLS: false, enabledTransports: ['ws'], cluster: 'local', disableStats: true });
  const ch = p.subscribe('news');
  ch.bind(${JSON.stringify(CORPUS.event)}, (d) => window.got.push(d));
  window.pusher = p; window.channel = ch;
</script>`;
  const bodies = {
    '/pusher.min.js': ['text/javascript', fs.readFileSync(bundle)],
    '/': ['text/html', html],
  };
  const server = http.createServer((req, res) => {
    const [type, body] = bodies[req.url] || bodies['/'];
    res.writeHead(200, { 'content-type': type });
    res.end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    server.closeAllConnections();
    return new Promise((r) => server.close(r));
  });
  return server;
}

test('Chromium: the demo page and pusher-js negotiate permessage-deflate and get the corpus byte-exact', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run deploy/install-deps.sh test`);
  }
  // The npm packages are pinned in tests/integration (package.json).
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
  // Closed before the hub stops (the hub's t.after comes later).
  t.after(() => browser.close());
  const hub = await startHub(['--compression', 'on', '--dev-auth-endpoint',
    '--web-root', path.join(ROOT, 'web')], { t, loops: 2 });
  const errors = [];
  const open = async (ctx, url) => {
    const page = await ctx.newPage();
    page.on('pageerror', (e) => errors.push(`${url}: ${e.message}`));
    await page.goto(url);
    return page;
  };
  const ctxA = await browser.newContext();
  const ctxB = await browser.newContext();
  for (const ctx of [ctxA, ctxB]) await ctx.addInitScript(recordSockets);

  // The reference: a plain ws client on the demo's public channel.
  const ref = await textClient(t, hub, { perMessageDeflate: false });
  assert.equal((await ref.subscribed('news')).event, 'pusher_internal:subscription_succeeded');
  const c0 = await compression(hub);

  // Two demo pages join the lobby and see each other.
  const alice = await open(ctxA, hub.url('/?name=Alice'));
  const bob = await open(ctxB, hub.url('/?name=Bob'));
  for (const page of [alice, bob]) {
    await page.waitForFunction(() => window.lubdubDemo && window.lubdubDemo.conn.state === 'connected' &&
      document.getElementById('state').dataset.state === 'connected', null, WAIT);
    assertDeflate(await page.evaluate(() => window.lubdubDemo.conn.ws.extensions), 'demo page');
  }
  await alice.locator('#members .member-name', { hasText: 'Bob' }).waitFor(WAIT);
  const c1 = await compression(hub);
  assert.equal(c1.compression_sessions - c0.compression_sessions, 2, 'both pages negotiated');

  // The corpus through the HTTP API: in the page as the ws client got it.
  await publishEvent(hub, 'news', CORPUS.event, CORPUS.data);
  const [want] = await ref.waitEvents('news', 1);
  assert.equal(JSON.parse(want).data, CORPUS.data);
  for (const page of [alice, bob]) {
    assert.equal(await received(page, '"App\\\\Events\\\\OrderShipped"'), want);
    await page.locator('#news .news-item .name', { hasText: 'OrderShipped' }).first().waitFor(WAIT);
  }
  assert.ok((await compression(hub)).compressed_frames > c1.compressed_frames, 'the corpus went compressed');

  // A chat line (a client event Chromium sends compressed) reaches Bob.
  const line = `compressed hello ${Date.now()}`;
  await alice.fill('#chat-input', line);
  await alice.press('#chat-input', 'Enter');
  await bob.locator('#chat .chat-line .text', { hasText: line }).waitFor(WAIT);
  await waitFor(async () => (await compression(hub)).inflated_messages > c1.inflated_messages,
    'the hub to inflate what the pages sent');

  // pusher-js's browser bundle on a page of another origin.
  const server = await pusherPageServer(t, hub);
  const pj = await open(ctxB, `http://127.0.0.1:${server.address().port}/`);
  await pj.waitForFunction(() => window.pusher.connection.state === 'connected' &&
    window.channel.subscribed, null, WAIT);
  const exts = await pj.evaluate(() => window.__ws.map((w) => w.extensions));
  assert.equal(exts.length, 1, JSON.stringify(exts));
  assertDeflate(exts[0], 'pusher-js');
  const data = CORPUS.data.replace('48213', '48299');
  await publishEvent(hub, 'news', CORPUS.event, data);
  await pj.waitForFunction(() => window.got.length === 1, null, WAIT);
  assert.deepEqual(await pj.evaluate(() => window.got[0]), JSON.parse(data));
  const [, want2] = await ref.waitEvents('news', 2);
  assert.equal(await received(pj, '48299'), want2);

  await browser.close();
  assert.deepEqual(errors, []);
});
