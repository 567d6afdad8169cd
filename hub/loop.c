/*
 * hub/loop.c - loops, the hub, the heartbeat scan and the drain.
 *
 * The heartbeat is a guarded fixed-delay task (timer/task.h). One run walks
 * the shard in slices of cfg->heartbeat_slice sessions; between slices the
 * server services I/O. A session silent for >= ping_interval gets a ping
 * queued and its pong deadline armed.
 */
#include "hub/loop.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hub/backplane.h"
#include "hub/chanmap.h"

static void backplane_end(const struct hub_backplane *bp)
{
    if (bp->dir->destroy)
        bp->dir->destroy(bp->dir_impl);
    if (bp->bus->destroy)
        bp->bus->destroy(bp->bus_impl);
}

struct hub *hub_create_with(const struct hub_config *cfg,
                            const struct hub_clock *clock,
                            const struct hub_backplane *bp)
{
    struct hub *h = calloc(1, sizeof(*h));

    if (!h)
        return NULL;
    assert(bp && bp->dir && bp->bus);
    h->cfg = cfg;
    h->clock = clock;
    h->bp = malloc(sizeof(*h->bp));
    h->app_sessions = calloc(cfg->n_apps ? cfg->n_apps : 1,
                             sizeof(*h->app_sessions));
    if (!h->bp || !h->app_sessions) {
        free(h->bp);
        free(h->app_sessions);
        free(h);
        return NULL;
    }
    *h->bp = *bp;
    for (unsigned i = 0; i < cfg->n_apps; i++)
        atomic_init(&h->app_sessions[i], 0);
    atomic_init(&h->draining, false);
    atomic_init(&h->stopping, false);
    atomic_init(&h->sessions, 0);
    h->started_ms = hub_clock_now_ms(clock);
    return h;
}

void hub_destroy(struct hub *h)
{
    if (!h)
        return;
    backplane_end(h->bp);
    free(h->bp);
    free(h->app_sessions);
    free(h);
}

uint64_t hub_loop_random(struct hub_loop *l)
{
    /* xorshift64*: jitter and socket ids need spread, not secrecy. */
    uint64_t x = l->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    l->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static uint64_t heartbeat_period(const struct hub_config *cfg)
{
    uint64_t p = cfg->heartbeat_interval_ms;

    if (!p) {
        p = cfg->ping_interval_ms / 5;
        if (p > 1000)
            p = 1000;
    }
    if (p < cfg->tick_ms)
        p = cfg->tick_ms;
    return p;
}

static int heartbeat_slice(struct hub_task *t, uint64_t now_ms, unsigned slice,
                           void *arg)
{
    struct hub_loop *l = arg;
    struct hub_shard *sh = &l->shard;
    uint32_t n = l->cfg->heartbeat_slice ? l->cfg->heartbeat_slice : 4096;
    uint32_t end;
    uint64_t threshold;
    int failures = 0;

    (void)t;
    if (slice == 0)
        sh->cursor = 0;
    end = sh->cursor + n < sh->count ? sh->cursor + n : sh->count;
    if (now_ms < l->cfg->ping_interval_ms) {
        sh->cursor = end;
        return end < sh->count ? HUB_TASK_MORE : HUB_TASK_DONE;
    }
    threshold = now_ms - l->cfg->ping_interval_ms;
    for (uint32_t i = sh->cursor; i < end; i++) {
        struct hub_session *s;
        bool armed;

        if (sh->slots[i].last_rx_ms > threshold)
            continue;
        s = sh->slots[i].s;
        if (s->ping_outstanding || s->state != HUB_SESSION_OPEN)
            continue;
        /* Still armed after an earlier pong: re-armed, not one more. */
        armed = hub_timer_is_armed(&s->pong_timer);
        if (hub_wheel_start(l->wheel, &s->pong_timer, now_ms,
                            (int64_t)l->cfg->pong_timeout_ms)) {
            failures++;
            continue;
        }
        if (!armed)
            HUB_STAT_ADD(l->stats.pong_armed, 1);
        s->ping_outstanding = true;
        s->ping_due = true;
        s->ping_sent_ms = now_ms;
        s->ping_sent_ns = hub_clock_now_ns(l->clock);
        if (!s->want_writable) {
            s->want_writable = true;
            l->ops->want_writable(s->conn);
        }
    }
    sh->cursor = end;
    if (failures)
        return -EIO;
    return end < sh->count ? HUB_TASK_MORE : HUB_TASK_DONE;
}

static void drain_timer_cb(struct hub_timer *t, uint64_t now_ms);
static const struct hub_inbox_ops drain_ops;

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
    l->drain_node.ops = &drain_ops;
    l->now_ms = now_ms;
    hub_timer_init(&l->drain_timer, drain_timer_cb);
    if (getrandom(&l->rng, sizeof(l->rng), 0) != sizeof(l->rng) || !l->rng)
        l->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)l;
    hub_task_init(&l->heartbeat, l->wheel, h->clock, heartbeat_slice, l);
    hub_task_start(&l->heartbeat, now_ms, heartbeat_period(h->cfg),
                   heartbeat_period(h->cfg));
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
    /* Nodes still queued may hold references (a publication's frame):
     * each releases its own, without running. */
    for (n = hub_inbox_take_all(&l->inbox); n; n = next) {
        next = n->next;
        assert(n->ops && n->ops->drop);
        n->ops->drop(n);
    }
    hub_chanmap_destroy(l->chans);
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

/* Drain: close every session with 4200, jittered over the window, then
 * stop when the shard is empty or the deadline passes. */
static void start_drain(struct hub_loop *l, uint64_t now_ms)
{
    uint64_t spread;
    const struct hub_config *cfg = l->cfg;

    if (l->draining)
        return;
    l->draining = true;
    hub_task_stop(&l->heartbeat);
    l->drain_deadline_ms = now_ms + cfg->drain_timeout_ms;
    /* Leave room for the close handshake (and its timeout) at the end. */
    spread = cfg->drain_timeout_ms > cfg->close_timeout_ms + 500
                 ? cfg->drain_timeout_ms - cfg->close_timeout_ms - 500
                 : 0;
    for (uint32_t i = 0; i < l->shard.count; i++) {
        struct hub_session *s = l->shard.slots[i].s;

        if (s->state != HUB_SESSION_OPEN)
            continue;
        s->draining = true;
        hub_wheel_start(l->wheel, &s->idle_timer, now_ms,
                        spread ? (int64_t)(hub_loop_random(l) % spread) : 0);
    }
    hub_wheel_start(l->wheel, &l->drain_timer, now_ms, 0);
}

static void drain_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_loop *l = hub_container_of(t, struct hub_loop, drain_timer);

    if (l->shard.count == 0 || now_ms >= l->drain_deadline_ms) {
        l->stop = true;
        if (l->wake)
            l->wake(l->wake_ctx);
        return;
    }
    hub_wheel_start(l->wheel, t, now_ms, (int64_t)l->cfg->tick_ms);
}

/* The drain order (hub_start_drain): the node is part of the loop. */
static void drain_run(struct hub_inbox_node *n, struct hub_loop *l,
                      uint64_t now_ms)
{
    (void)n;
    start_drain(l, now_ms);
}

static void drain_drop(struct hub_inbox_node *n)
{
    (void)n; /* Embedded in the loop: nothing to release. */
}

static const struct hub_inbox_ops drain_ops = {
    .run = drain_run,
    .drop = drain_drop,
};

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

void hub_start_drain(struct hub *h)
{
    /* Each loop's drain node may sit in its inbox only once. */
    if (atomic_exchange(&h->draining, true))
        return;
    for (unsigned i = 0; i < h->n_loops; i++)
        hub_loop_post(h->loops[i], &h->loops[i]->drain_node);
}

const struct hub_app *hub_find_app_by_key(const struct hub *h,
                                          const char *key, size_t len)
{
    return hub_app_find_by_key(h->cfg->apps, h->cfg->n_apps, key, len);
}
