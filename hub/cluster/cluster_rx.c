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

/* The last seq seen from one origin on one broker channel. */
struct hub_cluster_origin {
    struct hub_cluster_origin *next;
    uint64_t epoch, last;
    size_t len;
    char id[];
};

void hub_cluster_rx_fini(struct hub_cluster_rx *rx)
{
    struct hub_cluster_origin *o, *next;

    for (o = rx->origins; o; o = next) {
        next = o->next;
        free(o);
    }
    rx->origins = NULL;
    rx->n = 0;
}

/* Count what is missing between the origin's last seq and e's. */
static void track(struct hub_cluster *c, struct hub_cluster_rx *rx,
                  const struct hub_cluster_envelope *e)
{
    struct hub_cluster_origin *o;

    for (o = rx->origins; o; o = o->next)
        if (o->len == e->origin_len && !memcmp(o->id, e->origin, o->len))
            break;
    if (!o) {
        if (rx->n >= HUB_CLUSTER_MAX_ORIGINS)
            return;
        o = malloc(sizeof(*o) + e->origin_len);
        if (!o)
            return;
        o->len = e->origin_len;
        memcpy(o->id, e->origin, o->len);
        o->epoch = e->epoch;
        o->last = e->seq;
        o->next = rx->origins;
        rx->origins = o;
        rx->n++;
        return;
    }
    if (o->epoch != e->epoch) {
        /* The origin restarted or reset its numbering. */
        o->epoch = e->epoch;
        o->last = e->seq;
        return;
    }
    if (e->seq > o->last + 1)
        HUB_STAT_ADD_SHARED(c->stats.gaps, e->seq - o->last - 1);
    if (e->seq > o->last)
        o->last = e->seq;
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

static void deliver(struct hub_cluster *c, unsigned app,
                    const struct hub_cluster_envelope *ep)
{
    const struct hub_cluster_envelope e = *ep;
    struct hub_frame *f;

    if (e.kind == HUB_CLUSTER_ENV_TERMINATE) {
        size_t plen = sizeof(USER_PREFIX) - 1;
        char *uid;

        if (e.channel_len <= plen || memcmp(e.channel, USER_PREFIX, plen) ||
            memchr(e.channel + plen, '\0', e.channel_len - plen)) {
            HUB_STAT_ADD_SHARED(c->stats.bad, 1);
            return;
        }
        /* On the heap: a user id may be as long as the envelope's
         * channel (64 KiB), too much for this thread's stack. */
        uid = strndup(e.channel + plen, e.channel_len - plen);
        if (uid)
            hub_fanout_terminate(c->hub, NULL, app, uid);
        free(uid);
        return;
    }
    if (e.kind == HUB_CLUSTER_ENV_COUNT) {
        /* Only for an app this node counts too (the same apps everywhere,
         * but a node may be configured apart). */
        if (app < c->n_apps && c->apps[app].subscription_count)
            hub_subcount_remote(c->hub, app, e.channel, e.channel_len);
        return;
    }
    f = hub_frame_create_text(e.data, e.data_len);
    if (!f)
        return;
    hub_history_stamp(hub_history_of(c->hub), f, e.hist_origin,
                      e.hist_origin_len, e.hist_seq);
    {
        struct hub_skip ex = { .set = e.excl_set, .hi = e.excl_hi,
                               .lo = e.excl_lo, .member_seq = 0 };
        const struct hub_pub_req r = { app, e.channel, e.channel_len, f,
                                       &ex, false, NULL };

        hub_fanout_loops(c->hub, NULL, &r);
    }
    hub_frame_unref(f);
}

int hub_cluster_receive(struct hub_cluster *c, struct hub_cluster_rx *rx,
                        const char *rchan, size_t rchan_len,
                        const void *data, size_t len)
{
    struct hub_cluster_envelope e;
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
        track(c, rx, &e);
    } else if (rx && e.seq) {
        struct hub_cluster_envelope redis_seq = e;

        redis_seq.origin = "";
        redis_seq.origin_len = 0;
        track(c, rx, &redis_seq);
    }
    HUB_STAT_ADD_SHARED(c->stats.received, 1);
    if (e.kind == HUB_CLUSTER_ENV_CACHE)
        HUB_STAT_ADD_SHARED(c->stats.cache_received, 1);
    if (!c->hub)
        return 0;
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed && e.kind == HUB_CLUSTER_ENV_CACHE &&
        (unsigned)app < c->n_apps)
        hub__cluster_cache_apply(c->hub, &c->apps[app], &e, e.ttl_ms, true);
    else if (!c->closed)
        deliver(c, (unsigned)app, &e);
    pthread_mutex_unlock(&c->deliver_mu);
    return 0;
}
