'use strict';
// Operator surfaces: /metrics and /stats behind a bearer token and on their
// own port (--metrics-port, --metrics-token), and the operator console's
// API and live tail (--admin-token): refused without the token, the
// directory's counts and presence members, events and connection opens
// and closes tailed across loops, the per-watcher rate cap counted, and no
// app secret in anything the console answers.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { spawn } = require('node:child_process');
const WebSocket = require('ws');
const { startHub, request, waitFor, once, BINARY } = require('./lib/hub');
const {
  APP, serverSdk, pusherClient, connected, pusherOnLoop, loopOf,
  configFile,
} = require('./lib/clients');
const { freePort } = require('./lib/redis');

const METRICS_TOKEN = 'metrics-token-0123456789';
const ADMIN_TOKEN = 'admin-token-abcdefghijkl';
const SECRETS = [APP.secret, 'second-secret-value-xyz'];

const bearer = (tok) => ({ authorization: `Bearer ${tok}` });

// pusher-js channels bind() rather than emit.
function subscribed(channel) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${channel.name}: no subscription_succeeded`)), 10000);
    channel.bind('pusher:subscription_succeeded', () => { clearTimeout(timer); resolve(); });
  });
}

// The harness reads /stats (cleanup waits on it); point it at the token.
function statsWith(hub, url) {
  hub.stats = async () => JSON.parse((await request('GET', url, undefined, bearer(METRICS_TOKEN))).body);
}

function checkConfig(args) {
  return new Promise((resolve) => {
    const child = spawn(BINARY, ['--check-config', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.on('close', (code) => resolve({ code, err }));
  });
}

test('--metrics-token: /metrics and /stats need the bearer token', async (t) => {
  const hub = await startHub(['--metrics-token', METRICS_TOKEN], { t, loops: 2 });
  statsWith(hub, hub.url('/stats'));
  for (const p of ['/metrics', '/stats']) {
    const none = await request('GET', hub.url(p));
    assert.equal(none.status, 401, p);
    assert.match(none.headers['www-authenticate'], /^Bearer /);
    const wrong = await request('GET', hub.url(p), undefined, bearer(`${METRICS_TOKEN}x`));
    assert.equal(wrong.status, 401);
    const shorter = await request('GET', hub.url(p), undefined, bearer(METRICS_TOKEN.slice(0, -1)));
    assert.equal(shorter.status, 401);
    const ok = await request('GET', hub.url(p), undefined, bearer(METRICS_TOKEN));
    assert.equal(ok.status, 200, p);
  }
  assert.equal((await request('GET', hub.url('/healthz'))).status, 200);
});

test('--metrics-port: metrics move off the main port', async (t) => {
  const mport = await freePort();
  const hub = await startHub(['--metrics-port', String(mport),
    '--metrics-token', METRICS_TOKEN], { t, loops: 2 });
  const m = (p) => `http://127.0.0.1:${mport}${p}`;
  statsWith(hub, m('/stats'));
  for (const p of ['/metrics', '/stats']) {
    assert.equal((await request('GET', hub.url(p), undefined, bearer(METRICS_TOKEN))).status, 404,
      `main port ${p}`);
    const none = await request('GET', m(p));
    assert.equal(none.status, 401);
    assert.match(none.headers['www-authenticate'], /^Bearer realm=/);
    assert.equal((await request('GET', m(p), undefined, bearer(METRICS_TOKEN))).status, 200);
  }
  const metrics = await request('GET', m('/metrics'), undefined, bearer(METRICS_TOKEN));
  assert.match(metrics.body, /^lubdub_/m);
  assert.equal(JSON.parse((await request('GET', m('/stats'), undefined, bearer(METRICS_TOKEN))).body)
    .totals.sessions, 0);
  // Health checks on both ports; nothing else on the metrics port, whatever
  // the Host header says (lws picks vhosts by Host).
  assert.equal((await request('GET', hub.url('/healthz'))).status, 200);
  assert.equal((await request('GET', hub.url('/readyz'))).status, 200);
  assert.equal((await request('GET', m('/healthz'))).status, 200);
  assert.equal((await request('GET', m('/readyz'))).status, 200);
  assert.equal((await request('GET', m('/apps/app-id/channels'))).status, 404);
  assert.equal((await request('GET', m('/apps/app-id/channels'), undefined, { host: 'default' })).status, 404);
  assert.equal((await request('GET', hub.url('/metrics'), undefined,
    { host: 'metrics', ...bearer(METRICS_TOKEN) })).status, 404);
  assert.equal((await request('GET', m('/'))).status, 404);
  assert.equal((await request('POST', m('/apps/app-id/events'), '{}')).status, 404);
  // No WebSocket on the metrics port.
  const ws = new WebSocket(`ws://127.0.0.1:${mport}/app/app-key?protocol=7`);
  const [err] = await once(ws, 'error');
  assert.match(String(err.message), /404/);
  // The main port still works, and loop 0 (which also runs the metrics
  // vhost, and gets each wakeup once per vhost) still drains its inbox:
  // a publish reaches subscribers on both loops.
  const got = [];
  for (const loop of [0, 1]) {
    const c = await pusherOnLoop(t, hub, loop);
    const ch = c.subscribe('both');
    await subscribed(ch);
    ch.bind('hello', (d) => got.push([loop, d]));
  }
  await serverSdk(hub).trigger('both', 'hello', { x: 1 });
  await waitFor(() => got.length === 2, 'both loops got the publish');
});

test('--metrics-port with TLS: the main port stays https, the metrics port is plain http', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-ops-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost'], { stdio: 'ignore' });
  const mport = await freePort();
  const hub = await startHub(['--tls-cert', cert, '--tls-key', key, '--metrics-port', String(mport)],
    { t, loops: 2, drainTimeout: null });
  const get = (p) => new Promise((resolve, reject) => {
    https.get({ host: '127.0.0.1', port: hub.port, path: p, ca: fs.readFileSync(cert),
      servername: 'localhost' }, (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
  });
  assert.equal(await get('/healthz'), 200);
  assert.equal(await get('/metrics'), 404);
  const m = await request('GET', `http://127.0.0.1:${mport}/metrics`);
  assert.equal(m.status, 200);
  assert.match(m.body, /^lubdub_/m);
});

test('config: bad operator options are refused with one line', async () => {
  for (const [args, re] of [
    [['--admin-token', 'short'], /--admin-token: 5 characters, need 16 to 256/],
    [['--metrics-token', 'has space in it 0123'], /--metrics-token: only printable/],
    [['--metrics-bind', '127.0.0.1'], /--metrics-bind: needs --metrics-port/],
    [['--port', '7000', '--metrics-port', '7000'], /--metrics-port: 7000 is --port too/],
  ]) {
    const r = await checkConfig(args);
    assert.notEqual(r.code, 0, args.join(' '));
    assert.match(r.err, re);
    assert.equal(r.err.trim().split('\n').length, 1, r.err);
  }
  assert.equal((await checkConfig(['--admin-token', ADMIN_TOKEN, '--metrics-port', '9601',
    '--metrics-token', METRICS_TOKEN])).code, 0);
});

test('console: off without --admin-token', async (t) => {
  const hub = await startHub([], { t, loops: 2 });
  for (const p of ['/console', '/console/', '/console/console.js', '/console/api/apps']) {
    assert.equal((await request('GET', hub.url(p), undefined, bearer(ADMIN_TOKEN))).status, 404, p);
  }
  const ws = new WebSocket(`ws://127.0.0.1:${hub.port}/console/tail`, 'lubdub-console');
  const [err] = await once(ws, 'error');
  assert.match(String(err.message), /404/);
});

// Open a tail; resolves with { ws, msgs, next(pred) } once the hub is ready.
async function openTail(t, hub, req) {
  const ws = new WebSocket(`ws://127.0.0.1:${hub.port}/console/tail`, 'lubdub-console');
  t.after(() => ws.terminate());
  const msgs = [];
  ws.on('message', (d) => msgs.push(JSON.parse(String(d))));
  await once(ws, 'open');
  ws.send(JSON.stringify({ token: ADMIN_TOKEN, app: APP.id, ...req }));
  await waitFor(() => msgs.find((m) => m.type === 'ready'), 'tail ready');
  return {
    ws, msgs,
    next: (pred, what) => waitFor(() => msgs.find(pred), what),
  };
}

test('console: API, presence, tail, and never a secret', async (t) => {
  const apps = [
    { id: APP.id, key: APP.key, secret: SECRETS[0] },
    { id: 'second', key: 'second-key', secret: SECRETS[1] },
  ];
  const hub = await startHub(['--admin-token', ADMIN_TOKEN], { t, loops: 2, apps });
  const bodies = [];
  const get = async (p, headers = bearer(ADMIN_TOKEN)) => {
    const r = await request('GET', hub.url(p), undefined, headers);
    bodies.push(r.body);
    return r;
  };

  // Refused without the right token, with a challenge.
  for (const h of [{}, bearer('wrong-token-0123456789'), bearer(ADMIN_TOKEN.slice(1))]) {
    const r = await get('/console/api/apps', h);
    assert.equal(r.status, 401);
    assert.match(r.headers['www-authenticate'], /^Bearer /);
  }
  // The page itself holds no data.
  const page = await get('/console', {});
  assert.equal(page.status, 200);
  assert.match(page.body, /console\.js/);

  const appsBody = JSON.parse((await get('/console/api/apps')).body);
  assert.deepEqual(appsBody.apps.map((a) => a.id), [APP.id, 'second']);
  assert.deepEqual(Object.keys(appsBody.apps[0]).sort(), ['enabled', 'id', 'key', 'keys']);
  assert.deepEqual(appsBody.apps[0].keys, [APP.key]); // every pair's key, no secret
  assert.equal((await get('/console/api/channels?app=nope')).status, 404);
  assert.equal((await get(`/console/api/users?app=${APP.id}`)).status, 400);

  // A tail on events of "news-" (prefix) and on connections, opened before
  // the clients so it sees them connect.
  const events = await openTail(t, hub, { channel: 'news-', prefix: true, kinds: ['events'] });
  const conns = await openTail(t, hub, { kinds: ['connections'] });

  // Clients on both loops: a presence member and a public subscriber.
  const a = await pusherOnLoop(t, hub, 0, { presence: { user_id: 'alice', user_info: { name: 'A' } } });
  const b = await pusherOnLoop(t, hub, 1, { presence: { user_id: 'bob' } });
  for (const c of [a, b]) {
    await subscribed(c.subscribe('presence-room'));
  }
  await subscribed(b.subscribe('news-1'));

  const chans = await waitFor(async () => {
    const r = JSON.parse((await get(`/console/api/channels?app=${APP.id}`)).body);
    const room = r.channels.find((c) => c.name === 'presence-room');
    return room && room.subscription_count === 2 && r.channels.some((c) => c.name === 'news-1') && r;
  }, 'channels with counts');
  assert.deepEqual(chans.channels.find((c) => c.name === 'presence-room'),
    { name: 'presence-room', subscription_count: 2, user_count: 2 });
  assert.deepEqual(chans.channels.find((c) => c.name === 'news-1'),
    { name: 'news-1', subscription_count: 1 });
  // Per app: the second app has none of them.
  assert.deepEqual(JSON.parse((await get('/console/api/channels?app=second')).body).channels, []);
  const users = JSON.parse((await get(`/console/api/users?app=${APP.id}&channel=presence-room`)).body);
  assert.deepEqual(users.users.map((u) => u.id).sort(), ['alice', 'bob']);

  // Connection opens, from both loops.
  const opened = conns.msgs.filter((m) => m.type === 'connection' && m.state === 'open');
  await waitFor(() => conns.msgs.filter((m) => m.type === 'connection' && m.state === 'open').length >= 2,
    'two opens');
  assert.ok(opened.every((m) => typeof m.socket_id === 'string'));
  const loops = new Set(conns.msgs.filter((m) => m.state === 'open').map((m) => loopOf(m.socket_id)));
  assert.deepEqual([...loops].sort(), [0, 1]);

  // A REST publish lands in the events tail (whichever loop took it); a
  // publish outside the filter does not.
  const sdk = serverSdk(hub);
  await sdk.trigger('other', 'skip-me', { n: 0 });
  await sdk.trigger('news-1', 'breaking', { headline: 'hello console' });
  const ev = await events.next((m) => m.type === 'event', 'tailed event');
  assert.equal(ev.channel, 'news-1');
  const msg = JSON.parse(ev.message);
  assert.equal(msg.event, 'breaking');
  assert.deepEqual(JSON.parse(msg.data), { headline: 'hello console' });
  assert.ok(!events.msgs.some((m) => m.channel === 'other'));
  assert.ok(!conns.msgs.some((m) => m.type === 'event'));

  // A disconnect shows as a close.
  const bId = b.connection.socket_id;
  b.disconnect();
  await conns.next((m) => m.state === 'close' && m.socket_id === bId, 'close line');

  // The rate cap: at most `rate` lines a second, the rest counted.
  // One batch of 10 is published within one request, so within one
  // second however loaded the machine is: at most 2 lines, the rest drops.
  const capped = await openTail(t, hub, { channel: 'burst', kinds: ['events'], rate: 2 });
  const batch = Array.from({ length: 10 }, (_, i) => ({ channel: 'burst', name: 'e', data: { i } }));
  await sdk.triggerBatch(batch);
  const lines = () => capped.msgs.filter((m) => m.type === 'event').length;
  await waitFor(() => lines() >= 1, 'a burst line');
  await capped.next((m) => m.type === 'drops' && m.rate > 0, 'drops report');
  await waitFor(() => {
    const d = capped.msgs.filter((m) => m.type === 'drops').pop();
    return d.rate + lines() === 10 && d;
  }, 'every burst event either shown or counted');
  assert.ok(lines() <= 2, `${lines()} lines at rate 2`);

  // Bad requests on the tail are answered, a bad token closes 4401.
  events.ws.send(JSON.stringify({ token: ADMIN_TOKEN, app: 'nope' }));
  await events.next((m) => m.type === 'error' && /unknown app/.test(m.message), 'error');
  const bad = new WebSocket(`ws://127.0.0.1:${hub.port}/console/tail`, 'lubdub-console');
  await once(bad, 'open');
  bad.send(JSON.stringify({ token: 'wrong-token-0123456789', app: APP.id }));
  const [code] = await once(bad, 'close');
  assert.equal(code, 4401);

  // Nothing the console said holds a secret.
  const all = bodies.concat(...[events, conns, capped].map((x) => x.msgs.map((m) => JSON.stringify(m))));
  for (const s of SECRETS) {
    assert.ok(!all.some((text) => text.includes(s)), `secret ${s} in a console response`);
  }
  // `conns` stays open: the hub stops with a watcher registered (and the
  // ASan build checks that is clean).
  for (const x of [events, capped]) x.ws.close();
  await waitFor(async () => (await hub.stats()).totals.sessions <= 1, 'clients gone');
});
