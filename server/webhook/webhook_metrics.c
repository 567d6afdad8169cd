/*
 * server/webhook/webhook_metrics.c - the webhook sender's figures
 * (server/webhook/webhook_metrics.h): the /stats "webhooks" object (per
 * endpoint, the sender's totals, and the cluster stream's "stream"
 * object) and the /metrics families, written by one loop over the rows
 * of SRV_WH_METRICS.
 *
 * The endpoints are read under the sender's mu: a reload may replace
 * them. Every figure is a relaxed atomic load (the stream's with
 * HUB_STAT_GET), so a reader sees each value whole, though the set is not
 * one instant's snapshot.
 *
 * Thread: any (a loop serving /stats or /metrics).
 */
#include "server/webhook/webhook_metrics.h"

#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "hub/app/app.h"
#include "hub/loop/stats.h"
#include "server/webhook/webhook_int.h"
#include "server/webhook/webhook_stream.h"

/* One row of SRV_WH_METRICS, with the offset of its field. */
enum row_fmt {
    FMT_EP, FMT_EP_AGE_S, FMT_EP_UP, FMT_EP_LATENCY, FMT_EVENTS_DROPPED,
    FMT_STREAM
};

struct row {
    const char *metric, *type, *help;
    enum row_fmt fmt;
    size_t off;
};

#define ROW_OFF_EP(f) offsetof(struct srv_wh_ep, f)
#define ROW_OFF_EP_AGE_S(f) offsetof(struct srv_wh_ep, f)
#define ROW_OFF_EP_UP(f) offsetof(struct srv_wh_ep, f)
#define ROW_OFF_EP_LATENCY(f) offsetof(struct srv_wh_ep, f)
#define ROW_OFF_EVENTS_DROPPED(f) 0
#define ROW_OFF_STREAM(f) offsetof(struct srv_whs, f)

static const struct row rows[] = {
#define X(metric, type, fmt, field, help)                                      \
    { #metric, #type, help, FMT_##fmt, ROW_OFF_##fmt(field) },
    SRV_WH_METRICS(X)
#undef X
};
#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

#define LD(x) ((json_int_t)atomic_load_explicit(&(x), memory_order_relaxed))

/* Events lost before batching: the queue's drops and the engine's out of
 * memory. */
static uint64_t events_dropped(struct srv_wh *wh)
{
    return (uint64_t)(LD(wh->q.dropped) + LD(wh->events_oom));
}

json_t *srv_wh_stats_json(struct srv *srv)
{
    struct srv_wh *wh = srv__wh_running();
    json_t *eps, *root;
    uint64_t wall = srv__wh_wall_ms();

    (void)srv;
    if (!wh)
        return NULL;
    eps = json_array();
    pthread_mutex_lock(&wh->mu);
    for (unsigned i = 0; eps && i < wh->n_eps; i++) {
        struct srv_wh_ep *ep = wh->eps[i];
        uint64_t oldest = atomic_load(&ep->oldest_ms);
        json_t *hist = json_array(), *o;
        /* dead before depth (the sender counts a dead letter after its
         * pop): one batch is never shown as both. */
        json_int_t dead = (json_int_t)atomic_load_explicit(
                       &ep->dead, memory_order_acquire),
                   depth = (json_int_t)atomic_load(&ep->depth);

        for (unsigned j = 0; hist && j <= N_LAT; j++)
            json_array_append_new(hist, json_integer(LD(ep->lat[j])));
        o = json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o?}",
                      "app", ep->app->id, "url", ep->shown, "up",
                      atomic_load(&ep->up), "sent", LD(ep->sent), "failed",
                      LD(ep->failed), "retried", LD(ep->retried),
                      "dead_lettered", dead, "dropped",
                      LD(ep->dropped), "queue_depth", depth,
                      "oldest_pending_age_ms",
                      (json_int_t)(oldest && wall > oldest ? wall - oldest
                                                           : 0),
                      "latency_buckets", hist);
        if (json_array_append_new(eps, o)) {
            json_decref(eps);
            eps = NULL;
        }
    }
    pthread_mutex_unlock(&wh->mu);
    if (!eps)
        return NULL;
    root = json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "durable",
                     wh->store != NULL, "events_enqueued", LD(wh->q.enqueued),
                     "events_dropped", (json_int_t)events_dropped(wh),
                     "events_batched", LD(wh->events_batched),
                     "edges_delayed", LD(wh->edges_delayed),
                     "edges_cancelled", LD(wh->edges_cancelled),
                     "store_errors", LD(wh->store_errors), "orphan_rows",
                     LD(wh->orphans), "pending_bytes",
                     (json_int_t)atomic_load(&wh->held_bytes_pub),
                     "endpoints", eps);
    if (root && wh->whs)
        json_object_set_new(root, "stream", srv_wh_stream_stats_json(wh));
    return root;
}

json_t *srv_wh_stream_stats_json(struct srv_wh *wh)
{
    struct srv_whs *z = wh ? wh->whs : NULL;

#define L(x) ((json_int_t)HUB_STAT_GET(z->x))
    if (!z)
        return NULL;
    return json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "connected",
                     atomic_load(&z->up), "leases_held", L(held), "added",
                     L(added), "read", L(read), "claimed", L(claimed),
                     "acked", L(acked), "dropped", L(dropped),
                     "groups_destroyed", L(destroyed), "apps_retired",
                     L(released));
#undef L
}

/* /metrics */

static void label(char *out, size_t n, const struct srv_wh_ep *ep)
{
    size_t k = 0;
    const char *parts[2] = { ep->app->id, ep->shown };
    const char *names[2] = { "app", "url" };

    for (unsigned p = 0; p < 2 && k + 8 < n; p++) {
        k += (size_t)snprintf(out + k, n - k, "%s%s=\"", p ? "," : "",
                              names[p]);
        for (const char *s = parts[p]; *s && k + 4 < n; s++) {
            if (*s == '"' || *s == '\\')
                out[k++] = '\\';
            out[k++] = *s;
        }
        if (k + 2 < n)
            out[k++] = '"';
    }
    out[k < n ? k : n - 1] = '\0';
}

/* The atomic uint64 at off in ep. */
static uint64_t ep_u64(const struct srv_wh_ep *ep, size_t off)
{
    const atomic_uint_fast64_t *v =
        (const atomic_uint_fast64_t *)(const void *)((const char *)ep + off);

    return (uint64_t)atomic_load_explicit(v, memory_order_relaxed);
}

/* The value of a one-number row for ep. */
static uint64_t ep_value(const struct srv_wh_ep *ep, const struct row *r,
                         uint64_t wall)
{
    uint64_t oldest;

    switch (r->fmt) {
    case FMT_EP_AGE_S:
        oldest = ep_u64(ep, r->off);
        return oldest && wall > oldest ? (wall - oldest) / 1000 : 0;
    case FMT_EP_UP:
        return atomic_load((const atomic_bool *)(const void *)(
                   (const char *)ep + r->off))
                   ? 1
                   : 0;
    default:
        return ep_u64(ep, r->off);
    }
}

/* One endpoint's delivery latency histogram: cumulated buckets, then the
 * sum in seconds and the count. */
static void latency_series(const struct srv_wh_ep *ep, const struct row *r,
                           const char *lab,
                           void (*put)(void *b, const char *text), void *b)
{
    char line[10240];
    uint64_t cum = 0;

    for (unsigned j = 0; j <= N_LAT; j++) {
        char le[32];

        cum += ep_u64(ep, r->off + j * sizeof(ep->lat[0]));
        if (j < N_LAT)
            snprintf(le, sizeof(le), "%g", srv__wh_lat_bounds_s[j]);
        else
            snprintf(le, sizeof(le), "+Inf");
        snprintf(line, sizeof(line), "lubdub_%s_bucket{%s,le=\"%s\"} %" PRIu64
                                     "\n",
                 r->metric, lab, le, cum);
        put(b, line);
    }
    snprintf(line, sizeof(line),
             "lubdub_%s_sum{%s} %.3f\nlubdub_%s_count{%s} %" PRIu64 "\n",
             r->metric, lab, (double)LD(ep->lat_sum_ms) / 1000.0, r->metric,
             lab, (uint64_t)LD(ep->lat_count));
    put(b, line);
}

/* The series of row r while the sender wh runs (under its mu). */
static void row_series(struct srv_wh *wh, const struct row *r, uint64_t wall,
                       void (*put)(void *b, const char *text), void *b)
{
    char line[10240], lab[4096];

    switch (r->fmt) {
    case FMT_EVENTS_DROPPED:
        snprintf(line, sizeof(line), "lubdub_%s %" PRIu64 "\n", r->metric,
                 events_dropped(wh));
        put(b, line);
        return;
    case FMT_STREAM:
        if (!wh->whs)
            return;
        snprintf(line, sizeof(line), "lubdub_%s %" PRIu64 "\n", r->metric,
                 (uint64_t)HUB_STAT_GET(*(const uint64_t *)(const void *)(
                     (const char *)wh->whs + r->off)));
        put(b, line);
        return;
    default:
        break;
    }
    for (unsigned i = 0; i < wh->n_eps; i++) {
        const struct srv_wh_ep *ep = wh->eps[i];

        label(lab, sizeof(lab), ep);
        if (r->fmt == FMT_EP_LATENCY) {
            latency_series(ep, r, lab, put, b);
            continue;
        }
        snprintf(line, sizeof(line), "lubdub_%s{%s} %" PRIu64 "\n",
                 r->metric, lab, ep_value(ep, r, wall));
        put(b, line);
    }
}

void srv_wh_metrics(struct srv *srv, void (*put)(void *b, const char *text),
                    void *b)
{
    struct srv_wh *wh = srv__wh_running();
    uint64_t wall = srv__wh_wall_ms();
    char line[512];

    (void)srv;
    if (wh)
        pthread_mutex_lock(&wh->mu);
    for (size_t i = 0; i < N_ROWS; i++) {
        snprintf(line, sizeof(line),
                 "# HELP lubdub_%s %s\n# TYPE lubdub_%s %s\n", rows[i].metric,
                 rows[i].help, rows[i].metric, rows[i].type);
        put(b, line);
        if (wh)
            row_series(wh, &rows[i], wall, put, b);
    }
    if (wh)
        pthread_mutex_unlock(&wh->mu);
}
