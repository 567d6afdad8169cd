/*
 * hub/cluster/cluster_cache.c - the cluster-wide cache of cache channels
 * (hub/cluster/cluster_cache.h): the broker channel and Redis key names, the
 * remaining life of a CACHE op, and a cache envelope into this node's
 * replica (hub/channel/cache.h), received from another node or loaded from
 * Redis.
 *
 * Thread: the backplane thread.
 */
#include "hub/cluster/cluster_cache.h"

#include <errno.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/channel/cache.h"
#include "hub/cluster/cluster_int.h"
#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"
#include "hub/loop/loop.h"
#include "hub/channel/history.h"
#include "hub/loop/publish.h"
#include "timer/clock.h"

int hub__cluster_cache_apply(struct hub *h, const struct hub_app *app,
                             const struct hub_cluster_envelope *e,
                             uint64_t ttl_ms, bool deliver)
{
    uint64_t cap = app->cache_max_bytes ? app->cache_max_bytes
                                        : h->cfg->cache_max_bytes;
    struct hub_cache *cache = hub_cache_of(h);
    struct hub_frame *f;
    int rc;

    if (e->kind != HUB_CLUSTER_ENV_CACHE || !ttl_ms || !cache)
        return -EINVAL;
    f = hub_frame_create_text(e->data, e->data_len);
    if (!f)
        return -ENOMEM;
    hub_history_stamp(hub_history_of(h), f, e->hist_origin,
                      e->hist_origin_len, e->hist_seq);
    if (deliver) {
        struct hub_skip ex = { .set = e->excl_set, .hi = e->excl_hi,
                               .lo = e->excl_lo, .member_seq = 0 };
        const struct hub_pub_req r = { app->index, e->channel,
                                       e->channel_len, f, &ex, false, NULL };

        hub_fanout_loops(h, NULL, &r);
    }
    /* After the fan-out, as on the publishing node: a subscriber joining
     * in between gets the older event first, then this one. */
    rc = hub_cache_store(cache, app->index, e->channel, e->channel_len, f,
                         hub_clock_now_ms(h->clock), ttl_ms, cap, NULL);
    hub_frame_unref(f);
    return rc;
}

/*
 * e read from Redis with pttl_ms left: kept unless the replica already
 * holds an entry of the channel that lives at least as long (a newer
 * event, received while the load was under way: every entry of an app
 * has the same TTL, so the later store expires later). 1 when kept, 0
 * when the replica's was, -ENOMEM.
 */
static int cache_keep(struct hub *h, const struct hub_app *app,
                      const struct hub_cluster_envelope *e, uint64_t pttl_ms)
{
    struct hub_cache *cache = hub_cache_of(h);
    uint64_t left = 0;
    struct hub_frame *f;
    int rc;

    if (!cache)
        return -EINVAL;
    f = hub_cache_get(cache, app->index, e->channel, e->channel_len,
                      hub_clock_now_ms(h->clock), &left);
    if (f) {
        hub_frame_unref(f);
        if (left >= pttl_ms)
            return 0;
    }
    rc = hub__cluster_cache_apply(h, app, e, pttl_ms, false);
    return rc ? rc : 1;
}

const char *hub_cluster_cache_channel(const struct hub_cluster *c,
                                      size_t *len)
{
    *len = c->cache_chan_len;
    return c->cache_chan;
}

const char *hub_cluster_cache_pattern(const struct hub_cluster *c)
{
    return c->cache_pattern;
}

uint64_t hub_cluster_op_ttl(const struct hub_cluster *c,
                            const struct hub_cluster_op *op)
{
    uint64_t now;

    if (!c->hub)
        return op->expire_ms ? op->expire_ms : 0;
    now = hub_clock_now_ms(c->hub->clock);
    return op->expire_ms > now ? op->expire_ms - now : 0;
}

/* key is "<prefix>:cache:<app>:<channel>" of e. */
static bool key_matches(const struct hub_cluster *c, const char *key,
                        size_t klen, const struct hub_cluster_envelope *e)
{
    size_t n = c->cache_chan_len;

    return key && klen == n + 1 + e->app_len + 1 + e->channel_len &&
           !memcmp(key, c->cache_chan, n) && key[n] == ':' &&
           !memcmp(key + n + 1, e->app, e->app_len) &&
           key[n + 1 + e->app_len] == ':' &&
           !memcmp(key + n + 2 + e->app_len, e->channel, e->channel_len);
}

int hub_cluster_load(struct hub_cluster *c, const char *key, size_t key_len,
                     const void *data, size_t len, uint64_t pttl_ms)
{
    struct hub_cluster_envelope e;
    const struct hub_app *app;
    int rc = hub__cluster_open_env(c, &e, data, len, false);

    /* Stored state: the MAC is checked, not its age (a cache entry may
     * be older than the window; its PTTL bounds it). */
    if (rc == -EACCES) {
        hub__cluster_key_drop(c, rc, e.origin, e.origin_len, "a cache entry");
        return -EINVAL;
    }
    if (rc || e.kind != HUB_CLUSTER_ENV_CACHE ||
        !hub_channel_is_cache(e.channel, e.channel_len) ||
        !key_matches(c, key, key_len, &e) ||
        !(app = hub_app_find_by_id(c->apps, c->n_apps, e.app, e.app_len))) {
        HUB_STAT_ADD_SHARED(c->stats.bad, 1);
        return -EINVAL;
    }
    rc = 0;
    if (!pttl_ms || !c->hub)
        return 0;
    /* This node's own entries too: with a fixed --node-id, a restarted
     * node finds what it wrote before. */
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed && cache_keep(c->hub, app, &e, pttl_ms) == 1) {
        HUB_STAT_ADD_SHARED(c->stats.cache_loaded, 1);
        rc = 1;
    }
    pthread_mutex_unlock(&c->deliver_mu);
    return rc;
}
