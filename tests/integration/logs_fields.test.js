'use strict';
// The fields of JSON log lines (docs/LOGS.md) and the "<N>" priority
// prefix, read off the real binary: a refused subscription, a bad message,
// a close with its code and a close by the peer each carry event, app,
// socket_id, peer and what fits (channel, code, reason); --log-priority on
// starts each line with its sd-daemon(3) priority, text or JSON; auto turns
// it on only when stderr is the stream $JOURNAL_STREAM names (how systemd
// tells a service its stderr is the journal).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startHub, waitFor, once } = require('./lib/hub');
const { RawClient } = require('./lib/clients');
const { startRedis } = require('./lib/redis');

const BINARY = process.env.LUBDUB_BINARY ||
  path.join(__dirname, '..', '..', 'build', 'lubdub');

// Every stderr line parsed, each checked to be one JSON object.
function jsonLines(stderr) {
  const lines = stderr.split('\n');
  assert.equal(lines.pop(), '', 'stderr ends with a newline');
  return lines.map((l) => {
    let e;
    assert.doesNotThrow(() => { e = JSON.parse(l); }, `not JSON: ${JSON.stringify(l)}`);
    assert.equal(typeof e.msg, 'string', l);
    return e;
  });
}

test('JSON lines carry event, app, socket_id, channel, code, reason and peer', async (t) => {
  const hub = await startHub(['--log-format', 'json', '--loops', '1',
    '--max-message', '1KiB'], { t, logLevel: 'debug' });

  // A subscription refused (bad signature), then a bad message.
  const c = await new RawClient(hub.wsUrl()).open();
  c.ws.send(JSON.stringify({ event: 'pusher:subscribe',
    data: { channel: 'private-fields', auth: 'app-key:0000' } }));
  await c.waitEvent('pusher:subscription_error');
  c.ws.send('{"event": "pusher:subscribe", "data": ');
  await c.waitEvent('pusher:error');
  // A close the hub makes (1009, info) and one the peer makes (debug).
  const big = await new RawClient(hub.wsUrl()).open();
  big.ws.send(JSON.stringify({ event: 'client-x', channel: 'x', data: 'y'.repeat(2048) }));
  assert.equal((await big.waitClose()).code, 1009);
  c.ws.close();
  await c.waitClose();
  await waitFor(() => /closed by the peer/.test(hub.stderr), 'the peer close line');
  await waitFor(() => /closed 1009/.test(hub.stderr), 'the 1009 close line');

  const entries = jsonLines(hub.stderr);
  const one = (pred, what) => {
    const e = entries.find(pred);
    assert.ok(e, `no ${what} line in:\n${hub.stderr}`);
    return e;
  };
  const sub = one((e) => e.event === 'subscribe_refused', 'subscribe_refused');
  assert.equal(sub.level, 'info');
  assert.equal(sub.app, 'app-id');
  assert.equal(sub.socket_id, c.socketId);
  assert.equal(sub.channel, 'private-fields');
  assert.equal(sub.reason, 'bad_signature');
  assert.equal(sub.status, 401);
  assert.equal(sub.peer, '127.0.0.1');
  assert.match(sub.msg, /subscribe private-fields refused/);

  const bad = one((e) => e.event === 'bad_message', 'bad_message');
  assert.equal(bad.app, 'app-id');
  assert.equal(bad.socket_id, c.socketId);
  assert.equal(bad.peer, '127.0.0.1');
  assert.equal(typeof bad.reason, 'string');
  assert.ok(bad.reason.length > 0);
  assert.match(bad.msg, /^socket \S+: bad message: /);

  const tooBig = one((e) => e.event === 'session_close' && e.code === 1009,
    'session_close 1009');
  assert.equal(tooBig.level, 'info');
  assert.equal(tooBig.app, 'app-id');
  assert.equal(tooBig.socket_id, big.socketId);
  assert.equal(tooBig.reason, '1009');
  // The address of a connection that is ending is asked of the kernel,
  // which no longer knows it once the client's reset got there first (a
  // matter of scheduling): when the line has a peer, it is the client's.
  if (tooBig.peer !== undefined) assert.equal(tooBig.peer, '127.0.0.1');
  assert.ok(Number.isInteger(tooBig.duration_ms) || tooBig.duration_ms === undefined);

  const left = one((e) => e.event === 'session_close' && e.socket_id === c.socketId,
    'session_close of the peer');
  assert.equal(left.level, 'debug');
  assert.equal(left.reason, 'peer');
  assert.equal(left.code, undefined, 'a peer close has no code of the hub');
  assert.equal(left.app, 'app-id');
  if (left.peer !== undefined) assert.equal(left.peer, '127.0.0.1');

  const open = one((e) => e.event === 'session_open' && e.socket_id === c.socketId,
    'session_open');
  assert.equal(open.app, 'app-id');
  assert.equal(open.peer, '127.0.0.1');

  const listen = one((e) => e.event === 'listen' && !e.reason, 'listen');
  assert.equal(listen.url, `http://127.0.0.1:${hub.port}`);
  // No line of this hub has a node: it runs without --redis.
  assert.ok(entries.every((e) => e.node === undefined));
});

test('peer-supplied bytes in a field stay escaped, the line valid JSON', async (t) => {
  const hub = await startHub(['--log-format', 'json', '--loops', '1'], { t });
  const c = await new RawClient(hub.wsUrl()).open();
  // The parser's reason quotes what it could not read.
  c.ws.send('\u0001"\\\u2028x\ud83d\ude00');
  await c.waitEvent('pusher:error');
  await waitFor(() => /"bad_message"/.test(hub.stderr), 'the bad message line');
  const e = jsonLines(hub.stderr).find((x) => x.event === 'bad_message');
  assert.equal(e.socket_id, c.socketId);
  assert.match(e.reason, /\u0001/, JSON.stringify(e));
});

test('--log-priority on: <N> before each text and JSON line', async (t) => {
  for (const format of ['text', 'json']) {
    // An out-of-range test hook is one warning at start.
    const hub = await startHub(['--log-format', format, '--log-priority', 'on'],
      { t, env: { LUBDUB_TEST_STALL_MS: '999999' } });
    await waitFor(() => /listening on/.test(hub.stderr), 'the listening line');
    const lines = hub.stderr.split('\n').filter((l) => l);
    for (const l of lines) assert.match(l, /^<[3467]>/, l);
    const warn = lines.find((l) => /LUBDUB_TEST_STALL_MS=999999 ignored/.test(l));
    assert.ok(warn, hub.stderr);
    assert.ok(warn.startsWith('<4>'), warn);
    const info = lines.find((l) => /listening on/.test(l));
    assert.ok(info.startsWith('<6>'), info);
    if (format === 'json') {
      const e = JSON.parse(warn.slice(3));
      assert.equal(e.level, 'warn');
      assert.equal(e.event, 'test_hook');
      assert.equal(JSON.parse(info.slice(3)).level, 'info');
    } else {
      assert.match(info, /^<6>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info  loop=0 /);
    }
  }
  // off (and the default, auto, on a pipe): no prefix.
  const off = await startHub(['--log-priority', 'off'], { t });
  await waitFor(() => /listening on/.test(off.stderr), 'the listening line');
  assert.match(off.stderr, /^\d{4}-/);
});

test('with --redis every line names the node; the link is a redis_link event', async (t) => {
  const redis = await startRedis(t);
  const hub = await startHub(['--log-format', 'json', '--redis', redis.url(),
    '--node-id', 'logs-n1', ...redis.nodeArgs()], { t });
  await waitFor(() => /backplane: up/.test(hub.stderr), 'the backplane to come up');
  const entries = jsonLines(hub.stderr);
  const up = entries.find((e) => e.event === 'redis_link' && e.reason === 'up');
  assert.ok(up, hub.stderr);
  assert.equal(up.node, 'logs-n1');
  assert.match(up.url, /^127\.0\.0\.1:\d+$/);
  assert.ok(!/@|password/.test(up.url), 'no credentials in url');
  const connecting = entries.find((e) => e.event === 'redis_link' && e.reason === 'connecting');
  assert.ok(connecting, hub.stderr);
  // From the node id's derivation on, every line has it.
  const at = entries.indexOf(connecting);
  for (const e of entries.slice(at)) assert.equal(e.node, 'logs-n1', JSON.stringify(e));
});

// The hub with stderr into a file; JOURNAL_STREAM as given. Resolves with
// what it wrote there once it listened and drained.
async function runIntoFile(t, journalStream) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-journal-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'stderr');
  const fd = fs.openSync(file, 'w');
  const st = fs.fstatSync(fd, { bigint: true });
  const env = { ...process.env };
  delete env.JOURNAL_STREAM;
  const js = journalStream(st);
  if (js !== undefined) env.JOURNAL_STREAM = js;
  const child = spawn(BINARY, ['--port', '0', '--bind', '127.0.0.1', '--drain-timeout', '1s'],
    { stdio: ['ignore', 'pipe', fd], env });
  fs.closeSync(fd);
  t.after(() => { try { child.kill('SIGKILL'); } catch (_) { /* gone */ } });
  const exited = once(child, 'exit', 30000);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  await waitFor(() => /listening on/.test(out), 'the hub to listen');
  child.kill('SIGTERM');
  const [code] = await exited;
  assert.equal(code, 0);
  return fs.readFileSync(file, 'utf8');
}

test('--log-priority auto: on when $JOURNAL_STREAM names stderr, else off', async (t) => {
  const journal = await runIntoFile(t, (st) => `${st.dev}:${st.ino}`);
  assert.match(journal, /^<6>.*listening on/m, journal);
  for (const l of journal.split('\n').filter((x) => x)) assert.match(l, /^<[3467]>/, l);

  const other = await runIntoFile(t, (st) => `${st.dev}:${st.ino + 1n}`);
  assert.match(other, /^\d{4}-.*listening on/m, other);
  assert.ok(!/^</m.test(other), other);

  const unset = await runIntoFile(t, () => undefined);
  assert.ok(!/^</m.test(unset), unset);
});
