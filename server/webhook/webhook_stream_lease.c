/*
 * server/webhook/webhook_stream_lease.c - the cluster's webhook stream,
 * app by app (server/webhook/webhook_stream.h): the round the sender runs
 * every ROUND_MS. Per app with webhooks: its lease P:whl:<app> (SET NX PX
 * --node-lease, renewed a third of the way; wh_stream_lease.lua) says
 * which node consumes its stream; the holder counts the stream's drops
 * (logged once per episode), moves due delayed edges from P:whd:<app> to
 * the stream (wh_stream_pump.lua), reads each endpoint
 * (webhook_stream_read.c) and trims (webhook_stream_trim.c). An app a
 * reload removed or disabled gives its lease up and lets its keys expire
 * (wh_stream_retire.lua). The scripts are files of server/redis/lua/,
 * embedded at build time (server/redis/redis_lua.h).
 *
 * Thread: the sender thread.
 */
#include "server/webhook/webhook_stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "hub/app/app.h"
#include "hub/loop/stats.h"
#include "server/lws/srv.h"
#include "server/redis/redis_lua.h"

#define ROUND_MS 100               /* reads and the pump, while holding */
#define TRIM_MS 1000
#define PUMP_LIMIT "200"           /* delayed edges moved per round */
/* The keys of an app no node sends for any more (removed or disabled by
 * a reload) expire this long after its last holder let it go, unless a
 * node that still has it takes the lease (which PERSISTs them). */
#define RETIRE_TTL_S 3600

/* The drop counter of the app's stream: counted and logged once per
 * episode by the lease holder. */
static void drops(struct srv_wh *wh, unsigned ai, const char *app)
{
    struct srv_whs *z = wh->whs;
    struct srv_wh_stream_app *a = &z->apps[ai];
    char k[512];
    redisReply *r;
    long long v;

    if (srv__wh_stream_key(k, sizeof(k), z, "whn", app))
        return;
    {
        const char *av[3] = { "HGET", k, "dropped" };

        r = srv__wh_stream_cmd(z, 3, av, NULL);
    }
    if (!r)
        return;
    v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    if (!a->drop_base) {
        a->drop_base = true;
        a->drop_seen = v;
        return;
    }
    if (v > a->drop_seen) {
        HUB_STAT_ADD(z->dropped, (uint64_t)(v - a->drop_seen));
        if (!a->dropping)
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "webhook_dropping", .app = app,
                                    .reason = "max_stream"),
                          "webhooks: app %s: its redis stream holds %u entries; "
                          "new events are dropped (counted in "
                          "webhook_stream_dropped_total) until it drains",
                          app, z->max_entries);
        a->dropping = true;
    } else if (a->dropping) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "webhook_dropping", .app = app,
                                .reason = "stopped"),
                      "webhooks: app %s: its redis stream takes "
                      "events again", app);
        a->dropping = false;
    }
    a->drop_seen = v;
}

/* Has the stream k a consumer group (no: it is new, or none of its
 * endpoints has read it yet)? An error counts as none. */
static bool has_groups(struct srv_whs *z, const char *k)
{
    const char *av[3] = { "XINFO", "GROUPS", k };
    redisReply *r = srv__wh_stream_cmd(z, 3, av, NULL);
    bool yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0;

    freeReplyObject(r);
    return yes;
}

/* Slot ai of the apps no longer has webhooks in the view (a reload
 * removed or disabled the app): give its lease up and let its keys
 * expire, unless another node holds the lease. Tried each renewal
 * period until done. */
static void app_retire(struct srv_wh *wh, unsigned ai, uint64_t now)
{
    struct srv_whs *z = wh->whs;
    struct srv_wh_stream_app *a = &z->apps[ai];
    char kl[512], kw[512], kd[512], kn[512];
    redisReply *r;

    if (now < a->renew_ms)
        return;
    a->renew_ms = now + z->lease_ms / 3;
    /* The same id again at another index (removed, then added back):
     * that slot has the app's keys now. */
    for (unsigned i = 0; i < wh->view->n; i++)
        if (i != ai && wh->view->apps[i].id && wh->view->apps[i].n_webhooks &&
            !strcmp(wh->view->apps[i].id, a->id))
            goto forget;
    if (srv__wh_stream_key(kl, sizeof(kl), z, "whl", a->id) ||
        srv__wh_stream_key(kw, sizeof(kw), z, "wh", a->id) ||
        srv__wh_stream_key(kd, sizeof(kd), z, "whd", a->id) ||
        srv__wh_stream_key(kn, sizeof(kn), z, "whn", a->id))
        goto forget;
    {
        char ttl[24];
        const char *av[9] = {"EVAL", srv_redis_lua_wh_stream_retire,
                             "4",    kl,
                             kw,     kd,
                             kn,     z->node,
                             ttl};

        snprintf(ttl, sizeof(ttl), "%u", RETIRE_TTL_S * 1000u);

        r = srv__wh_stream_cmd(z, 9, av, NULL);
    }
    if (!r)
        return;
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        freeReplyObject(r);
        return;                    /* another node holds it: later */
    }
    freeReplyObject(r);
    HUB_STAT_ADD(z->released, 1);
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "webhook_lease", .app = a->id,
                            .reason = "retired"),
                  "webhooks: app %s: no longer has webhooks here; %sits redis "
                  "keys expire in %u s unless a node that has it takes the lease",
                  a->id, a->held ? "released its webhook lease; " : "",
                  RETIRE_TTL_S);
forget:
    if (a->held)
        HUB_STAT_ADD(z->held, (uint64_t)-1);
    free(a->id);
    memset(a, 0, sizeof(*a));
}

static void app_round(struct srv_wh *wh, unsigned ai, uint64_t now)
{
    struct srv_whs *z = wh->whs;
    struct srv_wh_stream_app *a = &z->apps[ai];
    const struct hub_app *app = &wh->view->apps[ai];
    char kl[512], kw[512], kd[512], kn[512];
    unsigned first = wh->ep_base[ai], n = app->n_webhooks;
    redisReply *r;

    if (!a->id && !(a->id = strdup(app->id)))
        return;                    /* out of memory: next round */
    if (srv__wh_stream_key(kl, sizeof(kl), z, "whl", app->id) ||
        srv__wh_stream_key(kw, sizeof(kw), z, "wh", app->id) ||
        srv__wh_stream_key(kd, sizeof(kd), z, "whd", app->id) ||
        srv__wh_stream_key(kn, sizeof(kn), z, "whn", app->id))
        return;
    if (now >= a->renew_ms) {
        /* Renew (1), take (2) or not (0). */
        const char *av[9] = {"EVAL",      srv_redis_lua_wh_stream_lease,
                             "4",         kl,
                             kw,          kd,
                             kn,          z->node,
                             z->lease_txt};
        bool had = a->held, took;

        r = srv__wh_stream_cmd(z, 9, av, NULL);
        if (!r)
            return;
        a->held = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
        /* 2: it was free, so another holder may have come and gone. */
        took = a->held && (!had || r->integer == 2);
        freeReplyObject(r);
        a->renew_ms = now + z->lease_ms / 3;
        if (took || a->held != had) {
            srv_log_event(HUB_LOG_INFO, 0,
                          HUB_LOG_F(.event = "webhook_lease", .app = app->id,
                                    .reason = a->held ? "taken" : "lost"),
                          a->held ? "webhooks: app %s: took its webhook lease; "
                          "this node sends its webhooks"
                          : "webhooks: app %s: lost its webhook lease; "
                          "another node sends its webhooks",
                          app->id);
            for (unsigned j = 0; j < n; j++)
                if (wh->eps[first + j]->whs)
                    srv__wh_stream_ep_abandon(wh, wh->eps[first + j]);
            if (a->held != had)
                HUB_STAT_ADD(z->held, a->held ? 1 : (uint64_t)-1);
            a->drop_base = false;
        }
        if (a->held)
            drops(wh, ai, app->id);
    }
    if (!a->held || !z->rc)
        return;
    for (unsigned j = 0; j < n; j++)
        if (wh->eps[first + j]->whs && !wh->eps[first + j]->whs->grouped) {
            a->start = has_groups(z, kw) ? "$" : "0";
            break;
        }
    {
        const char *av[8] = {
            "EVAL",    srv_redis_lua_wh_stream_pump, "3", kd, kw, kn, NULL,
            PUMP_LIMIT};
        char bound[16];

        snprintf(bound, sizeof(bound), "%u", z->max_entries);
        av[6] = bound;
        freeReplyObject(srv__wh_stream_cmd(z, 8, av, NULL));
    }
    for (unsigned j = 0; z->rc && j < n; j++)
        if (wh->eps[first + j]->whs)
            srv__wh_stream_read(wh, wh->eps[first + j], kw, now);
    if (z->rc && now >= a->trim_ms) {
        a->trim_ms = now + TRIM_MS;
        srv__wh_stream_trim(wh, ai, kw);
    }
}

uint64_t srv_wh_stream_round(struct srv_wh *wh, uint64_t now)
{
    struct srv_whs *z = wh->whs;

    if (!z)
        return UINT64_MAX;
    if (now < z->round_ms)
        return z->round_ms - now;
    z->round_ms = now + ROUND_MS;
    if (wh->view->n > z->n_apps) {
        struct srv_wh_stream_app *na =
            realloc(z->apps, wh->view->n * sizeof(*na));

        if (!na)
            return ROUND_MS;
        memset(na + z->n_apps, 0, (wh->view->n - z->n_apps) * sizeof(*na));
        z->apps = na;
        z->n_apps = wh->view->n;
    }
    if (!srv__wh_stream_connect(z, now))
        return ROUND_MS;
    for (unsigned i = 0; z->rc && i < wh->view->n; i++) {
        if (wh->view->apps[i].id && wh->view->apps[i].n_webhooks) {
            z->apps[i].retiring = false;
            app_round(wh, i, now);
        } else if (z->apps[i].id) {
            /* Had webhooks here before a reload. */
            if (!z->apps[i].retiring)
                z->apps[i].renew_ms = 0;
            z->apps[i].retiring = true;
            app_retire(wh, i, now);
        }
    }
    return ROUND_MS;
}
