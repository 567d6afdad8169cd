'use strict';
// SIGHUP reloads the apps from --config while clients stay connected
// (docs/OPERATIONS.md "Reloading apps"): an unchanged app's connections
// stay open and keep receiving, a removed app's are closed with 4001 and
// a disabled one's with 4003 (each after a pusher:error), a changed secret
// refuses the old signature and takes the new one at once, a broken file
// is refused with one line and the old apps keep being served, and more
// than 64 apps work. Two loops, so every reload crosses loops.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const { startHub, waitFor } = require('./lib/hub');
const {
  configFile, rawOnLoop, rawClient, serverSdk, RawClient, publish,
} = require('./lib/clients');

const app = (n, extra = {}) => ({ id: `id-${n}`, key: `key-${n}`, secret: `secret-${n}`, ...extra });
const creds = (a) => ({ secret: a.secret, key: a.key });

// Rewrite the config file and SIGHUP the hub; resolves once the hub has
// logged the reload's line (the n-th "apps: " or refusal line).
const RELOAD_LINE = /apps: |SIGHUP: configuration not reloaded/;
async function reload(hub, file, apps, raw) {
  const lines = () => hub.stderr.split('\n').filter((l) => RELOAD_LINE.test(l));
  const before = lines().length;
  fs.writeFileSync(file, raw !== undefined ? raw : JSON.stringify({ apps }));
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => lines().length > before, 'the reload line', 10000);
  return lines().pop();
}


test('reload: unchanged stay, removed 4001, disabled 4003, secrets, broken file, 150 apps', async (t) => {
  const keep = app(1);
  const gone = app(2);
  const off = app(3);
  const rotate = app(4);
  const many = Array.from({ length: 150 }, (_, i) => app(100 + i));
  const apps = [keep, gone, off, rotate, ...many];
  const file = configFile(t, { apps });
  const hub = await startHub(['--config', file], { t, loops: 2 });

  // One client per app of interest on each loop.
  const clients = {};
  for (const a of [keep, gone, off, rotate]) {
    clients[a.id] = [];
    for (const loop of [0, 1]) {
      const c = await rawOnLoop(t, hub, loop, a.key);
      await c.subscribed('news');
      clients[a.id].push(c);
    }
  }
  // An app past the old 64-app cap works end to end.
  const last = many[many.length - 1];
  const lc = await rawOnLoop(t, hub, 1, last.key);
  await lc.subscribed('news');
  assert.strictEqual((await publish(hub, { name: 'hello', channel: 'news', data: '149' }, { app: last })).status, 200);
  await lc.event('hello', 'news');

  // The reload: gone removed, off disabled, rotate with a new secret, a
  // new app added, the 150 unchanged.
  const rotated = { ...rotate, secret: 'secret-4-new' };
  const added = app(9);
  const line = await reload(hub, file, [keep, { ...off, enabled: false }, rotated, added, ...many]);
  assert.match(line, /1 added \(id-9\), 1 removed \(id-2\), 2 changed \(id-3, id-4\), 151 unchanged \(154 apps\)/);

  for (const c of clients[gone.id]) {
    const err = await c.event('pusher:error');
    assert.strictEqual(JSON.parse(JSON.stringify(err.data)).code, 4001);
    assert.strictEqual((await c.whenClosed()).code, 4001);
  }
  for (const c of clients[off.id]) {
    const err = await c.event('pusher:error');
    assert.strictEqual(err.data.code, 4003);
    assert.strictEqual((await c.whenClosed()).code, 4003);
  }
  // The unchanged app's clients are still open and keep receiving.
  assert.strictEqual((await publish(hub, { name: 'after', channel: 'news', data: 'x' }, { app: keep })).status, 200);
  for (const c of clients[keep.id]) {
    await c.event('after', 'news');
    assert.strictEqual(c.closed, null);
  }
  // The rotated app: its open clients stay, REST signed with the old
  // secret is refused and the new one accepted; a private subscription on
  // an open connection signed with the old secret is refused, with the new
  // one accepted.
  assert.strictEqual((await publish(hub, { name: 'old', channel: 'news', data: 'x' }, { app: rotate })).status, 401);
  assert.strictEqual((await publish(hub, { name: 'new', channel: 'news', data: 'x' }, { app: rotated })).status, 200);
  for (const c of clients[rotate.id]) {
    await c.event('new', 'news');
    assert.strictEqual(c.closed, null);
    const bad = await c.subscribed('private-a', creds(rotate));
    assert.strictEqual(bad.event, 'pusher:subscription_error');
    const good = await c.subscribed('private-b', creds(rotated));
    assert.strictEqual(good.event, 'pusher_internal:subscription_succeeded');
  }
  // The removed app is gone for REST and new connections; the new one
  // works.
  assert.strictEqual((await publish(hub, { name: 'x', channel: 'news', data: 'x' }, { app: gone })).status, 404);
  const ac = await rawOnLoop(t, hub, 0, added.key);
  await ac.subscribed('news');
  assert.strictEqual((await publish(hub, { name: 'hi', channel: 'news', data: 'x' }, { app: added })).status, 200);
  await ac.event('hi', 'news');
  // Its index is new, past those at start: cache channels keep its last
  // event too.
  await ac.subscribed('cache-score');
  await ac.event('pusher:cache_miss', 'cache-score');
  assert.strictEqual((await publish(hub, { name: 'goal', channel: 'cache-score', data: '1-0' },
    { app: added })).status, 200);
  const late = await rawOnLoop(t, hub, 1, added.key);
  await late.subscribed('cache-score');
  assert.strictEqual((await late.event('goal', 'cache-score')).data, '1-0');

  // A broken file: one error line, the old apps still served.
  const errLine = await reload(hub, file, null, '{"apps": [ {"id": "x", ');
  assert.match(errLine, /SIGHUP: configuration not reloaded, keeping the old apps and secrets: /);
  assert.strictEqual(errLine.split('\n').length, 1);
  const dupLine = await reload(hub, file, [keep, { ...app(5), key: keep.key }]);
  assert.match(dupLine, /not reloaded.*already used/);
  assert.strictEqual((await publish(hub, { name: 'still', channel: 'news', data: 'x' }, { app: added })).status, 200);
  await ac.event('still', 'news');
  for (const c of clients[keep.id]) assert.strictEqual(c.closed, null);

  // /stats lists the current apps, not the removed one.
  const s = await hub.stats();
  assert.ok(s.apps[keep.id] && s.apps[added.id] && !s.apps[gone.id]);
  assert.strictEqual(s.apps[keep.id].sessions, 2);
  // The SDK still works against a reloaded app.
  await serverSdk(hub, rotated).trigger('news', 'sdk', { ok: true });
  await clients[rotate.id][0].event('sdk', 'news');
});

test('reload without --config logs that there is nothing to reload', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => /apps: SIGHUP: started without --config/.test(hub.stderr),
    'the no-config line');
});

test('reloads in a row while clients connect and the backend publishes', async (t) => {
  const keep = app(1);
  const churn = app(2);
  const file = configFile(t, { apps: [keep, churn] });
  const hub = await startHub(['--config', file], { t, loops: 2 });
  const stay = [await rawOnLoop(t, hub, 0, keep.key), await rawOnLoop(t, hub, 1, keep.key)];
  for (const c of stay) await c.subscribed('news');

  // Background load, bounded: connections to the churning app opening
  // and closing, and publishes to the kept app, until the reloads end.
  let done = false;
  const load = (async () => {
    let n = 0;
    while (!done && n < 2000) {
      n++;
      const c = new RawClient(hub.wsUrl(churn.key));
      await Promise.race([c.open().catch(() => {}), c.whenClosed().catch(() => {})]);
      c.close();
      await publish(hub, { name: 'tick', channel: 'news', data: String(n) }, { app: keep });
    }
  })();
  // Twenty reloads: the churning app's secret changes, it goes and comes
  // back, other apps come and go.
  for (let i = 0; i < 20; i++) {
    const apps = [keep];
    if (i % 3 !== 1) apps.push({ ...churn, secret: `churn-${i}` });
    if (i % 2) apps.push(app(50 + i));
    const line = await reload(hub, file, apps);
    assert.match(line, /apps: reloaded from .*: \d+ added.*\(\d+ apps\)/);
  }
  done = true;
  await load;
  // The kept app's connections never noticed.
  assert.strictEqual((await publish(hub, { name: 'end', channel: 'news', data: 'x' }, { app: keep })).status, 200);
  for (const c of stay) {
    await c.event('end', 'news');
    assert.strictEqual(c.closed, null);
  }
  await waitFor(async () => (await hub.stats()).apps[keep.id].sessions === 2,
    'only the kept sessions left of app 1');
});

test('switching authorized connections on by reload applies to open connections', async (t) => {
  const a = app(1);
  const file = configFile(t, { apps: [a] });
  const hub = await startHub(['--config', file], { t, loops: 2 });
  const anon = await rawOnLoop(t, hub, 0, a.key);
  const authed = await rawOnLoop(t, hub, 1, a.key);
  assert.strictEqual((await authed.subscribed('private-x', creds(a))).event,
    'pusher_internal:subscription_succeeded');
  await reload(hub, file, [{ ...a, enable_user_authentication: true, user_authentication_timeout: '200ms' }]);
  // Open for longer than the timeout and never signed in: closed 4009.
  assert.strictEqual((await anon.whenClosed()).code, 4009);
  // Authorized: stays, and keeps receiving.
  assert.strictEqual((await publish(hub, { name: 'still', channel: 'private-x', data: 'x' }, { app: a })).status, 200);
  await authed.event('still', 'private-x');
  assert.strictEqual(authed.closed, null);
});

test('with --redis, an app added by a reload is carried between nodes', async (t) => {
  const { startRedis, numsub } = require('./lib/redis');
  const redis = await startRedis(t);
  const a = app(1);
  const added = app(7);
  const nodes = [];
  for (const id of ['r1', 'r2']) {
    const file = configFile(t, { apps: [a] });
    const hub = await startHub(['--config', file, '--redis', redis.url(), '--node-id', id],
      { t, loops: 2 });
    hub.file = file;
    nodes.push(hub);
  }
  await waitFor(async () => {
    for (const n of nodes) if ((await n.stats()).backplane.state !== 'up') return false;
    return true;
  }, 'both nodes up', 20000, 50);
  for (const n of nodes) await reload(n, n.file, [a, added]);
  // (With --redis socket ids carry a node tag: no loop placement.)
  const sub = await rawClient(t, nodes[0], added.key);
  await sub.subscribed('news');
  await waitFor(async () => (await numsub(redis, `lubdub:${added.id}:news`)) === 1,
    'node r1 subscribed in Redis for the new app', 15000, 30);
  assert.strictEqual((await publish(nodes[1], { name: 'across', channel: 'news', data: 'x' },
    { app: added })).status, 200);
  await sub.event('across', 'news');
});

test('apps with webhooks reload without touching them', async (t) => {
  const a = { ...app(1), webhooks: [{ url: 'http://127.0.0.1:9/hook', event_types: ['channel_occupied'] }] };
  const file = configFile(t, { apps: [a] });
  const hub = await startHub(['--config', file], { t, loops: 2 });
  const c = await rawOnLoop(t, hub, 0, a.key);
  assert.match(await reload(hub, file, [a]), /no change \(1 apps\)/);
  const b = app(2);
  assert.match(await reload(hub, file, [{ ...a, secret: 'rotated' }, b]),
    /1 added \(id-2\), 0 removed, 1 changed \(id-1\), 0 unchanged \(2 apps\)/);
  assert.strictEqual((await publish(hub, { name: 'x', channel: 'news', data: 'y' }, { app: b })).status, 200);
  assert.strictEqual(c.closed, null);
});
