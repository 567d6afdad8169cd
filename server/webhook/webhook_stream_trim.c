/*
 * server/webhook/webhook_stream_trim.c - the cluster's webhook stream kept
 * short (server/webhook/webhook_stream.h): the lease holder trims an
 * app's stream to the oldest entry a configured endpoint's group still
 * needs (XTRIM MINID: its first pending entry, else its last delivered
 * one), and destroys the groups of webhooks no longer configured here
 * (the holder's config decides), so they neither linger nor hold the
 * stream. At most MAX_STALE groups per pass. In each group of its own it
 * drops the consumers of other nodes that hold no pending entry
 * (server/redis/lua/wh_stream_consumers.lua), at most MAX_STALE a group
 * per pass: a group keeps a consumer per node id that read it, and ids
 * change at each restart, so this is what bounds them.
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

#define MAX_STALE 16               /* groups destroyed per trim pass */

/* One group as XINFO GROUPS describes it. */
struct group {
    const char *name, *last;       /* borrowed from the reply; may be NULL */
    long long pending, lag;        /* lag -1: Redis cannot tell */
};

/* Group o of an XINFO GROUPS reply. */
static struct group group_of(const redisReply *o)
{
    struct group g = { NULL, NULL, 0, -1 };

    for (size_t j = 0; o->type == REDIS_REPLY_ARRAY && j + 1 < o->elements;
         j += 2) {
        const redisReply *f = o->element[j], *v = o->element[j + 1];

        if (f->type != REDIS_REPLY_STRING)
            continue;
        if (!strcmp(f->str, "name") && v->type == REDIS_REPLY_STRING)
            g.name = v->str;
        else if (!strcmp(f->str, "pending") && v->type == REDIS_REPLY_INTEGER)
            g.pending = v->integer;
        else if (!strcmp(f->str, "last-delivered-id") &&
                 v->type == REDIS_REPLY_STRING)
            g.last = v->str;
        else if (!strcmp(f->str, "lag") && v->type == REDIS_REPLY_INTEGER)
            g.lag = v->integer;
    }
    return g;
}

/* Is name the group of an endpoint of app ai configured here? Only those
 * count: a removed webhook's group does not hold the stream forever. */
static bool ours(const struct srv_wh *wh, unsigned ai, const char *name)
{
    for (unsigned e = 0; e < wh->n_eps; e++)
        if (wh->eps[e]->app->index == ai && wh->eps[e]->whs &&
            !strcmp(wh->eps[e]->whs->group, name))
            return true;
    return false;
}

/* The oldest entry group g of stream k still needs into cand (its first
 * pending entry, else its last delivered one); false when Redis did not
 * say (nothing may be trimmed then). */
static bool needed(struct srv_whs *z, const char *k, const struct group *g,
                   char *cand, size_t n)
{
    const char *pv[3] = { "XPENDING", k, g->name };
    redisReply *p;

    snprintf(cand, n, "%s", g->last);
    if (g->pending <= 0)
        return true;
    p = srv__wh_stream_cmd(z, 3, pv, NULL);
    if (p && p->type == REDIS_REPLY_ARRAY && p->elements >= 2 &&
        p->element[1]->type == REDIS_REPLY_STRING)
        snprintf(cand, n, "%s", p->element[1]->str);
    else
        cand[0] = '\0';
    freeReplyObject(p);
    return cand[0] != '\0';
}

/* min becomes the older of min ("" for none) and the entry id cand. */
static void keep_older(char *min, size_t n, const char *cand)
{
    unsigned long long a1 = 0, a2 = 0, b1 = 0, b2 = 0;

    sscanf(cand, "%llu-%llu", &a1, &a2);
    sscanf(min, "%llu-%llu", &b1, &b2);
    if (!min[0] || a1 < b1 || (a1 == b1 && a2 < b2))
        snprintf(min, n, "%s", cand);
}

/* Drop the consumers of group g of stream k that other nodes left behind
 * with nothing pending (an error shows in the next pass). */
static void drop_idle_consumers(struct srv_whs *z, const char *k,
                                const char *g)
{
    char max[16];
    const char *av[7] = { "EVAL", srv_redis_lua_wh_stream_consumers, "1", k,
                          g, z->node, max };

    snprintf(max, sizeof(max), "%d", MAX_STALE);
    freeReplyObject(srv__wh_stream_cmd(z, 7, av, NULL));
}

/* The stale groups of one trim pass. */
struct stale {
    char name[MAX_STALE][HUB_WHS_GROUP_LEN];
    long long pending[MAX_STALE], lag[MAX_STALE];
    unsigned n;
};

/* Destroy the stale groups of app ai's stream k (counted, logged). */
static void destroy_stale(struct srv_wh *wh, unsigned ai, const char *k,
                          const struct stale *st)
{
    struct srv_whs *z = wh->whs;

    for (unsigned i = 0; i < st->n && z->rc; i++) {
        const char *dv[4] = { "XGROUP", "DESTROY", k, st->name[i] };
        redisReply *d = srv__wh_stream_cmd(z, 4, dv, NULL);

        if (d && d->type == REDIS_REPLY_INTEGER && d->integer > 0) {
            HUB_STAT_ADD(z->destroyed, 1);
            /* lag: entries it had not read (-1: Redis cannot tell). */
            srv_log_event(HUB_LOG_INFO, 0,
                          HUB_LOG_F(.event = "webhook_removed",
                                    .app = wh->view->apps[ai].id),
                          "webhooks: app %s: destroyed consumer group %s of a "
                          "webhook no longer configured (%lld pending, %lld unread "
                          "entries not sent to it)",
                          wh->view->apps[ai].id, st->name[i], st->pending[i],
                          st->lag[i]);
        }
        freeReplyObject(d);
    }
}

/* Drop the entries every group of the app has acknowledged. */
void srv__wh_stream_trim(struct srv_wh *wh, unsigned ai, const char *k)
{
    struct srv_whs *z = wh->whs;
    char min[48] = "";
    struct stale st;
    redisReply *r;
    const char *av[3] = { "XINFO", "GROUPS", k };

    st.n = 0;
    r = srv__wh_stream_cmd(z, 3, av, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY || !r->elements) {
        freeReplyObject(r);
        return;
    }
    for (size_t i = 0; i < r->elements; i++) {
        struct group g = group_of(r->element[i]);
        bool mine = g.name && ours(wh, ai, g.name);
        char cand[48];

        if (!mine && g.name && !strncmp(g.name, "wh-", 3) &&
            strlen(g.name) < HUB_WHS_GROUP_LEN && st.n < MAX_STALE) {
            /* A webhook no longer configured here (the holder's config
             * decides): its group goes, so it neither lingers nor is
             * counted by anyone's trimming. */
            snprintf(st.name[st.n], HUB_WHS_GROUP_LEN, "%s", g.name);
            st.pending[st.n] = g.pending;
            st.lag[st.n++] = g.lag;
        }
        if (mine)
            drop_idle_consumers(z, k, g.name);
        if (!mine || !g.last)
            continue;
        if (!needed(z, k, &g, cand, sizeof(cand))) {
            freeReplyObject(r);
            return;
        }
        keep_older(min, sizeof(min), cand);
    }
    freeReplyObject(r);
    destroy_stale(wh, ai, k, &st);
    if (min[0] && z->rc) {
        const char *tv[4] = { "XTRIM", k, "MINID", min };

        freeReplyObject(srv__wh_stream_cmd(z, 4, tv, NULL));
    }
}
