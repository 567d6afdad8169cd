/*
 * hub/channel/subcount.c - the coalescer of hub/channel/subcount.h: the hub-wide pending
 * set (an (app, name) table under a mutex) and each loop's timer and list,
 * the feature's hub and loop state (hub/loop/feature.h).
 */
#include "hub/channel/subcount.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/backplane.h"
#include "hub/base/chantab.h"
#include "hub/loop/loop.h"
#include "hub/wire/protocol.h"
#include "timer/list.h"
#include "timer/wheel.h"

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
    bool local;                    /* dirty by this node's own change */
    char name[];
};

struct hub_subcount {
    pthread_mutex_t mu;
    struct hub_chantab t;
};

/* A loop's share: its timer and the channels it will send. */
struct sc_loop {
    struct hub_timer timer;
    struct hub_list pending;       /* struct sc_node.link, by due_ms */
    struct hub_loop *l;
};

static struct hub_subcount *sc_of(const struct hub *h)
{
    return hub_feature_state(h, &hub_subcount_feature);
}

static struct sc_loop *sl_of(const struct hub_loop *l)
{
    return hub_loop_feature_state(l, &hub_subcount_feature);
}

static struct hub_subcount *subcount_create(void)
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

static void subcount_destroy(struct hub_subcount *sc)
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

/* count, to the channel's subscribers on every loop of this process. */
static void publish_count(struct hub_loop *l, unsigned app, const char *name,
                          size_t len, unsigned count)
{
    struct hub *h = l->hub;
    struct hub_frame *f;

    if (!count)
        return;                    /* nobody left to tell */
    f = hub_subcount_frame(name, count);
    /* This process's loops only, not the bus: with several nodes
     * (docs/SCALING.md) each node reads the cluster-wide count itself,
     * and a count sent through the bus could overtake a newer one. With
     * the in-process backplane this is what hub_publish() does. */
    const struct hub_pub_req r = { app, name, len, f, NULL, false, NULL };

    if (f && hub_fanout_loops(h, l, &r) == 0)
        HUB_STAT_ADD(l->stats.subscription_count_events, 1);
    else
        HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
    if (f)
        hub_frame_unref(f);
}

/* A cluster-wide read in flight (the name outlives the sc_node). */
struct sc_read {
    struct hub_dir_query q;
    char name[];
};

static void read_done(struct hub_dir_query *q, int rc)
{
    struct sc_read *rd = hub_container_of(q, struct sc_read, q);

    /* -ECANCELED: the loop is gone; anything else < 0: nothing read. */
    if (rc == 0)
        publish_count(q->loop, q->app, rd->name, q->len,
                      q->info.subscription_count);
    else if (rc != -ECANCELED)
        HUB_STAT_ADD(q->loop->stats.subscription_count_dropped, 1);
    free(rd);
}

/*
 * The count of n's channel now, to its subscribers on every loop. With a
 * backplane that reaches other processes, a change of our own is first
 * told to them (they read anew), and the count sent is the cluster-wide
 * one, read without waiting (the answer comes back through the inbox);
 * a node with no subscriber of the channel left reads nothing.
 */
static void send_count(struct hub_loop *l, const struct sc_node *n,
                       bool local)
{
    struct hub *h = l->hub;
    struct hub_channel_info ci;
    struct sc_read *rd;
    int rc;

    if (local)
        (void)hub_bus_count_changed(h, n->node.app, n->name,
                                    n->node.name_len);
    hub_dir_info(h, n->node.app, n->name, n->node.name_len, &ci);
    if (!ci.subscription_count)
        return;                    /* nobody here to tell */
    if (!h->bp->bus->count_changed || !h->bp->dir->query_async) {
        publish_count(l, n->node.app, n->name, n->node.name_len,
                      ci.subscription_count);
        return;
    }
    rd = calloc(1, sizeof(*rd) + n->node.name_len + 1);
    if (!rd) {
        HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
        return;
    }
    memcpy(rd->name, n->name, n->node.name_len + 1);
    rd->q.kind = HUB_DIR_Q_INFO;
    rd->q.app = n->node.app;
    rd->q.name = rd->name;
    rd->q.len = n->node.name_len;
    rd->q.loop = l;
    rd->q.done = read_done;
    rc = hub_dir_query_async(h, &rd->q);
    if (rc == HUB_DIR_PENDING)
        return;                    /* read_done frees it */
    if (rc == 0)
        publish_count(l, n->node.app, n->name, n->node.name_len,
                      rd->q.info.subscription_count);
    else
        HUB_STAT_ADD(l->stats.subscription_count_dropped, 1);
    free(rd);
}

static void arm(struct sc_loop *sl)
{
    struct sc_node *first;

    if (hub_list_is_empty(&sl->pending))
        return;
    first = hub_container_of(sl->pending.next, struct sc_node, link);
    hub_wheel_start_at(sl->l->wheel, &sl->timer, first->due_ms);
}

static void fire(struct hub_timer *t, uint64_t now_ms)
{
    struct sc_loop *sl = hub_container_of(t, struct sc_loop, timer);
    struct hub_loop *l = sl->l;
    struct hub_subcount *sc = sc_of(l->hub);
    uint64_t interval = l->cfg->subscription_count_interval_ms;
    /* Nodes re-queued by this pass go after it: stop at the first one. */
    struct hub_list *stop = NULL;

    while (!hub_list_is_empty(&sl->pending)) {
        struct sc_node *n = hub_container_of(sl->pending.next,
                                             struct sc_node, link);
        bool dirty, local;

        if (&n->link == stop || n->due_ms > now_ms)
            break;
        pthread_mutex_lock(&sc->mu);
        dirty = n->dirty;
        local = n->local;
        n->dirty = false;
        n->local = false;
        if (!dirty)
            hub_chantab_remove(&sc->t, &n->node);
        pthread_mutex_unlock(&sc->mu);
        hub_list_unlink(&n->link);
        if (!dirty) {
            free(n);
            continue;
        }
        send_count(l, n, local);
        n->due_ms = now_ms + interval;
        hub_list_link_tail(&sl->pending, &n->link);
        if (!stop)
            stop = &n->link;
    }
    arm(sl);
}

/* Mark (app, name) changed; local: by this process's own subscribers. */
static void mark(struct hub_loop *l, unsigned app, const char *name,
                 size_t len, bool local)
{
    struct hub_subcount *sc = sc_of(l->hub);
    struct sc_loop *sl = sl_of(l);
    uint64_t hash = hub_chan_hash(app, name, len);
    struct hub_chan_node *found;
    struct sc_node *n;
    bool first;

    if (!sc || !sl)
        return;
    pthread_mutex_lock(&sc->mu);
    found = hub_chantab_find(&sc->t, app, name, len, hash);
    if (found) {
        n = hub_container_of(found, struct sc_node, node);
        n->dirty = true;
        n->local |= local;
    }
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
    n->local = local;
    n->due_ms = l->now_ms + l->cfg->subscription_count_interval_ms;
    pthread_mutex_lock(&sc->mu);
    /* Another loop may have added it between the two locks. */
    found = hub_chantab_find(&sc->t, app, name, len, hash);
    if (found) {
        struct sc_node *o = hub_container_of(found, struct sc_node, node);

        o->dirty = true;
        o->local |= local;
    } else {
        hub_chantab_insert(&sc->t, &n->node);
    }
    pthread_mutex_unlock(&sc->mu);
    if (found) {
        free(n);
        return;
    }
    first = hub_list_is_empty(&sl->pending);
    hub_list_link_tail(&sl->pending, &n->link);
    if (first)
        arm(sl);
}

void hub_subcount_changed(struct hub_loop *l, unsigned app, const char *name,
                          size_t len)
{
    mark(l, app, name, len, true);
}

/* Another node's notice, on its way to a loop. */
struct sc_remote {
    struct hub_inbox_node inbox;
    unsigned app;
    size_t len;
    bool local;
    char name[];
};

static void remote_run(struct hub_inbox_node *in, struct hub_loop *l,
                       uint64_t now_ms)
{
    struct sc_remote *m = hub_container_of(in, struct sc_remote, inbox);

    (void)now_ms;
    mark(l, m->app, m->name, m->len, m->local);
    free(m);
}

static void remote_drop(struct hub_inbox_node *in)
{
    free(hub_container_of(in, struct sc_remote, inbox));
}

static const struct hub_inbox_ops remote_ops = { remote_run, remote_drop };

/* Mark (app, name) on one of h's loops, from any thread. */
static void post_mark(struct hub *h, unsigned app, const char *name,
                      size_t len, bool local)
{
    struct sc_remote *m;
    struct hub_loop *l;

    if (!sc_of(h) || !h->n_loops)
        return;
    m = malloc(sizeof(*m) + len + 1);
    if (!m)
        return;                    /* the next notice marks it again */
    memset(&m->inbox, 0, sizeof(m->inbox));
    m->inbox.ops = &remote_ops;
    m->app = app;
    m->len = len;
    m->local = local;
    memcpy(m->name, name, len);
    m->name[len] = '\0';
    /* Any loop may own the mark; spread channels over them. */
    l = h->loops[hub_chan_hash(app, name, len) % h->n_loops];
    hub_loop_post(l, &m->inbox);
}

void hub_subcount_remote(struct hub *h, unsigned app, const char *name,
                         size_t len)
{
    post_mark(h, app, name, len, false);
}

void hub_subcount_refresh(struct hub *h, unsigned app, const char *name,
                          size_t len)
{
    post_mark(h, app, name, len, true);
}

/* The feature's hooks. */

static int feature_hub_init(struct hub *h, void **state)
{
    (void)h;
    *state = subcount_create();
    return *state ? 0 : -ENOMEM;
}

/* After every loop is gone (their pending nodes freed). */
static void feature_hub_fini(struct hub *h, void *state)
{
    (void)h;
    subcount_destroy(state);
}

static int feature_loop_init(struct hub_loop *l, void **state)
{
    struct sc_loop *sl = calloc(1, sizeof(*sl));

    if (!sl)
        return -ENOMEM;
    sl->l = l;
    hub_timer_init(&sl->timer, fire);
    hub_list_init(&sl->pending);
    *state = sl;
    return 0;
}

/* Stops the timer and frees the loop's pending channels unsent. */
static void feature_loop_fini(struct hub_loop *l, void *state)
{
    struct sc_loop *sl = state;

    hub_wheel_stop(l->wheel, &sl->timer);
    while (!hub_list_is_empty(&sl->pending)) {
        struct sc_node *n = hub_container_of(sl->pending.next,
                                             struct sc_node, link);

        take(sc_of(l->hub), n);
        free(n);
    }
    free(sl);
}

const struct hub_feature hub_subcount_feature = {
    .name = "subscription_count",
    .hub_init = feature_hub_init,
    .hub_fini = feature_hub_fini,
    .loop_init = feature_loop_init,
    .loop_fini = feature_loop_fini,
};
