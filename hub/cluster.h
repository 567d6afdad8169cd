/*
 * hub/cluster.h - the scale-out backplane (hub/backplane.h) of several
 * lubdub nodes sharing one broker (Redis), minus the network: that is
 * server/redis.c, on its own thread.
 *
 * Directory: the in-process directory (hub/directory.c), wrapped. The
 * counts and presence stay node-local in this step; the wrapper keeps a
 * node-wide refcount per (app, channel) so that the first local
 * subscription of a channel queues a SUB and the last one leaving queues
 * an UNSUB: the node listens to exactly the broker channels it has
 * subscribers for.
 *
 * Bus: publish delivers on this node's loops at once (hub_fanout_loops,
 * never through the broker), then queues the frame for the backplane
 * thread, which wraps it in an envelope (hub/envelope.h) and publishes it.
 * terminate_user likewise. Member events (excl->member_seq set) stay on
 * this node: their seq belongs to this node's directory.
 *
 * The queue: loops push under a mutex (no I/O under it) and call the wake
 * function on the empty -> non-empty edge; the backplane thread takes the
 * whole list at once. Events beyond max_queue waiting are dropped and
 * counted lost; SUB and UNSUB are never dropped (they are allocated with
 * the channel's record, before the subscription is counted).
 *
 * Receiving: the backplane thread hands each message to
 * hub_cluster_receive(), which checks the envelope, ignores this node's
 * own, counts gaps in the origin's per-channel sequence and delivers
 * through hub_fanout_loops(h, NULL, ...) / hub_fanout_terminate().
 *
 * Thread: the ops on loop threads; hub_cluster_take(), _encode(),
 * _receive() and the rx functions on the backplane thread only.
 */
#ifndef HUB_CLUSTER_H
#define HUB_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/backplane.h"
#include "hub/publish.h"
#include "hub/stats.h"

struct hub_cluster_cfg {
    const char *node_id;           /* copied; 1..255 bytes */
    const char *prefix;            /* copied; broker channel prefix */
    const struct hub_app *apps;    /* the apps at start: ids copied */
    unsigned n_apps;
    size_t max_queue;              /* events waiting; 0 = 65536 */
    void (*wake)(void *ctx);       /* any thread; the backplane thread */
    void *wake_ctx;
};

enum hub_cluster_op_kind {
    HUB_COP_SUB,
    HUB_COP_UNSUB,
    HUB_COP_EVENT,
    HUB_COP_TERMINATE,
    HUB_COP_CACHE,                 /* an event kept cluster-wide */
};

/* One item for the backplane thread. rchan is the broker channel,
 * "<prefix>:<app id>:<channel>", NUL-terminated; the Pusher channel name
 * starts at rchan + name_off. CACHE: rchan is the Redis key
 * "<prefix>:cache:<app id>:<channel>" and its first bus_len bytes the
 * broker channel "<prefix>:cache" (hub/ccache.h). */
struct hub_cluster_op {
    struct hub_cluster_op *next;
    enum hub_cluster_op_kind kind;
    unsigned app;
    struct hub_excl excl;
    struct hub_frame *f;           /* EVENT: one reference */
    size_t rchan_len, name_off;
    size_t bus_len;                /* CACHE */
    uint64_t expire_ms;            /* CACHE: on the hub's clock */
    char *rchan;
};

/* Per broker channel, on the receiving side: the last seq seen from each
 * origin (at most HUB_CLUSTER_MAX_ORIGINS tracked). */
#define HUB_CLUSTER_MAX_ORIGINS 64
struct hub_cluster_origin;
struct hub_cluster_rx {
    struct hub_cluster_origin *origins;
    unsigned n;
};

struct hub_cluster;

struct hub_cluster *hub_cluster_create(const struct hub_cluster_cfg *cfg);
/*
 * A reload added app index with id (copied): the cluster can carry its
 * channels from now on. Call before the table that holds it is published
 * (server/reload.c). 0 or -ENOMEM. Any thread; an index already known is
 * left as it is (an index keeps its id for the hub's life).
 */
int hub_cluster_app_added(struct hub_cluster *c, unsigned index,
                          const char *id);
/* Fill bp with the cluster's directory and bus (the cluster is their impl
 * and is freed by the bus's destroy; the dir destroy is NULL). 0. */
int hub_cluster_backplane(struct hub_cluster *c, struct hub_backplane *bp);
/* Free a cluster never handed to a hub. */
void hub_cluster_destroy(struct hub_cluster *c);
/* The hub that received messages go to; before the backplane thread
 * starts. */
void hub_cluster_set_hub(struct hub_cluster *c, struct hub *h);

/* From now on nothing received is delivered (the loops are going away);
 * waits for a delivery in progress. Any thread, idempotent. */
void hub_cluster_close(struct hub_cluster *c);
/* Replace the wake function (NULL: none), e.g. before the backplane
 * thread's loop goes away. */
void hub_cluster_set_wake(struct hub_cluster *c, void (*fn)(void *ctx),
                          void *ctx);

struct hub_backplane_stats *hub_cluster_stats(struct hub_cluster *c);
/* An edge decided elsewhere than in a join or leave of this node (the
 * reaper of a dead node, server/redis_lease.c): handed to the directory's
 * edge hook, if any. Backplane thread. */
void hub_cluster_report_edge(struct hub_cluster *c,
                             const struct hub_dir_edge *e);
const char *hub_cluster_node_id(const struct hub_cluster *c);

/* Backplane thread: every queued op in order (NULL when none). */
struct hub_cluster_op *hub_cluster_take(struct hub_cluster *c);
void hub_cluster_op_free(struct hub_cluster_op *op);
/* The envelope of an EVENT or TERMINATE op with seq (owned, *len bytes);
 * NULL when out of memory. */
unsigned char *hub_cluster_encode(struct hub_cluster *c,
                                  const struct hub_cluster_op *op,
                                  uint64_t epoch, uint64_t seq, size_t *len);
/* A message from the broker on channel rchan (NULL: not checked). rx:
 * the channel's receive state, NULL when the channel is not (or no
 * longer) subscribed. Returns 0 when delivered, 1 when ignored (own
 * origin), -EINVAL when malformed, for an unknown app, or when the
 * envelope's app and channel are not the broker channel's (counted bad:
 * an envelope only ever reaches the channel it was published on). */
int hub_cluster_receive(struct hub_cluster *c, struct hub_cluster_rx *rx,
                        const char *rchan, size_t rchan_len,
                        const void *data, size_t len);
void hub_cluster_rx_fini(struct hub_cluster_rx *rx);

/* The broker channel every node subscribes to for cache entries,
 * "<prefix>:cache" (NUL-terminated, *len bytes), and the pattern of their
 * Redis keys, "<prefix>:cache:*" (owned by the cluster). */
const char *hub_cluster_cache_channel(const struct hub_cluster *c,
                                      size_t *len);
const char *hub_cluster_cache_pattern(const struct hub_cluster *c);
/* The remaining life (ms) of a CACHE op now; 0 when it has expired
 * (then it is still sent, for delivery, with 1 ms, and not stored). */
uint64_t hub_cluster_op_ttl(const struct hub_cluster *c,
                            const struct hub_cluster_op *op);
/* A cache entry read from Redis (key, value, with pttl_ms left): kept in
 * the replica, not delivered (it is no news). 1 when kept, 0 when not
 * (the replica's lives longer, or expired), -EINVAL (counted bad) when it
 * is not a cache envelope of a known app stored under its own key
 * (another cluster's prefix may share the pattern). */
int hub_cluster_load(struct hub_cluster *c, const char *key, size_t key_len,
                     const void *data, size_t len, uint64_t pttl_ms);

#endif
