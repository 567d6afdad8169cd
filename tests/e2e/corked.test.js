'use strict';
// The corked write path in Chromium: a page's native WebSocket receives a
// burst of small frames and frames of 64 KiB and more (8-byte length
// header), concatenated by the hub into single writes, intact.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { createRequire } = require('node:module');

const INTEGRATION = path.resolve(__dirname, '../integration');
const { waitFor } = require(path.join(INTEGRATION, 'lib/hub'));
const { payload, startBigEventHub, assertBatchesCorked } =
  require(path.join(INTEGRATION, 'lib/corked'));
const requireNpm = createRequire(path.join(INTEGRATION, 'package.json'));
const { chromium } = requireNpm('playwright-core');
const PusherServer = requireNpm('pusher');

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';

test('Chromium receives corked bursts and >= 64 KiB frames intact', async (t) => {
  // One loop: the one subscriber then shares the loop that serves the REST
  // batches, which is what makes their corking certain (lib/corked.js).
  const hub = await startBigEventHub(t, 1);
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic',
      '--disable-background-networking', '--no-first-run',
      '--disable-component-update', '--disable-sync'],
  });
  t.after(() => browser.close());
  const page = await browser.newPage();
  await page.goto(hub.url('/healthz'));
  await page.evaluate((url) => {
    window.got = [];
    window.batch = 0;
    window.subscribed = false;
    const ws = new WebSocket(url);
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.event === 'pusher:connection_established') {
        ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'cork' } }));
      } else if (m.event === 'pusher_internal:subscription_succeeded') {
        window.subscribed = true;
      } else if (m.event === 'blob') {
        window.got.push(JSON.parse(m.data).p);
      } else if (m.event === 'batch') {
        window.batch++;
      }
    };
  }, hub.wsUrl());
  await page.waitForFunction(() => window.subscribed, null, { timeout: 20000 });

  const server = new PusherServer({ appId: 'app-id', key: 'app-key', secret: 'app-secret',
    host: hub.host, port: hub.port, useTLS: false });
  const sizes = [];
  for (let i = 0; i < 30; i++) sizes.push(32);
  sizes.push(65536, 70000, 200000, 126, 65535);
  for (let i = 0; i < 30; i++) sizes.push(40);
  const sent = sizes.map((n, i) => payload(`m${i}`, n));
  const res = await Promise.all(sent.map((p) => server.trigger('cork', 'blob', { p })));
  assert.ok(res.every((r) => r.status === 200));
  await page.waitForFunction((n) => window.got.length >= n, sent.length, { timeout: 20000 });
  const got = await page.evaluate(() => window.got);
  assert.deepEqual([...got].sort(), [...sent].sort());
  const { frames, writes } = await assertBatchesCorked(hub, server, 'cork',
    () => page.evaluate(() => window.batch), 1);
  t.diagnostic(`batched phase: ${frames} frames in ${writes} writes`);
});
