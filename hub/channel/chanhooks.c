/*
 * hub/channel/chanhooks.c - cache channels and subscription counts on the
 * subscribe, leave and publish paths (hub/channel/chanhooks.h).
 */
#include "hub/channel/chanhooks.h"

#include <errno.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/channel/cache.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"
#include "hub/channel/subcount.h"
#include "hub/webhook/queue.h"
#include "timer/clock.h"

static uint64_t app_ttl_ms(const struct hub_loop *l, const struct hub_app *a)
{
    return a->cache_ttl_ms ? a->cache_ttl_ms : l->cfg->cache_ttl_ms;
}

static uint64_t app_cap(const struct hub_loop *l, const struct hub_app *a)
{
    return a->cache_max_bytes ? a->cache_max_bytes : l->cfg->cache_max_bytes;
}

static bool counted(const struct hub_app *app, enum hub_channel_kind kind)
{
    return app->subscription_count && kind != HUB_CHANNEL_PRESENCE &&
           kind != HUB_CHANNEL_USER;
}

/*
 * The cache_miss webhook (Pusher sends one when a client subscribes to a
 * cache channel with nothing cached): queued for the webhook sender
 * (hub/webhook/queue.h; nothing happens unless the app wants it), which
 * drops a second miss of the same channel within one batch window.
 */
static void cache_miss_webhook(struct hub_loop *l, const struct hub_app *app,
                               const char *name, size_t len)
{
    hub_wh_cache_miss(l->hub, app->index, name, len);
}

/* The cached event, or pusher:cache_miss, as s's first event on name. */
static void send_cached(struct hub_session *s, const char *name, size_t len)
{
    struct hub_loop *l = s->loop;
    struct hub_frame *f = hub_cache_get(hub_cache_of(l->hub), s->app->index,
                                        name, len, hub_clock_now_ms(l->clock),
                                        NULL);
    bool hit = f != NULL;
    int rc;

    if (!f) {
        cache_miss_webhook(l, s->app, name, len);
        /* name is the subscription's NUL-terminated copy. */
        f = hub_proto_event_frame("pusher:cache_miss", name, NULL, 0, NULL);
    }
    rc = f ? hub_session_send(s, f) : -ENOMEM;
    if (f)
        hub_frame_unref(f);
    if (rc == -ENOMEM && s->state == HUB_SESSION_OPEN) {
        /* A client told neither would wait for its state forever. */
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        return;
    }
    if (hit)
        HUB_STAT_ADD(l->stats.cache_hits, 1);
    else
        HUB_STAT_ADD(l->stats.cache_misses, 1);
}

void hub_chanhooks_joined(struct hub_session *s, const char *name, size_t len,
                          enum hub_channel_kind kind, bool resumed)
{
    if (hub_channel_is_cache(name, len) && !resumed)
        send_cached(s, name, len);
    if (counted(s->app, kind))
        hub_subcount_changed(s->loop, s->app->index, name, len);
}

void hub_chanhooks_left(struct hub_loop *l, const struct hub_app *app,
                        const char *name, size_t len,
                        enum hub_channel_kind kind)
{
    if (counted(app, kind))
        hub_subcount_changed(l, app->index, name, len);
}

void hub_chanhooks_published(struct hub_loop *l, const struct hub_app *app,
                             const char *name, size_t len,
                             struct hub_frame *f)
{
    struct hub_cache_put put = { 0, false };
    int rc;

    if (!hub_channel_is_cache(name, len))
        return;
    rc = hub_cache_store(hub_cache_of(l->hub), app->index, name, len, f,
                         hub_clock_now_ms(l->clock), app_ttl_ms(l, app),
                         app_cap(l, app), &put);
    /* The subscribers have the event; only the cache lost it (and the
     * older one): counted, not answered as a failure, so the publisher
     * does not send it twice. */
    if (rc)
        HUB_STAT_ADD(l->stats.cache_nomem, 1);
    else if (!put.oversize)
        HUB_STAT_ADD(l->stats.cache_stores, 1);
    if (put.oversize)
        HUB_STAT_ADD(l->stats.cache_oversize, 1);
    if (put.evicted)
        HUB_STAT_ADD(l->stats.cache_evictions, put.evicted);
}

json_t *hub_chanhooks_cache_info(struct hub_loop *l, const struct hub_app *app,
                                 const char *name, size_t len)
{
    uint64_t left = 0;
    struct hub_frame *f = hub_cache_get(hub_cache_of(l->hub), app->index,
                                        name, len, hub_clock_now_ms(l->clock),
                                        &left);
    json_t *ev, *o = NULL;

    if (!f)
        return json_null();
    /* The frame's payload is the event as sent: read its data back. */
    ev = json_loadb(hub_frame_payload(f), f->payload_len, 0, NULL);
    hub_frame_unref(f);
    if (ev && json_object_get(ev, "data"))
        o = json_pack("{s:O,s:I}", "data", json_object_get(ev, "data"),
                      "ttl", (json_int_t)((left + 999) / 1000));
    json_decref(ev);
    return o;
}
