/*
 * hub/cluster/cluster_rx.c - what arrives from the broker on a channel this
 * node subscribed (hub/cluster/cluster.h, hub_cluster_receive): the
 * envelope checked (against the cluster key, and against the broker
 * channel it came on), this node's own ignored, the gaps in each origin's
 * per-channel sequence counted, and the rest delivered through
 * hub_fanout_loops(h, NULL, ...) / hub_fanout_terminate(), a subscription
 * count's notice to hub/channel/subcount.h, a cache entry to the replica
 * (hub/cluster/cluster_cache.h).
 *
 * Thread: the backplane thread; delivery under deliver_mu, after which
 * hub_cluster_close() lets nothing through.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/channel/subcount.h"
#include "hub/cluster/cluster_cache.h"
#include "hub/cluster/cluster_int.h"
#include "hub/cluster/cluster_envelope.h"
#include "hub/loop/loop.h"
#include "hub/channel/history.h"
#include "hub/loop/publish.h"
#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"

void hub_cluster_rx_fini(struct hub_cluster_rx *rx)
{
    struct hub_cluster_origin *o, *next;

    for (o = rx->origins; o; o = next) {
        next = o->next;
        hub__cluster_fill_drop(o);
        free(o);
    }
    rx->origins = NULL;
    rx->n = 0;
}

/* Count what is missing between the origin's last seq and e's; the
 * origin's record (NULL past HUB_CLUSTER_MAX_ORIGINS), *gap whether some
 * is. */
static struct hub_cluster_origin *track(struct hub_cluster *c,
                                        struct hub_cluster_rx *rx,
                                        const struct hub_cluster_envelope *e,
                                        bool *gap)
{
    struct hub_cluster_origin *o;

    *gap = false;
    for (o = rx->origins; o; o = o->next)
        if (o->len == e->origin_len && !memcmp(o->id, e->origin, o->len))
            break;
    if (!o) {
        if (rx->n >= HUB_CLUSTER_MAX_ORIGINS)
            return NULL;
        o = calloc(1, sizeof(*o) + e->origin_len);
        if (!o)
            return NULL;
        o->len = e->origin_len;
        memcpy(o->id, e->origin, o->len);
        o->epoch = e->epoch;
        o->last = e->seq;
        o->next = rx->origins;
        rx->origins = o;
        rx->n++;
        return o;
    }
    if (o->epoch != e->epoch) {
        /* The origin restarted or reset its numbering. */
        o->epoch = e->epoch;
        o->last = e->seq;
        return o;
    }
    if (e->seq > o->last + 1) {
        HUB_STAT_ADD_SHARED(c->stats.gaps, e->seq - o->last - 1);
        *gap = true;
    }
    if (e->seq > o->last)
        o->last = e->seq;
    return o;
}

/* rchan (NULL = not checked) is "<prefix>:<app>:<channel>" of e, or the
 * cache channel for a cache envelope (and only for one). */
static bool rchan_matches(const struct hub_cluster *c, const char *rchan,
                          size_t rlen, const struct hub_cluster_envelope *e)
{
    size_t plen = strlen(c->prefix);
    bool cache_chan = rchan && rlen == c->cache_chan_len &&
                      !memcmp(rchan, c->cache_chan, rlen);

    if (e->kind == HUB_CLUSTER_ENV_CACHE)
        return (!rchan || cache_chan) &&
               hub_channel_is_cache(e->channel, e->channel_len);
    if (!rchan)
        return true;
    return rlen == plen + 1 + e->app_len + 1 + e->channel_len &&
           !memcmp(rchan, c->prefix, plen) && rchan[plen] == ':' &&
           !memcmp(rchan + plen + 1, e->app, e->app_len) &&
           rchan[plen + 1 + e->app_len] == ':' &&
           !memcmp(rchan + plen + 2 + e->app_len, e->channel, e->channel_len);
}

int hub_cluster_receive(struct hub_cluster *c, struct hub_cluster_rx *rx,
                        const char *rchan, size_t rchan_len,
                        const void *data, size_t len)
{
    struct hub_cluster_envelope e;
    struct hub_cluster_origin *o = NULL;
    bool gap = false;
    int app = -1, rc = hub__cluster_open_env(c, &e, data, len, true);

    if (rc == -EACCES || rc == -ESTALE) {
        hub__cluster_key_drop(c, rc, e.origin, e.origin_len,
                 rc == -ESTALE ? "a replayed envelope" : "an envelope");
        return rc;
    }
    if (rc || !rchan_matches(c, rchan, rchan_len, &e) ||
        (app = hub_cluster_app_index(c, e.app, e.app_len)) < 0) {
        HUB_STAT_ADD_SHARED(c->stats.bad, 1);
        return -EINVAL;
    }
    /* A script's event (kind 5) came from Redis, not from a node's local
     * delivery: every node delivers it, the one whose script sent it too.
     * Its sequence is Redis's, per watcher, whichever node's script sent
     * it: tracked under an origin no node has (the empty id); 0 is an
     * older node's script, not numbered. */
    if (e.kind != HUB_CLUSTER_ENV_SCRIPT && e.origin_len == c->node_len &&
        !memcmp(e.origin, c->node_id, c->node_len)) {
        HUB_STAT_ADD_SHARED(c->stats.own_ignored, 1);
        return 1;
    }
    if (rx && e.kind != HUB_CLUSTER_ENV_SCRIPT) {
        o = track(c, rx, &e, &gap);
    } else if (rx && e.seq) {
        struct hub_cluster_envelope redis_seq = e;

        redis_seq.origin = "";
        redis_seq.origin_len = 0;
        track(c, rx, &redis_seq, &gap);
    }
    HUB_STAT_ADD_SHARED(c->stats.received, 1);
    if (e.kind == HUB_CLUSTER_ENV_CACHE)
        HUB_STAT_ADD_SHARED(c->stats.cache_received, 1);
    if (!c->hub)
        return 0;
    /* Recovery: a hole in a history channel's stream of one origin is
     * filled from Redis before what follows it (hub/cluster/cluster_fill.c). */
    if (o && hub__cluster_fill_take(c, o, rchan, rchan_len, (unsigned)app, &e,
                                    gap, data))
        return 0;
    hub__cluster_deliver_env(c, (unsigned)app, &e);
    if (o && e.hist_seq)
        o->hlast = e.hist_seq;
    return 0;
}
