'use strict';
// Shared by the corked-path tests (node clients and Chromium): a hub whose
// app accepts big events, and payloads whose corruption would show.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./hub');

// Deterministic payload of n characters.
function payload(tag, n) {
  let s = `${tag}:`;
  while (s.length < n) s += String.fromCharCode(97 + (s.length * 7) % 26);
  return s.slice(0, n);
}

// A hub (two loops unless told) allowing 300 kB events; stopped and
// cleaned up after t.
async function startBigEventHub(t, loops = 2) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-cork-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'hub.json');
  fs.writeFileSync(cfg, JSON.stringify({ apps: [{
    id: 'app-id', key: 'app-key', secret: 'app-secret', max_event_bytes: 300000,
  }] }));
  const hub = await startHub(['--loops', String(loops), '--config', cfg, '--max-queue', '4MiB']);
  t.after(() => hub.stop());
  return hub;
}

// Corking, shown by construction rather than by timing: the ten events of
// one batch_events request are queued in one pass of the loop that serves
// the request, so one write per subscriber on that loop carries all ten
// however fast or slow the machine is. Another loop gets the ten through
// its inbox and may wake for the first before the rest arrive (a loaded
// machine showed 360 frames in 192 writes over both loops), so the check is
// per loop: the best loop corks. (Separate requests may or may not share
// a write: that depends on how they race.) received() resolves to how many
// "batch" events the subscribers got in all; subscribers is how many there
// are. The serving loop is not known, so it must hold subscribers: run one
// loop, or hold subscribers on every loop.
const BATCHES = 4;
const PER_BATCH = 10;
async function assertBatchesCorked(hub, server, channel, received, subscribers) {
  const beforeStats = await hub.stats();
  const before = beforeStats.totals;
  for (let b = 0; b < BATCHES; b++) {
    const batch = [];
    for (let i = 0; i < PER_BATCH; i++) {
      batch.push({ channel, name: 'batch', data: JSON.stringify({ b, i }) });
    }
    const r = await server.triggerBatch(batch);
    assert.equal(r.status, 200);
  }
  const want = BATCHES * PER_BATCH * subscribers;
  await waitFor(async () => (await received()) >= want, `${want} batched events`, 20000);
  const afterStats = await hub.stats();
  const after = afterStats.totals;
  const frames = after.msgs_out - before.msgs_out;
  const writes = after.writes - before.writes;
  assert.ok(frames >= want, `${frames} frames out for ${want} deliveries`);
  // About ten frames a write on the serving loop; two leaves room for a
  // stray ping or a partial write without ever passing for a path that
  // writes frames one by one (one frame a write, or fewer, on every loop).
  const perLoop = afterStats.per_loop.map((l, i) => ({
    frames: l.msgs_out - beforeStats.per_loop[i].msgs_out,
    writes: l.writes - beforeStats.per_loop[i].writes,
  }));
  const corked = perLoop.some((l) => l.frames >= 2 * l.writes && l.frames > 0);
  assert.ok(corked, `frames were corked on the serving loop (${JSON.stringify(perLoop)})`);
  return { frames, writes };
}

module.exports = { payload, startBigEventHub, assertBatchesCorked };
