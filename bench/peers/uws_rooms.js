// uWebSockets.js rooms peer for make bench-fanout: the S4 anchor.
//
// A small Pusher-protocol subset on uWS's own topic pub/sub, what an
// application built directly on uWebSockets.js would write for many small
// rooms: every channel is a uWS topic (ws.subscribe), a client event is
// handed to the topic's other subscribers by uWS in native code
// (ws.publish: the topic minus the sender, which is what Pusher client
// events promise; app.publish would echo it back to the sender).
//
// What it speaks (enough for bench/loadgen --mode pusher, either publish
// mode's subscribers and its --publish ws publishers):
//   open                -> pusher:connection_established with a socket_id
//   pusher:subscribe    -> private-* auth checked (HMAC-SHA256 of
//                          "<socket_id>:<channel>" with the app secret, as
//                          the hub does), ws.subscribe(channel),
//                          pusher_internal:subscription_succeeded
//   pusher:ping         -> pusher:pong
//   client-* on a subscribed private channel -> ws.publish(channel, the
//                          client's own frame text), as the hub relays it
// Anything else is ignored. Not a Pusher server: no presence, no REST, no
// limits; it exists to measure uWS's fan-out to many small topics.
'use strict';
const crypto = require('crypto');
const uWS = require('@trufflesuite/uws-js-unofficial');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const port = Number(arg('--port', 7006));
const KEY = arg('--key', 'app-key');
const SECRET = arg('--secret', 'app-secret');
const dec = new TextDecoder();
let nextId = 1;

function send(ws, obj) {
  ws.send(JSON.stringify(obj), false);
}

const app = uWS.App();
app.ws('/app/*', {
  compression: uWS.DISABLED,
  maxPayloadLength: 1 << 20,
  maxBackpressure: 4 << 20,
  idleTimeout: 0,
  open: (ws) => {
    ws.sid = `${process.pid}.${nextId++}`;
    send(ws, {
      event: 'pusher:connection_established',
      data: JSON.stringify({ socket_id: ws.sid, activity_timeout: 120 }),
    });
  },
  message: (ws, msg, isBinary) => {
    if (isBinary) return;
    const text = dec.decode(msg);
    let m;
    try { m = JSON.parse(text); } catch { return; }
    if (!m || typeof m.event !== 'string') return;
    if (m.event.startsWith('client-')) {
      const ch = m.channel;
      if (typeof ch === 'string' && ch.startsWith('private-') && ws.isSubscribed(ch))
        ws.publish(ch, text, false);
      return;
    }
    if (m.event === 'pusher:subscribe') {
      const d = m.data || {};
      const ch = d.channel;
      if (typeof ch !== 'string' || !ch) return;
      if (ch.startsWith('private-')) {
        const want = `${KEY}:${crypto.createHmac('sha256', SECRET)
          .update(`${ws.sid}:${ch}`).digest('hex')}`;
        if (d.auth !== want) {
          send(ws, { event: 'pusher:subscription_error', channel: ch, data: { type: 'AuthError' } });
          return;
        }
      }
      ws.subscribe(ch);
      send(ws, { event: 'pusher_internal:subscription_succeeded', channel: ch, data: '{}' });
      return;
    }
    if (m.event === 'pusher:ping') send(ws, { event: 'pusher:pong', data: {} });
  },
});
app.listen('127.0.0.1', port, (tok) => {
  if (!tok) { console.error('uws_rooms: listen failed'); process.exit(1); }
  console.log(`uws_rooms listening on ${port}`);
});
