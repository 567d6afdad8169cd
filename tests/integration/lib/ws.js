'use strict';
// Raw `ws` clients for the liveness, limits and drain tests: each one
// records every Pusher message, WebSocket ping and the close (code, reason,
// time), so a test can wait on exactly what the hub did to it.
const WebSocket = require('ws');
const { waitFor, SANITIZER_RE } = require('./hub');

// Decode a Pusher message; data may be a JSON string (most events) or an
// object (pusher:error).
function decode(text) {
  const m = JSON.parse(text);
  if (typeof m.data === 'string') {
    try { m.data = JSON.parse(m.data); } catch (_) { /* plain string */ }
  }
  return m;
}

// Open a client on hub. opts: key, autoPong (default true), localAddress,
// origin, url (overrides the hub's URL), and any other ws option.
function connect(hub, opts = {}) {
  const { key, url, origin, ...wsOpts } = opts;
  const c = {
    startedAt: Date.now(),
    openedAt: 0,
    messages: [],
    pings: [],
    closed: null,
    error: null,
    unexpected: null,
  };
  const headers = origin ? { Origin: origin } : undefined;
  c.ws = new WebSocket(url || hub.wsUrl(key), { headers, ...wsOpts });
  c.ws.on('open', () => { c.openedAt = Date.now(); });
  c.ws.on('message', (d) => {
    try { c.messages.push({ at: Date.now(), ...decode(String(d)) }); } catch (e) {
      c.messages.push({ at: Date.now(), event: '(not json)', raw: String(d) });
    }
  });
  c.ws.on('ping', () => { c.pings.push(Date.now()); });
  c.ws.on('close', (code, reason) => {
    c.closed = { code, reason: String(reason), at: Date.now() };
  });
  c.ws.on('error', (e) => { c.error = e; });
  c.ws.on('unexpected-response', (req, res) => {
    c.unexpected = { status: res.statusCode, at: Date.now() };
    res.resume();
    req.destroy();
  });
  c.find = (event) => c.messages.find((m) => m.event === event);
  c.all = (event) => c.messages.filter((m) => m.event === event);
  c.send = (obj) => c.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj));
  c.waitEvent = (event, timeoutMs = 10000) =>
    waitFor(() => c.find(event), `${event} on a client`, timeoutMs, 5);
  c.waitClose = (timeoutMs = 10000) =>
    waitFor(() => c.closed, 'the client to be closed', timeoutMs, 5);
  c.socketId = () => {
    const m = c.find('pusher:connection_established');
    return m && m.data.socket_id;
  };
  c.close = () => {
    if (!c.closed) {
      try { c.ws.close(1000); } catch (_) { /* not open yet */ }
    }
  };
  c.terminate = () => { try { c.ws.terminate(); } catch (_) { /* gone */ } };
  return c;
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

// Fail on any sanitizer report in the hub's stderr (the ASan build's
// binary runs the same files).
function assertNoSanitizerReport(hub) {
  const m = SANITIZER_RE.exec(hub.stderr);
  if (m) {
    const at = Math.max(0, m.index - 200);
    throw new Error(`sanitizer report in the hub's stderr:\n${hub.stderr.slice(at, at + 4000)}`);
  }
}

module.exports = {
  connect, open, subscribe, firstError, rssKiB, decode, assertNoSanitizerReport, isAsan,
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
