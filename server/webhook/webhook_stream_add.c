/*
 * server/webhook/webhook_stream_add.c - client events and cache misses to
 * the cluster's webhook stream (server/webhook/webhook_stream.h): the
 * events the sender popped from the loops' queue are XADDed to their app's
 * stream P:wh:<app> by one script per event
 * (server/redis/lua/wh_stream_add.lua: refused and counted at
 * --webhook-stream-max entries), sent as EVALSHA (loaded at connect,
 * webhook_stream.c), pipelined PIPELINE at a time. What Redis does not
 * take (not connected, no answer) goes back to the local engine, as do
 * the edges (the directory's scripts queue those); what it answers
 * NOSCRIPT (not run) goes again as EVAL in the same take.
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

static bool to_stream(const struct hub_wh_event *ev)
{
    return ev->type == HUB_WH_CLIENT_EVENT || ev->type == HUB_WH_CACHE_MISS;
}

/* Queue one event's XADD script on the pipeline (EVALSHA when its SHA is
 * loaded, EVAL when eval or not); 0 or -1. */
static int append_one(struct srv_whs *z, const char *app,
                      const struct hub_wh_event *ev, bool eval)
{
    char kw[512], kn[512], bound[16];
    const char *av[18];
    const char *sid = hub_wh_event_socket_id(ev);
    int n = 0;

    if (srv__wh_stream_key(kw, sizeof(kw), z, "wh", app) ||
        srv__wh_stream_key(kn, sizeof(kn), z, "whn", app))
        return -1;
    snprintf(bound, sizeof(bound), "%u", z->max_entries);
    srv__wh_stream_script(z, SRV_WHS_ADD, eval, av); /* KEYS wh whn; */
    n = 2;                                          /* ARGV bound f v ... */
    av[n++] = "2";
    av[n++] = kw;
    av[n++] = kn;
    av[n++] = bound;
    av[n++] = "name";
    av[n++] = hub_wh_type_name(ev->type);
    av[n++] = "channel";
    av[n++] = ev->channel;
#define F(name, v)                                                             \
    if (v) {                                                                   \
        av[n++] = name;                                                        \
        av[n++] = v;                                                           \
    }
    F("user_id", ev->user_id)
    F("event", ev->event)
    F("data", ev->data)
    F("socket_id", sid)
#undef F
    /* The command is formatted into the connection's buffer at once. */
    return srv_redis_sync_append(z->rc, n, av, NULL);
}

#define PIPELINE 256               /* events per round trip */

/* The replies to the ns events of sent, in order: an event Redis took is
 * freed; one it did not answer goes to *kt (the local engine sends it: if
 * the XADD ran all the same, the receiver gets it twice); one answered
 * NOSCRIPT (the script did not run) goes to again[]. Their count. */
static unsigned take_replies(struct srv_whs *z, struct hub_wh_event **sent,
                             unsigned ns, struct hub_wh_event ***kt,
                             struct hub_wh_event **again)
{
    unsigned na = 0;

    for (unsigned i = 0; i < ns; i++) {
        redisReply *r = NULL;

        if (z->rc && srv_redis_sync_take(z->rc, &r) != 0) {
            r = NULL;
            srv__wh_stream_lost(z);
        }
        if (r && r->type == REDIS_REPLY_INTEGER) {
            /* 0: refused at the bound, counted by the lease holder. */
            if (r->integer == 1)
                HUB_STAT_ADD(z->added, 1);
            free(sent[i]);
        } else if (srv__wh_stream_is_noscript(r)) {
            again[na++] = sent[i];
        } else {
            **kt = sent[i];
            *kt = &sent[i]->next;
        }
        freeReplyObject(r);
    }
    return na;
}

struct hub_wh_event *srv_wh_stream_take(struct srv_wh *wh,
                                        struct hub_wh_event *l)
{
    struct srv_whs *z = wh->whs;
    struct hub_wh_event *keep = NULL, **kt = &keep, *ev, *next;
    struct hub_wh_event *sent[PIPELINE], *again[PIPELINE];

    if (!z || !l)
        return l;
    srv__wh_stream_connect(z, srv_now_ms());
    while (l) {
        unsigned ns = 0, na;

        for (ev = l; ev && ns < PIPELINE; ev = next) {
            next = ev->next;
            ev->next = NULL;
            if (z->rc && to_stream(ev) && ev->app < wh->view->n &&
                wh->view->apps[ev->app].id &&
                append_one(z, wh->view->apps[ev->app].id, ev, false) == 0) {
                sent[ns++] = ev;
                continue;
            }
            *kt = ev;
            kt = &ev->next;
        }
        l = ev;
        na = take_replies(z, sent, ns, &kt, again);
        if (!na)
            continue;
        /* Redis lost the script (SCRIPT FLUSH, a failover to a replica
         * that never loaded it): those events were not added, so they
         * go again, once, as EVAL, which cannot answer NOSCRIPT; any
         * other failure sends them to the local engine as above. */
        srv__wh_stream_noscript(z, SRV_WHS_ADD);
        ns = 0;
        for (unsigned i = 0; i < na; i++) {
            if (z->rc && append_one(z, wh->view->apps[again[i]->app].id,
                                    again[i], true) == 0) {
                sent[ns++] = again[i];
                continue;
            }
            *kt = again[i];
            kt = &again[i]->next;
        }
        na = take_replies(z, sent, ns, &kt, again);
        for (unsigned i = 0; i < na; i++) {
            *kt = again[i];
            kt = &again[i]->next;
        }
    }
    return keep;
}
