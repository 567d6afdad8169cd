'use strict';
// docs/CLIENTS.md as a user runs it: every snippet there that is not a
// browser page (those are clients_doc_browser.test.js's) runs here, read
// from the doc by lib/docsnippets.js, with only the host, port and app
// credentials replaced by this test's hub, with and without TLS:
//   - pusher-js in node subscribes and prints the event published to it;
//   - Laravel Echo (resources/js/echo.js) with each of its .env files, for
//     both broadcasters: the .env's VITE_ lines become import.meta.env as
//     Vite makes them, window is node's global, and the event is published
//     the way Laravel's broadcaster does (App\Events\OrderShipped) to the
//     host, port and scheme config/broadcasting.php reads from the same
//     .env; the reverb hub runs with the doc's app object as its config;
//   - the node server SDK and curl (bash and openssl) publish, and a
//     subscriber of the test's receives it.
// A snippet is counted as run only once it was proven to work; the last
// test fails when a snippet of the doc was not run, so the doc cannot gain
// one nobody ran. The PHP and Python snippets are marked untested in the
// doc (their registries are out of reach); the Python one is compiled.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const PusherServer = require('pusher');
const { startHub, configFile } = require('./lib/hub');
const { RawClient, publish } = require('./lib/clients');
const {
  DOC_APP, load, fill, parseDotenv, viteEnv, run, testCert, waitOccupied,
  SNIPPET_TIMEOUT_MS,
} = require('./lib/docsnippets');

const APP = DOC_APP;
const { blocks, snippets } = load();
const ran = new Set();

function snippet(name) {
  const s = snippets.get(name);
  assert.ok(s, `docs/CLIENTS.md has no snippet ${name}`);
  return s;
}

let cert;
test.before(() => { cert = testCert(); });

// A hub with APP (or the config file args name), with TLS or not; ca: the
// certificate its clients trust (undefined without TLS).
async function hubFor(t, tls, args = null) {
  const hub = await startHub([...(tls ? ['--tls-cert', cert.cert, '--tls-key', cert.key] : []),
    ...(args || [])], args ? { t } : { t, apps: [APP] });
  hub.ca = tls ? cert.ca : undefined;
  hub.tls = tls;
  return hub;
}

// What a snippet's subprocess needs to trust the TLS hub: node's and
// curl's own ways to add a CA, nothing in the snippet.
function trustEnv(hub) {
  return hub.tls ? { NODE_EXTRA_CA_CERTS: cert.cert, CURL_CA_BUNDLE: cert.cert } : {};
}

// Wait until the snippet subscribed to channel, failing at once if it
// exited.
async function occupied(hub, proc, channel) {
  let exited = null;
  proc.exit.then((e) => { exited = e; });
  await waitOccupied(hub, APP, channel,
    () => (exited ? `the snippet exited ${JSON.stringify(exited)}: ${proc.output()}` : null));
}

// A subscriber of the test's on channel (for the publishing snippets).
async function subscriber(hub, channel) {
  const scheme = hub.tls ? 'wss' : 'ws';
  const url = `${scheme}://${hub.host}:${hub.port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`;
  const c = new RawClient(url, { ca: hub.ca });
  await c.open();
  const r = await c.subscribed(channel);
  assert.equal(r.event, 'pusher_internal:subscription_succeeded');
  return c;
}

async function closeClient(c) {
  c.close();
  await c.whenClosed().catch(() => c.terminate());
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

for (const tls of [false, true]) {
  const name = tls ? 'pusher-js-node-tls' : 'pusher-js-node';
  test(`${name}: subscribes and gets the event published to it`, async (t) => {
    const hub = await hubFor(t, tls);
    const s = snippet(name);
    const proc = run(t, fill(s, { hub, tls, app: APP }), { env: trustEnv(hub) });
    await occupied(hub, proc, 'my-channel');
    const message = `hello ${name} ${process.pid}`;
    await publish(hub, { name: 'my-event', channel: 'my-channel', data: { message } },
      { app: APP, ca: hub.ca, expect: 200 });
    await proc.waitOutput(new RegExp(`^my-event .*${escapeRe(message)}`, 'm'), 'the event');
    await proc.kill();
    ran.add(name);
  });
}

// Echo with one .env: the Laravel app's front end (echo.js) and back end
// (config/broadcasting.php's reading of the .env, played by the node SDK).
const ECHO_RUNS = [
  ['echo-pusher', 'env-pusher', 'pusher', false],
  ['echo-pusher', 'env-pusher-tls', 'pusher', true],
  ['echo-reverb', 'env-reverb', 'reverb', false],
  ['echo-reverb', 'env-reverb-tls', 'reverb', true],
];
for (const [echoName, envName, broadcaster, tls] of ECHO_RUNS) {
  test(`${echoName} with ${envName}: Echo gets App\\Events\\OrderShipped`, async (t) => {
    // The reverb hub runs with the doc's app object as its config file.
    let args = null;
    if (broadcaster === 'reverb') {
      const appObject = JSON.parse(fill(snippet('lubdub-app-reverb'), { hub: { host: '', port: 0 },
        tls, app: APP, noHub: true }));
      args = ['--config', configFile(t, appObject)];
    }
    const hub = await hubFor(t, tls, args);
    const env = parseDotenv(fill(snippet(envName), { hub, tls, app: APP }));
    assert.equal(env.BROADCAST_CONNECTION, broadcaster);
    // Where a browser and Vite put them: window is the global object, and
    // import.meta.env holds the .env's VITE_ lines (Vite replaces it at
    // build time).
    const prelude = 'globalThis.window = globalThis;\n' +
      `import.meta.env = ${JSON.stringify(viteEnv(env))};\n`;
    const proc = run(t, prelude + snippet(echoName).code, { ext: 'mjs', env: trustEnv(hub) });
    await occupied(hub, proc, 'orders');

    // Laravel's side, as config/broadcasting.php builds it from the .env.
    const P = broadcaster === 'pusher' ? 'PUSHER_' : 'REVERB_';
    const scheme = env[`${P}SCHEME`];
    const laravel = new PusherServer({
      appId: env[`${P}APP_ID`], key: env[`${P}APP_KEY`], secret: env[`${P}APP_SECRET`],
      host: env[`${P}HOST`], port: env[`${P}PORT`], scheme, useTLS: scheme === 'https',
      agent: scheme === 'https' ? new https.Agent({ ca: hub.ca }) : undefined,
    });
    const id = `${envName}-${process.pid}`;
    const res = await laravel.trigger('orders', 'App\\Events\\OrderShipped', { order: { id } });
    assert.equal(res.status, 200);
    await proc.waitOutput(new RegExp(`^OrderShipped .*${escapeRe(id)}`, 'm'), 'OrderShipped');
    await proc.kill();
    ran.add(echoName).add(envName);
    if (broadcaster === 'reverb') ran.add('lubdub-app-reverb');
  });
}

for (const tls of [false, true]) {
  const name = tls ? 'pusher-node-tls' : 'pusher-node';
  test(`${name}: publishes, and a subscriber gets it`, async (t) => {
    const hub = await hubFor(t, tls);
    const sub = await subscriber(hub, 'my-channel');
    const proc = run(t, fill(snippet(name), { hub, tls, app: APP }), { env: trustEnv(hub) });
    const m = await sub.next((x) => x.event === 'my-event' && x.channel === 'my-channel',
      'my-event from the snippet', SNIPPET_TIMEOUT_MS);
    assert.deepEqual(JSON.parse(m.data), { message: 'hello' });
    const exit = await proc.exit;
    assert.equal(exit.code, 0, proc.output());
    assert.match(proc.stdout(), /^published 200$/m);
    await closeClient(sub);
    ran.add(name);
  });
}

for (const tls of [false, true]) {
  const envName = tls ? 'curl-env-tls' : 'curl-env';
  test(`${envName} then curl-publish: curl publishes, and a subscriber gets it`, async (t) => {
    const hub = await hubFor(t, tls);
    const sub = await subscriber(hub, 'my-channel');
    const script = `${fill(snippet(envName), { hub, tls, app: APP })}\n${snippet('curl-publish').code}`;
    const proc = run(t, script, { ext: 'sh', interpreter: 'bash', env: trustEnv(hub) });
    const m = await sub.next((x) => x.event === 'my-event' && x.channel === 'my-channel',
      'my-event from curl', SNIPPET_TIMEOUT_MS);
    assert.deepEqual(JSON.parse(m.data), { message: 'hello' });
    const exit = await proc.exit;
    assert.equal(exit.code, 0, proc.output());
    assert.equal(proc.stdout().trim(), '{}');
    await closeClient(sub);
    ran.add(envName).add('curl-publish');
  });
}

test('the untested blocks are the PHP and Python ones, and the Python one compiles', (t) => {
  const untested = blocks.filter((b) => b.marker.kind === 'untested');
  assert.deepEqual(untested.map((b) => b.lang).sort(), ['php', 'python']);
  const py = untested.find((b) => b.lang === 'python');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-clients-py-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'snippet.py'), py.code);
  execFileSync('python3', ['-m', 'py_compile', path.join(dir, 'snippet.py')], { stdio: 'pipe' });
});

// Last: the doc holds no snippet that no test above ran (the browser pages
// are clients_doc_browser.test.js's, which checks its own).
test('every snippet of docs/CLIENTS.md but the browser pages ran', () => {
  const want = [...snippets.values()].filter((s) => s.lang !== 'html').map((s) => s.name).sort();
  assert.deepEqual([...ran].sort(), want);
});
