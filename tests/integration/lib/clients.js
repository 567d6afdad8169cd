'use strict';
// Client helpers for the compatibility tests: pusher-js clients authorised
// by the pusher SDK (as an app server would), raw WebSocket clients for
// exact wire assertions, loop placement (a socket id's integer part is
// counter * 64 + loop id, see hub/loop/session.c), hand-signed REST requests, and
// temporary config files. Every helper registers its own cleanup with t.after.
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const Pusher = require('pusher-js');
const PusherServer = require('pusher');
const WebSocket = require('ws');
const { request, waitFor, configFile, trackClient, closeTracked } = require('./hub');

const APP = { id: 'app-id', key: 'app-key', secret: 'app-secret' };
// 32 bytes, base64: the app server's end-to-end encryption master key.
const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
const HUB_MAX_LOOPS = 64;

function loopOf(socketId) {
  return Number(socketId.split('.')[0]) % HUB_MAX_LOOPS;
}

// The pusher SDK pointed at the hub (the app server's side).
function serverSdk(hub, app = APP) {
  return new PusherServer({
    appId: app.id, key: app.key, secret: app.secret,
    host: hub.host, port: hub.port, useTLS: false,
    encryptionMasterKeyBase64: MASTER_KEY,
  });
}

// A pusher-js client. presence: {user_id, user_info} for presence channels.
// authOverride(params) may return a custom auth response (bad signatures).
// user: what signin() authenticates as (id, and maybe user_info and
// watchlist), signed by the SDK's authenticateUser().
function pusherClient(t, hub, { app = APP, presence, authOverride, user } = {}) {
  const sdk = serverSdk(hub, app);
  const client = new Pusher(app.key, {
    wsHost: hub.host, wsPort: hub.port, forceTLS: false,
    enabledTransports: ['ws'], cluster: 'local', disableStats: true,
    userAuthentication: user && {
      customHandler: (params, cb) => {
        try {
          cb(null, sdk.authenticateUser(params.socketId, user));
        } catch (e) {
          cb(e, null);
        }
      },
    },
    channelAuthorization: {
      customHandler: (params, cb) => {
        try {
          if (authOverride) {
            const r = authOverride(params);
            if (r) { cb(null, r); return; }
          }
          cb(null, sdk.authorizeChannel(params.socketId, params.channelName,
            params.channelName.startsWith('presence-') ? presence : undefined));
        } catch (e) {
          cb(e, null);
        }
      },
    },
  });
  t.after(() => client.disconnect());
  trackClient(hub, () => client.disconnect());
  return client;
}

async function connected(client) {
  await waitFor(() => client.connection.state === 'connected' &&
    client.connection.socket_id, 'pusher-js connected');
  return client.connection.socket_id;
}

// Keep making clients until one lands on the wanted loop (the kernel
// spreads SO_REUSEPORT accepts by hash, so a few tries suffice).
async function onLoop(loop, make, tries = 60) {
  for (let i = 0; i < tries; i++) {
    const c = await make();
    if (loopOf(c.socketId) === loop) return c;
    c.close();
  }
  throw new Error(`no connection landed on loop ${loop} in ${tries} tries`);
}

async function pusherOnLoop(t, hub, loop, opts) {
  return onLoop(loop, async () => {
    const client = pusherClient(t, hub, opts);
    const socketId = await connected(client);
    return { client, socketId, close: () => client.disconnect() };
  }).then((c) => c.client);
}

function sign(secret, text) {
  return crypto.createHmac('sha256', secret).update(text).digest('hex');
}

// The one raw WebSocket client: it speaks the Pusher protocol by hand, for
// exact assertions, and records everything the hub did to it. url: a
// ws:// or wss:// URL; opts: closeCode (what close() sends: none by
// default, a close frame without a status) and any option of the ws
// library (headers, ca, localAddress, autoPong ...).
// What it holds:
//   msgs        every message as parsed JSON, data left a string
//   messages    the same decoded (data parsed when it is JSON), each with
//               its arrival time in at (decoded on first use)
//   socketId    from pusher:connection_established, once it came
//   pings       when each WebSocket ping came
//   closed      {code, reason, at} once closed, else null
//   unexpected  {status, at} when the upgrade was answered other than 101
//   error       the socket's last error
// Waits are on conditions (next, event, whenClosed, waitEvent, waitClose);
// the timeouts only turn a hang into a failure.
class RawClient {
  constructor(url, { closeCode, ...wsOpts } = {}) {
    this.ws = new WebSocket(url, wsOpts);
    this.closeCode = closeCode;
    this.startedAt = Date.now();
    this.openedAt = 0;
    this.msgs = [];
    this.arrived = [];
    this.decoded = [];
    this.waiters = [];
    this.pings = [];
    this.closed = null;
    this.unexpected = null;
    this.error = null;
    this.ws.on('open', () => { this.openedAt = Date.now(); });
    this.ws.on('message', (d) => {
      const text = d.toString();
      let m;
      try { m = JSON.parse(text); } catch (_) { m = { event: '(not json)', raw: text }; }
      this.msgs.push(m);
      this.arrived.push(Date.now());
      if (m.event === 'pusher:connection_established' && this.socketId === undefined) {
        try { this.socketId = JSON.parse(m.data).socket_id; } catch (_) { /* checked by open() */ }
      }
      this.waiters = this.waiters.filter((w) => !w());
    });
    this.ws.on('ping', () => { this.pings.push(Date.now()); });
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString(), at: Date.now() };
      this.waiters = this.waiters.filter((w) => !w());
    });
    this.ws.on('error', (e) => { this.error = e; });
    this.ws.on('unexpected-response', (req, res) => {
      this.unexpected = { status: res.statusCode, at: Date.now() };
      res.resume();
      req.destroy();
    });
  }

  get messages() {
    for (let i = this.decoded.length; i < this.msgs.length; i++) {
      const d = { at: this.arrived[i], ...this.msgs[i] };
      if (typeof d.data === 'string') {
        try { d.data = JSON.parse(d.data); } catch (_) { /* plain string */ }
      }
      this.decoded.push(d);
    }
    return this.decoded;
  }

  find(event) { return this.messages.find((m) => m.event === event); }

  all(event) { return this.messages.filter((m) => m.event === event); }

  waitEvent(event, timeoutMs = 10000) {
    return waitFor(() => this.find(event), `${event} on a client`, timeoutMs, 5);
  }

  waitClose(timeoutMs = 10000) {
    return waitFor(() => this.closed, 'the client to be closed', timeoutMs, 5);
  }

  terminate() { try { this.ws.terminate(); } catch (_) { /* gone */ } }

  // Resolve with the first message (from index `from`) matching pred.
  next(pred, what = 'a message', timeoutMs = 10000, from = 0) {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (let i = from; i < this.msgs.length; i++) {
          if (pred(this.msgs[i])) { clearTimeout(timer); resolve(this.msgs[i]); return true; }
        }
        return false;
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.msgs)}`));
      }, timeoutMs);
      if (!check()) this.waiters.push(check);
    });
  }

  event(name, channel, from) {
    return this.next((m) => m.event === name && (channel === undefined || m.channel === channel),
      `${name}${channel ? ' on ' + channel : ''}`, 10000, from);
  }

  count(name, channel) {
    return this.msgs.filter((m) => m.event === name && (channel === undefined || m.channel === channel)).length;
  }

  async open() {
    const m = await this.event('pusher:connection_established');
    const d = JSON.parse(m.data);
    this.socketId = d.socket_id;
    this.activityTimeout = d.activity_timeout;
    return this;
  }

  send(obj) { this.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj)); }

  whenClosed(timeoutMs = 10000) {
    return new Promise((resolve, reject) => {
      const check = () => { if (this.closed) { clearTimeout(timer); resolve(this.closed); return true; } return false; };
      const timer = setTimeout(() => reject(new Error('timed out waiting for close')), timeoutMs);
      if (!check()) this.waiters.push(check);
    });
  }

  // Subscribe, signing private and presence channels with secret.
  subscribe(channel, { secret = APP.secret, key = APP.key, channelData, auth } = {}) {
    const data = { channel };
    if (auth !== undefined) {
      data.auth = auth;
    } else if (/^(private-|presence-)/.test(channel)) {
      const cd = channelData === undefined ? undefined : JSON.stringify(channelData);
      const toSign = cd === undefined ? `${this.socketId}:${channel}` : `${this.socketId}:${channel}:${cd}`;
      data.auth = `${key}:${sign(secret, toSign)}`;
      if (cd !== undefined) data.channel_data = cd;
    } else {
      data.auth = '';
    }
    this.send({ event: 'pusher:subscribe', data });
  }

  async subscribed(channel, opts) {
    const from = this.msgs.length;
    this.subscribe(channel, opts);
    return this.next((m) => m.channel === channel &&
      (m.event === 'pusher_internal:subscription_succeeded' || m.event === 'pusher:subscription_error'),
    `subscription result for ${channel}`, 10000, from);
  }

  close() {
    if (this.closed) return;
    try { this.ws.close(this.closeCode); } catch (_) { /* not open yet */ }
  }
}

async function rawClient(t, hub, key = APP.key) {
  const c = new RawClient(hub.wsUrl(key));
  t.after(() => c.close());
  trackClient(hub, () => c.close());
  return c.open();
}

async function rawOnLoop(t, hub, loop, key) {
  return onLoop(loop, () => rawClient(t, hub, key));
}

// Sign a REST request by hand the way docs/PROTOCOL.md 6.1 says (for requests
// the SDK would refuse to make: stale timestamps, bad signatures).
function signedPath(method, urlPath, params, body, { secret = APP.secret, key = APP.key, timestamp } = {}) {
  const q = {
    auth_key: key,
    auth_timestamp: String(timestamp === undefined ? Math.floor(Date.now() / 1000) : timestamp),
    auth_version: '1.0',
    ...params,
  };
  if (body) q.body_md5 = crypto.createHash('md5').update(body).digest('hex');
  const sorted = Object.keys(q).map((k) => k.toLowerCase()).sort();
  const toSign = `${method}\n${urlPath}\n${sorted.map((k) => `${k}=${q[k]}`).join('&')}`;
  q.auth_signature = sign(secret, toSign);
  const qs = Object.keys(q).map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(q[k])}`).join('&');
  return `${urlPath}?${qs}`;
}

// The one REST helper: a request signed by hand (signedPath), to hub (over
// https with ca, the CA to trust). body: a string, or an object sent as
// JSON. tamper(path) may rewrite the signed path. Resolves with {status,
// body, json}.
async function rest(hub, method, urlPath, { params = {}, body, signOpts = {}, tamper, ca } = {}) {
  const text = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
  let p = signedPath(method, urlPath, params, text, signOpts);
  if (tamper) p = tamper(p);
  const headers = text === undefined ? {} : {
    'content-type': 'application/json', 'content-length': Buffer.byteLength(text),
  };
  const url = ca ? `https://${hub.host}:${hub.port}${p}` : hub.url(p);
  const r = await request(method, url, text, headers, { ca });
  let json;
  try { json = JSON.parse(r.body); } catch (_) { json = undefined; }
  return { status: r.status, body: r.body, json };
}

// Publish through the REST API (POST /apps/<id>/events) as app's server
// would: event is the body ({name, channel or channels, data, socket_id,
// info}; a data that is not a string is sent as its JSON, as the SDKs do).
// opts: app (APP), secret (sign with this instead of the app's), ca (https),
// expect (fail unless the status is this). Resolves with rest()'s answer.
async function publish(hub, event, { app = APP, secret = app.secret, ca, expect } = {}) {
  const body = typeof event.data === 'string' || event.data === undefined
    ? event : { ...event, data: JSON.stringify(event.data) };
  const r = await rest(hub, 'POST', `/apps/${app.id}/events`,
    { body, signOpts: { key: app.key, secret }, ca });
  if (expect !== undefined) assert.equal(r.status, expect, r.body);
  return r;
}

// Sign a raw client in as user id (pusher:signin with the app's
// signature); resolves with c once pusher:signin_success came.
async function signIn(c, user, app = APP) {
  const ud = JSON.stringify({ id: user });
  c.send({ event: 'pusher:signin', data: {
    auth: `${app.key}:${sign(app.secret, `${c.socketId}::user::${ud}`)}`, user_data: ud,
  } });
  await c.event('pusher:signin_success');
  return c;
}

// Both loops of a 2-loop hub hold at least one session.
async function bothLoopsBusy(hub) {
  await waitFor(async () => {
    const s = await hub.stats();
    return s.per_loop.length === 2 && s.per_loop.every((l) => l.sessions > 0);
  }, 'sessions on both loops');
}

module.exports = {
  APP, MASTER_KEY, loopOf, configFile, serverSdk, pusherClient,
  connected, pusherOnLoop, RawClient, rawClient, rawOnLoop, sign, signedPath,
  rest, publish, bothLoopsBusy, onLoop, trackClient, closeTracked, signIn,
};
