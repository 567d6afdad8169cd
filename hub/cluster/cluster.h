/*
 * hub/cluster/cluster.h - the scale-out backplane (hub/loop/backplane.h) of
 * several lubdub nodes sharing one broker (Redis), minus the network: that
 * is server/redis/redis.c, on its own thread. Implemented by the
 * hub/cluster/cluster_*.c files, one concern each (their list and what
 * they share: hub/cluster/cluster_int.h).
 *
 * Directory: the in-process directory (hub/loop/directory.c), wrapped: it is
 * the truth for this node's own sessions and the answer while Redis is
 * down. The wrapper keeps a node-wide refcount per (app, channel) so that
 * the first local subscription of a channel queues a SUB (for presence
 * also one of its member-event channel) and the last one leaving queues
 * the UNSUBs: the node listens to exactly the broker channels it has
 * subscribers for. While Redis is up every join, leave and REST read is
 * also a JOIN, LEAVE or QUERY op for the backplane thread, which runs the
 * scripts (server/redis/redis_dir.c) and hands the replies back here: the
 * answer to the caller, posted to its loop, and for presence the VIEW of
 * each channel with local subscribers (the members they were told, the
 * cluster seq it reflects), which delivers member events itself in the
 * node-local seq space (docs/SCALING.md, "The cluster-wide directory").
 *
 * Bus: publish delivers on this node's loops at once (hub_fanout_loops,
 * never through the broker), then queues the frame for the backplane
 * thread, which wraps it in an envelope (hub/cluster/cluster_envelope.h) and publishes it.
 * terminate_user likewise. Member events (skip->member_seq set) stay on
 * this node: their seq belongs to this node's directory (other nodes get
 * theirs from Redis's member-event channels, through their views).
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

#include "hub/loop/backplane.h"
#include "hub/loop/inbox.h"
#include "hub/loop/publish.h"
#include "hub/loop/stats.h"

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
    /* The cluster-wide directory (docs/SCALING.md): op->dop set. */
    HUB_COP_JOIN,
    HUB_COP_LEAVE,
    HUB_COP_QUERY,
    /* A count notice (envelope kind 4, no payload): this node changed the
     * channel's subscription count (hub/channel/subcount.h). */
    HUB_COP_COUNT,
    /* An online change (hub/loop/backplane.h dir->online): op->oop set;
     * rchan is the user's channel, "<prefix>:<app id>:#server-to-user-<id>"
     * (a signin's script runs once Redis confirmed its SUBSCRIBE). */
    HUB_COP_ONLINE,
    /* A read of a channel's history stream for recovery (op->hrd;
     * rchan is the stream's key, "<prefix>:history:<app id>:<channel>"). */
    HUB_COP_HREAD,
};

/* An online change for the backplane thread (docs/SCALING.md, "Watchlists
 * and online state"). */
struct hub_cluster_onop {
    bool signin, first, replace;
    bool full;                     /* a resync: offline ids told too */
    uint32_t max_watchers;
    uint64_t gen;                  /* the online snapshot's generation */
    const char *app_id;            /* valid until the cluster goes */
    char *uid;                     /* owned */
    char **ids;                    /* owned, n of them */
    size_t n;
};

/*
 * A directory operation for the backplane thread (JOIN, LEAVE, QUERY), in
 * the queue's order with the SUB/UNSUB ops. The backplane thread takes it
 * from its op (op->dop = NULL) and hands it back to one of the completion
 * functions below, exactly once; they answer the caller (done posted to
 * its loop's inbox) and free it.
 */
struct hub_cluster_dirop {
    struct hub_inbox_node inbox;   /* done, on the caller's loop */
    int kind;                      /* HUB_COP_JOIN, _LEAVE, _QUERY */
    unsigned app;
    const char *app_id;            /* valid until the cluster goes */
    char *name;                    /* owned, NUL-terminated */
    size_t len;
    char *uid, *info;              /* presence (info "" = none); owned */
    bool presence;
    uint32_t max_members;
    uint64_t gen;                  /* the REJOIN generation it was made in */
    bool local_first, local_last;  /* what the wrapped directory said */
    struct hub_dir_join_req *req;  /* JOIN with a caller waiting; else NULL */
    struct hub_dir_query *q;       /* QUERY */
    int rc;
    struct hub_cluster *c;         /* its cluster: a dropped answer waits
                                    * there for destroy */
};

/* One item for the backplane thread. rchan is the broker channel,
 * "<prefix>:<app id>:<channel>", NUL-terminated; the Pusher channel name
 * starts at rchan + name_off. CACHE: rchan is the Redis key
 * "<prefix>:cache:<app id>:<channel>" and its first bus_len bytes the
 * broker channel "<prefix>:cache" (hub/cluster/cluster_cache.h). */
struct hub_cluster_op {
    struct hub_cluster_op *next;
    enum hub_cluster_op_kind kind;
    unsigned app;
    struct hub_skip skip;
    struct hub_frame *f;           /* EVENT: one reference */
    size_t rchan_len, name_off;
    size_t bus_len;                /* CACHE */
    uint64_t expire_ms;            /* CACHE: on the hub's clock */
    char *rchan;
    bool member;                   /* SUB/UNSUB of a member-event channel */
    struct hub_cluster_dirop *dop; /* JOIN, LEAVE, QUERY */
    struct hub_cluster_onop *oop;  /* ONLINE */
    /* EVENT and CACHE of a publication kept for recovery (f->hseq set):
     * the stream write's time and bounds; size 0 = not kept. */
    struct hub_pub_hist hist;
    struct hub_hist_read *hrd;     /* HREAD; posted back exactly once */
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
 * reaper of a dead node, server/redis/redis_lease.c): handed to the directory's
 * edge hook, if any. Backplane thread. */
void hub_cluster_report_edge(struct hub_cluster *c,
                             const struct hub_dir_edge *e);
const char *hub_cluster_node_id(const struct hub_cluster *c);

/*
 * Durable webhooks (docs/WEBHOOKS.md, "In a cluster"): for each app index
 * i < n with in_redis[i], the join / leave / reap scripts queue the app's
 * edges in Redis themselves (delay and cancel included, delay_ms long),
 * and the edges their replies report are not handed to the edge hook
 * (the local directory's edges while Redis is down still are). Main
 * thread, at start and at each reload (copied; the backplane threads see
 * the new set from their next operation on). 0 or -ENOMEM.
 */
int hub_cluster_set_wh(struct hub_cluster *c, const bool *in_redis,
                       unsigned n, uint64_t delay_ms, unsigned max_entries);
/* The entries an app's stream holds at most (--webhook-stream-max; the
 * default before any set). Any thread. */
unsigned hub_cluster_wh_max(const struct hub_cluster *c);
/* Does app's edge go through Redis? Its delay in *delay_ms. */
bool hub_cluster_wh_redis(const struct hub_cluster *c, unsigned app,
                          uint64_t *delay_ms);

/*
 * The cluster key (hub/cluster/cluster_key.h; owned from now on, NULL: none): envelopes
 * this node encodes carry its MAC, and what arrives must verify
 * (docs/SCALING.md, "The cluster key"). Before the backplane thread
 * starts.
 */
struct hub_cluster_key;
void hub_cluster_set_key(struct hub_cluster *c, struct hub_cluster_key *key);
bool hub_cluster_has_key(const struct hub_cluster *c);
/*
 * The stamp a join script puts before the member_added it may publish
 * for (app, channel, uid, info): "~<ctr><time><mac><node>\n" (hex), in
 * *out (owned, NUL-terminated). Its length; 0 (*out NULL) without a key;
 * -ENOMEM. Backplane thread, when the script call is sent (its counter
 * must be above every envelope sent before it).
 */
int hub_cluster_member_stamp(struct hub_cluster *c, const char *app_id,
                             const char *ch, size_t ch_len, const char *uid,
                             size_t ulen, const char *info, size_t ilen,
                             char **out);

/*
 * Recovery's gap fill (docs/RECOVERY.md "In a cluster"): Redis's pub/sub
 * is at most once, so a node may miss a publication; when the missing one
 * was on a channel with history, the node reads the channel's stream and
 * delivers what it lacks of that origin, in order, before what followed
 * (held meanwhile). A fill request: the broker channel (owned), the
 * history origin and the seqs strictly between from and to that are
 * missing, and the broker origin whose hole it is (owned).
 */
struct hub_cluster_fill {
    char *rchan;
    size_t rchan_len;
    char *origin;                  /* the envelope's origin (a node id) */
    size_t origin_len;
    char horigin[HUB_HIST_ORIGIN_MAX + 1];
    uint64_t from, to;
    unsigned app;
};
/* Who reads the stream for a fill (server/redis/redis_hist.c): fn queues
 * the read (0) and later calls hub_cluster_fill_answer() exactly once, on
 * the backplane thread; -errno when it cannot (then the held messages go
 * at once). Before the backplane thread starts. */
void hub_cluster_set_fill(struct hub_cluster *c,
                          int (*fn)(void *ctx, struct hub_cluster_fill *req),
                          void *ctx);
/*
 * The fill's read came back (rd: its answer, NULL when it failed or the
 * connection went; rx: the channel's receive state now, NULL when no
 * longer received): deliver what it lacked, then what was held. Frees req.
 * Backplane thread.
 */
void hub_cluster_fill_answer(struct hub_cluster *c, struct hub_cluster_rx *rx,
                             struct hub_cluster_fill *req,
                             const struct hub_hist_read *rd);
void hub_cluster_fill_free(struct hub_cluster_fill *req);

/* Backplane thread: post a history read's answer (rd->rc and the rest
 * filled) to its loop, or drop it when the loops are going. */
void hub_cluster_hist_answer(struct hub_cluster *c, struct hub_hist_read *rd);

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

/*
 * The cluster-wide directory, backplane thread side (server/redis/redis_dir.c
 * does the network). Redis key and message formats: docs/SCALING.md.
 */

/* One member as Redis returns it (not NUL-terminated). */
struct hub_cluster_member {
    const char *uid, *info;
    size_t uid_len, info_len;
};

/* Whether the directory answers from Redis (set by the backplane thread:
 * true from the REJOIN snapshot after a connect, false when Redis goes). */
void hub_cluster_dir_set_up(struct hub_cluster *c, bool up);
bool hub_cluster_dir_is_up(struct hub_cluster *c);
/* The REJOIN snapshot: sets the directory up and bumps the generation in
 * one step (ops made before it are in the snapshot and are not sent
 * again; their edges went to the local engine), and visits the wrapped
 * directory (hub_directory_foreach). Returns the new generation. */
uint64_t hub_cluster_dir_snapshot(
    struct hub_cluster *c,
    void (*chan)(void *ctx, unsigned app, const char *name, size_t len,
                 uint32_t subs),
    void (*member)(void *ctx, unsigned app, const char *name, size_t len,
                   const char *uid, const char *info, uint32_t conns),
    void *ctx);
/* Backplane thread, after a rejoin: every counting channel with local
 * subscribers is due again as after a local change (hub/channel/subcount.h), so
 * that its subscribers, here and on the other nodes, get the count Redis
 * holds now. */
void hub_cluster_counts_refresh(struct hub_cluster *c);
/*
 * The online REJOIN snapshot (backplane thread): bumps the online
 * generation under the hub's online registry's mutex and visits every
 * user online on this node with its watchlist (hub_online_visit). Ops
 * made before it are in it.
 */
void hub_cluster_online_snapshot(
    struct hub_cluster *c,
    void (*user)(void *ctx, unsigned app, const char *id,
                 const char *const *ids, size_t n),
    void *ctx);
/* A resync of uid's watched users (a SIGNIN op with full, neither first
 * nor replace) for the backplane thread itself; NULL out of memory. */
struct hub_cluster_op *hub_cluster_online_state_op(struct hub_cluster *c,
                                                   unsigned app,
                                                   const char *uid);
/* Is oop's change already in the latest online snapshot? */
bool hub_cluster_online_stale(struct hub_cluster *c,
                              const struct hub_cluster_onop *oop);
/* Free an online op's payload (NULL: nothing). */
void hub_cluster_onop_free(struct hub_cluster_onop *oop);

/* Is dop's effect already in the latest REJOIN snapshot? */
bool hub_cluster_dir_stale(struct hub_cluster *c,
                           const struct hub_cluster_dirop *dop);
/* The app id of index (valid until destroy), NULL when unknown. */
const char *hub_cluster_app_id(struct hub_cluster *c, unsigned index);
/* The indices the cluster knows ids for: 0..span-1 (the apps at start and
 * every app a reload added; a removed app keeps its id). Any thread. */
unsigned hub_cluster_app_span(struct hub_cluster *c);
/* The index of the app id[0..len) (a scan), or -1. Any thread. */
int hub_cluster_app_index(struct hub_cluster *c, const char *id, size_t len);
const char *hub_cluster_prefix(const struct hub_cluster *c);

/* A JOIN's script reply: rc 0 or -ENOSPC (the channel is full
 * cluster-wide: the local count is undone); chan_first / member_first as
 * the script says; for presence the member list at cseq. A stale JOIN
 * (answered by a members read) passes false, false. */
void hub_cluster_dir_joined(struct hub_cluster *c,
                            struct hub_cluster_dirop *dop, int rc,
                            bool chan_first, bool member_first,
                            uint64_t cseq,
                            const struct hub_cluster_member *m, size_t n);
/* A LEAVE's script reply (edges). */
void hub_cluster_dir_left(struct hub_cluster *c,
                          struct hub_cluster_dirop *dop, bool chan_last,
                          bool member_last);
/* No answer from Redis (down, gone, or an error): JOIN and QUERY answered
 * from the local directory (or the view), LEAVE applied to the view. */
void hub_cluster_dir_local(struct hub_cluster *c,
                           struct hub_cluster_dirop *dop);
/* A QUERY's answer: INFO fills info (json NULL), LIST and USERS pass the
 * JSON (owned, handed to the caller; NULL = out of memory). */
void hub_cluster_dir_queried(struct hub_cluster *c,
                             struct hub_cluster_dirop *dop,
                             const struct hub_channel_info *info,
                             json_t *json);
/* Free a dirop without answering (the cluster is going away). */
void hub_cluster_dirop_free(struct hub_cluster_dirop *dop);

/*
 * dop's caller is never answered now (the backplane is stopping: a join or
 * read still parked or queued): dop is kept until hub_cluster_destroy(),
 * which calls its done with -ECANCELED once every loop is gone, so that
 * the caller frees what it kept for it. A dop without a caller is freed.
 * Any thread.
 */
void hub_cluster_dir_cancel(struct hub_cluster *c,
                            struct hub_cluster_dirop *dop);

/*
 * A message on a member-event channel "<prefix>:m:<app>:<channel>":
 * "<cseq>\n+<n>\n<uid><user_info>" or "<cseq>\n-<n>\n<uid>" (n the uid's
 * length in bytes: counted, so that any byte may be in it). Applied to the
 * channel's view (events older than the view ignored, holes counted in
 * member_gaps; a change delivered to local subscribers). 0, 1 when
 * ignored (old, or no local subscriber), -EINVAL when malformed (counted
 * bad).
 */
int hub_cluster_member_msg(struct hub_cluster *c, const char *rchan,
                           size_t rlen, const char *data, size_t len);
/* A member list read at cseq (REJOIN): applied to the view as a join
 * reply (the difference delivered locally). */
void hub_cluster_view_refresh(struct hub_cluster *c, unsigned app,
                              const char *name, size_t len, uint64_t cseq,
                              const struct hub_cluster_member *m, size_t n);
/* The member-event channel was unsubscribed: forget the view. */
void hub_cluster_view_drop(struct hub_cluster *c, unsigned app,
                           const char *name, size_t len);
/* REJOIN: every view takes its next list whatever its cseq (Redis may
 * have restarted and its sequences with it); events wait for that list. */
void hub_cluster_views_stale(struct hub_cluster *c);
/* Give every presence channel with local subscribers a view, seeded from
 * the local directory when it has none (joined while Redis was down: its
 * subscribers were told the local members), so that a REJOIN's refresh
 * reaches it and brings the other nodes' members. */
void hub_cluster_views_seed(struct hub_cluster *c);
/* Visit every view (app, name): for REJOIN's refresh. */
void hub_cluster_views(struct hub_cluster *c,
                       void (*fn)(void *ctx, unsigned app, const char *name,
                                  size_t len),
                       void *ctx);
/* Test helper: the view's members (sorted by uid) as JSON text of
 * {"presence":...}, and its applied cseq; NULL when there is no view. */
char *hub_cluster_view_json(struct hub_cluster *c, unsigned app,
                            const char *name, size_t len, uint64_t *applied);

#endif
