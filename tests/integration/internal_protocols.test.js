'use strict';
// Nothing internal is reachable from outside. The hub's listeners are lws
// protocols of their own ("acceptor", "metrics-acceptor") on the serving
// vhosts, and lws 4.1.6 binds a WebSocket upgrade to any protocol of the
// vhost its Sec-WebSocket-Protocol names: before the fix such an upgrade
// got 101 on any path and became a socket no session counted, pinged,
// limited or drained. Raw sockets (node's net, lib/rawws.js) send the
// upgrades: both names on several paths, on the main port and the metrics
// port, with and without --max-connections 1, are refused with 400 and
// hold nothing; a normal session afterwards is counted, and the cap still
// holds. Other names: the session protocol's own is a normal session, an
// unknown one a 400 (lws closed those without a status).
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor } = require('./lib/hub');
const { RawWs, upgradeRequest } = require('./lib/rawws');
const { freePort } = require('./lib/redis');

const NAMES = ['acceptor', 'metrics-acceptor'];
const APP_PATH = '/app/app-key?protocol=7&client=js&version=8.4.0';
const PATHS = [APP_PATH, '/', '/no/such/path', '/metrics'];

// One upgrade to target ({host, port}); resolves with the client once the
// hub answered (or closed). The caller destroys it.
async function upgrade(t, target, path, protocol) {
  const headers = protocol === undefined ? {} : { 'Sec-WebSocket-Protocol': protocol };
  const c = new RawWs(target, upgradeRequest(target, { path, headers }));
  t.after(() => c.destroy());
  c.answer = await c.status();
  return c;
}

async function sessions(hub) {
  return (await hub.stats()).totals.sessions;
}

// Every internal name on every path of every target: 400, then the hub
// closes the socket (Connection: close), and no session exists.
async function assertRefused(t, hub, targets) {
  for (const target of targets) {
    for (const name of NAMES) {
      for (const path of PATHS) {
        const what = `${name} on ${target.port}${path}`;
        const c = await upgrade(t, target, path, name);
        assert.notEqual(c.answer.status, 101, what);
        assert.equal(c.answer.status, 400, `${what}: ${c.answer.statusLine}`);
        await c.end();
      }
    }
  }
  assert.equal(await sessions(hub), 0);
}

for (const cap of [[], ['--max-connections', '1']]) {
  test(`internal protocol names are refused on every path ${cap.join(' ') || '(no cap)'}`, async (t) => {
    const hub = await startHub(['--loops', '2', ...cap]);
    t.after(() => hub.stop('SIGKILL'));
    await assertRefused(t, hub, [hub]);
    // Many of them hold nothing either: the cap of one still has room.
    const many = [];
    for (let i = 0; i < 50; i++) many.push(upgrade(t, hub, '/no/such/path', NAMES[i % 2]));
    for (const c of await Promise.all(many)) assert.equal(c.answer.status, 400);

    // A normal session after them is counted like any other.
    const ok = new RawWs(hub, upgradeRequest(hub, {}));
    t.after(() => ok.destroy());
    await ok.open();
    await waitFor(async () => (await sessions(hub)) === 1, 'the session to be counted');
    const second = await upgrade(t, hub, APP_PATH);
    if (cap.length) {
      // The cap holds: the one session is the one counted.
      assert.equal(second.answer.status, 503);
    } else {
      assert.equal(second.answer.status, 101);
      await waitFor(async () => (await sessions(hub)) === 2, 'two sessions');
    }
    assert.equal((await hub.stop('SIGTERM')).code, 0);
  });
}

test('internal protocol names are refused on the metrics port too', async (t) => {
  const mport = await freePort();
  const hub = await startHub(['--loops', '2', '--max-connections', '1',
    '--metrics-port', String(mport)]);
  t.after(() => hub.stop('SIGKILL'));
  const metrics = { host: hub.host, port: mport };
  // With --metrics-port, /stats is served there only.
  hub.stats = async () =>
    JSON.parse((await request('GET', `http://${hub.host}:${mport}/stats`)).body);
  await assertRefused(t, hub, [hub, metrics]);
  // The metrics port serves no WebSocket at all, the session protocol's
  // name included (404, as without a name).
  for (const name of [undefined, 'lubdub']) {
    const c = await upgrade(t, metrics, APP_PATH, name);
    assert.equal(c.answer.status, 404, String(name));
  }
  const ok = new RawWs(hub, upgradeRequest(hub, {}));
  t.after(() => ok.destroy());
  await ok.open();
  await waitFor(async () => (await sessions(hub)) === 1, 'the session to be counted');
  assert.equal((await upgrade(t, hub, APP_PATH)).answer.status, 503);
});

test('other subprotocol names: the session protocol works, unknown ones get 400', async (t) => {
  const hub = await startHub(['--loops', '1']);
  t.after(() => hub.stop('SIGKILL'));
  // lws takes the first name that is a protocol of the vhost: an internal
  // one first is refused even when a good one follows.
  for (const name of ['http', 'foo', 'foo, acceptor', 'acceptor, lubdub', ' acceptor ',
    'x'.repeat(64), 'a'.repeat(200)]) {
    const c = await upgrade(t, hub, APP_PATH, name);
    assert.equal(c.answer.status, 400, `${JSON.stringify(name)}: ${c.answer.statusLine}`);
  }
  await waitFor(() => /Sec-WebSocket-Protocol "foo, acceptor" names no protocol/.test(hub.stderr),
    'the refusal line');
  // Without an admin token the console's protocol is a 404 anywhere.
  assert.equal((await upgrade(t, hub, APP_PATH, 'lubdub-console')).answer.status, 404);
  assert.equal(await sessions(hub), 0);
  // The session protocol's own name, alone or first or after an unknown
  // one, is a normal session.
  let n = 0;
  for (const name of ['lubdub', 'lubdub, acceptor', 'foo, lubdub']) {
    const c = new RawWs(hub, upgradeRequest(hub, { headers: { 'Sec-WebSocket-Protocol': name } }));
    t.after(() => c.destroy());
    await c.open();
    n++;
    await waitFor(async () => (await sessions(hub)) === n, `${name}: counted`);
  }
});
