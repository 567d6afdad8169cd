'use strict';
// Liveness: the heartbeat pings silent connections, answered pings keep a
// connection open, an unanswered one closes it with 4201 inside the bound
// the design promises, the idle timeout closes data-silent connections
// with 4202, and the close timeout drops a peer that never answers our
// close frame.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor, watchLateness } = require('./lib/hub');
const { open, firstError, stopAll } = require('./lib/ws');
const { rawWs, OP } = require('./lib/rawws');

const PING = 300;
const PONG = 300;
const TICK = 50;
// heartbeat period = ping / 5, at least one tick (hub/loop/loop.c).
const HEARTBEAT = Math.max(PING / 5, TICK);
// The heartbeat run and the pong timer are each up to a tick late, so the
// bound without slack is ping + heartbeat + tick + pong + tick.
// Upper bounds add the scheduling allowance (lib/hub.js watchLateness: how
// late the hub's timers and this process ran) and a fixed slack for what
// neither measures; the lower bounds are the strict ones.
const SLACK = 1500;
const TIMING = ['--loops', '2', '--ping-interval', `${PING}ms`,
  '--pong-timeout', `${PONG}ms`, '--tick', `${TICK}ms`];

test('a client that answers pings stays open, and is pinged', async (t) => {
  // A long pong timeout: a client that answers is never closed, however
  // long this process is starved on a loaded machine (under 2 s); the
  // pings still come every PING.
  const hub = await startHub([...TIMING, '--pong-timeout', '2000ms']);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  for (let i = 0; i < 6; i++) clients.push(await open(hub));
  const before = await hub.stats();
  // Watch for at least five ping periods and until every client has been
  // pinged (and has answered) three times, failing at once on any close.
  // However slowly the machine runs, a client that answers is never closed.
  const until = Date.now() + 5 * (PING + PONG);
  await waitFor(() => {
    const closed = clients.find((c) => c.closed);
    if (closed) throw new Error(`false close: ${JSON.stringify(closed.closed)}`);
    return Date.now() >= until && clients.every((c) => c.pings.length >= 3);
  }, 'the liveness window', 60000, 20).catch((e) => {
    const closed = clients.find((c) => c.closed);
    assert.fail(closed ? `false close ${JSON.stringify(closed.closed)}` : e.message);
  });
  for (const c of clients) {
    assert.equal(c.closed, null);
    assert.equal(c.find('pusher:error'), undefined);
    // About one ping per ping + rtt; ask for at least 3 in 3 s.
    assert.ok(c.pings.length >= 3, `only ${c.pings.length} pings`);
  }
  // Our pongs may still be on their way to the hub.
  const after = await waitFor(async () => {
    const st = await hub.stats();
    return st.totals.pongs - before.totals.pongs >= 3 * clients.length && st;
  }, `${3 * clients.length} pongs counted`).catch(async () => {
    const st = await hub.stats();
    assert.fail(`pongs ${before.totals.pongs} -> ${st.totals.pongs}`);
  });
  assert.ok(after.totals.pings_sent > before.totals.pings_sent);
  assert.equal(after.totals.closed['4201'], 0);
  assert.equal(after.totals.sessions, clients.length);
});

test('a client that stops answering pings gets 4201 within the bound', async (t) => {
  const hub = await startHub(TIMING);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  // Several at once, spread over both loops.
  const late = watchLateness(hub);
  t.after(() => late.stop());
  for (let i = 0; i < 4; i++) clients.push(await open(hub, { autoPong: false }));
  const design = PING + HEARTBEAT + PONG + 2 * TICK;
  await Promise.all(clients.map((c) => c.waitClose(design + SLACK + 30000)));
  await late.stop();
  const bound = design + SLACK + late.allowanceMs();
  const lat = [];
  for (const c of clients) {
    assert.equal(c.closed.code, 4201, `close ${JSON.stringify(c.closed)}`);
    const err = firstError(c);
    assert.ok(err, 'a pusher:error before the close');
    assert.equal(err.code, 4201);
    assert.ok(c.find('pusher:error').at <= c.closed.at);
    assert.ok(c.pings.length >= 1, 'was pinged');
    // The hub stamped last_rx no earlier than our upgrade request, and
    // never closes before ping + pong after it. Its clock counts whole
    // milliseconds, so allow 2 ms of truncation.
    const sinceRequest = c.closed.at - c.startedAt;
    assert.ok(sinceRequest >= PING + PONG - 2,
      `closed after ${sinceRequest} ms, before ping + pong`);
    assert.ok(sinceRequest <= bound, `closed after ${sinceRequest} ms > ${bound}`);
    lat.push(sinceRequest);
  }
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.sessions === 0 && s;
  }, 'sessions to be gone');
  assert.equal(st.totals.closed['4201'], clients.length);
  t.diagnostic(`4201 after ${lat.join(', ')} ms (floor ${PING + PONG}, ` +
    `bound without slack ${design}; ${late.describe()})`);
});

test('idle timeout closes a data-silent client with 4202; pusher:ping keeps one', async (t) => {
  // The chatty client sends a pusher:ping ten times per idle period, so
  // only a stall of this process longer than 0.9 s could make it look idle.
  const IDLE = 1500;
  const hub = await startHub([...TIMING, '--idle-timeout', `${IDLE}ms`]);
  const clients = [];
  t.after(() => stopAll(hub, clients));
  const silent = await open(hub);
  const chatty = await open(hub);
  clients.push(silent, chatty);
  let pings = 0;
  const timer = setInterval(() => {
    if (!chatty.closed) { chatty.send({ event: 'pusher:ping', data: {} }); pings++; }
  }, IDLE / 10);
  t.after(() => clearInterval(timer));
  await silent.waitClose(IDLE + TICK + SLACK + 30000);
  assert.equal(silent.closed.code, 4202);
  assert.equal(firstError(silent).code, 4202);
  const idleFor = silent.closed.at - silent.startedAt;
  assert.ok(idleFor >= IDLE - 2, `4202 after ${idleFor} ms`);
  // The chatty one lives on for several more idle periods.
  const until = Date.now() + 3 * IDLE;
  await waitFor(() => {
    if (chatty.closed) throw new Error(`chatty closed ${JSON.stringify(chatty.closed)}`);
    return Date.now() >= until;
  }, 'three idle periods', 3 * IDLE + 5000, 20);
  clearInterval(timer);
  assert.equal(chatty.closed, null);
  // Every pusher:ping is answered (some answers may still be on the way).
  await waitFor(() => chatty.all('pusher:pong').length >= pings,
    `${pings} pusher:pong answers (got ${chatty.all('pusher:pong').length})`);
  const st = await hub.stats();
  assert.equal(st.totals.closed['4202'], 1);
  assert.equal(st.totals.sessions, 1);
  t.diagnostic(`4202 after ${idleFor} ms (idle timeout ${IDLE})`);
});

test('close timeout drops a peer that never answers our close frame', async (t) => {
  const CLOSE = 400;
  // lws waits 5 s for a close reply by itself; ours must cut that short.
  const hub = await startHub([...TIMING, '--close-timeout', `${CLOSE}ms`]);
  t.after(() => stopAll(hub));
  const late = watchLateness(hub);
  t.after(() => late.stop());
  // A raw peer that completes the WebSocket handshake, then never sends a
  // byte (so no pong, no close reply) but keeps reading, so our close
  // frame arrives and is ignored.
  const peer = await rawWs(t, hub, { answerClose: false }).open();
  // It never answers pings: 4201, close frame, no reply, then the kill.
  await waitFor(() => peer.endedAt, 'the hub to drop the peer',
    PING + HEARTBEAT + PONG + CLOSE + SLACK + 30000, 10);
  await late.stop();
  const closeFrame = peer.frames.find((f) => f.opcode === OP.CLOSE);
  assert.equal(closeFrame && closeFrame.payload.length >= 2 ? closeFrame.payload.readUInt16BE(0) : 0, 4201);
  assert.ok(closeFrame && closeFrame.at > 0, 'a close frame came first');
  const held = peer.endedAt - closeFrame.at;
  // Within the close timeout plus a tick, the slack and how late the hub
  // and this process ran.
  assert.ok(held <= CLOSE + TICK + SLACK + late.allowanceMs(),
    `dropped ${held} ms after the close frame (${late.describe()})`);
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.sessions === 0 && s;
  }, 'the session to be gone');
  const timeouts = st.per_loop.reduce((a, l) => a + l.close_timeouts, 0);
  assert.equal(timeouts, 1);
  assert.equal(st.totals.closed['4201'], 1);
  t.diagnostic(`dropped ${held} ms after the close frame (close timeout ${CLOSE} ms; ` +
    `${late.describe()})`);
});
