'use strict';
// A WebSocket client run inside a network namespace by blackhole.test.js
// (`ip netns exec NS node netns-client.js URL`). It answers pings and
// reports what happens as JSON lines on stdout: open, ping, message, close.
const WebSocket = require('ws');

const say = (o) => process.stdout.write(`${JSON.stringify({ at: Date.now(), ...o })}\n`);
const ws = new WebSocket(process.argv[2]);
ws.on('open', () => say({ ev: 'open' }));
ws.on('ping', () => say({ ev: 'ping' }));
ws.on('message', (d) => say({ ev: 'message', data: String(d) }));
ws.on('close', (code) => { say({ ev: 'close', code }); process.exit(0); });
ws.on('error', (e) => say({ ev: 'error', message: e.message }));
