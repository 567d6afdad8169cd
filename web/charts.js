// lubdub dashboard charts: a time-series line chart and a horizontal bar
// chart drawn on <canvas> by hand (no libraries, nothing fetched at run
// time). Both redraw on resize and at the device pixel ratio, so they stay
// sharp on laptop and high-DPI screens alike.

export const PALETTE = ['#3558d6', '#e0703a', '#1f8f4e', '#b4309c',
                        '#c49a12', '#1693a5', '#7a52c7', '#c0392b'];

const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const INK = '#1d2330';
const MUTED = '#6a7283';
const GRID = '#eceef3';

// Round a positive number up to 1, 2 or 5 times a power of ten.
export function niceCeil(v) {
    if (!(v > 0)) {
        return 1;
    }
    const p = 10 ** Math.floor(Math.log10(v));
    for (const m of [1, 2, 5, 10]) {
        if (v <= m * p) {
            return m * p;
        }
    }
    return 10 * p;
}

// 1234 -> "1.2k"; small fractions keep two significant digits.
export function compact(v) {
    if (v === null || v === undefined || Number.isNaN(v)) {
        return '–';
    }
    const a = Math.abs(v);
    if (a >= 1e9) {
        return `${(v / 1e9).toFixed(a >= 1e10 ? 0 : 1)}G`;
    }
    if (a >= 1e6) {
        return `${(v / 1e6).toFixed(a >= 1e7 ? 0 : 1)}M`;
    }
    if (a >= 1e4) {
        return `${(v / 1e3).toFixed(a >= 1e5 ? 0 : 1)}k`;
    }
    if (a >= 100 || Number.isInteger(v)) {
        return String(Math.round(v));
    }
    if (a === 0) {
        return '0';
    }
    // Two significant digits, without trailing zeros: 2.5, 0.25, 0.05.
    return String(Number(v.toPrecision(2)));
}

// Size the canvas backing store to its CSS box times the pixel ratio and
// return a context scaled so drawing uses CSS pixels.
function prepare(canvas) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, canvas.clientWidth);
    const h = Math.max(1, canvas.clientHeight);
    if (canvas.width !== Math.round(w * dpr) ||
        canvas.height !== Math.round(h * dpr)) {
        canvas.width = Math.round(w * dpr);
        canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = FONT;
    return { ctx, w, h };
}

// Line chart over the last windowMs. Series: [{key, label, color}], set
// again with setSeries() when the set changes (e.g. the number of loops).
// Samples: [{t, values: {key: number|null}}] or {t, gap: true} to break
// the lines (the hub was unreachable or restarted).
export class LineChart {
    constructor(canvas, legend, opts = {}) {
        this.canvas = canvas;
        this.legend = legend;
        this.series = opts.series || [];
        this.unit = opts.unit || '';
        this.format = opts.format || compact;
        this.windowMs = opts.windowMs || 120000;
        this.minMax = opts.minMax || 1;
        this.samples = [];
        this.legendKey = '';
        new ResizeObserver(() => this.draw()).observe(canvas);
    }

    setSeries(series) {
        this.series = series;
    }

    update(samples) {
        this.samples = samples;
        this.draw();
        this.drawLegend();
    }

    drawLegend() {
        if (!this.legend) {
            return;
        }
        const last = [...this.samples].reverse().find((s) => !s.gap);
        const key = this.series.map((s) => s.key).join();
        if (key !== this.legendKey) {
            this.legend.replaceChildren();
            for (const s of this.series) {
                const span = document.createElement('span');
                span.style.setProperty('--c', s.color);
                span.append(`${s.label} `);
                const b = document.createElement('b');
                b.dataset.key = s.key;
                span.append(b);
                this.legend.append(span);
            }
            this.legendKey = key;
        }
        for (const b of this.legend.querySelectorAll('b')) {
            const v = last ? last.values[b.dataset.key] : null;
            b.textContent = v === null || v === undefined ? '–' :
                `${this.format(v)}${this.unit}`;
        }
    }

    draw() {
        const { ctx, w, h } = prepare(this.canvas);
        const padL = 44, padR = 10, padT = 8, padB = 20;
        const pw = w - padL - padR, ph = h - padT - padB;
        if (pw <= 10 || ph <= 10) {
            return;
        }
        // The window grows from 30 s to windowMs as history builds up, so
        // a freshly opened page is not a sliver at the right edge.
        const now = Date.now();
        const first = this.samples.length ? this.samples[0].t : now;
        const span = Math.min(this.windowMs, Math.max(30000, now - first));
        const t0 = now - span;
        let max = 0;
        for (const s of this.samples) {
            if (s.gap || s.t < t0) {
                continue;
            }
            for (const ser of this.series) {
                const v = s.values[ser.key];
                if (typeof v === 'number' && v > max) {
                    max = v;
                }
            }
        }
        // Four grid steps of a round size, so labels read 0 1 2 3 4 rather
        // than 0 1.3 2.5 3.8 5.
        const step = niceCeil(Math.max(max * 1.1, this.minMax) / 4);
        const top = step * 4;
        const x = (t) => padL + ((t - t0) / span) * pw;
        const y = (v) => padT + ph - (v / top) * ph;

        // Grid and y labels.
        ctx.lineWidth = 1;
        ctx.textAlign = 'right';
        ctx.textBaseline = 'middle';
        for (let i = 0; i <= 4; i++) {
            const v = step * i;
            const yy = Math.round(y(v)) + 0.5;
            ctx.strokeStyle = GRID;
            ctx.beginPath();
            ctx.moveTo(padL, yy);
            ctx.lineTo(padL + pw, yy);
            ctx.stroke();
            ctx.fillStyle = MUTED;
            ctx.fillText(this.format(v), padL - 6, yy);
        }
        // Time labels counted back from now, every 10 or 30 s.
        ctx.textAlign = 'center';
        ctx.textBaseline = 'top';
        const every = span > 60000 ? 30 : 10;
        for (let s = 0; s <= span / 1000 + 0.001; s += every) {
            const xx = x(now - s * 1000);
            ctx.fillStyle = MUTED;
            ctx.fillText(s === 0 ? 'now' : `-${s}s`, Math.min(xx, w - 14),
                         padT + ph + 5);
        }

        // Lines, clipped to the plot.
        ctx.save();
        ctx.beginPath();
        ctx.rect(padL, padT - 2, pw, ph + 4);
        ctx.clip();
        ctx.lineJoin = 'round';
        ctx.lineWidth = 2;
        for (const ser of this.series) {
            ctx.strokeStyle = ser.color;
            ctx.beginPath();
            let pen = false;
            for (const s of this.samples) {
                const v = s.gap ? null : s.values[ser.key];
                if (typeof v !== 'number') {
                    pen = false;
                    continue;
                }
                if (pen) {
                    ctx.lineTo(x(s.t), y(v));
                } else {
                    ctx.moveTo(x(s.t), y(v));
                    pen = true;
                }
            }
            ctx.stroke();
        }
        ctx.restore();
        ctx.strokeStyle = '#c9ced8';
        ctx.beginPath();
        ctx.moveTo(padL + 0.5, padT);
        ctx.lineTo(padL + 0.5, padT + ph + 0.5);
        ctx.lineTo(padL + pw, padT + ph + 0.5);
        ctx.stroke();
    }
}

// Horizontal bars: [{label, value, color?}], one row each, value at the
// end of the bar.
export class BarChart {
    constructor(canvas) {
        this.canvas = canvas;
        this.rows = [];
        new ResizeObserver(() => this.draw()).observe(canvas);
    }

    update(rows) {
        this.rows = rows;
        this.draw();
    }

    draw() {
        const { ctx, w, h } = prepare(this.canvas);
        const rows = this.rows;
        if (!rows.length) {
            return;
        }
        const padL = 64, padR = 54;
        const rowH = Math.min(26, h / rows.length);
        const barH = Math.max(6, rowH - 9);
        const max = niceCeil(Math.max(1, ...rows.map((r) => r.value)));
        ctx.textBaseline = 'middle';
        rows.forEach((r, i) => {
            const yc = i * rowH + rowH / 2;
            ctx.fillStyle = INK;
            ctx.textAlign = 'right';
            ctx.fillText(r.label, padL - 8, yc);
            ctx.fillStyle = '#f0f2f6';
            ctx.fillRect(padL, yc - barH / 2, w - padL - padR, barH);
            const bw = ((w - padL - padR) * r.value) / max;
            ctx.fillStyle = r.color || PALETTE[i % PALETTE.length];
            ctx.fillRect(padL, yc - barH / 2, Math.max(r.value ? 2 : 0, bw),
                         barH);
            ctx.fillStyle = r.value ? INK : MUTED;
            ctx.textAlign = 'left';
            ctx.fillText(compact(r.value), w - padR + 6, yc);
        });
    }
}
