/*
 * hub/webhook/engine.h - the webhook sender thread's engine: it takes the
 * events popped from the queue (hub/webhook/queue.h) and calls back with
 * one encoded body per (webhook, batch).
 *
 * Thread: one engine on one thread (the sender's).
 */
#ifndef HUB_WH_ENGINE_H
#define HUB_WH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/webhook/webhook.h"

struct hub_app;

/*
 * The engine (sender thread). Edge events pass through the delay: a
 * channel_vacated / member_removed waits delay_ms and is cancelled,
 * together with the occupied / added that would follow it, when the
 * channel is occupied / the user rejoins before then. What passes goes
 * into the app's batch; a batch is flushed after HUB_WH_BATCH_MS or at
 * HUB_WH_BATCH_EVENTS events (at once when the app's batching is off),
 * and each webhook of the app gets one body with the events that match it.
 */
struct hub_wh_out {
    unsigned app, hook;        /* app index, webhook index in the app */
    char *body;                /* owned by the callee from here on */
    size_t len;
    unsigned n_events;
    const char *batch_id;      /* idempotency key; borrowed for the call */
};

typedef void hub_wh_emit_fn(void *ctx, struct hub_wh_out *out);

struct hub_wh_engine;

/*
 * apps borrowed for the engine's life. boot is a random prefix of every
 * event and batch id (unique across restarts). NULL when out of memory.
 */
struct hub_wh_engine *hub_wh_engine_create(const struct hub_app *apps,
                                           unsigned n_apps, uint64_t delay_ms,
                                           uint64_t boot, uint64_t now_ms,
                                           hub_wh_emit_fn *emit, void *ctx);
/*
 * The edges come from a directory shared by several nodes (--redis): each
 * edge is decided once, on one node, so a closing edge whose opening one
 * another node sent passes (at once: the delay and its cancelling work on
 * the pairs one node saw both halves of). Before the first feed.
 */
void hub_wh_engine_set_shared(struct hub_wh_engine *e, bool shared);
void hub_wh_engine_destroy(struct hub_wh_engine *e);
/*
 * A reload: every open batch is flushed under the old apps first (their
 * webhooks and filters made them), then apps[0..n_apps) (borrowed from
 * here on; n_apps never below the old count: indices are kept) decide
 * new events. Delayed edges keep waiting and go into the new batches.
 * 0, or -ENOMEM with nothing changed.
 */
int hub_wh_engine_set_apps(struct hub_wh_engine *e, const struct hub_app *apps,
                           unsigned n_apps, uint64_t wall_ms);
/* Feed a list of events (taken). wall_ms is the time_ms of a batch. */
void hub_wh_engine_feed(struct hub_wh_engine *e, struct hub_wh_event *list,
                        uint64_t now_ms);
/* Run due delays and batch flushes. Returns ms until the next is due
 * (UINT64_MAX when none). */
uint64_t hub_wh_engine_advance(struct hub_wh_engine *e, uint64_t now_ms,
                               uint64_t wall_ms);
/* Shutdown: closing edges still in their delay are released, then every
 * open batch is flushed. */
void hub_wh_engine_flush(struct hub_wh_engine *e, uint64_t wall_ms);

struct hub_wh_engine_stats {
    uint64_t cancelled;        /* delayed edges reversed in the window */
    uint64_t delayed;          /* delayed edges waiting now */
    uint64_t events;           /* events put into batches */
    uint64_t oom;              /* events lost to out of memory */
};
void hub_wh_engine_get_stats(const struct hub_wh_engine *e,
                             struct hub_wh_engine_stats *out);
/*
 * How many more events may wait in the queue before the sender must feed
 * them: the room left in the fullest open batch (they could all be its),
 * or 0 when the next event must be fed at once: no batch is open (the
 * event would open one and start its window) or an app with webhooks
 * sends without batching.
 */
unsigned hub_wh_engine_room(const struct hub_wh_engine *e);

#endif
