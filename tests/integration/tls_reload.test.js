'use strict';
// SIGHUP re-reads --tls-cert/--tls-key: connections that are up stay up and
// keep receiving, new handshakes on every loop present the new certificate,
// and an unusable file is refused with one error line while the current
// certificate stays. SIGHUP never stops the hub, with or without TLS.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const { execFileSync } = require('node:child_process');
const WebSocket = require('ws');
const { startHub, waitFor } = require('./lib/hub');
const { loopOf, publish, RawClient } = require('./lib/clients');

// A self-signed certificate for localhost/127.0.0.1 in dir/<name>.{crt,key}.
function makeCert(dir, name, type, cn) {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.crt`);
  const newkey = type === 'ec'
    ? ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']
    : ['-newkey', 'rsa:2048'];
  execFileSync('openssl', ['req', '-x509', ...newkey, '-nodes', '-keyout', key,
    '-out', cert, '-days', '2', '-subj', `/CN=${cn}`,
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
  const pem = fs.readFileSync(cert);
  return { key, cert, pem, fingerprint: new crypto.X509Certificate(pem).fingerprint256 };
}

// Replace a file the way certificate tools do: write aside, then rename.
function replace(file, content) {
  fs.writeFileSync(`${file}.tmp`, content);
  fs.renameSync(`${file}.tmp`, file);
}

// A wss client (the raw client), once established: its loop and the
// fingerprint of the certificate it was shown.
async function wssClient(t, port, ca) {
  const c = new RawClient(`wss://127.0.0.1:${port}/app/app-key?protocol=7`, { ca });
  t.after(() => c.terminate());
  await c.open();
  c.loop = loopOf(c.socketId);
  c.fingerprint = c.ws._socket.getPeerCertificate().fingerprint256;
  return c;
}

// One client on each of the hub's two loops (the kernel spreads accepts).
async function clientPerLoop(t, port, ca) {
  const byLoop = new Map();
  for (let i = 0; i < 80 && byLoop.size < 2; i++) {
    const c = await wssClient(t, port, ca);
    if (byLoop.has(c.loop)) c.close();
    else byLoop.set(c.loop, c);
  }
  assert.equal(byLoop.size, 2, 'no client landed on one of the loops');
  return [...byLoop.values()];
}

// Fingerprint of the certificate a fresh TLS handshake presents.
function presented(port, ca) {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      const fp = sock.getPeerCertificate().fingerprint256;
      sock.destroy();
      resolve(fp);
    });
    sock.on('error', reject);
  });
}


function count(hub, re) {
  return (hub.stderr.match(re) || []).length;
}

test('SIGHUP reloads the certificate without dropping connections', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-reload-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const first = makeCert(dir, 'first', 'rsa', 'localhost');
  // Another key type too: the old RSA certificate must not stay on offer.
  const second = makeCert(dir, 'second', 'ec', 'localhost-second');
  const third = makeCert(dir, 'third', 'rsa', 'localhost-third');
  const cert = path.join(dir, 'live.crt');
  const key = path.join(dir, 'live.key');
  fs.copyFileSync(first.cert, cert);
  fs.copyFileSync(first.key, key);
  const ca = [first.pem, second.pem, third.pem];
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s',
    '--tls-cert', cert, '--tls-key', key]);
  t.after(async () => {
    const exit = await hub.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, hub.stderr.slice(-3000));
  });
  // Whole lines only: stderr arrives in chunks, and on a loaded machine a
  // line can be split between two of them (the start seen, the
  // fingerprint at its end not yet).
  const reloaded = /tls: certificate reloaded on 2 loops[^\n]*\n/g;
  const refused = /tls: certificate not reloaded, keeping the old one[^\n]*\n/g;

  // Connections on both loops, subscribed, before the reload.
  const old = await clientPerLoop(t, hub.port, ca);
  for (const c of old) {
    assert.equal(c.fingerprint, first.fingerprint);
    c.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'news' } }));
    await c.next((m) => m.event === 'pusher_internal:subscription_succeeded', 'subscribed', 15000);
  }

  await t.test('a new certificate: new handshakes on every loop present it', async () => {
    replace(key, fs.readFileSync(second.key));
    replace(cert, second.pem);
    process.kill(hub.pid, 'SIGHUP');
    await waitFor(() => count(hub, reloaded) === 1, 'the reload line', 15000);
    assert.ok(hub.stderr.includes(`sha256 ${second.fingerprint}`),
      'the reload line names the new fingerprint');
    assert.ok(hub.stderr.includes('localhost-second'));
    for (let i = 0; i < 6; i++) {
      assert.equal(await presented(hub.port, ca), second.fingerprint);
    }
    const fresh = await clientPerLoop(t, hub.port, ca);
    for (const c of fresh) assert.equal(c.fingerprint, second.fingerprint, `loop ${c.loop}`);
  });

  await t.test('connections from before the reload still work', async () => {
    const r = await publish(hub, { name: 'ping', channel: 'news', data: 'after-reload' }, { ca });
    assert.equal(r.status, 200, r.body);
    for (const c of old) {
      assert.equal(c.ws.readyState, WebSocket.OPEN);
      const m = await c.next((x) => x.event === 'ping' && x.data === 'after-reload',
        `the event on loop ${c.loop}`, 15000);
      assert.equal(m.channel, 'news');
    }
  });

  await t.test('an unusable file is refused and the current certificate stays', async () => {
    const cases = [
      ['a certificate file that is not PEM', () => replace(cert, 'not a certificate\n'), /--tls-cert \S+: no start line/],
      ['a key that does not match', () => {
        replace(cert, third.pem); // the key is still second's
      }, /does not match --tls-cert/],
      ['a missing key file', () => fs.rmSync(key), /cannot read --tls-key \S+: No such file or directory/],
    ];
    for (const [what, breakIt, why] of cases) {
      const before = count(hub, refused);
      breakIt();
      process.kill(hub.pid, 'SIGHUP');
      await waitFor(() => count(hub, refused) === before + 1, `the refusal line (${what})`, 15000);
      assert.match(hub.stderr, why, what);
      assert.equal(await presented(hub.port, ca), second.fingerprint, what);
    }
    assert.equal(count(hub, reloaded), 1, 'no reload happened');
    const r = await publish(hub, { name: 'ping', channel: 'news', data: 'after-refusal' }, { ca });
    assert.equal(r.status, 200, r.body);
    for (const c of old) {
      await c.next((x) => x.event === 'ping' && x.data === 'after-refusal', 'the event', 15000);
    }
  });

  await t.test('fixed files load again (back to RSA)', async () => {
    replace(key, fs.readFileSync(third.key));
    replace(cert, third.pem);
    process.kill(hub.pid, 'SIGHUP');
    await waitFor(() => count(hub, reloaded) === 2, 'the second reload line', 15000);
    for (let i = 0; i < 6; i++) {
      assert.equal(await presented(hub.port, ca), third.fingerprint);
    }
    for (const c of old) assert.equal(c.ws.readyState, WebSocket.OPEN);
  });
});

test('SIGHUP without TLS changes nothing and SIGTERM still drains', async (t) => {
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s']);
  t.after(() => hub.stop('SIGKILL'));
  process.kill(hub.pid, 'SIGHUP');
  await waitFor(() => hub.stderr.includes('nothing to reload'), 'the SIGHUP line');
  assert.equal(hub.exit, null, 'SIGHUP must not stop the hub');
  const s = await hub.stats();
  assert.ok(s, 'still serving');
  const exit = await hub.stop('SIGTERM');
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.match(hub.stderr, /SIGTERM: draining/);
  assert.match(hub.stderr, /drained; bye/);
});
