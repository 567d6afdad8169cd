// lubdub demo: a small Pusher Channels protocol 7 client over a browser
// WebSocket, written for the demo page so it shows the protocol itself
// rather than a library (see docs/PROTOCOL.md for the message shapes).
//
// What it does: connects, keeps the link alive with pusher:ping after
// activity_timeout of silence, answers the server's pusher:ping, subscribes
// to public, private and presence channels (auth by POST to an endpoint
// that answers {auth, channel_data}), tracks presence members, sends client
// events, and reconnects after a loss with capped exponential backoff and
// jitter, re-subscribing every channel with fresh auth.
//
// Events (an EventTarget; every detail is a plain object):
//   state    {state, previous}      initialized|connecting|connected|
//                                   waiting|disconnected|failed
//   retry    {attempt, delayMs, at} a reconnect is scheduled
//   wire     {dir, text}            every frame, 'in' or 'out', and notes
//   error    {code, message}        pusher:error from the hub
// Channel objects fire their own events (see Channel below).

export const DEFAULT_PONG_TIMEOUT_MS = 30000;
export const BACKOFF_FIRST_MS = 100;
export const BACKOFF_CAP_MS = 5000;

// Delay before reconnect attempt number `attempt` (0 = first retry):
// 100 ms doubling up to 5 s, times a uniform jitter in [0.8, 1.2] so that
// many clients dropped at once do not come back in lockstep.
export function backoffDelay(attempt, rand = Math.random) {
    const base = Math.min(BACKOFF_CAP_MS,
                          BACKOFF_FIRST_MS * 2 ** Math.min(attempt, 16));
    return Math.round(base * (0.8 + 0.4 * rand()));
}

// The server double-encodes data as a JSON string; client events may carry
// any JSON value. Decode a string that holds JSON, keep anything else.
export function decodeData(data) {
    if (typeof data !== 'string') {
        return data;
    }
    try {
        return JSON.parse(data);
    } catch (_) {
        return data;
    }
}

export function channelKind(name) {
    if (name.startsWith('private-encrypted-')) {
        return 'encrypted';
    }
    if (name.startsWith('private-')) {
        return 'private';
    }
    if (name.startsWith('presence-')) {
        return 'presence';
    }
    return 'public';
}

// One channel, kept across reconnects. Events:
//   subscribed  {members?}            subscription_succeeded
//   error       {type, error, status} subscription or auth failure
//   member_added / member_removed  {id, info}
//   message     {event, data, userId} any non-internal event
export class Channel extends EventTarget {
    constructor(conn, name) {
        super();
        this.conn = conn;
        this.name = name;
        this.kind = channelKind(name);
        this.subscribed = false;
        this.members = new Map();   // presence: user id -> user_info
        this.me = null;             // presence: our user id
    }

    emit(type, detail) {
        this.dispatchEvent(new CustomEvent(type, { detail }));
    }

    // Send a client event; only private and presence channels allow them.
    trigger(event, data) {
        if (!this.subscribed || !event.startsWith('client-')) {
            return false;
        }
        return this.conn.send({ event, channel: this.name, data });
    }

    reset() {
        this.subscribed = false;
        this.members.clear();
    }
}

export class Connection extends EventTarget {
    // url: the ws(s):// URL; authEndpoint: where private/presence channels
    // get signed; authParams: () => extra form fields (user_id, user_name).
    constructor({ url, authEndpoint = '/auth', authParams = () => ({}),
                  pongTimeoutMs = DEFAULT_PONG_TIMEOUT_MS }) {
        super();
        this.url = url;
        this.authEndpoint = authEndpoint;
        this.authParams = authParams;
        this.pongTimeoutMs = pongTimeoutMs;
        this.state = 'initialized';
        this.socketId = null;
        this.activityTimeout = null;   // seconds, from the hub
        this.channels = new Map();
        this.ws = null;
        this.attempt = 0;              // consecutive failed attempts
        this.connects = 0;             // successful handshakes, ever
        this.nextAttemptAt = null;
        this.lastClose = null;         // {code, reason}
        this.lastPingRtt = null;
        this.retryTimer = null;
        this.activityTimer = null;
        this.pongTimer = null;
        this.pingSentAt = null;
        this.wanted = false;           // the user wants to be connected
    }

    emit(type, detail) {
        this.dispatchEvent(new CustomEvent(type, { detail }));
    }

    setState(state) {
        if (state === this.state) {
            return;
        }
        const previous = this.state;
        this.state = state;
        this.emit('state', { state, previous });
    }

    note(text) {
        this.emit('wire', { dir: 'note', text });
    }

    connect() {
        this.wanted = true;
        clearTimeout(this.retryTimer);
        this.retryTimer = null;
        this.nextAttemptAt = null;
        if (this.ws) {
            return;
        }
        this.open();
    }

    disconnect() {
        this.wanted = false;
        clearTimeout(this.retryTimer);
        this.retryTimer = null;
        this.nextAttemptAt = null;
        if (this.ws) {
            this.ws.close(1000, 'bye');
            this.dropSocket();
        }
        this.note('disconnected by the user');
        this.setState('disconnected');
    }

    open() {
        this.setState('connecting');
        this.note(`connecting to ${this.url}`);
        let ws;
        try {
            ws = new WebSocket(this.url);
        } catch (e) {
            this.note(`cannot open: ${e.message}`);
            this.scheduleRetry();
            return;
        }
        this.ws = ws;
        ws.onmessage = (ev) => {
            if (ws === this.ws) {
                this.onFrame(ev.data);
            }
        };
        ws.onclose = (ev) => {
            if (ws === this.ws) {
                this.onLost(ev.code, ev.reason);
            }
        };
        // An error is always followed by close; nothing to do here.
        ws.onerror = () => {};
    }

    // Forget the socket and everything tied to its session.
    dropSocket() {
        if (this.ws) {
            this.ws.onmessage = this.ws.onclose = this.ws.onerror = null;
        }
        this.ws = null;
        this.socketId = null;
        clearTimeout(this.activityTimer);
        clearTimeout(this.pongTimer);
        this.activityTimer = this.pongTimer = null;
        this.pingSentAt = null;
        for (const ch of this.channels.values()) {
            ch.reset();
        }
    }

    onLost(code, reason) {
        this.lastClose = { code, reason };
        this.note(`closed: code ${code}${reason ? ` (${reason})` : ''}`);
        this.dropSocket();
        if (!this.wanted) {
            this.setState('disconnected');
            return;
        }
        // Pusher's 4000-4099 mean "do not come back" (unknown or disabled
        // app, over quota, bad protocol): retrying cannot help.
        if (code >= 4000 && code <= 4099) {
            this.setState('failed');
            return;
        }
        this.scheduleRetry();
    }

    scheduleRetry() {
        const delayMs = backoffDelay(this.attempt);
        const attempt = ++this.attempt;
        this.nextAttemptAt = Date.now() + delayMs;
        this.setState('waiting');
        this.emit('retry', { attempt, delayMs, at: this.nextAttemptAt });
        this.note(`reconnect attempt ${attempt} in ${delayMs} ms`);
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => {
            this.retryTimer = null;
            this.nextAttemptAt = null;
            if (this.wanted && !this.ws) {
                this.open();
            }
        }, delayMs);
    }

    send(msg) {
        if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
            return false;
        }
        const text = JSON.stringify(msg);
        this.ws.send(text);
        this.emit('wire', { dir: 'out', text });
        return true;
    }

    // Any inbound message proves the link is alive: restart the silence
    // timer, and stop waiting for a pong.
    touch() {
        clearTimeout(this.activityTimer);
        clearTimeout(this.pongTimer);
        this.pongTimer = null;
        if (!this.activityTimeout) {
            return;
        }
        this.activityTimer = setTimeout(() => this.ping('idle'),
                                        this.activityTimeout * 1000);
    }

    // Send pusher:ping; if nothing at all comes back within the pong
    // timeout the link is dead even if TCP has not noticed: drop it.
    ping(why = 'manual') {
        if (!this.send({ event: 'pusher:ping', data: {} })) {
            return false;
        }
        this.pingSentAt = performance.now();
        if (why === 'idle') {
            this.note(`sent pusher:ping after ${this.activityTimeout} s ` +
                      'of silence');
        }
        clearTimeout(this.pongTimer);
        this.pongTimer = setTimeout(() => {
            this.note('no reply to pusher:ping: dropping the connection');
            const ws = this.ws;
            this.onLost(4201, 'pong not received');
            if (ws) {
                ws.close();
            }
        }, this.pongTimeoutMs);
        return true;
    }

    onFrame(text) {
        this.emit('wire', { dir: 'in', text });
        let msg;
        try {
            msg = JSON.parse(text);
        } catch (_) {
            this.note('ignored a frame that is not JSON');
            return;
        }
        if (!msg || typeof msg.event !== 'string') {
            return;
        }
        this.touch();
        const data = decodeData(msg.data);
        const ch = msg.channel ? this.channels.get(msg.channel) : null;
        switch (msg.event) {
        case 'pusher:connection_established':
            this.socketId = data.socket_id;
            this.activityTimeout = Number(data.activity_timeout) || 120;
            this.attempt = 0;
            this.connects++;
            this.touch();
            this.setState('connected');
            for (const c of this.channels.values()) {
                this.sendSubscribe(c);
            }
            return;
        case 'pusher:ping':
            this.send({ event: 'pusher:pong', data: {} });
            return;
        case 'pusher:pong':
            if (this.pingSentAt !== null) {
                this.lastPingRtt = performance.now() - this.pingSentAt;
                this.pingSentAt = null;
                this.emit('pong', { rttMs: this.lastPingRtt });
            }
            return;
        case 'pusher:error':
            this.emit('error', {
                code: data && data.code, message: data && data.message,
            });
            return;
        default:
            break;
        }
        if (!ch) {
            return;
        }
        switch (msg.event) {
        case 'pusher_internal:subscription_succeeded':
            ch.subscribed = true;
            ch.members.clear();
            if (ch.kind === 'presence' && data && data.presence) {
                for (const [id, info] of Object.entries(data.presence.hash)) {
                    ch.members.set(id, info || {});
                }
            }
            ch.emit('subscribed', { members: ch.members });
            return;
        case 'pusher:subscription_error':
            ch.emit('error', data || {});
            return;
        case 'pusher_internal:member_added':
            ch.members.set(String(data.user_id), data.user_info || {});
            ch.emit('member_added', {
                id: String(data.user_id), info: data.user_info || {},
            });
            return;
        case 'pusher_internal:member_removed': {
            const id = String(data.user_id);
            const info = ch.members.get(id) || {};
            ch.members.delete(id);
            ch.emit('member_removed', { id, info });
            return;
        }
        default:
            if (!msg.event.startsWith('pusher')) {
                ch.emit('message', {
                    event: msg.event, data, userId: msg.user_id,
                });
            }
        }
    }

    subscribe(name) {
        let ch = this.channels.get(name);
        if (!ch) {
            ch = new Channel(this, name);
            this.channels.set(name, ch);
        }
        if (this.state === 'connected') {
            this.sendSubscribe(ch);
        }
        return ch;
    }

    unsubscribe(name) {
        const ch = this.channels.get(name);
        if (!ch) {
            return;
        }
        this.channels.delete(name);
        if (ch.subscribed) {
            this.send({ event: 'pusher:unsubscribe', data: { channel: name } });
        }
        ch.reset();
    }

    // Leave and join again, e.g. after the presence user_info changed; the
    // Channel object and its listeners stay.
    resubscribe(name) {
        const ch = this.channels.get(name);
        if (!ch) {
            return;
        }
        if (ch.subscribed) {
            this.send({ event: 'pusher:unsubscribe', data: { channel: name } });
        }
        ch.reset();
        if (this.state === 'connected') {
            this.sendSubscribe(ch);
        }
    }

    async sendSubscribe(ch) {
        const socketId = this.socketId;
        const data = { channel: ch.name, auth: '' };
        if (ch.kind !== 'public') {
            let signed;
            try {
                signed = await this.authorize(socketId, ch.name);
            } catch (e) {
                ch.emit('error', { type: 'AuthError', error: e.message });
                this.note(`auth for ${ch.name} failed: ${e.message}`);
                return;
            }
            // The link may have dropped (and come back with another id)
            // while the request was out; that connection subscribes anew.
            if (socketId !== this.socketId ||
                this.channels.get(ch.name) !== ch) {
                return;
            }
            data.auth = signed.auth;
            if (signed.channel_data) {
                data.channel_data = signed.channel_data;
                try {
                    ch.me = String(JSON.parse(signed.channel_data).user_id);
                } catch (_) {
                    ch.me = null;
                }
            }
        }
        this.send({ event: 'pusher:subscribe', data });
    }

    async authorize(socketId, channelName) {
        const body = new URLSearchParams({
            socket_id: socketId, channel_name: channelName,
            ...this.authParams(channelName),
        });
        const res = await fetch(this.authEndpoint, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body,
        });
        if (!res.ok) {
            throw new Error(`${this.authEndpoint} answered ${res.status}` +
                            (res.status === 404 ?
                                ' (start lubdub with --dev-auth-endpoint)' :
                                ''));
        }
        return res.json();
    }
}
