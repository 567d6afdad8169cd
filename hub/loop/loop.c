/*
 * hub/loop/loop.c - loops and the hub: their lifetime, the wheel's service and
 * the inbox. The heartbeat scan is hub/loop/heartbeat.c, the drain
 * hub/loop/drain.c, the queue budget hub/loop/budget.c; none of them, nor this file,
 * writes a session's fields: each asks the session (hub/loop/session.h).
 * The features are reached only through their table of hooks
 * (hub/loop/feature.h): the hub and each loop walk it at creation and at
 * the end, and keep each feature's state in an opaque slot.
 */
#include "hub/loop/loop.h"
#include "hub/loop/compress.h"
#include "hub/loop/resume.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hub/loop/backplane.h"
#include "hub/loop/chanmap.h"
#include "hub/loop/drain.h"
#include "hub/loop/heartbeat.h"

static void backplane_end(const struct hub_backplane *bp)
{
    if (bp->dir->destroy)
        bp->dir->destroy(bp->dir_impl);
    if (bp->bus->destroy)
        bp->bus->destroy(bp->bus_impl);
}

/* Undo the hub_init of the first n features, last first. */
static void features_fini(struct hub *h, unsigned n)
{
    while (n--)
        if (h->features[n]->hub_fini)
            h->features[n]->hub_fini(h, h->feature_state[n]);
}

static void loop_features_fini(struct hub_loop *l, unsigned n)
{
    const struct hub *h = l->hub;

    while (n--)
        if (h->features[n]->loop_fini)
            h->features[n]->loop_fini(l, l->feature_state[n]);
}

struct hub *hub_create_core(const struct hub_config *cfg,
                            const struct hub_clock *clock,
                            const struct hub_backplane *bp,
                            const struct hub_feature *const *features,
                            unsigned n)
{
    struct hub *h;
    unsigned i;

    assert(bp && bp->dir && bp->bus);
    if (n > HUB_MAX_FEATURES)
        return NULL;
    h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->cfg = cfg;
    h->clock = clock;
    h->features = features;
    h->n_features = n;
    h->bp = malloc(sizeof(*h->bp));
    atomic_init(&h->apps, hub_apptab_borrow(cfg->apps, cfg->n_apps));
    if (!h->bp || !atomic_load(&h->apps))
        goto fail;
    *h->bp = *bp;
    atomic_init(&h->draining, false);
    atomic_init(&h->stopping, false);
    atomic_init(&h->sessions, 0);
    h->started_ms = hub_clock_now_ms(clock);
    for (i = 0; i < n; i++)
        if (features[i]->hub_init &&
            features[i]->hub_init(h, &h->feature_state[i]) < 0) {
            features_fini(h, i);
            goto fail;
        }
    return h;
fail:
    free(h->bp);
    hub_apptab_free(atomic_load(&h->apps), true);
    free(h);
    return NULL;
}

void hub_destroy(struct hub *h)
{
    if (!h)
        return;
    backplane_end(h->bp);
    features_fini(h, h->n_features);
    free(h->bp);
    /* Every loop is gone, so every retired table was freed by its last
     * node; the current one holds every index's live struct. */
    hub_apptab_free(atomic_load(&h->apps), true);
    free(h);
}

void *hub_feature_state(const struct hub *h, const struct hub_feature *f)
{
    for (unsigned i = 0; i < h->n_features; i++)
        if (h->features[i] == f)
            return h->feature_state[i];
    return NULL;
}

void *hub_loop_feature_state(const struct hub_loop *l,
                             const struct hub_feature *f)
{
    const struct hub *h = l->hub;

    for (unsigned i = 0; i < h->n_features; i++)
        if (h->features[i] == f)
            return l->feature_state[i];
    return NULL;
}

struct hub_loop *hub_loop_create(struct hub *h,
                                 const struct hub_transport_ops *ops,
                                 void (*wake)(void *ctx), void *wake_ctx,
                                 uint64_t now_ms)
{
    struct hub_loop *l;

    if (h->n_loops >= HUB_MAX_LOOPS)
        return NULL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->hub = h;
    l->id = h->n_loops;
    l->cfg = h->cfg;
    l->clock = h->clock;
    l->ops = ops;
    l->wake = wake;
    l->wake_ctx = wake_ctx;
    l->wheel = hub_wheel_create(0, h->cfg->tick_ms, now_ms);
    l->chans = hub_chanmap_create();
    if (!l->wheel || !l->chans) {
        hub_wheel_destroy(l->wheel);
        hub_chanmap_destroy(l->chans);
        free(l);
        return NULL;
    }
    hub_wheel_set_clock(l->wheel, h->clock);
    hub_shard_init(&l->shard);
    hub_inbox_init(&l->inbox);
    hub_drain_init(l);
    l->now_ms = now_ms;
    if (getrandom(&l->rng, sizeof(l->rng), 0) != sizeof(l->rng) || !l->rng)
        l->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)l;
    for (unsigned i = 0; i < h->n_features; i++)
        if (h->features[i]->loop_init &&
            h->features[i]->loop_init(l, &l->feature_state[i]) < 0) {
            loop_features_fini(l, i);
            hub_shard_fini(&l->shard);
            hub_chanmap_destroy(l->chans);
            hub_wheel_destroy(l->wheel);
            free(l);
            return NULL;
        }
    hub_heartbeat_start(l, now_ms);
    h->loops[h->n_loops++] = l;
    return l;
}

void hub_loop_set_heartbeat_yield(struct hub_loop *l, hub_task_yield_fn *fn)
{
    hub_task_set_yield(&l->heartbeat, fn);
}

void hub_loop_destroy(struct hub_loop *l)
{
    struct hub_inbox_node *n, *next;

    if (!l)
        return;
    hub_task_stop(&l->heartbeat);
    hub_wheel_stop(l->wheel, &l->drain_timer);
    loop_features_fini(l, l->hub->n_features);
    /* Nodes still queued may hold references (a publication's frame):
     * each releases its own, without running. */
    for (n = hub_inbox_take_all(&l->inbox); n; n = next) {
        next = n->next;
        assert(n->ops && n->ops->drop);
        n->ops->drop(n);
    }
    /* A read pass always ends its batch; nothing is held here. */
    assert(!l->defer.k);
    for (unsigned i = 0; i < l->defer.k; i++)
        hub_frame_unref(l->defer.f[i]);
    free(l->defer.name);
    hub_loop_compress_fini(l);
    hub_loop_resume_fini(l);
    hub_chanmap_destroy(l->chans);
    hub_pending_fini(&l->pending);
    hub_shard_fini(&l->shard);
    hub_wheel_destroy(l->wheel);
    free(l);
}

void hub_loop_publish_stats(struct hub_loop *l)
{
    struct hub_wheel_stats ws;
    struct hub_task_stats ts;
    struct hub_loop_stats *st = &l->stats;

    hub_wheel_get_stats(l->wheel, &ws);
    hub_task_get_stats(&l->heartbeat, &ts);
    HUB_STAT_SET(st->wheel_pending, ws.pending);
    HUB_STAT_SET(st->wheel_fired, ws.fired);
    HUB_STAT_SET(st->wheel_cancelled, ws.cancelled);
    HUB_STAT_SET(st->wheel_last_advance_ns, ws.last_advance_ns);
    HUB_STAT_SET(st->wheel_max_advance_ns, ws.max_advance_ns);
    HUB_STAT_SET(st->wheel_max_late_ms, ws.max_lateness_ms);
    for (int i = 0; i < 5; i++)
        HUB_STAT_SET(st->wheel_late[i], ws.late_hist[i]);
    HUB_STAT_SET(st->wheel_late_sum_ms, ws.lateness_sum_ms);
    if (ts.runs != HUB_STAT_GET(st->hb_runs))
        hub_hist_add(&st->hb_scan, ts.last_run_ns / 1000);
    HUB_STAT_SET(st->hb_runs, ts.runs);
    HUB_STAT_SET(st->hb_failures, ts.failures);
    HUB_STAT_SET(st->hb_last_scan_ns, ts.last_run_ns);
    HUB_STAT_SET(st->hb_max_scan_ns, ts.max_run_ns);
    HUB_STAT_SET(st->hb_last_slice_ns, ts.last_slice_ns);
    HUB_STAT_SET(st->hb_max_slice_ns, ts.max_slice_ns);
}

uint64_t hub_loop_service(struct hub_loop *l, uint64_t now_ms)
{
    struct hub_wheel_stats ws;

    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    hub_wheel_advance(l->wheel, now_ms);
    hub_wheel_get_stats(l->wheel, &ws);
    if (ws.last_advance_ns)
        hub_hist_add(&l->stats.wheel_advance, ws.last_advance_ns / 1000);
    hub_loop_publish_stats(l);
    return hub_wheel_next_due_ms(l->wheel, now_ms);
}

void hub_loop_note_stall(struct hub_loop *l, uint64_t gap_ms)
{
    HUB_STAT_ADD(l->stats.stalls, 1);
    HUB_STAT_MAX(l->stats.max_stall_ms, gap_ms);
}

void hub_loop_drain_inbox(struct hub_loop *l, uint64_t now_ms)
{
    struct hub_inbox_node *n, *next;
    uint64_t depth = 0;

    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    for (n = hub_inbox_take_all(&l->inbox); n; n = next) {
        next = n->next;
        depth++;
        assert(n->ops && n->ops->run);
        n->ops->run(n, l, now_ms);
    }
    if (depth) {
        HUB_STAT_SET(l->stats.inbox_depth, depth);
        HUB_STAT_MAX(l->stats.inbox_max, depth);
    }
}

