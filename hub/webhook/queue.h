/*
 * hub/webhook/queue.h - the queue between the loops (and the directory)
 * and the webhook sender thread, and the producers that fill it.
 *
 * Who calls what:
 * - The directory reports channel and presence edges through its edge
 *   hook (hub/loop/backplane.h), under its own lock, in the order the counts
 *   moved: hub_wh_dir_edge() is that hook. Loop threads add client
 *   events (hub_wh_client_event) and cache misses (hub_wh_cache_miss).
 *   All of them only allocate and push under the queue's mutex (a leaf
 *   lock, never held across anything else): a loop never waits. A full
 *   queue drops the event and counts it.
 * - The sender thread pops the queue (hub_wh_queue_pop_all) and feeds the
 *   engine (hub/webhook/engine.h).
 *
 * Thread: any.
 */
#ifndef HUB_WH_QUEUE_H
#define HUB_WH_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/webhook/webhook.h"

struct hub;
struct hub_app;

/* How late the sender may take a queued event while it has a batch open
 * (hub_wh_queue_set_room): the engine's wheel tick, so batch windows and edge
 * delays keep the precision they had. */
#define HUB_WH_LAZY_MS 10
/* The queue from the loops to the sender: events and bytes at most. */
#define HUB_WH_QUEUE_EVENTS 100000
#define HUB_WH_QUEUE_BYTES (32u << 20)

/*
 * The queue between the loops (and the directory) and the sender thread.
 * Bounded by cap events and max_bytes bytes (HUB_WH_QUEUE_BYTES); a push
 * past either frees the event and counts it in dropped.
 */
struct hub_wh_wants {
    struct hub_wh_wants *older;   /* the ones it replaced */
    unsigned n;
    unsigned types[];              /* HUB_WH_BIT mask per app index */
};

struct hub_wh_queue {
    pthread_mutex_t mu;
    struct hub_wh_event *head, **tail;
    uint32_t len, cap;             /* events queued, and at most */
    size_t bytes, max_bytes;       /* their size, and at most */
    /* The types each app wants, read by any thread without the lock. A
     * reload publishes a new array (hub_wh_queue_set_wants); the old ones stay
     * on the list until hub_wh_queue_fini, so a reader never sees one freed. */
    _Atomic(struct hub_wh_wants *) wants;
    void (*wake)(void *ctx);       /* any thread; must not block */
    void *wake_ctx;
    /* Under mu: 0, a push into an empty queue wakes the sender (the
     * default); n > 0, only the push that makes the queue n long does
     * (hub_wh_queue_set_room). */
    uint32_t room;
    atomic_uint_fast64_t enqueued, dropped;
};

int hub_wh_queue_init(struct hub_wh_queue *q, uint32_t cap,
                      const struct hub_app *apps, unsigned n_apps);
/* The types wanted become those of apps[0..n_apps) (the sender's copy
 * after a reload; index = app index). Any thread; 0 or -ENOMEM (the old
 * ones stay). */
int hub_wh_queue_set_wants(struct hub_wh_queue *q, const struct hub_app *apps,
                           unsigned n_apps);
/* Frees what is still queued. */
void hub_wh_queue_fini(struct hub_wh_queue *q);
/* Does app want events of type at all (any of its webhooks)? */
bool hub_wh_queue_wants(const struct hub_wh_queue *q, unsigned app,
                        unsigned type);
/* Push ev (taken in every case); 0 or -ENOSPC (dropped, counted). */
int hub_wh_queue_push(struct hub_wh_queue *q, struct hub_wh_event *ev);
/* Take everything queued, oldest first; NULL when empty. */
struct hub_wh_event *hub_wh_queue_pop_all(struct hub_wh_queue *q);
/*
 * The sender, before it sleeps: room 0 = wake me on the first event (it
 * must be handled at once); room n > 0 = I look at the queue by myself
 * within HUB_WH_LAZY_MS, wake me earlier only when n events are queued
 * (hub_wh_engine_room: then a batch may be full). Returns how many events
 * are queued now: a push made before the call did not wake the sender
 * when it should have under the new setting, so it must not sleep when
 * that is >= room (or > 0 with room 0).
 */
uint32_t hub_wh_queue_set_room(struct hub_wh_queue *q, uint32_t room);

/* The directory's edge hook (ctx = the struct hub_wh_queue *). */
struct hub_dir_edge;
void hub_wh_dir_edge(void *ctx, const struct hub_dir_edge *e);

/*
 * Loop threads: a client event on a private or presence channel, and the
 * cache channel's cache_miss (for the cache-channel work: call it when a
 * subscription to a cache- channel finds nothing cached). Nothing happens
 * unless the hub has a webhook queue and the app wants the type.
 */
void hub_wh_client_event(struct hub *h, unsigned app,
                         const char *channel, size_t len,
                         const char *event, const char *data,
                         const char *socket_id, const char *user_id);
void hub_wh_cache_miss(struct hub *h, unsigned app, const char *channel,
                       size_t len);

#endif
