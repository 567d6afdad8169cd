/*
 * hub/rest/chanhistory.c - GET /apps/{app_id}/channels/{name}/events
 * (hub/rest/chanhistory.h): what the channel's history (hub/channel/
 * history.h) holds, oldest first, for a backend that wants what its
 * clients may have missed (docs/PROTOCOL.md 6.2, docs/RECOVERY.md).
 *
 * Query: since=<wall-clock ms> or after=<origin>:<seq> (not both), and
 * limit=1..1000 (100). Neither since nor after: every event kept, that is
 * the app's ttl back from now, and complete then says whether any event
 * of that window was lost (trimmed by size or bytes).
 *
 * Clocks. The store stamps each entry with the loop clock (timer/clock.h:
 * CLOCK_MONOTONIC), which is no time a client knows; the API speaks
 * wall-clock ms since the epoch. So each request reads the offset between
 * the two once (CLOCK_REALTIME here: hub/ otherwise reads no clock by
 * itself, as hub/ops/tail.c does for its wall times) and converts since=
 * into the store's base and every time_ms out of it. The offset is kept
 * process-wide and replaced only when it moves by 2 ms or more (a clock
 * step, NTP slewing), so the same event keeps the same time_ms from one
 * request to the next and since=<a time_ms read earlier> includes that
 * event.
 *
 * Bounds: an answer holds at most limit (<= 1000) events, each its kept
 * frame's event name and data again (a frame is at most max_event_bytes of
 * data plus its name for an HTTP API event, at most --max-message for a
 * client event) plus its id and time; the frame references it takes are
 * dropped before it returns.
 *
 * Thread: the loop that received the request.
 */
#include "hub/rest/chanhistory.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub/app/app.h"
#include "hub/base/json.h"
#include "hub/base/query.h"
#include "hub/channel/history.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"
#include "hub/rest/histpage.h"
#include "hub/rest/wait.h"
#include "hub/wire/frame.h"
#include "timer/clock.h"

/* What the query asks, once checked. */
struct read_args {
    bool has_since, has_after;
    uint64_t since_ms;             /* wall clock */
    struct hub_history_id after;
    size_t limit;
};

/* The offset last used (wall-clock ms minus loop-clock ms); 0 until the
 * first request. */
static _Atomic int64_t wall_offset;

/* Below this much movement the kept offset stays (see the head comment). */
#define OFFSET_SLACK_NS INT64_C(2000000)

/* Wall-clock ms minus the loop clock's ms, read now (both in ns). */
static int64_t wall_offset_ms(const struct hub_clock *c)
{
    struct timespec ts;
    int64_t off_ns, kept;

    clock_gettime(CLOCK_REALTIME, &ts);
    off_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec -
             (int64_t)hub_clock_now_ns(c);
    kept = atomic_load_explicit(&wall_offset, memory_order_relaxed);
    if (kept && off_ns - kept * 1000000 < OFFSET_SLACK_NS &&
        kept * 1000000 - off_ns < OFFSET_SLACK_NS)
        return kept;
    kept = off_ns / 1000000;
    atomic_store_explicit(&wall_offset, kept, memory_order_relaxed);
    return kept;
}

/* s as a decimal integer of 1 to 18 digits (no sign, no space): 0, or
 * -EINVAL. */
static int parse_count(const char *s, uint64_t *out)
{
    size_t n = strlen(s);
    uint64_t v = 0;

    if (n == 0 || n > 18)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* The query's since=, after= and limit=; false with a 400 in out. */
static bool read_args_parse(const struct hub_query *q, struct read_args *a,
                            struct hub_rest_response *out)
{
    const char *since = hub_query_find(q, "since");
    const char *after = hub_query_find(q, "after");
    const char *limit = hub_query_find(q, "limit");
    uint64_t n = HUB_REST_HISTORY_LIMIT_DEFAULT;

    memset(a, 0, sizeof(*a));
    if (since && after) {
        hub_rest_reply_error(out, 400, "give since or after, not both");
        return false;
    }
    if (since && parse_count(since, &a->since_ms)) {
        hub_rest_reply_error(out, 400, "since must be a time in ms since "
                             "the epoch (a non-negative integer)");
        return false;
    }
    if (after &&
        hub_history_id_parse(after, strlen(after), &a->after)) {
        hub_rest_reply_error(out, 400, "after must be an event id "
                             "(<origin>:<seq>)");
        return false;
    }
    if (limit && (parse_count(limit, &n) || n < 1 ||
                  n > HUB_REST_HISTORY_LIMIT_MAX)) {
        hub_rest_reply_error(out, 400, "limit must be between 1 and %u",
                             HUB_REST_HISTORY_LIMIT_MAX);
        return false;
    }
    a->has_since = since != NULL;
    a->has_after = after != NULL;
    a->limit = (size_t)n;
    return true;
}

json_t *hub_rest_chanhistory_item(const struct hub_frame *f, const char *id,
                                  uint64_t time_ms)
{
    return hub_rest_chanhistory_item_text(
        (const char *)hub_frame_data(f) + (f->len - f->payload_len),
        f->payload_len, id, time_ms);
}

json_t *hub_rest_chanhistory_item_text(const char *p, size_t len,
                                       const char *id, uint64_t time_ms)
{
    json_t *root = json_loadb(p, len, JSON_ALLOW_NUL, NULL);
    json_t *ev = json_object_get(root, "event");
    json_t *d = json_object_get(root, "data");
    json_t *data = NULL, *item = NULL;
    char *text;

    if (!json_is_string(ev) || !d)
        goto out;
    if (json_is_string(d)) {
        data = json_incref(d);
    } else {
        /* The very text the frame holds: the hub relays a client event's
         * data as jansson's compact encoding of it (hub/wire/
         * client_event.h), which this re-encoding reproduces. */
        text = hub_json_dumps(d, JSON_COMPACT | JSON_ENCODE_ANY);
        data = text ? json_stringn_nocheck(text, strlen(text)) : NULL;
        free(text);
        if (!data)
            goto out;
    }
    item = json_pack("{s:s,s:O,s:o,s:I}", "id", id, "event", ev, "data",
                     data, "time_ms", (json_int_t)time_ms);
out:
    json_decref(root);
    return item;
}

/* The answer's events: one item per kept event, time_ms moved to the wall
 * clock by off; NULL when out of memory. */
static json_t *events_json(const struct hub_history_events *ev, int64_t off)
{
    json_t *arr = json_array();
    char id[HUB_HISTORY_ID_MAX + 1];

    for (size_t i = 0; arr && i < ev->n; i++) {
        const struct hub_history_event *e = &ev->ev[i];

        snprintf(id, sizeof(id), "%s:%" PRIu64, e->id.origin, e->id.seq);
        if (json_array_append_new(arr, hub_rest_chanhistory_item(
                                           e->f, id,
                                           (uint64_t)((int64_t)e->time_ms +
                                                      off)))) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

/* The store's since for a: since= moved to the loop clock by off; neither
 * since= nor after=: the oldest time an unexpired entry can have. */
static uint64_t store_since(const struct read_args *a, uint64_t now_ms,
                            uint64_t ttl_ms, int64_t off)
{
    if (a->has_since)
        return (int64_t)a->since_ms > off
                   ? (uint64_t)((int64_t)a->since_ms - off) : 0;
    if (a->has_after)
        return 0;
    return now_ms > ttl_ms ? now_ms - ttl_ms + 1 : 0;
}

_Static_assert(sizeof(((struct hub_hist_read *)0)->after_origin) >=
                   sizeof(((struct hub_history_id *)0)->origin),
               "an after= origin fits the read");

/* In a cluster: the read of the channel's stream, which the bus posts
 * back to the loop as rd.node; rd first (hub_hist_read_free() frees the
 * whole). */
struct cl_read {
    struct hub_hist_read rd;
    struct hub_rest_wait *w;
    struct read_args a;
};

/* The page of the read k, as the one-node answer makes it. */
static void cl_finish(struct hub_rest_wait *w, struct hub_rest_response *out)
{
    struct cl_read *k = w->priv;
    const struct hub_hist_read *rd = &k->rd;
    struct hub_histpage_args pa = {
        .has_since = k->a.has_since, .has_after = k->a.has_after,
        .since_ms = k->a.since_ms, .after_origin = k->a.after.origin,
        .after_seq = k->a.after.seq, .limit = k->a.limit,
        .ttl_ms = w->app->history_ttl_ms,
    };
    size_t *idx, n;
    json_t *list;
    bool complete = false;
    char id[HUB_HIST_ORIGIN_MAX + 24];

    if (rd->rc) {
        hub_rest_reply_error(out, 503, "history unavailable: reading the "
                             "channel's stream in Redis failed");
        return;
    }
    idx = calloc(k->a.limit, sizeof(*idx));
    list = idx ? json_array() : NULL;
    n = idx ? hub_histpage_select(rd, &pa, idx, &complete) : 0;
    for (size_t i = 0; list && i < n; i++) {
        const struct hub_hist_entry *e = &rd->e[idx[i]];

        snprintf(id, sizeof(id), "%s:%" PRIu64, e->origin, e->seq);
        if (json_array_append_new(list, hub_rest_chanhistory_item_text(
                                            e->data, e->len, id,
                                            e->time_ms))) {
            json_decref(list);
            list = NULL;
        }
    }
    free(idx);
    if (!list) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    hub_rest_reply_json(out, 200, json_pack("{s:o,s:b}", "events", list,
                                            "complete", complete));
}

static void cl_release(struct hub_rest_wait *w)
{
    hub_hist_read_free(w->priv);
}

static const struct hub_rest_wait_ops cl_wait = { cl_finish, cl_release };

/* The read is in: the wait, which now owns it, answers. */
static void cl_run(struct hub_inbox_node *node, struct hub_loop *l,
                   uint64_t now_ms)
{
    struct cl_read *k = hub_container_of(node, struct cl_read, rd.node);

    (void)l;
    (void)now_ms;
    k->w->priv = k;
    hub_rest_wait_settle(k->w, 0);
}

/* Dropped with the loops: the wait only frees itself. */
static void cl_drop(struct hub_inbox_node *node)
{
    struct cl_read *k = hub_container_of(node, struct cl_read, rd.node);

    k->w->priv = k;
    hub_rest_wait_settle(k->w, -ECANCELED);
}

static const struct hub_inbox_ops cl_ops = { cl_run, cl_drop };

/*
 * The cluster's answer: a wait (counted in rest_waiting, as a directory
 * read's) for one read of the channel's stream and its last-ids hash
 * (server/redis/lua/history_read.lua), which the bus answers within the
 * backplane's ping timeout at most (Redis away: -EIO, 503). What it holds
 * until then: the read (at most limit entries, each a kept frame's
 * payload) and the wait; one request of a connection at a time.
 */
static void cluster_get(const struct hub_rest_req *r, const char *name,
                        size_t len, const struct read_args *a,
                        struct hub_rest_response *out)
{
    struct cl_read *k;
    struct hub_rest_wait *w;

    if (!r->call->answer) {
        hub_rest_reply_error(out, 503, "history is read from Redis in a "
                             "cluster, which this request cannot wait for");
        return;
    }
    k = calloc(1, sizeof(*k));
    w = k ? hub_rest_wait_new(r->l, r->app, r->call, &cl_wait, 0) : NULL;
    if (!w || !(k->rd.name = strndup(name, len))) {
        if (w)
            hub_rest_wait_free(w);
        hub_hist_read_free(k ? &k->rd : NULL);
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    k->rd.node.ops = &cl_ops;
    k->rd.loop = r->l;
    k->rd.app = r->app->index;
    k->rd.len = len;
    k->rd.entries = true;
    /* Only the page's entries cross from Redis (the script scans the
     * stream there): not a whole stream of up to 100,000 entries. */
    k->rd.page = a->has_after ? 'a' : a->has_since ? 't' : 'w';
    k->rd.count = a->limit;
    strcpy(k->rd.after_origin, a->after.origin);
    k->rd.after_seq = a->after.seq;
    k->rd.since_ms = a->since_ms;
    k->rd.ttl_ms = r->app->history_ttl_ms;
    k->w = w;
    k->a = *a;
    if (hub_bus_history_read(r->l->hub, &k->rd)) {
        hub_rest_wait_free(w);
        hub_hist_read_free(&k->rd);
        hub_rest_reply_error(out, 503, "history unavailable: the channel's "
                             "stream in Redis cannot be read now");
        return;
    }
    hub_rest_wait_hold(w, r->call, out);
}

void hub_rest_chanhistory_get(const struct hub_rest_req *r, const char *name,
                              size_t len, struct hub_rest_response *out)
{
    const struct hub_app *app = r->app;
    struct hub_history *hh = hub_history_of(r->l->hub);
    struct hub_history_events ev;
    struct read_args a;
    uint64_t now_ms;
    int64_t off;
    json_t *list;
    bool complete;
    int rc;

    if (!hh || !app->history) {
        hub_rest_reply_error(out, 404, "history is not enabled for this app");
        return;
    }
    if (!hub_app_history_on(app, name, len)) {
        hub_rest_reply_error(out, 404,
                             "history is not enabled for this channel");
        return;
    }
    if (!read_args_parse(r->query, &a, out))
        return;
    if (hub_bus_remote(r->l->hub)) {
        /* This node's ring lacks what other nodes took in: only the
         * channel's stream in Redis has it all. */
        cluster_get(r, name, len, &a, out);
        return;
    }
    now_ms = hub_clock_now_ms(r->l->clock);
    off = wall_offset_ms(r->l->clock);
    rc = hub_history_read(hh, app->index, name, len,
                          a.has_after ? &a.after : NULL,
                          store_since(&a, now_ms, app->history_ttl_ms, off),
                          a.limit, now_ms, app->history_ttl_ms, &ev,
                          &complete);
    if (rc && rc != -ENOENT) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    list = events_json(&ev, off);
    hub_history_events_free(&ev);
    if (!list) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    hub_rest_reply_json(out, 200, json_pack("{s:o,s:b}", "events", list,
                                            "complete", complete));
}
