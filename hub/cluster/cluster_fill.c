/*
 * hub/cluster/cluster_fill.c - recovery's gap fill on the receiving side
 * (hub/cluster/cluster.h, "gap fill"): when a broker channel's sequence of
 * one origin skips (Redis pub/sub lost a message) and the message after
 * the hole carries a history id, the node reads the channel's stream,
 * delivers that origin's entries it lacks (seqs between the last it
 * delivered and the one that arrived), then what it held meanwhile, in
 * order: one origin's events keep reaching every session in seq order,
 * which is what a resuming client's position relies on.
 *
 * Held messages are bounded (FILL_MAX_HELD messages, FILL_MAX_BYTES
 * bytes): past either the fill is given up and what was held goes at once
 * (the hole stays, counted in gaps as before).
 *
 * Thread: the backplane thread.
 */
#include <stdlib.h>
#include <string.h>

#include "hub/channel/history.h"
#include "hub/cluster/cluster_envelope.h"
#include "hub/cluster/cluster_int.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/wire/frame.h"

#define FILL_MAX_HELD 10000
#define FILL_MAX_BYTES (16u * 1024 * 1024)

/* A message held behind a fill: its envelope, pointers into buf. */
struct hub_cluster_held {
    struct hub_cluster_held *next;
    struct hub_cluster_envelope e;
    unsigned app;
    bool gap;                      /* a hole came before it (another fill) */
    size_t len;
    unsigned char buf[];
};

void hub_cluster_set_fill(struct hub_cluster *c,
                          int (*fn)(void *ctx, struct hub_cluster_fill *req),
                          void *ctx)
{
    c->fill_fn = fn;
    c->fill_ctx = ctx;
}

void hub_cluster_fill_free(struct hub_cluster_fill *req)
{
    if (!req)
        return;
    free(req->rchan);
    free(req->origin);
    free(req);
}

/* p (inside [base, base + len)) moved into buf. */
static const void *rebase(const void *p, const void *base, unsigned char *buf)
{
    return p ? buf + ((const unsigned char *)p - (const unsigned char *)base)
             : NULL;
}

/* The span of e's bytes in its message: from data to its payload's end
 * or its last field's, whichever is further. */
static size_t span(const struct hub_cluster_envelope *e, const void *data)
{
    const unsigned char *base = data, *end = base;
    const unsigned char *ends[] = {
        (const unsigned char *)e->origin + e->origin_len,
        (const unsigned char *)e->app + e->app_len,
        (const unsigned char *)e->channel + e->channel_len,
        e->data ? e->data + e->data_len : NULL,
        e->hist_origin ? (const unsigned char *)e->hist_origin +
                             e->hist_origin_len
                       : NULL,
    };

    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
        if (ends[i] && ends[i] > end)
            end = ends[i];
    return (size_t)(end - base);
}

/* Keep a copy of e behind o's fill; false when past the bounds or out of
 * memory (nothing kept). */
static bool hold(struct hub_cluster_origin *o, unsigned app,
                 const struct hub_cluster_envelope *e, const void *data,
                 bool gap)
{
    size_t len = span(e, data);
    struct hub_cluster_held *h;

    if (o->n_held >= FILL_MAX_HELD || o->held_bytes + len > FILL_MAX_BYTES)
        return false;
    h = malloc(sizeof(*h) + len);
    if (!h)
        return false;
    memcpy(h->buf, data, len);
    h->e = *e;
    h->e.origin = rebase(e->origin, data, h->buf);
    h->e.app = rebase(e->app, data, h->buf);
    h->e.channel = rebase(e->channel, data, h->buf);
    h->e.data = rebase(e->data, data, h->buf);
    h->e.hist_origin = rebase(e->hist_origin, data, h->buf);
    h->app = app;
    h->gap = gap;
    h->len = len;
    h->next = NULL;
    if (!o->held_tail)
        o->held_tail = &o->held;
    *o->held_tail = h;
    o->held_tail = &h->next;
    o->n_held++;
    o->held_bytes += len;
    return true;
}

/* Ask for the hole before h (o's last delivered seq to h's): true when a
 * read is on its way (o then fills). */
static bool start_fill(struct hub_cluster *c, struct hub_cluster_origin *o,
                       const char *rchan, size_t rchan_len,
                       const struct hub_cluster_held *h)
{
    const struct hub_cluster_envelope *e = &h->e;
    struct hub_cluster_fill *req;

    if (!e->hist_seq || !o->hlast || e->hist_seq <= o->hlast + 1 ||
        !c->fill_fn || !rchan || e->hist_origin_len > HUB_HIST_ORIGIN_MAX ||
        (e->kind != HUB_CLUSTER_ENV_EVENT && e->kind != HUB_CLUSTER_ENV_CACHE))
        return false;
    req = calloc(1, sizeof(*req));
    if (!req || !(req->rchan = malloc(rchan_len + 1)) ||
        !(req->origin = malloc(o->len + 1))) {
        hub_cluster_fill_free(req);
        return false;
    }
    memcpy(req->rchan, rchan, rchan_len);
    req->rchan[rchan_len] = '\0';
    req->rchan_len = rchan_len;
    memcpy(req->origin, o->id, o->len);
    req->origin[o->len] = '\0';
    req->origin_len = o->len;
    memcpy(req->horigin, e->hist_origin, e->hist_origin_len);
    req->horigin[e->hist_origin_len] = '\0';
    req->from = o->hlast;
    req->to = e->hist_seq;
    req->app = h->app;
    o->filling = true;
    if (c->fill_fn(c->fill_ctx, req)) {
        o->filling = false;
        hub_cluster_fill_free(req);
        return false;
    }
    return true;
}

/* Deliver what o holds, in order, and end its fill; a message that had
 * another hole before it (lost while the first was read) starts that
 * fill first, and what follows stays held for it. */
static void release(struct hub_cluster *c, struct hub_cluster_origin *o,
                    const char *rchan, size_t rchan_len)
{
    struct hub_cluster_held *h;

    o->filling = false;
    while ((h = o->held)) {
        if (h->gap) {
            h->gap = false;
            if (start_fill(c, o, rchan, rchan_len, h))
                return;
        }
        o->held = h->next;
        if (!o->held)
            o->held_tail = &o->held;
        o->n_held--;
        o->held_bytes -= h->len;
        hub__cluster_deliver_env(c, h->app, &h->e);
        if (h->e.hist_seq)
            o->hlast = h->e.hist_seq;
        free(h);
    }
}

/* Deliver everything o holds, in order, holes and all, and end its fill
 * (its read's answer, if it comes, finds nothing to fill). */
static void give_up(struct hub_cluster *c, struct hub_cluster_origin *o)
{
    struct hub_cluster_held *h;

    for (h = o->held; h; h = h->next)
        h->gap = false;
    release(c, o, NULL, 0);
}

void hub__cluster_fill_drop(struct hub_cluster_origin *o)
{
    struct hub_cluster_held *h = o->held, *next;

    for (; h; h = next) {
        next = h->next;
        free(h);
    }
    o->held = NULL;
    o->held_tail = &o->held;
    o->n_held = o->held_bytes = 0;
    o->filling = false;
}

bool hub__cluster_fill_take(struct hub_cluster *c,
                            struct hub_cluster_origin *o, const char *rchan,
                            size_t rchan_len, unsigned app,
                            const struct hub_cluster_envelope *e, bool gap,
                            const void *data)
{
    if (o->filling) {
        /* Behind the fill, with its own hole noted if it has one. */
        if (hold(o, app, e, data, gap))
            return true;
        /* Too much waits: give the hole up, in order still. */
        give_up(c, o);
        return false;
    }
    if (!gap || !hold(o, app, e, data, true))
        return false;
    /* e waits for its hole; release() starts the read, or delivers e at
     * once when none can be made (then e was not held for long). */
    release(c, o, rchan, rchan_len);
    return true;
}

/* One of the stream's entries, delivered as its origin delivered it. */
static void deliver_entry(struct hub_cluster *c, unsigned app,
                          const char *name, size_t len,
                          const struct hub_hist_entry *en)
{
    struct hub_skip ex = { .set = en->ex, .hi = en->ex_hi, .lo = en->ex_lo,
                           .member_seq = 0 };
    struct hub_frame *f = hub_frame_create_text(en->data, en->len);

    if (!f)
        return;
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed) {
        const struct hub_pub_req r = { app, name, len, f, &ex, false, NULL };

        /* Under the lock: once closed, the hub may be going. */
        hub_history_stamp(hub_history_of(c->hub), f, en->origin,
                          strlen(en->origin), en->seq);
        hub_fanout_loops(c->hub, NULL, &r);
    }
    pthread_mutex_unlock(&c->deliver_mu);
    hub_frame_unref(f);
}

void hub_cluster_fill_answer(struct hub_cluster *c, struct hub_cluster_rx *rx,
                             struct hub_cluster_fill *req,
                             const struct hub_hist_read *rd)
{
    struct hub_cluster_origin *o = NULL;
    const char *name;
    size_t plen, nlen;

    for (o = rx ? rx->origins : NULL; o; o = o->next)
        if (o->len == req->origin_len && !memcmp(o->id, req->origin, o->len))
            break;
    if (!o || !o->filling || !c->hub) {
        hub_cluster_fill_free(req);
        return;
    }
    /* "<prefix>:<app id>:<channel>": the channel after the second ':' past
     * the prefix (an app id holds no ':'). */
    plen = strlen(c->prefix) + 1;
    name = plen < req->rchan_len
               ? memchr(req->rchan + plen, ':', req->rchan_len - plen)
               : NULL;
    if (rd && !rd->rc && name) {
        name++;
        nlen = req->rchan_len - (size_t)(name - req->rchan);
        for (size_t i = 0; i < rd->n; i++) {
            const struct hub_hist_entry *en = &rd->e[i];

            if (strcmp(en->origin, req->horigin) || en->seq <= req->from ||
                en->seq >= req->to)
                continue;
            deliver_entry(c, req->app, name, nlen, en);
            HUB_STAT_ADD_SHARED(c->stats.gaps_filled, 1);
            o->hlast = en->seq;
        }
    }
    release(c, o, req->rchan, req->rchan_len);
    hub_cluster_fill_free(req);
}
