/*
 * hub/cluster/cluster_bus.c - the cluster's bus (hub/loop/backplane.h bus ops)
 * and the envelope it sends. On a loop, publish delivers on this node's loops
 * at once (hub_fanout_loops, never through the broker), then queues the frame
 * for the backplane thread; terminate_user, a cache channel's event and a
 * subscription count's change likewise. Member events (skip->member_seq set)
 * stay on this node: their seq belongs to this node's directory (other nodes
 * get theirs from Redis's member-event channels, through their views). On the
 * backplane thread, hub_cluster_encode() wraps a queued op in an envelope
 * (hub/cluster/cluster_envelope.h), sealed with the cluster key when there is
 * one.
 *
 * Thread: the bus ops on loop threads; encode on the backplane thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/cluster/cluster_key.h"
#include "hub/cluster/cluster_int.h"
#include "hub/cluster/cluster_envelope.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"
#include "timer/clock.h"

static int cbus_publish(void *b, struct hub *h, struct hub_loop *from,
                        const struct hub_pub_req *r)
{
    struct hub_cluster *c = b;
    struct hub_cluster_op *op;
    int rc;

    /* This node's subscribers first, never through the broker. */
    rc = hub_fanout_loops(h, from, r);
    if (r->skip && r->skip->member_seq)
        return rc;
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return rc;
    op = hub__cluster_op_new(c, HUB_COP_EVENT, r->app, r->name, r->len);
    if (!op) {
        HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        return rc;
    }
    if (r->skip)
        op->skip = *r->skip;
    op->f = hub_frame_ref(r->f);
    if (r->hist && r->f->hseq)
        op->hist = *r->hist;
    hub__cluster_enqueue(c, op);
    return rc;
}

static int cbus_terminate(void *b, struct hub *h, struct hub_loop *from,
                          unsigned app, const char *uid)
{
    struct hub_cluster *c = b;
    size_t plen = sizeof(USER_PREFIX) - 1, ulen = strlen(uid);
    struct hub_cluster_op *op;
    char *name;
    int rc;

    rc = hub_fanout_terminate(h, from, app, uid);
    if (rc)
        return rc;
    name = malloc(plen + ulen + 1);
    op = name ? hub__cluster_op_new(c, HUB_COP_TERMINATE, app,
                       (memcpy(name, USER_PREFIX, plen),
                        memcpy(name + plen, uid, ulen), name),
                       plen + ulen)
              : NULL;
    free(name);
    if (!op) {
        HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        return 0;
    }
    hub__cluster_enqueue(c, op);
    return 0;
}

/* An HTTP API event on a cache channel: this node's subscribers at once,
 * then one CACHE op, which tells every other node (delivering it and
 * keeping it) and writes the entry to Redis (hub/cluster/cluster_cache.h). */
static int cbus_publish_cache(void *b, struct hub *h, struct hub_loop *from,
                              const struct hub_pub_req *r)
{
    struct hub_cluster *c = b;
    const struct hub_app *app;
    struct hub_cluster_op *op;
    uint64_t ttl;
    int rc;

    if (r->app >= c->n_apps || !hub_channel_is_cache(r->name, r->len) ||
        (r->skip && r->skip->member_seq))
        return cbus_publish(b, h, from, r);
    rc = hub_fanout_loops(h, from, r);
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return rc;
    app = &c->apps[r->app];
    ttl = app->cache_ttl_ms ? app->cache_ttl_ms : h->cfg->cache_ttl_ms;
    op = ttl ? hub__cluster_op_new_mid(c, HUB_COP_CACHE, r->app, r->name,
                                       r->len, "cache:")
             : NULL;
    if (!op) {
        HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        return rc;
    }
    op->bus_len = c->cache_chan_len;
    op->expire_ms = hub_clock_now_ms(h->clock) + ttl;
    if (r->skip)
        op->skip = *r->skip;
    op->f = hub_frame_ref(r->f);
    if (r->hist && r->f->hseq)
        op->hist = *r->hist;
    hub__cluster_enqueue(c, op);
    return rc;
}

/* Tell the nodes with subscribers of the channel that its count moved
 * here (envelope kind 4): they read it anew from Redis. Not while the
 * directory is down: Redis has no count to read then. */
static void cbus_count_changed(void *b, struct hub *h, unsigned app,
                               const char *name, size_t len)
{
    struct hub_cluster *c = b;
    struct hub_cluster_op *op;

    if (!hub_cluster_dir_is_up(c) ||
        atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return;
    op = hub__cluster_op_new(c, HUB_COP_COUNT, app, name, len);
    if (!op) {
        HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        return;
    }
    hub__cluster_enqueue(c, op);
}

/* Recovery: read a channel's stream on the backplane thread, which posts
 * rd back to its loop (server/redis/redis_hist.c). */
static int cbus_history_read(void *b, struct hub *h,
                             struct hub_hist_read *rd)
{
    struct hub_cluster *c = b;
    struct hub_cluster_op *op;

    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return -ECANCELED;
    op = hub__cluster_op_new_mid(c, HUB_COP_HREAD, rd->app, rd->name, rd->len,
                                 "history:");
    if (!op)
        return -ENOMEM;
    op->hrd = rd;
    hub__cluster_enqueue(c, op);
    return 0;
}

void hub_cluster_hist_answer(struct hub_cluster *c, struct hub_hist_read *rd)
{
    pthread_mutex_lock(&c->deliver_mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->deliver_mu);
        rd->node.ops->drop(&rd->node);
        return;
    }
    hub_loop_post(rd->loop, &rd->node);
    pthread_mutex_unlock(&c->deliver_mu);
}

const struct hub_bus_ops hub__cluster_bus_ops = {
    .publish = cbus_publish,
    .terminate_user = cbus_terminate,
    .destroy = hub__cluster_bus_destroy,
    .publish_cache = cbus_publish_cache,
    .count_changed = cbus_count_changed,
    .history_read = cbus_history_read,
};

unsigned char *hub_cluster_encode(struct hub_cluster *c,
                                  const struct hub_cluster_op *op,
                                  uint64_t epoch, uint64_t seq, size_t *len)
{
    const char *app = hub_cluster_app_id(c, op->app);
    struct hub_cluster_envelope e = {
        .kind = op->kind == HUB_COP_EVENT   ? HUB_CLUSTER_ENV_EVENT
                : op->kind == HUB_COP_CACHE ? HUB_CLUSTER_ENV_CACHE
                : op->kind == HUB_COP_COUNT ? HUB_CLUSTER_ENV_COUNT
                                            : HUB_CLUSTER_ENV_TERMINATE,
        .origin = c->node_id,
        .origin_len = c->node_len,
        .epoch = epoch,
        .seq = seq,
        .app = app,
        .app_len = strlen(app),
        .channel = op->rchan + op->name_off,
        .channel_len = op->rchan_len - op->name_off,
        .excl_set = op->skip.set,
        .excl_hi = op->skip.hi,
        .excl_lo = op->skip.lo,
        .member_seq = 0,
    };
    unsigned char *out;
    size_t n;

    if (op->kind == HUB_COP_CACHE) {
        uint64_t left = hub_cluster_op_ttl(c, op);

        if (!left)
            left = 1; /* still news for the subscribers */
        e.ttl_ms =
            (uint32_t)(left > HUB_CLUSTER_ENV_MAX_TTL ? HUB_CLUSTER_ENV_MAX_TTL
                                                      : left);
    }
    if ((op->kind == HUB_COP_EVENT || op->kind == HUB_COP_CACHE) && op->f) {
        e.data = hub_frame_data(op->f) + (op->f->len - op->f->payload_len);
        e.data_len = op->f->payload_len;
        if (op->f->hseq && op->f->horigin) {
            /* Recovery's id: the receivers give it to their resuming
             * sessions (hub/loop/resume.h). */
            e.hist_origin = op->f->horigin;
            e.hist_origin_len = strlen(op->f->horigin);
            e.hist_seq = op->f->hseq;
            e.hist_time_ms = op->hist.time_ms;
        }
    }
    n = hub_cluster_envelope_size(&e);
    if (!n || !(out = malloc(n + (c->key ? HUB_CLUSTER_KEY_TRAILER : 0))))
        return NULL;
    *len = hub_cluster_envelope_encode(&e, out, n);
    if (c->key) {
        if (hub__cluster_key_seal(c, out, n)) {
            free(out);
            return NULL;
        }
        *len = n + HUB_CLUSTER_KEY_TRAILER;
    }
    return out;
}
