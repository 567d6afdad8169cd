'use strict';
// /metrics: after some traffic (so every histogram has observations), the
// exposition passes `promtool check metrics` (format and lint) and carries
// the series an operator's dashboards and alerts use, with consistent
// histograms.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const PusherServer = require('pusher');
const { startHub, request, waitFor, once, ROOT } = require('./lib/hub');
const { promtool } = require('./lib/promtool');
const { open, subscribe } = require('./lib/ws');

// name{labels} value -> [{ name, labels: {..}, value }]
function parse(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `unparsable line: ${line}`);
    const labels = {};
    for (const [, k, v] of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[k] = v;
    }
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

const sum = (samples, name, where = () => true) => samples
  .filter((s) => s.name === name && where(s.labels)).reduce((a, s) => a + s.value, 0);

// A raw client subscribed to 'metrics'.
async function connect(hub) {
  const c = await open(hub);
  await subscribe(c, 'metrics');
  return c;
}

test('/metrics passes promtool and has the key series', async (t) => {
  // A short ping interval so the heartbeat pings (ws answers with pongs)
  // and the pong RTT histogram fills within the test.
  const hub = await startHub(['--loops', '2', '--ping-interval', '300ms',
    '--heartbeat-interval', '100ms', '--tick', '20ms']);
  t.after(() => hub.stop());

  const clients = [await connect(hub), await connect(hub)];
  t.after(() => clients.forEach((c) => c.terminate()));
  const rest = new PusherServer({
    appId: 'app-id', key: 'app-key', secret: 'app-secret',
    host: hub.host, port: hub.port, useTLS: false,
  });
  assert.equal((await rest.trigger('metrics', 'tick', { n: 1 })).status, 200);
  await waitFor(() => clients.every((c) => c.msgs.find((m) => m.event === 'tick')),
    'the published event at both clients');
  clients[0].ws.send(JSON.stringify({ event: 'pusher:ping', data: {} }));
  clients[0].ws.send('not json');
  await waitFor(async () => (await hub.stats()).totals.pongs >= 2, 'heartbeat pongs', 20000);

  const res = await request('GET', hub.url('/metrics'));
  assert.equal(res.status, 200);
  assert.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  const check = await promtool(res.body);
  assert.equal(check.code, 0, `promtool check metrics:\n${check.out}`);
  assert.equal(check.out.trim(), '', `promtool lint findings:\n${check.out}`);

  const s = parse(res.body);
  // Every series is ours and every family has HELP and TYPE.
  for (const x of s) assert.match(x.name, /^lubdub_/);
  for (const name of new Set(s.map((x) => x.name))) {
    const base = name.replace(/_(bucket|sum|count)$/, '');
    const fam = res.body.includes(`# TYPE ${base} histogram\n`) ? base : name;
    assert.ok(res.body.includes(`# HELP ${fam} `) && res.body.includes(`# TYPE ${fam} `),
      `HELP and TYPE for ${name}`);
  }
  assert.deepEqual(new Set(s.filter((x) => x.name === 'lubdub_sessions').map((x) => x.labels.loop)),
    new Set(['0', '1']), 'one sessions series per loop');
  assert.equal(sum(s, 'lubdub_sessions'), 2);
  assert.equal(sum(s, 'lubdub_app_sessions', (l) => l.app === 'app-id'), 2);
  assert.equal(sum(s, 'lubdub_sessions_accepted_total'), 2);
  assert.ok(sum(s, 'lubdub_messages_out_total') >= 2);
  assert.ok(sum(s, 'lubdub_messages_in_total') >= 4);
  assert.ok(sum(s, 'lubdub_bad_messages_total') >= 1);
  assert.ok(sum(s, 'lubdub_pusher_pings_total') >= 1);
  assert.ok(sum(s, 'lubdub_pings_sent_total') >= 2);
  assert.equal(sum(s, 'lubdub_subscriptions'), 2);
  assert.equal(sum(s, 'lubdub_draining'), 0);
  assert.equal(s.find((x) => x.name === 'lubdub_build_info').value, 1);
  assert.ok(s.some((x) => x.name === 'lubdub_sessions_closed_total' && x.labels.reason === '4201'));

  // Histograms: cumulative buckets, +Inf equals _count, data where expected.
  for (const h of ['lubdub_pong_rtt_seconds', 'lubdub_heartbeat_scan_seconds',
    'lubdub_wheel_advance_seconds']) {
    for (const loop of ['0', '1']) {
      const buckets = s.filter((x) => x.name === `${h}_bucket` && x.labels.loop === loop);
      assert.ok(buckets.length > 2, `${h} buckets on loop ${loop}`);
      for (let i = 1; i < buckets.length; i++) {
        assert.ok(buckets[i].value >= buckets[i - 1].value, `${h} cumulative`);
        assert.ok(buckets[i].labels.le === '+Inf' || Number(buckets[i].labels.le) > Number(buckets[i - 1].labels.le));
      }
      assert.equal(buckets[buckets.length - 1].labels.le, '+Inf');
      assert.equal(buckets[buckets.length - 1].value,
        sum(s, `${h}_count`, (l) => l.loop === loop));
    }
    assert.ok(sum(s, `${h}_count`) > 0, `${h} has observations`);
  }

  // docs/OPERATIONS.md lists exactly the families served.
  const served = [...res.body.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => `${m[1]} ${m[2]}`);
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'OPERATIONS.md'), 'utf8');
  const documented = [...doc.matchAll(/^\| `(lubdub_[a-z_]+)` \| (\w+) \|/gm)].map((m) => `${m[1]} ${m[2]}`);
  assert.deepEqual([...documented].sort(), [...served].sort(),
    'docs/OPERATIONS.md metrics table matches /metrics');

  // Closing one client shows up as a per-reason close.
  const closed = once(clients[1].ws, 'close');
  clients[1].ws.close();
  await closed;
  await waitFor(async () => {
    const m = parse((await request('GET', hub.url('/metrics'))).body);
    return sum(m, 'lubdub_sessions') === 1 &&
      sum(m, 'lubdub_app_sessions') === 1 &&
      sum(m, 'lubdub_sessions_closed_total', (l) => l.reason === 'peer') === 1;
  }, 'the close in /metrics');
});
