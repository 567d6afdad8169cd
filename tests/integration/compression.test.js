'use strict';
// Compression (permessage-deflate, RFC 7692; issue 34) with clients nobody
// here wrote: node's ws library with and without perMessageDeflate (and
// offering window sizes), pusher-js in node (whose transport never offers
// it), and a raw socket that offers it by hand, checks RSV1 on every frame
// and inflates each compressed payload with node's own zlib. What is
// compressed: frames of at least --compression-min-size wire bytes that
// shrink, publications and a session's own frames alike, never control
// frames, a frame over 64 KiB too. Mixed subscribers of one channel get
// the same bytes in the same order; a deflate bomb, a corrupt stream and
// compressed invalid UTF-8 get their close codes (the bound is
// --max-message to the byte) and leave the hub healthy; a compressing
// reader that stops reading is closed 4100 while the frames it shares stay
// good for the others; /stats and /metrics count what was compressed;
// --compression off and an app's "compression": false (at start or by a
// reload) negotiate nothing and send plain frames.
// The browser (Chromium) is in compression_browser.test.js, the cluster in
// compression_cluster.test.js; the negotiation's edge cases and the RSV
// rules on fragments are rfc7692.test.js's.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startHub, waitFor } = require('./lib/hub');
const { pusherClient, connected } = require('./lib/clients');
const { frame, OP } = require('./lib/rawws');
const {
  TAIL, RSV1, deflate, corpus1k, publishEvent, pmdRaw, textClient, compression,
  compressionMetrics, delta,
} = require('./lib/pmd');

const ON = ['--compression', 'on'];
const CORPUS = corpus1k();
// The 200 B corpus of bench/corpus (laravel_200.json), inline: its frame is
// above the default --compression-min-size (128 B), its data small.
const SMALL_CORPUS = '{"message":{"id":771204,"user_id":9174,"body":"On my way, see you at 6!",' +
  '"created_at":"2026-12-05T11:03:02.000000Z"},"socket":null}';

// A compressing raw client and a plain one, both subscribed to channel.
async function rawPair(t, hub, channel) {
  const c = await pmdRaw(t, hub).open();
  const p = await pmdRaw(t, hub, { offer: null }).open();
  await c.subscribe(channel);
  await p.subscribe(channel);
  return { c, p };
}

test('a raw client: RSV1 on frames over --compression-min-size only, and zlib inflates them to the plain bytes', async (t) => {
  const hub = await startHub(ON, { t, loops: 2 });
  const { c, p } = await rawPair(t, hub, 'feed');

  // The 101: the extension with both no-context-takeover parameters, and
  // client_max_window_bits answered because it was offered (bare: 15).
  const ext = c.extensions();
  assert.equal(ext.length, 1, JSON.stringify(c.response.headers));
  assert.equal(ext[0].name, 'permessage-deflate');
  assert.equal(ext[0].params.server_no_context_takeover, true);
  assert.equal(ext[0].params.client_no_context_takeover, true);
  assert.equal(ext[0].params.client_max_window_bits, '15');
  assert.deepEqual(p.extensions(), [], 'no offer, no extension');

  // A 45 B frame, the 1 KiB corpus, the 200 B corpus, a 45 B frame.
  await publishEvent(hub, 'feed', 'tick', '1');
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  await publishEvent(hub, 'feed', 'App\\Events\\MessageSent', SMALL_CORPUS);
  await publishEvent(hub, 'feed', 'tick', '2');
  const got = await c.waitEvents('feed', 4);
  const plain = await p.waitEvents('feed', 4);

  assert.deepEqual(plain.map((x) => x.rsv), [0, 0, 0, 0], 'the plain client never sees RSV1');
  assert.deepEqual(got.map((x) => x.compressed), [false, true, true, false],
    `RSV1 by size: wire sizes ${got.map((x) => x.wire.length)}`);
  assert.deepEqual(got.map((x) => x.rsv & ~RSV1), [0, 0, 0, 0], 'RSV2 and RSV3 clear');
  for (let i = 0; i < 4; i++) {
    assert.ok(got[i].bytes.equals(plain[i].wire), `event ${i}: inflated bytes equal the plain frame's`);
  }
  assert.equal(JSON.parse(got[1].text).data, CORPUS.data);
  assert.equal(JSON.parse(got[2].text).data, SMALL_CORPUS);
  // RFC 7692 7.2.1: the sync flush's 00 00 ff ff is not on the wire.
  for (const x of [got[1], got[2]]) {
    assert.ok(!x.wire.subarray(-4).equals(TAIL), 'the 00 00 ff ff tail is removed');
  }
  // zlib level 6 on this corpus: 0.38 (docs/BENCHMARKS.md); the bound
  // leaves room for the event's own wrapper.
  const ratio = got[1].wire.length / plain[1].wire.length;
  assert.ok(ratio < 0.5, `1 KiB corpus compressed to ${got[1].wire.length}/${plain[1].wire.length} = ${ratio.toFixed(3)}`);
});

test('--compression-min-size: a frame below the threshold goes plain to a compressing client', async (t) => {
  const hub = await startHub([...ON, '--compression-min-size', '2000'], { t, loops: 1 });
  const { c, p } = await rawPair(t, hub, 'feed');
  assert.equal(c.extensions()[0].name, 'permessage-deflate');
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  await publishEvent(hub, 'feed', 'big', 'x'.repeat(3000));
  const [corpus, big] = await c.waitEvents('feed', 2);
  const plain = await p.waitEvents('feed', 2);
  assert.ok(plain[0].wire.length < 2000);
  assert.equal(corpus.compressed, false, `a ${plain[0].wire.length} B frame under a 2000 B threshold`);
  assert.ok(corpus.bytes.equals(plain[0].wire));
  assert.equal(big.compressed, true, 'a 3 KB frame over it');
  assert.ok(big.bytes.equals(plain[1].wire));
  assert.equal((await compression(hub)).compressed_frames, 1);
});

test('--compression-min-size counts the plain frame\'s wire bytes, header included; 0 tries every frame, and one that would not shrink goes plain', async (t) => {
  // A frame of `wire` bytes (a payload under 126 B: a 2-byte header).
  const base = JSON.stringify({ event: 't', channel: 'feed', data: '' }).length;
  const data = (wire) => 'a'.repeat(wire - 2 - base);
  const hub = await startHub([...ON, '--compression-min-size', '100'], { t, loops: 1 });
  const { c, p } = await rawPair(t, hub, 'feed');
  await publishEvent(hub, 'feed', 't', data(99));
  await publishEvent(hub, 'feed', 't', data(100));
  const [under, at] = await c.waitEvents('feed', 2);
  const plain = await p.waitEvents('feed', 2);
  assert.deepEqual(plain.map((x) => x.wire.length + 2), [99, 100]);
  assert.equal(under.compressed, false, 'a 99 B frame under a 100 B threshold');
  assert.equal(at.compressed, true, 'a 100 B frame at it');
  assert.ok(at.bytes.equals(plain[1].wire));

  const zero = await startHub([...ON, '--compression-min-size', '0'], { t, loops: 1 });
  const z = await rawPair(t, zero, 'feed');
  // Ten CJK characters (30 bytes of UTF-8, mostly 9-bit codes in fixed
  // Huffman) in a 70 B frame: deflate cannot make it smaller. The same
  // ten, repeated, it can.
  const cjk = '\u9f8d\u9cf3\u9e9f\u9f9c\u864e\u8c79\u9be8\u9df9\u9db4\u9dfa';
  await publishEvent(zero, 'feed', 'q', cjk);
  await publishEvent(zero, 'feed', 'q', cjk.repeat(8));
  await publishEvent(zero, 'feed', 'q', 'a');
  const got = await z.c.waitEvents('feed', 3);
  const zp = await z.p.waitEvents('feed', 3);
  assert.equal(got[0].compressed, false, `a ${zp[0].wire.length} B frame that would not shrink goes plain`);
  assert.ok(got[0].wire.equals(zp[0].wire));
  assert.equal(got[1].compressed, true);
  for (const [i, x] of got.entries()) {
    assert.ok(x.bytes.equals(zp[i].wire), `frame ${i} byte-exact`);
    if (x.compressed) assert.ok(x.wire.length < zp[i].wire.length, `frame ${i}: compressed only when smaller`);
  }
});

test('node ws with and without perMessageDeflate: the same events byte-exact; client events sent compressed are relayed', async (t) => {
  const hub = await startHub(ON, { t, loops: 2 });
  const a = await textClient(t, hub);                                // ws's default: offers it
  const b = await textClient(t, hub, { perMessageDeflate: false });
  assert.equal(a.ws.extensions, 'permessage-deflate');
  assert.match(a.upgrade['sec-websocket-extensions'], /^permessage-deflate\b/);
  assert.match(a.upgrade['sec-websocket-extensions'], /server_no_context_takeover/);
  assert.match(a.upgrade['sec-websocket-extensions'], /client_no_context_takeover/);
  assert.equal(b.ws.extensions, '');
  assert.equal(b.upgrade['sec-websocket-extensions'], undefined);

  for (const c of [a, b]) assert.equal((await c.subscribed('feed')).event, 'pusher_internal:subscription_succeeded');
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  await publishEvent(hub, 'feed', 'tick', '1');
  await publishEvent(hub, 'feed', 'App\\Events\\MessageSent', SMALL_CORPUS);
  const ta = await a.waitEvents('feed', 3);
  const tb = await b.waitEvents('feed', 3);
  assert.deepEqual(ta, tb);
  assert.equal(JSON.parse(ta[0]).data, CORPUS.data);
  assert.equal(JSON.parse(ta[2]).data, SMALL_CORPUS);

  // Client events: ws compresses every message it sends when its
  // threshold is 0 (1024 B by default), the subscribe included.
  const s = await textClient(t, hub, { perMessageDeflate: { threshold: 0 } });
  assert.equal(s.ws.extensions, 'permessage-deflate');
  for (const c of [s, a, b]) {
    assert.equal((await c.subscribed('private-chat')).event, 'pusher_internal:subscription_succeeded');
  }
  const before = await compression(hub);
  const small = { event: 'client-note', channel: 'private-chat', data: { text: 'hi' } };
  const large = { event: 'client-note', channel: 'private-chat', data: JSON.parse(CORPUS.data) };
  s.send(small);
  s.send(large);
  const ra = await a.waitEvents('private-chat', 2);
  const rb = await b.waitEvents('private-chat', 2);
  assert.deepEqual(ra, rb);
  assert.deepEqual(ra.map((x) => JSON.parse(x)), [small, large]);
  const d = delta(before, await compression(hub));
  assert.equal(d.inflated_messages, 2, `two compressed client messages inflated: ${JSON.stringify(d)}`);
  assert.equal(s.eventTexts('private-chat').length, 0, 'not echoed to the sender');
});

test('node ws offering window sizes: client_max_window_bits=9 is taken and its messages read, server_max_window_bits=10 declined and it works plain', async (t) => {
  const hub = await startHub(ON, { t, loops: 2 });
  const small = await textClient(t, hub, { perMessageDeflate: { clientMaxWindowBits: 9, threshold: 0 } });
  assert.equal(small.ws.extensions, 'permessage-deflate');
  assert.match(small.upgrade['sec-websocket-extensions'], /client_max_window_bits=9/);
  const narrow = await textClient(t, hub, { perMessageDeflate: { serverMaxWindowBits: 10 } });
  assert.equal(narrow.ws.extensions, '', 'a server window under 15 is declined');
  assert.equal(narrow.upgrade['sec-websocket-extensions'], undefined);
  for (const c of [small, narrow]) {
    assert.equal((await c.subscribed('private-w')).event, 'pusher_internal:subscription_succeeded');
  }
  // ws deflates the 1.2 KiB corpus with a 512 B window; the hub inflates
  // with 32 KiB, which reads any smaller window.
  const data = JSON.parse(CORPUS.data);
  small.send({ event: 'client-order', channel: 'private-w', data });
  const [got] = await narrow.waitEvents('private-w', 1);
  assert.deepEqual(JSON.parse(got), { event: 'client-order', channel: 'private-w', data });
  narrow.send({ event: 'client-back', channel: 'private-w', data });
  const [back] = await small.waitEvents('private-w', 1);
  assert.deepEqual(JSON.parse(back), { event: 'client-back', channel: 'private-w', data });
});

test('pusher-js in node (no offer) works unchanged beside compressing clients', async (t) => {
  const hub = await startHub(ON, { t, loops: 2 });
  const before = await compression(hub);
  const pj = pusherClient(t, hub);
  await connected(pj);
  const got = [];
  const feed = pj.subscribe('feed');
  feed.bind(CORPUS.event, (d) => got.push(d));
  const room = pj.subscribe('private-room');
  const raw = await pmdRaw(t, hub).open();
  await raw.subscribe('private-room');
  await waitFor(() => feed.subscribed && room.subscribed, 'pusher-js subscribed');
  assert.equal(delta(before, await compression(hub)).compression_sessions, 1,
    'the raw client negotiated, pusher-js did not');

  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  await waitFor(() => got.length === 1, 'the corpus event at pusher-js');
  assert.deepEqual(got[0], JSON.parse(CORPUS.data));

  // pusher-js's plain client event reaches the raw client compressed.
  const data = JSON.parse(CORPUS.data);
  assert.ok(room.trigger('client-order', data));
  const [ev] = await raw.waitEvents('private-room', 1);
  assert.equal(ev.compressed, true);
  assert.deepEqual(JSON.parse(ev.text), { event: 'client-order', channel: 'private-room', data });
});

test('mixed subscribers (3 compressing, 3 not, 1 raw) get the same events in the same order, byte-exact, each compressed once', async (t) => {
  const hub = await startHub(ON, { t, loops: 2 });
  const CH = 'mixed';
  const zs = [];
  const ps = [];
  for (let i = 0; i < 3; i++) {
    zs.push(await textClient(t, hub));
    ps.push(await textClient(t, hub, { perMessageDeflate: false }));
  }
  const raw = await pmdRaw(t, hub).open();
  for (const c of [...zs, ...ps]) {
    assert.equal((await c.subscribed(CH)).event, 'pusher_internal:subscription_succeeded');
  }
  await raw.subscribe(CH);
  assert.ok(zs.every((c) => c.ws.extensions === 'permessage-deflate'));
  assert.ok(ps.every((c) => c.ws.extensions === ''));

  const before = await compression(hub);
  const N = 12;
  let large = 0;
  for (let i = 0; i < N; i++) {
    if (i % 3 === 0) {
      await publishEvent(hub, CH, 'tick', String(i));
    } else if (i % 3 === 1) {
      await publishEvent(hub, CH, CORPUS.event, CORPUS.data.replace('48213', String(48213 + i)));
      large++;
    } else {
      await publishEvent(hub, CH, 'App\\Events\\MessageSent', SMALL_CORPUS.replace('771204', String(i)));
      large++;
    }
  }
  const ref = await ps[0].waitEvents(CH, N);
  assert.equal(ref.length, N);
  for (const c of [...zs, ...ps]) assert.deepEqual(await c.waitEvents(CH, N), ref);
  const rawGot = await raw.waitEvents(CH, N);
  assert.deepEqual(rawGot.map((x) => x.text), ref);
  assert.equal(rawGot.filter((x) => x.compressed).length, large, 'the large ones compressed on the wire');

  const d = delta(before, await compression(hub));
  // Once per publication (per loop at most, two loops), never once per
  // compressing subscriber (four here).
  assert.ok(d.compressed_frames >= large && d.compressed_frames <= 2 * large,
    `${d.compressed_frames} compressed frames for ${large} large publications`);
});

test('a deflate bomb closes 1009, a corrupt stream and compressed invalid UTF-8 close 1007, and the hub stays healthy', async (t) => {
  const hub = await startHub([...ON, '--max-message', '65536'], { t, loops: 2 });

  // 10 MB of 'a' in about 10 KB: within --max-message compressed.
  const bomb = deflate(Buffer.alloc(10 * 1024 * 1024, 'a'), { level: 9 });
  assert.ok(bomb.length < 65536, `bomb is ${bomb.length} B`);
  const b = await pmdRaw(t, hub).open();
  b.send(frame(OP.TEXT, bomb, { rsv: RSV1 }));
  assert.equal((await b.closeFrame()).code, 1009, 'a message that inflates past --max-message');

  // Deflate data whose first block has type 3 (reserved): not deflate.
  const c = await pmdRaw(t, hub).open();
  c.send(frame(OP.TEXT, Buffer.from([0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa]), { rsv: RSV1 }));
  assert.equal((await c.closeFrame()).code, 1007, 'a payload that does not inflate');

  const u = await pmdRaw(t, hub).open();
  u.send(frame(OP.TEXT, deflate(Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d])), { rsv: RSV1 }));
  assert.equal((await u.closeFrame()).code, 1007, 'compressed text that is not UTF-8');

  // The bound is --max-message exactly: a pusher:ping padded to inflate
  // to 65,536 B is answered, one byte more closes 1009.
  const padded = (n) => {
    const base = JSON.stringify({ event: 'pusher:ping', data: { pad: '' } }).length;
    return JSON.stringify({ event: 'pusher:ping', data: { pad: 'a'.repeat(n - base) } });
  };
  assert.equal(padded(65536).length, 65536);
  const k = await pmdRaw(t, hub).open();
  const before = await compression(hub);
  k.sendText(padded(65536), { compress: true });
  await k.message((m) => m.event === 'pusher:pong', 'pusher:pong to a compressed ping of --max-message bytes');
  assert.equal(delta(before, await compression(hub)).inflated_messages, 1);
  const over = await pmdRaw(t, hub).open();
  over.sendText(padded(65537), { compress: true });
  assert.equal((await over.closeFrame()).code, 1009, 'one byte past --max-message inflated');

  // Healthy: a new compressing client subscribes and gets an event.
  const w = await textClient(t, hub);
  const p = await textClient(t, hub, { perMessageDeflate: false });
  for (const x of [w, p]) assert.equal((await x.subscribed('after')).event, 'pusher_internal:subscription_succeeded');
  await publishEvent(hub, 'after', CORPUS.event, CORPUS.data);
  assert.deepEqual(await w.waitEvents('after', 1), await p.waitEvents('after', 1));
  // The four closed sessions are gone; k, w and p remain.
  await waitFor(async () => (await hub.stats()).totals.sessions === 3, 'three sessions left');
  assert.equal(hub.exit, null);
});

test('/stats and /metrics count negotiated sessions, compressed frames, bytes before and after, inflated messages', async (t) => {
  // One loop: a frame is compressed once, whoever needs it.
  const hub = await startHub(ON, { t, loops: 1 });
  const zero = await compression(hub);
  assert.deepEqual(zero, {
    compression_sessions: 0, compressed_frames: 0, compressed_bytes_in: 0,
    compressed_bytes_out: 0, inflated_messages: 0,
  });
  const { c, p } = await rawPair(t, hub, 'feed');
  assert.equal((await compression(hub)).compression_sessions, 1);

  // Small events are not compressed and not counted.
  await publishEvent(hub, 'feed', 'tick', '1');
  await c.waitEvents('feed', 1);
  assert.equal((await compression(hub)).compressed_frames, 0);

  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  const [, z] = await c.waitEvents('feed', 2);
  const [, plain] = await p.waitEvents('feed', 2);
  assert.equal(z.compressed, true);
  const s1 = await compression(hub);
  assert.equal(s1.compressed_frames, 1);
  assert.ok(s1.compressed_bytes_in >= plain.wire.length,
    `bytes before (${s1.compressed_bytes_in}) >= the plain payload (${plain.wire.length})`);
  assert.ok(s1.compressed_bytes_out >= z.wire.length,
    `bytes after (${s1.compressed_bytes_out}) >= the compressed payload (${z.wire.length})`);
  assert.ok(s1.compressed_bytes_out < s1.compressed_bytes_in);
  assert.equal(s1.inflated_messages, 0);

  // Two more compressing subscribers: the next publication is still
  // compressed once.
  const more = [await pmdRaw(t, hub).open(), await pmdRaw(t, hub).open()];
  for (const x of more) await x.subscribe('feed');
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  for (const x of [c, ...more]) {
    const evs = await x.waitEvents('feed', x === c ? 3 : 1);
    assert.equal(evs[evs.length - 1].compressed, true);
  }
  const s2 = await compression(hub);
  assert.equal(s2.compression_sessions, 3);
  assert.equal(s2.compressed_frames, 2, 'one more compressed frame for three compressing subscribers');

  // A compressed client message is inflated and counted.
  c.sendText({ event: 'pusher:ping', data: {} }, { compress: true });
  await c.message((m) => m.event === 'pusher:pong', 'pusher:pong');
  const s3 = await compression(hub);
  assert.equal(s3.inflated_messages, 1);
  // /metrics says the same (nothing moved in between).
  assert.deepEqual(await compressionMetrics(hub), s3);
});

test('--compression off and an app with "compression": false: no extension in the 101, plain frames only', async (t) => {
  const off = await startHub(['--compression', 'off'], { t, loops: 1 });
  const { c, p } = await rawPair(t, off, 'feed');
  assert.equal(c.response.headers['sec-websocket-extensions'], undefined, JSON.stringify(c.response.headers));
  const w = await textClient(t, off);
  assert.equal(w.ws.extensions, '');
  await publishEvent(off, 'feed', CORPUS.event, CORPUS.data);
  const [ev] = await c.waitEvents('feed', 1);
  const [pe] = await p.waitEvents('feed', 1);
  assert.equal(ev.rsv, 0);
  assert.ok(ev.wire.equals(pe.wire));
  assert.deepEqual(await compression(off), {
    compression_sessions: 0, compressed_frames: 0, compressed_bytes_in: 0,
    compressed_bytes_out: 0, inflated_messages: 0,
  });
  // RSV1 without the extension is a protocol error.
  c.send(frame(OP.TEXT, deflate('{"event":"pusher:ping","data":{}}'), { rsv: RSV1 }));
  assert.equal((await c.closeFrame()).code, 1002);

  const QUIET = { id: 'quiet-id', key: 'quiet-key', secret: 'quiet-secret' };
  const hub = await startHub(ON, {
    t, loops: 1,
    apps: [{ id: 'app-id', key: 'app-key', secret: 'app-secret' }, { ...QUIET, compression: false }],
  });
  const q = await pmdRaw(t, hub, { key: QUIET.key }).open();
  const n = await pmdRaw(t, hub).open();
  assert.equal(q.response.headers['sec-websocket-extensions'], undefined, 'the app without compression');
  assert.equal(n.extensions()[0].name, 'permessage-deflate', 'the other app on the same hub');
  const qw = await textClient(t, hub, {}, QUIET.key);
  assert.equal(qw.ws.extensions, '');
  await q.subscribe('feed');
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data, QUIET);
  const [qe] = await q.waitEvents('feed', 1);
  assert.equal(qe.rsv, 0);
  assert.equal(JSON.parse(qe.text).data, CORPUS.data);
  assert.equal((await compression(hub)).compression_sessions, 1, 'only the default app\'s client');
});

test('an event whose compressed frame needs the 8-byte length (over 64 KiB) arrives byte-exact', async (t) => {
  const hub = await startHub(ON, {
    t, loops: 2, apps: [{ id: 'app-id', key: 'app-key', secret: 'app-secret', max_event_bytes: 262144 }],
  });
  const { c, p } = await rawPair(t, hub, 'feed');
  // Random bytes in base64 compress to about 3/4: 120,000 chars -> ~90 KB.
  const data = require('node:crypto').randomBytes(90000).toString('base64');
  await publishEvent(hub, 'feed', 'big', data);
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  const [big, corpus] = await c.waitEvents('feed', 2);
  const plain = await p.waitEvents('feed', 2);
  assert.equal(big.compressed, true);
  assert.ok(big.wire.length > 65535, `compressed payload ${big.wire.length} B`);
  assert.ok(big.bytes.equals(plain[0].wire));
  assert.equal(JSON.parse(big.text).data, data);
  assert.ok(corpus.compressed && corpus.bytes.equals(plain[1].wire), 'the next frame is read right');
});

test('a reload that turns an app\'s compression off sends plain frames to its open sessions, and on again', async (t) => {
  const fs = require('node:fs');
  const apps = (compression) => [{ id: 'app-id', key: 'app-key', secret: 'app-secret', compression }];
  const hub = await startHub(ON, { t, loops: 2, apps: apps(true) });
  // Rewrite the config, SIGHUP, wait for the reload's log line.
  const reload = async (compression) => {
    const n = () => hub.stderr.split('\n').filter((l) => /apps: /.test(l)).length;
    const before = n();
    fs.writeFileSync(hub.configFile, JSON.stringify({ apps: apps(compression) }));
    process.kill(hub.pid, 'SIGHUP');
    await waitFor(() => n() > before, 'the reload line');
  };
  const { c, p } = await rawPair(t, hub, 'feed');
  let seq = 0;
  // Publish the corpus until one arrives compressed (want true) or plain
  // (false): a reload reaches each loop through its inbox.
  const until = async (want) => {
    await waitFor(async () => {
      const id = String(++seq);
      await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data.replace('48213', id));
      const evs = await c.waitEvents('feed', seq);
      return evs[seq - 1].compressed === want;
    }, `a corpus event ${want ? 'compressed' : 'plain'}`);
    const evs = c.events('feed');
    const plain = await p.waitEvents('feed', seq);
    for (let i = 0; i < seq; i++) assert.ok(evs[i].bytes.equals(plain[i].wire), `event ${i + 1} byte-exact`);
  };
  await until(true);
  await reload(false);
  await until(false);
  // The session still negotiated: what it sends compressed is read.
  c.sendText({ event: 'pusher:ping', data: {} }, { compress: true });
  await c.message((m) => m.event === 'pusher:pong', 'pusher:pong after the reload');
  // A new session of the app is answered without the extension.
  const fresh = await pmdRaw(t, hub).open();
  assert.deepEqual(fresh.extensions(), []);
  await fresh.subscribe('feed');
  const from = seq;
  await reload(true);
  await until(true);
  // The session that offered while the app said no never negotiated: it
  // gets every frame plain, the app's compression on again or not.
  const mine = await fresh.waitEvents('feed', seq - from);
  assert.ok(mine.length >= 1 && mine.every((x) => x.rsv === 0),
    `RSV1 to a session without the extension: ${mine.map((x) => x.rsv)}`);
  assert.deepEqual(mine.map((x) => x.text), c.events('feed').slice(from).map((x) => x.text));
});

test('presence: member lists and member events (frames of one session, not publications) read the same compressed', async (t) => {
  const hub = await startHub(ON, { t, loops: 2 });
  const CH = 'presence-room';
  const info = (n) => ({ name: `member ${n}`, bio: 'x'.repeat(150) });
  const members = [];
  for (let n = 1; n <= 3; n++) {
    const z = await pmdRaw(t, hub).open();
    await z.subscribe(CH, { channelData: { user_id: `u${n}`, user_info: info(n) } });
    members.push(z);
  }
  const plain = await pmdRaw(t, hub, { offer: null }).open();
  await plain.subscribe(CH, { channelData: { user_id: 'u4', user_info: info(4) } });
  const list = (c) => c.texts().map((x) => JSON.parse(x.text))
    .find((m) => m.event === 'pusher_internal:subscription_succeeded' && m.channel === CH);
  const hash = JSON.parse(list(plain).data).presence.hash;
  assert.deepEqual(Object.keys(hash).sort(), ['u1', 'u2', 'u3', 'u4']);
  assert.deepEqual(hash.u1, info(1));
  // The first member heard of u2, u3 and u4 joining, each with its info.
  const added = await members[0].until(() => {
    const a = members[0].texts().filter((x) => JSON.parse(x.text).event === 'pusher_internal:member_added');
    return a.length === 3 && a;
  }, 'three member_added at u1');
  assert.ok(added.every((x) => x.compressed), `member_added over 128 B go compressed: ${added.map((x) => x.wire.length)}`);
  assert.deepEqual(added.map((x) => JSON.parse(JSON.parse(x.text).data)),
    [2, 3, 4].map((n) => ({ user_id: `u${n}`, user_info: info(n) })));
  const third = members[2].texts().find((x) => JSON.parse(x.text).event === 'pusher_internal:subscription_succeeded');
  assert.equal(JSON.parse(JSON.parse(third.text).data).presence.count, 3);
  assert.equal(third.compressed, true, `a ${third.bytes.length} B member list goes compressed`);
});

test('a compressing reader that stops reading is closed 4100 while its queue shares compressed frames with one that reads', async (t) => {
  // Events of 40,000 random bytes in base64: ~54 KB plain, ~41 KB
  // compressed, so a few hundred fill the paused peer's socket buffers and
  // its 256 KiB queue. The reader is kept at most WINDOW events behind, so
  // its queue holds at most WINDOW frames (162 KB even counted plain),
  // never near the limit however slow the machine or this process.
  const WINDOW = 3;
  const MAX_PUBLISHES = 3000;
  assert.ok(WINDOW * 54100 < 256 * 1024);
  const hub = await startHub([...ON, '--max-queue', '256KiB'], {
    t, loops: 2, apps: [{ id: 'app-id', key: 'app-key', secret: 'app-secret', max_event_bytes: 65536 }],
  });
  const slow = await textClient(t, hub);
  assert.equal(slow.ws.extensions, 'permessage-deflate');
  assert.equal((await slow.subscribed('flood')).event, 'pusher_internal:subscription_succeeded');
  const reader = await pmdRaw(t, hub).open();
  await reader.subscribe('flood');
  slow.ws._socket.pause();
  const nText = () => reader.frames.reduce((a, f) => a + (f.opcode === OP.TEXT ? 1 : 0), 0);
  const base = nText();
  const sent = [];
  const closed4100 = async () => (await hub.stats()).totals.closed['4100'] > 0;
  while (sent.length < MAX_PUBLISHES && !(sent.length % 16 === 0 && await closed4100())) {
    await reader.until(() => reader.ended || nText() - base >= sent.length - WINDOW, 'the reader within the window');
    if (reader.ended) {
      assert.fail(`the reader was closed after ${sent.length} publishes: ${JSON.stringify(await reader.closeFrame())}`);
    }
    const data = require('node:crypto').randomBytes(40000).toString('base64');
    sent.push(data);
    await publishEvent(hub, 'flood', 'blob', data);
  }
  assert.ok(await closed4100(), `no 4100 after ${sent.length} publishes`);
  const got = await reader.waitEvents('flood', sent.length);
  assert.equal(got.length, sent.length);
  assert.ok(got.every((x) => x.compressed), 'every event compressed to the reader');
  for (let i = 0; i < sent.length; i++) assert.equal(JSON.parse(got[i].text).data, sent[i], `event ${i}`);
  await waitFor(async () => (await hub.stats()).totals.sessions === 1, 'the slow session gone');
  slow.ws._socket.resume();
  await slow.waitClose(15000);
  assert.ok([4100, 1006].includes(slow.closed.code), `close ${slow.closed.code}`);
  t.diagnostic(`4100 after ${sent.length} publishes`);
});

test('control frames are never compressed: heartbeat pings and the drain\'s close', async (t) => {
  const hub = await startHub([...ON, '--ping-interval', '300ms', '--heartbeat-interval', '100ms', '--tick', '20ms'],
    { t, loops: 1 });
  const { c } = await rawPair(t, hub, 'feed');
  await publishEvent(hub, 'feed', CORPUS.event, CORPUS.data);
  const [ev] = await c.waitEvents('feed', 1);
  assert.equal(ev.compressed, true);
  const ping = await c.until(() => c.frames.find((f) => f.opcode === OP.PING), 'a heartbeat ping');
  assert.equal(ping.rsv, 0, 'a ping goes without RSV1');
  await waitFor(async () => (await hub.stats()).totals.pongs >= 1, 'the hub to see our pong');
  const exit = hub.stop('SIGTERM');
  const close = await c.until(() => c.frames.find((f) => f.opcode === OP.CLOSE), 'the drain\'s close frame');
  assert.equal(close.rsv, 0, 'a close goes without RSV1');
  assert.equal((await exit).code, 0);
});
