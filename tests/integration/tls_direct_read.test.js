'use strict';
// The read bypass on TLS sessions (server/lws/direct.c, server/lws/tlsread.c):
// an established wss session is read through its own SSL by lubdub, not by
// lws. The cases TLS adds to direct_read.test.js: records instead of
// segments (one byte a record, a message over many records), bytes OpenSSL
// holds that no socket event announces (after a read that filled the
// 64 KiB buffer mid-record, and after a pause), a first message in the
// upgrade request's own record (lws holds it: the session stays on lws's
// path) or in the next one (handed over, nothing lost), the close echo,
// a framing error, EOF with and without close_notify, many sessions, and
// TLS 1.3 KeyUpdates (handled inside SSL_read()).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { startHub, makeCert, waitFor } = require('./lib/hub');
const { assertNoSanitizerReport } = require('./lib/ws');
const { frame, OP, closePayload, upgradeRequest, rawWs } = require('./lib/rawws');
const {
  sum, pingMsg, pongs, trickle, bigAndSmall, pingInFragments, pipelinedStaysWithLws,
} = require('./lib/direct');

// The loop sleeps this long after its next heartbeat ping once armed
// (LUBDUB_TEST_STALL_MS, GET /test/stall): what a client sends meanwhile
// is all in the socket when the loop reads again.
const STALL_MS = 1500;

let hub;
let dir;

// GET path from the TLS hub (its certificate is self-signed).
function httpsGet(p) {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: hub.host, port: hub.port, path: p,
      rejectUnauthorized: false, timeout: 10000 }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout GET ${p}`)));
    req.on('error', reject);
  });
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-tlsread-'));
  const { key, cert } = makeCert(dir);
  // One loop: the stall and the counters concern every session. The
  // heartbeat pings a second after a session's last message; the raw
  // clients never answer pings, hence the long pong timeout.
  hub = await startHub(['--loops', '1', '--ws-direct-read', 'on', '--tls-cert', cert,
    '--tls-key', key, '--max-queue', '256KiB', '--max-message', '200KiB', '--ping-interval', '1s',
    '--pong-timeout', '60s'], { env: {
    LUBDUB_TEST_STALL_MS: String(STALL_MS),
    // A TLS hub reports OpenSSL's allocations as leaks at exit under
    // LeakSanitizer even when it served nothing (rfc6455.test.js).
    ASAN_OPTIONS: `${process.env.ASAN_OPTIONS || ''}:detect_leaks=0`,
  } });
  hub.stats = async () => JSON.parse((await httpsGet('/stats')).body);
});

after(async () => {
  const exit = await hub.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assertNoSanitizerReport(hub);
  assert.equal(exit.code, 0, `lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-3000)}`);
});

function tlsWs(t, opts = {}) {
  return rawWs(t, hub, { ...opts, tls: true });
}

function written(c, buf) {
  return new Promise((resolve, reject) => c.sock.write(buf, (e) => (e ? reject(e) : resolve())));
}

// Frames of exactly len bytes: masked frames of opcode op, each at most
// 131 bytes (payload <= 125), whose payloads are 'x's.
function filler(op, len) {
  const parts = [];
  let left = len;
  while (left > 0) {
    // Never leave less than the smallest frame (6 bytes).
    const n = left <= 131 ? left : Math.min(131, left - 6);
    const f = frame(op, 'x'.repeat(n - 6));
    assert.equal(f.length, n);
    parts.push(f);
    left -= n;
  }
  return Buffer.concat(parts);
}

// Make the loop sleep after its next ping, send buf while it sleeps in
// records of 16,000 bytes (so the loop's first read after the stall takes
// four whole records and part of the fifth, 65,536 bytes, and OpenSSL keeps
// the rest of the fifth), and come back when the stall is over.
async function sendDuringStall(c, buf) {
  const mark = hub.stderr.length;
  const armed = await httpsGet('/test/stall?loop=0');
  assert.equal(armed.status, 200, armed.body);
  await waitFor(() => hub.stderr.indexOf('test: stalling loop 0', mark) >= 0,
    'the stall to begin', 20000, 5);
  c.sock.setMaxSendFragment(16000);
  await written(c, buf);
}

test('TLS sessions are read by the bypass, and give lws\'s receive buffer back', async (t) => {
  const s0 = await hub.stats();
  const c = await tlsWs(t).open();
  c.send(frame(OP.TEXT, pingMsg('x')));
  await c.until(() => pongs(c).length === 1, 'pusher:pong');
  const s = await hub.stats();
  assert.ok(sum(s, 'ws_direct_sessions') > sum(s0, 'ws_direct_sessions'), JSON.stringify(s.per_loop));
  assert.ok(sum(s, 'ws_direct_reads') > sum(s0, 'ws_direct_reads'), JSON.stringify(s.per_loop));
  assert.ok(sum(s, 'ws_direct_rx_released') > sum(s0, 'ws_direct_rx_released'));
  assert.equal(sum(s, 'ws_direct_declined'), sum(s0, 'ws_direct_declined'));
  // lws's read path takes unmasked frames (docs/LWS.md, "Unmasked frames
  // are accepted on lws's read path"); the bypass fails them with 1002.
  c.send(frame(OP.TEXT, pingMsg('x2')));
  await c.until(() => pongs(c).length === 2, 'a second pusher:pong');
  c.send(frame(OP.TEXT, pingMsg('unmasked'), { mask: false }));
  const cf = await c.closeFrame();
  assert.equal(cf && cf.code, 1002);
  await c.end();
});

test('one byte a record, a message over many records', async (t) => {
  const c = await tlsWs(t).open();
  const msg = frame(OP.TEXT, pingMsg('y'.repeat(300)));
  await trickle(c, Buffer.concat([msg, msg]));
  await c.until(() => pongs(c).length === 2, 'two pusher:pongs');
  // A 190 KiB message (under --max-message): 12 records, 3 reads at least.
  const s0 = await hub.stats();
  c.send(frame(OP.TEXT, pingMsg('z'.repeat(190 * 1024))));
  c.send(frame(OP.TEXT, pingMsg('after')));
  await c.until(() => pongs(c).length === 4, 'two more pusher:pongs');
  const s = await hub.stats();
  assert.ok(sum(s, 'ws_direct_reads') - sum(s0, 'ws_direct_reads') >= 3,
    `${sum(s, 'ws_direct_reads') - sum(s0, 'ws_direct_reads')} reads`);
});

test('a 60 KiB message and many small frames in one write', async (t) => {
  await bigAndSmall(await tlsWs(t).open());
});

test('a ping inside a fragmented message is answered, the message still arrives', async (t) => {
  await pingInFragments(await tlsWs(t).open());
});

test('a first message in the upgrade request\'s own record stays with lws, nothing lost', async (t) => {
  await pipelinedStaysWithLws(hub, (request) => tlsWs(t, { request }), upgradeRequest);
});

test('a first message in the record after the request, before the 101, is handed over', async (t) => {
  const before = await hub.stats();
  // The request alone first (its own record), the message right behind
  // it (the next record) without waiting for the 101.
  const c = tlsWs(t, { request: upgradeRequest(hub) });
  c.sock.once('secureConnect', () => c.sock.write(frame(OP.TEXT, pingMsg('next record'))));
  await c.until(() => pongs(c).length === 1, 'pusher:pong for the early message');
  const s = await hub.stats();
  assert.equal(sum(s, 'ws_direct_declined'), sum(before, 'ws_direct_declined'), JSON.stringify(s.per_loop));
  assert.ok(sum(s, 'ws_direct_sessions') > sum(before, 'ws_direct_sessions'));
});

test('bytes OpenSSL holds after a full read are read with no socket event', async (t) => {
  const c = await tlsWs(t).open();
  const last = frame(OP.TEXT, pingMsg('last'));
  // 65,536 + 200 bytes: the first read after the stall ends 200 bytes
  // before the end of the fifth record, and the last message is in them.
  // Nothing else will come: only a read the socket does not ask for finds
  // it. Pongs answer nothing, so no backpressure pauses the session.
  const buf = Buffer.concat([filler(OP.PONG, 65536 + 200 - last.length), last]);
  assert.equal(buf.length, 65736);
  await sendDuringStall(c, buf);
  await c.until(() => pongs(c).length === 1, 'pusher:pong for the message in OpenSSL\'s hands');
});

test('a paused session with bytes in OpenSSL reads them once resumed', async (t) => {
  const c = await tlsWs(t).open();
  const last = frame(OP.TEXT, pingMsg('last'));
  // 7-byte frames that each earn a ~90-byte pusher:error: the read of
  // 65,536 bytes pauses the session (its queue past half of --max-queue)
  // with 200 bytes still in OpenSSL, the last message among them.
  const one = frame(OP.TEXT, 'x');
  const room = 65536 + 200 - last.length;
  let n = Math.floor(room / 7);
  if (room - 7 * n > 0 && room - 7 * n < 6) n--; // the rest takes one pong frame
  const rest = room - 7 * n;
  const buf = Buffer.concat([...Array(n).fill(one), ...(rest ? [filler(OP.PONG, rest)] : []), last]);
  assert.equal(buf.length, 65736);
  const s0 = await hub.stats();
  await sendDuringStall(c, buf);
  await c.until(() => pongs(c).length === 1, 'pusher:pong for the message in OpenSSL\'s hands', 60000);
  const s = await hub.stats();
  assert.ok(s.totals.rx_paused > s0.totals.rx_paused, 'the session was paused');
  const errors = c.frames.filter((f) => f.opcode === OP.TEXT && /pusher:error/.test(f.payload.toString()));
  assert.equal(errors.length, n);
});

test('a peer close is echoed byte for byte, then the connection ends', async (t) => {
  const c = await tlsWs(t).open();
  c.send(frame(OP.CLOSE, closePayload(1000, 'bye')));
  const cf = await c.closeFrame();
  assert.equal(cf.code, 1000);
  assert.equal(cf.reason, 'bye');
  await c.end();
});

test('EOF mid-frame, with and without close_notify, closes the session once', async (t) => {
  for (const how of ['end', 'destroy']) {
    await waitFor(async () => (await hub.stats()).totals.sessions === 0, 'earlier sessions to close');
    const before = await hub.stats();
    const c = await tlsWs(t).open();
    await written(c, frame(OP.TEXT, pingMsg('cut')).subarray(0, 20));
    // end(): close_notify, then FIN; destroy(): FIN only.
    if (how === 'end') c.sock.end(); else c.sock.destroy();
    await c.end();
    const want = before.totals.closed.peer + 1;
    let now = 0;
    await waitFor(async () => (now = (await hub.stats()).totals.closed.peer) >= want, `the peer close counted (${how})`);
    assert.equal(now, want, how);
  }
});

test('many TLS sessions at once, each handed over', async (t) => {
  const N = 100;
  const before = await hub.stats();
  const cs = [];
  for (let i = 0; i < N; i++) cs.push(tlsWs(t));
  await Promise.all(cs.map((c) => c.open()));
  for (const c of cs) c.send(frame(OP.TEXT, pingMsg('many')));
  await Promise.all(cs.map((c) => c.until(() => pongs(c).length === 1, 'pusher:pong')));
  const s = await hub.stats();
  assert.equal(sum(s, 'ws_direct_sessions') - sum(before, 'ws_direct_sessions'), N, JSON.stringify(s.per_loop));
  for (const c of cs) c.send(frame(OP.CLOSE, closePayload(1000)));
  await Promise.all(cs.map((c) => c.end()));
});

test('TLS 1.3 KeyUpdates from the peer, asked to be answered or not (openssl s_client)', async (t) => {
  await waitFor(async () => (await hub.stats()).totals.sessions === 0, 'earlier sessions to close');
  const before = await hub.stats();
  // s_client's interactive commands: a line 'K' sends a KeyUpdate that
  // asks for ours, 'k' one that does not. The frames go through its stdin.
  const sc = spawn('openssl', ['s_client', '-connect', `${hub.host}:${hub.port}`, '-tls1_3',
    '-servername', 'localhost'], { stdio: ['pipe', 'pipe', 'pipe'] });
  t.after(() => sc.kill());
  let out = '';
  let err = '';
  sc.stdout.on('data', (d) => { out += d.toString('latin1'); });
  sc.stderr.on('data', (d) => { err += d.toString('latin1'); });
  const count = (re) => (out.match(re) || []).length;
  const until = (pred, what) => waitFor(() => {
    if (sc.exitCode !== null) throw new Error(`s_client exited ${sc.exitCode}: ${err}`);
    return pred();
  }, what, 20000, 5);
  await until(() => /Verify return code/.test(out) || /Verify return code/.test(err), 'the handshake');
  sc.stdin.write(upgradeRequest(hub));
  await until(() => /connection_established/.test(out), 'connection_established');
  let n = 0;
  const roundTrip = async (what) => {
    sc.stdin.write(frame(OP.TEXT, pingMsg(what)));
    n++;
    await until(() => count(/pusher:pong/g) >= n, `pusher:pong ${n} (${what})`);
  };
  await roundTrip('before');
  for (const cmd of ['K', 'k', 'K']) {
    const k = (err.match(/KEYUPDATE/g) || []).length;
    sc.stdin.write(`${cmd}\n`);
    await until(() => (err.match(/KEYUPDATE/g) || []).length > k, `s_client's KEYUPDATE (${cmd})`);
    await roundTrip(`after ${cmd}`);
  }
  const s = await hub.stats();
  assert.equal(sum(s, 'ws_direct_sessions') - sum(before, 'ws_direct_sessions'), 1);
  assert.equal(s.totals.sessions, 1);
});
