'use strict';
// Logs an operator can read: with --log-format json every stderr line is one
// JSON object with ts, level, loop and msg, even when a peer puts control
// characters or bytes that are not UTF-8 into what gets logged; the events
// an operator wants (4201, refusals, bad input, session ends at debug, the
// drain) are there. In text format every line starts with time, level and
// loop, and a peer cannot break a line in two.
const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const WebSocket = require('ws');
const { startHub, request, waitFor, once } = require('./lib/hub');
const { RawClient } = require('./lib/clients');

const LEVELS = new Set(['error', 'warn', 'info', 'debug']);

// A raw upgrade request whose path carries bytes no client library sends.
function rawUpgrade(hub, pathBytes) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(hub.port, hub.host);
    let got = Buffer.alloc(0);
    sock.on('connect', () => {
      sock.write(Buffer.concat([
        Buffer.from('GET '), pathBytes,
        Buffer.from(' HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'),
      ]));
    });
    sock.on('data', (d) => { got = Buffer.concat([got, d]); });
    sock.on('error', () => resolve(got));
    sock.on('close', () => resolve(got));
    sock.setTimeout(5000, () => { sock.destroy(); reject(new Error('raw upgrade timed out')); });
  });
}

test('--log-format json writes one valid JSON object per line', async (t) => {
  const hub = await startHub(['--log-format', 'json', '--loops', '2',
    '--ping-interval', '300ms', '--pong-timeout', '300ms', '--heartbeat-interval', '100ms',
    '--tick', '20ms', '--drain-timeout', '1s'], { logLevel: 'debug' });
  t.after(() => hub.stop('SIGKILL'));
  // The raw bytes too: every line must be UTF-8, not merely parse in JS.
  const raw = [];
  hub.child.stderr.on('data', (d) => raw.push(d));

  // A client that leaves normally (a debug line), one that never answers
  // pings (4201, info), bad input, an unknown key, an unsigned REST call.
  const leaver = (await new RawClient(hub.wsUrl()).open()).ws;
  const left = once(leaver, 'close');
  leaver.close();
  await left;
  const silent = (await new RawClient(hub.wsUrl(), { autoPong: false }).open()).ws;
  const silentClosed = once(silent, 'close', 20000);
  const talker = (await new RawClient(hub.wsUrl()).open()).ws;
  talker.send('{"event": "pusher:subscribe", "data": ');
  talker.send('\u0001not json\u00ff');
  const [code] = await silentClosed;
  assert.equal(code, 4201);
  const unknown = new WebSocket(hub.wsUrl('no-such-key'));
  unknown.on('error', () => {});
  await once(unknown, 'close');
  await rawUpgrade(hub, Buffer.from([0x2f, 0x61, 0x70, 0x70, 0x2f, 0x6b, 0xff, 0xfe, 0x22, 0x5c]));
  await rawUpgrade(hub, Buffer.from('/app/k%FF%0A%22x%01'));
  assert.equal((await request('POST', hub.url('/apps/app-id/events'), '{}',
    { 'content-type': 'application/json' })).status, 401);

  await waitFor(() => /closed 4201/.test(hub.stderr), 'the 4201 line');
  await waitFor(() => /closed by the peer/.test(hub.stderr), 'the peer close line');
  talker.terminate();
  assert.equal((await hub.stop('SIGTERM')).code, 0);

  const lines = hub.stderr.split('\n');
  assert.equal(lines.pop(), '', 'stderr ends with a newline');
  assert.ok(lines.length >= 6, hub.stderr);
  const entries = lines.map((l) => {
    let e;
    assert.doesNotThrow(() => { e = JSON.parse(l); }, `not JSON: ${JSON.stringify(l)}`);
    assert.match(e.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, l);
    assert.ok(!Number.isNaN(Date.parse(e.ts)), l);
    assert.ok(LEVELS.has(e.level), l);
    assert.ok(Number.isInteger(e.loop) && e.loop >= 0 && e.loop < 2, l);
    assert.equal(typeof e.msg, 'string', l);
    assert.ok(e.msg.length > 0, l);
    assert.ok(!/[\ud800-\udfff]/.test(e.msg), `lone surrogate in ${l}`);
    return e;
  });
  const has = (level, re) => entries.some((e) => e.level === level && re.test(e.msg));
  assert.ok(has('info', /listening on/), 'startup');
  assert.ok(has('info', /closed 4201 \(4201, Pong reply not received in time\) app=app-id/), '4201');
  assert.ok(has('debug', /socket \S+: open app=app-id peer=127\.0\.0\.1/), 'open at debug');
  assert.ok(has('debug', /socket \S+: closed by the peer app=app-id after \d+ms/), 'peer close at debug');
  assert.ok(has('info', /bad message/), 'bad input');
  assert.ok(has('info', /unknown app key/), 'unknown key');
  assert.ok(has('info', /REST .* refused/), 'REST refusal');
  assert.ok(has('info', /SIGTERM: draining/), 'drain start');
  assert.ok(has('info', /drained; bye/), 'drain end');
  // Peer bytes that are not UTF-8 arrive as U+FFFD, quotes and control
  // characters escaped, so nothing a peer sends splits or corrupts a line.
  assert.ok(has('info', /unknown app key in \/app\/k\ufffd\ufffd"\\$/), 'escaped path');
  assert.ok(has('info', /bad message: .*\u0001/), 'a control character, escaped');
  assert.doesNotThrow(() => new TextDecoder('utf-8', { fatal: true })
    .decode(Buffer.concat(raw)), 'stderr is UTF-8');
});

test('text lines start with time, level and loop; peers cannot split them', async (t) => {
  const hub = await startHub(['--log-format', 'text', '--loops', '1'], { logLevel: 'debug' });
  t.after(() => hub.stop('SIGKILL'));
  const ws = (await new RawClient(hub.wsUrl()).open()).ws;
  ws.send('\u0001\nfake 2026-01-01T00:00:00.000Z error loop=0 x');
  await waitFor(() => /bad message/.test(hub.stderr), 'the bad message line');
  ws.close();
  await rawUpgrade(hub, Buffer.from('/app/k%0Afake 2026-01-01T00:00:00.000Z error loop=0 x'));
  await rawUpgrade(hub, Buffer.from([0x2f, 0x61, 0x70, 0x70, 0x2f, 0x0a, 0xff]));
  await waitFor(() => /closed by the peer/.test(hub.stderr), 'the close line');
  assert.equal((await hub.stop('SIGTERM')).code, 0);
  const lines = hub.stderr.split('\n');
  assert.equal(lines.pop(), '');
  for (const l of lines) {
    assert.match(l, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn |info |debug) loop=\d+ \S/, l);
  }
  assert.ok(!lines.some((l) => l.startsWith('fake ')), 'a peer forged a line');
  assert.ok(lines.some((l) => /bad message: .*\\x01/.test(l)), 'control bytes as \\xNN');
});
