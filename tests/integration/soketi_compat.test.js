'use strict';
// soketi's configuration runs lubdub as it is (issue 36, item 7;
// docs/MIGRATING.md): a hub started with nothing but soketi's
// SOKETI_DEFAULT_APP_ID/KEY/SECRET and SOKETI_PORT serves that app on that
// port (pusher-js connects with the key, a REST publish signed with the
// secret reaches it); a soketi config.json with two apps serves both, each
// under its own secret; a SOKETI_* variable that conflicts with its
// LUBDUB_* one, and one lubdub does not support, are each warned about
// once, and not again on a SIGHUP; the warnings at start are log lines in
// the configured format (one JSON object with --log-format json).
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor, configFile } = require('./lib/hub');
const { pusherClient, connected, publish } = require('./lib/clients');

function count(text, needle) {
  return text.split(needle).length - 1;
}

// Subscribe a pusher-js client of app to channel; resolves, once
// subscribed, with { got }: a promise of the data of its first 'news'
// event (wrapped, or awaiting this would wait for the event).
async function subscribed(t, hub, app, channel) {
  const client = pusherClient(t, hub, { app });
  await connected(client);
  const ch = client.subscribe(channel);
  await new Promise((resolve) => ch.bind('pusher:subscription_succeeded', resolve));
  return { got: new Promise((resolve) => ch.bind('news', resolve)) };
}

test('SOKETI_DEFAULT_APP_* and SOKETI_PORT alone: the app is served on that port', async (t) => {
  const app = { id: 'soketi-app', key: 'soketi-key', secret: 'soketi-secret-0123456789' };
  // exactArgs: no --port, --bind or --log-level flag; only the
  // environment. SOKETI_PORT=0 picks a free port (lubdub's default is
  // 6001, so a hub on another port read it).
  const hub = await startHub([], {
    t, exactArgs: true,
    env: {
      SOKETI_DEFAULT_APP_ID: app.id, SOKETI_DEFAULT_APP_KEY: app.key,
      SOKETI_DEFAULT_APP_SECRET: app.secret, SOKETI_PORT: '0',
    },
  });
  assert.notEqual(hub.port, 6001);
  assert.ok(hub.port > 0);
  const { got } = await subscribed(t, hub, app, 'news');
  await publish(hub, { name: 'news', channel: 'news', data: { n: 1 } }, { app, expect: 200 });
  assert.deepEqual(await got, { n: 1 });
  // lubdub's default secret is not this app's.
  await publish(hub, { name: 'news', channel: 'news', data: '{}' },
    { app, secret: 'app-secret', expect: 401 });
  const stats = await hub.stats();
  assert.ok(stats.apps[app.id], JSON.stringify(Object.keys(stats.apps)));
  assert.equal(count(hub.stderr, 'lubdub: warning:'), 0, hub.stderr);
});

test('a soketi config.json with two apps serves both', async (t) => {
  const apps = [
    { id: 1001, key: 'key-one', secret: 'secret-one-0123456789' },
    { id: 'app-two', key: 'key-two', secret: 'secret-two-0123456789' },
  ];
  const file = configFile(t, {
    debug: false,
    'appManager.array.apps': apps.map((a, i) => ({
      ...a, enableClientMessages: i === 0, maxConnections: -1,
    })),
    eventLimits: { maxNameLength: 100 },
    cors: { credentials: true },
  });
  const hub = await startHub(['--config', file], { t });
  for (const a of apps) {
    const app = { ...a, id: String(a.id) };
    const { got } = await subscribed(t, hub, app, `news-${app.key}`);
    await publish(hub, { name: 'news', channel: `news-${app.key}`, data: { app: app.id } },
      { app, expect: 200 });
    assert.deepEqual(await got, { app: app.id });
  }
  // Each app under its own secret only.
  await publish(hub, { name: 'news', channel: 'x', data: '{}' },
    { app: { ...apps[1], id: 'app-two' }, secret: apps[0].secret, expect: 401 });
  // These two apps only (lubdub's default app is not among them).
  assert.deepEqual(Object.keys((await hub.stats()).apps).sort(), ['1001', 'app-two']);
  assert.equal(count(hub.stderr, '"cors.credentials" is not supported by lubdub'), 1, hub.stderr);
  assert.equal(count(hub.stderr, 'is not supported by lubdub'), 1, hub.stderr);
  // A log line (config: ...), not a stderr line of its own.
  assert.equal(count(hub.stderr, 'lubdub: warning:'), 0, hub.stderr);
});

test('with --log-format json the soketi warnings at start are JSON log lines', async (t) => {
  const file = configFile(t, {
    debug: false,
    'appManager.array.apps': [{ id: 'a1', key: 'k1', secret: 'secret-a1-0123456789' }],
    cors: { credentials: true },
  });
  const hub = await startHub(['--config', file, '--log-format', 'json'], {
    t, env: { SOKETI_QUEUE_DRIVER: 'redis' },
  });
  await waitFor(() => /listening on/.test(hub.stderr), 'the listening line');
  const lines = hub.stderr.split('\n').filter((l) => l !== '');
  const entries = lines.map((l) => {
    let e;
    assert.doesNotThrow(() => { e = JSON.parse(l); }, `not JSON: ${JSON.stringify(l)}`);
    return e;
  });
  const warns = entries.filter((e) => e.level === 'warn' && /is not supported by lubdub/.test(e.msg));
  assert.equal(warns.length, 2, hub.stderr);
  assert.ok(warns.some((e) => /"cors\.credentials" is not supported/.test(e.msg)), hub.stderr);
  assert.ok(warns.some((e) => /^config: SOKETI_QUEUE_DRIVER is not supported/.test(e.msg)), hub.stderr);
});

test('a conflict with LUBDUB_* and an unmapped SOKETI_* name are warned once', async (t) => {
  const file = configFile(t, { apps: [{ id: 'a1', key: 'k1', secret: 'secret-a1-0123456789' }] });
  const hub = await startHub(['--config', file], {
    t,
    env: {
      SOKETI_DEBUG: 'true', LUBDUB_LOG_LEVEL: 'warn',
      SOKETI_QUEUE_DRIVER: 'redis',
    },
  });
  const conflict = 'SOKETI_DEBUG and LUBDUB_LOG_LEVEL are both set, to different values; LUBDUB_LOG_LEVEL wins';
  const unmapped = 'SOKETI_QUEUE_DRIVER is not supported by lubdub';
  assert.equal(count(hub.stderr, conflict), 1, hub.stderr);
  assert.equal(count(hub.stderr, unmapped), 1, hub.stderr);
  // A SIGHUP reads the environment again, and says nothing more of it.
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => /apps: reloaded/.test(hub.stderr), 'the reload line');
  assert.equal(count(hub.stderr, conflict), 1, hub.stderr);
  assert.equal(count(hub.stderr, unmapped), 1, hub.stderr);
  // The value is never shown.
  assert.doesNotMatch(hub.stderr, /SOKETI_DEBUG=true/);
});
