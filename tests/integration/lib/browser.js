'use strict';
// lib/browser.js: what the integration tests that run Chromium share
// (compression_browser, resume_browser; tests/e2e drives it the same way):
//   - launch(t): Debian's Chromium, headless, through playwright-core
//     (pinned in tests/integration/package.json), closed when the test
//     ends; a clear error when it is not installed;
//   - appServer(t, html): an app's own origin, a node HTTP server of the
//     test's that serves html at every path but /pusher.min.js, which is
//     pusher-js's browser bundle, the way an app loads it; resolves with
//     the page's URL. Closed when the test ends.
// Tests that use them are registered with the e2e label and the chromium
// lock (tests/e2e's rule: one browser at a time, never under a sanitizer).
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';

async function launch(t) {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run deploy/install-deps.sh test`);
  }
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
  // Closed before the hub stops when the hub was started after it (the
  // hub's t.after comes later).
  t.after(() => browser.close());
  return browser;
}

async function appServer(t, html) {
  const bundle = path.join(__dirname, '../node_modules/pusher-js/dist/web/pusher.min.js');
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
  return `http://127.0.0.1:${server.address().port}/`;
}

module.exports = { launch, appServer };
