'use strict';
// Compression across a cluster (issue 34): a redis-server of our own and
// two nodes. An event published through node A reaches compressing
// subscribers on node B compressed and byte-exact (the same bytes as the
// plain subscribers on both nodes get); B makes the compressed frame
// itself, once per publication and not once per subscriber, and A, with
// no compressing subscriber, makes none. A client event that B's client
// sent compressed reaches A's compressing subscriber compressed again by A.
const test = require('node:test');
const assert = require('node:assert/strict');
const { APP } = require('./lib/clients');
const { startCluster, numsub } = require('./lib/cluster');
const { waitFor } = require('./lib/hub');
const {
  corpus1k, publishEvent, pmdRaw, textClient, compression, delta,
} = require('./lib/pmd');

const CORPUS = corpus1k();

async function heardBy(redis, channel, n) {
  await waitFor(async () => (await numsub(redis, `lubdub:${APP.id}:${channel}`)) === n,
    `${n} nodes subscribed to ${channel}`, 15000, 30);
}

const ok = async (c, ch) => assert.equal((await c.subscribed(ch)).event,
  'pusher_internal:subscription_succeeded');

test('two nodes: published on A, compressed on B once, byte-exact', async (t) => {
  const { redis, nodes } = await startCluster(t, { n: 2, args: ['--compression', 'on'] });
  const [a, b] = nodes;
  const CH = 'orders';

  // A: a plain subscriber only. B: a raw compressing one, three ws
  // compressing, one ws plain.
  const plainA = await textClient(t, a, { perMessageDeflate: false });
  await ok(plainA, CH);
  const raw = await pmdRaw(t, b).open();
  await raw.subscribe(CH);
  const zs = [];
  for (let i = 0; i < 3; i++) {
    const z = await textClient(t, b);
    assert.equal(z.ws.extensions, 'permessage-deflate');
    await ok(z, CH);
    zs.push(z);
  }
  const plainB = await textClient(t, b, { perMessageDeflate: false });
  await ok(plainB, CH);
  await heardBy(redis, CH, 2);

  const a0 = await compression(a);
  const b0 = await compression(b);
  await publishEvent(a, CH, CORPUS.event, CORPUS.data);
  await publishEvent(a, CH, 'tick', '1');
  await publishEvent(a, CH, CORPUS.event, CORPUS.data.replace('48213', '48214'));
  const ref = await plainA.waitEvents(CH, 3);
  assert.equal(JSON.parse(ref[0]).data, CORPUS.data);
  for (const c of [plainB, ...zs]) assert.deepEqual(await c.waitEvents(CH, 3), ref);
  const got = await raw.waitEvents(CH, 3);
  assert.deepEqual(got.map((x) => x.text), ref);
  assert.deepEqual(got.map((x) => x.compressed), [true, false, true], 'RSV1 on B\'s large frames');

  const da = delta(a0, await compression(a));
  const db = delta(b0, await compression(b));
  assert.equal(da.compressed_frames, 0, `A has no compressing subscriber: ${JSON.stringify(da)}`);
  // Two large publications, four compressing subscribers on two loops:
  // once per publication (per loop at most), not per subscriber.
  assert.ok(db.compressed_frames >= 2 && db.compressed_frames <= 4,
    `B made ${db.compressed_frames} compressed frames for 2 large publications`);
  assert.ok(db.compressed_bytes_out > 0 && db.compressed_bytes_out < db.compressed_bytes_in,
    JSON.stringify(db));

  // A client event B's client sends compressed (ws, threshold 0) reaches a
  // compressing subscriber on A, compressed by A.
  const PRIV = 'private-desk';
  const s = await textClient(t, b, { perMessageDeflate: { threshold: 0 } });
  await ok(s, PRIV);
  const r = await pmdRaw(t, a).open();
  await r.subscribe(PRIV);
  await heardBy(redis, PRIV, 2);
  const a1 = await compression(a);
  const b1 = await compression(b);
  const data = JSON.parse(CORPUS.data);
  s.send({ event: 'client-order', channel: PRIV, data });
  const [ev] = await r.waitEvents(PRIV, 1);
  assert.equal(ev.compressed, true);
  assert.deepEqual(JSON.parse(ev.text), { event: 'client-order', channel: PRIV, data });
  assert.equal(delta(b1, await compression(b)).inflated_messages, 1);
  assert.equal(delta(a1, await compression(a)).compressed_frames, 1);
});
