// node `ws` 8 broadcast peer for make bench-fanout (trivial protocol of
// bench/raw_peer.c): a connection whose first message is "pub" publishes;
// each of its text messages goes to every other connection, one send each.
'use strict';
const { WebSocketServer } = require('ws');
const port = Number(process.argv[process.argv.indexOf('--port') + 1] || 7004);
const subs = new Set();
const wss = new WebSocketServer({ host: '127.0.0.1', port, perMessageDeflate: false });
wss.on('connection', (ws) => {
  let pub = false;
  subs.add(ws);
  ws.on('message', (data, isBinary) => {
    if (!pub && !isBinary && data.length === 3 && data.toString() === 'pub') {
      pub = true;
      subs.delete(ws);
      return;
    }
    if (!pub) return;
    for (const s of subs) s.send(data, { binary: false });
  });
  ws.on('close', () => subs.delete(ws));
  ws.on('error', () => {});
});
wss.on('listening', () => console.log(`ws_server listening on ${port}`));
