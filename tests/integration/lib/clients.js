'use strict';
// Client helpers for the compatibility tests: pusher-js clients authorised
// by the pusher SDK (as an app server would), raw WebSocket clients for
// exact wire assertions, loop placement (a socket id's integer part is
// counter * 64 + loop id, see hub/loop/session.c), hand-signed REST requests, and
// temporary config files. Every helper registers its own cleanup with t.after.
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const Pusher = require('pusher-js');
const PusherServer = require('pusher');
const WebSocket = require('ws');
const { startHub, request, waitFor } = require('./hub');

const APP = { id: 'app-id', key: 'app-key', secret: 'app-secret' };
// 32 bytes, base64: the app server's end-to-end encryption master key.
const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
const HUB_MAX_LOOPS = 64;

function loopOf(socketId) {
  return Number(socketId.split('.')[0]) % HUB_MAX_LOOPS;
}

// Write a JSON config file; removed when the test ends.
function configFile(t, obj) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lubdub-cfg-'));
  const file = path.join(dir, 'config.json');
  fs.writeFileSync(file, JSON.stringify(obj));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return file;
}

// A hub with two loops, stopped when the test ends. apps: optional list of
// app objects for a config file.
async function twoLoopHub(t, { apps, args = [] } = {}) {
  const extra = apps ? ['--config', configFile(t, { apps })] : [];
  // A short drain: the clients are closed by their own cleanup anyway.
  const hub = await startHub(['--loops', '2', '--drain-timeout', '1s',
    ...extra, ...args]);
  // A clean exit is part of every test: under the ASan build a leak or a
  // late memory error shows up only as the exit status.
  t.after(async () => {
    // Close the clients while the hub can still answer their close frames:
    // a client library closing a connection whose peer is gone waits 30 s
    // for the close reply (faye-websocket in pusher-js, ws), which kept the
    // test process alive long after its last test.
    await closeTracked(hub);
    const exit = await hub.stop();
    if (exit.code !== 0) {
      throw new Error(`lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-4000)}`);
    }
  });
  return hub;
}

// Clients of a hub made by twoLoopHub are closed by its cleanup, before the
// hub stops (their own t.after hooks run after the hub's, too late).
function trackClient(hub, close) {
  if (!hub.clientCloses) hub.clientCloses = [];
  hub.clientCloses.push(close);
}

// A hub of the test's own: its tracked clients closed and the hub stopped
// at the end; with clean, an exit other than 0 (or SIGKILL, which the test
// sent) fails the test.
async function ownedHub(t, args, { clean = true } = {}) {
  const hub = await startHub(args);
  t.after(async () => {
    for (const c of hub.clientCloses || []) { try { c(); } catch (_) { /* closed */ } }
    const exit = await hub.stop();
    if (clean && exit.signal !== 'SIGKILL' && exit.code !== 0) {
      throw new Error(`lubdub exited ${JSON.stringify(exit)}: ${hub.stderr.slice(-4000)}`);
    }
  });
  return hub;
}

async function closeTracked(hub) {
  const closes = hub.clientCloses || [];
  hub.clientCloses = [];
  for (const close of closes) {
    try { close(); } catch (_) { /* already closed */ }
  }
  if (closes.length === 0 || hub.exit) return;
  // Until the hub has seen every close (other connections a test made
  // itself may keep some sessions open: then give up after a while, the
  // hub's drain closes them).
  await waitFor(async () => (await hub.stats()).totals.sessions === 0,
    'tracked clients to close', 5000, 20).catch(() => {});
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

// A raw WebSocket speaking the Pusher protocol, for exact assertions.
class RawClient {
  constructor(url) {
    this.ws = new WebSocket(url);
    this.msgs = [];
    this.waiters = [];
    this.closed = null;
    this.ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      this.msgs.push(m);
      this.waiters = this.waiters.filter((w) => !w());
    });
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.waiters = this.waiters.filter((w) => !w());
    });
    this.ws.on('error', () => {});
  }

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

  close() { try { this.ws.close(); } catch (_) { /* closed */ } }
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

async function rest(hub, method, urlPath, { params = {}, body, signOpts = {}, tamper } = {}) {
  const text = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
  let p = signedPath(method, urlPath, params, text, signOpts);
  if (tamper) p = tamper(p);
  const headers = text === undefined ? {} : {
    'content-type': 'application/json', 'content-length': Buffer.byteLength(text),
  };
  const r = await request(method, hub.url(p), text, headers);
  let json;
  try { json = JSON.parse(r.body); } catch (_) { json = undefined; }
  return { status: r.status, body: r.body, json };
}

// Both loops of a 2-loop hub hold at least one session.
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

async function bothLoopsBusy(hub) {
  await waitFor(async () => {
    const s = await hub.stats();
    return s.per_loop.length === 2 && s.per_loop.every((l) => l.sessions > 0);
  }, 'sessions on both loops');
}

module.exports = {
  APP, MASTER_KEY, loopOf, configFile, twoLoopHub, serverSdk, pusherClient,
  connected, pusherOnLoop, RawClient, rawClient, rawOnLoop, sign, signedPath,
  rest, bothLoopsBusy, onLoop, trackClient, closeTracked, ownedHub, signIn,
};
