/*
 * server/webhook/webhook_int.h - the sender's internals shared by
 * server/webhook/webhook_send.c (the thread, libcurl, the store) and
 * server/webhook/webhook_stream.c (durable cluster webhooks through Redis
 * Streams). Sender thread only, except where a field says otherwise.
 */
#ifndef SRV_WEBHOOK_INT_H
#define SRV_WEBHOOK_INT_H

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/webhook/webhook.h"
#include "server/webhook/webhook.h"

#define N_LAT 10

struct whs_ep;
struct srv_whs;

struct batch {
    struct batch *next;
    int64_t id;                     /* store row; 0 without a store */
    char *body;
    size_t len;
    char idem[48];
    unsigned n_events, attempts;
    uint64_t created_ms;            /* wall clock */
    uint64_t next_ms;               /* monotonic: not before */
    /* From the cluster's stream (server/webhook/webhook_stream.c): the entry ids
     * it covers, XACKed for its endpoint's group once it is delivered or
     * dead-lettered. NULL for a batch of the local engine. */
    char **acks;
    unsigned n_acks;
};

struct endpoint {
    struct srv_wh *wh;
    const struct hub_app *app;
    const struct hub_webhook_conf *conf;
    char *shown;                    /* the URL for logs and stats: no
                                       user:password@, no ?query */
    struct batch *head, **tail;
    CURL *easy;
    struct curl_slist *hdrs;
    /* HMAC-SHA256 keyed with mac_key (the app secret when it was made):
     * re-initialised per body instead of fetched and keyed again. */
    EVP_MAC_CTX *mac;
    char *mac_key;
    bool in_flight;
    bool failing;
    size_t body_seen;
    char last_err[128];
    /* Read by /stats from any thread. */
    atomic_uint_fast64_t sent, failed, retried, dead, dropped, depth;
    atomic_uint_fast64_t oldest_ms;  /* wall clock of the head; 0 none */
    atomic_bool up;
    atomic_uint_fast64_t lat[N_LAT + 1], lat_sum_ms, lat_count;
    struct whs_ep *whs;             /* stream state; NULL without --redis */
};

struct wh_view {
    unsigned n;
    struct hub_app *apps;
};

struct srv_wh {
    struct srv *srv;
    const struct srv_config *cfg;
    struct hub_whq q;
    struct hub_wh_engine *eng;
    struct srv_wh_store *store;
    CURLM *multi;
    pthread_t thread;
    atomic_bool stop;
    /* The sender's own copy of the apps (index = app index), made at
     * start and by each reload (srv_webhooks_reload): the engine and the
     * endpoints point into it, never into the hub's app table. */
    struct wh_view *view;
    struct wh_view *next_view;      /* handed over by a reload; under mu */
    /* mu guards next_view, and eps / n_eps against the /stats readers
     * (the sender writes them only under it, and reads them without). */
    pthread_mutex_t mu;
    struct endpoint **eps;          /* each allocated alone: curl holds
                                       its pointer while in flight */
    unsigned n_eps;
    unsigned *ep_base;              /* per app: its first endpoint */
    uint64_t held_bytes;
    atomic_uint_fast64_t held_bytes_pub;
    bool dropping;                  /* logged the current drop episode */
    uint64_t rng;
    uint64_t last_checkpoint_ms, last_replay_ms;
    bool dirty;                     /* written since the last checkpoint */
    atomic_uint_fast64_t store_errors, orphans;
    /* The engine's figures, copied each round for /stats. */
    atomic_uint_fast64_t edges_cancelled, edges_delayed, events_batched,
        events_oom;
    struct srv_whs *whs;            /* the cluster's stream; NULL without
                                       --redis */
    /* Hold b (taken) at the tail of ep, or drop it (freed, counted) when
     * the pending bytes are at their cap: false then. The stream's way
     * into the FIFOs (webhook_send.c sets it). */
    bool (*push)(struct endpoint *ep, struct batch *b);
};



/* server/webhook/webhook_stream.c. */

/* With --redis: the stream consumer (connects later, on the sender
 * thread). 0, or -1 when out of memory. */
int srv_whs_create(struct srv_wh *wh);
void srv_whs_free(struct srv_wh *wh);
/* An endpoint made or retired (its stream state). -1 out of memory. */
int srv_whs_ep_init(struct srv_wh *wh, struct endpoint *ep);
void srv_whs_ep_fini(struct endpoint *ep);
/* ep is being removed by a reload: the entries it read but has not
 * batched yet become a batch at the tail of its FIFO. */
void srv_whs_ep_flush(struct srv_wh *wh, struct endpoint *ep);
/* The events popped from the loops' queue: client events and cache
 * misses go to the app's stream while Redis answers; the rest (and
 * everything when it does not) is returned for the local engine. */
struct hub_wh_event *srv_whs_take(struct srv_wh *wh, struct hub_wh_event *l);
/* One round: leases, the delay pump, reads, batches, acks. Returns ms
 * until it wants the next round. */
uint64_t srv_whs_round(struct srv_wh *wh, uint64_t now);
/* Does this node hold the lease of ep's app (may it send its stream's
 * batches)? */
bool srv_whs_holds(const struct srv_wh *wh, const struct endpoint *ep);
/* b (of ep, from the stream) was delivered or dead-lettered: XACK. */
void srv_whs_done(struct srv_wh *wh, struct endpoint *ep, struct batch *b);
/* /stats "stream" object (new reference, NULL without --redis) and the
 * /metrics families. */
json_t *srv_whs_stats_json(struct srv_wh *wh);
void srv_whs_metrics(struct srv_wh *wh, void (*put)(void *b, const char *t),
                     void *b);

#endif
