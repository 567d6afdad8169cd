/*
 * server/webhook/webhook_int.h - the sender's internals shared by the
 * files of server/webhook/: a batch (struct srv_wh_batch), an endpoint
 * and its FIFO (struct srv_wh_ep), the sender's copy of the apps (struct
 * srv_wh_view), the sender (struct srv_wh), and the functions each of
 * these files gives the others (srv__wh_*):
 *
 * - webhook_send.c: the thread, its round, libcurl's multi handle, the
 *   answers (delivered, retried with backoff, dead-lettered), start, stop
 *   and reload;
 * - webhook_request.c: one POST: its headers, its signature, its easy
 *   handle;
 * - webhook_endpoint.c: the endpoints, their FIFOs of batches and the
 *   store writes that follow them;
 * - webhook_view.c: the sender's copy of the apps and the endpoints made
 *   from it (start, reload);
 * - webhook_metrics.c: /stats and /metrics;
 * - webhook_admin.c: --webhook-dead-letters and --webhook-replay;
 * - webhook_store.c: the SQLite store (server/webhook/webhook.h);
 * - webhook_stream*.c: durable cluster webhooks through Redis Streams
 *   (server/webhook/webhook_stream.h).
 *
 * Sender thread only, except where a field says otherwise.
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
#include <time.h>

#include "hub/webhook/engine.h"
#include "hub/webhook/queue.h"
#include "hub/webhook/webhook.h"
#include "server/webhook/webhook.h"

/* The delivery latency histogram's buckets: N_LAT bounds in seconds,
 * then +Inf (webhook_send.c counts, webhook_metrics.c shows). */
#define N_LAT 10
static const double srv__wh_lat_bounds_s[N_LAT] = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30, 300,
};

struct srv_wh_stream_ep;
struct srv_whs;

struct srv_wh_batch {
    struct srv_wh_batch *next;
    int64_t id;                     /* store row; 0 without a store */
    char *body;
    size_t len;
    char idem[48];
    unsigned n_events, attempts;
    uint64_t created_ms;            /* wall clock */
    uint64_t next_ms;               /* monotonic: not before */
    /* From the cluster's stream (webhook_stream_read.c): the entry ids it
     * covers, XACKed for its endpoint's group once it is delivered or
     * dead-lettered. NULL for a batch of the local engine. */
    char **acks;
    unsigned n_acks;
};

struct srv_wh_ep {
    struct srv_wh *wh;
    const struct hub_app *app;
    const struct hub_wh_conf *conf;
    char *shown;                    /* the URL for logs and stats: no
                                       user:password@, no ?query */
    struct srv_wh_batch *head, **tail;
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
    /* Read by /stats and /metrics from any thread (webhook_metrics.c;
     * SRV_WH_METRICS names them). */
    atomic_uint_fast64_t sent, failed, retried, dead, dropped, depth;
    atomic_uint_fast64_t oldest_ms;  /* wall clock of the head; 0 none */
    atomic_bool up;
    atomic_uint_fast64_t lat[N_LAT + 1], lat_sum_ms, lat_count;
    /* Its stream state; NULL without --redis. */
    struct srv_wh_stream_ep *whs;
};

struct srv_wh_view {
    unsigned n;
    struct hub_app *apps;
};

struct srv_wh {
    struct srv *srv;
    const struct srv_config *cfg;
    struct hub_wh_queue q;
    struct hub_wh_engine *eng;
    struct srv_wh_store *store;
    CURLM *multi;
    pthread_t thread;
    atomic_bool stop;
    /* The sender's own copy of the apps (index = app index), made at
     * start and by each reload (srv_wh_reload): the engine and the
     * endpoints point into it, never into the hub's app table. */
    struct srv_wh_view *view;
    struct srv_wh_view *next_view;  /* handed over by a reload; under mu */
    /* mu guards next_view, and eps / n_eps against the /stats readers
     * (the sender writes them only under it, and reads them without). */
    pthread_mutex_t mu;
    struct srv_wh_ep **eps;         /* each allocated alone: curl holds
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
    bool (*push)(struct srv_wh_ep *ep, struct srv_wh_batch *b);
};

/* The wall clock in ms: a batch's time_ms and created_ms, ages. */
static inline uint64_t srv__wh_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* webhook_endpoint.c. */

/* Open the round's store transaction (once per round; errors counted). */
void srv__wh_store_tx(struct srv_wh *wh);
/* Keep batch b of ep in the store (pending), or count the store error. */
void srv__wh_store_add(struct srv_wh *wh, struct srv_wh_ep *ep,
                       struct srv_wh_batch *b);
/* Hold b (taken) at the tail of ep, or drop it (freed, counted, logged
 * once per episode) when --webhook-max-pending is reached: false then. */
bool srv__wh_ep_push(struct srv_wh_ep *ep, struct srv_wh_batch *b);
/* Free the head batch of ep (sent, dead-lettered or given up). */
void srv__wh_ep_pop(struct srv_wh_ep *ep);
/* The engine's emit callback (ctx = the sender): a body for (app, hook)
 * becomes a batch of its endpoint, stored when durable. */
void srv__wh_on_emit(void *ctx, struct hub_wh_out *out);
/* A row of the store (ctx = the sender), at start or from a replay: a
 * batch of its endpoint, or an orphan counted. */
void srv__wh_on_row(void *ctx, const struct srv_wh_row *r);
/* An endpoint for conf of app (borrowed from the view); NULL when out of
 * memory. */
struct srv_wh_ep *srv__wh_ep_new(struct srv_wh *wh, const struct hub_app *app,
                                 const struct hub_wh_conf *conf);
/* Free ep and its batches; returns how many it held. With why (a reload
 * removed the endpoint) the stored ones become dead letters with why as
 * their error, so --webhook-replay can still send them. */
unsigned srv__wh_ep_retire(struct srv_wh *wh, struct srv_wh_ep *ep,
                           const char *why);

/* webhook_request.c. */

/* Start sending the head batch of ep (a retry counted as one): its easy
 * handle joins the multi handle. Out of memory: tried again a second
 * from now. */
void srv__wh_request_start(struct srv_wh_ep *ep, uint64_t now);
/* Forget ep's HMAC context and key (wiped). */
void srv__wh_mac_drop(struct srv_wh_ep *ep);

/* webhook_view.c. */

/* The sender's copy of apps[0..n) in a view of n_index app indices:
 * apps[j] goes to idx[j]->index (j when idx is NULL). NULL when out of
 * memory. */
struct srv_wh_view *srv__wh_view_new(const struct hub_app *apps,
                                     struct hub_app *const *idx, unsigned n,
                                     unsigned n_index);
void srv__wh_view_free(struct srv_wh_view *v);
/* Sender thread: make v (taken) the apps the sender works for (its
 * endpoints kept, made or retired). start: the first view, no log line.
 * 0, or -1 when out of memory (nothing changed, v freed). */
int srv__wh_view_apply(struct srv_wh *wh, struct srv_wh_view *v, bool start);

/* webhook_send.c. */

/* The running sender, NULL when none (for /stats and /metrics). */
struct srv_wh *srv__wh_running(void);

#endif
