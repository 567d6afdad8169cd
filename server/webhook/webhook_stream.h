/*
 * server/webhook/webhook_stream.h - durable webhooks in a cluster, the
 * sender thread's half (docs/WEBHOOKS.md, "In a cluster"): what
 * webhook_send.c and webhook_endpoint.c call, and what the stream's own
 * files share. The stream is five files:
 *
 * - webhook_stream.c: the sender thread's synchronous connection
 *   (connect, AUTH, SELECT, SCRIPT LOAD, reconnect backoff, a script call
 *   as EVALSHA), the stream's state made and freed (its leases released
 *   at a clean stop), the keys' names;
 * - webhook_stream_add.c: client events and cache misses XADDed to the
 *   app's stream;
 * - webhook_stream_read.c: per endpoint, its consumer group claimed and
 *   read into batches, and acknowledged once they are sent;
 * - webhook_stream_lease.c: per app, the lease that says which node
 *   consumes its stream, the pump of due delayed edges, the drop counter,
 *   an app retired by a reload, and the round that runs them all;
 * - webhook_stream_trim.c: the entries every group acknowledged trimmed,
 *   and the groups of webhooks no longer configured destroyed.
 *
 * Thread: the sender thread; the counters are read from any thread.
 */
#ifndef SRV_WEBHOOK_STREAM_H
#define SRV_WEBHOOK_STREAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "hub/webhook/wh_stream.h"
#include "server/config/redis_url.h"
#include "server/redis/redis_conn.h"
#include "server/webhook/webhook_int.h"

struct srv_secret;

/* An endpoint's stream state (srv_wh_ep.whs). */
struct srv_wh_stream_ep {
    char group[HUB_WHS_GROUP_LEN];
    bool grouped;                  /* claimed since this lease was taken */
    bool history;                  /* reading our pending list first */
    char cursor[48];
    struct hub_wh_event *ev[HUB_WHS_READ_COUNT];
    char *id[HUB_WHS_READ_COUNT];
    unsigned n;
    uint64_t first_ms;             /* monotonic, of ev[0] */
};

/* An app slot (index = app index) of the stream. */
struct srv_wh_stream_app {
    char *id;                      /* once served here; NULL after retire */
    bool held;
    bool retiring;                 /* gone from the view: to retire */
    const char *start;             /* where a missing group starts: "0"
                                      when the stream has no group yet,
                                      else "$" (a new endpoint) */
    uint64_t renew_ms, trim_ms;
    long long drop_seen;
    bool drop_base, dropping;
};

/* The stream's scripts (server/redis/lua/wh_stream_*.lua), each loaded
 * (SCRIPT LOAD) on every connect and then sent as EVALSHA. */
enum srv_whs_script {
    SRV_WHS_ADD,
    SRV_WHS_LEASE,
    SRV_WHS_RELEASE,
    SRV_WHS_RETIRE,
    SRV_WHS_PUMP,
    SRV_WHS_CONSUMERS,
    SRV_WHS_SCRIPT_N
};

/* The stream consumer (srv_wh.whs). */
struct srv_whs {
    struct srv_redis_conn conn;    /* the URL, the password in force */
    char *node, *prefix;
    uint64_t lease_ms;
    char lease_txt[24];
    unsigned max_entries;          /* --webhook-stream-max */
    struct srv_redis_sync *rc;     /* server/redis/redis_sync.h */
    uint64_t retry_ms, round_ms;
    unsigned attempts;             /* connects failed since the last up */
    bool told_down;
    /* Each script's SHA (40 hex) as SCRIPT LOAD answered on this
     * connection; "": not loaded, the script goes as EVAL <text>. A
     * fixed table: one entry a script, whatever the apps or clients. */
    char sha[SRV_WHS_SCRIPT_N][41];
    bool told_noscript;            /* NOSCRIPT logged on this connection */
    uint64_t noscript;             /* NOSCRIPT replies, all told */
    struct srv_wh_stream_app *apps;
    unsigned n_apps;
    /* /stats and /metrics (webhook_metrics.c), read from any thread with
     * HUB_STAT_GET. The sender thread is their one writer (HUB_STAT_ADD:
     * a relaxed load and store, no read-modify-write). */
    uint64_t added, read, claimed, acked, dropped, held, destroyed, released;
    atomic_bool up;                /* rc is connected */
};

/* The API the sender uses. */

/* With --redis: the stream consumer (connects later, on the sender
 * thread). 0, or -1 when out of memory. */
int srv_wh_stream_create(struct srv_wh *wh);
void srv_wh_stream_free(struct srv_wh *wh);
/* An endpoint made or retired (its stream state). -1 out of memory. */
int srv_wh_stream_ep_init(struct srv_wh *wh, struct srv_wh_ep *ep);
void srv_wh_stream_ep_fini(struct srv_wh_ep *ep);
/* ep is being removed by a reload: the entries it read but has not
 * batched yet become a batch at the tail of its FIFO. */
void srv_wh_stream_ep_flush(struct srv_wh *wh, struct srv_wh_ep *ep);
/* The events popped from the loops' queue: client events and cache
 * misses go to the app's stream while Redis answers; the rest (and
 * everything when it does not) is returned for the local engine. */
struct hub_wh_event *srv_wh_stream_take(struct srv_wh *wh,
                                        struct hub_wh_event *l);
/* One round: leases, the delay pump, reads, batches, acks. Returns ms
 * until it wants the next round. */
uint64_t srv_wh_stream_round(struct srv_wh *wh, uint64_t now);
/* Does this node hold the lease of ep's app (may it send its stream's
 * batches)? */
bool srv_wh_stream_holds(const struct srv_wh *wh, const struct srv_wh_ep *ep);
/* b (of ep, from the stream) was delivered or dead-lettered: XACK. */
void srv_wh_stream_done(struct srv_wh *wh, struct srv_wh_ep *ep,
                        struct srv_wh_batch *b);
/* /stats "stream" object (new reference, NULL without --redis);
 * webhook_metrics.c. */
json_t *srv_wh_stream_stats_json(struct srv_wh *wh);

/* Between the stream's files. */

/* webhook_stream.c: connect when due (false: not connected); a command
 * (NULL, and the connection dropped, when it broke); the connection
 * broke (logged once, dropped). */
bool srv__wh_stream_connect(struct srv_whs *z, uint64_t now);
redisReply *srv__wh_stream_cmd(struct srv_whs *z, int argc, const char **argv,
                               const size_t *lens);
void srv__wh_stream_lost(struct srv_whs *z);
/* The command's first two words for script s: EVALSHA <sha> when its SHA
 * is loaded and eval is false, else EVAL <text> (av[0], av[1]). The one
 * place a script call is made; srv__wh_stream_cmd turns an EVAL of a
 * script's text into this on its own. */
void srv__wh_stream_script(const struct srv_whs *z, enum srv_whs_script s,
                           bool eval, const char **av);
/* Is r the -NOSCRIPT error (the SHA sent is not in Redis's cache)? */
bool srv__wh_stream_is_noscript(const redisReply *r);
/* Script s got a NOSCRIPT (its EVAL retry already answered): counted,
 * logged once a connection, and loaded again. No reply may be pending. */
void srv__wh_stream_noscript(struct srv_whs *z, enum srv_whs_script s);
/* "<prefix>:<what>:<app>" into out; 0, or -1 when it does not fit. */
int srv__wh_stream_key(char *out, size_t n, const struct srv_whs *z,
                       const char *what, const char *app);

/* webhook_stream_read.c: read for ep (its app's lease held) from the
 * stream k into its open batch, batches when due; forget the stream
 * batches ep holds but is not sending (the lease changed hands). */
void srv__wh_stream_read(struct srv_wh *wh, struct srv_wh_ep *ep,
                         const char *k, uint64_t now);
void srv__wh_stream_ep_abandon(struct srv_wh *wh, struct srv_wh_ep *ep);

/* webhook_stream_trim.c: trim app ai's stream k to what some configured
 * group still needs; destroy the groups no configured endpoint names. */
void srv__wh_stream_trim(struct srv_wh *wh, unsigned ai, const char *k);

#endif
