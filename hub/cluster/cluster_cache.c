/*
 * hub/cluster/cluster_cache.c - a cache envelope into this node's replica (hub/cluster/cluster_cache.h).
 */
#include "hub/cluster/cluster_cache.h"

#include <errno.h>

#include "hub/app/app.h"
#include "hub/channel/cache.h"
#include "hub/wire/frame.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "timer/clock.h"

int hub_ccache_apply(struct hub *h, const struct hub_app *app,
                     const struct hub_envelope *e, uint64_t ttl_ms,
                     bool deliver)
{
    uint64_t cap = app->cache_max_bytes ? app->cache_max_bytes
                                        : h->cfg->cache_max_bytes;
    struct hub_frame *f;
    int rc;

    if (e->kind != HUB_ENV_CACHE || !ttl_ms || !h->cache)
        return -EINVAL;
    f = hub_frame_create_text(e->data, e->data_len);
    if (!f)
        return -ENOMEM;
    if (deliver) {
        struct hub_excl ex = { .set = e->excl_set, .hi = e->excl_hi,
                               .lo = e->excl_lo, .member_seq = 0 };
        const struct hub_pub_req r = { app->index, e->channel,
                                       e->channel_len, f, &ex };

        hub_fanout_loops(h, NULL, &r);
    }
    /* After the fan-out, as on the publishing node: a subscriber joining
     * in between gets the older event first, then this one. */
    rc = hub_cache_store(h->cache, app->index, e->channel, e->channel_len, f,
                         hub_clock_now_ms(h->clock), ttl_ms, cap, NULL);
    hub_frame_unref(f);
    return rc;
}

int hub_ccache_load(struct hub *h, const struct hub_app *app,
                    const struct hub_envelope *e, uint64_t pttl_ms)
{
    uint64_t left = 0;
    struct hub_frame *f;
    int rc;

    if (!h->cache)
        return -EINVAL;
    f = hub_cache_get(h->cache, app->index, e->channel, e->channel_len,
                      hub_clock_now_ms(h->clock), &left);
    if (f) {
        hub_frame_unref(f);
        if (left >= pttl_ms)
            return 0;
    }
    rc = hub_ccache_apply(h, app, e, pttl_ms, false);
    return rc ? rc : 1;
}
