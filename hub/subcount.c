/*
 * hub/subcount.c - the coalescer of hub/subcount.h: the hub-wide pending
 * set (an (app, name) table under a mutex) and each loop's timer and list.
 */
#include "hub/subcount.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/backplane.h"
#include "hub/chantab.h"
#include "hub/loop.h"
#include "hub/protocol.h"

struct sc_node {
    struct hub_chan_node node;     /* key: app, name (points at name[]) */
    struct hub_list link;          /* the owning loop's pending list */
    char name[];
};

struct hub_subcount {
    pthread_mutex_t mu;
    struct hub_chantab t;
};

struct hub_subcount *hub_subcount_create(void)
{
    struct hub_subcount *sc = calloc(1, sizeof(*sc));

    if (!sc)
        return NULL;
    if (hub_chantab_init(&sc->t, 64)) {
        free(sc);
        return NULL;
    }
    pthread_mutex_init(&sc->mu, NULL);
    return sc;
}

void hub_subcount_destroy(struct hub_subcount *sc)
{
    if (!sc)
        return;
    hub_chantab_fini(&sc->t);
    pthread_mutex_destroy(&sc->mu);
    free(sc);
}

struct hub_frame *hub_subcount_frame(const char *channel, unsigned count)
{
    char data[64];
    int n = snprintf(data, sizeof(data), "\"{\\\"subscription_count\\\":%u}\"",
                     count);

    return hub_proto_event_frame("pusher_internal:subscription_count",
                                 channel, data, (size_t)n, NULL);
}

/* Out of the set and off the list; the caller frees it. */
static void take(struct hub_subcount *sc, struct sc_node *n)
{
    pthread_mutex_lock(&sc->mu);
    hub_chantab_remove(&sc->t, &n->node);
    pthread_mutex_unlock(&sc->mu);
    hub_list_unlink(&n->link);
}

static void fire(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_loop *l = hub_container_of(t, struct hub_loop, subcount.timer);
    struct hub *h = l->hub;

    (void)now_ms;
    while (!hub_list_is_empty(&l->subcount.pending)) {
        struct sc_node *n = hub_container_of(l->subcount.pending.next,
                                             struct sc_node, link);
        struct hub_channel_info ci;
        struct hub_frame *f;

        /* Out of the set first: a change from now on is a new mark. */
        take(h->subcount, n);
        hub_dir_info(h, n->node.app, n->name, n->node.name_len, &ci);
        f = ci.subscription_count
                ? hub_subcount_frame(n->name, ci.subscription_count)
                : NULL;
        if (f) {
            if (hub_publish(h, l, n->node.app, n->name, n->node.name_len, f,
                            NULL) == 0)
                HUB_STAT_ADD(l->stats.subscription_count_events, 1);
            else
                HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
            hub_frame_unref(f);
        } else if (ci.subscription_count) {
            HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
        }
        free(n);
    }
}

void hub_subcount_loop_init(struct hub_loop *l)
{
    hub_timer_init(&l->subcount.timer, fire);
    hub_list_init(&l->subcount.pending);
}

void hub_subcount_loop_fini(struct hub_loop *l)
{
    hub_wheel_stop(l->wheel, &l->subcount.timer);
    while (!hub_list_is_empty(&l->subcount.pending)) {
        struct sc_node *n = hub_container_of(l->subcount.pending.next,
                                             struct sc_node, link);

        take(l->hub->subcount, n);
        free(n);
    }
}

void hub_subcount_changed(struct hub_loop *l, unsigned app, const char *name,
                          size_t len)
{
    struct hub_subcount *sc = l->hub->subcount;
    uint64_t hash = hub_chan_hash(app, name, len);
    struct sc_node *n;
    bool pending;

    if (!sc)
        return;
    pthread_mutex_lock(&sc->mu);
    pending = hub_chantab_find(&sc->t, app, name, len, hash) != NULL;
    pthread_mutex_unlock(&sc->mu);
    if (pending)
        return;
    n = malloc(sizeof(*n) + len + 1);
    if (!n) {
        HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
        return;
    }
    memcpy(n->name, name, len);
    n->name[len] = '\0';
    n->node.hash = hash;
    n->node.app = app;
    n->node.name = n->name;
    n->node.name_len = (uint32_t)len;
    pthread_mutex_lock(&sc->mu);
    /* Another loop may have marked it between the two locks. */
    pending = hub_chantab_find(&sc->t, app, name, len, hash) != NULL;
    if (!pending)
        hub_chantab_insert(&sc->t, &n->node);
    pthread_mutex_unlock(&sc->mu);
    if (pending) {
        free(n);
        return;
    }
    hub_list_link_tail(&l->subcount.pending, &n->link);
    if (!hub_timer_is_armed(&l->subcount.timer))
        hub_wheel_start(l->wheel, &l->subcount.timer, l->now_ms,
                        (int64_t)l->cfg->subscription_count_interval_ms);
}
