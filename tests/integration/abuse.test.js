'use strict';
// Abuse: what one peer can make the hub hold (docs/RELIABILITY.md, "What a
// peer can make the hub hold"). Each case is one shape of attack from a
// raw-socket client that reads nothing of what the hub sends back, and
// asserts a bound the hub can always meet whatever the machine's speed:
// the hub's queued bytes in /stats never pass the session's --max-queue
// (plus one read's worth of replies), the attacker is closed with the code
// its shape earns, and a healthy subscriber on the same loop still gets a
// REST publish while the flood runs (a wait on the event, not a timer).
//
// Every flood is bounded in count and in time: it stops when the hub stops
// reading it (its writes stall: input backpressure), when the hub closes
// it, or after FLOOD_MAX_BYTES.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const fs = require('node:fs');
const https = require('node:https');
const PusherServer = require('pusher');
const os = require('node:os');
const path = require('node:path');
const { startHub, waitFor, TIME_SCALE, makeCert } = require('./lib/hub');
const { open, subscribe, rssKiB, isAsan, stopAll } = require('./lib/ws');
const { frame, OP, upgradeRequest, RawWs } = require('./lib/rawws');

const MAX_QUEUE = 256 * 1024;
// One read of the bypass is 64 KiB; lws's own reads are smaller. The
// replies of what the hub already read when it paused fit well in this.
const QUEUE_SLACK = 128 * 1024;
const FLOOD_MAX_BYTES = 64 * 1024 * 1024;
const RSS_GROWTH_LIMIT_KIB = 96 * 1024;

// A raw WebSocket that upgrades, then never reads again: the kernel's
// buffers fill, then the hub's queue for it.
function rawAttacker(hub) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(hub.port, hub.host);
    let head = Buffer.alloc(0);
    const a = { sock, closed: false, bytesSent: 0, stalled: false };
    sock.on('close', () => { a.closed = true; });
    sock.on('error', () => { a.closed = true; });
    sock.on('connect', () => sock.write(upgradeRequest(hub)));
    const onData = (d) => {
      head = Buffer.concat([head, d]);
      const i = head.indexOf('\r\n\r\n');
      if (i < 0) return;
      sock.off('data', onData);
      if (!/^HTTP\/1\.1 101/.test(head.toString('latin1', 0, i))) {
        reject(new Error(`upgrade refused: ${head.toString('latin1', 0, i)}`));
        return;
      }
      // Read nothing more: everything the hub sends stays in the kernel.
      sock.pause();
      resolve(a);
    };
    sock.on('data', onData);
    setTimeout(() => reject(new Error('no upgrade answer')), 10000 * TIME_SCALE);
  });
}

// Write batches of frames until the hub stops reading (a write that does
// not drain for stallMs: the kernel buffers are full and the hub reads
// nothing of us), the hub closes us, or FLOOD_MAX_BYTES went out.
async function flood(a, makeBatch, stallMs = 3000) {
  while (!a.closed && a.bytesSent < FLOOD_MAX_BYTES) {
    const batch = makeBatch();
    a.bytesSent += batch.length;
    if (a.sock.write(batch)) continue;
    const drained = await new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), stallMs);
      const done = () => { clearTimeout(t); resolve(true); };
      a.sock.once('drain', done);
      a.sock.once('close', done);
    });
    if (!drained) {
      a.stalled = true;
      return;
    }
  }
}

// n copies of one masked text frame.
function frames(text, n) {
  const parts = [];
  for (let i = 0; i < n; i++) parts.push(frame(OP.TEXT, text));
  return Buffer.concat(parts);
}

// GET path from a hub that serves TLS (its certificate is self-signed).
function httpsJson(hub, p) {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: hub.host, port: hub.port, path: p,
      rejectUnauthorized: false, timeout: 10000 }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => { try { resolve(JSON.parse(body)); } catch (e) { reject(e); } });
    });
    req.on('timeout', () => req.destroy(new Error(`timeout GET ${p}`)));
    req.on('error', reject);
  });
}

function vmDataKiB(pid) {
  const m = /VmData:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

// The hub, a healthy subscriber on its only loop, and a publisher.
async function setup(t, extra = []) {
  const hub = await startHub(['--loops', '1', '--max-queue', '256KiB',
    '--write-timeout', '2s', ...extra]);
  const clients = [];
  const raws = [];
  t.after(async () => {
    for (const r of raws) r.sock.destroy();
    await stopAll(hub, clients);
  });
  const healthy = await open(hub);
  clients.push(healthy);
  await subscribe(healthy, 'news');
  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  let seq = 0;
  // A REST publish the healthy subscriber must receive.
  const healthyGets = async () => {
    const id = `m${++seq}`;
    const r = await server.trigger('news', 'tick', { id });
    assert.equal(r.status, 200);
    await waitFor(() => healthy.messages.some((m) => m.event === 'tick' &&
      m.channel === 'news' && (typeof m.data === 'string' ? JSON.parse(m.data) : m.data).id === id),
    `the healthy subscriber's event ${id}`, 20000);
  };
  return { hub, healthy, raws, healthyGets };
}

// While busy floods, sample the hub's queued bytes and RSS; the maxima.
async function watchQueue(hub, busy) {
  let max = 0;
  let rss = 0;
  let done = false;
  busy.finally(() => { done = true; });
  while (!done) {
    const st = await hub.stats();
    max = Math.max(max, st.totals.queued_bytes);
    rss = Math.max(rss, rssKiB(hub.pid));
  }
  const st = await hub.stats();
  return { maxQueued: Math.max(max, st.totals.queued_bytes), rssMax: rss };
}

// One flood of replies from a reader that reads nothing: bounded queue,
// paused reading, closed 4100 by the write deadline; the healthy
// subscriber is served throughout.
async function replyFlood(t, extra, text) {
  const { hub, raws, healthyGets } = await setup(t, extra);
  const rss0 = rssKiB(hub.pid);
  const a = await rawAttacker(hub);
  raws.push(a);
  const batch = frames(text, 1024);
  const busy = flood(a, () => batch);
  const { maxQueued, rssMax } = await watchQueue(hub, busy);
  await healthyGets();
  assert.ok(maxQueued <= MAX_QUEUE + QUEUE_SLACK,
    `queued_bytes reached ${maxQueued} (max-queue ${MAX_QUEUE})`);
  // The hub stopped reading it (its writes stalled), or closed it; once
  // closing, the hub reads and drops what it sends until the close
  // timeout, which holds nothing.
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.closed.write_timeout + s.totals.closed['4100'] >= 1 && s;
  }, 'the attacker closed with 4100', 30000);
  assert.ok(st.totals.rx_paused >= 1 || st.totals.closed['4100'] >= 1,
    `neither paused nor closed: ${JSON.stringify(st.totals)}`);
  assert.ok(st.totals.msgs_in < a.bytesSent / 7,
    `the hub handled every message sent (${st.totals.msgs_in})`);
  await healthyGets();
  if (!isAsan(hub.pid)) {
    const growth = rssKiB(hub.pid) - rss0;
    assert.ok(growth < RSS_GROWTH_LIMIT_KIB, `RSS grew by ${growth} KiB`);
  }
  const after = await hub.stats();
  assert.ok(after.totals.queued_bytes <= MAX_QUEUE,
    `queued_bytes ${after.totals.queued_bytes} after the attacker's close`);
  // The figures docs/RELIABILITY.md quotes.
  t.diagnostic(`sent ${a.bytesSent} B (${(a.bytesSent / text.length / 1e3).toFixed(0)}k ` +
    `messages); handled ${st.totals.msgs_in}; queued max ${maxQueued} B; ` +
    `rx_paused ${st.totals.rx_paused}; RSS ${rss0} -> ${rssMax} (during) -> ` +
    `${rssKiB(hub.pid)} KiB (after)`);
}

for (const [path, extra] of [['the read bypass', []],
  ["lws's read path", ['--ws-direct-read', 'off']]]) {
  test(`unparsable messages from a reader that reads nothing (${path})`, async (t) => {
    await replyFlood(t, extra, 'x');
  });

  test(`pusher:ping from a reader that reads nothing (${path})`, async (t) => {
    await replyFlood(t, extra, JSON.stringify({ event: 'pusher:ping', data: {} }));
  });

  test(`client events the app refuses, from a reader that reads nothing (${path})`, async (t) => {
    await replyFlood(t, extra, JSON.stringify({ event: 'client-x',
      channel: 'private-a', data: {} }));
  });

  test(`frames that declare more than they send hold only what arrived (${path})`, async (t) => {
    const { hub, raws, healthyGets } = await setup(t, ['--max-message', '256KiB', ...extra]);
    const vm0 = vmDataKiB(hub.pid);
    // Each declares a 256 KiB text frame and sends 10 bytes of it.
    const N = 200;
    for (let i = 0; i < N; i++) {
      const a = await rawAttacker(hub);
      raws.push(a);
      const head = frame(OP.TEXT, 'x'.repeat(10), { lenOverride: 256n * 1024n });
      a.sock.write(head);
    }
    await waitFor(async () => (await hub.stats()).totals.sessions === N + 1,
      `${N + 1} sessions`);
    // Two round trips through the loop after every attacker's bytes.
    await healthyGets();
    await healthyGets();
    t.diagnostic(`VmData ${vm0} -> ${vmDataKiB(hub.pid)} KiB for ${N} peers`);
    if (!isAsan(hub.pid)) {
      // Reserving the declared length was 50 MiB of address space.
      const growth = vmDataKiB(hub.pid) - vm0;
      assert.ok(growth < 16 * 1024, `VmData grew by ${growth} KiB for ${N} peers`);
    }
  });
}

test('subscribe churn is refused past the rate, then closed 4100', async (t) => {
  const { hub, raws, healthyGets } = await setup(t);
  const a = await rawAttacker(hub);
  raws.push(a);
  let n = 0;
  const makeBatch = () => {
    const parts = [];
    for (let i = 0; i < 256; i++) {
      const ch = `churn-${n++}`;
      parts.push(frame(OP.TEXT, JSON.stringify({ event: 'pusher:subscribe', data: { channel: ch } })));
      parts.push(frame(OP.TEXT, JSON.stringify({ event: 'pusher:unsubscribe', data: { channel: ch } })));
    }
    return Buffer.concat(parts);
  };
  const busy = flood(a, makeBatch);
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.closed['4100'] >= 1 && s;
  }, 'the churner closed with 4100', 30000);
  await busy;
  assert.ok(st.totals.subscribe_rate_refused >= 15,
    `subscribe_rate_refused ${st.totals.subscribe_rate_refused}`);
  // At most the burst got through: 3 x max_subscriptions (100).
  assert.ok(st.totals.subscriptions <= 1 + 300, `subscriptions ${st.totals.subscriptions}`);
  await healthyGets();
});

test('a client that leaves and rejoins all its channels at once is never refused', async (t) => {
  const { hub, healthyGets } = await setup(t);
  const c = await open(hub);
  t.after(() => c.terminate());
  const names = Array.from({ length: 100 }, (_, i) => `room-${i}`);
  for (const ch of names) c.send({ event: 'pusher:subscribe', data: { channel: ch } });
  await waitFor(() => c.messages.filter((m) =>
    m.event === 'pusher_internal:subscription_succeeded').length === 100,
  '100 subscriptions', 20000);
  // pusher-js after a reconnect does the same on a new connection; here
  // the same one leaves and joins everything again: 300 in a burst.
  for (const ch of names) c.send({ event: 'pusher:unsubscribe', data: { channel: ch } });
  for (const ch of names) c.send({ event: 'pusher:subscribe', data: { channel: ch } });
  await waitFor(() => c.messages.filter((m) =>
    m.event === 'pusher_internal:subscription_succeeded').length === 200,
  '100 more subscriptions', 20000);
  assert.equal(c.messages.filter((m) => m.event === 'pusher:error').length, 0);
  const st = await hub.stats();
  assert.equal(st.totals.subscribe_rate_refused, 0);
  await healthyGets();
});

test('the write deadline closes a reader that drains a trickle above the low mark', async (t) => {
  // A subscriber that reads a little now and then while a publisher keeps
  // its queue high: each read is progress of a kind, never enough. (The
  // kernel's socket buffers space the hub's writes out, so the old rule,
  // any write is progress, often closed it too: the rule itself is pinned
  // by test_session_write_timeout_counts_only_under_the_low_mark.)
  const { hub, raws, healthyGets } = await setup(t);
  const a = await rawAttacker(hub);
  raws.push(a);
  a.sock.write(frame(OP.TEXT, JSON.stringify({ event: 'pusher:subscribe',
    data: { channel: 'firehose' } })));
  const server = new PusherServer({ appId: 'app-id', key: 'app-key',
    secret: 'app-secret', host: hub.host, port: hub.port, useTLS: false });
  const blob = 'y'.repeat(8000);
  let stop = false;
  let queued = 0;
  let reads = 0;
  // 1 KiB every 50 ms (20 KB/s), and only while the hub's queue for it is
  // well above the low mark: a trickle. Loopback's kernel acknowledges
  // reads in window updates of up to 64 KiB (one MSS), so 8 KiB reads
  // (the old trickle, 160 KB/s) released the hub's writes in chunks that
  // took its queue under the low mark whenever the publisher was slower
  // than that (ASan on a loaded machine: CI and two loaded runs): real
  // progress, and no close. A publisher slower than the reader no longer
  // matters either: the reader waits for the queue to be high.
  const trickle = setInterval(() => {
    if (queued < 96 * 1024) return;
    if (a.sock.read(1024) !== null) reads++;
  }, 50);
  t.after(() => clearInterval(trickle));
  // Keep the hub's queue for it between the low mark (64 KiB) and
  // max-queue (256 KiB): publish only while it holds under 160 KiB.
  const pub = (async () => {
    for (let i = 0; i < 200000 && !stop; i++) {
      queued = (await hub.stats()).totals.queued_bytes;
      if (queued > 160 * 1024) continue;
      await server.trigger('firehose', 'blob', { blob });
    }
  })();
  try {
    // First the kernel's socket buffers fill (megabytes on loopback) at the
    // publisher's pace, which a loaded machine and an ASan hub make slow;
    // only then does the hub's queue rise and the trickle begin.
    await waitFor(async () => (await hub.stats()).totals.closed.write_timeout >= 1,
      'the trickling reader closed by the write deadline', 240000);
  } finally {
    stop = true;
    await pub;
  }
  t.diagnostic(`reads of 1 KiB by the trickling reader: ${reads}`);
  await healthyGets();
});

// Backpressure loses nothing: a client that pipelines thousands of
// messages before it reads anything gets every answer, in order, once it
// reads; the hub paused and resumed it as its queue filled and drained.
for (const [name, extra, useTls] of [['the read bypass', [], false],
  ["lws's read path", ['--ws-direct-read', 'off'], false], ['TLS', [], true],
  ["TLS, lws's read path", ['--ws-direct-read', 'off'], true]]) {
  test(`a client that pipelines and reads late loses nothing (${name})`, async (t) => {
    // On lws's TLS read path the record being read (16 KiB) is handled
    // whole after the pause (docs/LWS.md, "Stopping a TLS session's
    // reads"): its ~210 KB of answers need the other half of max_queue, so
    // 1 MiB, the default. (The bypass reads TLS sessions too, and stops
    // after the message that passed the mark, as on plain TCP.)
    const args = ['--loops', '1', '--max-queue', useTls ? '1MiB' : '256KiB', ...extra];
    if (useTls) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-abuse-'));
      t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
      const { key, cert } = makeCert(dir);
      args.push('--tls-cert', cert, '--tls-key', key);
    }
    const hub = await startHub(args);
    if (useTls) hub.stats = () => httpsJson(hub, '/stats');
    const c = new RawWs(hub, upgradeRequest(hub), useTls);
    t.after(async () => { c.destroy(); await stopAll(hub); });
    await c.open();
    c.sock.pause();
    // Each 7-byte message earns a ~90-byte pusher:error: 13 MB of
    // answers, past what the kernel's socket buffers hold.
    const N = 150000;
    const one = frame(OP.TEXT, 'x');
    c.send(Buffer.concat(Array(N).fill(one)));
    await waitFor(async () => (await hub.stats()).totals.rx_paused >= 1,
      'the hub to stop reading the client', 30000);
    const before = c.frames.length;
    c.sock.resume();
    await c.until(() => c.frames.length - before >= N, `${N} answers`, 60000 * TIME_SCALE);
    const answers = c.frames.slice(before);
    assert.equal(answers.length, N);
    assert.ok(answers.every((f) => f.opcode === OP.TEXT &&
      f.payload.includes('pusher:error')), 'every answer is the pusher:error');
    const st = await hub.stats();
    assert.equal(st.totals.closed['4100'] + st.totals.closed.write_timeout, 0);
    assert.equal(st.totals.sessions, 1);
    // The path named is the one that read it.
    const bypassed = st.per_loop.reduce((n, l) => n + l.ws_direct_sessions, 0);
    assert.equal(bypassed, extra.includes('off') ? 0 : 1);
    t.diagnostic(`rx_paused ${st.totals.rx_paused}`);
  });
}
