'use strict';
// Container: deploy/k8s/ under `podman kube play`, as far as podman plays
// it. Played here: configmap.yaml (--configmap), secret.yaml, the
// Deployments of deployment.yaml (three lubdub pods) and redis.yaml. Not
// played, linted by tests/deploy/k8s_lint.py instead (label deploy, normal
// lane): service.yaml and redis.yaml's Service (podman has no Services; the
// test gives the Redis pod the Service's name as a network alias),
// servicemonitor.yaml, kustomization.yaml, and the fields podman ignores:
// readinessProbe, lifecycle.preStop, terminationGracePeriodSeconds,
// runAsNonRoot, fsGroup, seccompProfile, defaultMode, strategy, affinity.
//
// What podman 4.3 (Debian bookworm's) needs, each only below the version
// that fixed it:
// - podman < 5 publishes every containerPort on the host at the same port
//   (three replicas of 6001 collide): the played copy drops `ports`.
// - podman < 4.4 mounts a Secret's stringData as nothing and its data
//   still base64-encoded: the test stores the Secret as podman 4.3 reads it
//   (`podman secret create`, values as they are) instead of playing it.
// The copies played are written beside the test's podman store and named
// in the test's output.
//
// Then: every pod becomes ready (/readyz 200, checked from the host, since
// podman ignores readinessProbe), takes its pod name as node id (the
// downward API), runs as 10001 on a read-only root with writable emptyDirs,
// a client on pod 0 gets an event published through pod 1 (signed REST;
// the nodes share the Redis pod), and `podman kube down` removes the pods.
//
// Needs root; skipped otherwise.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { request, waitFor } = require('../integration/lib/hub');
const {
  ROOT, skipUnlessRoot, phases, podmanSandbox, importBase,
} = require('./lib');
const { forgetCniNetwork, yamlDocs } = require('./deploylib');

const NODE_MODULES = path.join(ROOT, 'tests', 'integration', 'node_modules');
const K8S = path.join(ROOT, 'deploy', 'k8s');
const REPLICAS = 3;

// [major, minor] of "4.3.1".
const versionOf = (s) => s.trim().split('.').map(Number);
const below = (v, major, minor) => v[0] < major || (v[0] === major && v[1] < minor);

// The Deployments of a manifest file, as podman of version v can play them.
function playable(file, v) {
  return yamlDocs(file).filter((d) => d.kind === 'Deployment').map((d) => {
    const copy = JSON.parse(JSON.stringify(d));
    if (v[0] < 5) {
      for (const c of copy.spec.template.spec.containers) delete c.ports;
    }
    return copy;
  });
}

test('deploy/k8s: podman kube play runs the Deployment with its ConfigMap and Secret',
  { skip: skipUnlessRoot },
  async (t) => {
    const t0 = Date.now();
    const ph = phases(t);
    const sandbox = await podmanSandbox(t);
    const { tmp, tag, podman } = sandbox;
    const network = `lubdub-k8s-${tag}`;
    const played = {
      lubdub: path.join(tmp, 'deployment.played.json'),
      redis: path.join(tmp, 'redis.played.json'),
    };
    sandbox.cleanups.push(async () => {
      for (const f of Object.values(played)) {
        if (fs.existsSync(f)) await podman(['kube', 'down', f], { timeoutMs: 120000 });
      }
      await podman(['network', 'rm', '--force', network]);
      forgetCniNetwork(network);
      t.diagnostic(`k8s test total ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    });
    const v = versionOf((await podman(['version', '--format', '{{.Client.Version}}'],
      { check: true })).stdout);

    let since = Date.now();
    const how = await importBase(t, sandbox);
    ph.done(`base image (${how})`, since);

    // The manifests name "lubdub:latest" and "lubdub-redis:latest"; podman
    // finds them as localhost/... without a registry.
    since = Date.now();
    for (const [file, image] of [['Dockerfile', 'lubdub'], ['redis.Dockerfile', 'lubdub-redis']]) {
      const ctx = image === 'lubdub' ? ROOT : path.join(ROOT, 'deploy');
      await podman(['build', '--network=host', '--pull=never', '--format', 'docker',
        '-f', path.join(ROOT, 'deploy', file), '-t', `localhost/${image}:latest`, ctx],
      { check: true, timeoutMs: 900000 });
    }
    ph.done('build lubdub and lubdub-redis images', since);

    // What is played, and how.
    since = Date.now();
    const secretDoc = yamlDocs(path.join(K8S, 'secret.yaml'))[0];
    const secrets = { ...secretDoc.stringData };
    for (const [k, b64] of Object.entries(secretDoc.data || {})) {
      secrets[k] = Buffer.from(b64, 'base64').toString();
    }
    fs.writeFileSync(played.lubdub, playable(path.join(K8S, 'deployment.yaml'), v)
      .map((d) => JSON.stringify(d)).join('\n---\n'));
    fs.writeFileSync(played.redis, playable(path.join(K8S, 'redis.yaml'), v)
      .map((d) => JSON.stringify(d)).join('\n---\n'));
    t.diagnostic(`podman ${v.join('.')}: played configmap.yaml, ` +
      `${below(v, 4, 4) ? 'secret.yaml (stored with podman secret create)' : 'secret.yaml'}, ` +
      `deployment.yaml and redis.yaml's Deployment${v[0] < 5 ? ' (without ports)' : ''}; ` +
      'linted only (tests/deploy/k8s_lint.py): service.yaml, redis.yaml\'s Service, ' +
      'servicemonitor.yaml, kustomization.yaml and the fields podman ignores');

    await podman(['network', 'create', network], { check: true });
    if (below(v, 4, 4)) {
      const stored = path.join(tmp, 'secret.podman43.json');
      fs.writeFileSync(stored, JSON.stringify({
        apiVersion: 'v1', kind: 'Secret', metadata: secretDoc.metadata, data: secrets,
      }));
      await podman(['secret', 'create', secretDoc.metadata.name, stored], { check: true });
    } else {
      await podman(['kube', 'play', path.join(K8S, 'secret.yaml')], { check: true });
    }
    // redis.yaml's Service is named lubdub-redis: the pod answers to it.
    await podman(['kube', 'play', '--network', `${network}:alias=lubdub-redis`, played.redis],
      { check: true, timeoutMs: 300000 });
    await podman(['kube', 'play', '--network', network,
      '--configmap', path.join(K8S, 'configmap.yaml'), played.lubdub],
    { check: true, timeoutMs: 300000 });

    const pods = [...Array(REPLICAS).keys()].map((i) => `lubdub-pod-${i}`);
    const ips = [];
    for (const pod of pods) {
      const r = await podman(['inspect', `${pod}-lubdub`, '--format',
        '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}'], { check: true });
      ips.push(r.stdout.trim());
    }
    const logsOf = async (c) => {
      const r = await podman(['logs', c]);
      return `--- ${c}\n${(r.stdout + r.stderr).slice(-3000)}`;
    };
    const allLogs = async () => (await Promise.all(
      ['lubdub-redis-pod-0-redis', ...pods.map((p) => `${p}-lubdub`)].map(logsOf))).join('\n');
    for (const ip of ips) {
      assert.match(ip, /^\d+\.\d+\.\d+\.\d+$/);
      await waitFor(async () => {
        try { return (await request('GET', `http://${ip}:6001/readyz`)).status === 200; } catch (_) { return false; }
      }, `pod at ${ip} ready`, 120000, 250)
        .catch(async (e) => { throw new Error(`${e.message}\n${await allLogs()}`); });
    }
    ph.done('kube play and ready', since);

    // The downward API: each node is named after its pod. /stats is on the
    // metrics port, behind the token of the mounted Secret.
    const auth = { authorization: `Bearer ${secrets['metrics-token']}` };
    for (const [i, ip] of ips.entries()) {
      assert.equal((await request('GET', `http://${ip}:9601/stats`)).status, 401);
      const stats = await request('GET', `http://${ip}:9601/stats`, undefined, auth);
      assert.equal(stats.status, 200, stats.body);
      assert.equal(JSON.parse(stats.body).backplane.node, pods[i]);
    }
    // securityContext: uid 10001, a read-only root, writable emptyDirs.
    const c0 = `${pods[0]}-lubdub`;
    const id = await podman(['exec', c0, 'id', '-u'], { check: true });
    assert.equal(id.stdout.trim(), '10001');
    const ro = await podman(['exec', c0, 'bash', '-c', ': > /probe']);
    assert.match(ro.stderr, /Read-only file system/);
    await podman(['exec', c0, 'bash', '-c', ': > /var/lib/lubdub/probe && : > /tmp/probe'],
      { check: true });

    // A client on pod 0 gets what is published through pod 1.
    since = Date.now();
    const WebSocket = require(path.join(NODE_MODULES, 'ws'));
    const PusherServer = require(path.join(NODE_MODULES, 'pusher'));
    const cfg = JSON.parse(yamlDocs(path.join(K8S, 'configmap.yaml'))[0].data['lubdub.json']);
    const app = { id: cfg.apps[0].id, key: cfg.apps[0].key, secret: secrets['app-secret'] };
    const ws = new WebSocket(`ws://${ips[0]}:6001/app/${app.key}` +
      '?protocol=7&client=js&version=8.4.0&flash=false');
    t.after(() => ws.terminate());
    const inbox = [];
    ws.on('message', (d) => inbox.push(JSON.parse(String(d))));
    await waitFor(() => inbox.find((m) => m.event === 'pusher:connection_established'),
      'pusher:connection_established on pod 0', 30000);
    ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'k8s' } }));
    await waitFor(() => inbox.find((m) => m.event === 'pusher_internal:subscription_succeeded'),
      'subscription_succeeded on pod 0', 30000);
    const rest = new PusherServer({
      appId: app.id, key: app.key, secret: app.secret, host: ips[1], port: 6001, useTLS: false,
    });
    assert.equal((await rest.trigger('k8s', 'hello', { via: pods[1] })).status, 200);
    const got = await waitFor(() => inbox.find((m) => m.event === 'hello'),
      'the event published through pod 1, on pod 0', 30000);
    assert.deepEqual(JSON.parse(got.data), { via: pods[1] });
    ws.terminate();
    ph.done('client and cross-pod publish', since);

    // podman kube down removes the pods.
    since = Date.now();
    for (const f of [played.lubdub, played.redis]) {
      await podman(['kube', 'down', f], { check: true, timeoutMs: 120000 });
    }
    const left = await podman(['pod', 'ps', '--format', '{{.Name}}'], { check: true });
    assert.equal(left.stdout.trim(), '', 'no pod left');
    ph.done('kube down', since);
    t.diagnostic(`phases: ${ph.list.join(', ')}`);
  });
