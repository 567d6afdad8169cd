'use strict';
// Raw clients for the liveness, limits and drain tests, which manage their
// clients themselves (stopAll): lib/clients.js's RawClient (the one raw
// client; it records every Pusher message, WebSocket ping and the close,
// so a test can wait on exactly what the hub did to it), opened without a
// test's cleanup, closing with 1000.
const { waitFor, assertNoSanitizerReport } = require('./hub');
const { RawClient } = require('./clients');

// Open a client on hub. opts: key, localAddress, origin, url (overrides
// the hub's URL), and any other ws option (autoPong ...).
function connect(hub, opts = {}) {
  const { key, url, origin, ...wsOpts } = opts;
  const headers = origin ? { Origin: origin } : undefined;
  return new RawClient(url || hub.wsUrl(key), { closeCode: 1000, headers, ...wsOpts });
}

// Connect and wait for pusher:connection_established.
async function open(hub, opts = {}, timeoutMs = 10000) {
  const c = connect(hub, opts);
  try {
    await c.waitEvent('pusher:connection_established', timeoutMs);
  } catch (e) {
    c.terminate();
    throw e;
  }
  return c;
}

// Subscribe to a public channel and wait for the hub to confirm it.
async function subscribe(c, channel, timeoutMs = 10000) {
  c.send({ event: 'pusher:subscribe', data: { channel } });
  await waitFor(() => c.messages.find((m) =>
    m.event === 'pusher_internal:subscription_succeeded' && m.channel === channel),
  `subscription to ${channel}`, timeoutMs, 5);
}

// The first pusher:error a client received, as {code, message}.
function firstError(c) {
  const m = c.find('pusher:error');
  return m ? m.data : null;
}

// Resident set size of a process in KiB (from /proc).
function rssKiB(pid) {
  const s = require('node:fs').readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+) kB/.exec(s);
  return m ? Number(m[1]) : 0;
}

// Whether a process runs with AddressSanitizer (its allocator quarantine
// keeps freed memory resident, so RSS bounds mean little there).
function isAsan(pid) {
  try {
    return /libasan|libclang_rt\.asan/.test(require('node:fs').readFileSync(`/proc/${pid}/maps`, 'utf8'));
  } catch (_) { return false; }
}

module.exports = {
  connect, open, subscribe, firstError, rssKiB, assertNoSanitizerReport, isAsan,
};

// Cleanup for t.after: drop the clients first (so the hub's drain has
// nothing to wait for), stop the hub, then fail on any sanitizer report
// it left (reports come at exit, so only after the stop).
async function stopAll(hub, clients = []) {
  for (const c of clients) c.terminate();
  const exit = await hub.stop();
  assertNoSanitizerReport(hub);
  return exit;
}
module.exports.stopAll = stopAll;
