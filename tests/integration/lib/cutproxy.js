'use strict';
// lib/cutproxy.js: a TCP proxy of the test's own, between one kind of
// client and the hub, that cuts connections the way a network does (issue
// 35, Recovery): abruptly, both directions at once, bytes in flight lost.
//
// A cut resets both sockets of every live pair (socket.resetAndDestroy():
// SO_LINGER 0, so the kernel drops what it still holds to send and the
// peers get an RST, never a FIN or a WebSocket close frame) and drops
// whatever the proxy itself holds unsent (a held connection's bytes). A
// cut may also land inside a frame: cut({ midChunk: true }) forwards a
// random prefix of the hub's next chunk and resets after it.
//
// Random moments come from a seeded PRNG (mulberry32): the seed is
// LUBDUB_TEST_SEED when set, else drawn at random; tests print it with
// t.diagnostic so a failing run can be replayed. Everything the proxy does
// is bounded: at most maxConnections accepted over its life (more are
// reset at once and counted as refused), and every timer it sets ends
// with close().
//
// Several targets (a cluster's nodes): targets: [hub, ...] sends each new
// connection to the next one in turn (round robin), so every reconnect of
// a client lands on another node; route(targets) changes the list for the
// connections to come (a node killed: send them elsewhere). Each pair
// records its target; byTarget counts connections per target port.
//
// pause() holds new connections: accepted, read nothing, not connected
// upstream, so a client sees a TCP connection whose WebSocket handshake
// does not answer (as behind a dead network); resume() connects them.
//
// One thread: node's event loop. Counts: accepted, refused, cuts, live,
// bytesDown (hub to client), bytesUp, log (one entry per cut).
const net = require('node:net');
const crypto = require('node:crypto');

// mulberry32: a small seeded PRNG, good enough to spread cut moments.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The seed of this run: LUBDUB_TEST_SEED, else random (32 bits).
function testSeed() {
  const env = process.env.LUBDUB_TEST_SEED;
  if (env !== undefined && env !== '') return Number(env) >>> 0;
  return crypto.randomBytes(4).readUInt32LE(0);
}

// Reset a socket (RST, the kernel's unsent bytes dropped); destroy() when
// the runtime lacks resetAndDestroy or the socket cannot take it.
function reset(sock) {
  if (!sock || sock.destroyed) return;
  try {
    if (typeof sock.resetAndDestroy === 'function') {
      sock.resetAndDestroy();
      return;
    }
  } catch (_) { /* not a TCP socket any more: destroy below */ }
  sock.destroy();
}

class CutProxy {
  // target: {host, port} of the hub, or targets: several, taken in turn;
  // seed: the PRNG's seed (testSeed()); maxConnections: how many
  // connections it accepts over its life.
  constructor({ target, targets, seed = testSeed(), maxConnections = 64, name = 'proxy' }) {
    this.route(targets || [target]);
    this.byTarget = {};
    this.seed = seed;
    this.random = prng(seed);
    this.maxConnections = maxConnections;
    this.name = name;
    this.pairs = new Set();
    this.held = [];
    this.paused = false;
    this.closed = false;
    this.timers = new Set();
    this.accepted = 0;
    this.refused = 0;
    this.cuts = 0;
    this.bytesDown = 0;
    this.bytesUp = 0;
    this.log = [];
    this.server = net.createServer({ pauseOnConnect: true }, (c) => this.onClient(c));
  }

  // Listen on 127.0.0.1, port 0; resolves with the port.
  async listen() {
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', resolve);
    });
    this.port = this.server.address().port;
    this.host = '127.0.0.1';
    return this.port;
  }

  get live() { return this.pairs.size; }

  // The targets of the connections to come, taken in turn from the first.
  route(targets) {
    this.targets = targets.map((x) => ({ host: x.host, port: x.port }));
    this.turn = 0;
  }

  onClient(client) {
    if (this.closed || this.accepted >= this.maxConnections) {
      this.refused++;
      reset(client);
      return;
    }
    this.accepted++;
    client.on('error', () => {});
    const pair = { id: this.accepted, client, upstream: null, armed: null, since: Date.now() };
    this.pairs.add(pair);
    client.once('close', () => this.drop(pair));
    if (this.paused) {
      this.held.push(pair);
      return;
    }
    this.connect(pair);
  }

  // Connect a pair upstream and pipe both ways by hand (not stream.pipe),
  // so a cut knows exactly what was forwarded and nothing lingers in a
  // pipe's buffer; backpressure pauses the side that reads.
  connect(pair) {
    const target = this.targets[this.turn++ % this.targets.length];
    pair.target = target;
    this.byTarget[target.port] = (this.byTarget[target.port] || 0) + 1;
    const up = net.connect(target.port, target.host);
    pair.upstream = up;
    up.on('error', () => {});
    up.once('close', () => this.drop(pair));
    const flow = (from, to, down) => {
      from.on('data', (chunk) => {
        if (pair.dead) return;
        if (down && pair.armed) {
          this.cutInside(pair, chunk);
          return;
        }
        if (down) this.bytesDown += chunk.length; else this.bytesUp += chunk.length;
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => { if (!pair.dead) from.resume(); });
        }
      });
    };
    up.once('connect', () => {
      if (pair.dead) return;
      flow(pair.client, up, false);
      flow(up, pair.client, true);
      pair.client.resume();
    });
  }

  // A cut armed on pair lands inside the hub's next chunk: a random
  // prefix (at least one byte, never all of it) is forwarded, then both
  // sockets are reset.
  cutInside(pair, chunk) {
    const keep = chunk.length > 1 ? 1 + Math.floor(this.random() * (chunk.length - 1)) : 0;
    const entry = pair.armed;
    pair.armed = null;
    if (keep) {
      pair.client.write(chunk.subarray(0, keep));
      this.bytesDown += keep;
    }
    entry.forwarded += keep;
    entry.dropped += chunk.length - keep;
    this.kill(pair);
    entry.settle();
  }

  kill(pair) {
    if (pair.dead) return;
    pair.dead = true;
    pair.client.removeAllListeners('data');
    if (pair.upstream) pair.upstream.removeAllListeners('data');
    reset(pair.client);
    reset(pair.upstream);
    this.pairs.delete(pair);
    const i = this.held.indexOf(pair);
    if (i >= 0) this.held.splice(i, 1);
    // A pair armed for a cut inside a chunk that ends another way (its
    // client gave up) no longer keeps that cut waiting.
    const armed = pair.armed;
    pair.armed = null;
    if (armed && armed.settle) armed.settle();
  }

  drop(pair) {
    // One side closed on its own (a client that gave up, the hub closing
    // a session): close the other side too, abruptly as well.
    this.kill(pair);
  }

  // Cut every live pair now. opts.midChunk: instead, arm each pair to be
  // cut inside the hub's next chunk (within opts.armMs, else cut plainly).
  // Resolves with the number of pairs cut.
  cut({ midChunk = false, armMs = 200 } = {}) {
    const live = [...this.pairs];
    if (live.length === 0) return Promise.resolve(0);
    this.cuts++;
    const entry = { at: Date.now(), pairs: live.map((p) => p.id), midChunk, forwarded: 0, dropped: 0 };
    this.log.push(entry);
    if (!midChunk) {
      for (const p of live) this.kill(p);
      return Promise.resolve(live.length);
    }
    return new Promise((resolve) => {
      for (const p of live) p.armed = entry;
      const timer = this.later(armMs, () => {
        for (const p of live) {
          if (p.armed) { p.armed = null; entry.fallback = true; this.kill(p); }
        }
        resolve(live.length);
      });
      // Settled as soon as every armed pair is gone, whichever way.
      entry.settle = () => {
        if (live.some((p) => !p.dead)) return;
        clearTimeout(timer);
        this.timers.delete(timer);
        resolve(live.length);
      };
    });
  }

  // A cut at a random moment: after a random delay in [0, maxDelayMs), and
  // half the time inside a chunk. Resolves with what cut() resolved.
  async randomCut(maxDelayMs = 40) {
    const delay = Math.floor(this.random() * maxDelayMs);
    const midChunk = this.random() < 0.5;
    await new Promise((r) => this.later(delay, r));
    return this.cut({ midChunk });
  }

  // Hold new connections (see the file's comment).
  pause() { this.paused = true; }

  // Connect the held connections and let new ones through.
  resume() {
    this.paused = false;
    const held = this.held;
    this.held = [];
    for (const p of held) if (!p.dead) this.connect(p);
  }

  later(ms, fn) {
    const timer = setTimeout(() => { this.timers.delete(timer); if (!this.closed) fn(); }, ms);
    this.timers.add(timer);
    // A pending fn must still settle its promise when the proxy closes.
    timer.fn = fn;
    return timer;
  }

  // One line for t.diagnostic.
  describe() {
    return `${this.name}: seed ${this.seed}, ${this.accepted} connections accepted, ` +
      `${this.refused} refused, ${this.cuts} cuts (${this.log.filter((e) => e.midChunk).length} inside a chunk), ` +
      `${this.bytesDown} bytes down, ${this.bytesUp} up` +
      (this.targets.length > 1 || Object.keys(this.byTarget).length > 1
        ? `, connections per target port ${JSON.stringify(this.byTarget)}` : '');
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) { clearTimeout(timer); timer.fn(); }
    this.timers.clear();
    for (const p of [...this.pairs]) this.kill(p);
    await new Promise((r) => this.server.close(r));
  }
}

// A proxy to hub (or to opts.targets in turn), listening, closed when the
// test t ends.
async function cutProxy(t, hub, opts = {}) {
  const p = new CutProxy({ target: { host: hub.host, port: hub.port }, ...opts });
  await p.listen();
  t.after(() => p.close());
  return p;
}

module.exports = { CutProxy, cutProxy, prng, testSeed };
