/*
 * server/ops/stats.c - /stats (JSON) and /metrics (Prometheus text format),
 * both written from the counter table in hub/loop/stats_table.h.
 *
 * Both read every loop's counters with relaxed atomic loads: a loop writes
 * only its own counters, so a reader sees each value whole, though the set
 * is not one instant's snapshot.
 *
 * Thread: any loop (the one serving the request).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/loop/backplane.h"
#include "hub/channel/cache.h"
#include "hub/channel/history.h"
#include "hub/cluster/cluster.h"
#include "hub/loop/stats_table.h"
#include "hub/base/version.h"
#include "server/base/procstat.h"
#include "server/lws/srv.h"
#include "server/redis/redis.h"
#include "server/redis/redis_ready.h"
#include "server/webhook/webhook_metrics.h"

enum row_fmt {
    FMT_U64, FMT_NS_MS, FMT_MS_S, FMT_BY_REASON, FMT_LATE, FMT_RATIO
};
enum row_group { GROUP_LOOP, GROUP_HEARTBEAT, GROUP_WHEEL, GROUP_N };

static const char *const group_keys[GROUP_N] = {
    [GROUP_LOOP] = NULL, [GROUP_HEARTBEAT] = "heartbeat",
    [GROUP_WHEEL] = "wheel",
};

/* One HUB_LOOP_STATS row, with the offset of its storage. */
struct row {
    const char *key, *metric, *type, *help;
    enum row_fmt fmt;
    enum row_group group;
    unsigned total;
    size_t off;
};

#define ROW_OFF_U64(f) offsetof(struct hub_loop_stats, f)
#define ROW_OFF_NS_MS(f) offsetof(struct hub_loop_stats, f)
#define ROW_OFF_MS_S(f) offsetof(struct hub_loop_stats, f)
#define ROW_OFF_BY_REASON(f) offsetof(struct hub_loop_stats, f)
#define ROW_OFF_LATE(f) offsetof(struct hub_loop_stats, f)
#define ROW_OFF_RATIO(f) 0

static const struct row rows[] = {
#define X(field, type, fmt, total, group, key, metric, help)                   \
    { key, metric, #type, help, FMT_##fmt, GROUP_##group, total,               \
      ROW_OFF_##fmt(field) },
    HUB_LOOP_STATS(X)
#undef X
};
#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

struct hist_row {
    const char *metric, *help;
    size_t off;
};

static const struct hist_row hist_rows[] = {
#define X(field, metric, help)                                                 \
    { metric, help, offsetof(struct hub_loop_stats, field) },
    HUB_LOOP_HISTS(X)
#undef X
};

enum hub_metric_id {
#define X(id, type, metric, help) HUB_METRIC_##id,
    HUB_HUB_METRICS(X)
#undef X
};

static const struct hub_metric {
    enum hub_metric_id id;
    const char *metric, *type, *help;
} hub_metrics[] = {
#define X(id, type, metric, help) { HUB_METRIC_##id, metric, #type, help },
    HUB_HUB_METRICS(X)
#undef X
};

/* The uint64 at off in st, element i. */
static uint64_t stat_at(const struct hub_loop_stats *st, size_t off,
                        unsigned i)
{
    const uint64_t *v =
        (const uint64_t *)(const void *)((const char *)st + off);

    return HUB_STAT_GET(v[i]);
}

/* Loop i's counters, NULL for a loop not (or no longer) there. */
static const struct hub_loop_stats *loop_stats(const struct srv *srv,
                                               unsigned i)
{
    return srv->loops[i].hub ? &srv->loops[i].hub->stats : NULL;
}

/* The backplane's counters, NULL for one node. */
static const struct hub_backplane_stats *backplane_stats(const struct srv *srv)
{
    return srv->hub && srv->hub->bp ? srv->hub->bp->stats : NULL;
}

/* Upper bounds of the wheel's lateness buckets, in ticks (HUB_LATE_N). */
static const double late_bounds_ticks[HUB_LATE_N - 1] = { 0.25, 0.5, 1, 2 };

/* A growing text buffer; once out of memory, it stays so (oom). */

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

/* jansson's dump callback: append n bytes. Failures latch, because
 * jansson 2.14 does not check every callback result (an object key that
 * failed to go out is followed by its value), so a dump that failed once
 * must fail to the end. */
static int buf_put(const char *p, size_t n, void *data)
{
    struct buf *b = data;

    if (!b->oom && b->cap - b->len <= n) {
        size_t cap = b->cap * 2 + n;
        char *np = realloc(b->p, cap);

        if (np) {
            b->p = np;
            b->cap = cap;
        } else {
            b->oom = true;
        }
    }
    if (b->oom)
        return -1;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* /stats */

/* Set obj[key] = v; v is taken (dropped on failure, as jansson drops it
 * for a NULL obj); false when anything failed. */
static bool put(json_t *obj, const char *key, json_t *v)
{
    return json_object_set_new(obj, key, v) == 0;
}

static json_t *by_reason_json(const uint64_t *sum)
{
    json_t *o = json_object();

    for (int r = 0; r < HUB_CLOSE_N; r++)
        if (!put(o, hub_close_reason_name(r),
                 json_integer((json_int_t)sum[r]))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* wheel.lateness: fires per bucket (upper bound in ms, last unbounded). */
static json_t *late_json(const struct hub_loop_stats *st, size_t off,
                         uint64_t tick_ms)
{
    json_t *a = json_array();

    for (unsigned i = 0; a && i < HUB_LATE_N; i++) {
        json_t *b = json_object();

        if (!put(b, "lt_ms",
                 i < HUB_LATE_N - 1
                     ? json_real(late_bounds_ticks[i] * (double)tick_ms)
                     : json_null()) ||
            !put(b, "count", json_integer((json_int_t)stat_at(st, off, i))) ||
            json_array_append_new(a, b)) {
            json_decref(b);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *row_json(const struct row *r, const struct hub_loop_stats *st,
                        uint64_t tick_ms)
{
    uint64_t v[HUB_CLOSE_N];

    switch (r->fmt) {
    case FMT_U64:
    case FMT_MS_S:
        return json_integer((json_int_t)stat_at(st, r->off, 0));
    case FMT_NS_MS:
        return json_real((double)stat_at(st, r->off, 0) / 1e6);
    case FMT_BY_REASON:
        for (int i = 0; i < HUB_CLOSE_N; i++)
            v[i] = stat_at(st, r->off, (unsigned)i);
        return by_reason_json(v);
    case FMT_LATE:
        return late_json(st, r->off, tick_ms);
    case FMT_RATIO: {
        uint64_t writes = HUB_STAT_GET(st->writes);

        return json_real(writes ? (double)HUB_STAT_GET(st->msgs_out) /
                                      (double)writes
                                : 0.0);
    }
    }
    return NULL;
}

static json_t *loop_json(unsigned id, const struct hub_loop_stats *st,
                         uint64_t tick_ms)
{
    json_t *o = json_object(), *group[GROUP_N] = { o };
    bool ok = put(o, "loop", json_integer(id));

    for (size_t i = 0; ok && i < N_ROWS; i++) {
        const struct row *r = &rows[i];

        if (!group[r->group]) {
            group[r->group] = json_object();
            ok = put(o, group_keys[r->group], json_incref(group[r->group]));
            json_decref(group[r->group]); /* o holds it, or it is gone */
        }
        ok = ok && put(group[r->group], r->key, row_json(r, st, tick_ms));
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The rows with a totals position, summed over the loops, in that order. */
static json_t *totals_json(struct srv *srv)
{
    json_t *o = json_object();
    const struct hub_loop_stats *st;

    for (unsigned pos = 1; o; pos++) {
        const struct row *r = NULL;
        uint64_t sum[HUB_CLOSE_N] = { 0 };

        for (size_t i = 0; i < N_ROWS && !r; i++)
            if (rows[i].total == pos)
                r = &rows[i];
        if (!r)
            break;
        for (unsigned l = 0; l < srv->n_loops; l++) {
            unsigned n = r->fmt == FMT_BY_REASON ? HUB_CLOSE_N : 1;

            if (!(st = loop_stats(srv, l)))
                continue;
            for (unsigned k = 0; k < n; k++)
                sum[k] += stat_at(st, r->off, k);
        }
        if (!put(o, r->key,
                 r->fmt == FMT_BY_REASON ? by_reason_json(sum)
                                         : json_integer((json_int_t)sum[0]))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* The hub-wide bound of history (hub_history_create: 0 means 64 MiB). */
static uint64_t history_max_bytes(const struct srv *srv)
{
    return srv->hcfg.history_max_bytes ? srv->hcfg.history_max_bytes
                                       : (uint64_t)64 << 20;
}

/* An app's keys, one per key/secret pair, the first (the signing pair)
 * first; never a secret. NULL when out of memory. */
static json_t *keys_json(const struct hub_app *a)
{
    json_t *k = json_array();

    for (unsigned i = 0; k && i < hub_app_n_keys(a); i++)
        if (json_array_append_new(k, json_string(hub_app_key_at(a, i)))) {
            json_decref(k);
            return NULL;
        }
    return k;
}

/* /stats "apps": per present app, by id, its keys, what the hub counts
 * per app, and what its history holds (0 for an app that keeps none). */
static json_t *apps_json(struct srv *srv)
{
    const struct hub_apptab *tab = hub_apps(srv->hub);
    json_t *o = json_object();

    for (unsigned i = 0; o && i < tab->n; i++) {
        const struct hub_app_live *v = tab->live[i];
        struct hub_history_usage hu;

        if (!tab->apps[i])
            continue;
        hub_history_usage(hub_history_of(srv->hub), i, &hu);
        if (json_object_set_new(
                o, tab->apps[i]->id,
                json_pack("{s:o?,s:I,s:I,s:I,s:I,s:I}", "keys",
                          keys_json(tab->apps[i]), "sessions",
                          (json_int_t)atomic_load(&v->sessions),
                          "rest_events_limited",
                          (json_int_t)atomic_load(&v->events_limited),
                          "rest_reads_limited",
                          (json_int_t)atomic_load(&v->reads_limited),
                          "history_events", (json_int_t)hu.events,
                          "history_bytes", (json_int_t)hu.bytes))) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* The readiness (server/redis/redis_ready.h): its phase, the last reason
 * (a connect's or a REJOIN's failure, kept after it cleared; "" before
 * any), and since when the node is not joined (null while it is). */
static bool readiness_json(struct srv *srv, json_t *o)
{
    struct srv_redis_ready_view v;
    char since[32];

    if (!srv->redis)
        return true;
    srv_redis_ready_get(srv_redis_readiness(srv->redis), &v);
    srv_redis_ready_time(v.since_ms, since, sizeof(since));
    return put(o, "phase", json_string(srv_redis_ready_phase_name(v.phase))) &&
           put(o, "last_error", json_string(v.reason)) &&
           put(o, "not_joined_since",
               v.phase == SRV_REDIS_PHASE_JOINED ? json_null()
                                                 : json_string(since));
}

/* With --redis: root["backplane"] = {node, state, directory, the
 * readiness, the counters}. */
static bool backplane_json(struct srv *srv, json_t *root)
{
    const struct hub_backplane_stats *st = backplane_stats(srv);
    json_t *o;

    if (!st)
        return true;
    o = json_object();
    if (!put(o, "node", json_string(srv->node_id ? srv->node_id : "")) ||
        !put(o, "state", json_string(srv_redis_cluster_state(srv))) ||
        /* The cluster directory: up once this node's REJOIN snapshot was
         * taken after it reached Redis (joins before that are its own). */
        !put(o, "directory",
             json_string(srv->cluster && hub_cluster_dir_is_up(srv->cluster)
                             ? "up"
                             : "down")) ||
        !readiness_json(srv, o))
        goto fail;
#define X(field, type, key, metric, help)                                      \
    if (!put(o, key, json_integer((json_int_t)HUB_STAT_GET(st->field))))      \
        goto fail;
    HUB_BACKPLANE_STATS(X)
#undef X
    return put(root, "backplane", o);
fail:
    json_decref(o);
    return false;
}

/* The cache channels' store, hub-wide: {"entries":N,"bytes":B}, summed
 * over the apps (/metrics has them per app). */
static json_t *cache_json(struct srv *srv)
{
    uint64_t entries = 0, bytes = 0;

    /* Every index of the current table: a removed app's entries stay
     * charged until they expire. */
    for (unsigned i = 0; i < hub_apps(srv->hub)->n; i++) {
        struct hub_cache_usage u;

        hub_cache_app_usage(hub_cache_of(srv->hub), i, &u);
        entries += u.entries;
        bytes += u.bytes;
    }
    return json_pack("{s:I,s:I}", "entries", (json_int_t)entries, "bytes",
                     (json_int_t)bytes);
}

/* Recovery's history, hub-wide (hub/channel/history.h; /metrics and the
 * "apps" objects have it per app): what it holds, its bound, and what left
 * it since start, evicted under a bound or expired at the ttl. */
static json_t *history_json(struct srv *srv)
{
    struct hub_history_usage u;

    hub_history_usage(hub_history_of(srv->hub), UINT32_MAX, &u);
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "channels",
                     (json_int_t)u.channels, "events", (json_int_t)u.events,
                     "bytes", (json_int_t)u.bytes, "max_bytes",
                     (json_int_t)history_max_bytes(srv), "evicted",
                     (json_int_t)u.evicted, "expired", (json_int_t)u.expired);
}

char *srv_stats_json(struct srv *srv, size_t *len)
{
    json_t *loops = json_array(), *root = NULL, *totals = totals_json(srv);
    json_t *apps = apps_json(srv);
    struct buf out = { malloc(4096), 0, 4096, false };
    const struct hub_loop_stats *st;

    for (unsigned i = 0; loops && i < srv->n_loops; i++) {
        if (!(st = loop_stats(srv, i)))
            continue;
        if (json_array_append_new(loops,
                                  loop_json(i, st, srv->hcfg.tick_ms))) {
            json_decref(loops);
            loops = NULL;
        }
    }
    if (loops && totals && apps)
        root = json_pack(
            "{s:s,s:s,s:f,s:i,s:b,s:O,s:O,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I}}",
            "version", hub_version(), "commit", hub_commit(), "uptime_s",
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
    /* Each insert checked: jansson drops what it cannot add. */
    if (root && json_object_set(root, "apps", apps)) {
        json_decref(root);
        root = NULL;
    }
    json_decref(apps);
    json_decref(loops);
    json_decref(totals);
    if (root) {
        /* server/webhook/webhook_metrics.c; absent when no app has webhooks. */
        json_t *wh = srv_wh_stats_json(srv);

        if (wh && json_object_set_new(root, "webhooks", wh)) {
            json_decref(root);
            root = NULL;
        }
    }
    if (root && (!backplane_json(srv, root) ||
                 json_object_set_new(root, "cache", cache_json(srv)) ||
                 json_object_set_new(root, "history", history_json(srv)))) {
        json_decref(root);
        root = NULL;
    }
    if (!root || !out.p ||
        json_dump_callback(root, buf_put, &out, JSON_COMPACT))
        out.oom = true;
    json_decref(root);
    if (out.oom) {
        free(out.p);
        return NULL;
    }
    *len = out.len;
    return out.p;
}

static void family(struct buf *b, const char *name, const char *type,
                   const char *help)
{
    bprintf(b, "# HELP lubdub_%s %s\n# TYPE lubdub_%s %s\n", name, help, name,
            type);
}

/* One series per loop: the integer, or with fmt MS_S the milliseconds
 * shown in seconds. */
static void row_series(struct buf *b, struct srv *srv, const struct row *r)
{
    const struct hub_loop_stats *st;

    for (unsigned i = 0; i < srv->n_loops; i++) {
        if (!(st = loop_stats(srv, i)))
            continue;
        if (r->fmt == FMT_MS_S)
            bprintf(b, "lubdub_%s{loop=\"%u\"} %.3f\n", r->metric, i,
                    (double)stat_at(st, r->off, 0) / 1e3);
        else
            bprintf(b, "lubdub_%s{loop=\"%u\"} %llu\n", r->metric, i,
                    (unsigned long long)stat_at(st, r->off, 0));
    }
}

static void by_reason_series(struct buf *b, struct srv *srv,
                             const struct row *r)
{
    const struct hub_loop_stats *st;

    for (unsigned i = 0; i < srv->n_loops; i++) {
        if (!(st = loop_stats(srv, i)))
            continue;
        for (int k = 0; k < HUB_CLOSE_N; k++)
            bprintf(b, "lubdub_%s{loop=\"%u\",reason=\"%s\"} %llu\n",
                    r->metric, i, hub_close_reason_name(k),
                    (unsigned long long)stat_at(st, r->off, (unsigned)k));
    }
}

/* One loop's series of a Prometheus histogram: n buckets counting values
 * below le[k] seconds (the last unbounded, le unused), cumulated; the sum
 * in seconds with its precision. */
static void buckets(struct buf *b, const char *name, unsigned loop,
                    const uint64_t *count, unsigned n, const double *le,
                    double sum, int precision)
{
    uint64_t cum = 0;

    for (unsigned k = 0; k < n; k++) {
        cum += HUB_STAT_GET(count[k]);
        if (k == n - 1)
            bprintf(b, "lubdub_%s_bucket{loop=\"%u\",le=\"+Inf\"} %llu\n",
                    name, loop, (unsigned long long)cum);
        else
            bprintf(b, "lubdub_%s_bucket{loop=\"%u\",le=\"%g\"} %llu\n",
                    name, loop, le[k], (unsigned long long)cum);
    }
    bprintf(b, "lubdub_%s_sum{loop=\"%u\"} %.*f\n", name, loop, precision,
            sum);
    bprintf(b, "lubdub_%s_count{loop=\"%u\"} %llu\n", name, loop,
            (unsigned long long)cum);
}

/* Lateness of every timer fire, in the wheel's tick-relative buckets; the
 * sum is wheel_late_sum_ms. */
static void late_series(struct buf *b, struct srv *srv, const struct row *r)
{
    const struct hub_loop_stats *st;
    double le[HUB_LATE_N - 1];

    for (unsigned k = 0; k < HUB_LATE_N - 1; k++)
        le[k] = late_bounds_ticks[k] * (double)srv->hcfg.tick_ms / 1e3;
    for (unsigned i = 0; i < srv->n_loops; i++)
        if ((st = loop_stats(srv, i)))
            buckets(b, r->metric, i,
                    (const uint64_t *)(const void *)((const char *)st +
                                                     r->off),
                    HUB_LATE_N, le,
                    (double)HUB_STAT_GET(st->wheel_late_sum_ms) / 1e3, 3);
}

/* The microsecond histograms (hub_hist_bounds_us). */
static void hist_series(struct buf *b, struct srv *srv,
                        const struct hist_row *r)
{
    const struct hub_loop_stats *st;
    double le[HUB_HIST_N - 1];

    for (unsigned k = 0; k < HUB_HIST_N - 1; k++)
        le[k] = (double)hub_hist_bounds_us[k] / 1e6;
    for (unsigned i = 0; i < srv->n_loops; i++) {
        const struct hub_hist *h;

        if (!(st = loop_stats(srv, i)))
            continue;
        h = (const struct hub_hist *)(const void *)((const char *)st + r->off);
        buckets(b, r->metric, i, h->count, HUB_HIST_N, le,
                (double)HUB_STAT_GET(h->sum_us) / 1e6, 6);
    }
}

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

/* The value of a per-app gauge for app i of tab. */
static uint64_t app_value(struct srv *srv, const struct hub_apptab *tab,
                          enum hub_metric_id id, unsigned i)
{
    struct hub_cache_usage cu;
    struct hub_history_usage hu;

    switch (id) {
    case HUB_METRIC_CACHE_ENTRIES:
    case HUB_METRIC_CACHE_BYTES:
        hub_cache_app_usage(hub_cache_of(srv->hub), i, &cu);
        return id == HUB_METRIC_CACHE_ENTRIES ? cu.entries : cu.bytes;
    case HUB_METRIC_HISTORY_EVENTS:
    case HUB_METRIC_HISTORY_BYTES:
        /* 0 for an app that keeps no history. */
        hub_history_usage(hub_history_of(srv->hub), i, &hu);
        return id == HUB_METRIC_HISTORY_EVENTS ? hu.events : hu.bytes;
    default:
        return atomic_load(&tab->live[i]->sessions);
    }
}

/* One series per app of the current table (this callback holds it:
 * hub/loop/appswap.h); removed apps (tombstones) are left out, though
 * their cached and kept events stay charged until they expire. */
static void app_series(struct buf *b, struct srv *srv,
                       const struct hub_metric *m)
{
    const struct hub_apptab *tab = hub_apps(srv->hub);

    for (unsigned i = 0; i < tab->n; i++) {
        if (!tab->apps[i])
            continue;
        bprintf(b, "lubdub_%s{app=\"", m->metric);
        label_value(b, tab->apps[i]->id);
        bprintf(b, "\"} %llu\n",
                (unsigned long long)app_value(srv, tab, m->id, i));
    }
}

/* History's hub-wide figures (hub/channel/history.h). */
static uint64_t history_value(struct srv *srv, enum hub_metric_id id)
{
    struct hub_history_usage u;

    hub_history_usage(hub_history_of(srv->hub), UINT32_MAX, &u);
    switch (id) {
    case HUB_METRIC_HISTORY_CHANNELS:
        return u.channels;
    case HUB_METRIC_HISTORY_EVICTED:
        return u.evicted;
    case HUB_METRIC_HISTORY_EXPIRED:
        return u.expired;
    default:
        return history_max_bytes(srv);
    }
}

/* A process figure (server/base/procstat.h): from the reading every loop
 * shares for a second, so a scrape walks /proc/self/fd at most once a
 * second however often it comes; no series when unreadable. */
static void proc_series(struct buf *b, const struct hub_metric *m)
{
    struct srv_proc_reading r;
    int64_t v;

    srv_proc_read(srv_now_ms(), "/sys/fs/cgroup", &r);
    switch (m->id) {
    case HUB_METRIC_OPEN_FDS:
        v = r.open_fds;
        break;
    case HUB_METRIC_MAX_FDS:
        v = r.max_fds;
        break;
    case HUB_METRIC_RESIDENT_MEMORY:
        v = r.resident_bytes;
        break;
    default:
        v = r.memory_limit;
        break;
    }
    if (v >= 0)
        bprintf(b, "lubdub_%s %lld\n", m->metric, (long long)v);
}

/*
 * The hub-wide series. Per-app sessions come from the hub-wide per-app
 * counter that the quota uses, so they cost nothing on the hot path; the
 * cache's and history's per-app figures from their stores' own per-app
 * accounts. The rest stay per loop: they are single-writer loop counters,
 * and splitting them by app as well would multiply the series (apps x
 * loops) for little an operator needs.
 */
static void hub_series(struct buf *b, struct srv *srv,
                       const struct hub_metric *m)
{
    const struct hub_apptab *tab = hub_apps(srv->hub);

    switch (m->id) {
    case HUB_METRIC_UPTIME:
        bprintf(b, "lubdub_%s %.3f\n", m->metric,
                (double)(srv_now_ms() - srv->hub->started_ms) / 1000.0);
        break;
    case HUB_METRIC_DRAINING:
        bprintf(b, "lubdub_%s %d\n", m->metric,
                atomic_load(&srv->hub->draining) ? 1 : 0);
        break;
    case HUB_METRIC_BUILD_INFO:
        /* Neither needs escaping: hub/base/version.h. */
        bprintf(b, "lubdub_%s{version=\"%s\",commit=\"%s\"} 1\n", m->metric,
                hub_version(), hub_commit());
        break;
    case HUB_METRIC_APP_SESSIONS:
    case HUB_METRIC_CACHE_ENTRIES:
    case HUB_METRIC_CACHE_BYTES:
    case HUB_METRIC_HISTORY_EVENTS:
    case HUB_METRIC_HISTORY_BYTES:
        app_series(b, srv, m);
        break;
    case HUB_METRIC_APP_REST_LIMITED:
        for (unsigned i = 0; i < tab->n; i++) {
            if (!tab->apps[i])
                continue;
            for (int k = 0; k < 2; k++) {
                bprintf(b, "lubdub_%s{app=\"", m->metric);
                label_value(b, tab->apps[i]->id);
                bprintf(b, "\",kind=\"%s\"} %llu\n", k ? "reads" : "events",
                        (unsigned long long)atomic_load(
                            k ? &tab->live[i]->reads_limited
                              : &tab->live[i]->events_limited));
            }
        }
        break;
    case HUB_METRIC_OPEN_FDS:
    case HUB_METRIC_MAX_FDS:
    case HUB_METRIC_RESIDENT_MEMORY:
    case HUB_METRIC_MEMORY_LIMIT:
        proc_series(b, m);
        break;
    case HUB_METRIC_QUEUE_BUDGET:
        bprintf(b, "lubdub_%s %llu\n", m->metric,
                (unsigned long long)srv->hcfg.max_queued_total);
        break;
    case HUB_METRIC_HISTORY_CHANNELS:
    case HUB_METRIC_HISTORY_MAX_BYTES:
    case HUB_METRIC_HISTORY_EVICTED:
    case HUB_METRIC_HISTORY_EXPIRED:
        bprintf(b, "lubdub_%s %llu\n", m->metric,
                (unsigned long long)history_value(srv, m->id));
        break;
    }
}

static void put_text(void *b, const char *text)
{
    bprintf(b, "%s", text);
}

/* The backplane's families, always declared; series only with --redis. */
static void backplane_series(struct buf *b, struct srv *srv)
{
    const struct hub_backplane_stats *st = backplane_stats(srv);

#define X(field, type, key, metric, help)                                      \
    family(b, metric, #type, help);                                            \
    if (st)                                                                    \
        bprintf(b, "lubdub_%s %llu\n", metric,                                \
                (unsigned long long)HUB_STAT_GET(st->field));
    HUB_BACKPLANE_STATS(X)
#undef X
    family(b, HUB_BACKPLANE_RTT_METRIC, "histogram", HUB_BACKPLANE_RTT_HELP);
    if (st) {
        uint64_t cum = 0;

        for (unsigned k = 0; k < HUB_HIST_N; k++) {
            cum += HUB_STAT_GET(st->rtt.count[k]);
            if (k == HUB_HIST_N - 1)
                bprintf(b, "lubdub_%s_bucket{le=\"+Inf\"} %llu\n",
                        HUB_BACKPLANE_RTT_METRIC, (unsigned long long)cum);
            else
                bprintf(b, "lubdub_%s_bucket{le=\"%g\"} %llu\n",
                        HUB_BACKPLANE_RTT_METRIC,
                        (double)hub_hist_bounds_us[k] / 1e6,
                        (unsigned long long)cum);
        }
        bprintf(b, "lubdub_%s_sum %.6f\n", HUB_BACKPLANE_RTT_METRIC,
                (double)HUB_STAT_GET(st->rtt.sum_us) / 1e6);
        bprintf(b, "lubdub_%s_count %llu\n", HUB_BACKPLANE_RTT_METRIC,
                (unsigned long long)cum);
    }
}

char *srv_metrics_text(struct srv *srv, size_t *len)
{
    struct buf b = { malloc(16384), 0, 16384, false };

    if (!b.p)
        return NULL;
    for (size_t i = 0; i < sizeof(hub_metrics) / sizeof(hub_metrics[0]);
         i++) {
        family(&b, hub_metrics[i].metric, hub_metrics[i].type,
               hub_metrics[i].help);
        hub_series(&b, srv, &hub_metrics[i]);
    }
    for (size_t i = 0; i < N_ROWS; i++) {
        const struct row *r = &rows[i];

        if (!r->metric[0])
            continue;
        family(&b, r->metric, r->type, r->help);
        if (r->fmt == FMT_BY_REASON)
            by_reason_series(&b, srv, r);
        else if (r->fmt == FMT_LATE)
            late_series(&b, srv, r);
        else
            row_series(&b, srv, r);
    }
    /* server/webhook/webhook_metrics.c: per app and endpoint. */
    srv_wh_metrics(srv, put_text, &b);
    backplane_series(&b, srv);
    for (size_t i = 0; i < sizeof(hist_rows) / sizeof(hist_rows[0]); i++) {
        family(&b, hist_rows[i].metric, "histogram", hist_rows[i].help);
        hist_series(&b, srv, &hist_rows[i]);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
