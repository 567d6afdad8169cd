'use strict';
// A stalled loop: loop 0's thread sleeps (the test-only hook,
// LUBDUB_TEST_STALL_MS + GET /test/stall?loop=0) right after it wrote a
// heartbeat ping, for longer than ping + pong. Its peers answer at once, so
// their pongs wait in loop 0's sockets while the pong deadlines pass.
// Nothing may close 4201: not the clients of loop 1, which kept running,
// and not those of loop 0, whose pongs are read once it wakes (the wheel
// waits one read pass after a stall, server/loop/threads.c). The stall must show in
// /stats and /metrics: a stall counted, its length, and late timers.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor } = require('./lib/hub');
const { open, stopAll } = require('./lib/ws');
const { loopOf } = require('./lib/clients');

const PING = 300;
// A pong timeout a starved client process can live with: the test is about
// the hub misjudging peers that answered, not about how fast this machine
// lets node answer (at 300 ms a loaded machine closed a loop-1 client).
const PONG = 1000;
const TICK = 50;
const STALL = 2500; // > PING + PONG
const PER_LOOP = 3;

// Both event loops: lws's poll() runs due timers before it polls, and
// libev may invoke the timer watcher ahead of the I/O ones.
for (const eventLoop of ['libev', 'poll']) {
  test(`${eventLoop}: a stalled loop closes nothing, and its stall shows in the metrics`, async (t) => {
    const hub = await startHub(['--loops', '2', '--ping-interval', `${PING}ms`,
      '--pong-timeout', `${PONG}ms`, '--tick', `${TICK}ms`, '--drain-timeout', '1s',
      '--event-loop', eventLoop],
    { env: { LUBDUB_TEST_STALL_MS: String(STALL) } });
    const clients = [];
    t.after(() => stopAll(hub, clients));

    // Clients on both loops (source addresses spread the SO_REUSEPORT hash).
    const on = (loop) => clients.filter((c) => loopOf(c.socketId) === loop);
    for (let i = 0; on(0).length < PER_LOOP || on(1).length < PER_LOOP; i++) {
      assert.ok(i < 60, 'clients on both loops');
      clients.push(await open(hub, { localAddress: `127.0.0.${2 + (i % 8)}` }));
    }
    const noClose = () => {
      const c = clients.find((x) => x.closed);
      if (c) throw new Error(`client of loop ${loopOf(c.socketId)} closed ${JSON.stringify(c.closed)}`);
    };
    // Every client answers pings (ws answers them itself) before the stall.
    await waitFor(() => { noClose(); return clients.every((c) => c.pings.length >= 1); },
      'a ping on every client', 10000);

    const armed = await request('GET', hub.url('/test/stall?loop=0'));
    assert.equal(armed.status, 200, armed.body);
    // The stall begins after loop 0's next ping and ends STALL ms later.
    await waitFor(() => /test: stalling loop 0/.test(hub.stderr), 'the stall to begin', 10000);
    const pingsAt = clients.map((c) => c.pings.length);
    await waitFor(async () => {
      noClose();
      return (await hub.stats()).per_loop[0].wheel.stalls >= 1;
    }, 'loop 0 to count its stall', 20000, 50);

    // Afterwards every client, on either loop, keeps being pinged (each ping
    // after the stall means its pong deadline passed and found it alive) and
    // stays open.
    await waitFor(() => {
      noClose();
      return clients.every((c, i) => c.pings.length >= pingsAt[i] + 3);
    }, 'three pings on every client after the stall', 20000, 20);
    noClose();

    const st = await hub.stats();
    assert.equal(st.totals.closed['4201'], 0, JSON.stringify(st.totals.closed));
    assert.equal(st.totals.sessions, clients.length);
    const w0 = st.per_loop[0].wheel;
    // The gap between two advances holds the whole sleep.
    assert.ok(w0.max_stall_ms >= STALL, `max_stall_ms ${w0.max_stall_ms}`);
    // The timers due during the sleep (the heartbeat is due every ping / 5)
    // fired at least STALL - PING / 5 late: the top lateness bucket (>= 2
    // ticks) holds them, and the worst lateness says how long.
    assert.ok(w0.max_lateness_ms >= STALL - PING / 5, `max_lateness_ms ${w0.max_lateness_ms}`);
    assert.equal(w0.lateness[4].lt_ms, null);
    assert.ok(w0.lateness[4].count >= 1, JSON.stringify(w0.lateness));
    assert.ok(w0.lateness_sum_ms >= STALL - PING / 5);

    const metrics = (await request('GET', hub.url('/metrics'))).body;
    const value = (re) => {
      const m = re.exec(metrics);
      assert.ok(m, `${re} in /metrics`);
      return Number(m[1]);
    };
    assert.ok(value(/^lubdub_loop_stalls_total\{loop="0"\} (\d+)$/m) >= 1);
    assert.ok(value(/^lubdub_loop_max_stall_seconds\{loop="0"\} ([\d.]+)$/m) >= STALL / 1000);
    const inf = value(/^lubdub_wheel_lateness_seconds_bucket\{loop="0",le="\+Inf"\} (\d+)$/m);
    const twoTicks = value(new RegExp(
      `^lubdub_wheel_lateness_seconds_bucket\\{loop="0",le="${(2 * TICK) / 1000}"\\} (\\d+)$`, 'm'));
    assert.ok(inf - twoTicks >= 1, `late fires: ${twoTicks} within two ticks of ${inf}`);
    assert.ok(value(/^lubdub_sessions_closed_total\{loop="0",reason="4201"\} (\d+)$/m) === 0);
    assert.ok(value(/^lubdub_sessions_closed_total\{loop="1",reason="4201"\} (\d+)$/m) === 0);
    t.diagnostic(`loop 0: stall ${w0.max_stall_ms} ms, worst lateness ${w0.max_lateness_ms} ms, ` +
      `lateness buckets ${w0.lateness.map((b) => b.count).join('/')}; ` +
      `loop 1 stalls ${st.per_loop[1].wheel.stalls}; clients ${on(0).length}+${on(1).length}`);
  });
}

test('/test/stall is a 404 unless LUBDUB_TEST_STALL_MS is set', async (t) => {
  const hub = await startHub(['--loops', '2']);
  t.after(() => stopAll(hub));
  assert.equal((await request('GET', hub.url('/test/stall?loop=0'))).status, 404);
});
