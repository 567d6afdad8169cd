/*
 * server/stats.c - /stats (JSON) and /metrics (Prometheus text format).
 *
 * Both read every loop's counters with relaxed atomic loads: a loop writes
 * only its own counters, so a reader sees each value whole, though the set
 * is not one instant's snapshot.
 *
 * Thread: any loop (the one serving the request).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/version.h"
#include "server/srv.h"

#define G(x) ((json_int_t)HUB_STAT_GET(x))

/* Upper bounds of the wheel's lateness buckets, in ticks (hub/stats.h). */
static const double late_bounds_ticks[4] = { 0.25, 0.5, 1, 2 };

/* wheel.lateness: fires per bucket (upper bound in ms, last unbounded),
 * their summed lateness, and the stalls the driver held the wheel for. */
static void wheel_lateness_json(json_t *wheel, struct hub_loop_stats *st,
                                uint64_t tick_ms)
{
    json_t *buckets = json_array();

    for (int i = 0; i < 5; i++)
        json_array_append_new(
            buckets,
            json_pack("{s:o,s:I}", "lt_ms",
                      i < 4 ? json_real(late_bounds_ticks[i] *
                                        (double)tick_ms)
                            : json_null(),
                      "count", G(st->wheel_late[i])));
    json_object_set_new(wheel, "lateness", buckets);
    json_object_set_new(wheel, "lateness_sum_ms",
                        json_integer(G(st->wheel_late_sum_ms)));
    json_object_set_new(wheel, "stalls", json_integer(G(st->stalls)));
    json_object_set_new(wheel, "max_stall_ms",
                        json_integer(G(st->max_stall_ms)));
}

static json_t *loop_json(unsigned id, struct hub_loop_stats *st,
                         uint64_t tick_ms)
{
    json_t *closed = json_object(), *o;
    uint64_t writes = HUB_STAT_GET(st->writes);

    for (int r = 0; r < HUB_CLOSE_N; r++)
        json_object_set_new(closed, hub_close_reason_name(r),
                            json_integer(G(st->closed[r])));
    o = json_pack(
        "{s:i,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,"
        "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
        "s:{s:I,s:I,s:f,s:f,s:f,s:f},"
        "s:{s:I,s:I,s:I,s:I,s:f,s:f,s:I}}",
        "loop", (int)id, "sessions", G(st->sessions), "accepted",
        G(st->accepted), "closed", closed, "close_timeouts",
        G(st->close_timeouts), "rejected_http", G(st->rejected_http),
        "pings_sent", G(st->pings_sent), "pongs", G(st->pongs),
        "pusher_pings", G(st->pusher_pings), "msgs_in", G(st->msgs_in),
        "bytes_in", G(st->bytes_in), "msgs_out", G(st->msgs_out),
        "bytes_out", G(st->bytes_out), "writes", (json_int_t)writes,
        "deliveries_per_write",
        writes ? (double)HUB_STAT_GET(st->msgs_out) / (double)writes : 0.0,
        "bad_messages", G(st->bad_messages), "client_events",
        G(st->client_events), "client_events_dropped",
        G(st->client_events_dropped), "subscriptions", G(st->subscriptions),
        "publishes", G(st->publishes), "inbox_depth", G(st->inbox_depth),
        "inbox_max", G(st->inbox_max), "accept_paused", G(st->accept_paused),
        "queued_bytes", G(st->queued_bytes), "queue_budget_drops",
        G(st->queue_budget_drops), "subscriptions_refused",
        G(st->subscriptions_refused),
        "heartbeat", "runs", G(st->hb_runs), "failures", G(st->hb_failures),
        "last_scan_ms", (double)HUB_STAT_GET(st->hb_last_scan_ns) / 1e6,
        "max_scan_ms", (double)HUB_STAT_GET(st->hb_max_scan_ns) / 1e6,
        "last_slice_ms", (double)HUB_STAT_GET(st->hb_last_slice_ns) / 1e6,
        "max_slice_ms", (double)HUB_STAT_GET(st->hb_max_slice_ns) / 1e6,
        "wheel", "pending", G(st->wheel_pending), "pong_armed",
        G(st->pong_armed), "fired",
        G(st->wheel_fired), "cancelled", G(st->wheel_cancelled),
        "last_advance_ms", (double)HUB_STAT_GET(st->wheel_last_advance_ns) / 1e6,
        "max_advance_ms", (double)HUB_STAT_GET(st->wheel_max_advance_ns) / 1e6,
        "max_lateness_ms", G(st->wheel_max_late_ms));
    if (o)
        wheel_lateness_json(json_object_get(o, "wheel"), st, tick_ms);
    return o;
}

char *srv_stats_json(struct srv *srv, size_t *len)
{
    json_t *loops = json_array(), *root, *totals, *closed;
    uint64_t sum_sessions = 0, sum_acc = 0, sum_in = 0, sum_out = 0,
             sum_pings = 0, sum_pongs = 0, sum_closed[HUB_CLOSE_N] = { 0 },
             sum_bin = 0, sum_bout = 0, sum_subs = 0, sum_writes = 0,
             sum_queued = 0, sum_drops = 0, sum_refused = 0;
    char *text;

    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct hub_loop *hl = srv->loops[i].hub;
        struct hub_loop_stats *st;

        if (!hl)
            continue;
        st = &hl->stats;
        json_array_append_new(loops, loop_json(i, st, srv->hcfg.tick_ms));
        sum_sessions += HUB_STAT_GET(st->sessions);
        sum_acc += HUB_STAT_GET(st->accepted);
        sum_in += HUB_STAT_GET(st->msgs_in);
        sum_out += HUB_STAT_GET(st->msgs_out);
        sum_bin += HUB_STAT_GET(st->bytes_in);
        sum_bout += HUB_STAT_GET(st->bytes_out);
        sum_pings += HUB_STAT_GET(st->pings_sent);
        sum_pongs += HUB_STAT_GET(st->pongs);
        sum_subs += HUB_STAT_GET(st->subscriptions);
        sum_writes += HUB_STAT_GET(st->writes);
        sum_queued += HUB_STAT_GET(st->queued_bytes);
        sum_drops += HUB_STAT_GET(st->queue_budget_drops);
        sum_refused += HUB_STAT_GET(st->subscriptions_refused);
        for (int r = 0; r < HUB_CLOSE_N; r++)
            sum_closed[r] += HUB_STAT_GET(st->closed[r]);
    }
    closed = json_object();
    for (int r = 0; r < HUB_CLOSE_N; r++)
        json_object_set_new(closed, hub_close_reason_name(r),
                            json_integer((json_int_t)sum_closed[r]));
    totals = json_pack("{s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
                       "s:I}",
                       "sessions", (json_int_t)sum_sessions, "accepted",
                       (json_int_t)sum_acc, "closed", closed, "msgs_in",
                       (json_int_t)sum_in, "msgs_out", (json_int_t)sum_out,
                       "bytes_in", (json_int_t)sum_bin, "bytes_out",
                       (json_int_t)sum_bout, "pings_sent",
                       (json_int_t)sum_pings, "pongs", (json_int_t)sum_pongs,
                       "subscriptions", (json_int_t)sum_subs, "writes",
                       (json_int_t)sum_writes, "queued_bytes",
                       (json_int_t)sum_queued, "queue_budget_drops",
                       (json_int_t)sum_drops, "subscriptions_refused",
                       (json_int_t)sum_refused);
    root = json_pack(
        "{s:s,s:f,s:i,s:b,s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I}}",
        "version", hub_version(),
        "uptime_s",
        (double)(srv_now_ms() - srv->hub->started_ms) / 1000.0, "loops",
        (int)srv->n_loops, "draining", atomic_load(&srv->hub->draining),
        "totals", totals, "per_loop", loops, "config", "ping_interval_ms",
        (json_int_t)srv->hcfg.ping_interval_ms, "pong_timeout_ms",
        (json_int_t)srv->hcfg.pong_timeout_ms, "idle_timeout_ms",
        (json_int_t)srv->hcfg.idle_timeout_ms, "tick_ms",
        (json_int_t)srv->hcfg.tick_ms, "write_timeout_ms",
        (json_int_t)srv->hcfg.write_timeout_ms, "max_queued_total",
        (json_int_t)srv->hcfg.max_queued_total, "max_subscriptions",
        (json_int_t)srv->hcfg.max_subscriptions);
    if (!root)
        return NULL;
    text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (text)
        *len = strlen(text);
    return text;
}

/* Prometheus text. */

struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void bprintf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void bprintf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        char *np = realloc(b->p, b->cap * 2 + (size_t)n);

        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = b->cap * 2 + (size_t)n;
    }
}

typedef uint64_t loop_get_fn(const struct hub_loop_stats *st);

/* One series per loop of the uint64 counter at off in hub_loop_stats; with
 * ms_as_seconds, a milliseconds value printed in seconds. */
static void metric_loops(struct buf *b, struct srv *srv, const char *name,
                         const char *type, const char *help, size_t off,
                         bool ms_as_seconds)
{
    bprintf(b, "# HELP lubdub_%s %s\n# TYPE lubdub_%s %s\n", name, help, name,
            type);
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct hub_loop *hl = srv->loops[i].hub;
        uint64_t *v;

        if (!hl)
            continue;
        v = (uint64_t *)(void *)((char *)&hl->stats + off);
        if (ms_as_seconds)
            bprintf(b, "lubdub_%s{loop=\"%u\"} %.3f\n", name, i,
                    (double)HUB_STAT_GET(*v) / 1e3);
        else
            bprintf(b, "lubdub_%s{loop=\"%u\"} %llu\n", name, i,
                    (unsigned long long)HUB_STAT_GET(*v));
    }
}

static void metric(struct buf *b, struct srv *srv, const char *name,
                   const char *type, const char *help, size_t off)
{
    metric_loops(b, srv, name, type, help, off, false);
}

static void histogram(struct buf *b, struct srv *srv, const char *name,
                      const char *help, size_t off)
{
    bprintf(b, "# HELP lubdub_%s %s\n# TYPE lubdub_%s histogram\n", name, help,
            name);
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct hub_loop *hl = srv->loops[i].hub;
        struct hub_hist *h;
        uint64_t cum = 0;

        if (!hl)
            continue;
        h = (struct hub_hist *)(void *)((char *)&hl->stats + off);
        for (int k = 0; k < HUB_HIST_N; k++) {
            cum += HUB_STAT_GET(h->count[k]);
            if (k == HUB_HIST_N - 1)
                bprintf(b, "lubdub_%s_bucket{loop=\"%u\",le=\"+Inf\"} %llu\n",
                        name, i, (unsigned long long)cum);
            else
                bprintf(b, "lubdub_%s_bucket{loop=\"%u\",le=\"%g\"} %llu\n",
                        name, i, (double)hub_hist_bounds_us[k] / 1e6,
                        (unsigned long long)cum);
        }
        bprintf(b, "lubdub_%s_sum{loop=\"%u\"} %.6f\n", name, i,
                (double)HUB_STAT_GET(h->sum_us) / 1e6);
        bprintf(b, "lubdub_%s_count{loop=\"%u\"} %llu\n", name, i,
                (unsigned long long)cum);
    }
}

#define OFF(f) offsetof(struct hub_loop_stats, f)

/* A label value with \\, " and newline escaped, as the text format asks. */
static void label_value(struct buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            bprintf(b, "\\%c", *s);
        else if (*s == '\n')
            bprintf(b, "\\n");
        else
            bprintf(b, "%c", *s);
    }
}

/*
 * Per-app series come from the hub-wide per-app counter that the quota
 * uses, so they cost nothing on the hot path. The rest stay per loop: they
 * are single-writer loop counters, and splitting them by app as well would
 * multiply the series (apps x loops) for little an operator needs.
 */
static void app_metrics(struct buf *b, struct srv *srv)
{
    bprintf(b, "# HELP lubdub_app_sessions Live sessions per app (all "
               "loops).\n# TYPE lubdub_app_sessions gauge\n");
    for (unsigned i = 0; i < srv->hcfg.n_apps; i++) {
        bprintf(b, "lubdub_app_sessions{app=\"");
        label_value(b, srv->hcfg.apps[i].id);
        bprintf(b, "\"} %llu\n",
                (unsigned long long)atomic_load(&srv->hub->app_sessions[i]));
    }
}

char *srv_metrics_text(struct srv *srv, size_t *len)
{
    struct buf b = { malloc(16384), 0, 16384, false };

    if (!b.p)
        return NULL;
    bprintf(&b, "# HELP lubdub_uptime_seconds Seconds since start.\n"
                "# TYPE lubdub_uptime_seconds gauge\n"
                "lubdub_uptime_seconds %.3f\n",
            (double)(srv_now_ms() - srv->hub->started_ms) / 1000.0);
    bprintf(&b, "# HELP lubdub_draining 1 while the hub drains.\n"
                "# TYPE lubdub_draining gauge\nlubdub_draining %d\n",
            atomic_load(&srv->hub->draining) ? 1 : 0);
    bprintf(&b, "# HELP lubdub_build_info Version of the running hub.\n"
                "# TYPE lubdub_build_info gauge\n"
                "lubdub_build_info{version=\"%s\"} 1\n",
            hub_version());
    metric(&b, srv, "sessions", "gauge", "Live WebSocket sessions.",
           OFF(sessions));
    app_metrics(&b, srv);
    metric(&b, srv, "sessions_accepted_total", "counter",
           "Sessions established.", OFF(accepted));
    bprintf(&b, "# HELP lubdub_sessions_closed_total Sessions closed, by "
                "reason.\n# TYPE lubdub_sessions_closed_total counter\n");
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct hub_loop *hl = srv->loops[i].hub;

        if (!hl)
            continue;
        for (int r = 0; r < HUB_CLOSE_N; r++)
            bprintf(&b,
                    "lubdub_sessions_closed_total{loop=\"%u\",reason=\"%s\"} "
                    "%llu\n",
                    i, hub_close_reason_name(r),
                    (unsigned long long)HUB_STAT_GET(hl->stats.closed[r]));
    }
    metric(&b, srv, "close_timeouts_total", "counter",
           "Closes the peer never completed (killed).", OFF(close_timeouts));
    metric(&b, srv, "http_rejected_total", "counter",
           "Requests refused before the handshake (400/403/426/431/503).",
           OFF(rejected_http));
    metric(&b, srv, "pings_sent_total", "counter",
           "WebSocket pings sent by the heartbeat.", OFF(pings_sent));
    metric(&b, srv, "pongs_total", "counter", "WebSocket pongs received.",
           OFF(pongs));
    metric(&b, srv, "pusher_pings_total", "counter",
           "pusher:ping messages answered.", OFF(pusher_pings));
    metric(&b, srv, "messages_in_total", "counter",
           "Inbound WebSocket messages.", OFF(msgs_in));
    metric(&b, srv, "messages_out_total", "counter",
           "Outbound WebSocket messages (deliveries).", OFF(msgs_out));
    metric(&b, srv, "bytes_in_total", "counter", "Inbound message bytes.",
           OFF(bytes_in));
    metric(&b, srv, "bytes_out_total", "counter", "Outbound bytes written.",
           OFF(bytes_out));
    metric(&b, srv, "writes_total", "counter",
           "Corked writes (deliveries per write = messages_out / writes).",
           OFF(writes));
    metric(&b, srv, "bad_messages_total", "counter",
           "Inbound messages rejected as invalid.", OFF(bad_messages));
    metric(&b, srv, "client_events_total", "counter",
           "Client events relayed.", OFF(client_events));
    metric(&b, srv, "client_events_dropped_total", "counter",
           "Client events refused (rate limit, not allowed).",
           OFF(client_events_dropped));
    metric(&b, srv, "publishes_total", "counter",
           "Published frames delivered to this loop for fan-out.",
           OFF(publishes));
    metric(&b, srv, "subscriptions", "gauge",
           "Live channel subscriptions.", OFF(subscriptions));
    metric(&b, srv, "queued_bytes", "gauge",
           "Outbound bytes waiting in send queues.", OFF(queued_bytes));
    bprintf(&b, "# HELP lubdub_queue_budget_bytes The hub-wide send queue "
                "budget (max_queued_total).\n"
                "# TYPE lubdub_queue_budget_bytes gauge\n"
                "lubdub_queue_budget_bytes %llu\n",
            (unsigned long long)srv->hcfg.max_queued_total);
    metric(&b, srv, "queue_budget_drops_total", "counter",
           "Deliveries refused by the queue budget (the reader is closed).",
           OFF(queue_budget_drops));
    metric(&b, srv, "subscriptions_refused_total", "counter",
           "Subscriptions refused over max_subscriptions.",
           OFF(subscriptions_refused));
    metric(&b, srv, "inbox_max_depth", "gauge",
           "Most inbox items drained in one wakeup.", OFF(inbox_max));
    metric(&b, srv, "accept_pauses_total", "counter",
           "Accept pauses for lack of file descriptors.", OFF(accept_paused));
    metric(&b, srv, "heartbeat_runs_total", "counter",
           "Completed heartbeat scans.", OFF(hb_runs));
    metric(&b, srv, "heartbeat_failures_total", "counter",
           "Heartbeat scans with a failure.", OFF(hb_failures));
    metric(&b, srv, "wheel_pending", "gauge", "Timers armed in the wheel.",
           OFF(wheel_pending));
    metric(&b, srv, "wheel_pong_armed", "gauge",
           "Pong deadlines in the wheel (sessions pinged within pong_timeout).",
           OFF(pong_armed));
    metric(&b, srv, "wheel_fired_total", "counter", "Timers fired.",
           OFF(wheel_fired));
    metric(&b, srv, "wheel_cancelled_total", "counter", "Timers cancelled.",
           OFF(wheel_cancelled));
    metric_loops(&b, srv, "wheel_max_lateness_seconds", "gauge",
                 "Latest a timer has fired after its deadline.",
                 OFF(wheel_max_late_ms), true);
    /* Lateness of every timer fire, in the wheel's tick-relative buckets. */
    bprintf(&b, "# HELP lubdub_wheel_lateness_seconds How late timers fired "
                "after their deadline (a stalled loop shows in the top "
                "bucket and the sum).\n"
                "# TYPE lubdub_wheel_lateness_seconds histogram\n");
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct hub_loop *hl = srv->loops[i].hub;
        uint64_t cum = 0;

        if (!hl)
            continue;
        for (int k = 0; k < 5; k++) {
            cum += HUB_STAT_GET(hl->stats.wheel_late[k]);
            if (k == 4)
                bprintf(&b, "lubdub_wheel_lateness_seconds_bucket{loop=\"%u\","
                            "le=\"+Inf\"} %llu\n",
                        i, (unsigned long long)cum);
            else
                bprintf(&b, "lubdub_wheel_lateness_seconds_bucket{loop=\"%u\","
                            "le=\"%g\"} %llu\n",
                        i, late_bounds_ticks[k] *
                               (double)srv->hcfg.tick_ms / 1e3,
                        (unsigned long long)cum);
        }
        bprintf(&b, "lubdub_wheel_lateness_seconds_sum{loop=\"%u\"} %.3f\n", i,
                (double)HUB_STAT_GET(hl->stats.wheel_late_sum_ms) / 1e3);
        bprintf(&b, "lubdub_wheel_lateness_seconds_count{loop=\"%u\"} %llu\n",
                i, (unsigned long long)cum);
    }
    metric(&b, srv, "loop_stalls_total", "counter",
           "Times the loop's wheel driver came more than two ticks late "
           "(the loop did not run); each holds timers for one read pass.",
           OFF(stalls));
    metric_loops(&b, srv, "loop_max_stall_seconds", "gauge",
                 "Longest gap between two wheel advances.", OFF(max_stall_ms),
                 true);
    histogram(&b, srv, "pong_rtt_seconds",
              "WebSocket ping to pong round-trip time.", OFF(pong_rtt));
    histogram(&b, srv, "heartbeat_scan_seconds",
              "Duration of one heartbeat scan (all slices).", OFF(hb_scan));
    histogram(&b, srv, "wheel_advance_seconds",
              "Duration of one timing-wheel advance.", OFF(wheel_advance));
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
