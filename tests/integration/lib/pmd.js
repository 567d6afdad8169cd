'use strict';
// lib/pmd.js: what the compression tests (compression*.test.js, issue 34)
// share. permessage-deflate (RFC 7692) seen from clients nobody here wrote
// and from a raw socket that checks every bit:
//   - deflate()/inflate(): node's stock zlib, the way RFC 7692 7.2.1 says
//     a message is compressed (raw deflate, a sync flush, the trailing
//     00 00 ff ff removed) and read back (the tail appended again);
//   - PmdWs: lib/rawws.js's raw client with an offer of our own in its
//     upgrade; it reads RSV1 off every frame, inflates the compressed ones
//     itself and sends frames compressed or plain, exactly as told;
//   - textClient(): the ws library (compressing by default, or not), each
//     message's text kept as it came, for byte-exact comparisons;
//   - the 1 KiB corpus (bench/corpus/laravel_1k.json, a Laravel broadcast
//     event) and the compression counters of /stats and /metrics.
// Every client is destroyed when its test ends (t.after) and tracked on
// the hub (lib/hub.js trackClient), so it is gone before the hub stops.
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { waitFor, request, trackClient, ROOT } = require('./hub');
const { RawWs, frame, OP, closePayload, upgradeRequest } = require('./rawws');
const { APP, RawClient, sign, publish } = require('./clients');

const TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);
const SYNC = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
// What node's ws library and Chromium offer.
const OFFER = 'permessage-deflate; client_max_window_bits';
const RSV1 = 4;          // frame.rsv as lib/rawws.js parses it: RSV1 RSV2 RSV3

// The /stats keys and /metrics names of issue 34's counters.
const COUNTERS = ['compression_sessions', 'compressed_frames', 'compressed_bytes_in',
  'compressed_bytes_out', 'inflated_messages'];
const METRICS = {
  compression_sessions: 'lubdub_compression_sessions_total',
  compressed_frames: 'lubdub_compressed_frames_total',
  compressed_bytes_in: 'lubdub_compressed_bytes_in_total',
  compressed_bytes_out: 'lubdub_compressed_bytes_out_total',
  inflated_messages: 'lubdub_inflated_messages_total',
};

// RFC 7692 7.2.1: compress with a sync flush, drop the 00 00 ff ff.
function deflate(buf, opts = {}) {
  const out = zlib.deflateRawSync(Buffer.isBuffer(buf) ? buf : Buffer.from(buf), { ...SYNC, ...opts });
  if (!out.subarray(-4).equals(TAIL)) throw new Error('deflate: no sync-flush tail');
  return out.subarray(0, out.length - 4);
}

// RFC 7692 7.2.2: append 00 00 ff ff and inflate (a stock inflater).
function inflate(payload) {
  return zlib.inflateRawSync(Buffer.concat([payload, TAIL]), SYNC);
}

// The 1 KiB corpus: {event, channel, data} with data a string.
function corpus1k() {
  return JSON.parse(fs.readFileSync(path.join(ROOT, 'bench/corpus/laravel_1k.json'), 'utf8'));
}

// Publish through the HTTP API (the SDKs' way), 200 expected; app:
// lib/clients.js's APP unless given.
function publishEvent(hub, channel, name, data, app = APP) {
  return publish(hub, { name, channel, data }, { app, expect: 200 });
}

// The parameters of a Sec-WebSocket-Extensions value, lower-cased:
// [{name, params: {k: v}}], one per extension.
function parseExtensions(value) {
  if (!value) return [];
  return value.split(',').map((ext) => {
    const [name, ...ps] = ext.split(';').map((s) => s.trim());
    const params = {};
    for (const p of ps) {
      const [k, v] = p.split('=').map((s) => s.trim());
      params[k.toLowerCase()] = v === undefined ? true : v.replace(/^"|"$/g, '');
    }
    return { name: name.toLowerCase(), params };
  });
}

// A raw client whose frames are checked bit by bit (lib/rawws.js's RawWs):
// each text frame's RSV1, its wire payload, and its text (inflated here,
// by zlib, when RSV1 is set). Messages from the hub are single frames.
class PmdWs extends RawWs {
  // Answer every ping with its pong (a client library does), so that a
  // heartbeat never closes the session under a test.
  parse() {
    super.parse();
    this.ponged = this.ponged || 0;
    for (; this.ponged < this.frames.length; this.ponged++) {
      const f = this.frames[this.ponged];
      if (f.opcode === OP.PING) this.send(frame(OP.PONG, f.payload));
    }
  }

  // Every text frame: {text, bytes, compressed, wire} (wire: the payload
  // as sent, bytes: after inflating).
  texts() {
    return this.frames.filter((f) => f.opcode === OP.TEXT).map((f) => {
      if (!f.text) {
        const compressed = (f.rsv & RSV1) !== 0;
        const bytes = compressed ? inflate(f.payload) : f.payload;
        f.text = { text: bytes.toString(), bytes, compressed, wire: f.payload, rsv: f.rsv };
      }
      return f.text;
    });
  }

  // The first message (parsed JSON) matching pred, compressed or not.
  message(pred, what = 'a message') {
    return this.until(() => this.texts().map((x) => {
      try { return JSON.parse(x.text); } catch (_) { return null; }
    }).find((m) => m && pred(m)), what);
  }

  // The frames of the events (not pusher: ones) on channel, in order.
  events(channel) {
    return this.texts().filter((x) => {
      const m = JSON.parse(x.text);
      return m.channel === channel && !/^pusher(_internal)?:/.test(m.event);
    });
  }

  waitEvents(channel, n, what = `${n} events on ${channel}`) {
    return this.until(() => this.events(channel).length >= n && this.events(channel), what);
  }

  async open() {
    await super.open();
    const m = await this.message((x) => x.event === 'pusher:connection_established');
    this.socketId = JSON.parse(m.data).socket_id;
    return this;
  }

  // Send a text message (an object is sent as its JSON), compressed (RSV1
  // and deflate()) when compress is true.
  sendText(msg, { compress = false } = {}) {
    const text = Buffer.from(typeof msg === 'string' ? msg : JSON.stringify(msg));
    this.send(compress ? frame(OP.TEXT, deflate(text), { rsv: RSV1 }) : frame(OP.TEXT, text));
  }

  // Subscribe (private and presence channels signed as the app's server
  // would; channelData: the presence member).
  async subscribe(channel, { compress = false, channelData } = {}) {
    const data = { channel };
    if (/^(private|presence)-/.test(channel)) {
      const cd = channelData === undefined ? undefined : JSON.stringify(channelData);
      const toSign = cd === undefined ? `${this.socketId}:${channel}` : `${this.socketId}:${channel}:${cd}`;
      data.auth = `${APP.key}:${sign(APP.secret, toSign)}`;
      if (cd !== undefined) data.channel_data = cd;
    }
    this.sendText({ event: 'pusher:subscribe', data }, { compress });
    await this.message((m) => m.channel === channel &&
      m.event === 'pusher_internal:subscription_succeeded', `subscribed to ${channel}`);
  }

  // The Sec-WebSocket-Extensions of the 101, parsed (see parseExtensions).
  extensions() { return parseExtensions(this.response.headers['sec-websocket-extensions']); }

  close() { this.send(frame(OP.CLOSE, closePayload(1000))); }
}

// A raw client on hub offering offer (null: no offer at all), upgraded
// (101) but not yet open (connection_established: await c.open()).
function pmdRaw(t, hub, { offer = OFFER, key = APP.key } = {}) {
  const headers = offer ? { 'Sec-WebSocket-Extensions': offer } : {};
  const c = new PmdWs(hub, upgradeRequest(hub, {
    path: `/app/${key}?protocol=7&client=js&version=8.4.0&flash=false`, headers,
  }));
  t.after(() => c.destroy());
  trackClient(hub, () => c.destroy());
  return c;
}

// The ws library as an app's client uses it (lib/clients.js's RawClient),
// and each message's text exactly as it came (texts), the upgrade's
// response headers (upgrade). wsOpts: ws's options (perMessageDeflate:
// false for none; ws offers it by default). Resolves once open.
async function textClient(t, hub, wsOpts = {}, key = APP.key) {
  const c = new RawClient(hub.wsUrl(key), wsOpts);
  c.texts = [];
  c.upgrade = null;
  c.ws.on('upgrade', (res) => { c.upgrade = res.headers; });
  c.ws.on('message', (d, binary) => { if (!binary) c.texts.push(d.toString()); });
  t.after(() => c.terminate());
  trackClient(hub, () => c.close());
  await c.open();
  // The texts of the events (not pusher: ones) on channel, in order.
  c.eventTexts = (channel) => c.texts.filter((x) => {
    const m = JSON.parse(x);
    return m.channel === channel && !/^pusher(_internal)?:/.test(m.event);
  });
  c.waitEvents = (channel, n) => waitFor(() => c.eventTexts(channel).length >= n &&
    c.eventTexts(channel), `${n} events on ${channel} at a ws client`);
  return c;
}

// The compression counters of /stats: each summed over the loops (the
// per-loop objects), or taken from totals when /stats sums it there.
async function compression(hub) {
  const st = await hub.stats();
  const out = {};
  for (const k of COUNTERS) {
    if (st.totals && typeof st.totals[k] === 'number') {
      out[k] = st.totals[k];
      continue;
    }
    const vals = st.per_loop.map((l) => l[k]);
    if (vals.some((v) => typeof v !== 'number')) {
      throw new Error(`/stats has no per-loop ${k}: ${JSON.stringify(st.per_loop[0])}`);
    }
    out[k] = vals.reduce((a, v) => a + v, 0);
  }
  return out;
}

// The same counters from /metrics, each summed over its series.
async function compressionMetrics(hub) {
  const r = await request('GET', hub.url('/metrics'));
  const out = {};
  for (const [k, name] of Object.entries(METRICS)) {
    const re = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm');
    const vals = [...r.body.matchAll(re)].map((m) => Number(m[1]));
    if (!vals.length) throw new Error(`/metrics has no ${name}`);
    out[k] = vals.reduce((a, v) => a + v, 0);
  }
  return out;
}

// b - a, key by key.
const delta = (a, b) => Object.fromEntries(COUNTERS.map((k) => [k, b[k] - a[k]]));

module.exports = {
  TAIL, OFFER, RSV1, COUNTERS, deflate, inflate, corpus1k, publishEvent, parseExtensions,
  PmdWs, pmdRaw, textClient, compression, compressionMetrics, delta,
};
