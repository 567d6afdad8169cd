'use strict';
// After a burst of handshakes the hub gives freed header buffers and heap
// back (server/base/memtrim.c, server/lws/hdrpool.c; docs/DESIGN.md section 14), once
// per burst, and keeps serving: sessions opened after it (on slots whose
// pages went back to the kernel) work as before.
const test = require('node:test');
const assert = require('node:assert/strict');
const WebSocket = require('ws');
const { startHub, waitFor } = require('./lib/hub');

function established(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on('message', (m) => {
      if (JSON.parse(m).event === 'pusher:connection_established') resolve(ws);
    });
    ws.on('error', reject);
  });
}

const TRIM_RE = /memory: after (\d+) handshakes, (\d+) header buffers and \d+ KiB of heap given back/g;

test('a burst of handshakes, then one trim; sessions after it work', async (t) => {
  const hub = await startHub(['--loops', '2'], { logLevel: 'debug' });
  t.after(() => hub.stop('SIGKILL'));
  const clients = [];
  t.after(() => clients.forEach((c) => c.terminate()));
  // 400 at once: more than the 256 handshakes a trim waits for.
  const burst = [];
  for (let i = 0; i < 400; i++) burst.push(established(hub.wsUrl()));
  clients.push(...await Promise.all(burst));
  await waitFor(() => new RegExp(TRIM_RE.source).test(hub.stderr), 'the trim after the burst', 20000, 100);
  const trims = [...hub.stderr.matchAll(TRIM_RE)];
  assert.equal(trims.length, 1, 'one trim for one burst');
  // At least the 256 it waits for (all 400 unless the burst stalled for a
  // second on a loaded machine; a second trim would need 256 more).
  assert.ok(Number(trims[0][1]) >= 256, `counted the burst (${trims[0][1]})`);
  // More sessions after the trim, and every held one still open.
  for (let i = 0; i < 50; i++) clients.push(await established(hub.wsUrl()));
  assert.ok(clients.every((c) => c.readyState === WebSocket.OPEN));
  const stats = await hub.stats();
  assert.equal(stats.totals.sessions, 450);
});
