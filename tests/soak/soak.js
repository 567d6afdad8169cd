'use strict';
// make soak: every kind of load at once against one hub, for SOAK_SECONDS
// (default 1800), with a report line every SOAK_REPORT_SECONDS (default 60)
// and at the end. See docs/RELIABILITY.md (## Soak) for what is checked and
// why each invariant is exact.
//
// Load (all paced; nothing depends on machine speed):
//   churn       connect/close cycles in every way a peer can end
//   fan-out     REST publishes (pusher SDK) to subscribed raw clients,
//               windowed against their receipts, checked in order, no gaps
//   presence    pusher-js clients joining and leaving a presence channel,
//               watched by a pusher-js member that must see every change
//   client ev.  raw clients exchanging client events on private channels
//   slow        one reader per period that stops reading under a flood,
//               expected to be closed with 4100
//   black-holed peers in a network namespace whose traffic is dropped,
//               expected to be closed with 4201 (root + `ip netns` only)
//
// At each report the load is paused (every worker parks between two
// operations), the driver waits for what is in flight (deliveries, joins,
// the black-holed peers' 4201), then samples /stats and /proc until the
// invariants hold exactly, or fails.
//
// Exit status 0 only if every check held; 1 with "soak: FAIL ..." lines.
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const http = require('node:http');
const { spawn } = require('node:child_process');
const { createRequire } = require('node:module');

const INTEG = path.resolve(__dirname, '..', 'integration');
const req = createRequire(path.join(INTEG, 'package.json'));
const WebSocket = req('ws');
const PusherServer = req('pusher');
const { startHub, waitFor } = require(path.join(INTEG, 'lib', 'hub'));
const { rssKiB, isAsan, assertNoSanitizerReport } = require(path.join(INTEG, 'lib', 'ws'));
const { sign, pusherClient, connected } = require(path.join(INTEG, 'lib', 'clients'));
const { netns } = require(path.join(INTEG, 'lib', 'netns'));
// A real secret: with black-holed peers the hub binds a non-loopback address.
const APP = { id: 'soak-id', key: 'soak-key', secret: require('node:crypto').randomBytes(16).toString('hex') };

const num = (name, dflt) => {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}=${v}: want a positive number`);
  return n;
};
const SOAK_SECONDS = num('SOAK_SECONDS', 1800);
const REPORT_SECONDS = num('SOAK_REPORT_SECONDS', 60);
const PERIODS = Math.max(1, Math.round(SOAK_SECONDS / REPORT_SECONDS));
// Hard bound on the whole run: load time plus generous pauses.
const DEADLINE_MS = (SOAK_SECONDS * 1.5 + 300) * 1000;
// RSS: the baseline is the first report after the warm-up (20% of the run,
// at least 2 minutes); the last report may not exceed it by more than 5%.
const WARMUP_S = Math.max(120, 0.2 * SOAK_SECONDS);
const RSS_DRIFT_LIMIT = 0.05;

// Hub timings. Generous pings so a starved but alive node client never
// misses a pong deadline; a black-holed peer is still found in
// ping + heartbeat + pong + close timeout (~18 s).
const LOOPS = 2;
const HUB_ARGS = ['--loops', String(LOOPS), '--ping-interval', '5s', '--pong-timeout', '10s',
  '--idle-timeout', '60s', '--close-timeout', '2s', '--max-queue', '256KiB',
  '--drain-timeout', '2s', '--log-level', 'warn'];
// Honest clients send a data message this often (idle timeout is 60 s).
const KEEPALIVE_MS = 15000;

// Load sizes (modest: an ASan build on a busy 2-core box keeps up).
const FAN_CHANNELS = 3;
const SUBS_PER_CHANNEL = 8;
const PUBLISH_GAP_MS = 300;       // per channel: ~10 publishes/s in all
const RECEIPT_WINDOW = 20;        // publishes a subscriber may lag behind
const CHAT_PAIRS = 2;
const CHAT_GAP_MS = 500;
const PRESENCE_CYCLERS = 4;
const CHURN_WORKERS = 3;
const CHURN_GAP_MS = 100;
const SLOW_PAYLOAD = 'x'.repeat(8000);
const SLOW_MAX_BYTES = 256 * 1024 * 1024;
const BH_PER_PERIOD = 2;

const t0 = Date.now();
const elapsed = () => Math.round((Date.now() - t0) / 1000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (s) => process.stdout.write(`${s}\n`);

// ---- failures ---------------------------------------------------------------

const failures = [];
function fail(msg) {
  if (failures.length < 50) failures.push(msg);
  log(`soak: FAIL ${msg}`);
}

async function within(promise, ms, what) {
  let timer;
  const to = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out (${ms} ms) waiting for ${what}`)), ms); });
  try { return await Promise.race([promise, to]); } finally { clearTimeout(timer); }
}

// ---- pause gate: every worker parks here between two operations ----------

const gate = {
  paused: false,
  stopped: false,
  parked: new Set(),
  waiters: [],
  async pass(who) {
    while (this.paused && !this.stopped) {
      this.parked.add(who);
      await new Promise((r) => this.waiters.push(r));
      this.parked.delete(who);
    }
    return !this.stopped;
  },
  resume() { this.paused = false; const w = this.waiters; this.waiters = []; w.forEach((r) => r()); },
  stop() { this.stopped = true; this.resume(); },
};
const workers = new Set(); // names of running worker loops

// ---- honest raw clients -------------------------------------------------------

const honest = new Set(); // every long-lived honest client (raw and pusher-js)
const closeLog = {};      // close code -> count, over all honest clients
let false4201 = 0;

function noteClose(who, code, expected) {
  closeLog[code] = (closeLog[code] || 0) + 1;
  if (code === 4201) { false4201++; fail(`false 4201: ${who} answered pings and was closed for silence`); } else if (!expected) fail(`unexpected close ${code} of ${who}`);
}

class Peer {
  // plain: do not offer permessage-deflate (node ws offers it by default,
  // so every other peer of the soak compresses).
  constructor(url, who, { longLived = true, plain = false } = {}) {
    this.who = who;
    this.longLived = longLived;
    this.closing = false;     // we started the close
    this.closed = null;
    this.socketId = null;
    this.errors = [];
    this.subscribed = new Set();
    this.lastSeq = {};        // channel -> last tick seq
    this.chatGot = {};        // channel -> client events received
    this.handlers = [];
    this.ws = new WebSocket(url, plain ? { perMessageDeflate: false } : {});
    this.ws.on('message', (d) => this.onMessage(String(d)));
    this.ws.on('close', (code) => {
      this.closed = { code, at: Date.now() };
      if (this.longLived) { honest.delete(this); noteClose(this.who, code, this.closing); } else if (code === 4201) noteClose(this.who, code, false);
      this.emit({ event: '(close)', code });
    });
    this.ws.on('error', () => { /* the close follows */ });
    if (longLived) honest.add(this);
  }

  emit(m) { for (const h of this.handlers) h(m); }

  onMessage(text) {
    let m;
    try { m = JSON.parse(text); } catch (_) { return; }
    if (typeof m.data === 'string') { try { m.data = JSON.parse(m.data); } catch (_) { /* plain */ } }
    if (m.event === 'pusher:connection_established') {
      this.socketId = m.data.socket_id;
    } else if (m.event === 'pusher:error') {
      const code = m.data && m.data.code;
      this.errors.push(code);
      if (code === 4201) { false4201++; fail(`false 4201: pusher:error 4201 to ${this.who}, which answers pings`); }
    } else if (m.event === 'pusher_internal:subscription_succeeded') {
      this.subscribed.add(m.channel);
    } else if (m.event === 'tick') {
      const want = (this.lastSeq[m.channel] || 0) + 1;
      if (m.data.seq !== want) fail(`${this.who} on ${m.channel}: got seq ${m.data.seq}, want ${want}`);
      this.lastSeq[m.channel] = m.data.seq;
    } else if (m.event === 'client-chat') {
      this.chatGot[m.channel] = (this.chatGot[m.channel] || 0) + 1;
    }
    this.emit(m);
  }

  get open() { return this.socketId !== null && !this.closed; }
  send(obj) { if (!this.closed) this.ws.send(JSON.stringify(obj)); }
  subscribe(channel) {
    const data = { channel };
    if (/^(private-|presence-)/.test(channel)) data.auth = `${APP.key}:${sign(APP.secret, `${this.socketId}:${channel}`)}`;
    this.send({ event: 'pusher:subscribe', data });
  }

  async ready(timeoutMs = 15000) {
    await waitFor(() => this.socketId || this.closed, `${this.who} to connect`, timeoutMs, 10);
    if (!this.socketId) throw new Error(`${this.who} closed before connecting (${this.closed.code})`);
    return this;
  }

  async subscribed_(channel, timeoutMs = 15000) {
    this.subscribe(channel);
    await waitFor(() => this.subscribed.has(channel) || this.closed, `${this.who} subscribed to ${channel}`, timeoutMs, 10);
    if (!this.subscribed.has(channel)) throw new Error(`${this.who} closed while subscribing`);
  }

  close() { this.closing = true; try { this.ws.close(1000); } catch (_) { /* not open */ } }
  terminate() { this.closing = true; try { this.ws.terminate(); } catch (_) { /* gone */ } }
}

// ---- hub helpers ---------------------------------------------------------------

let hub;
let restSdk;
const noKeepAlive = new http.Agent({ keepAlive: false });
// Connection: close, so no idle keep-alive socket of ours holds a hub fd.
// No agent (a fresh connection each time) and Connection: close. Not the
// harness's request(): node 20's keep-alive global agent puts a socket
// whose request said Connection: close back in its pool (the hub's answer
// does not repeat the header), the hub closes it as asked, and every
// second request on it hangs up. A request that still fails is retried,
// counted and shown in the summary: it is not what the soak judges.
let statsRetries = 0;
function getStats() {
  return new Promise((resolve, reject) => {
    const r = http.request(hub.url('/stats'), { agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => { try { resolve(JSON.parse(body)); } catch (e) { reject(e); } });
    });
    r.on('error', reject);
    r.setTimeout(10000, () => r.destroy(new Error('timeout GET /stats')));
    r.end();
  });
}
async function stats() {
  for (let i = 0; ; i++) {
    try {
      return await getStats();
    } catch (e) {
      if (i >= 2 || hub.exit) throw e;
      statsRetries++;
      log(`soak: note: GET /stats failed (${e.message}); retrying`);
      await sleep(100);
    }
  }
}
const fdCount = () => fs.readdirSync(`/proc/${hub.pid}/fd`).length;

// ---- black-holed peers (network namespace) -----------------------------------

// 169.254.N.4/30: disjoint from blackhole.test.js's 169.254.N.0/30.
const ns = netns('soak', 1);
const HOST_IP = ns.hostIp;
const bhProcs = new Set();
const netnsWhyNot = () => ns.whyNot();
const netnsSetup = () => ns.setup();
const blackholeOn = () => ns.drop();
const blackholeOff = () => ns.undrop();

function killBh() {
  for (const p of bhProcs) { try { process.kill(p.pid, 'SIGKILL'); } catch (_) { /* gone */ } }
  bhProcs.clear();
}
function netnsCleanup() {
  killBh();
  ns.cleanup();
}

// One namespaced peer (tests/integration/lib/netns-client.js): answers pings,
// reports open / ping / close as JSON lines.
function bhPeer() {
  const p = { events: [], err: '' };
  p.proc = spawn('ip', ns.exec(process.execPath,
    [path.join(INTEG, 'lib', 'netns-client.js'), hub.wsUrl(APP.key)]), { stdio: ['ignore', 'pipe', 'pipe'] });
  p.pid = p.proc.pid; // ip netns exec execs node in place
  bhProcs.add(p);
  let out = '';
  p.proc.stdout.on('data', (d) => {
    out += d;
    let i;
    while ((i = out.indexOf('\n')) >= 0) {
      try { p.events.push(JSON.parse(out.slice(0, i))); } catch (_) { /* partial */ }
      out = out.slice(i + 1);
    }
  });
  p.proc.stderr.on('data', (d) => { p.err += d; });
  p.count = (ev) => p.events.filter((e) => e.ev === ev).length;
  return p;
}

// ---- load ------------------------------------------------------------------------

const counters = {
  churn: 0, churnTimeouts: 0, publishes: 0, joins: 0, leaves: 0, chat: 0,
  slow: 0, blackholed: 0,
};
let bh = null; // the current period's black-hole cycle (a promise)

async function worker(name, fn) {
  workers.add(name);
  try {
    while (await gate.pass(name)) await fn();
  } catch (e) {
    fail(`${name}: ${e.message}`);
  } finally {
    workers.delete(name);
  }
}

// Churn: one cycle, ended one of four ways (as churn.test.js).
function churnCycle(i) {
  return new Promise((resolve) => {
    const p = new Peer(hub.wsUrl(APP.key), `churn#${i}`, { longLived: false });
    const kind = i % 4;
    const timer = setTimeout(() => { counters.churnTimeouts++; p.terminate(); }, 15000);
    p.handlers.push((m) => {
      if (m.event === '(close)') { clearTimeout(timer); resolve(); } else if (m.event === 'pusher:connection_established') {
        if (kind === 0) p.close();
        else p.subscribe(`churn-${i % 50}`);
      } else if (m.event === 'pusher_internal:subscription_succeeded') p.close();
    });
    if (kind === 3) setImmediate(() => p.terminate());
    else if (kind === 1) p.ws.on('open', () => p.terminate());
  });
}

function startChurn() {
  let i = 0;
  for (let w = 0; w < CHURN_WORKERS; w++) {
    worker(`churn-${w}`, async () => {
      await churnCycle(i++);
      counters.churn++;
      await sleep(CHURN_GAP_MS);
    });
  }
}

// Fan-out: one publisher per channel (so its order is the delivery order),
// never more than RECEIPT_WINDOW ahead of its slowest subscriber.
const subs = {};       // channel -> [Peer]
const published = {};  // channel -> last seq published
async function startFanout() {
  for (let c = 0; c < FAN_CHANNELS; c++) {
    const ch = `fan-${c}`;
    subs[ch] = [];
    published[ch] = 0;
    for (let k = 0; k < SUBS_PER_CHANNEL; k++) {
      const p = await new Peer(hub.wsUrl(APP.key), `subscriber ${ch}#${k}`).ready();
      await p.subscribed_(ch);
      subs[ch].push(p);
    }
  }
  for (const ch of Object.keys(subs)) {
    worker(`publisher-${ch}`, async () => {
      const seq = published[ch] + 1;
      await waitFor(() => subs[ch].every((p) => (p.lastSeq[ch] || 0) >= seq - RECEIPT_WINDOW),
        `subscribers of ${ch} to receive up to ${seq - RECEIPT_WINDOW}`, 60000, 10);
      const r = await restSdk.trigger(ch, 'tick', { seq });
      if (r.status !== 200) throw new Error(`trigger on ${ch}: HTTP ${r.status}`);
      published[ch] = seq;
      counters.publishes++;
      await sleep(PUBLISH_GAP_MS);
    });
  }
}

// Client events: pairs on private channels, each side sending in turn.
const chats = []; // {ch, a, b, sentA, sentB}
async function startChat() {
  for (let k = 0; k < CHAT_PAIRS; k++) {
    const ch = `private-chat-${k}`;
    const a = await new Peer(hub.wsUrl(APP.key), `chat ${ch} a`).ready();
    const b = await new Peer(hub.wsUrl(APP.key), `chat ${ch} b`).ready();
    await a.subscribed_(ch);
    await b.subscribed_(ch);
    const pair = { ch, a, b, sentA: 0, sentB: 0 };
    chats.push(pair);
    worker(`chat-${k}`, async () => {
      pair.a.send({ event: 'client-chat', channel: ch, data: { n: ++pair.sentA } });
      pair.b.send({ event: 'client-chat', channel: ch, data: { n: ++pair.sentB } });
      counters.chat += 2;
      await sleep(CHAT_GAP_MS);
    });
  }
}

// Presence: one watcher stays in presence-soak; cyclers join and leave.
const fakeT = { cleanups: [], after(fn) { this.cleanups.push(fn); } };
const pusherJs = []; // {client, who, closing}
const joined = new Set();
let watcherChannel;
function watchPusherJs(client, who) {
  const rec = { client, who, closing: false, socketId: null };
  honest.add(rec);
  pusherJs.push(rec);
  client.connection.bind('error', (e) => {
    const code = e && e.data && e.data.code;
    if (code === 4201) { false4201++; fail(`false 4201: pusher:error 4201 to ${who} (pusher-js)`); } else if (code) fail(`pusher:error ${code} to ${who} (pusher-js)`);
  });
  client.connection.bind('state_change', ({ previous, current }) => {
    if (previous === 'connected' && current !== 'connected' && !rec.closing && !gate.stopped) fail(`${who} (pusher-js) left 'connected' for '${current}'`);
  });
  return rec;
}
const hubRef = () => ({ host: hub.host, port: hub.port });

async function startPresence() {
  const w = pusherClient(fakeT, hubRef(), { app: APP, presence: { user_id: 'watcher', user_info: { role: 'watcher' } } });
  watchPusherJs(w, 'presence watcher');
  await connected(w);
  watcherChannel = w.subscribe('presence-soak');
  await waitFor(() => watcherChannel.subscribed, 'the presence watcher to join', 15000);
  for (let i = 0; i < PRESENCE_CYCLERS; i++) {
    const c = pusherClient(fakeT, hubRef(), { app: APP, presence: { user_id: `cycler-${i}`, user_info: { i } } });
    watchPusherJs(c, `presence cycler ${i}`);
    await connected(c);
    worker(`presence-${i}`, async () => {
      const ch = c.subscribe('presence-soak');
      await waitFor(() => ch.subscribed, `cycler ${i} to join`, 15000);
      joined.add(i);
      counters.joins++;
      // A pause may find it here, joined: the watcher must count it.
      await gate.pass(`presence-${i}-joined`);
      await sleep(2000 + Math.random() * 3000);
      c.unsubscribe('presence-soak');
      joined.delete(i);
      counters.leaves++;
      await sleep(1000 + Math.random() * 2000);
    });
  }
}

// Keep-alive: every long-lived honest client sends a data message now and
// then (pusher:ping), so --idle-timeout never applies to them.
function startKeepalive() {
  return setInterval(() => {
    for (const h of honest) {
      if (h instanceof Peer) h.send({ event: 'pusher:ping', data: {} });
      else if (h.client.connection.state === 'connected') h.client.send_event('pusher:ping', {});
    }
  }, KEEPALIVE_MS);
}

// Slow reader: stops reading, a flood follows until the hub closes it 4100.
async function slowCycle() {
  const before = (await stats()).totals.closed['4100'];
  // Plain: its queue fills with SLOW_PAYLOAD's bytes; compressed, 8 KB of
  // 'x' is a few dozen bytes and the flood would have to be 200 times longer.
  const p = await new Peer(hub.wsUrl(APP.key), 'slow reader', { longLived: false, plain: true }).ready();
  await p.subscribed_('slow');
  p.ws._socket.pause();
  let bytes = 0;
  let done = false;
  const flood = async () => {
    while (!done && bytes < SLOW_MAX_BYTES && !gate.stopped) {
      const r = await restSdk.trigger('slow', 'blob', { blob: SLOW_PAYLOAD });
      if (r.status !== 200) throw new Error(`trigger on slow: HTTP ${r.status}`);
      bytes += SLOW_PAYLOAD.length;
    }
  };
  const watch = async () => {
    while (!done && bytes < SLOW_MAX_BYTES && !gate.stopped) {
      if ((await stats()).totals.closed['4100'] > before) done = true;
      else await sleep(50);
    }
  };
  await Promise.all([flood(), flood(), watch()]);
  if (!done) throw new Error(`no 4100 after ${bytes} bytes to a reader that stopped reading`);
  p.ws._socket.resume();
  await waitFor(() => p.closed, 'the slow reader to see its close', 30000, 20);
  if (![4100, 1006].includes(p.closed.code)) fail(`slow reader closed ${p.closed.code}, want 4100 (or 1006 if killed)`);
  counters.slow++;
}

// Black-holed peers: connect from the namespace, answer a ping, then all
// their traffic is dropped; the hub must close each with 4201. Resolves
// when the hub counted every one, then kills them and lifts the drop.
async function bhCycle() {
  const peers = Array.from({ length: BH_PER_PERIOD }, bhPeer);
  await waitFor(() => peers.every((p) => p.count('open') && p.count('ping') >= 1),
    `black-hole peers to connect and answer a ping (${peers.map((p) => p.err).join(' ')})`, 30000, 50);
  blackholeOn();
  counters.blackholed += peers.length;
  try {
    await waitFor(async () => (await stats()).totals.closed['4201'] >= counters.blackholed,
      `the hub to close ${counters.blackholed} black-holed peers with 4201`, 90000, 200);
    for (const p of peers) if (p.count('close')) fail('a black-holed peer saw a close frame');
  } finally {
    killBh();
    blackholeOff();
  }
}

// ---- reports -------------------------------------------------------------------

const reports = [];
let fdBase;

function believedSessions() {
  let n = 0;
  for (const h of honest) {
    if (h instanceof Peer) { if (h.open) n++; } else if (h.client.connection.state === 'connected') n++;
  }
  return n;
}

// Sample until every invariant holds at once (quiet hub: transitions left
// are a close being finalised, an HTTP socket being released), or fail
// after timeoutMs with the last sample's differences.
async function sampleExact(expectSessions, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    const fds = fdCount();
    const s = await stats();
    const wrong = [];
    if (s.totals.sessions !== expectSessions) wrong.push(`sessions ${s.totals.sessions} != ${expectSessions} the driver has connected`);
    if (fds !== fdBase + s.totals.sessions) wrong.push(`fds ${fds} != ${fdBase} + sessions ${s.totals.sessions}`);
    for (const l of s.per_loop) {
      const want = l.sessions + l.wheel.pong_armed + 1;
      if (l.wheel.pending !== want) {
        wrong.push(`loop ${l.loop}: wheel pending ${l.wheel.pending} != sessions ${l.sessions} + pong ${l.wheel.pong_armed} + 1`);
      }
    }
    last = { fds, s, wrong };
    if (!wrong.length || Date.now() > deadline) return last;
    await sleep(100);
  }
}

async function quiesce() {
  gate.paused = true;
  await within(waitFor(() => [...workers].every((w) => gate.parked.has(w) || gate.parked.has(`${w}-joined`)),
    'every worker to park', 60000, 20), 65000, 'workers to park');
  if (bh) { const b = bh; bh = null; await b; }
  for (const ch of Object.keys(subs)) {
    await waitFor(() => subs[ch].every((p) => p.lastSeq[ch] === published[ch] || p.closed),
      `every subscriber of ${ch} to receive all ${published[ch]} publishes`, 30000, 10);
  }
  for (const c of chats) {
    await waitFor(() => (c.b.chatGot[c.ch] || 0) === c.sentA && (c.a.chatGot[c.ch] || 0) === c.sentB,
      `client events on ${c.ch} to arrive (${c.b.chatGot[c.ch] || 0}/${c.sentA}, ${c.a.chatGot[c.ch] || 0}/${c.sentB})`, 30000, 10);
  }
  if (watcherChannel) {
    await waitFor(() => watcherChannel.members.count === 1 + joined.size,
      `the presence watcher to count ${1 + joined.size} members (has ${watcherChannel.members.count})`, 30000, 20);
  }
}

async function report(n, final) {
  await quiesce();
  const expect = believedSessions();
  const { fds, s, wrong } = await sampleExact(expect);
  for (const w of wrong) fail(`at report ${n}: ${w}`);
  const closed = s.totals.closed;
  if (closed['4201'] !== counters.blackholed) fail(`hub counted ${closed['4201']} closes 4201, ${counters.blackholed} peers were black-holed`);
  if (closed['4100'] !== counters.slow) fail(`hub counted ${closed['4100']} closes 4100, ${counters.slow} slow readers`);
  if (closed['4202']) fail(`hub closed ${closed['4202']} sessions as idle (4202); every honest client sends data every ${KEEPALIVE_MS / 1000} s`);
  const rss = rssKiB(hub.pid);
  const pending = s.per_loop.reduce((a, l) => a + l.wheel.pending, 0);
  const pong = s.per_loop.reduce((a, l) => a + l.wheel.pong_armed, 0);
  const r = { n, t: elapsed(), rss, fds, sessions: s.totals.sessions, pending, pong, queued: s.totals.queued_bytes };
  reports.push(r);
  const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  log(`soak ${final ? 'final' : `${String(n).padStart(2)}/${PERIODS}`} t=${String(r.t).padStart(5)}s ` +
    `rss=${rss}KiB fds=${fds} (${fdBase}+${fds - fdBase}) sessions=${s.totals.sessions} ` +
    `(driver ${expect}) pending=${pending} (${s.totals.sessions}+${pong} pong+${s.per_loop.length}) ` +
    `queued=${s.totals.queued_bytes}B | churn ${counters.churn} publishes ${counters.publishes} ` +
    `joins ${counters.joins} chat ${counters.chat} slow ${counters.slow} blackholed ` +
    `${counters.blackholed} | closed 4201=${closed['4201']} 4100=${closed['4100']} peer=${closed.peer} ` +
    `error=${closed.error} | load ${load}${wrong.length ? ' | NOT EXACT' : ''}`);
}

function rssVerdict(asan) {
  if (asan) { log('soak: RSS drift not checked: ASan build (its quarantine keeps freed memory resident)'); return; }
  const post = reports.filter((r) => r.t >= WARMUP_S);
  if (post.length < 2) { log(`soak: RSS drift not checked: fewer than 2 reports after the ${WARMUP_S} s warm-up`); return; }
  const base = post[0];
  const last = post[post.length - 1];
  const vals = post.map((r) => r.rss);
  const drift = (last.rss - base.rss) / base.rss;
  const noise = (Math.max(...vals) - Math.min(...vals)) / base.rss;
  log(`soak: RSS baseline ${base.rss} KiB (report ${base.n}, t=${base.t}s, after ${WARMUP_S} s warm-up), ` +
    `last ${last.rss} KiB: drift ${(drift * 100).toFixed(2)}% (limit ${RSS_DRIFT_LIMIT * 100}%); ` +
    `post-warm-up range ${Math.min(...vals)}..${Math.max(...vals)} KiB (${(noise * 100).toFixed(2)}% of baseline)`);
  if (drift > RSS_DRIFT_LIMIT) fail(`RSS drifted ${(drift * 100).toFixed(2)}% after the warm-up (${base.rss} -> ${last.rss} KiB)`);
}

// ---- main ----------------------------------------------------------------------

async function main() {
  const why = netnsWhyNot();
  if (why) log(`soak: note: black-holed peers skipped (${why}); the rest runs`);
  else netnsSetup();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-soak-'));
  const cfg = path.join(dir, 'hub.json');
  fs.writeFileSync(cfg, JSON.stringify({ apps: [{ ...APP, client_events: true }] }));
  try {
    hub = await startHub([...HUB_ARGS, '--config', cfg], { bind: why ? '127.0.0.1' : HOST_IP, logLevel: 'warn', startTimeoutMs: 30000 });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const asan = isAsan(hub.pid);
  restSdk = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret,
    host: hub.host, port: hub.port, useTLS: false, agent: noKeepAlive });
  log(`soak: hub ${hub.pid} (${asan ? 'ASan' : 'release'}) on ${hub.host}:${hub.port}, ${HUB_ARGS.join(' ')}; ` +
    `${SOAK_SECONDS} s, a report every ${REPORT_SECONDS} s (${PERIODS}), RSS warm-up ${WARMUP_S} s`);

  // Warm every path once (ws, subscribe, REST, /stats), then measure the
  // fds the hub holds with no sessions: listeners, epoll, eventfds, pipes.
  const w = await new Peer(hub.wsUrl(APP.key), 'warm-up', { longLived: false }).ready();
  await w.subscribed_('warm');
  await restSdk.trigger('warm', 'x', {});
  w.close();
  await waitFor(async () => (await stats()).totals.sessions === 0, 'the warm-up session to end', 15000);
  await sleep(300);
  const base = [];
  for (let i = 0; i < 5; i++) { base.push(fdCount()); await sleep(100); }
  fdBase = Math.min(...base);
  const s0 = await stats();
  log(`soak: with 0 sessions the hub holds ${fdBase} fds (samples ${base.join(',')}) and ` +
    `${s0.per_loop.map((l) => l.wheel.pending).join('+')} wheel entries (one heartbeat per loop)`);

  await startFanout();
  await startChat();
  await startPresence();
  const keepalive = startKeepalive();
  startChurn();

  try {
    for (let n = 1; n <= PERIODS && !failures.length; n++) {
      if (Date.now() - t0 > DEADLINE_MS) { fail(`overran the ${DEADLINE_MS / 1000} s bound`); break; }
      gate.resume();
      const periodEnd = Date.now() + REPORT_SECONDS * 1000;
      if (!why) bh = bhCycle().catch((e) => fail(`black-holed peers: ${e.message}`));
      // The slow reader starts a little into the period, ends well before it.
      await sleep(Math.min(5000, REPORT_SECONDS * 100));
      await slowCycle().catch((e) => fail(`slow reader: ${e.message}`));
      await sleep(Math.max(0, periodEnd - Date.now()));
      await report(n, n === PERIODS);
    }
  } finally {
    clearInterval(keepalive);
    gate.stop();
  }
  await waitFor(() => workers.size === 0, 'the workers to stop', 60000, 20).catch((e) => fail(e.message));
  if (bh) await bh;
  rssVerdict(asan);

  // Close everything: the hub must be back to its empty state exactly.
  for (const h of [...honest]) {
    if (h instanceof Peer) h.close(); else { h.closing = true; h.client.disconnect(); }
  }
  // wheel.pending is published after each wheel advance (at least once a
  // heartbeat period), so it is sampled until it agrees, like the reports.
  const end = await sampleExact(0, 30000);
  for (const w of end.wrong) fail(`after closing everything: ${w}`);
  for (const l of end.s.per_loop) {
    if (l.wheel.pending !== 1 || l.wheel.pong_armed !== 0) fail(`loop ${l.loop} empty but wheel pending ${l.wheel.pending}, pong ${l.wheel.pong_armed} (want 1, 0)`);
  }
  if (end.s.totals.queued_bytes !== 0) fail(`no sessions but queued_bytes ${end.s.totals.queued_bytes}`);
  log(`soak: empty again: fds ${end.fds} (baseline ${fdBase}), wheel pending ` +
    `${end.s.per_loop.map((l) => l.wheel.pending).join('+')}, queued ${end.s.totals.queued_bytes} B; ` +
    `accepted ${end.s.totals.accepted}, closed ${JSON.stringify(end.s.totals.closed)}`);
  const exit = await hub.stop();
  assertNoSanitizerReportSafe();
  if (exit.code !== 0) fail(`hub exited ${JSON.stringify(exit)}`);
  log(`soak: honest clients' closes by code ${JSON.stringify(closeLog)} (all initiated by the driver); ` +
    `false 4201: ${false4201}; churn cycles ${counters.churn} (${counters.churnTimeouts} timed out); ` +
    `/stats requests retried after a hang-up: ${statsRetries}`);
}

function assertNoSanitizerReportSafe() {
  try { assertNoSanitizerReport(hub); } catch (e) { fail(e.message); }
}

let code = 1;
const hardStop = setTimeout(() => {
  fail(`the driver did not finish within ${DEADLINE_MS / 1000 + 120} s`);
  netnsCleanup();
  process.exit(1);
}, DEADLINE_MS + 120000);
main().then(() => { code = failures.length ? 1 : 0; }, (e) => { fail(e.stack || e.message); })
  .finally(async () => {
    clearTimeout(hardStop);
    gate.stop();
    for (const h of honest) h.closing = true; // what follows is cleanup
    for (const fn of fakeT.cleanups) { try { fn(); } catch (_) { /* closed */ } }
    netnsCleanup();
    if (hub && !hub.exit) await hub.stop('SIGKILL');
    if (failures.length && hub && hub.stderr) log(`soak: the hub's stderr (last 2000 bytes):\n${hub.stderr.slice(-2000)}`);
    if (failures.length) code = 1;
    log(code === 0 ? `soak: PASS (${elapsed()} s)` : `soak: FAIL (${failures.length} failure${failures.length === 1 ? '' : 's'}, ${elapsed()} s)`);
    process.exit(code);
  });
process.on('exit', netnsCleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { netnsCleanup(); process.exit(1); });
