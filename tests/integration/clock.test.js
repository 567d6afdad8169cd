'use strict';
// A wall-clock jump closes nothing. The hub runs under libfaketime
// (Debian's faketime package) with DONT_FAKE_MONOTONIC=1, so only
// CLOCK_REALTIME moves, by an offset the test rewrites in a file mid-run
// (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE=1: read on every call). Every
// deadline (pong, idle, close, heartbeat, lws's own timeouts, libev's
// timers) must run on the monotonic clock: after realtime jumps 6 h ahead
// and then 12 h back, clients on both loops keep being pinged and none is
// closed. The hub's log timestamps (its one legitimate realtime use
// besides REST auth_timestamp) prove each jump reached it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub, waitFor } = require('./lib/hub');
const { open, connect, stopAll } = require('./lib/ws');
const { loopOf } = require('./lib/clients');

const FAKETIME_LIBS = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/faketime/libfaketimeMT.so.1',
];
const LIB = FAKETIME_LIBS.find((p) => fs.existsSync(p));
const PING = 300;
const PONG = 300;
const HOURS6 = 6 * 3600;

// The hub's most recent log line's timestamp minus now, in seconds.
function logSkewS(hub, marker) {
  const lines = hub.stderr.split('\n').filter((l) => l.includes(marker));
  const m = /^(\S+Z) /.exec(lines[lines.length - 1] || '');
  return m ? (Date.parse(m[1]) - Date.now()) / 1000 : null;
}

test('realtime jumps +6 h and -12 h: nothing closes, heartbeats go on', {
  skip: LIB ? false : 'libfaketime missing (deploy/install-deps.sh test installs faketime)',
}, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-clock-'));
  const offset = path.join(dir, 'offset');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(offset, '+0\n');
  const env = {
    LD_PRELOAD: LIB,
    FAKETIME_TIMESTAMP_FILE: offset,
    FAKETIME_NO_CACHE: '1',
    DONT_FAKE_MONOTONIC: '1',
    // The ASan build: libfaketime is preloaded ahead of the ASan runtime.
    ASAN_OPTIONS: [process.env.ASAN_OPTIONS, 'verify_asan_link_order=0'].filter(Boolean).join(':'),
  };
  const hub = await startHub(['--loops', '2', '--ping-interval', `${PING}ms`,
    '--pong-timeout', `${PONG}ms`, '--tick', '50ms', '--idle-timeout', '60s',
    '--close-timeout', '1s', '--drain-timeout', '1s'], { env });
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const on = (loop) => clients.filter((c) => loopOf(c.socketId) === loop);
  for (let i = 0; on(0).length < 2 || on(1).length < 2; i++) {
    assert.ok(i < 60, 'clients on both loops');
    clients.push(await open(hub, { localAddress: `127.0.0.${2 + (i % 8)}` }));
  }
  const noClose = () => {
    const c = clients.find((x) => x.closed);
    if (c) throw new Error(`closed ${JSON.stringify(c.closed)}`);
  };
  // n more pings on every client, failing on any close meanwhile.
  const morePings = async (n, what) => {
    const at = clients.map((c) => c.pings.length);
    await waitFor(() => { noClose(); return clients.every((c, i) => c.pings.length >= at[i] + n); },
      `${n} more pings on every client ${what}`, 15000);
    noClose();
  };
  // Make the hub log one line now (an unknown app key is logged at info)
  // and return how far its timestamp is from the real time.
  const skew = async (marker) => {
    const c = connect(hub, { key: marker });
    await c.waitClose();
    await waitFor(() => logSkewS(hub, marker) !== null, `a log line for ${marker}`);
    return logSkewS(hub, marker);
  };

  await morePings(2, 'before any jump');
  const s0 = await skew('clock-before');
  assert.ok(Math.abs(s0) < 120, `log clock ${s0} s off before the jump`);

  fs.writeFileSync(offset, `+${HOURS6}\n`);
  const s1 = await skew('clock-ahead');
  assert.ok(Math.abs(s1 - HOURS6) < 120, `log clock ${s1} s off, not +6 h: the jump did not reach the hub`);
  await morePings(3, 'after realtime jumped 6 h ahead');

  fs.writeFileSync(offset, `-${HOURS6}\n`);
  const s2 = await skew('clock-behind');
  assert.ok(Math.abs(s2 + HOURS6) < 120, `log clock ${s2} s off, not -6 h`);
  await morePings(3, 'after realtime jumped 12 h back');

  const st = await hub.stats();
  assert.equal(st.totals.sessions, clients.length);
  for (const reason of ['4201', '4202', '4100', 'peer', 'drain', 'error']) {
    assert.equal(st.totals.closed[reason], 0, `closed ${reason}: ${JSON.stringify(st.totals.closed)}`);
  }
  // Uptime is monotonic too: seconds, not hours either way.
  assert.ok(st.uptime_s >= 0 && st.uptime_s < 600, `uptime_s ${st.uptime_s}`);
  assert.ok(st.per_loop.every((l) => l.wheel.max_lateness_ms < 5000),
    `lateness ${st.per_loop.map((l) => l.wheel.max_lateness_ms)}`);
  t.diagnostic(`log clock skew ${s0.toFixed(1)} s, then ${s1.toFixed(0)} s, then ${s2.toFixed(0)} s; ` +
    `${clients.length} clients (${on(0).length}+${on(1).length}) pinged throughout, none closed`);
});
