/*
 * hub/cluster/cluster_int.h - what the parts of the scale-out backplane's
 * node-local half (hub/cluster/cluster.h) share, and nothing outside
 * hub/cluster/ includes: struct hub_cluster itself, the per-channel record
 * of the node's refcount, the set of apps whose webhooks go through Redis,
 * the counter helper, and the hub__cluster_* functions one part calls in
 * another.
 *
 * The parts, lowest first (each calls only the ones before it); the first
 * two have their own headers and know nothing of struct hub_cluster:
 *   cluster_key.c     the cluster key itself: MACs, the replay table
 *   cluster_envelope.c  the node-to-node envelope's binary encoding
 *   cluster_ids.c     app ids by index
 *   cluster_queue.c   the ops and their queue to the backplane thread
 *   cluster_seal.c    the cluster key on envelopes: sealing, opening
 *   cluster_view.c    presence views (the members local subscribers saw)
 *   cluster_member.c  member events from Redis and the join stamp
 *   cluster_dir.c     the wrapped directory: refcount, JOIN/LEAVE/QUERY ops
 *   cluster_edge.c    webhook edges: from scripts or the local directory
 *   cluster_answer.c  the backplane thread's replies to directory ops
 *   cluster_online.c  online state and watchlists across nodes
 *   cluster_cache.c   the cluster-wide cache of cache channels
 *   cluster_bus.c     publish across nodes, and the envelope it sends
 *   cluster_rx.c      what arrives from the broker
 *   cluster_life.c    create, settings, the backplane it fills, destroy
 *
 * Locks: mu (the refcount table, the queue, the generations), vmu (the
 * views), deliver_mu (delivery to the loops against their teardown),
 * edge_mu (the edge hook) and ids_mu (the app ids). The online op takes mu
 * under the online registry's mutex; a view delivers (deliver_mu) under
 * vmu; the parts that need both mu and vmu copy out under mu first.
 */
#ifndef HUB_CLUSTER_INT_H
#define HUB_CLUSTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/base/chantab.h"
#include "hub/cluster/cluster.h"
#include "hub/loop/directory.h"

#define USER_PREFIX "#server-to-user-"

/*
 * The backplane's counters have several writers (every loop, the
 * backplane thread, the Redis threads), so they are counted with
 * HUB_STAT_ADD_SHARED / HUB_STAT_SUB_SHARED (hub/loop/stats.h), one atomic
 * read-modify-write each: HUB_STAT_ADD is a load and a store, right for a
 * loop's own counters only.
 */

/* A channel with local subscribers: how many, and its UNSUB, made when
 * the record was, so that the last leave can always queue it. */
struct crec {
    struct hub_chan_node node;
    uint32_t refs;
    struct hub_cluster_op *unsub;
    struct hub_cluster_op *munsub; /* presence: the member channel's */
    char name[];
};

/* Which apps' edges the scripts queue in Redis (hub_cluster_set_wh). */
struct wh_set {
    struct wh_set *older;
    uint64_t delay_ms;
    unsigned max_entries;
    unsigned n;
    bool in[];
};

struct hub_cluster {
    char *node_id;
    size_t node_len;
    char *prefix;
    /* The cluster key (hub/cluster/cluster_key.h; NULL: none, nothing is MACed)
     * and the rate limit of its log line (backplane thread). */
    struct hub_cluster_key *key;
    uint64_t key_log_ms, key_log_forged, key_log_replays;
    /* App ids by index: append-only (a reload adds apps, hub/app/apptab.h;
     * an index keeps its id forever), so a string found here stays valid
     * until destroy. Loops and the backplane thread read it, the main
     * thread adds to it (hub_cluster_app_added). */
    pthread_mutex_t ids_mu;
    char **ids;                    /* owned; NULL = no app at that index */
    unsigned n_ids;
    /* Ids replaced at their index (a reload refused after it told the
     * cluster): kept until destroy, since a reader may hold one. */
    char **retired;
    unsigned n_retired;
    char *cache_chan, *cache_pattern; /* "<prefix>:cache", ...":cache:*" */
    size_t cache_chan_len;
    /* The apps at start (borrowed, never freed): the cluster-wide cache
     * reads their cache settings; an app a reload added publishes its
     * cache channels as plain events across nodes. */
    const struct hub_app *apps;
    unsigned n_apps;
    size_t max_queue;
    void (*wake)(void *ctx);
    void *wake_ctx;
    struct hub *hub;
    struct hub_directory *dir;

    pthread_mutex_t mu;            /* the table and the queue */
    struct hub_chantab chans;
    struct hub_cluster_op *head, **tail;
    size_t queued;                 /* events in the queue */

    /* Delivery from the backplane thread against the loops' teardown:
     * hub_cluster_close() sets closed under it, after which nothing is
     * delivered. */
    pthread_mutex_t deliver_mu;
    bool closed;
    /* Recovery's gap fill: the read of a channel's stream, on the
     * backplane thread (server/redis/redis_hist.c); NULL: none. */
    int (*fill_fn)(void *ctx, struct hub_cluster_fill *req);
    void *fill_ctx;
    /* Answers nobody can get any more (under deliver_mu, chained through
     * inbox.next): their done runs with -ECANCELED at destroy. */
    struct hub_cluster_dirop *dropped;

    /* The cluster-wide directory. */
    atomic_bool dir_up;
    uint64_t gen;                  /* under mu: REJOIN generation */
    uint64_t ogen;                 /* under mu: online snapshot generation */
    pthread_mutex_t vmu;           /* views */
    struct hub_chantab views;
    pthread_mutex_t edge_mu;       /* the edge hook */
    hub_dir_edge_fn *edge;
    void *edge_ctx;
    /* Durable webhooks: whose edges the scripts queue in Redis (by app
     * index). Published whole by the main thread (start, each reload),
     * read by the backplane threads; older sets are kept until destroy
     * (a reader may still hold one; reloads are rare). */
    _Atomic(struct wh_set *) wh;

    struct hub_backplane_stats stats;
};

/* cluster_queue.c: an op for (app, name) with its broker channel name,
 * "<prefix>:<mid><app id>:<name>" (op_new: mid ""); NULL out of memory or
 * for an app index without an id. */
struct hub_cluster_op *hub__cluster_op_new_mid(struct hub_cluster *c,
                                               enum hub_cluster_op_kind kind,
                                               unsigned app, const char *name,
                                               size_t len, const char *mid);
struct hub_cluster_op *hub__cluster_op_new(struct hub_cluster *c,
                                           enum hub_cluster_op_kind kind,
                                           unsigned app, const char *name,
                                           size_t len);
/* Under c->mu: op at the queue's tail; *wake true on the empty ->
 * non-empty edge. */
void hub__cluster_push_locked(struct hub_cluster *c, struct hub_cluster_op *op,
                              bool *wake);
/* Under c->mu: call the wake function when edge. */
void hub__cluster_wake_locked(struct hub_cluster *c, bool edge);
/* An event, terminate, cache or count op queued, or counted lost (and
 * freed) when max_queue events wait. */
void hub__cluster_enqueue(struct hub_cluster *c, struct hub_cluster_op *op);

/* cluster_rx.c: the last seq seen from one origin on one broker channel,
 * and recovery's gap fill (cluster_fill.c): the last history seq delivered
 * from it, and while a hole is read from the channel's stream, what
 * arrived after it (held, in order, bounded). */
struct hub_cluster_held;
struct hub_cluster_envelope;
struct hub_cluster_origin {
    struct hub_cluster_origin *next;
    uint64_t epoch, last;
    uint64_t hlast;                /* 0: none yet */
    bool filling;
    struct hub_cluster_held *held, **held_tail;
    size_t n_held, held_bytes;
    size_t len;
    char id[];
};
/* Deliver a checked envelope of app to this node's loops (under
 * deliver_mu, nothing once closed). */
void hub__cluster_deliver_env(struct hub_cluster *c, unsigned app,
                              const struct hub_cluster_envelope *e);
/* cluster_fill.c: true when e (data: the bytes it was decoded from, which
 * its pointers point into) is held for a fill, started or under way;
 * false to deliver it now. */
bool hub__cluster_fill_take(struct hub_cluster *c,
                            struct hub_cluster_origin *o, const char *rchan,
                            size_t rchan_len, unsigned app,
                            const struct hub_cluster_envelope *e, bool gap,
                            const void *data);
/* Free what o holds (its channel is no longer received). */
void hub__cluster_fill_drop(struct hub_cluster_origin *o);

/* cluster_seal.c (c->key set): the trailer sealed onto out[0..n), which has
 * HUB_CLUSTER_KEY_TRAILER bytes of room after n; 0 or -ENOMEM. */
int hub__cluster_key_seal(struct hub_cluster *c, unsigned char *out,
                          size_t n);
/* data[0..len) into e, checked against the key when there is one: 0,
 * -EINVAL (malformed), -EACCES (does not verify, or unsigned), -ESTALE (a
 * replay; fresh only). Without a key, exactly the envelope. */
struct hub_cluster_envelope;
int hub__cluster_open_env(struct hub_cluster *c,
                          struct hub_cluster_envelope *e,
                          const unsigned char *data, size_t len, bool fresh);
/* A message dropped by the key (-ESTALE a replay, else forged), counted
 * and logged at most once per 10 s. Backplane thread. */
void hub__cluster_key_drop(struct hub_cluster *c, int why, const char *origin,
                           size_t origin_len, const char *what);
/* The big-endian 64-bit number at p. */
uint64_t hub__cluster_be64(const unsigned char *p);

/* cluster_view.c. Every view at destroy (no thread is left). */
void hub__cluster_views_free(struct hub_cluster *c);
/* A checked member event at cseq for the view of (app, ch): applied, or
 * kept until the view's list when it has none. 0, or 1 when ignored. */
int hub__cluster_view_member_event(struct hub_cluster *c, unsigned app,
                                   const char *ch, size_t ch_len,
                                   uint64_t cseq, bool add, const char *uid,
                                   size_t ulen, const char *info,
                                   size_t ilen);
/* A presence JOIN's reply: the view takes the list m[0..n) at cseq and
 * the waiting caller (if any) its members; false when that list could not
 * be made (out of memory: the join is refused). */
bool hub__cluster_view_joined(struct hub_cluster *c,
                              struct hub_cluster_dirop *dop, bool member_first,
                              uint64_t cseq,
                              const struct hub_cluster_member *m, size_t n);
/* Redis did not answer a presence JOIN with a caller: the local answer,
 * from the view when there is one. false out of memory. */
bool hub__cluster_view_join_local(struct hub_cluster *c,
                                  struct hub_cluster_dirop *dop);
/* uid's last local connection left without Redis: the view (if any)
 * drops uid. tell: the view tells local subscribers itself (a LEAVE Redis
 * did not answer: the hub was told "not last"); else the hub does (Redis
 * was down at the leave). */
void hub__cluster_view_leave(struct hub_cluster *c, unsigned app,
                             const char *name, size_t len, const char *uid,
                             bool tell);
/* Redis down: the view (if any) follows what the hub tells local
 * subscribers of a join (j's list becomes the view's). */
void hub__cluster_view_join_down(struct hub_cluster *c, unsigned app,
                                 const char *name, size_t len,
                                 struct hub_presence_join *j);

/* cluster_dir.c. Undo a counted local join (a refused JOIN): the local
 * directory and the refcount, without a LEAVE op (Redis never counted
 * it). */
void hub__cluster_undo_local(struct hub_cluster *c,
                             struct hub_cluster_dirop *dop);
/* Whether gen is no longer *cur (a generation kept under c->mu). */
bool hub__cluster_gen_stale(struct hub_cluster *c, uint64_t gen,
                            const uint64_t *cur);
/* The directory ops of the cluster (hub/loop/backplane.h). */
extern const struct hub_directory_ops hub__cluster_dir_ops;

/* cluster_edge.c. An edge a script decided: queued in Redis by the script
 * itself when the app's webhooks go there, else handed to the hook. */
void hub__cluster_script_edge(struct hub_cluster *c,
                              enum hub_dir_edge_kind kind, unsigned app,
                              const char *name, size_t len, const char *uid);
/* The directory's set_edge_hook. */
void hub__cluster_set_edge_hook(void *d, hub_dir_edge_fn *fn, void *ctx);

/* cluster_online.c: the directory's online op. */
bool hub__cluster_dir_online(void *d, const struct hub_online_change *ch);

/* cluster_bus.c: the bus ops of the cluster (hub/loop/backplane.h). */
extern const struct hub_bus_ops hub__cluster_bus_ops;

/* cluster_life.c: the bus's destroy, which frees the whole cluster (the
 * bus's impl; the directory's destroy is NULL). */
void hub__cluster_bus_destroy(void *b);

#endif
