// uWebSockets.js broadcast peer for make bench-fanout (trivial protocol of
// bench/raw_peer.c), using uWS's own pub/sub, its fastest fan-out path.
// Module: @trufflesuite/uws-js-unofficial (native binary for Node ABI 93,
// 108, 115). If it prints "Falling back to a NodeJS implementation", the
// numbers are from a ws-based shim and the driver discards them.
//
// --compress (make bench-compression): permessage-deflate with
// uWS.SHARED_COMPRESSOR (no per-socket window: server_no_context_takeover)
// negotiated with clients that offer it, and every publish asks for it
// (publish's compress argument). The pinned uWS.js 20.30 deflates per send,
// for every subscriber of a publish (issue 34; the CPU per delivery in
// bench/results/compression.md shows it); issue 34 says newer uWS compresses
// once per publish (not measured here: only 20.30 is pinned).
'use strict';
const uWS = require('@trufflesuite/uws-js-unofficial');
const port = Number(process.argv[process.argv.indexOf('--port') + 1] || 7005);
const compress = process.argv.includes('--compress');
const app = uWS.App();
app.ws('/*', {
  compression: compress ? uWS.SHARED_COMPRESSOR : uWS.DISABLED,
  maxPayloadLength: 1 << 20,
  maxBackpressure: 4 << 20,
  idleTimeout: 0,
  open: (ws) => { ws.subscribe('b'); ws.pub = false; },
  message: (ws, msg, isBinary) => {
    if (!ws.pub && msg.byteLength === 3 && Buffer.from(msg).toString() === 'pub') {
      ws.pub = true;
      ws.unsubscribe('b');
      return;
    }
    if (ws.pub) app.publish('b', msg, false, compress);
  },
});
app.listen('127.0.0.1', port, (tok) => {
  if (!tok) { console.error('uws_server: listen failed'); process.exit(1); }
  console.log(`uws_server listening on ${port}${compress ? ' (compress)' : ''}`);
});
