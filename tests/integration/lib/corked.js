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

// A two-loop hub allowing 300 kB events; stopped and cleaned up after t.
async function startBigEventHub(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-cork-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'hub.json');
  fs.writeFileSync(cfg, JSON.stringify({ apps: [{
    id: 'app-id', key: 'app-key', secret: 'app-secret', max_event_bytes: 300000,
  }] }));
  const hub = await startHub(['--loops', '2', '--config', cfg, '--max-queue', '4MiB']);
  t.after(() => hub.stop());
  return hub;
}

// Corking, shown by construction rather than by timing: the ten events of
// one batch_events request are queued in one pass of the hub's loop, so one
// write per subscriber carries all ten however fast or slow the machine is.
// (Separate requests may or may not share a write: that depends on how
// they race.) received() resolves to how many "batch" events the
// subscribers got in all; subscribers is how many there are.
const BATCHES = 4;
const PER_BATCH = 10;
async function assertBatchesCorked(hub, server, channel, received, subscribers) {
  const before = (await hub.stats()).totals;
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
  const after = (await hub.stats()).totals;
  const frames = after.msgs_out - before.msgs_out;
  const writes = after.writes - before.writes;
  assert.ok(frames >= want, `${frames} frames out for ${want} deliveries`);
  // About ten frames a write; two leaves room for a stray ping or a
  // partial write without ever passing for a path that writes frames one
  // by one.
  assert.ok(frames >= 2 * writes, `frames were corked (${frames} frames in ${writes} writes)`);
  return { frames, writes };
}

module.exports = { payload, startBigEventHub, assertBatchesCorked };
