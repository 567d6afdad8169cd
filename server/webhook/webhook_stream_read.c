/*
 * server/webhook/webhook_stream_read.c - an endpoint's side of the
 * cluster's webhook stream (server/webhook/webhook_stream.h): its stream
 * state made and freed; its consumer group created and every pending
 * entry claimed when the app's lease is taken (XAUTOCLAIM); the entries
 * read (XREADGROUP: this consumer's pending list first, then new ones)
 * into an open batch, which becomes a batch in the endpoint's FIFO when
 * full or after the batch window; and the XACK of a batch once it is
 * delivered or dead-lettered (at once for entries the endpoint's filter
 * does not take).
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

#include "hub/webhook/encode.h"

#define CLAIM_ROUNDS 1000          /* XAUTOCLAIM pages per takeover */
#define MAX_FIFO 2                 /* stream batches waiting per endpoint */

static void ep_clear(struct srv_wh_stream_ep *x)
{
    for (unsigned i = 0; i < x->n; i++) {
        free(x->ev[i]);
        free(x->id[i]);
    }
    x->n = 0;
}

int srv_wh_stream_ep_init(struct srv_wh *wh, struct srv_wh_ep *ep)
{
    if (!wh->whs)
        return 0;
    ep->whs = calloc(1, sizeof(*ep->whs));
    if (!ep->whs)
        return -1;
    hub_wh_stream_group(ep->conf->url, ep->whs->group);
    return 0;
}

void srv_wh_stream_ep_fini(struct srv_wh_ep *ep)
{
    if (!ep->whs)
        return;
    ep_clear(ep->whs);
    free(ep->whs);
    ep->whs = NULL;
}

/* Acks. */

static void xack(struct srv_whs *z, const char *app, const char *group,
                 char *const *ids, unsigned n)
{
    char k[512];
    const char **av;
    redisReply *r;

    if (!n || !z->rc || srv__wh_stream_key(k, sizeof(k), z, "wh", app))
        return;
    av = calloc(n + 3, sizeof(*av));
    if (!av)
        return;                    /* stays pending: sent again later */
    av[0] = "XACK";
    av[1] = k;
    av[2] = group;
    for (unsigned i = 0; i < n; i++)
        av[3 + i] = ids[i];
    r = srv__wh_stream_cmd(z, (int)n + 3, av, NULL);
    if (r && r->type == REDIS_REPLY_INTEGER)
        HUB_STAT_ADD(z->acked, (uint64_t)r->integer);
    freeReplyObject(r);
    free(av);
}

bool srv_wh_stream_holds(const struct srv_wh *wh, const struct srv_wh_ep *ep)
{
    const struct srv_whs *z = wh->whs;

    return z && ep->app->index < z->n_apps && z->apps[ep->app->index].held;
}

void srv_wh_stream_done(struct srv_wh *wh, struct srv_wh_ep *ep,
                        struct srv_wh_batch *b)
{
    if (!wh->whs || !ep->whs || !b->acks)
        return;
    srv__wh_stream_connect(wh->whs, srv_now_ms());
    xack(wh->whs, ep->app->id, ep->whs->group, b->acks, b->n_acks);
}

/* Batches. */

static uint64_t fnv(uint64_t h, const char *z)
{
    for (; *z; z++)
        h = (h ^ (unsigned char)*z) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;
}

/* ev[from..from+n) of x become one batch of ep; they leave x. */
static void make_batch(struct srv_wh *wh, struct srv_wh_ep *ep, unsigned from,
                       unsigned n, uint64_t now)
{
    struct srv_wh_stream_ep *x = ep->whs;
    char ids[HUB_WHS_READ_COUNT][HUB_WH_MAX_ID];
    const char *idp[HUB_WHS_READ_COUNT];
    struct srv_wh_batch *b = calloc(1, sizeof(*b));
    unsigned m = 0;
    uint64_t h;

    (void)now;
    for (unsigned i = 0; i < n; i++) {
        hub_wh_stream_event_id(ep->app->id, x->id[from + i], ids[i],
                               sizeof(ids[i]));
        idp[i] = ids[i];
    }
    if (b)
        b->acks = calloc(n, sizeof(*b->acks));
    if (b && b->acks)
        b->body = hub_wh_encode_ids((const struct hub_wh_event *const *)
                                    &x->ev[from],
                                    idp, n, NULL, srv__wh_wall_ms(), &b->len,
                                    &m);
    if (!b || !b->acks || !b->body) {
        /* Out of memory: the entries stay pending and are read again. */
        if (b)
            free(b->acks);
        free(b);
        x->history = true;
        snprintf(x->cursor, sizeof(x->cursor), "0");
        for (unsigned i = 0; i < n; i++) {
            free(x->ev[from + i]);
            free(x->id[from + i]);
        }
        return;
    }
    h = fnv(fnv(fnv(14695981039346656037ull, ep->app->id), x->group),
            x->id[from]);
    h = fnv(h, x->id[from + n - 1]);
    snprintf(b->idem, sizeof(b->idem), "s%016" PRIx64 "-%u", h, n);
    b->n_events = m;
    b->created_ms = srv__wh_wall_ms();
    for (unsigned i = 0; i < n; i++) {
        free(x->ev[from + i]);
        b->acks[i] = x->id[from + i];
    }
    b->n_acks = n;
    if (!wh->push(ep, b)) {
        /* Dropped at --webhook-max-pending (counted): still pending in
         * Redis, read again from our list. */
        x->history = true;
        snprintf(x->cursor, sizeof(x->cursor), "0");
    }
}

static void flush_open(struct srv_wh *wh, struct srv_wh_ep *ep, uint64_t now,
                       bool force)
{
    struct srv_wh_stream_ep *x = ep->whs;

    if (!x->n)
        return;
    if (!ep->app->webhook_batching) {
        for (unsigned i = 0; i < x->n; i++)
            make_batch(wh, ep, i, 1, now);
        x->n = 0;
        return;
    }
    if (force || x->n >= HUB_WHS_READ_COUNT ||
        now - x->first_ms >= HUB_WH_BATCH_MS) {
        make_batch(wh, ep, 0, x->n, now);
        x->n = 0;
    }
}

static unsigned stream_batches(const struct srv_wh_ep *ep)
{
    unsigned n = 0;

    for (const struct srv_wh_batch *b = ep->head; b; b = b->next)
        if (b->acks)
            n++;
    return n;
}

/* Is id in the batch in flight (read again from our pending list)? */
static bool in_flight(const struct srv_wh_ep *ep, const char *id)
{
    if (!ep->in_flight || !ep->head || !ep->head->acks)
        return false;
    for (unsigned i = 0; i < ep->head->n_acks; i++)
        if (!strcmp(ep->head->acks[i], id))
            return true;
    return false;
}

/* Forget the stream batches ep holds but is not sending, and what is
 * open: the lease changed hands, they are pending in Redis. */
void srv__wh_stream_ep_abandon(struct srv_wh *wh, struct srv_wh_ep *ep)
{
    struct srv_wh_batch **pp = &ep->head, *b;

    ep_clear(ep->whs);
    ep->whs->grouped = false;
    while ((b = *pp)) {
        if (b->acks && !(b == ep->head && ep->in_flight)) {
            *pp = b->next;
            wh->held_bytes -= b->len;
            atomic_fetch_sub(&ep->depth, 1);
            for (unsigned i = 0; i < b->n_acks; i++)
                free(b->acks[i]);
            free(b->acks);
            free(b->body);
            free(b);
            continue;
        }
        pp = &b->next;
    }
    ep->tail = &ep->head;
    for (b = ep->head; b; b = b->next)
        ep->tail = &b->next;
    atomic_store_explicit(&ep->oldest_ms, ep->head ? ep->head->created_ms : 0,
                          memory_order_relaxed);
}

void srv_wh_stream_ep_flush(struct srv_wh *wh, struct srv_wh_ep *ep)
{
    if (wh->whs && ep->whs)
        flush_open(wh, ep, srv_now_ms(), true);
}

/* Claims and reads. */

/* Take every pending entry of ep's group (creating the group). */
static void claim(struct srv_whs *z, struct srv_wh_ep *ep, const char *k)
{
    struct srv_wh_stream_ep *x = ep->whs;
    char cur[48] = "0-0";
    redisReply *r;
    const struct srv_wh_stream_app *a = &z->apps[ep->app->index];
    const char *mk[6] = { "XGROUP", "CREATE", k, x->group,
                          a->start ? a->start : "0", "MKSTREAM" };

    /* BUSYGROUP when it exists; anything else shows in the next read. */
    freeReplyObject(srv__wh_stream_cmd(z, 6, mk, NULL));
    for (unsigned round = 0; z->rc && round < CLAIM_ROUNDS; round++) {
        const char *cv[10] = { "XAUTOCLAIM", k, x->group, z->node, "0", cur,
                               "COUNT", "1000", "JUSTID" };

        r = srv__wh_stream_cmd(z, 9, cv, NULL);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
            r->element[0]->type != REDIS_REPLY_STRING) {
            freeReplyObject(r);
            return;
        }
        if (r->element[1]->type == REDIS_REPLY_ARRAY)
            HUB_STAT_ADD(z->claimed, r->element[1]->elements);
        snprintf(cur, sizeof(cur), "%s", r->element[0]->str);
        freeReplyObject(r);
        if (!strcmp(cur, "0-0"))
            break;
    }
    if (!z->rc)
        return;
    x->grouped = true;
    x->history = true;
    snprintf(x->cursor, sizeof(x->cursor), "0");
}

/* A cache_miss of a channel already missed in the open batch: one event
 * per channel per batch, as on one node. */
static bool dup_miss(const struct srv_wh_stream_ep *x,
                     const struct hub_wh_event *ev)
{
    if (ev->type != HUB_WH_CACHE_MISS)
        return false;
    for (unsigned i = 0; i < x->n; i++)
        if (x->ev[i]->type == HUB_WH_CACHE_MISS &&
            !strcmp(x->ev[i]->channel, ev->channel))
            return true;
    return false;
}

/* Read for ep (its lease held): into x, batches when due. */
void srv__wh_stream_read(struct srv_wh *wh, struct srv_wh_ep *ep, const char *k,
                         uint64_t now)
{
    struct srv_whs *z = wh->whs;
    struct srv_wh_stream_ep *x = ep->whs;
    char count[8], *nack[HUB_WHS_READ_COUNT];
    unsigned n_nack = 0;
    redisReply *r, *list;

    if (!x->grouped)
        claim(z, ep, k);
    if (!x->grouped || !z->rc)
        return;
    flush_open(wh, ep, now, false);
    if (stream_batches(ep) >= MAX_FIFO || x->n >= HUB_WHS_READ_COUNT)
        return;
    snprintf(count, sizeof(count), "%u", HUB_WHS_READ_COUNT - x->n);
    {
        const char *av[9] = { "XREADGROUP", "GROUP", x->group, z->node,
                              "COUNT", count, "STREAMS", k,
                              x->history ? x->cursor : ">" };

        r = srv__wh_stream_cmd(z, 9, av, NULL);
    }
    if (!r)
        return;
    if (r->type == REDIS_REPLY_ERROR) {
        /* NOGROUP: the stream was deleted; create it again next round. */
        x->grouped = false;
        freeReplyObject(r);
        return;
    }
    list = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                   r->element[0]->type == REDIS_REPLY_ARRAY &&
                   r->element[0]->elements >= 2
               ? r->element[0]->element[1]
               : NULL;
    if (x->history && (!list || list->type != REDIS_REPLY_ARRAY ||
                       !list->elements))
        x->history = false;        /* our pending list is read: now new */
    for (size_t i = 0; list && list->type == REDIS_REPLY_ARRAY &&
                       i < list->elements;
         i++) {
        const redisReply *e = list->element[i], *id, *fv;
        const char *f[32];
        size_t fl[32], nf = 0;
        struct hub_wh_event *ev = NULL;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        id = e->element[0];
        fv = e->element[1];
        if (x->history)
            snprintf(x->cursor, sizeof(x->cursor), "%s", id->str);
        HUB_STAT_ADD(z->read, 1);
        if (in_flight(ep, id->str))
            continue;
        for (size_t j = 0; fv->type == REDIS_REPLY_ARRAY &&
                           j < fv->elements && nf < 32;
             j++) {
            if (fv->element[j]->type != REDIS_REPLY_STRING)
                break;
            f[nf] = fv->element[j]->str;
            fl[nf++] = fv->element[j]->len;
        }
        if (nf)
            ev = hub_wh_stream_event(ep->app->index, f, fl, nf);
        if (!ev || !hub_wh_matches(ep->conf, ev->type, ev->channel) ||
            dup_miss(x, ev)) {
            /* Not for this endpoint (or trimmed, or malformed, or a
             * repeated cache miss): done. */
            free(ev);
            if ((nack[n_nack] = strdup(id->str)))
                n_nack++;
            continue;
        }
        if (!(x->id[x->n] = strdup(id->str))) {
            free(ev);
            continue;
        }
        if (!x->n)
            x->first_ms = now;
        x->ev[x->n++] = ev;
        if (x->n >= HUB_WHS_READ_COUNT)
            break;
    }
    freeReplyObject(r);
    xack(z, ep->app->id, x->group, nack, n_nack);
    for (unsigned i = 0; i < n_nack; i++)
        free(nack[i]);
    flush_open(wh, ep, now, false);
}
