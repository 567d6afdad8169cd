'use strict';
// A black-holed peer: the client runs in a network namespace the test
// creates, joined to the default one by a veth pair; once it is connected
// and answering pings, nftables (or iptables) in that namespace drops all
// of its traffic. No FIN, no RST: only the heartbeat can find it. The hub
// must close it with 4201 (then kill it at the close timeout, since the
// close frame is never acknowledged) within the liveness bound.
//
// Needs root and `ip netns`; skipped with the reason otherwise. The
// namespace and the veth pair are removed even when the test fails.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startHub, waitFor, watchLateness } = require('./lib/hub');
const { stopAll } = require('./lib/ws');
const { netns } = require('./lib/netns');

const PING = 300;
const PONG = 300;
const TICK = 50;
const HEARTBEAT = Math.max(PING / 5, TICK);
const CLOSE = 300;
const SLACK = 1500;

const ns = netns('bh', 0);

test('a black-holed peer is closed with 4201 within the liveness bound', { skip: ns.whyNot() || false }, async (t) => {
  t.after(() => ns.cleanup());
  ns.setup();
  const hub = await startHub(['--loops', '2', '--ping-interval', `${PING}ms`,
    '--pong-timeout', `${PONG}ms`, '--tick', `${TICK}ms`, '--close-timeout', `${CLOSE}ms`,
    '--allow-default-secret'], { bind: ns.hostIp });
  const events = [];
  const client = spawn('ip', ns.exec(process.execPath,
    [path.join(__dirname, 'lib', 'netns-client.js'), hub.wsUrl()]),
  { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  client.stdout.on('data', (d) => {
    out += d;
    let i;
    while ((i = out.indexOf('\n')) >= 0) {
      events.push(JSON.parse(out.slice(0, i)));
      out = out.slice(i + 1);
    }
  });
  let clientErr = '';
  client.stderr.on('data', (d) => { clientErr += d; });
  // ip netns exec execs node in place: this PID is the client.
  t.after(async () => {
    try { process.kill(client.pid, 'SIGKILL'); } catch (_) { /* gone */ }
    await stopAll(hub);
  });

  const count = (ev) => events.filter((e) => e.ev === ev).length;
  await waitFor(() => count('open') && events.find((e) => e.ev === 'message'),
    `the namespaced client to connect (${clientErr})`);
  // It is alive: it answers two pings across the veth pair.
  await waitFor(() => count('ping') >= 2, 'two pings answered', 5000);
  const before = await hub.stats();
  assert.equal(before.totals.sessions, 1);
  assert.ok(before.totals.pongs >= 1);

  const late = watchLateness(hub);
  t.after(() => late.stop());
  const how = ns.drop();
  const tDrop = Date.now();
  const design = PING + HEARTBEAT + PONG + 2 * TICK + CLOSE + TICK;
  const st = await waitFor(async () => {
    const s = await hub.stats();
    return s.totals.closed['4201'] >= 1 && s;
  }, 'the hub to close the black-holed peer with 4201', design + SLACK + 30000, 10);
  const detected = Date.now() - tDrop;
  await late.stop();
  // The scheduling allowance: how late the hub's timers and this process ran.
  const bound = design + SLACK + late.allowanceMs();
  assert.equal(count('close'), 0, 'the client never saw a close (it is black-holed)');
  assert.equal(st.totals.sessions, 0);
  assert.equal(st.totals.closed['4201'], 1);
  assert.equal(st.totals.closed.peer, 0);
  const timeouts = st.per_loop.reduce((a, l) => a + l.close_timeouts, 0);
  assert.equal(timeouts, 1, 'dropped at the close timeout');
  assert.ok(detected <= bound, `detected after ${detected} ms > ${bound}`);
  t.diagnostic(`${how}: 4201 counted ${detected} ms after the drop (bound ` +
    `${design} ms + ${SLACK} slack + ${late.describe()}, incl. close timeout ${CLOSE})`);
});
