'use strict';
// A raw-socket WebSocket client for wire-level RFC 6455 tests: handcrafted
// upgrade requests and frames (masked unless asked otherwise), and a parser
// for what the hub sends back (the HTTP status line, then frames). Every
// wait is on a condition (bytes arriving, the socket ending); the timeouts
// only turn a hang into a failure.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const tls = require('node:tls');

const WAIT_MS = 20000;

// One frame. opts: fin (true), rsv (0..7), opcode, payload (Buffer or
// string), mask (true), len64 (force the 8-byte length form), lenOverride
// (write this 64-bit length instead of the payload's, as a BigInt).
function frame(opcode, payload = Buffer.alloc(0), opts = {}) {
  const { fin = true, rsv = 0, mask = true, len64 = false, lenOverride } = opts;
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const head = [(fin ? 0x80 : 0) | (rsv << 4) | opcode];
  const m = mask ? 0x80 : 0;
  let ext = Buffer.alloc(0);
  if (lenOverride !== undefined || len64 || body.length > 0xffff) {
    head.push(m | 127);
    ext = Buffer.alloc(8);
    ext.writeBigUInt64BE(lenOverride !== undefined ? lenOverride : BigInt(body.length));
  } else if (body.length > 125) {
    head.push(m | 126);
    ext = Buffer.alloc(2);
    ext.writeUInt16BE(body.length);
  } else {
    head.push(m | body.length);
  }
  if (!mask) return Buffer.concat([Buffer.from(head), ext, body]);
  const key = crypto.randomBytes(4);
  const masked = Buffer.alloc(body.length);
  for (let i = 0; i < body.length; i++) masked[i] = body[i] ^ key[i & 3];
  return Buffer.concat([Buffer.from(head), ext, key, masked]);
}

const OP = { CONT: 0x0, TEXT: 0x1, BINARY: 0x2, CLOSE: 0x8, PING: 0x9, PONG: 0xa };

// A close frame's payload: a 16-bit code, then the reason bytes.
function closePayload(code, reason = Buffer.alloc(0)) {
  const r = Buffer.isBuffer(reason) ? reason : Buffer.from(reason);
  const b = Buffer.alloc(2 + r.length);
  b.writeUInt16BE(code);
  r.copy(b, 2);
  return b;
}

function upgradeRequest(hub, { path, headers = {}, omit = [] } = {}) {
  const base = {
    Host: `${hub.host}:${hub.port}`,
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
    'Sec-WebSocket-Version': '13',
  };
  const all = { ...base, ...headers };
  const lines = [`GET ${path || '/app/app-key?protocol=7&client=js&version=8.4.0'} HTTP/1.1`];
  for (const [k, v] of Object.entries(all)) {
    if (!omit.includes(k) && v !== undefined) lines.push(`${k}: ${v}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

class RawWs {
  // useTls: connect with TLS (any certificate) instead of plain TCP.
  // answerClose: false leaves the hub's close frame unanswered (a peer
  // that never replies). Each frame records when it came (at), the socket
  // when it ended (endedAt: the peer's FIN, else the close).
  constructor(hub, request, useTls = false, { answerClose = true } = {}) {
    this.answerClose = answerClose;
    this.endedAt = 0;
    this.buf = Buffer.alloc(0);
    this.frames = [];
    this.response = null;    // { status, statusLine, headers }
    this.ended = false;
    this.waiters = [];
    this.sock = useTls
      ? tls.connect({ host: hub.host, port: hub.port, rejectUnauthorized: false })
      : net.connect(hub.port, hub.host);
    this.sock.on(useTls ? 'secureConnect' : 'connect', () => this.sock.write(request));
    this.sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.parse(); this.wake(); });
    this.sock.on('end', () => { if (!this.endedAt) this.endedAt = Date.now(); });
    this.sock.on('close', () => {
      if (!this.endedAt) this.endedAt = Date.now();
      this.ended = true;
      this.wake();
    });
    this.sock.on('error', () => {});
  }

  wake() { this.waiters = this.waiters.filter((w) => !w()); }

  parse() {
    if (!this.response) {
      const i = this.buf.indexOf('\r\n\r\n');
      if (i < 0) return;
      const text = this.buf.toString('latin1', 0, i);
      const [statusLine, ...rest] = text.split('\r\n');
      const headers = {};
      for (const l of rest) {
        const c = l.indexOf(':');
        headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
      }
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
      this.response = { status: m ? Number(m[1]) : null, statusLine, headers };
      this.buf = this.buf.subarray(i + 4);
      if (this.response.status !== 101) {
        this.response.body = this.buf.toString();
        return;
      }
    }
    if (this.response.status !== 101) {
      this.response.body += this.buf.toString();
      this.buf = Buffer.alloc(0);
      return;
    }
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0];
      const b1 = this.buf[1];
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      if (b1 & 0x80) off += 4; // the server never masks, but be exact
      if (this.buf.length < off + len) return;
      const payload = this.buf.subarray(off, off + len);
      this.frames.push({ fin: !!(b0 & 0x80), rsv: (b0 >> 4) & 7, opcode: b0 & 0x0f, payload,
        at: Date.now() });
      this.buf = this.buf.subarray(off + len);
      // Answer the hub's close as a client would, so it need not wait
      // for its close timeout before it drops the connection.
      if ((b0 & 0x0f) === OP.CLOSE && !this.closeSent && this.answerClose) {
        this.send(frame(OP.CLOSE, payload.length >= 2 ? payload.subarray(0, 2) : Buffer.alloc(0)));
      }
    }
  }

  until(pred, what, timeoutMs = WAIT_MS) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const v = pred();
        if (v) { clearTimeout(timer); resolve(v); return true; }
        return false;
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`timed out waiting for ${what}; response ${JSON.stringify(this.response)}, ` +
          `frames ${JSON.stringify(this.frames.map((f) => [f.opcode, f.payload.toString('hex')]))}, ended ${this.ended}`));
      }, timeoutMs);
      if (!check()) this.waiters.push(check);
    });
  }

  // The HTTP response head, or { status: null } when the socket ended first.
  status() {
    return this.until(() => this.response || (this.ended && { status: null, statusLine: '' }), 'an HTTP response');
  }

  async open() {
    const r = await this.status();
    if (r.status !== 101) throw new Error(`upgrade got ${r.statusLine || 'a bare close'}`);
    await this.message((m) => m.event === 'pusher:connection_established');
    return this;
  }

  // The first text message (JSON) matching pred.
  message(pred, what = 'a message') {
    return this.until(() => this.frames.map((f) => {
      if (f.opcode !== OP.TEXT) return null;
      try { return JSON.parse(f.payload.toString()); } catch (_) { return null; }
    }).find((m) => m && pred(m)), what);
  }

  // The server's close frame, as { code, reason, payload }; code is null
  // for an empty close. null when the socket ended without one.
  async closeFrame() {
    await this.until(() => this.frames.some((f) => f.opcode === OP.CLOSE) || this.ended, 'a close frame');
    const f = this.frames.find((x) => x.opcode === OP.CLOSE);
    if (!f) return null;
    return {
      code: f.payload.length >= 2 ? f.payload.readUInt16BE(0) : null,
      reason: f.payload.subarray(2).toString(),
      payload: f.payload,
    };
  }

  end() { return this.until(() => this.ended, 'the socket to end'); }

  send(buf) {
    if ((buf[0] & 0x0f) === OP.CLOSE) this.closeSent = true;
    if (!this.sock.destroyed) this.sock.write(buf);
  }

  destroy() { this.sock.destroy(); }
}

// Connect and send an upgrade request; t.after destroys the socket.
// opts: request (the whole request), or path, headers and omit for
// upgradeRequest; tls; answerClose (see RawWs).
function rawWs(t, hub, opts = {}) {
  const c = new RawWs(hub, opts.request || upgradeRequest(hub, opts), opts.tls,
    { answerClose: opts.answerClose });
  t.after(() => c.destroy());
  return c;
}

// The hub's close frame on c must carry code (what: the case, for the
// message). Our close goes back (RawWs answers it); after a protocol error
// lws may read what followed the bad byte as frames, so our side ends too.
async function expectClose(c, code, what) {
  const cf = await c.closeFrame();
  assert.ok(cf, `${what}: the hub sent no close frame`);
  assert.equal(cf.code, code, `${what}: close ${cf.code} "${cf.reason}"`);
  c.sock.end();
  await c.end();
  return cf;
}

module.exports = { frame, OP, closePayload, upgradeRequest, RawWs, rawWs, expectClose };
