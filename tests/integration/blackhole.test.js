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
const { spawn, execFileSync } = require('node:child_process');
const { startHub, waitFor, watchLateness } = require('./lib/hub');
const { stopAll } = require('./lib/ws');

const PING = 300;
const PONG = 300;
const TICK = 50;
const HEARTBEAT = Math.max(PING / 5, TICK);
const CLOSE = 300;
const SLACK = 1500;

const NS = `lubdub-bh-${process.pid}`;
const VH = `ldb${process.pid % 10000000}h`;
const VN = `ldb${process.pid % 10000000}n`;
// A /30 of link-local space private to this run.
const NET = `169.254.${1 + (process.pid % 254)}`;
const HOST_IP = `${NET}.1`;
const PEER_IP = `${NET}.2`;

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts }).toString();
}
function tryRun(cmd, args) {
  try { return run(cmd, args); } catch (_) { return null; }
}
function have(cmd) {
  return tryRun('sh', ['-c', `command -v ${cmd}`]) !== null;
}

function whyNot() {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'needs root';
  if (tryRun('ip', ['netns', 'list']) === null) return '`ip netns` is not available';
  return null;
}

let created = false;
function cleanup() {
  if (!created) return;
  created = false;
  tryRun('ip', ['netns', 'del', NS]); // takes VN, and with it VH
  tryRun('ip', ['link', 'del', VH]);
}
process.on('exit', cleanup);

function setupNetwork() {
  created = true;
  run('ip', ['netns', 'add', NS]);
  run('ip', ['link', 'add', VH, 'type', 'veth', 'peer', 'name', VN]);
  run('ip', ['link', 'set', VN, 'netns', NS]);
  run('ip', ['addr', 'add', `${HOST_IP}/30`, 'dev', VH]);
  run('ip', ['link', 'set', VH, 'up']);
  run('ip', ['netns', 'exec', NS, 'ip', 'link', 'set', 'lo', 'up']);
  run('ip', ['netns', 'exec', NS, 'ip', 'addr', 'add', `${PEER_IP}/30`, 'dev', VN]);
  run('ip', ['netns', 'exec', NS, 'ip', 'link', 'set', VN, 'up']);
}

// Drop everything in and out of the namespace.
function blackhole() {
  if (have('nft')) {
    const rules = 'table inet lubdub_bh {\n' +
      ' chain in { type filter hook input priority 0; policy drop; }\n' +
      ' chain out { type filter hook output priority 0; policy drop; }\n}\n';
    execFileSync('ip', ['netns', 'exec', NS, 'nft', '-f', '-'], { input: rules });
    return 'nft';
  }
  if (have('iptables')) {
    run('ip', ['netns', 'exec', NS, 'iptables', '-A', 'INPUT', '-j', 'DROP']);
    run('ip', ['netns', 'exec', NS, 'iptables', '-A', 'OUTPUT', '-j', 'DROP']);
    return 'iptables';
  }
  throw new Error('neither nft nor iptables is installed (deploy/install-deps.sh test)');
}

test('a black-holed peer is closed with 4201 within the liveness bound', { skip: whyNot() || false }, async (t) => {
  t.after(cleanup);
  setupNetwork();
  const hub = await startHub(['--loops', '2', '--ping-interval', `${PING}ms`,
    '--pong-timeout', `${PONG}ms`, '--tick', `${TICK}ms`, '--close-timeout', `${CLOSE}ms`,
    '--allow-default-secret'], { bind: HOST_IP });
  const events = [];
  const client = spawn('ip', ['netns', 'exec', NS, process.execPath,
    path.join(__dirname, 'lib', 'netns-client.js'), hub.wsUrl()],
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
  const how = blackhole();
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
