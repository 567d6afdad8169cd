'use strict';
// Peer-caused log lines are rate-limited per client address (server/lws/log.c,
// server/base/peerlog.h), so a noisy client cannot hide another address's auth
// failure; the noisy address's next line that gets through says how many
// of its lines were suppressed, and a periodic summary says the rest. The
// address is the socket's peer (two loopback addresses: 127.0.0.1 and
// 127.0.0.2, the client socket bound with localAddress), or with
// --trusted-proxies the right-most X-Forwarded-For entry that is not a
// trusted proxy; a client that is not a trusted proxy cannot choose its
// address with the header.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, request, waitFor, BINARY } = require('./lib/hub');
const { open, stopAll } = require('./lib/ws');
const { spawn } = require('node:child_process');

const FLOOD_MAX = 6000;       // bad subscribes the noisy client may send
const FLOOD_BEFORE = 1000;    // refused before the quiet client sends
const BATCH = 50;
// Refused subscribes count against a connection's subscribe rate, whose
// burst follows --max-subscriptions: room for the whole flood.
const HUB_ARGS = ['--loops', '2', '--max-subscriptions', '10000'];

const badSub = (channel) => ({
  event: 'pusher:subscribe',
  data: { channel, auth: 'app-key:0000000000000000000000000000000000000000000000000000000000000000' },
});
// subscription_error replies per channel, counted as they come.
function countErrors(c) {
  const n = {};
  c.ws.on('message', (d) => {
    const m = JSON.parse(String(d));
    if (m.event === 'pusher:subscription_error') n[m.channel] = (n[m.channel] || 0) + 1;
  });
  return (channel) => n[channel] || 0;
}

// The text lines of stderr logged for address addr.
const linesOf = (hub, addr) => hub.stderr.split('\n')
  .filter((l) => l.includes(` peer=${addr} `));
// "(N lines from ADDR suppressed in the last Xs)" counts on those lines.
const reported = (lines, addr) => lines.map((l) => {
  const m = new RegExp(`\\((\\d+) lines? from ${addr.replace(/\./g, '\\.')} suppressed in the last (\\d+)s\\)$`).exec(l);
  return m ? Number(m[1]) : 0;
});

// The counts of addr in the periodic summary lines ("peer log: N lines from
// K addresses suppressed in the last Xs: 127.0.0.1 500, ..."): a run slow
// enough to span a summary period has some of its suppressions there.
const summarized = (hub, addr) => hub.stderr.split('\n')
  .filter((l) => /peer log: \d+ lines? from \d+ address/.test(l))
  .map((l) => {
    const m = new RegExp(`[:,] ${addr.replace(/\./g, '\\.')} (\\d+)(,|$)`).exec(l);
    return m ? Number(m[1]) : 0;
  });

// A noisy client keeps sending bad subscribes while a quiet one (another
// address) sends one: the quiet one's line must be in the log. Then the
// noisy one's suppressed count must show on its next line that passes.
async function noisyAndQuiet(t, hub, noisyOpts, quietOpts, noisyAddr, quietAddr) {
  const noisy = await open(hub, noisyOpts);
  const quiet = await open(hub, quietOpts);
  const clients = [noisy, quiet];
  t.after(() => stopAll(hub, clients));
  const noisyErrors = countErrors(noisy);
  const quietErrors = countErrors(quiet);

  // The flood runs in batches until the quiet client's refusal is back,
  // so the hub refuses the quiet one in the middle of it: a single token
  // bucket for all, as before, had no token left for it then (0 of 5
  // trials logged the quiet line; each of these did).
  let sent = 0;
  const flood = (async () => {
    while (sent < FLOOD_MAX && !quietErrors('private-quiet')) {
      for (let i = 0; i < BATCH; i++) noisy.send(badSub('private-noisy'));
      sent += BATCH;
      await waitFor(() => noisyErrors('private-noisy') >= sent - 2 * BATCH,
        'the hub to keep up with the flood', 20000, 1);
    }
  })();
  await waitFor(() => noisyErrors('private-noisy') >= FLOOD_BEFORE, 'the flood to be under way', 20000, 1);
  quiet.send(badSub('private-quiet'));
  await waitFor(() => quietErrors('private-quiet'), 'the quiet client\'s refusal', 20000, 1);
  await flood;
  assert.equal(noisy.closed, null, 'the noisy client was not closed');
  await waitFor(() => noisyErrors('private-noisy') === sent, 'every flooded refusal', 20000, 5);

  // The quiet address's auth failure is in the log, with its address.
  const quietRe = new RegExp(` peer=${quietAddr.replace(/\./g, '\\.')} socket \\S+: subscribe private-quiet refused: bad signature`);
  await waitFor(() => quietRe.test(hub.stderr), `${quietAddr}'s auth-failure line`, 10000);
  // The noisy address was held to its own bucket: far fewer lines than
  // it caused.
  const floodLines = linesOf(hub, noisyAddr).filter((l) => /private-noisy refused/.test(l));
  assert.ok(sent >= FLOOD_BEFORE, `sent ${sent}`);
  assert.ok(floodLines.length < sent / 2, `${floodLines.length} of ${sent} noisy lines logged`);

  // Every refusal is either a line or counted in one (its address's next
  // line or a summary), never both. The last ones refused may still wait
  // for the address's next line that passes: one more bad subscribe every
  // 100 ms (at most 100) until they are all accounted for. (Waiting for
  // any line with a count was not enough: one from the middle of the
  // flood could satisfy it while the last suppressions were still held.)
  const accountedNow = () => {
    const lines = linesOf(hub, noisyAddr).filter((l) => /private-noisy refused/.test(l));
    return lines.length + reported(lines, noisyAddr).reduce((a, b) => a + b, 0) +
      summarized(hub, noisyAddr).reduce((a, b) => a + b, 0);
  };
  let more = 0;
  await waitFor(() => {
    if (accountedNow() >= sent) return true;
    if (more < 100) { noisy.send(badSub('private-noisy')); more++; }
    return false;
  }, `every one of ${noisyAddr}'s ${sent} refusals accounted for`, 20000, 100);
  const accounted = accountedNow();
  assert.ok(accounted >= sent && accounted <= sent + more,
    `${accounted} accounted for, ${sent} + ${more} sent`);
  return { noisy, quiet };
}

test('a noisy client does not hide another address\'s auth failure', async (t) => {
  const hub = await startHub(HUB_ARGS);
  const { noisy } = await noisyAndQuiet(t, hub, { localAddress: '127.0.0.1' },
    { localAddress: '127.0.0.2' }, '127.0.0.1', '127.0.0.2');

  // What no line of the address carried out comes in the summary (at most
  // every 10 s): a last burst that nothing follows.
  const before = hub.stderr.length;
  for (let i = 0; i < 40; i++) noisy.send(badSub('private-noisy'));
  await waitFor(() => /warn  loop=0 peer log: \d+ lines? from \d+ address(es)? suppressed in the last \d+s:.* 127\.0\.0\.1 \d+/
    .test(hub.stderr.slice(before)), 'the summary line', 30000, 100);
});

test('--trusted-proxies: the client named by X-Forwarded-For, per client', async (t) => {
  const hub = await startHub([...HUB_ARGS, '--trusted-proxies', '127.0.0.1/32, ::1'],
    { logLevel: 'debug' });
  // Two clients behind one trusted proxy (127.0.0.1): each has its own
  // bucket. The left-most entry is the client's own claim and is ignored.
  const via = (xff) => ({ localAddress: '127.0.0.1', headers: { 'X-Forwarded-For': xff } });
  const { noisy } = await noisyAndQuiet(t, hub, via('198.51.100.1, 203.0.113.5'),
    via('203.0.113.6'), '203.0.113.5', '203.0.113.6');
  assert.match(hub.stderr, / peer=203\.0\.113\.5 socket \S+: open app=app-id peer=203\.0\.113\.5/);

  // A client that is not a trusted proxy cannot pick its address.
  const spoof = await open(hub, { localAddress: '127.0.0.2', headers: { 'X-Forwarded-For': '203.0.113.7' } });
  spoof.send(badSub('private-spoof'));
  await waitFor(() => / peer=127\.0\.0\.2 socket \S+: subscribe private-spoof refused/.test(hub.stderr),
    'the spoofer\'s line under its own address');
  assert.ok(!hub.stderr.includes('203.0.113.7'));
  spoof.terminate();

  // REST requests through the proxy: each request its own client.
  const r = await request('POST', hub.url('/apps/app-id/events'), '{}',
    { 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.8' });
  assert.equal(r.status, 401);
  await waitFor(() => / peer=203\.0\.113\.8 REST POST \S+ refused/.test(hub.stderr), 'the REST line');
  noisy.terminate();
});

test('--trusted-proxies is checked: a bad CIDR is a one-line error', async () => {
  const run = (args) => new Promise((resolve) => {
    const child = spawn(BINARY, ['--check-config', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.on('close', (code) => resolve({ code, err }));
  });
  const bad = await run(['--trusted-proxies', '10.0.0.0/8, 10.0.0.0/33']);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--trusted-proxies: "10\.0\.0\.0\/33" is not an address or CIDR/);
  const env = await new Promise((resolve) => {
    const child = spawn(BINARY, ['--check-config'], {
      stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LUBDUB_TRUSTED_PROXIES: 'proxy.local' },
    });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.on('close', (code) => resolve({ code, err }));
  });
  assert.equal(env.code, 2);
  assert.match(env.err, /trusted.proxies/i);
  const good = await run(['--trusted-proxies', '10.0.0.0/8,2001:db8::/32, 192.0.2.7']);
  assert.equal(good.code, 0, good.err);
});
