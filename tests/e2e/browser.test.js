'use strict';
// End to end: Debian's Chromium, headless, driven by playwright-core,
// against the real binary. Two people (two browser contexts) use the demo
// page; a third page watches the dashboard; a fourth loads the real
// pusher-js. Every wait is on a condition in the page or the hub. The
// steps run in order and share one hub and one browser to keep the load
// on a shared machine small.
//
// Screenshots land in tests/artifacts/ (gitignored): demo.png,
// demo-reconnecting.png, dashboard.png.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { createRequire } = require('node:module');

const INTEGRATION = path.resolve(__dirname, '../integration');
const { startHub, waitFor, ROOT } = require(path.join(INTEGRATION, 'lib/hub'));
// The npm packages are pinned once, in tests/integration.
const requireNpm = createRequire(path.join(INTEGRATION, 'package.json'));
const { chromium } = requireNpm('playwright-core');
const { publish } = require(path.join(ROOT, 'tools/publish.js'));

const CHROMIUM = process.env.LUBDUB_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'tests/artifacts');
const WEB_ROOT = path.join(ROOT, 'web');
// A short drain: the hub spreads its 4200 closes over the drain window,
// and the restart step waits for it.
const HUB_ARGS = ['--loops', '2', '--dev-auth-endpoint', '--drain-timeout',
                  '2s', '--web-root', WEB_ROOT];
const VIEWPORT = { width: 1366, height: 860 };
const WAIT = { timeout: 20000 };

async function publishTo(hub, channel, event, data) {
    const r = await publish({
        url: hub.url(), appId: 'app-id', key: 'app-key', secret: 'app-secret',
    }, channel, event, JSON.stringify(data));
    assert.equal(r.status, 200, r.body);
}

// A page that fails on any uncaught error in our scripts.
async function openPage(context, url, errors) {
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(`${url}: ${e.message}`));
    page.on('console', (m) => {
        if (m.type() === 'error' && !/WebSocket|ERR_CONNECTION_REFUSED|Failed to load resource/.test(m.text())) {
            errors.push(`${url}: console: ${m.text()}`);
        }
    });
    await page.goto(url);
    return page;
}

function connected(page) {
    return page.waitForFunction(() =>
        window.lubdubDemo && window.lubdubDemo.conn.state === 'connected' &&
        document.getElementById('state').dataset.state === 'connected',
    null, WAIT);
}

function seesMember(page, name) {
    return page.locator('#members .member-name', { hasText: name })
        .waitFor(WAIT);
}

describe('browser: demo page, dashboard and pusher-js', () => {
    let hub, browser, ctxA, ctxB, pageA, pageB, dash;
    const errors = [];

    before(async () => {
        if (!fs.existsSync(CHROMIUM)) {
            throw new Error(`${CHROMIUM} is missing: run deploy/install-deps.sh test`);
        }
        fs.mkdirSync(ARTIFACTS, { recursive: true });
        hub = await startHub(HUB_ARGS);
        // launch() gives every run a fresh temporary profile.
        browser = await chromium.launch({
            executablePath: CHROMIUM,
            headless: true,
            args: ['--no-sandbox', '--disable-gpu', '--disable-quic',
                   '--disable-background-networking', '--no-first-run',
                   '--disable-component-update', '--disable-sync'],
        });
        ctxA = await browser.newContext({ viewport: VIEWPORT });
        ctxB = await browser.newContext({ viewport: VIEWPORT });
    });

    after(async () => {
        if (browser) {
            await browser.close();
        }
        if (hub) {
            await hub.stop();
        }
    });

    it('two pages join the presence channel and see each other', async () => {
        pageA = await openPage(ctxA, hub.url('/?name=Alice'), errors);
        pageB = await openPage(ctxB, hub.url('/?name=Bob'), errors);
        await Promise.all([connected(pageA), connected(pageB)]);
        await Promise.all([seesMember(pageA, 'Bob'), seesMember(pageB, 'Alice')]);
        assert.equal(await pageA.locator('#members li').count(), 2);
        assert.match(await pageA.locator('#socket-id').textContent(),
                     /^\d+\.\d+$/);
        const stats = await hub.stats();
        assert.equal(stats.totals.sessions, 2);
    });

    it("A's chat line reaches B, and A shows it once", async () => {
        const line = `hello Bob, it is ${Date.now()}`;
        await pageA.fill('#chat-input', line);
        await pageA.press('#chat-input', 'Enter');
        const onB = pageB.locator('#chat .chat-line .text', { hasText: line });
        await onB.waitFor(WAIT);
        assert.equal(await pageB.locator('#chat .chat-line .who')
            .filter({ hasText: 'Alice' }).count(), 1);
        // B answers; the hub handled A's line before B could see it, so
        // any echo to A would be on A's wire before B's reply arrives.
        const reply = `hi Alice ${Date.now()}`;
        await pageB.fill('#chat-input', reply);
        await pageB.press('#chat-input', 'Enter');
        await pageA.locator('#chat .chat-line .text', { hasText: reply })
            .waitFor(WAIT);
        assert.equal(await pageA.getByText(line, { exact: true }).count(), 1);
        assert.equal(await pageB.getByText(line, { exact: true }).count(), 1);
        assert.equal(await pageB.getByText(reply, { exact: true }).count(), 1);
        assert.equal(await pageA.locator('#chat .chat-line.mine').count(), 1);
    });

    it('a REST publish on the public channel appears on both pages', async () => {
        const token = `launch-${Date.now()}`;
        await publishTo(hub, 'news', 'headline',
                        { text: 'lubdub is live', token });
        for (const page of [pageA, pageB]) {
            await page.locator('#news .news-item', { hasText: token })
                .waitFor(WAIT);
        }
        assert.equal(await pageA.locator('#news .news-item .name').first()
            .textContent(), 'headline');
        await pageA.screenshot({ path: path.join(ARTIFACTS, 'demo.png'),
                                 fullPage: true });
    });

    it("the dashboard's session count equals /stats", async () => {
        dash = await openPage(ctxA, hub.url('/dashboard'), errors);
        // Some traffic across a few polls, so the rate charts have
        // something to draw: after each poll, a publish and a chat line.
        for (let n = 1; n <= 6; n++) {
            await dash.waitForFunction((k) => window.lubdubDashboard &&
                window.lubdubDashboard.polls >= k, n, WAIT);
            await publishTo(hub, 'news', 'tick', { n });
            await pageB.fill('#chat-input', `tick ${n}`);
            await pageB.press('#chat-input', 'Enter');
        }
        await pageA.locator('#chat .chat-line .text', { hasText: 'tick 6' })
            .waitFor(WAIT);
        await dash.waitForFunction(() => window.lubdubDashboard.polls >= 8,
                                   null, WAIT);
        const stats = await hub.stats();
        await dash.waitForFunction((n) =>
            document.getElementById('sessions-total').textContent === n,
        String(stats.totals.sessions), WAIT);
        assert.equal(stats.totals.sessions, 2);
        const perLoop = stats.per_loop.map((l) => l.sessions).join(' · ');
        await dash.waitForFunction((t) =>
            document.getElementById('sessions-sub').textContent ===
                `${t} per loop`, perLoop, WAIT);
        assert.equal(await dash.locator('#loops-body tr').count(),
                     stats.loops);
        assert.equal(await dash.locator('#feed-state').textContent(), 'live');
        await dash.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'),
                                fullPage: true });
    });

    it('after a hub restart on the same port both pages reconnect by themselves',
       async () => {
        const port = hub.port;
        const before = await Promise.all([pageA, pageB].map((p) =>
            p.evaluate(() => window.lubdubDemo.conn.socketId)));
        await hub.stop('SIGTERM');
        // Both notice, and show the countdown to their next attempt.
        for (const page of [pageA, pageB]) {
            await page.waitForFunction(() => /Attempt \d+ in \d+\.\d s/.test(
                document.getElementById('retry-line').textContent),
            null, { ...WAIT, polling: 'raf' });
        }
        await pageA.screenshot({
            path: path.join(ARTIFACTS, 'demo-reconnecting.png'),
        });
        hub = await startHub([...HUB_ARGS, '--port', String(port)]);
        assert.equal(hub.port, port);
        await Promise.all([connected(pageA), connected(pageB)]);
        const afterIds = await Promise.all([pageA, pageB].map((p) =>
            p.evaluate(() => window.lubdubDemo.conn.socketId)));
        assert.notDeepEqual(afterIds, before);
        await Promise.all([seesMember(pageA, 'Bob'), seesMember(pageB, 'Alice')]);
        // Chat still works on the new connections.
        const line = `back again ${Date.now()}`;
        await pageB.fill('#chat-input', line);
        await pageB.press('#chat-input', 'Enter');
        await pageA.locator('#chat .chat-line .text', { hasText: line })
            .waitFor(WAIT);
        // The dashboard follows the new hub too.
        await dash.waitForFunction(() =>
            document.getElementById('sessions-total').textContent === '2' &&
            document.getElementById('feed-state').className.includes('connected'),
        null, WAIT);
        const stats = await hub.stats();
        assert.equal(stats.totals.sessions, 2);
    });

    it('pusher-js loaded into a page connects and receives an event', async () => {
        const bundle = path.join(INTEGRATION,
                                 'node_modules/pusher-js/dist/web/pusher.min.js');
        const html = `<!doctype html><meta charset="utf-8"><title>pusher-js</title>
<script src="/pusher.min.js"></script>
<script>
  window.got = [];
  const p = new Pusher('app-key', { wsHost: '127.0.0.1', wsPort: ${hub.port},
    forceTLS: false, enabledTransports: ['ws'], cluster: 'local' });
  const ch = p.subscribe('news');
  ch.bind('headline', (d) => window.got.push(d));
  window.pusher = p; window.channel = ch;
</script>`;
        // A page from another origin, as an app would load it.
        const server = http.createServer((req, res) => {
            if (req.url === '/pusher.min.js') {
                res.writeHead(200, { 'content-type': 'text/javascript' });
                fs.createReadStream(bundle).pipe(res);
            } else {
                res.writeHead(200, { 'content-type': 'text/html' });
                res.end(html);
            }
        });
        await new Promise((r) => server.listen(0, '127.0.0.1', r));
        try {
            const page = await openPage(ctxB,
                `http://127.0.0.1:${server.address().port}/`, errors);
            await page.waitForFunction(() =>
                window.pusher.connection.state === 'connected' &&
                window.channel.subscribed, null, WAIT);
            const token = `pusher-js-${Date.now()}`;
            await publishTo(hub, 'news', 'headline', { from: 'REST', token });
            await page.waitForFunction(() => window.got.length === 1, null,
                                       WAIT);
            assert.deepEqual(await page.evaluate(() => window.got[0]),
                             { from: 'REST', token });
            // The demo pages got it as well.
            await pageA.locator('#news .news-item', { hasText: token })
                .waitFor(WAIT);
            await page.close();
        } finally {
            server.closeAllConnections();
            await new Promise((r) => server.close(r));
        }
    });

    it('the page sends pusher:ping after activity_timeout of silence',
       async () => {
        // A second hub that advertises 1 s, so the silence is short.
        const quick = await startHub([...HUB_ARGS, '--loops', '1',
                                      '--activity-timeout', '1']);
        try {
            const page = await openPage(ctxA, quick.url('/?name=Quiet'),
                                        errors);
            await connected(page);
            assert.equal(await page.locator('#activity').textContent(), '1 s');
            await page.locator('#wire .note',
                               { hasText: 'sent pusher:ping after 1 s' })
                .first().waitFor(WAIT);
            await page.locator('#wire .in', { hasText: '"pusher:pong"' })
                .first().waitFor(WAIT);
            await waitFor(async () => (await quick.stats()).per_loop[0]
                .pusher_pings >= 1, 'the hub to answer a pusher:ping');
            // The pong kept the link: same session, still connected.
            assert.equal(await page.evaluate(() =>
                window.lubdubDemo.conn.connects), 1);
            // Backoff: 100 ms doubling to 5 s, times 0.8..1.2.
            const d = await page.evaluate(async () => {
                const { backoffDelay } = await import('/client.js');
                return [0, 1, 5, 6, 30].map((n) =>
                    [backoffDelay(n, () => 0), backoffDelay(n, () => 1)]);
            });
            assert.deepEqual(d, [[80, 120], [160, 240], [2560, 3840],
                                 [4000, 6000], [4000, 6000]]);
            await page.close();
        } finally {
            await quick.stop();
        }
        assert.deepEqual(errors, []);
    });
});
