/*
 * hub/subcount.c - the coalescer of hub/subcount.h: the hub-wide pending
 * set (an (app, name) table under a mutex) and each loop's timer and list.
 */
#include "hub/subcount.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/backplane.h"
#include "hub/chantab.h"
#include "hub/loop.h"
#include "hub/protocol.h"

/*
 * A channel in the set. Its loop sends at due_ms if dirty (a change came
 * since the last send), then keeps it for one more interval: a change in
 * that interval, from any loop, only sets dirty, so sends of one channel
 * are at least an interval apart hub-wide. An interval with no change
 * frees it.
 */
struct sc_node {
    struct hub_chan_node node;     /* key: app, name (points at name[]) */
    struct hub_list link;          /* the owning loop's list, by due_ms */
    uint64_t due_ms;
    bool dirty;                    /* under the set's mutex */
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

/* The count of n's channel now, to its subscribers on every loop. */
static void send_count(struct hub_loop *l, const struct sc_node *n)
{
    struct hub *h = l->hub;
    struct hub_channel_info ci;
    struct hub_frame *f;

    hub_dir_info(h, n->node.app, n->name, n->node.name_len, &ci);
    if (!ci.subscription_count)
        return;                    /* nobody left to tell */
    f = hub_subcount_frame(n->name, ci.subscription_count);
    /* This process's loops only, not the bus: the count is this
     * process's directory's, and with several nodes (docs/SCALING.md)
     * each node's would reach every node and contradict the others'.
     * With the in-process backplane this is what hub_publish() does. */
    const struct hub_pub_req r = { n->node.app, n->name, n->node.name_len,
                                   f, NULL };

    if (f && hub_fanout_loops(h, l, &r) == 0)
        HUB_STAT_ADD(l->stats.subscription_count_events, 1);
    else
        HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
    if (f)
        hub_frame_unref(f);
}

static void arm(struct hub_loop *l)
{
    struct sc_node *first;

    if (hub_list_is_empty(&l->subcount.pending))
        return;
    first = hub_container_of(l->subcount.pending.next, struct sc_node, link);
    hub_wheel_start_at(l->wheel, &l->subcount.timer, first->due_ms);
}

static void fire(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_loop *l = hub_container_of(t, struct hub_loop, subcount.timer);
    struct hub_subcount *sc = l->hub->subcount;
    uint64_t interval = l->cfg->subscription_count_interval_ms;
    /* Nodes re-queued by this pass go after it: stop at the first one. */
    struct hub_list *stop = NULL;

    while (!hub_list_is_empty(&l->subcount.pending)) {
        struct sc_node *n = hub_container_of(l->subcount.pending.next,
                                             struct sc_node, link);
        bool dirty;

        if (&n->link == stop || n->due_ms > now_ms)
            break;
        pthread_mutex_lock(&sc->mu);
        dirty = n->dirty;
        n->dirty = false;
        if (!dirty)
            hub_chantab_remove(&sc->t, &n->node);
        pthread_mutex_unlock(&sc->mu);
        hub_list_unlink(&n->link);
        if (!dirty) {
            free(n);
            continue;
        }
        send_count(l, n);
        n->due_ms = now_ms + interval;
        hub_list_link_tail(&l->subcount.pending, &n->link);
        if (!stop)
            stop = &n->link;
    }
    arm(l);
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
    struct hub_chan_node *found;
    struct sc_node *n;
    bool first;

    if (!sc)
        return;
    pthread_mutex_lock(&sc->mu);
    found = hub_chantab_find(&sc->t, app, name, len, hash);
    if (found)
        hub_container_of(found, struct sc_node, node)->dirty = true;
    pthread_mutex_unlock(&sc->mu);
    if (found)
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
    n->dirty = true;
    n->due_ms = l->now_ms + l->cfg->subscription_count_interval_ms;
    pthread_mutex_lock(&sc->mu);
    /* Another loop may have added it between the two locks. */
    found = hub_chantab_find(&sc->t, app, name, len, hash);
    if (found)
        hub_container_of(found, struct sc_node, node)->dirty = true;
    else
        hub_chantab_insert(&sc->t, &n->node);
    pthread_mutex_unlock(&sc->mu);
    if (found) {
        free(n);
        return;
    }
    first = hub_list_is_empty(&l->subcount.pending);
    hub_list_link_tail(&l->subcount.pending, &n->link);
    if (first)
        arm(l);
}
