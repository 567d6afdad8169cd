'use strict';
// Container: deploy/compose.yaml under Debian's podman-compose (1.0.3), as
// an operator would run it: Redis, three lubdub nodes and Prometheus, every
// image built here from Debian packages on the debootstrapped base (./lib.js;
// nothing is pulled: --pull=never on every build and run). Then a client
// subscribed on node 2 gets an event published (signed REST) through node
// 1, Prometheus reports all three nodes' /metrics as up, and `down`
// removes it all, as the test's cleanup does again even on failure.
//
// podman-compose drives the test's private podman through a wrapper script
// (--podman-path) that adds the sandbox's --root/--runroot; its network
// gets names resolved by the CNI dnsname plugin (deploy/install-deps.sh
// container). podman-compose 1.0.3 leaves the project's network behind on
// `down`, so the test removes it, and the CNI IPAM state kept for it under
// /var/lib/cni/networks.
//
// Needs root; skipped otherwise.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { request, waitFor } = require('../integration/lib/hub');
const {
  ROOT, skipUnlessRoot, freePort, phases, podmanSandbox, importBase, run,
} = require('./lib');
const { podmanWrapper, forgetCniNetwork } = require('./deploylib');

const NODE_MODULES = path.join(ROOT, 'tests', 'integration', 'node_modules');
const DEPLOY = path.join(ROOT, 'deploy');
const COMPOSE = path.join(DEPLOY, 'compose.yaml');
const secret = (name) =>
  fs.readFileSync(path.join(DEPLOY, 'compose', 'secrets', name), 'utf8').replace(/\n$/, '');

test('deploy/compose.yaml: three nodes on one Redis, scraped by Prometheus',
  { skip: skipUnlessRoot },
  async (t) => {
    const t0 = Date.now();
    const ph = phases(t);
    const sandbox = await podmanSandbox(t);
    const { tag, podman } = sandbox;
    const project = `lubdub-compose-${tag}`;
    const network = `${project}_default`;
    const wrapper = podmanWrapper(sandbox);
    const ports = {
      NODE1_PORT: await freePort(), NODE2_PORT: await freePort(),
      NODE3_PORT: await freePort(), PROMETHEUS_PORT: await freePort(),
    };
    const env = { ...sandbox.env, ...ports, PUBLISH_ADDR: '127.0.0.1' };
    let log = '';
    const compose = (args, timeoutMs = 900000) => run('podman-compose', [
      '--podman-path', wrapper, '-p', project, '-f', COMPOSE,
      '--podman-build-args=--pull=never --format=docker --network=host',
      '--podman-run-args=--pull=never', ...args,
    ], { env, timeoutMs, onData: (d) => { log += d; } });
    const tail = () => log.slice(-6000);
    sandbox.cleanups.push(async () => {
      await compose(['down', '-v', '-t', '0'], 300000);
      await podman(['network', 'rm', '--force', network]);
      forgetCniNetwork(network);
      t.diagnostic(`compose test total ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    });

    let since = Date.now();
    const how = await importBase(t, sandbox);
    ph.done(`base image (${how})`, since);

    // One build per image: lubdub2 and lubdub3 share lubdub1's image, which
    // `up` then finds and does not build again.
    since = Date.now();
    const built = await compose(['build', 'lubdub1', 'redis', 'prometheus']);
    assert.equal(built.code, 0, `podman-compose build failed\n${tail()}`);
    ph.done('build lubdub, redis and prometheus images', since);

    since = Date.now();
    const up = await compose(['up', '-d'], 300000);
    assert.equal(up.code, 0, `podman-compose up failed\n${tail()}`);
    assert.doesNotMatch(log, /Trying to pull|Pulling /, 'nothing is pulled');
    const base = (n) => `http://127.0.0.1:${ports[`NODE${n}_PORT`]}`;
    const logsOf = async (svc) => {
      const r = await podman(['logs', `${project}_${svc}_1`]);
      return `--- ${svc}\n${(r.stdout + r.stderr).slice(-3000)}`;
    };
    const allLogs = async () =>
      (await Promise.all(['redis', 'lubdub1', 'lubdub2', 'lubdub3', 'prometheus'].map(logsOf)))
        .join('\n');
    // Ready (200) means joined to the cluster through Redis.
    for (const n of [1, 2, 3]) {
      await waitFor(async () => {
        try { return (await request('GET', `${base(n)}/readyz`)).status === 200; } catch (_) { return false; }
      }, `node ${n} /readyz 200`, 120000, 250)
        .catch(async (e) => { throw new Error(`${e.message}\n${await allLogs()}`); });
    }
    ph.done('up and ready', since);

    // The compose health check (/readyz, through lubdub-healthcheck) passes.
    const hc = await podman(['healthcheck', 'run', `${project}_lubdub1_1`], { timeoutMs: 60000 });
    assert.equal(hc.code, 0, `healthcheck: ${hc.stdout}${hc.stderr}`);
    // read_only: the root file system refuses writes.
    const ro = await podman(['exec', `${project}_lubdub1_1`, 'bash', '-c', ': > /probe']);
    assert.notEqual(ro.code, 0);
    assert.match(ro.stderr, /Read-only file system/);

    // Subscribe on node 2, publish through node 1.
    since = Date.now();
    const WebSocket = require(path.join(NODE_MODULES, 'ws'));
    const PusherServer = require(path.join(NODE_MODULES, 'pusher'));
    const app = { id: 'app-id', key: 'app-key', secret: secret('app-secret') };
    const ws = new WebSocket(`ws://127.0.0.1:${ports.NODE2_PORT}/app/${app.key}` +
      '?protocol=7&client=js&version=8.4.0&flash=false');
    t.after(() => ws.terminate());
    const inbox = [];
    ws.on('message', (d) => inbox.push(JSON.parse(String(d))));
    await waitFor(() => inbox.find((m) => m.event === 'pusher:connection_established'),
      'pusher:connection_established on node 2', 30000);
    ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'compose' } }));
    await waitFor(() => inbox.find((m) => m.event === 'pusher_internal:subscription_succeeded'),
      'subscription_succeeded on node 2', 30000);
    const rest = new PusherServer({
      appId: app.id, key: app.key, secret: app.secret,
      host: '127.0.0.1', port: ports.NODE1_PORT, useTLS: false,
    });
    const res = await rest.trigger('compose', 'hello', { via: 'lubdub1' });
    assert.equal(res.status, 200);
    const got = await waitFor(() => inbox.find((m) => m.event === 'hello'),
      'the event published through node 1, on node 2', 30000);
    assert.deepEqual(JSON.parse(got.data), { via: 'lubdub1' });
    // A wrong secret is refused: the nodes use the mounted one.
    const wrong = new PusherServer({
      appId: app.id, key: app.key, secret: `${app.secret}x`,
      host: '127.0.0.1', port: ports.NODE1_PORT, useTLS: false,
    });
    await assert.rejects(wrong.trigger('compose', 'hello', {}), (e) => e.status === 401);
    // /metrics is not on the published port (metrics_port 9601, unpublished).
    assert.equal((await request('GET', `${base(1)}/metrics`)).status, 404);
    ph.done('cross-node publish', since);

    // Prometheus scraped all three nodes, with the token, as up.
    since = Date.now();
    const prom = `http://127.0.0.1:${ports.PROMETHEUS_PORT}`;
    let targets = [];
    await waitFor(async () => {
      try {
        const r = await request('GET', `${prom}/api/v1/targets?state=active`);
        if (r.status !== 200) return false;
        targets = JSON.parse(r.body).data.activeTargets;
        return targets.length === 3 && targets.every((x) => x.health === 'up');
      } catch (_) { return false; }
    }, 'Prometheus: three lubdub targets up', 120000, 500)
      .catch(async (e) => {
        throw new Error(`${e.message}: ${JSON.stringify(targets)}\n${await allLogs()}`);
      });
    assert.deepEqual(targets.map((x) => x.labels.instance).sort(),
      ['lubdub1:9601', 'lubdub2:9601', 'lubdub3:9601']);
    const q = await request('GET', `${prom}/api/v1/query?query=${encodeURIComponent('count(up{job="lubdub"} == 1)')}`);
    assert.equal(JSON.parse(q.body).data.result[0].value[1], '3');
    // The alert rules, when deploy/prometheus/alerts.yml is there, are
    // loaded (Prometheus refuses to start on a bad one).
    if (fs.existsSync(path.join(DEPLOY, 'prometheus', 'alerts.yml'))) {
      const rules = JSON.parse((await request('GET', `${prom}/api/v1/rules`)).body);
      assert.ok(rules.data.groups.length > 0, 'alerts.yml loaded');
    }
    ph.done('prometheus targets up', since);

    // down: every container of the project goes (drained: -t 30).
    since = Date.now();
    ws.terminate();
    const down = await compose(['down', '-v', '-t', '30'], 300000);
    assert.equal(down.code, 0, `podman-compose down failed\n${tail()}`);
    const left = await podman(['ps', '-a', '--format', '{{.Names}}',
      '--filter', `label=io.podman.compose.project=${project}`], { check: true });
    assert.equal(left.stdout.trim(), '', 'no container left');
    ph.done('down', since);
    t.diagnostic(`phases: ${ph.list.join(', ')}`);
  });
