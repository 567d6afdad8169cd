/*
 * hub/loop/loop.h - the transport-agnostic half of an event loop, and the
 * process-wide hub that ties the loops together.
 *
 * A loop owns a registry shard, a timing wheel, a heartbeat task, a local
 * channel index, an inbox and an opaque slot per feature
 * (hub/loop/feature.h). server/ gives each loop a thread and an lws
 * context and calls in: hub_loop_service() from the wheel's timer,
 * hub_loop_drain_inbox() on every wakeup, and the session functions from
 * the WebSocket callbacks.
 *
 * The hub holds what is shared: the configuration, the apps, the loops,
 * the backplane (hub/loop/backplane.h): the channel directory (counts and
 * presence) and the bus that carries publications between loops, and the
 * features' hub-wide state, which only the features read.
 *
 * Thread: a loop's functions run on its thread, except hub_loop_post() and
 * hub_publish() (any thread) and the stats reads (relaxed atomics).
 */
#ifndef HUB_LOOP_H
#define HUB_LOOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hub/app/app.h"
#include "hub/app/apptab.h"
#include "hub/base/rng.h"
#include "hub/loop/feature.h"
#include "hub/loop/inbox.h"
#include "hub/loop/pending.h"
#include "hub/loop/publish.h"
#include "hub/loop/session.h"
#include "hub/loop/shard.h"
#include "hub/loop/stats.h"
#include "timer/clock.h"
#include "timer/task.h"
#include "timer/wheel.h"

#define HUB_MAX_LOOPS 64

struct hub_deflate;

struct hub_config {
    uint64_t tick_ms;              /* wheel tick */
    uint64_t ping_interval_ms;     /* ping sessions silent this long */
    uint64_t pong_timeout_ms;      /* then close 4201 */
    uint64_t idle_timeout_ms;      /* no data message: 4202; 0 = off */
    uint64_t close_timeout_ms;     /* kill a close never completed */
    uint64_t heartbeat_interval_ms; /* 0 = derived from ping_interval */
    uint64_t drain_timeout_ms;
    uint32_t activity_timeout_s;   /* advertised to clients */
    uint32_t max_message;          /* inbound bytes */
    uint32_t max_queue;            /* outbound queued bytes per session */
    uint64_t write_timeout_ms;     /* queued, nothing written: 4100; 0 = off */
    uint64_t max_queued_total;     /* outbound queued bytes, hub-wide; 0 = off */
    uint32_t max_subscriptions;    /* channels per connection; 0 = unlimited */
    uint32_t subscribe_rate;       /* (un)subscribes per second per
                                      connection, after a burst; 0 = off */
    uint64_t auth_window_s;        /* REST auth_timestamp window; 0 = off */
    /* Scale-out: 16 bits from the node id, folded into socket ids so that
     * they stay unique across nodes; 0 = one node (ids as before). */
    uint32_t node_tag;
    /* Cache channels and subscription counts (hub/channel/cache.h,
     * hub/channel/subcount.h): the defaults an app's own value (0) falls back to. */
    uint64_t cache_ttl_ms;         /* a cached event's life */
    uint64_t cache_max_bytes;      /* per app; 0 = no cap */
    uint64_t subscription_count_interval_ms; /* coalescing window */
    /* History (issue 35, hub/channel/history.h): the bound of everything
     * the history rings hold, hub-wide (entries and records); an app's
     * own history_max_bytes bounds it further. */
    uint64_t history_max_bytes;
    /* permessage-deflate (issue 34): offered to the sessions the read
     * bypass reads, when the app's own "compression" is true too; frames
     * of fewer wire bytes than compression_min_size go plain. */
    bool compression;
    uint32_t compression_min_size;
    /* What the protocol layer does at a session's fini (hub/pusher/pusher.h's
     * hub_pusher_hooks); NULL = nothing. Borrowed. */
    const struct hub_session_hooks *session_hooks;
    /* The apps at start: borrowed for the hub's life, n_apps entries,
     * apps[i].index == i. The hub's table starts from them; a reload
     * replaces the table (hub/loop/appswap.h), never these. */
    const struct hub_app *apps;
    unsigned n_apps;
};

struct hub_backplane;
struct hub_chanmap;
struct hub_chantab;
struct hub_wh_queue;

struct hub {
    const struct hub_config *cfg;  /* borrowed */
    const struct hub_clock *clock; /* borrowed */
    struct hub_loop *loops[HUB_MAX_LOOPS];
    unsigned n_loops;
    struct hub_backplane *bp;      /* owned copy; the fronts use it */
    atomic_bool draining;
    atomic_bool stopping;          /* teardown: publish nothing more */
    atomic_uint_fast32_t sessions; /* live, all loops (max_connections) */
    /* The app table (hub/app/apptab.h): read with hub_apps(), replaced by
     * hub_apps_publish() (hub/loop/appswap.h). Each index's live struct holds
     * its sessions (the per-app max_connections quota; counted when the
     * app key matched) and its REST rate buckets. */
    _Atomic(struct hub_apptab *) apps;
    uint64_t started_ms;
    /* The webhook queue (hub/webhook/queue.h), set by server/ when an app has
     * webhooks: before the loops start, or later by the reload that
     * brings the first ones (hence atomic: loops read it while the main
     * thread sets it once); NULL = none. Borrowed. */
    _Atomic(struct hub_wh_queue *) webhooks;
    /* The features (hub/loop/feature.h) the composition root gave, borrowed
     * for the hub's life, and each one's hub-wide state, index for index:
     * opaque here, read by the feature with hub_feature_state(). */
    const struct hub_feature *const *features;
    unsigned n_features;
    void *feature_state[HUB_MAX_FEATURES];
};

/* The current app table. Use it within one callback and keep no pointer
 * into it past the callback (hub/loop/appswap.h says why that is enough). */
static inline const struct hub_apptab *hub_apps(const struct hub *h)
{
    return atomic_load_explicit(&((struct hub *)h)->apps,
                                memory_order_acquire);
}

/* The live struct of an app index (stable for the hub's life). */
static inline struct hub_app_live *hub_app_live_of(const struct hub *h,
                                                   unsigned index)
{
    return hub_apps(h)->live[index];
}

struct hub_loop {
    struct hub *hub;
    unsigned id;
    const struct hub_config *cfg;
    const struct hub_clock *clock;
    const struct hub_transport_ops *ops;
    void (*wake)(void *ctx);       /* wake this loop from another thread */
    void *wake_ctx;
    struct hub_wheel *wheel;
    struct hub_task heartbeat;
    struct hub_shard shard;
    struct hub_chanmap *chans;
    struct hub_inbox inbox;
    struct hub_pending pending;    /* sessions with new output */
    struct hub_inbox_node drain_node;
    struct hub_loop_stats stats;
    uint64_t sid_counter;
    uint64_t rng;
    bool draining;
    bool stop;                     /* leave the service loop */
    uint64_t drain_deadline_ms;
    struct hub_timer drain_timer;  /* checks the drain's progress */
    /* The loop's clock as of its latest event (service, inbox, message,
     * delivery, write): coarse, for stamps that must not read the clock. */
    uint64_t now_ms;
    uint64_t evict_last_ms;        /* the latest eviction scan */
    struct hub_defer defer;        /* client events of the read in progress */
    /* permessage-deflate (hub/loop/compress.h): zlib's state and the
     * inflate buffer (max_message + 1 bytes), both from first use. */
    struct hub_deflate *deflate;
    char *inflate_buf;
    /* Recovery: the state of this loop's sessions that asked to resume,
     * keyed by session (hub/loop/resume.h); NULL until the first. */
    struct hub_chantab *resumes;
    /* The last history publication this loop took from its inbox (one
     * node's are all this node's, posted to every loop in seq order):
     * where a fresh subscription starts (hub_history_start). */
    uint64_t hist_seen;
    /* Each feature's state for this loop (hub_loop_feature_state()),
     * index for index with hub->features; opaque here. */
    void *feature_state[HUB_MAX_FEATURES];
};

/*
 * The hub with backplane bp (hub/loop/backplane.h: copied; on success the
 * hub owns its impls) and the n features of the table (borrowed for the
 * hub's life; at most HUB_MAX_FEATURES), each one's hub_init run in order.
 * Owned; NULL on failure (then the caller still owns bp's impls). clock
 * and cfg are borrowed for the hub's life. The composition root
 * (hub/hub.h: hub_create(), hub_create_with()) is its caller.
 */
struct hub *hub_create_core(const struct hub_config *cfg,
                            const struct hub_clock *clock,
                            const struct hub_backplane *bp,
                            const struct hub_feature *const *features,
                            unsigned n);
/* After every loop is destroyed; ends the backplane, then the features
 * (their hub_fini, in reverse order). */
void hub_destroy(struct hub *h);

/* f's hub-wide state in h (what its hub_init gave), NULL when h has no f. */
void *hub_feature_state(const struct hub *h, const struct hub_feature *f);
/* f's state for loop l (what its loop_init gave), NULL when none. */
void *hub_loop_feature_state(const struct hub_loop *l,
                             const struct hub_feature *f);

/* Create loop h->loops[h->n_loops++], each feature's loop_init run in
 * order; NULL on failure. */
struct hub_loop *hub_loop_create(struct hub *h,
                                 const struct hub_transport_ops *ops,
                                 void (*wake)(void *ctx), void *wake_ctx,
                                 uint64_t now_ms);
/* On the loop's thread, after every session is gone. */
void hub_loop_destroy(struct hub_loop *l);

/* Advance the wheel to now. Returns ms until it should be called again. */
uint64_t hub_loop_service(struct hub_loop *l, uint64_t now_ms);
/*
 * The driver found the loop stalled: gap_ms passed since the previous
 * hub_loop_service() where about a tick was due. Counted in the stats.
 */
void hub_loop_note_stall(struct hub_loop *l, uint64_t gap_ms);
/* Run everything in the inbox (any wakeup, even a spurious one). */
void hub_loop_drain_inbox(struct hub_loop *l, uint64_t now_ms);
/* Any thread: push n and wake the loop if it was idle. */
static inline void hub_loop_post(struct hub_loop *l, struct hub_inbox_node *n)
{
    if (hub_inbox_push(&l->inbox, n) && l->wake)
        l->wake(l->wake_ctx);
}
/* Any thread: ask every loop to drain (graceful shutdown). */
void hub_start_drain(struct hub *h);

/* The heartbeat task's yield hook calls this; the server sets it. */
void hub_loop_set_heartbeat_yield(struct hub_loop *l, hub_task_yield_fn *fn);

/* Copy wheel and heartbeat figures into the loop's stats (loop thread). */
void hub_loop_publish_stats(struct hub_loop *l);

/* n bytes joined or left this loop's send queues (loop thread): the
 * queued_bytes gauge, which the queue budget (hub/loop/budget.h) reads. */
static inline void hub_loop_queued_add(struct hub_loop *l, uint64_t n)
{
    HUB_STAT_ADD(l->stats.queued_bytes, n);
}

static inline void hub_loop_queued_sub(struct hub_loop *l, uint64_t n)
{
    HUB_STAT_ADD(l->stats.queued_bytes, -n);
}

static inline uint64_t hub_loop_queued(const struct hub_loop *l)
{
    return l->stats.queued_bytes;
}

/*
 * Write every session of l's pending list: write(ctx, s) for each, the
 * transport's corked write (server/). Call after the read pass that
 * flush_soon was asked in.
 */
static inline void hub_loop_flush(struct hub_loop *l,
                                  void (*write)(void *ctx,
                                                struct hub_session *s),
                                  void *ctx)
{
    hub_pending_flush(&l->pending, write, ctx);
}

/* A small per-loop random number (jitter, socket ids). Loop thread.
 * xorshift64*: jitter and socket ids need spread, not secrecy; a few
 * instructions on the loop's own state, so inline. */
static inline uint64_t hub_loop_random(struct hub_loop *l)
{
    return hub_xorshift64s(&l->rng);
}

#endif
