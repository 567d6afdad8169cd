'use strict';
// Container: build deploy/Dockerfile with podman and run the image the way
// an operator would. No registry and no Docker engine are reachable here, so
// the test makes its own base: debootstrap a minbase bookworm rootfs from
// the Debian mirror apt already uses, trim it like the slim image, and
// `podman import` it as docker.io/library/debian:bookworm-slim so FROM never
// pulls (the build runs with --pull=never).
//
// The private podman and the base image come from ./lib.js (shared with
// fresh.test.js).
//
// Needs root (debootstrap, rootful podman); skipped otherwise. Missing
// podman/runc/debootstrap are installed through deploy/install-deps.sh.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { request, waitFor, once } = require('../integration/lib/hub');
const {
  ROOT, skipUnlessRoot, freePort, phases, podmanSandbox, importBase,
} = require('./lib');

const NODE_MODULES = path.join(ROOT, 'tests', 'integration', 'node_modules');

test('the container image builds, serves Pusher clients and drains on SIGTERM',
  { skip: skipUnlessRoot },
  async (t) => {
    const t0 = Date.now();
    const ph = phases(t);
    const phase = ph.done;
    const sandbox = await podmanSandbox(t);
    const { tmp, tag, podman } = sandbox;
    const image = `localhost/lubdub-ci:${tag}`;
    const name = `lubdub-ci-${tag}`;
    sandbox.cleanups.push(async () => {
      await podman(['rm', '--force', '--time', '0', name]);
      t.diagnostic(`container test total ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    });

    let since = Date.now();
    const how = await importBase(t, sandbox);
    phase(`base image (${how})`, since);

    // --format docker keeps HEALTHCHECK (the OCI format has none).
    since = Date.now();
    await podman(['build', '--network=host', '--pull=never', '--format', 'docker',
      '-f', path.join(ROOT, 'deploy', 'Dockerfile'), '-t', image, ROOT],
    { check: true, timeoutMs: 900000 });
    phase('podman build', since);

    const inspect = JSON.parse((await podman(['image', 'inspect', image], { check: true })).stdout)[0];
    const cfg = inspect.Config;
    assert.equal(cfg.User, '10001:10001', 'runs as a non-root user');
    assert.ok(cfg.ExposedPorts && cfg.ExposedPorts['6001/tcp'], 'exposes 6001');
    assert.ok(cfg.Env.includes('LUBDUB_BIND=0.0.0.0'), 'binds 0.0.0.0 by default');
    const health = inspect.Healthcheck || cfg.Healthcheck;
    assert.ok(health && health.Test.join(' ').includes('lubdub-healthcheck'),
      'has a HEALTHCHECK (built with --format docker)');
    assert.match(String(cfg.StopSignal), /^(SIGTERM|15)$/);

    // The public default bind refuses the default secret (in a network
    // namespace of its own, so nothing could listen on a real interface)...
    since = Date.now();
    const refused = await podman(['run', '--rm', '--network=none', '--no-healthcheck', image],
      { timeoutMs: 120000 });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /default secret/);
    // ...unless explicitly allowed.
    const allowed = await podman(['run', '--rm', '--network=none', '--no-healthcheck',
      '-e', 'LUBDUB_ALLOW_DEFAULT_SECRET=true', image, '--check-config'], { timeoutMs: 120000 });
    assert.equal(allowed.code, 0, allowed.stderr);
    phase('default-secret checks', since);

    // A real run: configured by a mounted JSON file plus env, on loopback.
    since = Date.now();
    const port = await freePort();
    const secret = crypto.randomBytes(16).toString('hex');
    const app = { id: 'ci-app', key: 'ci-key', secret };
    const cfgFile = path.join(tmp, 'lubdub.json');
    fs.writeFileSync(cfgFile, JSON.stringify({
      apps: [app], log_format: 'json', drain_timeout: '5s', loops: 2,
    }));
    fs.chmodSync(cfgFile, 0o644);
    await podman(['run', '--detach', '--name', name, '--network=host',
      '-v', `${cfgFile}:/etc/lubdub/lubdub.json:ro`,
      '-e', 'LUBDUB_CONFIG=/etc/lubdub/lubdub.json',
      '-e', 'LUBDUB_BIND=127.0.0.1', '-e', `LUBDUB_PORT=${port}`, image],
    { check: true, timeoutMs: 120000 });
    const base = `http://127.0.0.1:${port}`;
    const logs = async () => {
      const r = await podman(['logs', name]);
      return r.stdout + r.stderr;
    };
    await waitFor(async () => (await request('GET', `${base}/healthz`)).status === 200,
      'the container to answer /healthz', 60000, 100)
      .catch(async (e) => { throw new Error(`${e.message}\n${await logs()}`); });
    assert.equal((await request('GET', `${base}/readyz`)).status, 200);
    // The web pages come from /usr/share/lubdub/web (the default root "web"
    // resolves there), when the checkout has them.
    if (fs.existsSync(path.join(ROOT, 'web', 'index.html'))) {
      const page = await request('GET', `${base}/`);
      assert.equal(page.status, 200);
      assert.match(page.headers['content-type'], /text\/html/);
    }
    const hc = await podman(['healthcheck', 'run', name], { timeoutMs: 60000 });
    assert.equal(hc.code, 0, `healthcheck: ${hc.stdout}${hc.stderr}`);
    phase('container start', since);

    // A Pusher client: handshake, subscribe, then a signed REST publish.
    const WebSocket = require(path.join(NODE_MODULES, 'ws'));
    const PusherServer = require(path.join(NODE_MODULES, 'pusher'));
    const ws = new WebSocket(
      `ws://127.0.0.1:${port}/app/${app.key}?protocol=7&client=js&version=8.4.0&flash=false`);
    t.after(() => ws.terminate());
    const inbox = [];
    ws.on('message', (d) => inbox.push(JSON.parse(String(d))));
    const closed = once(ws, 'close', 120000);
    await waitFor(() => inbox.find((m) => m.event === 'pusher:connection_established'),
      'pusher:connection_established');
    const est = JSON.parse(inbox[0].data);
    assert.match(est.socket_id, /^\d+\.\d+$/);
    assert.ok(est.activity_timeout > 0);
    ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'ci' } }));
    await waitFor(() => inbox.find((m) => m.event === 'pusher_internal:subscription_succeeded'),
      'subscription_succeeded');
    const rest = new PusherServer({
      appId: app.id, key: app.key, secret: app.secret,
      host: '127.0.0.1', port, useTLS: false,
    });
    const res = await rest.trigger('ci', 'hello', { from: 'container' });
    assert.equal(res.status, 200);
    const got = await waitFor(() => inbox.find((m) => m.event === 'hello'), 'the published event');
    assert.deepEqual(JSON.parse(got.data), { from: 'container' });

    const metrics = await request('GET', `${base}/metrics`);
    assert.equal(metrics.status, 200);
    const live = metrics.body.split('\n').filter((l) => l.startsWith('lubdub_sessions{'))
      .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
    assert.equal(live, 1, metrics.body);
    const stats = JSON.parse((await request('GET', `${base}/stats`)).body);
    assert.equal(stats.totals.sessions, 1);
    assert.equal(stats.loops, 2);

    // The log is JSON lines (from the mounted file's log_format).
    const lines = (await logs()).split('\n').filter((l) => l.startsWith('{'));
    assert.ok(lines.length > 0);
    for (const l of lines) assert.ok(JSON.parse(l).msg, l);

    // SIGTERM (podman stop) drains: the client gets 4200, the hub exits 0.
    since = Date.now();
    const stop = await podman(['stop', '--time', '60', name], { timeoutMs: 120000 });
    assert.equal(stop.code, 0, stop.stderr);
    const [code] = await closed;
    assert.equal(code, 4200);
    const state = JSON.parse((await podman(['inspect', name], { check: true })).stdout)[0].State;
    assert.equal(state.ExitCode, 0, await logs());
    assert.match(await logs(), /drained; bye/);
    phase('drain and stop', since);
    t.diagnostic(`phases: ${ph.list.join(', ')}`);
  });
