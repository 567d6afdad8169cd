'use strict';
// RFC 7692 (permessage-deflate) negotiation to the letter, over a raw
// socket: handcrafted upgrade requests with a given Sec-WebSocket-Extensions
// (none, one line, or two lines), asserting the 101 and the exact
// Sec-WebSocket-Extensions line(s) of the answer, or their absence. The
// rules are hub/wire/pmd.h's (unit-tested in tests/unit/test_pmd.c); here
// the hub answers them on the wire, only on sessions its read bypass reads,
// and a few frames check what the answer commits it to: a compressed
// message is read, RSV1 where it may not be is 1002. One test per rule,
// beside the RFC 6455 ones (rfc6455.test.js).
//
// TLS: whether a TLS session negotiates depends on whether the hub reads
// TLS sessions itself (issue 34's TLS read bypass). LUBDUB_EXPECT_TLS_PMD=1
// expects the extension over TLS, =0 expects none; unset, the test takes
// either answer but holds the hub to it (compressed frames read when it
// negotiated, RSV1 closed 1002 when it did not).
const { test, before, after } = require('node:test');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const assert = require('node:assert/strict');
const { startHub, makeCert, assertNoSanitizerReport } = require('./lib/hub');
const { frame, OP, upgradeRequest, rawWs, expectClose } = require('./lib/rawws');

const BASE = 'permessage-deflate; server_no_context_takeover; client_no_context_takeover';
const SMWB = '; server_max_window_bits=15';
const CMWB = (v) => `; client_max_window_bits=${v}`;
const RSV1 = 4; // lib/rawws.js's rsv is the three bits RSV1..RSV3
const TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);

let hub;

before(async () => {
  hub = await startHub(['--loops', '2', '--drain-timeout', '1s', '--compression', 'on']);
});

after(async () => {
  const exit = await hub.stop();
  assertNoSanitizerReport(hub);
  assert.equal(exit.code, 0, `lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-3000)}`);
});

// An upgrade offering ext: undefined (no header), a string (one header
// line) or an array (one line each, as a client sending the header twice).
// opts: tls, path, after (bytes sent in the same write as the request, as
// a client that does not wait for the 101). The response head is kept raw (c.head) so that every
// Sec-WebSocket-Extensions line the hub sends is seen, not just the last.
function offer(t, h, ext, opts = {}) {
  let req = upgradeRequest(h, { path: opts.path });
  const lines = ext === undefined ? [] : [].concat(ext);
  req = req.slice(0, -2) + lines.map((v) => `Sec-WebSocket-Extensions: ${v}\r\n`).join('') + '\r\n';
  const request = opts.after ? Buffer.concat([Buffer.from(req, 'latin1'), opts.after]) : req;
  const c = rawWs(t, h, { request, tls: opts.tls });
  let raw = Buffer.alloc(0);
  c.sock.on('data', (d) => {
    if (c.head !== undefined) return;
    raw = Buffer.concat([raw, d]);
    const i = raw.indexOf('\r\n\r\n');
    if (i >= 0) c.head = raw.toString('latin1', 0, i);
  });
  return c;
}

// The values of every Sec-WebSocket-Extensions line of the 101.
async function answered(c, what) {
  const r = await c.status();
  assert.equal(r.status, 101, `${what}: ${r.statusLine || 'a bare close'}`);
  await c.until(() => c.head !== undefined, 'the raw response head');
  return c.head.split('\r\n').slice(1)
    .filter((l) => /^sec-websocket-extensions\s*:/i.test(l))
    .map((l) => l.slice(l.indexOf(':') + 1).trim());
}

// The text messages so far, JSON-parsed; a frame with RSV1 (the hub
// compressed it) is inflated first, as a client that negotiated would.
function texts(c) {
  const out = [];
  let parts = null;
  let compressed = false;
  for (const f of c.frames) {
    if (f.opcode === OP.TEXT) {
      parts = [f.payload];
      compressed = !!(f.rsv & RSV1);
    } else if (f.opcode === OP.CONT && parts) {
      parts.push(f.payload);
    } else {
      continue;
    }
    if (!f.fin) continue;
    let body = Buffer.concat(parts);
    parts = null;
    if (compressed) body = zlib.inflateRawSync(Buffer.concat([body, TAIL]));
    try { out.push(JSON.parse(body.toString())); } catch (_) { /* not JSON */ }
  }
  return out;
}

function message(c, pred, what) {
  return c.until(() => texts(c).find(pred), what);
}

async function established(c) {
  await message(c, (m) => m.event === 'pusher:connection_established', 'pusher:connection_established');
  return c;
}

// The hub's answer to ext on h: the lines, once the session is open.
async function answerTo(t, h, ext, opts = {}) {
  const c = offer(t, h, ext, opts);
  const lines = await answered(c, JSON.stringify(ext));
  await established(c);
  return { c, lines };
}

async function expectAnswer(t, ext, want, h = hub, opts = {}) {
  const { c, lines } = await answerTo(t, h, ext, opts);
  assert.deepEqual(lines, want === null ? [] : [want], `offer ${JSON.stringify(ext)}`);
  return c;
}

const PING = JSON.stringify({ event: 'pusher:ping', data: {} });

// RFC 7692 section 7.2.1: raw deflate, flushed with Z_SYNC_FLUSH, without
// the 00 00 ff ff it ends in.
function deflated(text) {
  const d = zlib.deflateRawSync(Buffer.from(text), { finishFlush: zlib.constants.Z_SYNC_FLUSH });
  assert.ok(d.subarray(-4).equals(TAIL), `deflate ends in ${d.subarray(-4).toString('hex')}`);
  return d.subarray(0, -4);
}

// Send f (a whole frame) and wait for one more pusher:pong.
async function pongTo(c, f, what) {
  const before = texts(c).filter((m) => m.event === 'pusher:pong').length;
  c.send(f);
  await c.until(() => texts(c).filter((m) => m.event === 'pusher:pong').length > before, what);
}

// Offers (RFC 7692 sections 5, 7.1).

test('negotiation: no Sec-WebSocket-Extensions gets a 101 without the extension', async (t) => {
  await expectAnswer(t, undefined, null);
});

test('negotiation: a bare offer (Firefox) is answered with both no_context_takeover parameters', async (t) => {
  await expectAnswer(t, 'permessage-deflate', BASE);
});

test('negotiation: client_max_window_bits without a value (Chromium, WebKit, node ws) is answered as 15', async (t) => {
  await expectAnswer(t, 'permessage-deflate; client_max_window_bits', BASE + CMWB(15));
});

test('negotiation: client_max_window_bits 8..15 is echoed; other values decline the offer', async (t) => {
  for (const v of [8, 10, 15]) {
    await expectAnswer(t, `permessage-deflate; client_max_window_bits=${v}`, BASE + CMWB(v));
  }
  for (const v of ['7', '16', '0', '09', 'x']) {
    await expectAnswer(t, `permessage-deflate; client_max_window_bits=${v}`, null);
  }
});

test('negotiation: server_max_window_bits=15 is echoed; any other value or none declines the offer', async (t) => {
  await expectAnswer(t, 'permessage-deflate; server_max_window_bits=15', BASE + SMWB);
  for (const v of ['=8', '=14', '=16', '=015', '']) {
    await expectAnswer(t, `permessage-deflate; server_max_window_bits${v}`, null);
  }
});

test('negotiation: server_ and client_no_context_takeover are accepted without a value, declined with one', async (t) => {
  await expectAnswer(t, 'permessage-deflate; server_no_context_takeover; client_no_context_takeover', BASE);
  await expectAnswer(t, 'permessage-deflate; server_no_context_takeover=1', null);
  await expectAnswer(t, 'permessage-deflate; client_no_context_takeover="x"', null);
});

test('negotiation: every parameter at once, in any order, in any case', async (t) => {
  await expectAnswer(t, 'PerMessage-Deflate; Client_Max_Window_Bits=9; SERVER_MAX_WINDOW_BITS=15; ' +
    'client_no_context_takeover; Server_No_Context_Takeover', BASE + SMWB + CMWB(9));
});

test('negotiation: quoted values and OWS around ; , =', async (t) => {
  await expectAnswer(t, 'permessage-deflate ;\tclient_max_window_bits = "10" ', BASE + CMWB(10));
  await expectAnswer(t, 'permessage-deflate;server_max_window_bits="15"', BASE + SMWB);
});

test('negotiation: an unknown parameter declines the offer, not the upgrade', async (t) => {
  await expectAnswer(t, 'permessage-deflate; foo', null);
  await expectAnswer(t, 'permessage-deflate; client_max_window_bits; mux=1', null);
});

test('negotiation: a duplicated parameter declines the offer', async (t) => {
  await expectAnswer(t, 'permessage-deflate; client_max_window_bits; client_max_window_bits=10', null);
  await expectAnswer(t, 'permessage-deflate; server_no_context_takeover; SERVER_NO_CONTEXT_TAKEOVER', null);
});

test('negotiation: a malformed offer declines it and the upgrade goes on', async (t) => {
  for (const ext of ['permessage-deflate;;', 'permessage-deflate; a=', 'permessage-deflate x',
    'permessage-deflate; client_max_window_bits="10', ',,,', 'permessage-deflate; @']) {
    await expectAnswer(t, ext, null);
  }
});

test('negotiation: of several offers the first acceptable one is taken', async (t) => {
  await expectAnswer(t, 'permessage-deflate; server_max_window_bits=10, ' +
    'permessage-deflate; client_max_window_bits=12, permessage-deflate', BASE + CMWB(12));
  await expectAnswer(t, 'permessage-deflate; client_max_window_bits=9, permessage-deflate', BASE + CMWB(9));
  await expectAnswer(t, 'permessage-deflate; foo, permessage-deflate', BASE);
});

test('negotiation: other extensions are passed over', async (t) => {
  await expectAnswer(t, 'x-webkit-deflate-frame', null);
  await expectAnswer(t, 'x-webkit-deflate-frame; no_context_takeover, permessage-deflate', BASE);
  await expectAnswer(t, 'foo; bar="a,b", permessage-deflate; client_max_window_bits', BASE + CMWB(15));
});

test('negotiation: two Sec-WebSocket-Extensions lines are read as one list, answered on one line', async (t) => {
  await expectAnswer(t, ['foo; a=1', 'permessage-deflate; client_max_window_bits'], BASE + CMWB(15));
  await expectAnswer(t, ['permessage-deflate; server_max_window_bits=9', 'permessage-deflate'], BASE);
  await expectAnswer(t, ['foo', 'bar'], null);
});

// Where the hub does not negotiate.

test('negotiation: --compression off answers without the extension', async (t) => {
  const own = await startHub(['--compression', 'off'], { t });
  await expectAnswer(t, 'permessage-deflate; client_max_window_bits', null, own);
});

test('negotiation: an app with "compression": false answers without the extension, another app with it', async (t) => {
  const own = await startHub(['--compression', 'on'], { t, apps: [
    { id: 'plain-id', key: 'plain-key', secret: 'plain-secret', compression: false },
    { id: 'app-id', key: 'app-key', secret: 'app-secret' },
  ] });
  const q = '?protocol=7&client=js&version=8.4.0';
  await expectAnswer(t, 'permessage-deflate', null, own, { path: `/app/plain-key${q}` });
  await expectAnswer(t, 'permessage-deflate', BASE, own, { path: `/app/app-key${q}` });
});

test('negotiation: --ws-direct-read off (lws reads) answers without the extension, and RSV1 is 1002', async (t) => {
  const own = await startHub(['--compression', 'on', '--ws-direct-read', 'off'], { t });
  const c = await expectAnswer(t, 'permessage-deflate; client_max_window_bits', null, own);
  c.send(frame(OP.TEXT, deflated(PING), { rsv: RSV1 }));
  await expectClose(c, 1002, 'RSV1 where lws reads');
});

test('negotiation: --event-loop poll (lws reads) answers without the extension', async (t) => {
  const own = await startHub(['--compression', 'on', '--event-loop', 'poll'], { t });
  await expectAnswer(t, 'permessage-deflate; client_max_window_bits', null, own);
});

test('negotiation: over TLS the answer follows whether the hub reads TLS sessions (LUBDUB_EXPECT_TLS_PMD)', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-rfc7692-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const { key, cert } = makeCert(dir);
  // Leak checks off, as for every TLS hub under ASan (rfc6455.test.js).
  const own = await startHub(['--compression', 'on', '--tls-cert', cert, '--tls-key', key], { t,
    env: { ASAN_OPTIONS: `${process.env.ASAN_OPTIONS || ''}:detect_leaks=0` } });
  const { c, lines } = await answerTo(t, own, 'permessage-deflate; client_max_window_bits', { tls: true });
  const expect = process.env.LUBDUB_EXPECT_TLS_PMD;
  if (expect === '1') assert.deepEqual(lines, [BASE + CMWB(15)], 'TLS sessions negotiate');
  else if (expect === '0') assert.deepEqual(lines, [], 'TLS sessions do not negotiate');
  else assert.ok(lines.length === 0 || (lines.length === 1 && lines[0] === BASE + CMWB(15)), JSON.stringify(lines));
  // Either way the hub keeps to its answer.
  if (lines.length) {
    await pongTo(c, frame(OP.TEXT, deflated(PING), { rsv: RSV1 }), 'pusher:pong to a compressed ping over TLS');
  } else {
    c.send(frame(OP.TEXT, deflated(PING), { rsv: RSV1 }));
    await expectClose(c, 1002, 'RSV1 over TLS without the extension');
  }
});

// What the answer commits the hub to (RFC 7692 section 6, RFC 6455 5.2).

test('frames: a compressed text message (RSV1, raw deflate without 00 00 ff ff) is read: pusher:ping gets pusher:pong', async (t) => {
  const c = await expectAnswer(t, 'permessage-deflate; client_max_window_bits', BASE + CMWB(15));
  await pongTo(c, frame(OP.TEXT, deflated(PING), { rsv: RSV1 }), 'pusher:pong to a compressed ping');
  // No context takeover: the next message inflates on its own.
  await pongTo(c, frame(OP.TEXT, deflated(PING), { rsv: RSV1 }), 'pusher:pong to a second compressed ping');
  // An uncompressed message on the same session is read as before.
  await pongTo(c, frame(OP.TEXT, PING), 'pusher:pong to a plain ping');
});

test('frames: a compressed message in two fragments (RSV1 on the first only) is read', async (t) => {
  const c = await expectAnswer(t, 'permessage-deflate', BASE);
  const d = deflated(PING);
  const half = Math.floor(d.length / 2);
  c.send(frame(OP.TEXT, d.subarray(0, half), { fin: false, rsv: RSV1 }));
  await pongTo(c, frame(OP.CONT, d.subarray(half)), 'pusher:pong to a fragmented compressed ping');
});

test('frames: RSV1 on a session that did not negotiate closes 1002', async (t) => {
  const none = await expectAnswer(t, undefined, null);
  none.send(frame(OP.TEXT, deflated(PING), { rsv: RSV1 }));
  await expectClose(none, 1002, 'RSV1 without an offer');
  const declined = await expectAnswer(t, 'permessage-deflate; server_max_window_bits=10', null);
  declined.send(frame(OP.TEXT, deflated(PING), { rsv: RSV1 }));
  await expectClose(declined, 1002, 'RSV1 after a declined offer');
});

test('frames: RSV1 on a continuation frame closes 1002', async (t) => {
  const plain = await expectAnswer(t, 'permessage-deflate', BASE);
  plain.send(frame(OP.TEXT, '{"event":"pusher:ping",', { fin: false }));
  plain.send(frame(OP.CONT, '"data":{}}', { rsv: RSV1 }));
  await expectClose(plain, 1002, 'RSV1 on the continuation of a plain message');
  const comp = await expectAnswer(t, 'permessage-deflate', BASE);
  const d = deflated(PING);
  comp.send(frame(OP.TEXT, d.subarray(0, 3), { fin: false, rsv: RSV1 }));
  comp.send(frame(OP.CONT, d.subarray(3), { rsv: RSV1 }));
  await expectClose(comp, 1002, 'RSV1 on the continuation of a compressed message');
});

test('frames: RSV1 on a ping closes 1002', async (t) => {
  const c = await expectAnswer(t, 'permessage-deflate', BASE);
  c.send(frame(OP.PING, 'x', { rsv: RSV1 }));
  await expectClose(c, 1002, 'RSV1 on a ping');
});

test('frames: RSV2 and RSV3 close 1002 on a session that negotiated', async (t) => {
  for (const rsv of [1, 2]) {
    const c = await expectAnswer(t, 'permessage-deflate', BASE);
    c.send(frame(OP.TEXT, PING, { rsv }));
    await expectClose(c, 1002, `rsv ${rsv}`);
  }
});

test('frames: a session whose handover is declined (a compressed frame sent with the upgrade) is closed 1002 on it', async (t) => {
  // lws holds the frame when the session is established, so the read
  // bypass does not take the socket (ws_direct_declined) and lws, which
  // reads it, fails RSV1 without an extension of its own. The 101 was
  // already sent with the extension: docs/COMPATIBILITY.md says so.
  const declined = async () => (await hub.stats()).per_loop
    .reduce((a, l) => a + (l.ws_direct_declined || 0), 0);
  const before = await declined();
  const c = offer(t, hub, 'permessage-deflate',
    { after: frame(OP.TEXT, deflated(PING), { rsv: RSV1 }) });
  assert.deepEqual(await answered(c, 'pipelined'), [BASE]);
  await expectClose(c, 1002, 'RSV1 read by lws');
  assert.ok(await declined() > before, 'the handover was declined');
});
