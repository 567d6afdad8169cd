'use strict';
// Shared by the corked-path tests (node clients and Chromium): a hub whose
// app accepts big events, and payloads whose corruption would show.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startHub } = require('./hub');

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

module.exports = { payload, startBigEventHub };
