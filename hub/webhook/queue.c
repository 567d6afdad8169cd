/*
 * hub/webhook/queue.c - the bounded queue from the loops (and the
 * directory's edge hook) to the webhook sender thread, and the three
 * producers that fill it: the directory's channel and presence edges
 * (hub_wh_dir_edge), client events (hub_wh_client_event) and cache
 * misses (hub_wh_cache_miss). hub/webhook/queue.h.
 *
 * A producer only allocates and pushes under the queue's mutex, a leaf
 * lock never held across anything else: a loop never waits on the
 * sender. A full queue (HUB_WH_QUEUE_EVENTS events or HUB_WH_QUEUE_BYTES
 * bytes) frees the event and counts it in dropped.
 *
 * Thread: any; hub_wh_queue_set_wants from the main thread only.
 */
#include "hub/webhook/queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/loop/directory.h"
#include "hub/loop/loop.h"

int hub_wh_queue_init(struct hub_wh_queue *q, uint32_t cap,
                      const struct hub_app *apps, unsigned n_apps)
{
    memset(q, 0, sizeof(*q));
    if (pthread_mutex_init(&q->mu, NULL))
        return -ENOMEM;
    q->tail = &q->head;
    q->cap = cap ? cap : 1;
    q->max_bytes = HUB_WH_QUEUE_BYTES;
    atomic_init(&q->wants, NULL);
    if (hub_wh_queue_set_wants(q, apps, n_apps)) {
        pthread_mutex_destroy(&q->mu);
        return -ENOMEM;
    }
    atomic_init(&q->enqueued, 0);
    atomic_init(&q->dropped, 0);
    return 0;
}

static void free_list(struct hub_wh_event *ev)
{
    while (ev) {
        struct hub_wh_event *next = ev->next;

        free(ev);
        ev = next;
    }
}

int hub_wh_queue_set_wants(struct hub_wh_queue *q, const struct hub_app *apps,
                           unsigned n_apps)
{
    struct hub_wh_wants *w =
        malloc(sizeof(*w) + (n_apps ? n_apps : 1) * sizeof(unsigned));

    if (!w)
        return -ENOMEM;
    w->n = n_apps;
    for (unsigned i = 0; i < n_apps; i++)
        w->types[i] = apps[i].webhook_types;
    /* Only the main thread (start, reload) publishes: no lost update. */
    w->older = atomic_load_explicit(&q->wants, memory_order_relaxed);
    atomic_store_explicit(&q->wants, w, memory_order_release);
    return 0;
}

void hub_wh_queue_fini(struct hub_wh_queue *q)
{
    struct hub_wh_wants *w = atomic_load(&q->wants);

    while (w) {
        struct hub_wh_wants *older = w->older;

        free(w);
        w = older;
    }
    atomic_store(&q->wants, NULL);
    free_list(q->head);
    q->head = NULL;
    pthread_mutex_destroy(&q->mu);
}

bool hub_wh_queue_wants(const struct hub_wh_queue *q, unsigned app,
                        unsigned type)
{
    const struct hub_wh_wants *w =
        q ? atomic_load_explicit(&((struct hub_wh_queue *)q)->wants,
                                 memory_order_acquire)
          : NULL;

    return w && app < w->n && (w->types[app] & HUB_WH_BIT(type));
}

int hub_wh_queue_push(struct hub_wh_queue *q, struct hub_wh_event *ev)
{
    bool wake;

    ev->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->len >= q->cap || q->bytes + ev->size > q->max_bytes) {
        pthread_mutex_unlock(&q->mu);
        free(ev);
        atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
        return -ENOSPC;
    }
    *q->tail = ev;
    q->tail = &ev->next;
    q->len++;
    q->bytes += ev->size;
    /* One wake per batch's worth while the sender has a batch open (it
     * looks by itself every HUB_WH_LAZY_MS then), else per empty queue. */
    wake = q->room ? q->len == q->room : q->len == 1;
    pthread_mutex_unlock(&q->mu);
    atomic_fetch_add_explicit(&q->enqueued, 1, memory_order_relaxed);
    if (wake && q->wake)
        q->wake(q->wake_ctx);
    return 0;
}

struct hub_wh_event *hub_wh_queue_pop_all(struct hub_wh_queue *q)
{
    struct hub_wh_event *list;

    pthread_mutex_lock(&q->mu);
    list = q->head;
    q->head = NULL;
    q->tail = &q->head;
    q->len = 0;
    q->bytes = 0;
    pthread_mutex_unlock(&q->mu);
    return list;
}

uint32_t hub_wh_queue_set_room(struct hub_wh_queue *q, uint32_t room)
{
    uint32_t len;

    pthread_mutex_lock(&q->mu);
    q->room = room;
    len = q->len;
    pthread_mutex_unlock(&q->mu);
    return len;
}

static void push_new(struct hub_wh_queue *q, unsigned app, unsigned type,
                     const char *channel, size_t len, const char *uid,
                     const char *event, const char *data, const char *sid)
{
    struct hub_wh_event *ev =
        hub_wh_event_new(app, type, channel, len, uid, event, data, sid);

    if (!ev) {
        atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
        return;
    }
    hub_wh_queue_push(q, ev);
}

void hub_wh_dir_edge(void *ctx, const struct hub_dir_edge *e)
{
    struct hub_wh_queue *q = ctx;
    unsigned open, close;
    bool member = e->kind == HUB_DIR_MEMBER_FIRST ||
                  e->kind == HUB_DIR_MEMBER_LAST;
    bool first = e->kind == HUB_DIR_CHANNEL_FIRST ||
                 e->kind == HUB_DIR_MEMBER_FIRST;

    open = member ? HUB_WH_MEMBER_ADDED : HUB_WH_CHANNEL_OCCUPIED;
    close = member ? HUB_WH_MEMBER_REMOVED : HUB_WH_CHANNEL_VACATED;
    /* Both halves of a pair pass when either is wanted: the engine needs
     * the opening edge to know a closing one may be sent. */
    if (!hub_wh_queue_wants(q, e->app, open) &&
        !hub_wh_queue_wants(q, e->app, close))
        return;
    push_new(q, e->app, first ? open : close, e->name, e->len,
             member ? e->user_id : NULL, NULL, NULL, NULL);
}

void hub_wh_client_event(struct hub *h, unsigned app,
                         const char *channel, size_t len,
                         const char *event, const char *data,
                         const char *socket_id, const char *user_id)
{
    struct hub_wh_queue *q = atomic_load_explicit(&h->webhooks,
                                                  memory_order_acquire);

    if (!hub_wh_queue_wants(q, app, HUB_WH_CLIENT_EVENT))
        return;
    push_new(q, app, HUB_WH_CLIENT_EVENT, channel, len, user_id,
             event, data ? data : "", socket_id);
}

void hub_wh_cache_miss(struct hub *h, unsigned app, const char *channel,
                       size_t len)
{
    struct hub_wh_queue *q = atomic_load_explicit(&h->webhooks,
                                                  memory_order_acquire);

    if (!hub_wh_queue_wants(q, app, HUB_WH_CACHE_MISS))
        return;
    push_new(q, app, HUB_WH_CACHE_MISS, channel, len, NULL, NULL,
             NULL, NULL);
}
