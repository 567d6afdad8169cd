'use strict';
// lib/recovery.js: what the recovery tests (issue 35) share. The helper as
// the hub serves it (GET /lubdub-resume.js written to a temporary .mjs and
// imported, so the tests run exactly what an app gets), pusher-js clients
// of either pinned version through a cutting proxy (lib/cutproxy.js), a
// recorder of everything the app's handlers see, and a paced publisher
// that cuts the client's connection at seeded random points of its stream.
//
// Waits are conditions (waitFor, TIME_SCALE'd); the only timers that are
// not a condition pace the publisher (a rate, not a wait) and place a cut
// a random few milliseconds after its moment came.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { request, waitFor, trackClient } = require('./hub');
const { APP, serverSdk, rest } = require('./clients');

// The pinned pusher-js versions (package.json: pusher-js and its 8.6
// alias).
const PUSHER_JS = [
  { version: '8.4.0', module: 'pusher-js' },
  { version: '8.6.0', module: 'pusher-js-86' },
];

function pusherJs(module) {
  const Pusher = require(module);
  const { version } = require(`${module}/package.json`);
  return { Pusher, version };
}

// The app of the tests with history on every channel; client events allowed
// well above the stream's rate (the default is 10 a second).
function historyApp(history = { ttl: '120s', size: 2000 }) {
  return { id: APP.id, key: APP.key, secret: APP.secret, history, client_event_rate: 200 };
}

// GET /lubdub-resume.js from hub, into a temporary .mjs, imported: the
// module's exports ({resume}).
async function loadHelper(t, hub) {
  const r = await request('GET', hub.url('/lubdub-resume.js'));
  assert.equal(r.status, 200, r.body);
  assert.match(r.headers['content-type'] || '', /javascript/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-resume-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'lubdub-resume.mjs');
  fs.writeFileSync(file, r.body);
  const mod = await import(pathToFileURL(file).href);
  assert.equal(typeof mod.resume, 'function', 'the served module exports resume()');
  return mod;
}

// Options of a pusher-js client of hub reached through proxy (or the hub
// itself), its private channels signed by the app's SDK as an app server
// would. Reconnecting: pusher-js retries 1 s after a socket closes (a
// constant in its connection manager, no option); a reset is noticed at
// once, so the activity and pong timeouts never come into play.
function pusherOptions(hub, via = hub) {
  const sdk = serverSdk(hub);
  return {
    wsHost: via.host, wsPort: via.port, forceTLS: false,
    enabledTransports: ['ws'], cluster: 'local', disableStats: true,
    channelAuthorization: {
      customHandler: (params, cb) => {
        try {
          cb(null, sdk.authorizeChannel(params.socketId, params.channelName));
        } catch (e) {
          cb(e, null);
        }
      },
    },
  };
}

function pusherVia(t, hub, Pusher, via) {
  const client = new Pusher(APP.key, pusherOptions(hub, via));
  t.after(() => client.disconnect());
  trackClient(hub, () => client.disconnect());
  return client;
}

// What the app sees on client: for each channel, the seq of every `seq`
// event (and of every client event named in clientEvents) in arrival order;
// every lubdub: or pusher_internal:lubdub name any app-level handler saw
// (channel.bind_global, pusher.bind_global); lubdub:resume_failed's data.
// rec.watch(name) subscribes to one more channel and records it too.
function record(client, channels, { event = 'seq', clientEvents = [] } = {}) {
  const rec = { seqs: {}, client: {}, leaks: [], failed: [], ends: {}, subscribed: {} };
  const isOurs = (name) => typeof name === 'string' &&
    (name.startsWith('lubdub:') || name.startsWith('pusher_internal:lubdub'));
  client.bind_global((name, data) => {
    if (name === 'lubdub:resume_failed') { rec.failed.push(data); return; }
    if (isOurs(name)) rec.leaks.push(`pusher.bind_global: ${name}`);
  });
  // Subscribe to name and record it (also later: rec.watch(name)).
  rec.watch = (name) => {
    const ch = client.subscribe(name);
    rec.seqs[name] = [];
    rec.ends[name] = 0;
    rec.subscribed[name] = 0;
    ch.bind(event, (d) => rec.seqs[name].push(d.seq));
    ch.bind('end', () => { rec.ends[name]++; });
    ch.bind('pusher:subscription_succeeded', () => { rec.subscribed[name]++; });
    for (const ce of clientEvents) {
      rec.client[`${name} ${ce}`] = [];
      ch.bind(ce, (d) => rec.client[`${name} ${ce}`].push(d.seq));
    }
    ch.bind_global((name2) => {
      if (isOurs(name2)) rec.leaks.push(`${name}.bind_global: ${name2}`);
    });
  };
  for (const name of channels) rec.watch(name);
  return rec;
}

// 1..n
function upTo(n) { return Array.from({ length: n }, (_, i) => i + 1); }

// Seeded cut points: count seqs, one drawn in each equal part of
// [margin, n - margin].
function cutPoints(random, n, count, margin = Math.floor(n / 20)) {
  const span = (n - 2 * margin) / count;
  return Array.from({ length: count }, (_, k) => margin + Math.floor(k * span + random() * span) + 1);
}

// Publish n `seq` events (data {seq}) to channels through the app's SDK at
// about rate a second, one after the other (each publication's order is
// the history's). Cuts: the proxy cuts client's connection once for each
// of points, once the stream passed it, on a connection newer than the one
// it cut last (pusher-js keeps its state "connected" for a second after a
// socket dies, then reconnects), a random 0-300 ms after both held: some
// land while the hub replays, some on live traffic, some inside a frame.
// The stream does not publish its last 5 % before every cut is done, so
// every cut falls inside it. between(seq): called after each publication
// (client events). The client: a pusher-js client, or connection(), which
// resolves with its {state, socketId} (a browser page's). publishTo(seq):
// the hub (a cluster's node) that takes publication seq in; hub when not
// given.
async function stream(t, hub, { channels, n, rate, proxy, client, connection, points = [], between, publishTo }) {
  const sdks = new Map();
  const sdkOf = (seq) => {
    const to = publishTo ? publishTo(seq) : hub;
    if (!sdks.has(to)) sdks.set(to, serverSdk(to));
    return sdks.get(to);
  };
  if (!connection) {
    connection = () => ({ state: client.connection.state, socketId: client.connection.socket_id });
  }
  let published = 0;
  let cutsDone = 0;
  let cutError = null;
  let lastCutSocket = null;
  const cutter = (async () => {
    for (const at of points) {
      await waitFor(() => published >= at, `the stream to reach ${at}`, 60000, 2);
      const now = await waitFor(async () => {
        const c = await connection();
        return c.state === 'connected' && proxy.live > 0 && c.socketId &&
          c.socketId !== lastCutSocket && c;
      }, 'a new connection to cut', 30000, 2);
      lastCutSocket = now.socketId;
      const cut = await proxy.randomCut(300);
      assert.ok(cut >= 1, 'a cut found a live connection');
      cutsDone++;
    }
  })().catch((e) => { cutError = e; });
  const gap = 1000 / rate;
  let next = Date.now();
  for (let seq = 1; seq <= n; seq++) {
    if (seq > n * 0.95 && cutsDone < points.length) {
      await waitFor(() => cutError || cutsDone >= points.length, `every cut before event ${seq}`, 60000, 2);
      if (cutError) throw cutError;
      next = Date.now();
    }
    // Pacing (a rate, not a wait on a condition).
    const wait = next - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    next = Math.max(next + gap, Date.now() - 5 * gap);
    await sdkOf(seq).trigger(channels, 'seq', { seq });
    published = seq;
    if (between) await between(seq);
  }
  await cutter;
  if (cutError) throw cutError;
  return { cuts: cutsDone };
}

// Client events inside a stream, on channel (a private one): a sender
// (another client's subscription, senderCh) triggers `client-seq` {seq}
// after every 5th publication, and the recorded client itself triggers
// `client-own` after every 50th when it is connected (a replay must skip
// them: client events are not echoed to their sender). between(seq) is
// stream()'s; counts: {sent, own}.
function clientTraffic(client, senderCh, channel = 'private-stream') {
  const counts = { sent: 0, own: 0 };
  const between = (seq) => {
    if (seq % 5 === 0) {
      counts.sent++;
      assert.ok(senderCh.trigger('client-seq', { seq: counts.sent }), 'the sender is connected');
    }
    const mine = client.channel(channel);
    if (seq % 50 === 0 && mine.subscribed && client.connection.state === 'connected' &&
        mine.trigger('client-own', { seq })) {
      counts.own++;
    }
  };
  return { counts, between, channel };
}

// What clientTraffic sent reached rec (record()'s, with clientEvents
// client-seq and client-own) exactly once and in order (one sender: one
// origin), and the client's own never came back.
async function assertClientEvents(rec, { counts, channel }) {
  const got = rec.client[`${channel} client-seq`];
  // The sender's last client events may still be on their way.
  await waitFor(() => got.length >= counts.sent, `the ${counts.sent} client events`, 60000).catch((e) => {
    throw new Error(`${e.message}: got ${got.length}`);
  });
  assertExactlyOnce(got, counts.sent, 'client events');
  assert.deepEqual(rec.client[`${channel} client-own`], [], 'the client got its own client events');
}

// Wait until rec has every seq 1..n on each channel and the `end` event
// published after them (it follows them in the channel's history, so
// nothing of the stream can still be on its way). A lubdub:resume_failed
// that comes meanwhile ends the wait at once: the end itself may then be
// lost with the gap. hub may be several (a cluster's nodes that took the
// stream in): an end is published through each and all are awaited, since
// only one origin's events keep their order (docs/PROTOCOL.md 9.1): the
// end of each origin follows all of that origin's events.
async function endAndWait(hub, rec, channels, n, timeoutMs = 60000) {
  const failed = rec.failed ? rec.failed.length : 0;
  const more = () => (rec.failed ? rec.failed.slice(failed) : []);
  const hubs = Array.isArray(hub) ? hub : [hub];
  for (const h of hubs) await serverSdk(h).trigger(channels, 'end', {});
  await waitFor(() => more().length > 0 || channels.every((c) => rec.ends[c] >= hubs.length),
    'the end marker on every channel', timeoutMs, 10).catch((e) => {
    const got = channels.map((c) => `${c}: ${rec.seqs[c].length} events, last ${rec.seqs[c].slice(-3)}`);
    throw new Error(`${e.message}; ${got.join('; ')}`);
  });
  if (more().length) {
    const got = channels.map((c) => `${c}: ${rec.seqs[c].length} of ${n}`);
    assert.fail(`lubdub:resume_failed ${JSON.stringify(more())} (${got.join(', ')})`);
  }
}

// Assert rec's channel got exactly 1..n, in order; on failure say where
// it went wrong (missing, repeated, out of order) rather than a 1,000-line
// diff.
function assertExactlyOnce(got, n, what) {
  if (got.length === n && got.every((s, i) => s === i + 1)) return;
  const disorder = got.findIndex((s, i) => i > 0 && s <= got[i - 1]);
  assert.fail(`${what}: ${tally(got, n)}; ` +
    `first out of order at index ${disorder}${disorder > 0 ? ` (${got[disorder - 1]} then ${got[disorder]})` : ''}`);
}

// What got holds of 1..n, in words: how many, missing, repeated.
function tally(got, n) {
  const seen = new Map();
  for (const s of got) seen.set(s, (seen.get(s) || 0) + 1);
  const missing = upTo(n).filter((s) => !seen.has(s));
  const twice = [...seen].filter(([, c]) => c > 1).map(([s, c]) => `${s}x${c}`);
  return `${got.length} events for ${n}; missing ${missing.slice(0, 20)}` +
    `${missing.length > 20 ? ` (+${missing.length - 20})` : ''}; repeated ${twice.slice(0, 20)}`;
}

// The same for a stream that entered a cluster through several nodes
// (originOf(seq) names the node that took seq in): exactly 1..n, each
// once, and each origin's events in the order they were published. That
// is all a cluster promises (docs/PROTOCOL.md 9.1): the events of two
// origins may interleave differently on different connections, so the
// seqs of two origins may come out of publication order. Returns how many
// times an event came before one published earlier (by another origin).
function assertExactlyOncePerOrigin(got, n, originOf, what) {
  const sorted = [...got].sort((a, b) => a - b);
  if (sorted.length !== n || !sorted.every((s, i) => s === i + 1)) assert.fail(`${what}: ${tally(got, n)}`);
  const last = new Map();
  let inversions = 0;
  let highest = 0;
  for (const [i, s] of got.entries()) {
    const o = originOf(s);
    if (last.has(o) && s <= last.get(o)) {
      assert.fail(`${what}: origin ${o} out of order at index ${i} (${last.get(o)} then ${s})`);
    }
    last.set(o, s);
    if (s < highest) inversions++;
    highest = Math.max(highest, s);
  }
  return inversions;
}

// A counter of the hub's /stats by name, wherever it sits (totals first):
// undefined when the hub does not report it.
function statOf(st, key) {
  if (st.totals && st.totals[key] !== undefined) return st.totals[key];
  if (st[key] !== undefined) return st[key];
  for (const v of Object.values(st)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && v[key] !== undefined) return v[key];
  }
  return undefined;
}

// What the hub says of recovery: its resume counters (totals) and what
// history holds (/stats `history`, hub-wide), for diagnostics and checks.
async function historyStats(hub) {
  const st = await hub.stats();
  const keys = ['resume_sessions', 'resumes', 'resumes_failed', 'replayed_events'];
  return { ...Object.fromEntries(keys.map((k) => [k, statOf(st, k)])), history: st.history };
}

// GET /apps/{id}/channels/{channel}/events, signed: {status, json}.
function historyOf(hub, channel, params = {}) {
  return rest(hub, 'GET', `/apps/${APP.id}/channels/${encodeURIComponent(channel)}/events`, { params });
}

module.exports = {
  PUSHER_JS, pusherJs, historyApp, loadHelper, pusherOptions, pusherVia, record, upTo,
  cutPoints, stream, clientTraffic, assertClientEvents, endAndWait, assertExactlyOnce, assertExactlyOncePerOrigin, statOf, historyStats,
  historyOf,
};
