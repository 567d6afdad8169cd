'use strict';
// lib/chromium.js: Debian's Chromium, headless, launched by playwright-core
// the one way the browser tests launch it (a fresh temporary profile per
// launch, nothing in the background that would reach the network). The
// browser is closed when the test t ends; launch it before starting the
// hub, so its t.after runs before the hub's (clients first).
const fs = require('node:fs');

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';

async function launchChromium(t) {
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
  t.after(() => browser.close());
  return browser;
}

module.exports = { CHROMIUM, launchChromium };
