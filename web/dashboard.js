// lubdub dashboard: polls /stats once a second (fixed delay: the next poll
// is scheduled when this one finishes, so a slow hub is never stacked with
// requests) and draws the last two minutes. Rates are counter deltas over
// the hub's own uptime clock, so a late poll does not fake a spike. A hub
// restart (uptime going backwards) breaks the lines instead of producing
// negative rates.
//
// Behind --metrics-token, /stats answers 401: the page then asks for the
// token (a form; kept in this tab's sessionStorage, sent as
// "Authorization: Bearer", never in a URL) and polls with it. With
// --metrics-port, /stats is a 404 on the main port: the page says to open
// the dashboard on the metrics port, which serves it too
// (docs/OPERATIONS.md, "Dashboard and console").
import { BarChart, LineChart, PALETTE, compact } from './charts.js';

const POLL_MS = 1000;
const WINDOW_MS = 120000;
const KEEP = Math.ceil(WINDOW_MS / POLL_MS) + 10;
const CLOSE_REASONS = ['4201', '4202', '4100', 'write_timeout', 'queue_budget',
                       '1009', 'peer', 'drain', 'app', 'error'];
const CLOSE_COLORS = {
    4201: '#c0392b', 4202: '#e0703a', 4100: '#b4309c', write_timeout: '#c08a1a',
    queue_budget: '#8a5a2b', 1009: '#7a52c7', peer: '#3558d6', drain: '#1693a5',
    app: '#1f8f4e', error: '#6a7283',
};

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'lubdub.metricsToken';
let token = sessionStorage.getItem(TOKEN_KEY);

const samples = [];
let prev = null;           // previous /stats document
let lastOk = false;

// Test and console hook.
window.lubdubDashboard = { samples, get last() { return prev; }, polls: 0 };

function lineChart(name, opts) {
    return new LineChart($(`chart-${name}`), $(`legend-${name}`),
                         { windowMs: WINDOW_MS, ...opts });
}

const charts = {
    sessions: lineChart('sessions', { minMax: 4 }),
    msgs: lineChart('msgs', {
        series: [
            { key: 'in', label: 'in', color: PALETTE[0] },
            { key: 'out', label: 'out', color: PALETTE[1] },
        ],
        unit: '/s',
    }),
    pings: lineChart('pings', {
        series: [
            { key: 'pings', label: 'ws pings sent', color: PALETTE[0] },
            { key: 'pongs', label: 'ws pongs', color: PALETTE[2] },
            { key: 'ppings', label: 'pusher:ping answered', color: PALETTE[1] },
        ],
        unit: '/s',
    }),
    scan: lineChart('scan', { format: ms, minMax: 0.1, unit: ' ms' }),
    wheel: lineChart('wheel', { minMax: 4 }),
    advance: lineChart('advance', { format: ms, minMax: 0.1, unit: ' ms' }),
    bytes: lineChart('bytes', {
        series: [
            { key: 'bin', label: 'in', color: PALETTE[0] },
            { key: 'bout', label: 'out', color: PALETTE[1] },
        ],
        unit: 'B/s',
    }),
    client: lineChart('client', {
        series: [
            { key: 'relayed', label: 'relayed', color: PALETTE[2] },
            { key: 'dropped', label: 'refused', color: PALETTE[7] },
        ],
        unit: '/s',
    }),
};
const closes = new BarChart($('chart-closes'));

function ms(v) {
    if (!(v > 0)) {
        return '0';
    }
    // A scan of a few sessions takes microseconds: keep three decimals
    // below 0.1 ms rather than printing 0.00.
    if (v >= 10) {
        return v.toFixed(0);
    }
    return v >= 1 ? v.toFixed(1) : v >= 0.1 ? v.toFixed(2) : v.toFixed(3);
}

function duration(s) {
    if (s < 60) {
        return `${s.toFixed(0)} s`;
    }
    if (s < 3600) {
        return `${Math.floor(s / 60)} m ${Math.floor(s % 60)} s`;
    }
    if (s < 86400) {
        return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
    }
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

function msConfig(v) {
    if (!v) {
        return 'off';
    }
    return v % 1000 === 0 ? `${v / 1000} s` : `${v} ms`;
}

const sum = (loops, f) => loops.reduce((a, l) => a + f(l), 0);

function perLoopSeries(prefix, n, withTotal) {
    const series = withTotal ?
        [{ key: 'total', label: 'total', color: '#1d2330' }] : [];
    for (let i = 0; i < n; i++) {
        series.push({
            key: `${prefix}${i}`, label: `loop ${i}`,
            color: PALETTE[i % PALETTE.length],
        });
    }
    return series;
}

// Turn two consecutive documents into one sample of rates and gauges.
function sampleOf(cur, old, t) {
    const loops = cur.per_loop;
    const v = {
        total: cur.totals.sessions,
        wheelTotal: sum(loops, (l) => l.wheel.pending),
    };
    loops.forEach((l, i) => {
        v[`s${i}`] = l.sessions;
        v[`w${i}`] = l.wheel.pending;
        v[`h${i}`] = l.heartbeat.last_scan_ms;
        v[`a${i}`] = l.wheel.last_advance_ms;
    });
    const dt = old ? cur.uptime_s - old.uptime_s : 0;
    if (old && dt > 0) {
        const rate = (f) => Math.max(0, (f(cur) - f(old)) / dt);
        v.in = rate((d) => d.totals.msgs_in);
        v.out = rate((d) => d.totals.msgs_out);
        v.bin = rate((d) => d.totals.bytes_in);
        v.bout = rate((d) => d.totals.bytes_out);
        v.pings = rate((d) => d.totals.pings_sent);
        v.pongs = rate((d) => d.totals.pongs);
        v.ppings = rate((d) => sum(d.per_loop, (l) => l.pusher_pings));
        v.relayed = rate((d) => sum(d.per_loop, (l) => l.client_events));
        v.dropped = rate((d) => sum(d.per_loop,
                                    (l) => l.client_events_dropped));
        v.closes = rate((d) => Object.values(d.totals.closed)
            .reduce((a, b) => a + b, 0));
    }
    return { t, values: v };
}

function setText(id, text) {
    const e = $(id);
    if (e.textContent !== text) {
        e.textContent = text;
    }
}

function renderNumbers(d, s) {
    const v = s.values;
    setText('version', d.version);
    setText('uptime', duration(d.uptime_s));
    setText('loops', String(d.loops));
    setText('cfg-ping', msConfig(d.config.ping_interval_ms));
    setText('cfg-pong', msConfig(d.config.pong_timeout_ms));
    setText('cfg-idle', msConfig(d.config.idle_timeout_ms));
    setText('cfg-tick', msConfig(d.config.tick_ms));
    $('draining').hidden = !d.draining;

    setText('sessions-total', String(d.totals.sessions));
    setText('sessions-sub', d.per_loop.map((l) => l.sessions).join(' · ') +
            ' per loop');
    setText('accepted-total', compact(d.totals.accepted));
    setText('subs-total', compact(d.totals.subscriptions));
    setText('in-rate', v.in === undefined ? '–' : compact(v.in));
    setText('out-rate', v.out === undefined ? '–' : compact(v.out));
    setText('per-write', d.totals.writes ?
        (d.totals.msgs_out / d.totals.writes).toFixed(2) : '–');
    const closedTotal = Object.values(d.totals.closed)
        .reduce((a, b) => a + b, 0);
    setText('closed-total', compact(closedTotal));
    setText('close-rate', v.closes === undefined ? '0' : compact(v.closes));
    setText('scan-max', ms(Math.max(...d.per_loop.map(
        (l) => l.heartbeat.max_scan_ms))));
    setText('advance-max', ms(Math.max(...d.per_loop.map(
        (l) => l.wheel.max_advance_ms))));
    setText('lateness-max', String(Math.max(...d.per_loop.map(
        (l) => l.wheel.max_lateness_ms))));
}

function renderTable(d) {
    const body = $('loops-body');
    while (body.children.length > d.per_loop.length) {
        body.lastElementChild.remove();
    }
    d.per_loop.forEach((l, i) => {
        let tr = body.children[i];
        if (!tr) {
            tr = document.createElement('tr');
            for (let k = 0; k < 18; k++) {
                tr.append(document.createElement('td'));
            }
            body.append(tr);
        }
        const cells = [
            `loop ${l.loop}`, l.sessions, l.accepted, l.subscriptions,
            l.msgs_in, l.msgs_out, l.writes, l.pings_sent, l.pongs,
            l.pusher_pings, l.heartbeat.runs, l.heartbeat.failures,
            ms(l.heartbeat.max_scan_ms), l.wheel.pending, l.wheel.fired,
            l.wheel.cancelled, l.inbox_max, l.bad_messages,
        ];
        cells.forEach((c, k) => {
            const text = typeof c === 'number' ? compact(c) : c;
            if (tr.children[k].textContent !== text) {
                tr.children[k].textContent = text;
            }
        });
    });
}

// /stats has "webhooks" only when an app has webhooks (docs/WEBHOOKS.md).
function renderWebhooks(d) {
    const wh = d.webhooks;
    $('webhooks-panel').hidden = !wh;
    if (!wh) {
        return;
    }
    setText('webhooks-durable', wh.durable ? 'durable (--state-dir)' :
        'memory only');
    setText('webhooks-delayed', compact(wh.edges_delayed));
    setText('webhooks-cancelled', compact(wh.edges_cancelled));
    setText('webhooks-dropped', compact(wh.events_dropped));
    const total = (f) => wh.endpoints.reduce((a, e) => a + (e[f] || 0), 0);
    setText('wh-queued', compact(total('queue_depth')));
    setText('wh-sent', compact(total('sent')));
    setText('wh-failed', compact(total('failed')));
    setText('wh-dead', compact(total('dead_lettered')));
    setText('wh-up', `${wh.endpoints.filter((e) => e.up).length} / ${wh.endpoints.length}`);
    const body = $('webhooks-body');
    while (body.children.length > wh.endpoints.length) {
        body.lastElementChild.remove();
    }
    wh.endpoints.forEach((e, i) => {
        let tr = body.children[i];
        if (!tr) {
            tr = document.createElement('tr');
            for (let k = 0; k < 10; k++) {
                tr.append(document.createElement('td'));
            }
            body.append(tr);
        }
        const cells = [
            e.app, e.url, e.up ? 'up' : 'failing', e.sent, e.failed,
            e.retried, e.dead_lettered, e.dropped, e.queue_depth,
            e.oldest_pending_age_ms ? duration(e.oldest_pending_age_ms / 1000) : '–',
        ];
        cells.forEach((c, k) => {
            const text = typeof c === 'number' ? compact(c) : String(c);
            if (tr.children[k].textContent !== text) {
                tr.children[k].textContent = text;
            }
        });
        tr.children[2].style.color = e.up ? '' : 'var(--bad)';
    });
}

// /stats has "backplane" only with --redis (docs/SCALING.md).
function renderCluster(d, old, dt) {
    const b = d.backplane;
    $('cluster-panel').hidden = !b;
    if (!b) {
        return;
    }
    const ob = old && old.backplane;
    const rate = (k) => (ob && dt > 0 ?
        compact(Math.max(0, (b[k] - ob[k]) / dt)) : '–');
    setText('cl-node', b.node);
    setText('cl-state', b.state);
    $('cl-state').style.color = b.state === 'up' ? '' : 'var(--bad)';
    setText('cl-dir', b.directory);
    setText('cl-phase', b.phase || '');
    setText('cl-nodes', String(b.nodes));
    setText('cl-published', compact(b.published));
    setText('cl-pub-rate', rate('published'));
    setText('cl-received', compact(b.received));
    setText('cl-rx-rate', rate('received'));
    setText('cl-lost', compact(b.lost));
    setText('cl-gaps', compact(b.gaps));
    setText('cl-gaps-filled', compact(b.gaps_filled));
    setText('cl-hist', compact(b.history_write_failed + b.history_read_failed));
    setText('cl-hist-w', compact(b.history_write_failed));
    setText('cl-hist-r', compact(b.history_read_failed));
    setText('cl-reconnects', compact(b.reconnects));
    setText('cl-channels', compact(b.channels));
}

let nLoops = -1;
function render(d, old) {
    if (d.per_loop.length !== nLoops) {
        nLoops = d.per_loop.length;
        charts.sessions.setSeries(perLoopSeries('s', nLoops, nLoops > 1));
        charts.wheel.setSeries(nLoops > 1 ?
            [{ key: 'wheelTotal', label: 'total', color: '#1d2330' },
             ...perLoopSeries('w', nLoops, false)] :
            perLoopSeries('w', nLoops, false));
        charts.scan.setSeries(perLoopSeries('h', nLoops, false));
        charts.advance.setSeries(perLoopSeries('a', nLoops, false));
    }
    const s = samples[samples.length - 1];
    renderNumbers(d, s);
    renderTable(d);
    renderWebhooks(d);
    renderCluster(d, old, old ? d.uptime_s - old.uptime_s : 0);
    for (const c of Object.values(charts)) {
        c.update(samples);
    }
    closes.update(CLOSE_REASONS.map((r) => ({
        label: r, value: d.totals.closed[r] || 0, color: CLOSE_COLORS[r],
    })));
}

function setFeed(ok, text) {
    const b = $('feed-state');
    b.className = `badge ${ok ? 'connected' : 'disconnected'}`;
    b.textContent = text;
}

function push(sample) {
    samples.push(sample);
    while (samples.length > KEEP) {
        samples.shift();
    }
}

// The token form: shown on a 401, hidden once /stats answers.
function askToken(msg) {
    $('token-panel').hidden = false;
    const e = $('token-error');
    e.hidden = !msg;
    e.textContent = msg || '';
}

$('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    token = $('metrics-token').value.trim() || null;
    $('metrics-token').value = '';
    if (token) {
        sessionStorage.setItem(TOKEN_KEY, token);
    }
    $('token-error').hidden = true;
    // One chain of polls: a poll in flight schedules the next itself.
    if (!inFlight) {
        clearTimeout(pollTimer);
        poll();
    }
});

let pollTimer = null;
let inFlight = false;

async function poll() {
    const t = Date.now();
    inFlight = true;
    try {
        const res = await fetch('/stats', {
            cache: 'no-store',
            headers: token ? { authorization: `Bearer ${token}` } : {},
        });
        if (res.status === 401) {
            const had = token !== null;
            sessionStorage.removeItem(TOKEN_KEY);
            token = null;
            askToken(had ? 'The hub refused the token.' : '');
            throw new Error('a metrics token is required');
        }
        $('moved-panel').hidden = res.status !== 404;
        if (!res.ok) {
            throw new Error(`HTTP ${res.status}`);
        }
        $('token-panel').hidden = true;
        const d = await res.json();
        const restarted = prev && (d.uptime_s < prev.uptime_s ||
                                   d.loops !== prev.loops);
        if (restarted || !lastOk) {
            push({ t, gap: true });
        }
        push(sampleOf(d, restarted ? null : prev, t));
        const old = restarted ? null : prev;
        prev = d;
        lastOk = true;
        window.lubdubDashboard.polls++;
        setFeed(true, restarted ? 'hub restarted' : 'live');
        render(d, old);
    } catch (e) {
        if (lastOk) {
            push({ t, gap: true });
        }
        lastOk = false;
        setFeed(false, `/stats unreachable (${e.message})`);
        for (const c of Object.values(charts)) {
            c.update(samples);
        }
    } finally {
        inFlight = false;
        pollTimer = setTimeout(poll, Math.max(0, POLL_MS - (Date.now() - t)));
    }
}

poll();
