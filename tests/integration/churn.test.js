'use strict';
// Churn: 10,000 connect/close cycles, 200 in flight, ending in every way a
// peer can end (clean close, abrupt drop after open, drop mid-handshake,
// close after subscribing). Afterwards every loop has no sessions and its
// wheel holds nothing but the heartbeat task's own entry: no deadline of a
// freed session is left behind. Labelled asan: the sanitizer build runs
// this file against its binary, and any sanitizer report fails it.
const test = require('node:test');
const assert = require('node:assert/strict');
const WebSocket = require('ws');
const { startHub, waitFor } = require('./lib/hub');
const { assertNoSanitizerReport } = require('./lib/ws');

const TOTAL = 10000;
const IN_FLIGHT = 200;

// One cycle; resolves when the client side is fully closed.
function cycle(hub, i) {
  return new Promise((resolve) => {
    const ws = new WebSocket(hub.wsUrl(), { localAddress: `127.0.0.${2 + (i % 4)}` });
    const kind = i % 4;
    let done = false;
    const finish = () => { if (!done) { done = true; resolve(); } };
    ws.on('error', () => { /* expected for the aborted kinds */ });
    ws.on('close', finish);
    if (kind === 3) {
      // Drop the connection while the handshake is in flight.
      setImmediate(() => ws.terminate());
      return;
    }
    ws.on('open', () => { if (kind === 1) ws.terminate(); });
    ws.on('message', (d) => {
      const m = JSON.parse(String(d));
      if (m.event === 'pusher:connection_established') {
        if (kind === 0) ws.close(1000);
        else ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: `c-${i % 50}` } }));
      } else if (m.event === 'pusher_internal:subscription_succeeded') {
        ws.close(1000);
      }
    });
  });
}

test('10,000 connect/close cycles leave no sessions and no deadlines', async (t) => {
  // Every session arms an idle deadline; short pings arm pong deadlines
  // on the ones that live long enough.
  const hub = await startHub(['--loops', '2', '--ping-interval', '300ms',
    '--pong-timeout', '300ms', '--tick', '50ms', '--idle-timeout', '5s',
    '--log-level', 'warn'], { startTimeoutMs: 30000 });
  t.after(() => hub.stop());
  const base = await hub.stats();
  const baseline = base.per_loop.map((l) => l.wheel.pending);
  // With no sessions, a loop's wheel holds at most its heartbeat entry.
  assert.ok(baseline.every((p) => p <= 1), `baseline pending ${baseline}`);

  const t0 = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < TOTAL) await cycle(hub, next++);
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const took = Date.now() - t0;

  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.per_loop.every((l) => l.sessions === 0 && l.wheel.pending === 1) && s;
  }, 'every loop to be empty with only the heartbeat pending', 30000, 50);
  assert.equal(st.totals.sessions, 0);
  assert.equal(st.totals.subscriptions, 0);
  // Kind 3 may or may not reach the hub before it is dropped.
  assert.ok(st.totals.accepted >= TOTAL * 3 / 4, `accepted ${st.totals.accepted}`);
  // Every accepted session was closed exactly once. Peers end them; on a
  // loaded box a client busy with 200 others may miss a 300 ms pong
  // deadline (4201), which is the hub doing its job.
  const closed = st.totals.closed;
  assert.equal(Object.values(closed).reduce((a, b) => a + b, 0), st.totals.accepted,
    JSON.stringify(closed));
  assert.equal(closed.peer + closed['4201'], st.totals.accepted, JSON.stringify(closed));
  for (const l of st.per_loop) assert.ok(l.accepted > 0, `loop ${l.loop} accepted none`);
  assert.ok(st.totals.accepted <= TOTAL);
  assertNoSanitizerReport(hub);
  const exit = await hub.stop();
  assert.deepEqual(exit, { code: 0, signal: null });
  assertNoSanitizerReport(hub);
  t.diagnostic(`${TOTAL} cycles in ${took} ms; closed ${JSON.stringify(closed)}; accepted ` +
    `${st.per_loop.map((l) => l.accepted).join('+')}; wheel fired ` +
    `${st.per_loop.map((l) => l.wheel.fired).join('+')}, cancelled ` +
    `${st.per_loop.map((l) => l.wheel.cancelled).join('+')}`);
});
