'use strict';
// Out of file descriptors, the hub pauses accepting (about 100 ms at a time),
// logs that at most once a second, and never spins; once descriptors free
// up it accepts again.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const WebSocket = require('ws');
const { startHub, waitFor, getJson } = require('./lib/hub');

function cpuTicks(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime
}

test('EMFILE pauses accepts without spinning', async (t) => {
  const hub = await startHub(['--loops', '1'], { wrap: ['prlimit', '--nofile=150:150'] });
  t.after(() => hub.stop('SIGKILL'));
  const clients = [];
  t.after(() => clients.forEach((c) => c.terminate()));
  let opened = 0;
  for (let i = 0; i < 250; i++) {
    const ws = new WebSocket(hub.wsUrl());
    ws.on('open', () => { opened++; });
    ws.on('error', () => {});
    clients.push(ws);
  }
  await waitFor(() => /pausing accepts/.test(hub.stderr), 'the first EMFILE pause');
  const before = cpuTicks(hub.pid);
  const lines0 = (hub.stderr.match(/pausing accepts/g) || []).length;
  const t0 = Date.now();
  await waitFor(() => Date.now() - t0 >= 2000, 'two seconds out of descriptors', 5000, 100);
  const ticks = cpuTicks(hub.pid) - before;
  const lines = (hub.stderr.match(/pausing accepts/g) || []).length - lines0;
  assert.ok(opened > 50 && opened < 250, `some, not all, connected (${opened})`);
  // 200 ticks = 2 s of a core: a spinning accept loop burns most of it.
  assert.ok(ticks < 60, `hub used ${ticks} CPU ticks in 2 s while out of fds`);
  assert.ok(lines <= 3, `${lines} pause lines logged in 2 s (at most one a second)`);
  // Free descriptors: the hub accepts again and counted the pauses.
  clients.splice(0, 150).forEach((c) => c.terminate());
  const stats = await waitFor(() => getJson(hub.url('/stats')).catch(() => null), '/stats after fds free up');
  assert.ok(stats.per_loop[0].accept_paused > 0);
});
