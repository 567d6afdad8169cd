// lubdub demo page: wires the protocol client (client.js) to the page.
// Query parameters (all optional): name, key (app key, default app-key),
// lobby (presence channel, default presence-lobby), news (public channel,
// default news). The hub must run with --dev-auth-endpoint (make run does)
// for the presence channel to be signed.
import { Connection } from './client.js';

const params = new URLSearchParams(location.search);
const APP_KEY = params.get('key') || 'app-key';
const LOBBY = params.get('lobby') || 'presence-lobby';
const NEWS = params.get('news') || 'news';
const WIRE_MAX = 300;
const FEED_MAX = 200;

const $ = (id) => document.getElementById(id);

function randomId(n) {
    const a = new Uint8Array(n);
    crypto.getRandomValues(a);
    return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}

// A user id per tab (sessionStorage) so two tabs are two members; the name
// is remembered per browser.
function identity() {
    let uid = sessionStorage.getItem('lubdub-uid');
    if (!uid) {
        uid = `u-${randomId(4)}`;
        sessionStorage.setItem('lubdub-uid', uid);
    }
    let name = params.get('name') || localStorage.getItem('lubdub-name');
    if (!name) {
        name = `guest-${randomId(2)}`;
    }
    return { uid, name };
}

const me = identity();
const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
const url = `${scheme}://${location.host}/app/${encodeURIComponent(APP_KEY)}` +
            '?protocol=7&client=lubdub-demo&version=1.0';
const conn = new Connection({
    url,
    authEndpoint: '/auth',
    authParams: () => ({ user_id: me.uid, user_name: me.name }),
});

// Test and console hook: the live objects, read-only by convention.
const chatLog = [];
const newsLog = [];
window.lubdubDemo = { conn, me, chatLog, newsLog, lobby: LOBBY, news: NEWS };

/* ------------------------------------------------------------- helpers */

function clock(t = new Date()) {
    return t.toLocaleTimeString([], { hour12: false });
}

function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) {
        e.className = cls;
    }
    if (text !== undefined) {
        e.textContent = text;
    }
    return e;
}

function hue(s) {
    let h = 0;
    for (const c of s) {
        h = (h * 31 + c.codePointAt(0)) >>> 0;
    }
    return h % 360;
}

function avatar(id, name) {
    const a = el('span', 'avatar', (name || id).slice(0, 1).toUpperCase());
    a.style.background = `hsl(${hue(id)} 55% 48%)`;
    return a;
}

// Append to a feed, dropping the placeholder and the oldest entries, and
// keep it scrolled to the bottom if it was there.
function appendFeed(feed, node) {
    const atBottom = feed.scrollHeight - feed.scrollTop - feed.clientHeight < 40;
    const empty = feed.querySelector('.empty');
    if (empty) {
        empty.remove();
    }
    feed.append(node);
    while (feed.children.length > FEED_MAX) {
        feed.firstElementChild.remove();
    }
    if (atBottom) {
        feed.scrollTop = feed.scrollHeight;
    }
}

/* ---------------------------------------------------------- connection */

const stateLabel = {
    initialized: 'initialized',
    connecting: 'connecting…',
    connected: 'connected',
    waiting: 'reconnecting',
    disconnected: 'disconnected',
    failed: 'failed',
};

function renderConn() {
    const s = conn.state;
    const badge = $('state');
    badge.className = `badge ${s}`;
    badge.textContent = stateLabel[s] || s;
    badge.dataset.state = s;
    $('socket-id').textContent = conn.socketId || '–';
    $('activity').textContent = conn.activityTimeout ?
        `${conn.activityTimeout} s` : '–';
    $('connects').textContent = String(conn.connects);
    $('last-close').textContent = conn.lastClose ?
        `${conn.lastClose.code}${conn.lastClose.reason ?
            ` ${conn.lastClose.reason}` : ''}` : '–';
    $('connect-btn').textContent = conn.wanted ? 'Disconnect' : 'Connect';
    $('ping-btn').disabled = s !== 'connected';
    $('chat-send').disabled = !lobby.subscribed;
    if (s === 'failed') {
        $('retry-line').textContent =
            'The hub refused this app; not retrying. Reload to try again.';
    } else if (s !== 'waiting') {
        $('retry-line').textContent = '';
    }
}

// The countdown to the next attempt, refreshed while one is scheduled.
let countdownTimer = null;
function renderCountdown() {
    if (conn.state !== 'waiting' || !conn.nextAttemptAt) {
        clearInterval(countdownTimer);
        countdownTimer = null;
        return;
    }
    const left = Math.max(0, conn.nextAttemptAt - Date.now());
    $('retry-line').textContent =
        `Connection lost. Attempt ${conn.attempt} in ` +
        `${(left / 1000).toFixed(1)} s`;
}

conn.addEventListener('state', renderConn);
conn.addEventListener('retry', () => {
    renderCountdown();
    clearInterval(countdownTimer);
    countdownTimer = setInterval(renderCountdown, 100);
});
conn.addEventListener('pong', (ev) => {
    $('rtt').textContent = `${ev.detail.rttMs.toFixed(1)} ms`;
});
conn.addEventListener('error', (ev) => {
    systemLine(`hub error ${ev.detail.code ?? ''}: ${ev.detail.message ?? ''}`);
});

$('connect-btn').addEventListener('click', () => {
    if (conn.wanted) {
        conn.disconnect();
    } else {
        conn.connect();
    }
    renderConn();
});
$('ping-btn').addEventListener('click', () => conn.ping('manual'));

/* ---------------------------------------------------------------- wire */

const wire = $('wire');
conn.addEventListener('wire', (ev) => {
    const { dir, text } = ev.detail;
    const arrow = dir === 'in' ? '←' : dir === 'out' ? '→' : '·';
    const line = el('div', dir, `${clock()} ${arrow} ${text}`);
    const atBottom = wire.scrollHeight - wire.scrollTop - wire.clientHeight < 30;
    wire.append(line);
    while (wire.children.length > WIRE_MAX) {
        wire.firstElementChild.remove();
    }
    if (atBottom) {
        wire.scrollTop = wire.scrollHeight;
    }
});

/* ------------------------------------------------------------ presence */

const lobby = conn.subscribe(LOBBY);
$('lobby-name').textContent = LOBBY;

function memberName(id) {
    const info = lobby.members.get(id);
    return (info && info.name) || id;
}

function renderMembers() {
    const ul = $('members');
    ul.replaceChildren();
    const ids = [...lobby.members.keys()].sort((a, b) =>
        memberName(a).localeCompare(memberName(b)));
    for (const id of ids) {
        const li = el('li');
        li.dataset.userId = id;
        li.append(avatar(id, memberName(id)));
        li.append(el('span', 'member-name', memberName(id)));
        if (id === lobby.me) {
            li.append(el('span', 'me-tag', 'you'));
        }
        ul.append(li);
    }
    if (!ids.length) {
        ul.append(el('li', 'muted small', lobby.subscribed ? 'nobody' :
            'not joined'));
    }
    $('member-count').textContent = String(lobby.members.size);
}

lobby.addEventListener('subscribed', () => {
    $('chat-error').textContent = '';
    renderMembers();
    renderConn();
});
lobby.addEventListener('member_added', (ev) => {
    renderMembers();
    systemLine(`${ev.detail.info.name || ev.detail.id} joined`);
});
lobby.addEventListener('member_removed', (ev) => {
    renderMembers();
    systemLine(`${ev.detail.info.name || ev.detail.id} left`);
});
lobby.addEventListener('error', (ev) => {
    $('chat-error').textContent =
        `Could not join ${LOBBY}: ${ev.detail.error || ev.detail.message ||
            JSON.stringify(ev.detail)}`;
});
conn.addEventListener('state', () => {
    if (conn.state !== 'connected') {
        renderMembers();
    }
});

/* ---------------------------------------------------------------- chat */

function systemLine(text) {
    appendFeed($('chat'), el('div', 'chat-line system', `${clock()} · ${text}`));
}

function chatLine(id, name, text, mine) {
    chatLog.push({ id, name, text, mine });
    const line = el('div', mine ? 'chat-line mine' : 'chat-line');
    line.dataset.userId = id;
    line.append(avatar(id, name));
    const bubble = el('div', 'bubble');
    bubble.append(el('span', 'who', name));
    bubble.append(el('span', 'when', clock()));
    bubble.append(el('div', 'text', text));
    line.append(bubble);
    appendFeed($('chat'), line);
}

lobby.addEventListener('message', (ev) => {
    const { event, data, userId } = ev.detail;
    if (event !== 'client-chat' || !data || typeof data.text !== 'string') {
        return;
    }
    const id = userId ? String(userId) : 'unknown';
    chatLine(id, memberName(id) !== id ? memberName(id) : data.name || id,
             data.text, false);
});

$('chat-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = $('chat-input');
    const text = input.value.trim();
    if (!text) {
        return;
    }
    // Client events are not echoed to the sender, so our own line is
    // drawn here, once, when the hub has taken it.
    if (lobby.trigger('client-chat', { text, name: me.name })) {
        chatLine(lobby.me || me.uid, me.name, text, true);
        input.value = '';
        $('chat-error').textContent = '';
    } else {
        $('chat-error').textContent = 'Not connected; the message was not sent.';
    }
});

$('name-input').value = me.name;
$('name-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const name = $('name-input').value.trim().slice(0, 40);
    if (!name || name === me.name) {
        return;
    }
    me.name = name;
    localStorage.setItem('lubdub-name', name);
    // Presence user_info is fixed at subscribe time: join again.
    conn.resubscribe(LOBBY);
    renderMembers();
    renderConn();
});

/* ---------------------------------------------------------------- news */

const news = conn.subscribe(NEWS);
$('news-name').textContent = NEWS;
news.addEventListener('message', (ev) => {
    const { event, data } = ev.detail;
    newsLog.push({ event, data });
    const item = el('div', 'news-item');
    const head = el('div', 'head');
    head.append(el('span', 'name', event));
    head.append(el('span', 'muted', clock()));
    item.append(head);
    item.append(el('pre', '', typeof data === 'string' ? data :
        JSON.stringify(data, null, 2)));
    appendFeed($('news'), item);
});

$('howto').textContent =
    '# from the repository root:\n' +
    `node tools/publish.js \\\n  --url ${location.protocol}//` +
    `${location.host} \\\n  ${NEWS} headline '{"text":"hello"}'`;

/* ------------------------------------------------------------- snippet */

// The pusher-js snippet of docs/CLIENTS.md ("pusher-js in the browser"),
// filled in for the hub this page came from: its host, its port, TLS when
// the page came over https, and the app key the page uses. It logs every
// event of the news channel, so what tools/publish.js sends shows in the
// console of the page it is pasted into. clients_doc_browser.test.js runs
// it as shown.
function clientSnippet() {
    const tls = location.protocol === 'https:';
    const port = Number(location.port) || (tls ? 443 : 80);
    // A JavaScript string literal in single quotes, as the doc writes them.
    const q = (s) => `'${s.replace(/[\\']/g, '\\$&').replace(/\n/g, '\\n')}'`;
    return [
        '<script src="https://js.pusher.com/8.4.0/pusher.min.js"></script>',
        '<script>',
        `  const pusher = new Pusher(${q(APP_KEY)}, {`,
        "    cluster: 'lubdub', // pusher-js 8 requires one; lubdub ignores it",
        `    wsHost: ${q(location.hostname)},`,
        `    ${tls ? 'wssPort' : 'wsPort'}: ${port},`,
        `    forceTLS: ${tls},`,
        "    enabledTransports: ['ws', 'wss'],",
        '  });',
        `  const channel = pusher.subscribe(${q(NEWS)});`,
        '  channel.bind_global((event, data) => console.log(event, data));',
        '</script>',
    ].join('\n');
}
$('client-snippet').textContent = clientSnippet();

/* --------------------------------------------------------------- start */

renderMembers();
renderConn();
conn.connect();
