/*
 * web/lubdub-resume.js - no event lost across a reconnect, for pusher-js and
 * Laravel Echo on a lubdub hub (docs/RECOVERY.md; the messages it sends and
 * reads: docs/PROTOCOL.md, "Recovery (lubdub: messages)").
 *
 *   import { resume } from '/lubdub-resume.js';
 *   const pusher = new Pusher(key, options);
 *   resume(pusher);                    // or resume(Echo.connector.pusher)
 *
 * It listens with pusher.connection.bind_global, which pusher-js runs before
 * its own dispatch of each message and hands the same event object. So the
 * helper records an event before any app handler sees it, and it hides its
 * own messages by renaming them "pusher_internal:...", a name pusher-js
 * passes to no app handler. It keeps, per channel and per origin (the hub
 * node that took the publication in), the last sequence number passed to
 * the app, and tells the hub that position when the connection comes back,
 * before pusher-js resubscribes; the hub replays what came after it.
 * lubdub:resume_failed is left for the app: pusher.bind('lubdub:resume_failed').
 */
const PART = 8000; // bytes of channel positions per lubdub:resume message
// Channel names and node ids may be "__proto__": tables without a prototype.
const table = (from) => Object.assign(Object.create(null), from);

export function resume(pusher, options = {}) {
  const conn = pusher.connection;
  const H = table();     // channel -> {origin: last seq passed to the app}
  const joined = table(); // channels whose subscription_succeeded came
  let pending = null;    // [origin, seq] of the next event on a channel
  let sockets = [];      // this client's previous socket ids, newest last
  let lastRx = 0;        // Date.now() when the last message arrived
  const n = { duplicates: 0, markers: 0, resumes: 0 };
  const hide = (ev, name) => { ev.event = 'pusher_internal:' + name; };

  // Tell the hub where each channel stands: sent from state_change, so it
  // is written before the pusher:subscribe messages pusher-js sends from
  // 'connected'. Channels the app left are forgotten; a long list goes in
  // parts, each well under the hub's --max-message.
  function send() {
    const live = new Set(pusher.allChannels().map((c) => c.name));
    const head = { v: 1, away_ms: lastRx && Math.max(0, Date.now() - lastRx), sockets };
    let part = table(), size = 0;
    const flush = () => {
      pusher.send_event('lubdub:resume', { ...head, channels: part });
      n.resumes++;
      part = table();
      size = 0;
    };
    for (const c of Object.keys(joined)) if (!live.has(c)) delete joined[c];
    for (const c of Object.keys(H)) if (!live.has(c)) delete H[c];
    // A channel the app saw succeed with no position yet (in a cluster
    // lubdub:pos follows subscription_succeeded; the cut came between):
    // null, so the hub says lubdub:resume_failed instead of a silent start.
    for (const c of new Set([...Object.keys(H), ...Object.keys(joined)])) {
      const at = c in H ? H[c] : null;
      const bytes = JSON.stringify(c).length + JSON.stringify(at).length + 2;
      if (size && size + bytes > PART) flush();
      part[c] = at;
      size += bytes;
    }
    flush();
    if (conn.socket_id) sockets = sockets.concat(conn.socket_id).slice(-4);
  }

  function message(ev) {
    const d = ev.data;
    lastRx = Date.now();
    switch (ev.event) {
      case 'lubdub:id': // the id of the event that follows in the same write
        pending = Array.isArray(d) ? d : null;
        n.markers++;
        return hide(ev, 'lubdub_id');
      case 'lubdub:pos': // a fresh subscription starts here
        if (d && d.channel) H[d.channel] = table(d.ids);
        return hide(ev, 'lubdub_pos');
      case 'lubdub:resumed':
        return hide(ev, 'lubdub_resumed');
      case 'lubdub:resume_failed': // a fresh lubdub:pos follows
        for (const c of (d && d.channels) || []) delete H[c];
        return;
    }
    const c = ev.channel;
    if (c && ev.event === 'pusher_internal:subscription_succeeded') joined[c] = true;
    if (!pending || !c) return;
    const [origin, seq] = pending;
    const h = H[c] || (H[c] = table());
    pending = null;
    if (h[origin] >= seq) {
      // Already passed to the app: the hub never sends this, but if it
      // did, the app must not see it twice.
      n.duplicates++;
      hide(ev, 'lubdub_duplicate');
      delete ev.channel;
      if (options.onDuplicate) options.onDuplicate(c, origin, seq);
    } else {
      h[origin] = seq;
    }
  }

  function onEvent(name, data) {
    if (options.debug) console.debug('lubdub-resume', name, data);
    if (name === 'message') return message(data);
    if (name !== 'state_change') return;
    pending = null; // a marker whose event was cut off: replayed
    if (data.current === 'connected') send();
  }

  conn.bind_global(onEvent);
  if (conn.state === 'connected') send();
  return {
    stats: () => ({ ...n }),
    stop: () => { conn.unbind_global(onEvent); },
  };
}
