'use strict';
// The fd limit the hub runs with (--fd-limit, docs/CONFIG.md "File
// descriptors"): chosen at startup from the flag, --max-connections or the
// hard limit, said in one line, and when it runs out the hub pauses
// accepting, counts it and keeps serving the sessions it has.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const WebSocket = require('ws');
const { startHub, waitFor, getJson, BINARY } = require('./lib/hub');

// [soft, hard] of the hub's RLIMIT_NOFILE, from /proc.
function nofile(pid) {
  const line = fs.readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n').find((l) => l.startsWith('Max open files'));
  const f = line.trim().split(/\s+/);
  return [f[3], f[4]].map((v) => (v === 'unlimited' ? Infinity : Number(v)));
}

function established(ws) {
  return new Promise((resolve, reject) => {
    ws.on('message', (m) => {
      if (JSON.parse(m).event === 'pusher:connection_established') resolve();
    });
    ws.on('error', reject);
    ws.on('close', () => reject(new Error('closed before established')));
  });
}

test('--fd-limit N: the soft limit is N and running out pauses accepts, counted', async (t) => {
  const hub = await startHub(['--loops', '2', '--fd-limit', '128']);
  t.after(() => hub.stop('SIGKILL'));
  assert.equal(nofile(hub.pid)[0], 128);
  // stderr's line may come after stdout's listening line (two pipes).
  await waitFor(() => /fd limit 128 \(--fd-limit; hard limit \d+\)/.test(hub.stderr),
    'the fd limit line');
  // One session held from the start: it must survive the shortage.
  const first = new WebSocket(hub.wsUrl());
  await established(first);
  const clients = [];
  t.after(() => { first.terminate(); clients.forEach((c) => c.terminate()); });
  let opened = 0;
  for (let i = 0; i < 200; i++) {
    const ws = new WebSocket(hub.wsUrl());
    ws.on('open', () => { opened++; });
    ws.on('error', () => {});
    clients.push(ws);
  }
  await waitFor(() => /pausing accepts/.test(hub.stderr), 'the first pause for lack of fds');
  assert.ok(opened < 200, `not all 200 connected under a limit of 128 (${opened})`);
  assert.equal(first.readyState, WebSocket.OPEN, 'the held session is untouched');
  // Give descriptors back: new sessions get in again, the pauses were counted.
  clients.splice(0).forEach((c) => c.terminate());
  const stats = await waitFor(async () => {
    const s = await getJson(hub.url('/stats')).catch(() => null);
    return s && s.totals.sessions <= 1 ? s : null;
  }, 'the flood closed');
  assert.ok(stats.per_loop.reduce((n, l) => n + l.accept_paused, 0) > 0, 'pauses counted');
  const again = new WebSocket(hub.wsUrl());
  t.after(() => again.terminate());
  await established(again);
  assert.equal(first.readyState, WebSocket.OPEN);
});

test('--max-connections sizes the limit: N plus a reserve of 1024', async (t) => {
  const hub = await startHub(['--loops', '1', '--max-connections', '40']);
  t.after(() => hub.stop('SIGKILL'));
  assert.equal(nofile(hub.pid)[0], 40 + 1024);
  assert.match(hub.stderr, /fd limit 1064 \(--max-connections plus a reserve/);
});

test('without either: the hard limit; --fd-limit above it: the hard limit, with a warning', async (t) => {
  const wrap = ['prlimit', '--nofile=256:2048'];
  const auto = await startHub(['--loops', '1'], { wrap });
  t.after(() => auto.stop('SIGKILL'));
  assert.deepEqual(nofile(auto.pid), [2048, 2048]);
  assert.match(auto.stderr, /info .*fd limit 2048 \(the hard limit; hard limit 2048\)/);
  const over = await startHub(['--loops', '1', '--fd-limit', '4096'], { wrap });
  t.after(() => over.stop('SIGKILL'));
  assert.deepEqual(nofile(over.pid), [2048, 2048]);
  assert.match(over.stderr, /warn .*fd limit 2048 \(--fd-limit is above the hard limit/);
});

test('--check-config refuses a limit the hub cannot run with, in one line', () => {
  for (const [args, re] of [
    [['--fd-limit', '10'], /--fd-limit: 10 is too few file descriptors/],
    [['--fd-limit', '10000001'], /--fd-limit/],
    [['--fd-limit', 'many'], /--fd-limit/],
  ]) {
    const r = spawnSync(BINARY, [...args, '--check-config'], { encoding: 'utf8' });
    assert.equal(r.status, 2, `${args.join(' ')} exits 2`);
    assert.match(r.stderr, re);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
  const ok = spawnSync(BINARY, ['--fd-limit', '0', '--check-config'],
    { encoding: 'utf8', env: { ...process.env, LUBDUB_FD_LIMIT: '4096' } });
  assert.equal(ok.status, 0, ok.stderr);
  const env = spawnSync(BINARY, ['--check-config'],
    { encoding: 'utf8', env: { ...process.env, LUBDUB_FD_LIMIT: '12' } });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /fd-limit/);
});
