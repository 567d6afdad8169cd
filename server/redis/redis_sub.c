/*
 * server/redis/redis_sub.c - the backplane's receiving side
 * (server/redis/redis_sub.h): the broker channels this node wants, the
 * SUBSCRIBE and UNSUBSCRIBE that follow the loops' SUB and UNSUB ops on
 * the subscriber connection, their confirmations (the channels gauge,
 * the directory's parked joins), and every message handed to the cluster
 * (hub_cluster_receive, presence member events).
 *
 * Thread: the backplane thread.
 */
#include "server/redis/redis_sub.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/redis/redis_dir_ops.h"
#include "server/redis/redis_inspect.h"
#include "server/redis/redis_int.h"

/* The record tables. */

void *srv_redis_tab_find(struct hub_chantab *t, const char *name, size_t len)
{
    return hub_chantab_find(t, 0, name, len, hub_chan_hash(0, name, len));
}

/* A record of size sz (its node first) keyed by name, linked into t. */
void *srv_redis_tab_add(struct hub_chantab *t, size_t sz, size_t name_off,
                        const char *name, size_t len)
{
    char *p = calloc(1, sz + len + 1);
    struct hub_chan_node *n = (struct hub_chan_node *)(void *)p;

    if (!p)
        return NULL;
    memcpy(p + name_off, name, len);
    n->app = 0;
    n->name = p + name_off;
    n->name_len = (uint32_t)len;
    n->hash = hub_chan_hash(0, name, len);
    hub_chantab_insert(t, n);
    return p;
}

/* The channels gauge follows every change of a record's confirmed flag,
 * so nothing walks the table per wakeup. */
static void set_confirmed(struct srv_redis *r, struct rxrec *x, bool on)
{
    if (x->confirmed == on)
        return;
    x->confirmed = on;
    if (on)
        r->n_confirmed++;
    else
        r->n_confirmed--;
    HUB_STAT_SET(r->st->channels, r->n_confirmed);
}

static void rx_remove(struct srv_redis *r, struct rxrec *x)
{
    set_confirmed(r, x, false);
    hub_chantab_remove(&r->rx, &x->node);
    hub_cluster_rx_fini(&x->rx);
    free(x);
}

static void send_subscribe(struct srv_redis *r, struct rxrec *x)
{
    if (srv_redis_async_send_push(r->sub, "SUBSCRIBE %b", x->name,
                                  (size_t)x->node.name_len) == 0)
        x->subscribed = true;
}

bool srv_redis_is_str(const redisReply *e)
{
    return e && (e->type == REDIS_REPLY_STRING ||
                 e->type == REDIS_REPLY_STATUS) && e->str;
}

void srv_redis_sub_push(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;
    const redisReply *kind, *ch;
    struct rxrec *x;

    if (!rep || !srv_redis_async_data(ac) || ac != r->sub)
        return;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
        !srv_redis_is_str(rep->element[0]) ||
        !srv_redis_is_str(rep->element[1])) {
        HUB_STAT_ADD(r->st->bad, 1);
        return;
    }
    kind = rep->element[0];
    ch = rep->element[1];
    x = srv_redis_tab_find(&r->rx, ch->str, ch->len);
    if (!strcasecmp(kind->str, "message")) {
        if (rep->element[2]->type != REDIS_REPLY_STRING) {
            HUB_STAT_ADD(r->st->bad, 1);
            return;
        }
        /* The socket inspector's channels (redis_inspect.c). */
        if (srv_redis_inspect_msg(r, ch->str, ch->len, rep->element[2]->str,
                                  rep->element[2]->len))
            return;
        if (x && x->member) {
            if (x->want)
                hub_cluster_member_msg(r->c, ch->str, ch->len,
                                       rep->element[2]->str,
                                       rep->element[2]->len);
            return;
        }
        if (r->test_drop_every && ++r->test_rx_n % r->test_drop_every == 0)
            return; /* the integration tests' lost message */
        hub_cluster_receive(r->c, x && x->want ? &x->rx : NULL, ch->str,
                            ch->len, rep->element[2]->str,
                            rep->element[2]->len);
    } else if (!strcasecmp(kind->str, "subscribe") && x) {
        if (x->subscribed) {
            set_confirmed(r, x, true);
            if (r->dir)
                srv_redis_dir_confirmed(r->dir, x->name, x->node.name_len);
        }
    } else if (!strcasecmp(kind->str, "unsubscribe") && x) {
        if (x->unsub_inflight)
            x->unsub_inflight--;
        if (!x->unsub_inflight) {
            if (x->want && r->up)
                send_subscribe(r, x);
            else if (!x->want)
                rx_remove(r, x);
        }
    }
}

/* A channel every node listens to, whatever its subscribers. */
static void rx_want(struct srv_redis *r, const char *ch, size_t len)
{
    struct rxrec *x = srv_redis_tab_find(&r->rx, ch, len);

    if (!x)
        x = srv_redis_tab_add(&r->rx, sizeof(*x),
                              offsetof(struct rxrec, name), ch, len);
    if (x)
        x->want = true;
}

/* The cache channel, and the socket inspector's two
 * (server/redis/redis_inspect.h). */
static void rx_want_always(struct srv_redis *r)
{
    size_t len;
    const char *ch = hub_cluster_cache_channel(r->c, &len);
    const char *insp[2];
    unsigned n = srv_redis_inspect_channels(r, insp);

    rx_want(r, ch, len);
    for (unsigned i = 0; i < n; i++)
        rx_want(r, insp[i], strlen(insp[i]));
}

void srv_redis_rx_sub(struct srv_redis *r, const struct hub_cluster_op *op)
{
    struct rxrec *x = srv_redis_tab_find(&r->rx, op->rchan, op->rchan_len);

    if (!x)
        x = srv_redis_tab_add(&r->rx, sizeof(*x),
                              offsetof(struct rxrec, name), op->rchan,
                              op->rchan_len);
    if (!x)
        return; /* out of memory: this channel hears only local traffic */
    x->want = true;
    x->member = op->member;
    if (r->up && r->sub && !x->subscribed && !x->unsub_inflight)
        send_subscribe(r, x);
}

void srv_redis_rx_unsub(struct srv_redis *r, const struct hub_cluster_op *op)
{
    struct rxrec *x = srv_redis_tab_find(&r->rx, op->rchan, op->rchan_len);

    /* Its SUBSCRIBE's confirmation no longer counts (x->subscribed goes
     * false below): what waited for it must not wait forever. */
    if (r->dir)
        srv_redis_dir_unsubscribed(r->dir, op->rchan, op->rchan_len);
    if (op->member)
        hub_cluster_view_drop(r->c, op->app, op->rchan + op->name_off,
                              op->rchan_len - op->name_off);
    if (!x)
        return;
    x->want = false;
    set_confirmed(r, x, false);
    hub_cluster_rx_fini(&x->rx);
    if (x->subscribed && r->up && r->sub &&
        srv_redis_async_send_push(r->sub, "UNSUBSCRIBE %b", x->name,
                                  (size_t)x->node.name_len) == 0) {
        x->subscribed = false;
        x->unsub_inflight++;
        return;
    }
    x->subscribed = false;
    if (!x->unsub_inflight)
        rx_remove(r, x);
}

bool srv_redis_rx_confirmed(struct srv_redis *r, const char *name,
                            size_t len)
{
    struct rxrec *x = srv_redis_tab_find(&r->rx, name, len);

    return !x || x->confirmed;
}

void srv_redis_rx_down(struct srv_redis *r)
{
    struct hub_chan_node *n, *nn;

    for (n = hub_chantab_next(&r->rx, NULL); n; n = nn) {
        struct rxrec *x = (struct rxrec *)(void *)n;

        nn = hub_chantab_next(&r->rx, n);
        x->subscribed = false;
        set_confirmed(r, x, false);
        x->unsub_inflight = 0;
        if (!x->want)
            rx_remove(r, x);
    }
}

unsigned srv_redis_rx_up(struct srv_redis *r)
{
    unsigned k = 0;

    rx_want_always(r);
    for (struct hub_chan_node *n = hub_chantab_next(&r->rx, NULL); n;
         n = hub_chantab_next(&r->rx, n)) {
        struct rxrec *x = (struct rxrec *)(void *)n;

        if (x->want) {
            send_subscribe(r, x);
            k++;
        }
    }
    return k;
}

void srv_redis_rx_clear(struct srv_redis *r)
{
    struct hub_chan_node *n, *nn;

    for (n = hub_chantab_next(&r->rx, NULL); n; n = nn) {
        nn = hub_chantab_next(&r->rx, n);
        rx_remove(r, (struct rxrec *)(void *)n);
    }
}
