/*
 * hub/cluster/cluster_deliver.c - a checked envelope delivered to this node's
 * loops (hub__cluster_deliver_env, hub/cluster/cluster_int.h): an event or a
 * cache event (kept in the node's replica too), a terminate order, a count
 * notice; under deliver_mu, nothing once the cluster is closed. Called by
 * the receiving side (cluster_rx.c) and by recovery's gap fill
 * (cluster_fill.c) for what it held.
 *
 * Thread: the backplane thread.
 */
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/channel/history.h"
#include "hub/channel/subcount.h"
#include "hub/cluster/cluster_cache.h"
#include "hub/cluster/cluster_envelope.h"
#include "hub/cluster/cluster_int.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"

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

void hub__cluster_deliver_env(struct hub_cluster *c, unsigned app,
                              const struct hub_cluster_envelope *e)
{
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed && e->kind == HUB_CLUSTER_ENV_CACHE && app < c->n_apps)
        hub__cluster_cache_apply(c->hub, &c->apps[app], e, e->ttl_ms, true);
    else if (!c->closed)
        deliver(c, app, e);
    pthread_mutex_unlock(&c->deliver_mu);
}
