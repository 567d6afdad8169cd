'use strict';
// A webhook receiver for the webhook tests: an http or https server on a
// free loopback port that checks every request with the pusher SDK's own
// validator (pusher.webhook({headers, rawBody}).isValid(), as a backend
// would), records the events, and can be told to misbehave (fail with a
// status, hang, reset the connection, answer a huge body). Stopped when
// the test ends.
const http = require('node:http');
const https = require('node:https');
const PusherServer = require('pusher');
const { waitFor } = require('./hub');

async function startReceiver(t, app, { tls } = {}) {
  const sdk = new PusherServer({ appId: app.id, key: app.key, secret: app.secret });
  const rx = {
    requests: [],        // every request: {headers, body, valid, status}
    invalid: 0,
    mode: 'ok',          // ok | status | hang | reset | huge
    status: 500,
    sockets: new Set(),
  };
  const handler = (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const wh = sdk.webhook({ headers: req.headers, rawBody });
      const valid = wh.isValid();
      const entry = { headers: req.headers, rawBody, valid, mode: rx.mode, path: req.url };
      if (!valid) rx.invalid++;
      try { entry.body = JSON.parse(rawBody); } catch (_) { entry.body = null; }
      rx.requests.push(entry);
      switch (rx.mode) {
        case 'ok':
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('ok');
          break;
        case 'status':
          res.writeHead(rx.status, { 'content-type': 'text/plain', location: 'http://127.0.0.1:1/' });
          res.end('no');
          break;
        case 'hang':
          break;                   // never answers
        case 'reset':
          req.socket.destroy();
          break;
        case 'huge': {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          const mb = Buffer.alloc(1 << 20, 120);
          let n = 0;
          const more = () => {
            while (n < 16) {
              n++;
              if (!res.write(mb)) { res.once('drain', more); return; }
            }
            res.end();
          };
          res.on('error', () => {});
          more();
          break;
        }
        default:
          res.end();
      }
    });
  };
  const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, handler)
    : http.createServer(handler);
  server.on('connection', (s) => {
    rx.sockets.add(s);
    s.on('close', () => rx.sockets.delete(s));
  });
  server.on('tlsClientError', () => {});
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  rx.port = server.address().port;
  rx.url = (p = '/hook') => `${tls ? 'https' : 'http'}://127.0.0.1:${rx.port}${p}`;
  // Events of valid, answered-2xx-or-not requests, in arrival order.
  rx.events = (pred = () => true) => rx.requests.filter((r) => r.valid && r.body)
    .flatMap((r) => r.body.events.map((e) => ({ ...e, _path: r.path, _mode: r.mode })))
    .filter(pred);
  // Events of requests that were answered 200, deduplicated by event id.
  rx.delivered = (pred = () => true) => {
    const seen = new Map();
    for (const e of rx.events((e) => e._mode === 'ok' || e._mode === 'huge')) {
      const k = `${e._path} ${e.id}`;
      if (!seen.has(k)) seen.set(k, e);
    }
    return [...seen.values()].filter(pred);
  };
  rx.waitEvents = (pred, n, what, timeoutMs = 20000) =>
    waitFor(() => rx.delivered(pred).length >= n && rx.delivered(pred), what, timeoutMs);
  // Never hangs: live connections are cut, and a close that still waits
  // gives up after 2 s (a hub that died mid-test must not hold the file).
  rx.close = () => new Promise((resolve) => {
    for (const s of rx.sockets) s.destroy();
    if (server.closeAllConnections) server.closeAllConnections();
    const timer = setTimeout(resolve, 2000);
    server.close(() => { clearTimeout(timer); resolve(); });
  });
  t.after(() => rx.close());
  return rx;
}

// A delivered event as {name, channel[, user_id]}, and a predicate for one.
const edgeOf = (e) => ({ name: e.name, channel: e.channel, ...(e.user_id ? { user_id: e.user_id } : {}) });
const isEdge = (name, channel, uid) => (e) => e.name === name && e.channel === channel &&
  (uid === undefined || e.user_id === uid);

module.exports = { startReceiver, edgeOf, isEdge };
