'use strict';
// The cluster key (docs/SCALING.md, "The cluster key"): nodes started with
// --cluster-key-file MAC every envelope and member_added they publish
// through Redis and drop what does not verify. A redis-server of our own:
// normal operation across nodes with the key; then, written into Redis
// directly from the test (a raw RESP socket), a forged envelope on a
// private channel, a forged member_added, and a genuine envelope captured
// with a SUBSCRIBE of the test's own and published again: none reaches a
// subscriber, and /stats counts them (auth_dropped, replays). A node with
// the wrong key is not heard, and a node given two keys (a rotation)
// accepts either and signs with the first.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
// Raw connections to the test's Redis: TLS under LUBDUB_TEST_REDIS_TLS.
const net = require('./lib/redis').redisNet;
const os = require('node:os');
const path = require('node:path');
const { waitFor } = require('./lib/hub');
const { APP, serverSdk } = require('./lib/clients');
const { startRedis, startNode, allUp, bp, joined, presenceView } = require('./lib/cluster');

const K1 = 'k1-0123456789abcdef-first-key';
const K2 = 'k2-fedcba9876543210-second-key';

function keyFile(t, text) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-key-'));
  const f = path.join(dir, 'cluster.key');
  fs.writeFileSync(f, text, { mode: 0o600 });
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return f;
}

// A raw RESP connection to Redis: cmd(...args) for one reply; with
// subscribe(chan) it collects [channel, Buffer] messages in msgs.
async function resp(t, port) {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
  t.after(() => sock.destroy());
  let buf = Buffer.alloc(0);
  const waiters = [];
  const msgs = [];
  // One value at buf[i..]: [value, next] or null when incomplete.
  const parse = (i) => {
    const nl = buf.indexOf('\r\n', i);
    if (nl < 0) return null;
    const type = String.fromCharCode(buf[i]);
    const line = buf.toString('latin1', i + 1, nl);
    if (type === '+' || type === '-') return [type === '-' ? new Error(line) : line, nl + 2];
    if (type === ':') return [Number(line), nl + 2];
    if (type === '$') {
      const n = Number(line);
      if (n < 0) return [null, nl + 2];
      if (buf.length < nl + 2 + n + 2) return null;
      return [buf.subarray(nl + 2, nl + 2 + n), nl + 2 + n + 2];
    }
    if (type === '*') {
      const out = [];
      let j = nl + 2;
      for (let k = 0; k < Number(line); k++) {
        const v = parse(j);
        if (!v) return null;
        out.push(v[0]);
        j = v[1];
      }
      return [out, j];
    }
    throw new Error(`RESP type ${type}`);
  };
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const v = parse(0);
      if (!v) break;
      buf = buf.subarray(v[1]);
      const val = v[0];
      if (Array.isArray(val) && Buffer.isBuffer(val[0]) && val[0].toString() === 'message') {
        msgs.push([val[1].toString(), Buffer.from(val[2])]);
      } else if (waiters.length) {
        waiters.shift()(val);
      }
    }
  });
  const cmd = (...args) => new Promise((resolve) => {
    waiters.push(resolve);
    const parts = [Buffer.from(`*${args.length}\r\n`)];
    for (const a of args) {
      const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
      parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
    }
    sock.write(Buffer.concat(parts));
  });
  await cmd('AUTH', 'admin', 'lubdub-admin-pass');   // lib/redis.js's admin
  return { cmd, msgs };
}

// An unsigned envelope (hub/cluster/cluster_envelope.h) of kind 1: what anyone who can
// PUBLISH could send.
function envelope(origin, app, channel, data) {
  const u16 = (n) => { const b = Buffer.alloc(2); b.writeUInt16BE(n); return b; };
  const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
  const o = Buffer.from(origin);
  const a = Buffer.from(app);
  const c = Buffer.from(channel);
  const d = Buffer.from(data);
  return Buffer.concat([Buffer.from('LDB1'), Buffer.from([1, 0]), u16(o.length), o,
    Buffer.alloc(8, 1), Buffer.alloc(8, 2), u16(a.length), a, u16(c.length), c,
    Buffer.alloc(12), Buffer.alloc(8), u32(d.length), d]);
}

// A raw subscriber of ch on hub; got(name) counts its events called name.
async function listener(t, hub, ch) {
  const c = await joined(t, hub, ch);
  c.got = (name) => c.msgs.filter((m) => m.channel === ch && m.event === name).length;
  return c;
}

test('the cluster key: forged and replayed messages are dropped', async (t) => {
  const redis = await startRedis(t);
  const k1 = keyFile(t, `${K1}\n`);
  const n1 = await startNode(t, redis.url(), 'n1', ['--cluster-key-file', k1]);
  const n2 = await startNode(t, redis.url(), 'n2', ['--cluster-key-file', k1]);
  const n3 = await startNode(t, redis.url(), 'n3', ['--cluster-key-file', keyFile(t, `${K2}\n`)]);
  // A rotation: signs with K2, accepts K2 and K1.
  const n4 = await startNode(t, redis.url(), 'n4', ['--cluster-key-file', keyFile(t, `${K2}\n${K1}\n`)]);
  await allUp([n1, n2, n3, n4]);
  const ch = 'private-k';
  const rchan = `lubdub:${APP.id}:${ch}`;

  // Normal operation with the key: an event from n1 reaches n2 and n4.
  const s2 = await listener(t, n2, ch);
  const s3 = await listener(t, n3, ch);
  const s4 = await listener(t, n4, ch);
  const spy = await resp(t, redis.port);
  await spy.cmd('SUBSCRIBE', rchan);
  await serverSdk(n1).trigger(ch, 'hello', { n: 1 });
  await waitFor(() => s2.got('hello') === 1 && s4.got('hello') === 1, 'hello on n2 and n4', 20000);
  await waitFor(() => spy.msgs.length >= 1, 'the test saw the envelope', 20000);
  const genuine = spy.msgs[0][1];
  // Presence: a member on n1 is seen on n2 (a signed member_added).
  const pch = 'presence-k';
  const w = await joined(t, n2, pch, 'w');
  await joined(t, n1, pch, 'u1');
  await waitFor(() => (presenceView(w, pch).ids || []).includes('u1'), 'u1 on n2', 20000);
  // n3 has another key: it heard nothing of n1 (and counted it).
  const before3 = (await bp(n3)).auth_dropped;
  assert.ok(before3 >= 1, `n3 auth_dropped ${before3}`);
  assert.equal(s3.got('hello'), 0);

  const d0 = await bp(n2);
  // 1. A forged envelope, unsigned.
  const evil = JSON.stringify({ event: 'evil', channel: ch, data: '{}' });
  const pub = await resp(t, redis.port);
  assert.equal(await pub.cmd('PUBLISH', rchan, envelope('n1', APP.id, ch, evil)), 4);
  // 2. A forged one with a made-up trailer (counter, time, MAC).
  const trailer = Buffer.alloc(32);
  trailer.writeBigUInt64BE(BigInt(Date.now()) * 1000n + 999999n, 0);
  trailer.writeBigUInt64BE(BigInt(Date.now()), 8);
  await pub.cmd('PUBLISH', rchan, Buffer.concat([envelope('n1', APP.id, ch, evil), trailer]));
  // 3. The genuine envelope, replayed.
  await pub.cmd('PUBLISH', rchan, genuine);
  // 4. A forged member_added (unsigned) and one with a made-up stamp.
  const mchan = `lubdub:m:${APP.id}:${pch}`;
  await pub.cmd('PUBLISH', mchan, '99\n+4\nfake{}');
  await pub.cmd('PUBLISH', mchan, `~${'0'.repeat(64)}n1\n99\n+5\nfake2{}`);
  // A marker from n1 after them: once it is in, they were read.
  await serverSdk(n1).trigger(ch, 'marker', { n: 2 });
  await waitFor(() => s2.got('marker') === 1, 'marker on n2', 20000);
  await waitFor(async () => (await bp(n2)).auth_dropped >= d0.auth_dropped + 4, 'n2 counted the forgeries', 20000);
  const d1 = await bp(n2);
  assert.equal(s2.got('evil'), 0);
  assert.equal(s2.got('hello'), 1, 'the replay was not delivered');
  assert.equal(d1.auth_dropped - d0.auth_dropped, 4, JSON.stringify(d1));
  assert.equal(d1.replays - d0.replays, 1, JSON.stringify(d1));
  const v = presenceView(w, pch);
  assert.deepEqual(v.ids, ['u1', 'w']);
  assert.match(n2.stderr, /dropped \d+ messages that do not verify with the cluster key/);

  // The wrong key: n3's event is dropped by n1 and n2 (K1 only) and
  // taken by n4 (which accepts K2 too); n4's (signed with K2) likewise.
  const a2 = (await bp(n2)).auth_dropped;
  await serverSdk(n3).trigger(ch, 'from-n3', {});
  await serverSdk(n4).trigger(ch, 'from-n4', {});
  await waitFor(() => s4.got('from-n3') === 1 && s3.got('from-n4') === 1, 'n4 hears n3, n3 hears n4', 20000);
  await serverSdk(n1).trigger(ch, 'marker2', {});
  await waitFor(() => s2.got('marker2') === 1, 'marker2 on n2', 20000);
  await waitFor(async () => (await bp(n2)).auth_dropped >= a2 + 2, 'n2 dropped n3 and n4', 20000);
  assert.equal(s2.got('from-n3'), 0);
  assert.equal(s2.got('from-n4'), 0);
  // n4 hears n1 (K1) and n2 too: rotation accepts either key.
  assert.equal(s4.got('marker2'), 1);
  assert.equal(s3.got('marker2'), 0);
  for (const n of [n1, n2, n3, n4]) assert.equal((await bp(n)).bad, 0, n.id);
});

test('--check-config refuses a bad cluster key file in one line', (t) => {
  const { spawnSync } = require('node:child_process');
  const { BINARY } = require('./lib/hub');
  const cases = [
    [keyFile(t, 'short\n'), /key 1 is 5 bytes \(16\.\.1024 allowed\)/],
    [keyFile(t, `${K1}\n${K2}\n${K1}\n`), /more than two keys/],
    [keyFile(t, '\n\n'), /no key/],
    ['/nonexistent/cluster.key', /No such file or directory/],
  ];
  for (const [file, re] of cases) {
    const r = spawnSync(BINARY, ['--check-config', '--redis', 'redis://127.0.0.1:1/0',
      '--cluster-key-file', file], { encoding: 'utf8' });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, re);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
  const ok = spawnSync(BINARY, ['--check-config', '--redis', 'redis://127.0.0.1:1/0',
    '--cluster-key-file', keyFile(t, `${K1}\n${K2}\n`)], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
});
