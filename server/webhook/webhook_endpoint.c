/*
 * server/webhook/webhook_endpoint.c - the sender's endpoints (an endpoint
 * is one webhook of one app) and their FIFOs of batches
 * (server/webhook/webhook_int.h): an endpoint made and retired, a batch
 * held at the tail or dropped at --webhook-max-pending (logged once per
 * episode), the head freed, the engine's bodies and the store's rows
 * turned into batches, and the store writes that follow a batch (pending
 * when made, within the round's transaction).
 *
 * Memory: the batches held are bounded by --webhook-max-pending bytes,
 * counted in held_bytes.
 *
 * Thread: the sender thread (and the main thread before the sender
 * starts and after it stopped).
 */
#include "server/webhook/webhook_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "server/config/config.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook_stream.h"

void srv__wh_store_tx(struct srv_wh *wh)
{
    if (wh->store && srv_wh_store_begin(wh->store))
        atomic_fetch_add(&wh->store_errors, 1);
    wh->dirty = true;
}

/* Keep batch b of ep in the store (pending), or count the store error. */
void srv__wh_store_add(struct srv_wh *wh, struct srv_wh_ep *ep,
                       struct srv_wh_batch *b)
{
    const struct srv_wh_row r = {
        .app = ep->app->id, .url = ep->conf->url, .idem = b->idem,
        .created_ms = b->created_ms, .n_events = b->n_events,
        .body = b->body, .len = b->len,
    };

    srv__wh_store_tx(wh);
    b->id = srv_wh_store_add(wh->store, &r);
    if (b->id < 0) {
        b->id = 0;
        atomic_fetch_add(&wh->store_errors, 1);
    }
}

static void depth_update(struct srv_wh_ep *ep)
{
    atomic_store_explicit(&ep->oldest_ms, ep->head ? ep->head->created_ms : 0,
                          memory_order_relaxed);
}

static void batch_free(struct srv_wh *wh, struct srv_wh_batch *b)
{
    wh->held_bytes -= b->len;
    for (unsigned i = 0; i < b->n_acks; i++)
        free(b->acks[i]);
    free(b->acks);
    free(b->body);
    free(b);
}

/* Hold b (taken) at the tail of ep, or drop it when the cap is reached. */
bool srv__wh_ep_push(struct srv_wh_ep *ep, struct srv_wh_batch *b)
{
    struct srv_wh *wh = ep->wh;

    if (wh->held_bytes + b->len > wh->cfg->webhook_max_pending) {
        atomic_fetch_add(&ep->dropped, 1);
        if (!wh->dropping)
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "webhook_dropping",
                                    .reason = "max_pending"),
                          "webhooks: pending batches reached --webhook-max-pending "
                          "(%" PRIu64 " bytes); new batches are dropped (counted "
                          "in webhook_dropped_total) until it drains",
                          (uint64_t)wh->cfg->webhook_max_pending);
        wh->dropping = true;
        for (unsigned i = 0; i < b->n_acks; i++)
            free(b->acks[i]);
        free(b->acks);
        free(b->body);
        free(b);
        return false;
    }
    wh->held_bytes += b->len;
    b->next = NULL;
    *ep->tail = b;
    ep->tail = &b->next;
    atomic_fetch_add(&ep->depth, 1);
    depth_update(ep);
    return true;
}

void srv__wh_ep_pop(struct srv_wh_ep *ep)
{
    struct srv_wh_batch *b = ep->head;

    ep->head = b->next;
    if (!ep->head)
        ep->tail = &ep->head;
    atomic_fetch_sub(&ep->depth, 1);
    depth_update(ep);
    batch_free(ep->wh, b);
    if (ep->wh->dropping && ep->wh->held_bytes <
                                ep->wh->cfg->webhook_max_pending / 2) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "webhook_dropping",
                                .reason = "stopped"),
                      "webhooks: pending batches below half of "
                      "--webhook-max-pending; no longer dropping");
        ep->wh->dropping = false;
    }
}

/* The engine made a body for (app, hook). */
void srv__wh_on_emit(void *ctx, struct hub_wh_out *out)
{
    struct srv_wh *wh = ctx;
    struct srv_wh_ep *ep = wh->eps[wh->ep_base[out->app] + out->hook];
    struct srv_wh_batch *b = calloc(1, sizeof(*b));

    if (!b) {
        free(out->body);
        atomic_fetch_add(&ep->dropped, 1);
        return;
    }
    b->body = out->body;
    b->len = out->len;
    b->n_events = out->n_events;
    snprintf(b->idem, sizeof(b->idem), "%s", out->batch_id);
    b->created_ms = srv__wh_wall_ms();
    if (!srv__wh_ep_push(ep, b))
        return;
    if (wh->store)
        srv__wh_store_add(wh, ep, b);
}

/* url without its userinfo and query, which often carry secrets: what
 * logs, /stats and /metrics show. Owned; NULL when out of memory. */
static char *shown_url(const char *url)
{
    const char *host = strstr(url, "://"), *at, *end;
    size_t n = strlen(url);
    char *out = malloc(n + 8), *o = out;

    if (!out)
        return NULL;
    host = host ? host + 3 : url;
    end = host + strcspn(host, "/?#");
    at = memchr(host, '@', (size_t)(end - host));
    memcpy(o, url, (size_t)(host - url));
    o += host - url;
    if (at) {
        memcpy(o, "***@", 4);
        o += 4;
        host = at + 1;
    }
    n = strcspn(host, "?#");
    memcpy(o, host, n);
    o += n;
    if (host[n] == '?') {
        memcpy(o, "?***", 4);
        o += 4;
    }
    *o = '\0';
    return out;
}

static struct srv_wh_ep *find_ep(struct srv_wh *wh, const char *app,
                                 const char *url)
{
    for (unsigned i = 0; i < wh->n_eps; i++)
        if (!strcmp(wh->eps[i]->app->id, app) &&
            !strcmp(wh->eps[i]->conf->url, url))
            return wh->eps[i];
    return NULL;
}

/* A row of the store, at start or from a replay. */
void srv__wh_on_row(void *ctx, const struct srv_wh_row *r)
{
    struct srv_wh *wh = ctx;
    struct srv_wh_ep *ep = find_ep(wh, r->app, r->url);
    struct srv_wh_batch *b;

    if (!ep) {
        atomic_fetch_add(&wh->orphans, 1);
        return;
    }
    b = calloc(1, sizeof(*b));
    if (b)
        b->body = malloc(r->len + 1);
    if (!b || !b->body) {
        free(b);
        atomic_fetch_add(&ep->dropped, 1);
        return;
    }
    memcpy(b->body, r->body, r->len);
    b->body[r->len] = '\0';
    b->len = r->len;
    b->id = r->id;
    b->n_events = r->n_events;
    b->created_ms = r->created_ms;
    snprintf(b->idem, sizeof(b->idem), "%s", r->idem);
    srv__wh_ep_push(ep, b);
}

struct srv_wh_ep *srv__wh_ep_new(struct srv_wh *wh, const struct hub_app *app,
                                 const struct hub_wh_conf *conf)
{
    struct srv_wh_ep *ep = calloc(1, sizeof(*ep));

    if (!ep)
        return NULL;
    ep->wh = wh;
    ep->app = app;
    ep->conf = conf;
    ep->shown = shown_url(conf->url);
    if (!ep->shown) {
        free(ep);
        return NULL;
    }
    ep->tail = &ep->head;
    atomic_init(&ep->up, true);
    if (srv_wh_stream_ep_init(wh, ep)) {
        free(ep->shown);
        free(ep);
        return NULL;
    }
    return ep;
}

/* Free ep and its batches; returns how many it held. With why (a
 * reload removed the endpoint) the stored ones become dead letters with
 * why as their error, so --webhook-replay can still send them. */
unsigned srv__wh_ep_retire(struct srv_wh *wh, struct srv_wh_ep *ep,
                           const char *why)
{
    uint64_t wall = srv__wh_wall_ms();
    unsigned n = 0;

    if (ep->easy) {
        if (ep->in_flight)
            curl_multi_remove_handle(wh->multi, ep->easy);
        curl_easy_cleanup(ep->easy);
    }
    curl_slist_free_all(ep->hdrs);
    srv__wh_mac_drop(ep);
    /* From the cluster's stream: what is read but not yet batched becomes
     * a batch, to be dead-lettered with the rest. */
    if (why)
        srv_wh_stream_ep_flush(wh, ep);
    while (ep->head) {
        struct srv_wh_batch *b = ep->head;

        /* A stream batch is stored only when it becomes a dead letter. */
        if (why && wh->store && b->acks && !b->id)
            srv__wh_store_add(wh, ep, b);
        if (why && wh->store && b->id) {
            srv__wh_store_tx(wh);
            if (srv_wh_store_dead(wh->store, b->id, wall, b->attempts, why))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        /* Its entries leave the group's pending list (the lease holder
         * then destroys the group, server/webhook/webhook_stream.c). */
        if (why && b->acks && srv_wh_stream_holds(wh, ep))
            srv_wh_stream_done(wh, ep, b);
        n++;
        srv__wh_ep_pop(ep);
    }
    srv_wh_stream_ep_fini(ep);
    free(ep->shown);
    free(ep);
    return n;
}
