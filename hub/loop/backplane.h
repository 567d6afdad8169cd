/*
 * hub/loop/backplane.h - the seam between the hub and where channel state and
 * publications live.
 *
 * Two ops tables: the directory (who is subscribed where, presence
 * members, the counts REST reports) and the bus (getting a publication or
 * a terminate order to every loop that has subscribers). The hub holds one
 * struct hub_backplane and reaches both only through the static inline
 * fronts below: hub_publish() and hub_terminate_user() keep the signatures
 * they always had, and the hub_dir_*() fronts take the hub where the
 * directory calls took h->dir. hub_create() (hub/hub.h) installs the
 * in-process implementation (hub_backplane_local: hub/loop/directory.c and
 * hub/loop/publish.c); a scale-out backplane (several processes sharing
 * state through a broker) passes its own tables to hub_create_with().
 *
 * The contract an implementation keeps:
 *
 * Threads. Every op may be called from any loop thread, concurrently; the
 * implementation synchronises itself. The base ops are synchronous: they
 * return with the answer (a join returns the member list and its seq). A
 * loop thread must never wait on the network inside an op: an
 * implementation whose answer lives elsewhere (a broker) provides the
 * asynchronous ops below and answers the synchronous ones from what it
 * has at hand (its own node's share; the console and the '#' joins at
 * pusher:signin use them).
 *
 * Directory.
 * - join counts one more subscription of (app, name); for presence it
 *   takes j and counts the user's connections. j->first is true when this
 *   is the user's first connection to the channel anywhere the directory
 *   reaches (the member_added edge); j->members_json is the member list as
 *   sent in subscription_succeeded, owned by the caller; j->max_members
 *   (0 = none) refuses a new member with -ENOSPC. 0, -ENOSPC, -ENOMEM; on
 *   an error nothing was counted.
 * - '#' channels (#server-to-user-<id>, joined at pusher:signin with j
 *   NULL, left with the session) go through join and leave too, so that a
 *   backplane learns which nodes serve a user; they are never counted,
 *   listed or given presence (the in-process directory ignores them).
 * - leave is the reverse; *last (if not NULL) is true when the user's last
 *   connection left (the member_removed edge).
 * - Sequence numbers. Each presence change (a first join, a last leave)
 *   takes a seq, increasing, so that for one channel the member list a
 *   join returns with j->seq = J reflects exactly the changes with seq <=
 *   J. leave gives the seq of the change in *seq (0 when there was none).
 *   Member events are published with skip->member_seq = the seq of their
 *   change, and delivery skips subscriptions joined at joined_seq >= it: a
 *   late event can never contradict a member list already sent. Only the
 *   order within a channel matters (one counter per channel would do).
 * - Edges. set_edge_hook installs fn (NULL removes it); the directory
 *   then calls fn for every 0 <-> 1 move of a channel's subscription count
 *   (HUB_DIR_CHANNEL_FIRST / _LAST: channel_occupied / vacated) and of a
 *   presence user's connection count (HUB_DIR_MEMBER_FIRST / _LAST:
 *   member_added / removed), once per move wherever the directory reaches
 *   (for a shared directory: decided once, by whoever moved the global
 *   count; other nodes report nothing), in the order the moves happened,
 *   from the thread that made the move, while it decides it (fn must not
 *   block or call back in). Within one join the channel edge comes before
 *   the member edge; within one leave the member edge comes first. The
 *   webhooks (hub/webhook/queue.h) listen here. NULL op: edges not reported.
 * - info, list and users answer from the directory's state (never by
 *   asking each loop or node and waiting); list and users return owned
 *   JSON, NULL when out of memory.
 * - Asynchronous ops (optional; NULL = the hub calls join / info / list /
 *   users, as the in-process directory wants: no cost added). The hub
 *   reaches them only through hub_dir_join_async() / hub_dir_query_async(),
 *   which fall back to the synchronous ops. join_async(req) returns < 0
 *   (an error as join's; nothing counted, done not called), 0 (answered at
 *   once: req->j filled as by join, done NOT called) or HUB_DIR_PENDING:
 *   then done(req, rc) is called exactly once, later, on req->loop's
 *   thread (posted through its inbox), rc as join's, also when the broker
 *   goes away or at shutdown (a local answer, rc 0, or a negative errno).
 *   A done that can no longer run on its loop (still queued when the loop
 *   is destroyed, or never answered before the backplane stopped) is
 *   called with -ECANCELED from the directory's destroy, after every loop
 *   is gone: by then the loop's sessions and HTTP requests are gone, and
 *   the callee only frees what it kept (touching neither req->loop nor a
 *   session).
 *   req, name and j are the caller's and stay valid until done. When done
 *   gets rc 0 the subscription IS counted: a caller that no longer wants it
 *   (session gone, unsubscribed meanwhile) calls leave. query_async is the
 *   same for the reads (struct hub_dir_query: kind INFO fills info, LIST
 *   and USERS set json, owned by whoever receives the answer, NULL = out
 *   of memory); on done rc < 0 nothing is set.
 * - Member events. A directory that delivers member_added / member_removed
 *   of a presence channel to every subscriber itself (through
 *   hub_fanout_loops with skip.member_seq in the node's seq space) sets
 *   j->dir_events on join: the hub then publishes no member_added for it,
 *   and that directory's leave returns *last = false so that the hub
 *   publishes no member_removed either (leave has no other way to say it;
 *   edges for webhooks still go through the edge hook). j->seq, and the
 *   seqs of its deliveries, stay in the node-local space
 *   (hub_directory_take_seq() of the wrapped in-process directory).
 *
 * Bus.
 * - publish delivers r->f to every subscriber of (r->app, r->name) on every
 *   loop, except r->skip (socket id, member_seq). The frame and r are
 *   borrowed for the call: keep references or copy the bytes. The loops of
 *   this hub get it through hub_fanout_loops(h, from, r), which delivers on
 *   from before returning (a client event's sender is excluded on its own
 *   loop at once); what a bus receives from elsewhere it hands to
 *   hub_fanout_loops(h, NULL, r). 0, or a negative errno when this hub's
 *   other loops were not sent it.
 * - terminate_user closes every session of app signed in as uid, on every
 *   loop reached, as hub_fanout_terminate() does for this hub's loops.
 *
 * Scale-out. hub/cluster/cluster.h is the backplane of several processes sharing
 * Redis (docs/SCALING.md): its directory wraps the in-process one and
 * answers joins and reads from Redis (join_async, query_async; the
 * wrapped one while Redis is down), its bus delivers locally and hands the
 * rest to a backplane thread. Such a backplane sets stats (its counters,
 * shown by /stats and /metrics).
 *
 * Lifetime. hub_create_with() (through hub_create_core(), hub/loop/loop.h)
 * copies *bp; on success the hub owns the impl pointers and calls the
 * destroy ops (NULL = nothing to free) from hub_destroy(), after every loop
 * is gone. On failure the caller still owns them.
 */
#ifndef HUB_BACKPLANE_H
#define HUB_BACKPLANE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hub/loop/directory.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/loop/stats.h"

/* join_async / query_async: the answer comes later, through done. */
#define HUB_DIR_PENDING 1

/* A join whose answer may come later. */
struct hub_dir_join_req {
    unsigned app;
    const char *name;              /* borrowed: kept until done */
    size_t len;
    struct hub_presence_join *j;   /* NULL for non-presence; filled as by
                                    * join, before done */
    struct hub_loop *loop;         /* the calling loop: done runs there */
    void (*done)(struct hub_dir_join_req *req, int rc);   /* rc as join's */
};

enum hub_dir_query_kind {
    HUB_DIR_Q_INFO,                /* name -> info */
    HUB_DIR_Q_LIST,                /* prefix, user_count -> json */
    HUB_DIR_Q_USERS,               /* name -> json */
};

/* A read whose answer may come later (REST channel queries, info=). */
struct hub_dir_query {
    int kind;                      /* enum hub_dir_query_kind */
    unsigned app;
    const char *name;              /* INFO, USERS; borrowed until done */
    size_t len;
    const char *prefix;            /* LIST; NULL = all; borrowed */
    bool user_count;               /* LIST */
    struct hub_loop *loop;         /* done runs on its thread */
    /* Out: */
    struct hub_channel_info info;  /* INFO */
    json_t *json;                  /* LIST, USERS: owned by the receiver
                                    * of the answer; NULL = out of memory */
    void (*done)(struct hub_dir_query *q, int rc);
};

/*
 * A change of the hub's online registry (hub/channel/online.h) for a directory
 * shared by several processes: a signin (first: the user's first
 * connection in this process; replace: the signin carried the watchlist
 * ids[0..n), else the user's list is kept) or the user's last signout in
 * this process. Everything borrowed for the call.
 */
struct hub_online_change {
    unsigned app;
    const char *user;
    bool signin, first, replace;
    const char *const *ids;
    size_t n;
    uint32_t max_watchers;
};

struct hub_directory_ops {
    int (*join)(void *d, unsigned app, const char *name, size_t len,
                struct hub_presence_join *j);
    void (*leave)(void *d, unsigned app, const char *name, size_t len,
                  const char *uid, bool *last, uint64_t *seq);
    void (*info)(void *d, unsigned app, const char *name, size_t len,
                 struct hub_channel_info *out);
    json_t *(*list)(void *d, unsigned app, const char *prefix,
                    bool user_count);
    json_t *(*users)(void *d, unsigned app, const char *name, size_t len);
    void (*set_edge_hook)(void *d, hub_dir_edge_fn *fn, void *ctx);
    void (*destroy)(void *d);
    /* Optional, NULL = the synchronous ops above (see the contract). */
    int (*join_async)(void *d, struct hub_dir_join_req *req);
    int (*query_async)(void *d, struct hub_dir_query *q);
    /* Optional (NULL: online state is this process's): ch is decided
     * cluster-wide, the directory telling watchers and the signing user
     * (docs/SCALING.md, "Watchlists and online state"). Called under the
     * online registry's mutex, in the order of the changes; must not
     * block. True when taken; false: the caller tells them itself (the
     * broker is away). */
    bool (*online)(void *d, const struct hub_online_change *ch);
};

/*
 * Recovery in a cluster (hub/pusher/recover.c, docs/RECOVERY.md): a read of
 * what the other processes keep of a channel's history (the channel's
 * stream in Redis), on the bus's own thread. The asker fills the request
 * and node.ops (its run gets the answer on loop, its drop frees a read
 * whose loop went away) and hands it to hub_bus_history_read(); the bus
 * fills the answer and posts node to loop, exactly once (with rc -EIO when
 * it cannot read). Entries and names are owned by the read:
 * hub_hist_read_free() frees them.
 */
#define HUB_HIST_ORIGIN_MAX 64
#define HUB_HIST_LAST_MAX 16

struct hub_hist_entry {
    char origin[HUB_HIST_ORIGIN_MAX + 1];
    uint64_t seq, time_ms;         /* time: the entry node's wall clock */
    bool ex;                       /* the socket it skipped */
    uint64_t ex_hi;
    uint32_t ex_lo;
    char *data;                    /* the frame's payload, owned */
    size_t len;
};

struct hub_hist_read {
    struct hub_inbox_node node;
    struct hub_loop *loop;         /* where node goes */
    unsigned app;
    char *name;                    /* owned, NUL-terminated */
    size_t len;
    bool entries;                  /* the entries too (a resume), else only
                                      the last ids (a fresh start) */
    /* A page (the HTTP API's GET .../events; 0: every entry, recovery's
     * reads): at most count entries, after the anchor of (after_origin,
     * after_seq) ('a'), with t at or after since_ms ('t'), or within
     * ttl_ms of Redis's clock ('w'). */
    char page;
    size_t count;
    char after_origin[HUB_HIST_ORIGIN_MAX + 1];
    uint64_t after_seq, since_ms, ttl_ms;
    /* The answer. */
    int rc;                        /* 0, -EIO (Redis away or a bad reply) */
    struct hub_hist_entry *e;      /* oldest first */
    size_t n;
    struct {
        char origin[HUB_HIST_ORIGIN_MAX + 1];
        uint64_t seq;
    } last[HUB_HIST_LAST_MAX];     /* each origin's last seq, kept ttl x 2 */
    unsigned n_last;
    bool last_full;                /* more origins than last[] holds */
    uint64_t deleted_ms;           /* no older than the newest entry trimmed
                                      (Redis clock), 0: none trimmed */
    uint64_t now_ms;               /* Redis's clock at the read */
    uint64_t first_ms;             /* the stream's first entry's id time
                                      (Redis's clock); 0: none */
    bool anchored;                 /* page 'a': the stream holds an entry
                                      of after_origin at or under
                                      after_seq (the page starts after the
                                      last such) */
};

/* Free what a read owns (its name and answer), then the read. */
void hub_hist_read_free(struct hub_hist_read *rd);

struct hub_bus_ops {
    int (*publish)(void *b, struct hub *h, struct hub_loop *from,
                   const struct hub_pub_req *r);
    int (*terminate_user)(void *b, struct hub *h, struct hub_loop *from,
                          unsigned app, const char *uid);
    void (*destroy)(void *b);
    /* Optional (NULL: publish is used): an HTTP API event on a cache
     * channel, which the bus also hands to the other processes as the
     * channel's last event (hub/cluster/cluster_cache.h). */
    int (*publish_cache)(void *b, struct hub *h, struct hub_loop *from,
                         const struct hub_pub_req *r);
    /* Optional (NULL: one process, nothing to tell): this process changed
     * the subscription count of (app, name); tell the other processes
     * with subscribers of it, which then read the count anew
     * (hub/channel/subcount.h). Never blocks; may drop the notice. */
    void (*count_changed)(void *b, struct hub *h, unsigned app,
                          const char *name, size_t len);
    /* Optional (NULL: nothing is kept elsewhere): queue rd (see struct
     * hub_hist_read). 0, or -ENOMEM / -ENOTSUP (then rd is not posted). */
    int (*history_read)(void *b, struct hub *h, struct hub_hist_read *rd);
};

struct hub_backplane {
    const struct hub_directory_ops *dir;
    void *dir_impl;
    const struct hub_bus_ops *bus;
    void *bus_impl;
    /* A backplane that reaches other processes: its counters (/stats,
     * /metrics), owned by the impl; NULL for the in-process one. */
    struct hub_backplane_stats *stats;
};

/* Fill bp with the in-process backplane (a new directory, the local
 * bus). 0 or -ENOMEM. hub/loop/backplane.c. */
int hub_backplane_local(struct hub_backplane *bp);

/* Fronts. */

/* True when the directory took the online change (see the op). */
static inline bool hub_dir_online(struct hub *h,
                                  const struct hub_online_change *ch)
{
    return h->bp->dir->online && h->bp->dir->online(h->bp->dir_impl, ch);
}

/* Queue a read of a channel's history kept by other processes. */
static inline int hub_bus_history_read(struct hub *h, struct hub_hist_read *rd)
{
    if (!h->bp->bus->history_read)
        return -ENOTSUP;
    return h->bp->bus->history_read(h->bp->bus_impl, h, rd);
}

/* True when the backplane reaches other processes (a cluster). */
static inline bool hub_bus_remote(const struct hub *h)
{
    return h->bp->stats != NULL;
}

/* True when the bus reaches other processes and was told. */
static inline bool hub_bus_count_changed(struct hub *h, unsigned app,
                                         const char *name, size_t len)
{
    if (!h->bp->bus->count_changed)
        return false;
    h->bp->bus->count_changed(h->bp->bus_impl, h, app, name, len);
    return true;
}

static inline int hub_dir_join(struct hub *h, unsigned app, const char *name,
                               size_t len, struct hub_presence_join *j)
{
    return h->bp->dir->join(h->bp->dir_impl, app, name, len, j);
}

static inline void hub_dir_leave(struct hub *h, unsigned app,
                                 const char *name, size_t len,
                                 const char *user_id, bool *last,
                                 uint64_t *seq)
{
    h->bp->dir->leave(h->bp->dir_impl, app, name, len, user_id, last, seq);
}

static inline void hub_dir_info(struct hub *h, unsigned app, const char *name,
                                size_t len, struct hub_channel_info *out)
{
    h->bp->dir->info(h->bp->dir_impl, app, name, len, out);
}

static inline json_t *hub_dir_list(struct hub *h, unsigned app,
                                   const char *prefix, bool user_count)
{
    return h->bp->dir->list(h->bp->dir_impl, app, prefix, user_count);
}

static inline json_t *hub_dir_users(struct hub *h, unsigned app,
                                    const char *name, size_t len)
{
    return h->bp->dir->users(h->bp->dir_impl, app, name, len);
}

/* A join through join_async when the directory has it, else join (then
 * 0 or < 0 with req->j filled, done never called). Returns as join_async.
 * '#' channels stay on hub_dir_join(). */
static inline int hub_dir_join_async(struct hub *h,
                                     struct hub_dir_join_req *req)
{
    if (h->bp->dir->join_async)
        return h->bp->dir->join_async(h->bp->dir_impl, req);
    return h->bp->dir->join(h->bp->dir_impl, req->app, req->name, req->len,
                            req->j);
}

/* A read through query_async when the directory has it, else info / list
 * / users (then 0 with the answer in q, done never called). */
static inline int hub_dir_query_async(struct hub *h, struct hub_dir_query *q)
{
    if (h->bp->dir->query_async)
        return h->bp->dir->query_async(h->bp->dir_impl, q);
    switch (q->kind) {
    case HUB_DIR_Q_INFO:
        hub_dir_info(h, q->app, q->name, q->len, &q->info);
        return 0;
    case HUB_DIR_Q_LIST:
        q->json = hub_dir_list(h, q->app, q->prefix, q->user_count);
        return 0;
    case HUB_DIR_Q_USERS:
        q->json = hub_dir_users(h, q->app, q->name, q->len);
        return 0;
    default:
        return -EINVAL;
    }
}

/* Install the directory's edge hook; false when it reports no edges. */
static inline bool hub_dir_set_edge_hook(struct hub *h, hub_dir_edge_fn *fn,
                                         void *ctx)
{
    if (!h->bp->dir->set_edge_hook)
        return false;
    h->bp->dir->set_edge_hook(h->bp->dir_impl, fn, ctx);
    return true;
}

/*
 * Deliver f to every subscriber of (app, name) on every loop, except the
 * excluded socket. from is the calling loop (delivers synchronously) or
 * NULL. Takes its own references; the caller keeps its reference.
 * Returns 0 or -ENOMEM (then nothing was sent to other loops).
 */
static inline int hub_publish(struct hub *h, struct hub_loop *from,
                              unsigned app, const char *name, size_t len,
                              struct hub_frame *f,
                              const struct hub_skip *skip)
{
    const struct hub_pub_req r = { app, name, len, f, skip, false, NULL };

    return h->bp->bus->publish(h->bp->bus_impl, h, from, &r);
}

/* hub_publish() of a request the caller built: a client event of the read
 * in progress sets r->batch (hub_defer_begin, hub/loop/publish.h). */
static inline int hub_publish_req(struct hub *h, struct hub_loop *from,
                                  const struct hub_pub_req *r)
{
    return h->bp->bus->publish(h->bp->bus_impl, h, from, r);
}

/* hub_publish() of an HTTP API event on a cache channel (the caller keeps
 * it in the cache store after): with a backplane that reaches other processes,
 * they keep it too. */
static inline int hub_publish_cache(struct hub *h, struct hub_loop *from,
                                    unsigned app, const char *name,
                                    size_t len, struct hub_frame *f,
                                    const struct hub_skip *skip)
{
    const struct hub_pub_req r = { app, name, len, f, skip, false, NULL };

    if (h->bp->bus->publish_cache)
        return h->bp->bus->publish_cache(h->bp->bus_impl, h, from, &r);
    return h->bp->bus->publish(h->bp->bus_impl, h, from, &r);
}

/*
 * Close every session of app signed in as user_id (pusher:signin), on
 * every loop, with pusher:error 4009 and close 4009. from as for
 * hub_publish(). Returns 0 or -ENOMEM (then other loops were not told).
 */
static inline int hub_terminate_user(struct hub *h, struct hub_loop *from,
                                     unsigned app, const char *user_id)
{
    return h->bp->bus->terminate_user(h->bp->bus_impl, h, from, app,
                                      user_id);
}

#endif
