'use strict';
// A new user's first command on a fresh machine: `make run` in a clean
// Debian 12 (bookworm minbase plus only make and git) must install what it
// needs, build without the test tools (no cmocka, no node) and serve the
// demo. A used machine cannot show this (whatever an earlier run installed
// hides a missing step), so the test runs it in a container made from the
// minbase rootfs the image test also uses (./lib.js), with this checkout's
// tracked files (as they are in the work tree) copied in.
//
// Needs root (debootstrap, rootful podman); skipped otherwise.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { request, waitFor } = require('../integration/lib/hub');
const {
  ROOT, BASE_IMAGE, skipUnlessRoot, run, freePort, phases, podmanSandbox, importBase,
} = require('./lib');

const NODE_MODULES = path.join(ROOT, 'tests', 'integration', 'node_modules');

// Copy the checkout into dir: git's tracked files when ROOT is a checkout,
// else everything but build trees and node_modules.
async function copyCheckout(dir) {
  fs.mkdirSync(dir);
  const git = await run('git', ['-C', ROOT, 'ls-files', '-z']);
  if (git.code === 0 && git.stdout.length > 0) {
    const files = git.stdout.split('\0').filter((f) => f && fs.existsSync(path.join(ROOT, f)));
    for (const f of files) {
      const dst = path.join(dir, f);
      fs.mkdirSync(path.dirname(dst), { recursive: true });
      fs.copyFileSync(path.join(ROOT, f), dst);
      fs.chmodSync(dst, fs.statSync(path.join(ROOT, f)).mode & 0o777);
    }
    return files.length;
  }
  fs.cpSync(ROOT, dir, {
    recursive: true,
    filter: (src) => !/\/(build[^/]*|node_modules|\.git)$/.test(src),
  });
  return -1;
}

test('make run on a fresh Debian 12 with only make and git serves the demo',
  { skip: skipUnlessRoot },
  async (t) => {
    const ph = phases(t);
    const sandbox = await podmanSandbox(t);
    const { tmp, tag, podman } = sandbox;
    const name = `lubdub-fresh-${tag}`;
    sandbox.cleanups.push(() => podman(['rm', '--force', '--time', '0', name]));

    let since = Date.now();
    const how = await importBase(t, sandbox);
    ph.done(`base image (${how})`, since);

    const src = path.join(tmp, 'src');
    const copied = await copyCheckout(src);
    t.diagnostic(`checkout: ${copied < 0 ? 'copied tree' : `${copied} tracked files`}`);

    // make run exactly as README.md says; the port comes from the
    // environment (LUBDUB_PORT) so the command itself stays as documented.
    since = Date.now();
    const port = await freePort();
    let log = '';
    const script = [
      'set -e',
      'export DEBIAN_FRONTEND=noninteractive',
      'apt-get update -qq',
      'apt-get install -y -qq --no-install-recommends make git >/dev/null',
      'if dpkg -s libcmocka-dev >/dev/null 2>&1 || command -v node >/dev/null; then',
      '  echo "fresh: test tools present before make run" >&2; exit 3',
      'fi',
      'echo "fresh: make run"',
      'exec make run',
    ].join('\n');
    const container = podman(['run', '--rm', '--name', name, '--network=host',
      '-v', `${src}:/src`, '-w', '/src', '-e', `LUBDUB_PORT=${port}`,
      BASE_IMAGE, 'bash', '-c', script],
    { timeoutMs: 1800000, onData: (d) => { log += d; } });
    let exited = null;
    container.then((r) => { exited = r; });

    const base = `http://127.0.0.1:${port}`;
    const up = await waitFor(async () => {
      if (exited) return 'exited';
      try {
        return (await request('GET', `${base}/healthz`)).status === 200 && 'up';
      } catch (_) {
        return false;
      }
    }, 'make run to serve /healthz', 1500000, 500)
      .catch((e) => { throw new Error(`${e.message}\n${log.slice(-6000)}`); });
    assert.equal(up, 'up', `make run exited ${exited && exited.code}:\n${log.slice(-6000)}`);
    ph.done('make run (apt, cmake, build, start)', since);

    // It built without the test tools, and said so.
    assert.match(log, /Tests not built/, log.slice(-4000));
    assert.ok(fs.existsSync(path.join(src, 'build', 'lubdub')), 'build/lubdub exists');
    assert.ok(!fs.existsSync(path.join(src, 'build', 'tests')), 'no test tree was configured');

    // The demo and the dashboard are served, and a Pusher client connects.
    const page = await request('GET', `${base}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'], /text\/html/);
    assert.equal((await request('GET', `${base}/dashboard`)).status, 200);
    const WebSocket = require(path.join(NODE_MODULES, 'ws'));
    const ws = new WebSocket(
      `ws://127.0.0.1:${port}/app/app-key?protocol=7&client=js&version=8.4.0&flash=false`);
    t.after(() => ws.terminate());
    const inbox = [];
    ws.on('message', (d) => inbox.push(JSON.parse(String(d))));
    await waitFor(() => inbox.find((m) => m.event === 'pusher:connection_established'),
      'pusher:connection_established');
    // make run turns the development auth endpoint on (README.md).
    const auth = await request('POST', `${base}/auth`,
      `socket_id=${encodeURIComponent(JSON.parse(inbox[0].data).socket_id)}` +
      '&channel_name=private-fresh',
      { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(auth.status, 200, auth.body);
    assert.match(JSON.parse(auth.body).auth, /^app-key:[0-9a-f]{64}$/);
    t.diagnostic(`phases: ${ph.list.join(', ')}`);
  });
