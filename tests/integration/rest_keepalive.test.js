'use strict';
// REST keep-alive for POST (server/base/http_post.h): a backend's SDK on a
// keep-alive agent publishes every event on one TCP connection, and the lws
// 4.1.6 trap stays shut: bytes pipelined behind a POST body get the POST
// answered with "Connection: close" and the connection closed, never a
// busy loop (docs/LWS.md, "A request pipelined behind a POST body").
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const PusherServer = require('pusher');
const { startHub, waitFor, responses, getJson } = require('./lib/hub');
const { rawClient, signedPath, APP } = require('./lib/clients');

function cpuTicks(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime
}

function signedPost(name, channel, data = 'x') {
  const body = JSON.stringify({ name, channels: [channel], data });
  const p = signedPath('POST', `/apps/${APP.id}/events`, {}, body);
  return `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}


// Sends the chunks (all at once, or each after the previous one's answer
// with waitAnswers). Ends when the server closes, or by itself once every
// request it expects an answer for (expect) was answered without a close.
function exchange(hub, chunks, { waitAnswers = false, expect = chunks.length } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(hub.port, hub.host);
    let data = '';
    let next = 0;
    const send = () => { if (next < chunks.length) sock.write(chunks[next++]); };
    sock.setNoDelay(true);
    sock.setTimeout(15000, () => { sock.destroy(); reject(new Error(`timeout: ${JSON.stringify(data)}`)); });
    sock.on('connect', () => {
      if (waitAnswers) send();
      else for (const c of chunks) send();
    });
    sock.on('data', (d) => {
      data += d;
      const r = responses(data);
      if (r.some((x) => /\r\nconnection: close/i.test(x.head))) return; // the server closes
      if (waitAnswers && r.length === next && next < chunks.length) send();
      else if (r.length >= expect) sock.end();
    });
    sock.on('close', () => resolve(data));
    sock.on('error', reject);
  });
}

test('the pusher SDK on a keep-alive agent publishes every event on one connection', async (t) => {
  const hub = await startHub(['--loops', '2']);
  t.after(() => hub.stop());
  const sub = await rawClient(t, hub);
  await sub.subscribed('kept');
  let connects = 0;
  let closes = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (...a) => {
    connects++;
    const s = create(...a);
    s.on('close', () => { closes++; });
    return s;
  };
  t.after(() => agent.destroy());
  const sdk = new PusherServer({
    appId: APP.id, key: APP.key, secret: APP.secret,
    host: hub.host, port: hub.port, useTLS: false, agent,
  });
  const N = 20;
  for (let i = 0; i < N; i++) {
    const res = await sdk.trigger('kept', 'n', String(i));
    assert.equal(res.status, 200);
    assert.notEqual(res.headers.get('connection'), 'close');
  }
  // Other POSTs too: a batch and a refused (401) one keep the connection.
  const batch = await sdk.triggerBatch([{ channel: 'kept', name: 'n', data: 'b' }]);
  assert.equal(batch.status, 200);
  await waitFor(() => sub.count('n') === N + 1, 'every event delivered');
  assert.deepEqual(sub.msgs.filter((m) => m.event === 'n').slice(0, N).map((m) => m.data),
    Array.from({ length: N }, (_, i) => String(i)));
  assert.equal(connects, 1, `TCP connections opened for ${N + 1} POSTs`);
  assert.equal(closes, 0, 'the hub closed the keep-alive connection');
});

// The answer is written once the loop's read pass is over (server/
// http_post.h), from a libev prepare watcher or after lws_service() with
// poll: the same keep-alive exchange under the other event loop.
test('keep-alive POSTs under --event-loop poll: one connection, every answer', async (t) => {
  const hub = await startHub(['--loops', '1', '--event-loop', 'poll']);
  t.after(() => hub.stop());
  const chunks = [];
  for (let i = 0; i < 10; i++) chunks.push(signedPost('p' + i, 'c1'));
  chunks.push('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  const out = await exchange(hub, chunks, { waitAnswers: true });
  assert.equal(responses(out).length, 11, out);
  assert.equal((out.match(/HTTP\/1\.1 200/g) || []).length, 11, out);
  assert.doesNotMatch(out, /connection: close/i);
});

// Over TLS the answer after the read pass must not miss input that the TLS
// layer holds decrypted (srv_http_post_rx_pending() covers it): an SDK's
// keep-alive agent still gets every answer on one connection.
test('keep-alive POSTs over TLS: one connection, every answer', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-restka-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes',
    '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
  const hub = await startHub(['--loops', '1', '--tls-cert', cert, '--tls-key', key]);
  t.after(() => hub.stop());
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: fs.readFileSync(cert) });
  t.after(() => agent.destroy());
  let connects = 0;
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (...a) => { connects++; return create(...a); };
  const N = 20;
  for (let i = 0; i < N; i++) {
    const body = JSON.stringify({ name: 't', channels: ['tls'], data: String(i) });
    const res = await new Promise((resolve, reject) => {
      const req = https.request({
        host: '127.0.0.1', port: hub.port, method: 'POST', agent,
        path: signedPath('POST', `/apps/${APP.id}/events`, {}, body),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      }, (r) => { r.resume(); r.on('end', () => resolve(r)); });
      req.setTimeout(15000, () => req.destroy(new Error('timeout')));
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(res.statusCode, 200);
    assert.notEqual(res.headers.connection, 'close');
  }
  assert.equal(connects, 1);
});

// A client that half-closes right behind its POST still gets its answer:
// lws reads nothing of the connection between the body and the answer, so
// it cannot see the FIN first.
test('a POST whose client half-closes right behind it is answered', async (t) => {
  const hub = await startHub(['--loops', '1']);
  t.after(() => hub.stop());
  const sub = await rawClient(t, hub);
  await sub.subscribed('fin');
  const N = 20;
  let answered = 0;
  for (let i = 0; i < N; i++) {
    const out = await new Promise((resolve, reject) => {
      const sock = net.connect(hub.port, hub.host);
      let data = '';
      sock.setTimeout(15000, () => { sock.destroy(); reject(new Error(`timeout: ${data}`)); });
      sock.on('connect', () => { sock.write(signedPost('f', 'fin', String(i))); sock.end(); });
      sock.on('data', (d) => { data += d; });
      sock.on('close', () => resolve(data));
      sock.on('error', reject);
    });
    const r = responses(out);
    if (r.length === 1 && /^HTTP\/1\.1 200/.test(r[0].head)) answered++;
  }
  assert.equal(answered, N);
  await waitFor(() => sub.count('f') === N, 'every event delivered');
});

test('a request after a POST answer on the same connection is served', async (t) => {
  const hub = await startHub([]);
  t.after(() => hub.stop());
  const out = await exchange(hub, [signedPost('a', 'c1'), signedPost('b', 'c1'),
    'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'], { waitAnswers: true });
  assert.equal(responses(out).length, 3, out);
  assert.equal((out.match(/HTTP\/1\.1 200/g) || []).length, 3, out);
  assert.doesNotMatch(out, /connection: close/i);
  assert.match(out, /ok\n$/);
});

// The regression test of the lws 4.1.6 busy loop: a request pipelined
// behind a POST body, in the same packet or a later one, on a keep-alive
// connection. The POST is answered once, with Connection: close; the
// pipelined request is not; the loop does not spin.
for (const [name, chunks] of [
  ['in the same packet', (a, b) => [a + b]],
  ['after the body, in its own packet', (a, b) => [a, b]],
  ['with the body split around it', (a, b) => [a.slice(0, a.length - 5), a.slice(-5) + b]],
]) {
  test(`bytes pipelined behind a POST body (${name}): one answer, a close, no busy loop`, async (t) => {
    const hub = await startHub(['--loops', '1']);
    t.after(() => hub.stop());
    const sub = await rawClient(t, hub);
    await sub.subscribed('pipe');
    let closes = 0;
    for (const second of [signedPost('second', 'pipe'), 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n']) {
      const before = cpuTicks(hub.pid);
      const t0 = Date.now();
      const out = await exchange(hub, chunks(signedPost('first', 'pipe'), second), { expect: 2 });
      const r = responses(out);
      assert.ok(r.length >= 1 && r.length <= 2, out);
      assert.match(r[0].head, /^HTTP\/1\.1 200/, out);
      // Either the hub saw the pipelined bytes before answering (then the
      // answer says close and the second request is not answered) or the
      // answer went out first and the second request is an ordinary
      // keep-alive one, answered.
      if (/\r\nconnection: close/i.test(r[0].head)) {
        assert.equal(r.length, 1, out);
        closes++;
      } else {
        assert.equal(r.length, 2, out);
        assert.match(r[1].head, /^HTTP\/1\.1 200/, out);
      }
      // The hub stays idle afterwards: a spinning loop burns a core.
      await waitFor(() => Date.now() - t0 >= 1000, 'a second after the exchange', 5000, 100);
      const ticks = cpuTicks(hub.pid) - before;
      assert.ok(ticks < 60, `hub used ${ticks} CPU ticks in about 1 s after a pipelined POST`);
    }
    await waitFor(() => sub.count('first') >= 2, 'both first events delivered');
    assert.equal(sub.count('first'), 2);
    // In the same packet the hub always sees the pipelined bytes first.
    if (name === 'in the same packet') assert.equal(closes, 2);
    // Each such close is counted.
    const st = await getJson(hub.url('/stats'));
    assert.equal(st.per_loop.reduce((a, l) => a + l.http_post_closes, 0), closes);
    // Still serving.
    const ok = await exchange(hub, ['GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    assert.match(ok, /^HTTP\/1\.1 200/);
  });
}
