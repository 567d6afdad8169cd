'use strict';
// TLS on the hub's port: wss and https work; TLS < 1.2, non-ECDHE or
// non-AEAD suites are refused; ALPN offers only http/1.1 so browsers do not
// tunnel WebSockets over HTTP/2.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const https = require('node:https');
const WebSocket = require('ws');
const { startHub, once, makeCert } = require('./lib/hub');

function handshake(port, options) {
  return new Promise((resolve) => {
    const sock = tls.connect({ host: '127.0.0.1', port, ...options }, () => {
      const r = { ok: true, alpn: sock.alpnProtocol, version: sock.getProtocol(),
        cipher: sock.getCipher().name };
      sock.destroy();
      resolve(r);
    });
    sock.on('error', (e) => resolve({ ok: false, error: e.code || e.message }));
    sock.setTimeout(5000, () => { sock.destroy(); resolve({ ok: false, error: 'timeout' }); });
  });
}

test('wss and https with modern TLS only', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const { key, cert } = makeCert(dir);
  const ca = fs.readFileSync(cert);
  const hub = await startHub(['--loops', '2', '--tls-cert', cert, '--tls-key', key]);
  t.after(() => hub.stop());

  await t.test('a wss client gets connection_established', async () => {
    const ws = new WebSocket(`wss://127.0.0.1:${hub.port}/app/app-key?protocol=7`, { ca });
    const [data] = await once(ws, 'message');
    const msg = JSON.parse(String(data));
    assert.equal(msg.event, 'pusher:connection_established');
    assert.match(JSON.parse(msg.data).socket_id, /^\d+\.\d+$/);
    ws.close();
  });

  await t.test('https serves /healthz', async () => {
    const body = await new Promise((resolve, reject) => {
      https.get({ host: '127.0.0.1', port: hub.port, path: '/healthz', ca }, (res) => {
        let b = '';
        res.on('data', (d) => { b += d; });
        res.on('end', () => resolve(`${res.statusCode} ${b}`));
      }).on('error', reject);
    });
    assert.equal(body.trim(), '200 ok');
  });

  await t.test('ALPN: only http/1.1, even when h2 is offered', async () => {
    const r = await handshake(hub.port, { ca, ALPNProtocols: ['h2', 'http/1.1'] });
    assert.ok(r.ok, r.error);
    assert.equal(r.alpn, 'http/1.1');
    assert.match(r.version, /^TLSv1\.[23]$/);
  });

  await t.test('TLS 1.1 is refused', async () => {
    const r = await handshake(hub.port, { ca, minVersion: 'TLSv1', maxVersion: 'TLSv1.1',
      ciphers: 'DEFAULT:@SECLEVEL=0' });
    assert.equal(r.ok, false);
  });

  await t.test('TLS 1.2 without ECDHE or AEAD is refused', async () => {
    for (const ciphers of ['AES128-SHA', 'AES256-GCM-SHA384', 'ECDHE-RSA-AES128-SHA']) {
      const r = await handshake(hub.port, { ca, maxVersion: 'TLSv1.2', ciphers });
      assert.equal(r.ok, false, `${ciphers} was accepted`);
    }
    const good = await handshake(hub.port, { ca, maxVersion: 'TLSv1.2',
      ciphers: 'ECDHE-RSA-AES128-GCM-SHA256' });
    assert.ok(good.ok, good.error);
  });
});
