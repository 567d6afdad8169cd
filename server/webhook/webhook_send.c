/*
 * server/webhook/webhook_send.c - the webhook sender thread (server/webhook/webhook.h).
 *
 * One thread, never a loop: it pops the hub's webhook queue, runs the
 * engine (hub/webhook/webhook.h: delay, batching, filters, encoding), keeps one
 * FIFO of batches per endpoint (an endpoint is one webhook of one app),
 * and sends the head of each FIFO with libcurl's multi interface: at most
 * one request in flight per endpoint, so per-endpoint order holds, and
 * any number of endpoints in parallel, so a slow one holds up only
 * itself. Each endpoint keeps its easy handle, so its connection is kept
 * alive between requests.
 *
 * A batch is written to the store (when there is one) the moment the
 * engine makes it and deleted when a 2xx answers it; a failure retries
 * after hub_wh_backoff_ms() until the retry window since its creation is
 * over, then the batch moves to the dead letters. Response bodies are
 * read and thrown away up to a cap; past it the transfer is cut (the
 * status already read decides). Memory: the batches held are bounded by
 * --webhook-max-pending bytes; a batch past it is dropped, counted and
 * logged once per episode.
 */
#include "server/webhook/webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "hub/app/auth.h"
#include "hub/loop/backplane.h"
#include "hub/cluster/cluster.h"
#include "hub/base/rng.h"
#include "hub/webhook/webhook.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook_int.h"

#define BODY_CAP (64 * 1024)        /* response bytes read, then cut */
static const double lat_bounds_s[N_LAT] = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30, 300,
};

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t rnd(struct srv_wh *wh)
{
    return hub_xorshift64s(&wh->rng);
}

static void store_tx(struct srv_wh *wh)
{
    if (wh->store && srv_wh_store_begin(wh->store))
        atomic_fetch_add(&wh->store_errors, 1);
    wh->dirty = true;
}

/* Keep batch b of ep in the store (pending), or count the store error. */
static void store_add(struct srv_wh *wh, struct endpoint *ep,
                      struct batch *b)
{
    const struct srv_wh_row r = {
        .app = ep->app->id, .url = ep->conf->url, .idem = b->idem,
        .created_ms = b->created_ms, .n_events = b->n_events,
        .body = b->body, .len = b->len,
    };

    store_tx(wh);
    b->id = srv_wh_store_add(wh->store, &r);
    if (b->id < 0) {
        b->id = 0;
        atomic_fetch_add(&wh->store_errors, 1);
    }
}

static void depth_update(struct endpoint *ep)
{
    atomic_store_explicit(&ep->oldest_ms, ep->head ? ep->head->created_ms : 0,
                          memory_order_relaxed);
}

static void batch_free(struct srv_wh *wh, struct batch *b)
{
    wh->held_bytes -= b->len;
    for (unsigned i = 0; i < b->n_acks; i++)
        free(b->acks[i]);
    free(b->acks);
    free(b->body);
    free(b);
}

/* Hold b (taken) at the tail of ep, or drop it when the cap is reached. */
static bool ep_push(struct endpoint *ep, struct batch *b)
{
    struct srv_wh *wh = ep->wh;

    if (wh->held_bytes + b->len > wh->cfg->webhook_max_pending) {
        atomic_fetch_add(&ep->dropped, 1);
        if (!wh->dropping)
            srv_log(HUB_LOG_WARN, 0,
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

static void ep_pop(struct endpoint *ep)
{
    struct batch *b = ep->head;

    ep->head = b->next;
    if (!ep->head)
        ep->tail = &ep->head;
    atomic_fetch_sub(&ep->depth, 1);
    depth_update(ep);
    batch_free(ep->wh, b);
    if (ep->wh->dropping && ep->wh->held_bytes <
                                ep->wh->cfg->webhook_max_pending / 2) {
        srv_log(HUB_LOG_INFO, 0, "webhooks: pending batches below half of "
                                 "--webhook-max-pending; no longer dropping");
        ep->wh->dropping = false;
    }
}

/* The engine made a body for (app, hook). */
static void on_emit(void *ctx, struct hub_wh_out *out)
{
    struct srv_wh *wh = ctx;
    struct endpoint *ep = wh->eps[wh->ep_base[out->app] + out->hook];
    struct batch *b = calloc(1, sizeof(*b));

    if (!b) {
        free(out->body);
        atomic_fetch_add(&ep->dropped, 1);
        return;
    }
    b->body = out->body;
    b->len = out->len;
    b->n_events = out->n_events;
    snprintf(b->idem, sizeof(b->idem), "%s", out->batch_id);
    b->created_ms = wall_ms();
    if (!ep_push(ep, b))
        return;
    if (wh->store)
        store_add(wh, ep, b);
}

static size_t discard(char *p, size_t sz, size_t n, void *ctx)
{
    struct endpoint *ep = ctx;

    (void)p;
    ep->body_seen += sz * n;
    /* Past the cap: a short count makes curl stop (CURLE_WRITE_ERROR). */
    return ep->body_seen > BODY_CAP ? 0 : sz * n;
}

static void mac_drop(struct endpoint *ep)
{
    EVP_MAC_CTX_free(ep->mac);
    ep->mac = NULL;
    if (ep->mac_key) {
        explicit_bzero(ep->mac_key, strlen(ep->mac_key));
        free(ep->mac_key);
        ep->mac_key = NULL;
    }
}

/*
 * X-Pusher-Signature of body: what hub_auth_hmac_hex gives, from a context
 * kept per endpoint (OpenSSL's one-shot HMAC fetches and keys a new one
 * each call, a sixth of this thread's CPU at one POST per 20 events). A
 * reload that changes the secret re-keys it; any failure falls back to
 * the one-shot.
 */
static void sign(struct endpoint *ep, const char *body, size_t len,
                 char out[HUB_SHA256_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    const char *secret = ep->app->secret;
    unsigned char md[EVP_MAX_MD_SIZE];
    size_t md_len = 0;
    bool ok;

    if (ep->mac && !strcmp(ep->mac_key, secret)) {
        ok = EVP_MAC_init(ep->mac, NULL, 0, NULL);
    } else {
        EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                             (char *)"SHA256", 0),
            OSSL_PARAM_construct_end(),
        };

        mac_drop(ep);
        ep->mac = alg ? EVP_MAC_CTX_new(alg) : NULL;
        EVP_MAC_free(alg);
        ep->mac_key = strdup(secret);
        ok = ep->mac && ep->mac_key &&
             EVP_MAC_init(ep->mac, (const unsigned char *)secret,
                          strlen(secret), params);
        if (!ok)
            mac_drop(ep);
    }
    ok = ok && EVP_MAC_update(ep->mac, (const unsigned char *)body, len) &&
         EVP_MAC_final(ep->mac, md, &md_len, sizeof(md)) &&
         md_len == HUB_SHA256_HEX_LEN / 2;
    if (!ok) {
        mac_drop(ep);
        hub_auth_hmac_hex(secret, strlen(secret), body, len, out);
        return;
    }
    for (size_t i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * md_len] = '\0';
}

static void start_send(struct endpoint *ep, uint64_t now)
{
    struct srv_wh *wh = ep->wh;
    struct batch *b = ep->head;
    char sig[65], line[HUB_WH_MAX_HEADER_BYTES + 64];
    struct curl_slist *h = NULL, *t;
    bool ok = true;

    (void)now;
    sign(ep, b->body, b->len, sig);
#define ADD(text)                                                              \
    if (ok && (t = curl_slist_append(h, text)) != NULL)                        \
        h = t;                                                                 \
    else                                                                       \
        ok = false;
    ADD("Content-Type: application/json")
    ADD("Expect:")
    snprintf(line, sizeof(line), "X-Pusher-Key: %s", ep->app->key);
    ADD(line)
    snprintf(line, sizeof(line), "X-Pusher-Signature: %s", sig);
    ADD(line)
    snprintf(line, sizeof(line), "X-Lubdub-Idempotency-Key: %s", b->idem);
    ADD(line)
    snprintf(line, sizeof(line), "Idempotency-Key: %s", b->idem);
    ADD(line)
    for (unsigned i = 0; i < ep->conf->n_headers; i++) {
        ADD(ep->conf->headers[i])
    }
#undef ADD
    if (!ok) {
        curl_slist_free_all(h);
        b->next_ms = now + 1000;   /* out of memory: try again later */
        return;
    }
    if (!ep->easy) {
        ep->easy = curl_easy_init();
        if (!ep->easy) {
            curl_slist_free_all(h);
            b->next_ms = now + 1000;
            return;
        }
    }
    curl_easy_reset(ep->easy);
    curl_easy_setopt(ep->easy, CURLOPT_URL, ep->conf->url);
    curl_easy_setopt(ep->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(ep->easy, CURLOPT_POSTFIELDS, b->body);
    curl_easy_setopt(ep->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)b->len);
    curl_easy_setopt(ep->easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(ep->easy, CURLOPT_USERAGENT, "lubdub-webhooks");
    curl_easy_setopt(ep->easy, CURLOPT_TIMEOUT_MS,
                     (long)wh->cfg->webhook_timeout_ms);
    curl_easy_setopt(ep->easy, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)wh->cfg->webhook_timeout_ms);
    curl_easy_setopt(ep->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(ep->easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(ep->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(ep->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(ep->easy, CURLOPT_WRITEDATA, ep);
    curl_easy_setopt(ep->easy, CURLOPT_PRIVATE, ep);
    curl_easy_setopt(ep->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    if (wh->cfg->webhook_ca_file)
        curl_easy_setopt(ep->easy, CURLOPT_CAINFO, wh->cfg->webhook_ca_file);
    ep->hdrs = h;
    ep->body_seen = 0;
    if (b->attempts)
        atomic_fetch_add(&ep->retried, 1);
    if (curl_multi_add_handle(wh->multi, ep->easy) != CURLM_OK) {
        curl_slist_free_all(h);
        ep->hdrs = NULL;
        b->next_ms = now + 1000;
        return;
    }
    ep->in_flight = true;
}

static void latency(struct endpoint *ep, uint64_t ms)
{
    unsigned i = 0;

    while (i < N_LAT && (double)ms / 1000.0 > lat_bounds_s[i])
        i++;
    atomic_fetch_add(&ep->lat[i], 1);
    atomic_fetch_add(&ep->lat_sum_ms, ms);
    atomic_fetch_add(&ep->lat_count, 1);
}

static void finished(struct srv_wh *wh, CURL *easy, CURLcode res,
                     uint64_t now)
{
    struct endpoint *ep = NULL;
    struct batch *b;
    long code = 0;
    uint64_t wall = wall_ms();

    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&ep);
    curl_multi_remove_handle(wh->multi, easy);
    curl_slist_free_all(ep->hdrs);
    ep->hdrs = NULL;
    ep->in_flight = false;
    b = ep->head;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    if ((res == CURLE_OK || res == CURLE_WRITE_ERROR) && code >= 200 &&
        code < 300) {
        atomic_fetch_add(&ep->sent, 1);
        latency(ep, wall > b->created_ms ? wall - b->created_ms : 0);
        if (ep->failing)
            srv_log(HUB_LOG_INFO, 0, "webhook %s (app %s): up again",
                    ep->shown, ep->app->id);
        ep->failing = false;
        atomic_store(&ep->up, true);
        if (wh->store && b->id) {
            store_tx(wh);
            if (srv_wh_store_done(wh->store, b->id))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        if (b->acks)
            srv_whs_done(wh, ep, b);
        ep_pop(ep);
        return;
    }
    if (res != CURLE_OK && res != CURLE_WRITE_ERROR)
        snprintf(ep->last_err, sizeof(ep->last_err), "%s",
                 curl_easy_strerror(res));
    else
        snprintf(ep->last_err, sizeof(ep->last_err), "HTTP %ld", code);
    atomic_fetch_add(&ep->failed, 1);
    atomic_store(&ep->up, false);
    if (!ep->failing)
        srv_log(HUB_LOG_WARN, 0,
                "webhook %s (app %s): failing (%s); retrying with backoff",
                ep->shown, ep->app->id, ep->last_err);
    ep->failing = true;
    b->attempts++;
    if (b->acks && !srv_whs_holds(wh, ep)) {
        /* The app's lease went to another node, which sends the batch's
         * entries (still pending in Redis) from now on. */
        ep_pop(ep);
        return;
    }
    if (wall >= b->created_ms + wh->cfg->webhook_retry_window_ms) {
        srv_log(HUB_LOG_WARN, 0,
                "webhook %s (app %s): batch %s dead-lettered after %u "
                "attempts (%s)",
                ep->shown, ep->app->id, b->idem, b->attempts,
                ep->last_err);
        if (wh->store && b->acks && !b->id)
            store_add(wh, ep, b); /* from the cluster's stream: not stored yet */
        if (wh->store && b->id) {
            /* Committed now, not with the round: dead_lettered must never
             * count a letter that --webhook-dead-letters (another process,
             * reading the store) cannot list yet. Rare; the round's other
             * writes go with it. */
            store_tx(wh);
            if (srv_wh_store_dead(wh->store, b->id, wall, b->attempts,
                                  ep->last_err) ||
                srv_wh_store_commit(wh->store))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        if (b->acks)
            srv_whs_done(wh, ep, b);
        ep_pop(ep);
        /* Counted once it has left the queue (ep_pop's depth first): a
         * reader of dead_lettered before queue_depth never sees a batch
         * both dead-lettered and still queued. */
        atomic_fetch_add(&ep->dead, 1);
        return;
    }
    b->next_ms = now + hub_wh_backoff_ms(b->attempts,
                                         wh->cfg->webhook_backoff_max_ms < 1000
                                             ? wh->cfg->webhook_backoff_max_ms
                                             : 1000,
                                         wh->cfg->webhook_backoff_max_ms,
                                         rnd(wh));
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

static struct endpoint *find_ep(struct srv_wh *wh, const char *app,
                                const char *url)
{
    for (unsigned i = 0; i < wh->n_eps; i++)
        if (!strcmp(wh->eps[i]->app->id, app) &&
            !strcmp(wh->eps[i]->conf->url, url))
            return wh->eps[i];
    return NULL;
}

/* A row of the store, at start or from a replay. */
static void on_row(void *ctx, const struct srv_wh_row *r)
{
    struct srv_wh *wh = ctx;
    struct endpoint *ep = find_ep(wh, r->app, r->url);
    struct batch *b;

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
    ep_push(ep, b);
}

static uint64_t mono_ms(void)
{
    return srv_now_ms();
}

/* Shutdown: how long the sender keeps sending after the loops are gone. */
#define SRV_WH_STOP_GRACE_MS 2000

/* Is a batch in flight, or due and not failing (worth the grace)? */
static bool any_ready(const struct srv_wh *wh)
{
    for (unsigned i = 0; i < wh->n_eps; i++) {
        const struct endpoint *ep = wh->eps[i];

        if (ep->in_flight || (ep->head && !ep->failing))
            return true;
    }
    return false;
}

struct wh_view;
static int apply_view(struct srv_wh *wh, struct wh_view *v, bool start);

static void *sender_main(void *arg)
{
    struct srv_wh *wh = arg;
    uint64_t stop_deadline = 0;

    for (;;) {
        uint64_t now = mono_ms(), wall = wall_ms(), due, wait = 1000;
        struct hub_wh_event *list = hub_whq_pop_all(&wh->q);
        bool stopping = atomic_load(&wh->stop);
        int running = 0, left;
        uint32_t room, queued;
        struct wh_view *nv;
        CURLMsg *msg;

        /* After the pop: an event of an app a reload added was queued
         * after the view that knows the app was handed over. */
        pthread_mutex_lock(&wh->mu);
        nv = wh->next_view;
        wh->next_view = NULL;
        pthread_mutex_unlock(&wh->mu);
        if (nv)
            apply_view(wh, nv, false);

        /* With --redis, client events and cache misses go to the app's
         * stream (server/webhook/webhook_stream.c); the rest to the engine. */
        if (wh->whs && !stopping)
            list = srv_whs_take(wh, list);
        hub_wh_engine_advance(wh->eng, now, wall);
        hub_wh_engine_feed(wh->eng, list, now);
        due = hub_wh_engine_advance(wh->eng, now, wall);
        if (due < wait)
            wait = due;
        if (wh->whs && !stopping) {
            due = srv_whs_round(wh, now);
            if (due < wait)
                wait = due;
        }
        {
            struct hub_wh_engine_stats es;

            hub_wh_engine_get_stats(wh->eng, &es);
            atomic_store(&wh->edges_cancelled, es.cancelled);
            atomic_store(&wh->edges_delayed, es.delayed);
            atomic_store(&wh->events_batched, es.events);
            atomic_store(&wh->events_oom, es.oom);
        }
        if (stopping && !stop_deadline) {
            /* Everything the engine holds becomes batches (stored when
             * durable), then a short grace to send what can be sent. */
            hub_wh_engine_flush(wh->eng, wall);
            stop_deadline = now + SRV_WH_STOP_GRACE_MS;
        }
        if (stop_deadline && (now >= stop_deadline || !any_ready(wh)))
            break;
        if (wh->store && now - wh->last_replay_ms >= 2000) {
            /* Dead letters an operator replayed (--webhook-replay). */
            wh->last_replay_ms = now;
            store_tx(wh);
            if (srv_wh_store_take_replays(wh->store, wall_ms(), on_row, wh))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        for (unsigned i = 0; i < wh->n_eps; i++) {
            struct endpoint *ep = wh->eps[i];

            if (ep->in_flight || !ep->head)
                continue;
            if (ep->head->next_ms <= now)
                start_send(ep, now);
            else if (ep->head->next_ms - now < wait)
                wait = ep->head->next_ms - now;
        }
        curl_multi_perform(wh->multi, &running);
        while ((msg = curl_multi_info_read(wh->multi, &left)))
            if (msg->msg == CURLMSG_DONE)
                finished(wh, msg->easy_handle, msg->data.result, now);
        if (wh->store) {
            if (srv_wh_store_commit(wh->store))
                atomic_fetch_add(&wh->store_errors, 1);
            if (wh->dirty && now - wh->last_checkpoint_ms >= 1000) {
                srv_wh_store_checkpoint(wh->store);
                wh->last_checkpoint_ms = now;
                wh->dirty = false;
            }
        }
        atomic_store(&wh->held_bytes_pub, wh->held_bytes);
        /* A send made ready by a finish above starts next round. */
        for (unsigned i = 0; i < wh->n_eps; i++)
            if (!wh->eps[i]->in_flight && wh->eps[i]->head &&
                wh->eps[i]->head->next_ms <= now)
                wait = 0;
        /* While a batch is open, events that arrive can wait a tick: the
         * loops wake this thread once per batch's worth instead of once
         * per event (one wake, and one preemption of a loop sharing the
         * core, per client event otherwise). Stopping: at once. */
        room = stop_deadline ? 0 : hub_wh_engine_room(wh->eng);
        queued = hub_whq_set_room(&wh->q, room);
        if (queued && queued >= (room ? room : 1))
            wait = 0;
        else if (room && wait > HUB_WH_LAZY_MS)
            wait = HUB_WH_LAZY_MS;
        curl_multi_poll(wh->multi, NULL, 0, (int)(wait > 1000 ? 1000 : wait),
                        NULL);
    }
    if (wh->store) {
        srv_wh_store_commit(wh->store);
        srv_wh_store_checkpoint(wh->store);
    }
    return NULL;
}

static void wake(void *ctx)
{
    curl_multi_wakeup(ctx);
}

static void view_free(struct wh_view *v)
{
    if (!v)
        return;
    for (unsigned i = 0; i < v->n; i++) {
        free(v->apps[i].id);
        free(v->apps[i].key);
        free(v->apps[i].secret);
        hub_app_webhooks_free(&v->apps[i]);
    }
    free(v->apps);
    free(v);
}

/* The sender's copy of apps[0..n) in a view of n_index app indices:
 * apps[j] goes to idx[j]->index (j when idx is NULL). Only what the
 * sender reads: id, key, secret, enabled and the webhooks (none for a
 * disabled app: its webhooks stop with it). NULL when out of memory. */
static struct wh_view *view_new(const struct hub_app *apps,
                                struct hub_app *const *idx, unsigned n,
                                unsigned n_index)
{
    struct wh_view *v = calloc(1, sizeof(*v));

    if (!v)
        return NULL;
    v->apps = calloc(n_index ? n_index : 1, sizeof(*v->apps));
    if (!v->apps) {
        free(v);
        return NULL;
    }
    v->n = n_index;
    for (unsigned i = 0; i < n_index; i++)
        v->apps[i].index = i;
    for (unsigned j = 0; j < n; j++) {
        unsigned i = idx ? idx[j]->index : j;
        struct hub_app *d = &v->apps[i];

        if (i >= n_index)
            continue;
        d->enabled = apps[j].enabled;
        d->id = strdup(apps[j].id);
        d->key = strdup(apps[j].key);
        d->secret = strdup(apps[j].secret);
        if (!d->id || !d->key || !d->secret ||
            (d->enabled && hub_app_webhooks_copy(d, &apps[j]))) {
            view_free(v);
            return NULL;
        }
    }
    return v;
}

static struct endpoint *ep_new(struct srv_wh *wh, const struct hub_app *app,
                               const struct hub_webhook_conf *conf)
{
    struct endpoint *ep = calloc(1, sizeof(*ep));

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
    if (srv_whs_ep_init(wh, ep)) {
        free(ep->shown);
        free(ep);
        return NULL;
    }
    return ep;
}

/* Free ep and its batches; returns how many it held. With why (a
 * reload removed the endpoint) the stored ones become dead letters with
 * why as their error, so --webhook-replay can still send them. */
static unsigned ep_retire(struct srv_wh *wh, struct endpoint *ep,
                          const char *why)
{
    uint64_t wall = wall_ms();
    unsigned n = 0;

    if (ep->easy) {
        if (ep->in_flight)
            curl_multi_remove_handle(wh->multi, ep->easy);
        curl_easy_cleanup(ep->easy);
    }
    curl_slist_free_all(ep->hdrs);
    mac_drop(ep);
    /* From the cluster's stream: what is read but not yet batched becomes
     * a batch, to be dead-lettered with the rest. */
    if (why)
        srv_whs_ep_flush(wh, ep);
    while (ep->head) {
        struct batch *b = ep->head;

        /* A stream batch is stored only when it becomes a dead letter. */
        if (why && wh->store && b->acks && !b->id)
            store_add(wh, ep, b);
        if (why && wh->store && b->id) {
            store_tx(wh);
            if (srv_wh_store_dead(wh->store, b->id, wall, b->attempts, why))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        /* Its entries leave the group's pending list (the lease holder
         * then destroys the group, server/webhook/webhook_stream.c). */
        if (why && b->acks && srv_whs_holds(wh, ep))
            srv_whs_done(wh, ep, b);
        n++;
        ep_pop(ep);
    }
    srv_whs_ep_fini(ep);
    free(ep->shown);
    free(ep);
    return n;
}

/*
 * Sender thread: make v (taken) the apps the sender works for. One
 * endpoint per webhook of v; an endpoint of the same app id and URL as
 * before is kept (its FIFO, order, retry state, connection and counters:
 * only its app and webhook settings change); the others are new, and an
 * old endpoint that no longer exists is retired (ep_retire: its pending
 * batches become dead letters, logged). The engine flushes its open
 * batches under the old apps first. start: the first view, no log line.
 * 0, or -1 when out of memory (nothing changed, v freed).
 */
static int apply_view(struct srv_wh *wh, struct wh_view *v, bool start)
{
    struct endpoint **eps = NULL, **old_eps;
    unsigned *base = NULL, *old_base, n = 0, k = 0, old_n, added = 0;
    unsigned removed = 0, lost = 0;
    bool *taken = calloc(wh->n_eps ? wh->n_eps : 1, sizeof(*taken));
    bool *fresh = NULL;
    struct wh_view *old = wh->view;

    for (unsigned i = 0; i < v->n; i++)
        n += v->apps[i].n_webhooks;
    eps = calloc(n ? n : 1, sizeof(*eps));
    base = calloc(v->n ? v->n : 1, sizeof(*base));
    fresh = calloc(n ? n : 1, sizeof(*fresh));
    if (!taken || !eps || !base || !fresh)
        goto oom;
    for (unsigned i = 0; i < v->n; i++) {
        base[i] = k;
        for (unsigned j = 0; j < v->apps[i].n_webhooks; j++, k++) {
            const struct hub_webhook_conf *c = &v->apps[i].webhooks[j];

            for (unsigned o = 0; o < wh->n_eps && !eps[k]; o++)
                if (!taken[o] && !strcmp(wh->eps[o]->app->id, v->apps[i].id) &&
                    !strcmp(wh->eps[o]->conf->url, c->url)) {
                    taken[o] = true;
                    eps[k] = wh->eps[o];
                }
            if (!eps[k]) {
                if (!(eps[k] = ep_new(wh, &v->apps[i], c)))
                    goto oom;
                fresh[k] = true;
                added++;
            }
        }
    }
    /* Open batches go to the old endpoints, made under the old apps. */
    if (hub_wh_engine_set_apps(wh->eng, v->apps, v->n, wall_ms()))
        goto oom;
    pthread_mutex_lock(&wh->mu);
    k = 0;
    for (unsigned i = 0; i < v->n; i++)
        for (unsigned j = 0; j < v->apps[i].n_webhooks; j++, k++) {
            eps[k]->app = &v->apps[i];
            eps[k]->conf = &v->apps[i].webhooks[j];
        }
    old_eps = wh->eps;
    old_n = wh->n_eps;
    old_base = wh->ep_base;
    wh->eps = eps;
    wh->n_eps = n;
    wh->ep_base = base;
    wh->view = v;
    pthread_mutex_unlock(&wh->mu);
    for (unsigned o = 0; o < old_n; o++) {
        struct endpoint *ep = old_eps[o];
        unsigned m;

        if (taken[o])
            continue;
        removed++;
        if (!ep->head) {
            ep_retire(wh, ep, NULL);
            continue;
        }
        srv_log(HUB_LOG_WARN, 0, "webhook %s (app %s): removed by a reload "
                                 "with %" PRIu64 " pending batches: %s",
                ep->shown, ep->app->id, (uint64_t)atomic_load(&ep->depth),
                wh->store ? "moved to the dead letters"
                          : "dropped (without --state-dir there are no "
                            "dead letters)");
        m = ep_retire(wh, ep, "webhook removed by a reload");
        lost += m;
    }
    if (!start)
        srv_log(HUB_LOG_INFO, 0, "webhooks: reloaded: %u endpoints (%u new, "
                                 "%u removed, %u pending batches of removed "
                                 "ones %s)",
                n, added, removed, lost,
                wh->store ? "dead-lettered" : "dropped");
    view_free(old);
    free(old_eps);
    free(old_base);
    free(taken);
    free(fresh);
    return 0;
oom:
    for (unsigned i = 0; eps && fresh && i < n; i++)
        if (fresh[i])
            ep_retire(wh, eps[i], NULL);
    free(eps);
    free(base);
    free(taken);
    free(fresh);
    view_free(v);
    srv_log(HUB_LOG_ERR, 0, "webhooks: %s (out of memory)",
            start ? "cannot start" : "reload not applied, the endpoints "
                                     "stay as they were");
    return -1;
}

static void wh_free(struct srv_wh *wh)
{
    srv_whs_free(wh);
    for (unsigned i = 0; i < wh->n_eps; i++)
        ep_retire(wh, wh->eps[i], NULL);
    hub_wh_engine_destroy(wh->eng);
    if (wh->multi)
        curl_multi_cleanup(wh->multi);
    srv_wh_store_close(wh->store);
    hub_whq_fini(&wh->q);
    free(wh->eps);
    free(wh->ep_base);
    view_free(wh->view);
    view_free(wh->next_view);
    pthread_mutex_destroy(&wh->mu);
    free(wh);
}

static _Atomic(struct srv_wh *) the_wh; /* for /stats; set once: at start,
                                           or by the first reload with webhooks */

/* Does a webhook of app want an edge type (occupied, vacated, added,
 * removed)? */
static bool wants_edges(unsigned types)
{
    for (unsigned t = HUB_WH_CHANNEL_OCCUPIED; t <= HUB_WH_MEMBER_REMOVED; t++)
        if (types & HUB_WH_BIT(t))
            return true;
    return false;
}

/*
 * Main thread: tell the cluster which apps' edges its join / leave / reap
 * scripts queue in Redis (docs/WEBHOOKS.md, "In a cluster"): those of the
 * loops' queue (hub_whq_wants, as published last, for n_index app
 * indices), or (with apps) the union of the current set and apps[0..n)
 * (their indices idx[j]->index), which a reload publishes before the
 * loops can see an added app. 0 or -1 when out of memory.
 */
static int cluster_mark(struct srv_wh *wh, const struct hub_app *apps,
                        struct hub_app *const *idx, unsigned n,
                        unsigned n_index)
{
    struct hub_cluster *c = wh->srv->cluster;
    unsigned na = n_index;
    bool *in;
    int rc;

    if (!wh->whs || !c)
        return 0;
    in = calloc(na ? na : 1, sizeof(*in));
    if (!in)
        return -1;
    for (unsigned i = 0; i < na; i++)
        for (unsigned t = HUB_WH_CHANNEL_OCCUPIED;
             !apps && t <= HUB_WH_MEMBER_REMOVED; t++)
            if (hub_whq_wants(&wh->q, i, t))
                in[i] = true;
    for (unsigned j = 0; apps && j < n; j++) {
        unsigned i = idx[j]->index;

        if (i < na && apps[j].enabled && wants_edges(apps[j].webhook_types))
            in[i] = true;
    }
    for (unsigned i = 0; apps && i < na; i++)
        if (hub_cluster_wh_redis(c, i, NULL))
            in[i] = true;
    rc = hub_cluster_set_wh(c, in, na, wh->cfg->webhook_delay_ms,
                            wh->cfg->webhook_stream_max)
             ? -1
             : 0;
    free(in);
    return rc;
}

/*
 * Main thread: make the sender for apps[0..n) (indices as view_new takes
 * them) and start its thread. At start (before the loops run) or from the
 * first reload that brings webhooks (the loops run: the queue and the_wh
 * are published last, atomically). n_eps: the apps' webhooks. 0 or -1
 * (logged; nothing is left behind but libcurl's global init).
 */
static int wh_start(struct srv *srv, const struct hub_app *apps,
                    struct hub_app *const *idx, unsigned n_apps,
                    unsigned n_index, unsigned n)
{
    const struct srv_config *cfg = srv->cfg;
    struct srv_wh *wh;
    struct wh_view *view;
    uint64_t boot = 0;
    char err[512];

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        srv_log(HUB_LOG_ERR, 0, "webhooks: libcurl did not initialise");
        return -1;
    }
    wh = calloc(1, sizeof(*wh));
    if (!wh || pthread_mutex_init(&wh->mu, NULL)) {
        free(wh);
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory");
        return -1;
    }
    view = view_new(apps, idx, n_apps, n_index);
    if (!view || hub_whq_init(&wh->q, HUB_WH_QUEUE_EVENTS, view->apps,
                              view->n)) {
        view_free(view);
        pthread_mutex_destroy(&wh->mu);
        free(wh);
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory");
        return -1;
    }
    wh->srv = srv;
    wh->cfg = cfg;
    wh->push = ep_push;
    atomic_init(&wh->stop, false);
    if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot))
        boot = wall_ms() ^ (uint64_t)getpid() << 32;
    wh->rng = boot | 1;
    wh->multi = curl_multi_init();
    wh->eng = hub_wh_engine_create(NULL, 0, cfg->webhook_delay_ms, boot,
                                   mono_ms(), on_emit, wh);
    if (!wh->multi || !wh->eng) {
        view_free(view);
        wh_free(wh);
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory");
        return -1;
    }
    /* With --redis the cluster directory decides each edge once,
     * cluster-wide (docs/WEBHOOKS.md, "In a cluster"). */
    hub_wh_engine_set_shared(wh->eng, cfg->redis != NULL);
    /* And its edges, client events and cache misses go through Redis
     * Streams while Redis answers (docs/WEBHOOKS.md, "In a cluster"). */
    if (srv_whs_create(wh)) {
        view_free(view);
        wh_free(wh);
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory");
        return -1;
    }
    curl_multi_setopt(wh->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 8L);
    if (apply_view(wh, view, true)) {
        wh_free(wh);
        return -1;
    }
    if (cfg->state_dir) {
        /* One level, as --check-config allowed (its parent exists). */
        if (mkdir(cfg->state_dir, 0700) && errno != EEXIST) {
            srv_log(HUB_LOG_ERR, 0, "--state-dir %s: %s", cfg->state_dir,
                    strerror(errno));
            wh_free(wh);
            return -1;
        }
        if (srv_wh_store_open(cfg->state_dir, &wh->store, err,
                              sizeof(err))) {
            srv_log(HUB_LOG_ERR, 0, "%s", err);
            wh_free(wh);
            return -1;
        }
        if (srv_wh_store_load(wh->store, 0, on_row, wh) ||
            srv_wh_store_begin(wh->store) ||
            srv_wh_store_take_replays(wh->store, wall_ms(), on_row, wh) ||
            srv_wh_store_commit(wh->store)) {
            srv_log(HUB_LOG_ERR, 0, "webhooks: cannot read the store in %s",
                    cfg->state_dir);
            wh_free(wh);
            return -1;
        }
        srv_log(HUB_LOG_INFO, 0,
                "webhooks: %u endpoints; pending batches are kept in "
                "%s/webhooks.db (%" PRIu64 " bytes loaded%s)",
                n, cfg->state_dir, wh->held_bytes,
                atomic_load(&wh->orphans)
                    ? "; rows for endpoints no longer configured stay in "
                      "the store"
                    : "");
    } else {
        srv_log(HUB_LOG_WARN, 0,
                "webhooks: %u endpoints; no --state-dir, so pending "
                "webhooks are kept in memory only and lost on restart",
                n);
    }
    wh->q.wake = wake;
    wh->q.wake_ctx = wh->multi;
    if (!hub_dir_set_edge_hook(srv->hub, hub_webhook_dir_edge, &wh->q))
        srv_log(HUB_LOG_WARN, 0, "webhooks: this backplane reports no "
                                 "channel edges; occupied, vacated and "
                                 "member events are not sent");
    if (wh->whs && srv->cluster) {
        if (cluster_mark(wh, NULL, NULL, 0, wh->view->n)) {
            hub_dir_set_edge_hook(srv->hub, NULL, NULL);
            wh_free(wh);
            srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory");
            return -1;
        }
        srv_log(HUB_LOG_INFO, 0,
                "webhooks: durable through redis streams (%s:wh:<app>); "
                "one node per app sends, holding %s:whl:<app>",
                cfg->redis_prefix, cfg->redis_prefix);
    }
    if (pthread_create(&wh->thread, NULL, sender_main, wh)) {
        hub_dir_set_edge_hook(srv->hub, NULL, NULL);
        wh_free(wh);
        srv_log(HUB_LOG_ERR, 0, "webhooks: cannot start the sender thread");
        return -1;
    }
    /* Named apart from the loops (lubdub-N) for top -H and the benchmarks'
     * per-thread CPU. */
    pthread_setname_np(wh->thread, "wh-sender");
    atomic_store_explicit(&srv->hub->webhooks, &wh->q, memory_order_release);
    atomic_store_explicit(&the_wh, wh, memory_order_release);
    return 0;
}

int srv_webhooks_start(struct srv *srv)
{
    const struct srv_config *cfg = srv->cfg;
    unsigned n = 0;

    for (unsigned i = 0; i < cfg->n_apps; i++)
        n += cfg->apps[i].n_webhooks;
    if (!n) {
        if (cfg->state_dir)
            srv_log(HUB_LOG_INFO, 0, "webhooks: none configured; "
                                     "--state-dir is used once a reload "
                                     "brings some");
        return 0;
    }
    return wh_start(srv, cfg->apps, NULL, cfg->n_apps, cfg->n_apps, n);
}

void srv_webhooks_stop(struct srv *srv)
{
    struct srv_wh *wh = the_wh;
    uint64_t lost = 0;

    if (!wh)
        return;
    hub_dir_set_edge_hook(srv->hub, NULL, NULL);
    srv->hub->webhooks = NULL;
    atomic_store(&wh->stop, true);
    curl_multi_wakeup(wh->multi);
    pthread_join(wh->thread, NULL);
    if (!wh->store)
        for (unsigned i = 0; i < wh->n_eps; i++)
            lost += atomic_load(&wh->eps[i]->depth);
    if (lost)
        srv_log(HUB_LOG_WARN, 0, "webhooks: %" PRIu64 " undelivered batches "
                                 "lost at exit (no --state-dir)", lost);
    the_wh = NULL;
    wh_free(wh);
    curl_global_cleanup();
}

void srv_webhooks_reload(struct srv *srv, const struct hub_app *apps,
                         struct hub_app *const *idx, unsigned n,
                         unsigned n_index)
{
    struct srv_wh *wh = the_wh;
    struct wh_view *v, *stale;

    (void)srv;
    if (!wh)
        return;      /* none, or the sender did not start (logged) */
    v = view_new(apps, idx, n, n_index);
    if (!v) {
        srv_log(HUB_LOG_ERR, 0, "webhooks: reload not applied, the "
                                "endpoints stay as they were (out of memory)");
        return;
    }
    pthread_mutex_lock(&wh->mu);
    stale = wh->next_view;          /* never taken: a newer one wins */
    wh->next_view = v;
    pthread_mutex_unlock(&wh->mu);
    view_free(stale);
    /* The sender frees v only for a newer view, which only this thread
     * makes: v can be read here. Published after the hand-over, so an
     * event of a new app reaches the sender after its view. */
    if (hub_whq_set_wants(&wh->q, v->apps, v->n))
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory: the loops keep "
                                "the event types of before the reload");
    /* With --redis, from now on exactly the reloaded apps' edges go to
     * Redis: a removed or disabled app's no longer do. */
    else if (cluster_mark(wh, NULL, NULL, 0, v->n))
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory: the cluster's "
                                "scripts keep queueing the edges of the "
                                "apps of before the reload");
    curl_multi_wakeup(wh->multi);
}

void srv_webhooks_reload_prepare(struct srv *srv, const struct hub_app *apps,
                                 struct hub_app *const *idx, unsigned n,
                                 unsigned n_index)
{
    struct srv_wh *wh = the_wh;
    unsigned eps = 0;

    /* The first webhooks since the start: the sender starts now, before
     * the reloaded apps reach the loops, with the store (--state-dir) and
     * the streams (--redis) as at start; srv_webhooks_reload then hands
     * it the same apps. A sender that fails to start is tried again by
     * the next reload. */
    for (unsigned j = 0; !wh && j < n; j++)
        if (apps[j].enabled)
            eps += apps[j].n_webhooks;
    if (!wh && eps) {
        srv_log(HUB_LOG_INFO, 0, "webhooks: the reloaded apps have the "
                                 "first webhooks since the start; starting "
                                 "the sender");
        if (wh_start(srv, apps, idx, n, n_index, eps)) {
            srv_log(HUB_LOG_ERR, 0, "webhooks: the sender did not start; "
                                    "nothing is sent until a reload starts "
                                    "it");
            return;
        }
        wh = the_wh;
    }
    if (wh && cluster_mark(wh, apps, idx, n, n_index))
        srv_log(HUB_LOG_ERR, 0, "webhooks: out of memory: edges of apps "
                                "this reload adds go to this node's own "
                                "engine");
}

#define LD(x) ((json_int_t)atomic_load_explicit(&(x), memory_order_relaxed))

json_t *srv_webhooks_stats_json(struct srv *srv)
{
    struct srv_wh *wh = the_wh;
    json_t *eps, *root;
    uint64_t wall = wall_ms();

    (void)srv;
    if (!wh)
        return NULL;
    eps = json_array();
    pthread_mutex_lock(&wh->mu);
    for (unsigned i = 0; eps && i < wh->n_eps; i++) {
        struct endpoint *ep = wh->eps[i];
        uint64_t oldest = atomic_load(&ep->oldest_ms);
        json_t *hist = json_array(), *o;
        /* dead before depth (the sender counts a dead letter after its
         * pop): one batch is never shown as both. */
        json_int_t dead = (json_int_t)atomic_load_explicit(
                       &ep->dead, memory_order_acquire),
                   depth = (json_int_t)atomic_load(&ep->depth);

        for (unsigned j = 0; hist && j <= N_LAT; j++)
            json_array_append_new(hist, json_integer(LD(ep->lat[j])));
        o = json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o?}",
                      "app", ep->app->id, "url", ep->shown, "up",
                      atomic_load(&ep->up), "sent", LD(ep->sent), "failed",
                      LD(ep->failed), "retried", LD(ep->retried),
                      "dead_lettered", dead, "dropped",
                      LD(ep->dropped), "queue_depth", depth,
                      "oldest_pending_age_ms",
                      (json_int_t)(oldest && wall > oldest ? wall - oldest
                                                           : 0),
                      "latency_buckets", hist);
        if (json_array_append_new(eps, o)) {
            json_decref(eps);
            eps = NULL;
        }
    }
    pthread_mutex_unlock(&wh->mu);
    if (!eps)
        return NULL;
    root = json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "durable",
                     wh->store != NULL, "events_enqueued", LD(wh->q.enqueued),
                     "events_dropped",
                     LD(wh->q.dropped) + LD(wh->events_oom),
                     "events_batched", LD(wh->events_batched),
                     "edges_delayed", LD(wh->edges_delayed),
                     "edges_cancelled", LD(wh->edges_cancelled),
                     "store_errors", LD(wh->store_errors), "orphan_rows",
                     LD(wh->orphans), "pending_bytes",
                     (json_int_t)atomic_load(&wh->held_bytes_pub),
                     "endpoints", eps);
    if (root && wh->whs)
        json_object_set_new(root, "stream", srv_whs_stats_json(wh));
    return root;
}

static void label(char *out, size_t n, const struct endpoint *ep)
{
    size_t k = 0;
    const char *parts[2] = { ep->app->id, ep->shown };
    const char *names[2] = { "app", "url" };

    for (unsigned p = 0; p < 2 && k + 8 < n; p++) {
        k += (size_t)snprintf(out + k, n - k, "%s%s=\"", p ? "," : "",
                              names[p]);
        for (const char *s = parts[p]; *s && k + 4 < n; s++) {
            if (*s == '"' || *s == '\\')
                out[k++] = '\\';
            out[k++] = *s;
        }
        if (k + 2 < n)
            out[k++] = '"';
    }
    out[k < n ? k : n - 1] = '\0';
}

void srv_webhooks_metrics(struct srv *srv,
                          void (*put)(void *b, const char *text), void *b)
{
    struct srv_wh *wh = the_wh;
    char line[10240], lab[4096];
    uint64_t wall = wall_ms();

    unsigned n_eps;

    /* The families are declared even with no webhooks (no series then),
     * so /metrics always lists the same families. The endpoints are read
     * under mu: a reload may replace them (put only appends to memory). */
    (void)srv;
    if (wh)
        pthread_mutex_lock(&wh->mu);
    n_eps = wh ? wh->n_eps : 0;
#define FAMILY(name, type, help)                                               \
    snprintf(line, sizeof(line), "# HELP lubdub_%s %s\n# TYPE lubdub_%s %s\n", \
             #name, help, #name, #type);                                       \
    put(b, line);
#define SERIES(name, value)                                                    \
    for (unsigned i = 0; i < n_eps; i++) {                                 \
        struct endpoint *ep = wh->eps[i];                                     \
        label(lab, sizeof(lab), ep);                                           \
        snprintf(line, sizeof(line), "lubdub_%s{%s} %" PRIu64 "\n", #name,     \
                 lab, (uint64_t)(value));                                      \
        put(b, line);                                                          \
    }
    FAMILY(webhook_sent_total, counter, "Webhook batches delivered (2xx)")
    SERIES(webhook_sent_total, LD(ep->sent))
    FAMILY(webhook_failed_total, counter, "Webhook attempts that failed")
    SERIES(webhook_failed_total, LD(ep->failed))
    FAMILY(webhook_retried_total, counter,
           "Webhook attempts that were retries")
    SERIES(webhook_retried_total, LD(ep->retried))
    FAMILY(webhook_dead_lettered_total, counter,
           "Webhook batches given up and kept as dead letters")
    SERIES(webhook_dead_lettered_total, LD(ep->dead))
    FAMILY(webhook_dropped_total, counter,
           "Webhook batches dropped because the pending store was full")
    SERIES(webhook_dropped_total, LD(ep->dropped))
    FAMILY(webhook_queue_depth, gauge, "Webhook batches pending per endpoint")
    SERIES(webhook_queue_depth, LD(ep->depth))
    FAMILY(webhook_oldest_pending_age_seconds, gauge,
           "Age of the oldest pending webhook batch per endpoint")
    SERIES(webhook_oldest_pending_age_seconds,
           (atomic_load(&ep->oldest_ms) &&
                    wall > atomic_load(&ep->oldest_ms)
                ? (wall - atomic_load(&ep->oldest_ms)) / 1000
                : 0))
    FAMILY(webhook_endpoint_up, gauge,
           "1 when the endpoint's last attempt succeeded")
    SERIES(webhook_endpoint_up, atomic_load(&ep->up) ? 1 : 0)
    FAMILY(webhook_delivery_latency_seconds, histogram,
           "From a batch's creation to its delivery")
    for (unsigned i = 0; i < n_eps; i++) {
        struct endpoint *ep = wh->eps[i];
        uint64_t cum = 0;

        label(lab, sizeof(lab), ep);
        for (unsigned j = 0; j <= N_LAT; j++) {
            char le[32];

            cum += (uint64_t)LD(ep->lat[j]);
            if (j < N_LAT)
                snprintf(le, sizeof(le), "%g", lat_bounds_s[j]);
            else
                snprintf(le, sizeof(le), "+Inf");
            snprintf(line, sizeof(line),
                     "lubdub_webhook_delivery_latency_seconds_bucket{%s,"
                     "le=\"%s\"} %" PRIu64 "\n",
                     lab, le, cum);
            put(b, line);
        }
        snprintf(line, sizeof(line),
                 "lubdub_webhook_delivery_latency_seconds_sum{%s} %.3f\n"
                 "lubdub_webhook_delivery_latency_seconds_count{%s} %" PRIu64
                 "\n",
                 lab, (double)LD(ep->lat_sum_ms) / 1000.0, lab,
                 (uint64_t)LD(ep->lat_count));
        put(b, line);
    }
    FAMILY(webhook_events_dropped_total, counter,
           "Webhook events dropped before batching (queue full, no memory)")
    if (wh) {
        snprintf(line, sizeof(line),
                 "lubdub_webhook_events_dropped_total %" PRIu64 "\n",
                 (uint64_t)(LD(wh->q.dropped) + LD(wh->events_oom)));
        put(b, line);
    }
    srv_whs_metrics(wh, put, b);
    if (wh)
        pthread_mutex_unlock(&wh->mu);
#undef FAMILY
#undef SERIES
}

static void print_dead(void *ctx, const struct srv_wh_row *r)
{
    FILE *out = ctx;
    json_t *o = json_pack("{s:I,s:s,s:s,s:s,s:I,s:I,s:i,s:s,s:i,s:s%}", "id",
                          (json_int_t)r->id, "app", r->app, "url", r->url,
                          "idempotency_key", r->idem, "created_ms",
                          (json_int_t)r->created_ms, "died_ms",
                          (json_int_t)r->died_ms, "attempts",
                          (int)r->attempts, "last_error", r->why, "events",
                          (int)r->n_events, "body", r->body, r->len);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

    if (text)
        fprintf(out, "%s\n", text);
    free(text);
    json_decref(o);
}

int srv_webhooks_admin(const struct srv_config *cfg, FILE *out)
{
    struct srv_wh_store *s;
    char err[512];
    unsigned n = 0;
    int rc = 0;

    if (!cfg->state_dir) {
        fprintf(stderr, "lubdub: --webhook-dead-letters and "
                        "--webhook-replay need --state-dir\n");
        return 2;
    }
    if (srv_wh_store_open(cfg->state_dir, &s, err, sizeof(err))) {
        fprintf(stderr, "lubdub: %s\n", err);
        return 1;
    }
    if (cfg->webhook_replay) {
        rc = srv_wh_store_replay(s, cfg->webhook_replay, &n);
        if (rc == -EINVAL)
            fprintf(stderr, "lubdub: --webhook-replay: \"%s\" is neither "
                            "\"all\" nor a dead letter id\n",
                    cfg->webhook_replay);
        else if (rc)
            fprintf(stderr, "lubdub: --webhook-replay failed\n");
        else
            fprintf(out, "lubdub: %u dead letters queued for delivery again\n",
                    n);
    } else {
        rc = srv_wh_store_list_dead(s, print_dead, out);
        if (rc)
            fprintf(stderr, "lubdub: cannot read the dead letters\n");
    }
    srv_wh_store_close(s);
    return rc ? 1 : 0;
}
