/*
 * server/redis/redis_lease.h - the node lease and the reaper of dead nodes, on
 * the backplane thread (server/redis/redis.c's libev loop and command
 * connection), keys as docs/SCALING.md "Node death" lays them out.
 *
 * Every lease/3 one script (the tick) renews this node's lease
 * (<prefix>:node:<id>, PX lease, SADD <prefix>:nodes), writes this node's
 * connections per app (HSET <prefix>:nc:<app> <id> <count>) and reads the
 * other nodes' sum into the app's hub_app_live.remote_sessions (the
 * cluster-wide max_connections), and looks for dead nodes: a member of
 * <prefix>:nodes without a lease key. Exactly one survivor wins
 * SET <prefix>:reap:<dead> <me> NX PX 30000 and, in the same script,
 * claims the dead node's share (its ns/nm hashes renamed under a reap
 * token, its ni hash and nc fields dropped, SREM nodes). The winner then
 * runs the reap script on the token, at most 1000 fields a call, until
 * it is empty: subtract from gs/gm (HDEL at 0), HDEL gi, HINCRBY gq and
 * PUBLISH "<cseq>\n-<n>\n<uid>" for users gone everywhere, and reports the
 * member_removed / channel_vacated edges through the directory's edge hook
 * (hub_cluster_report_edge), once.
 *
 * A node whose tick finds it is no longer in <prefix>:nodes was reaped
 * while away (stopped, partitioned): the tick re-registers it and the
 * node runs REJOIN (srv_redis_dir_rejoin, the cluster directory's), which
 * re-registers what it really has. A process starting under a node id
 * that still has state (a previous run killed and restarted within the
 * lease) claims that state itself and reaps it. On a clean stop the node
 * deregisters at once: it claims and reaps its own share.
 *
 * Thread: create on the main thread, everything else on the backplane
 * thread.
 */
#ifndef SRV_REDIS_LEASE_H
#define SRV_REDIS_LEASE_H

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct srv_redis_async;
struct hub;
struct hub_cluster;
struct hub_backplane_stats;
struct hub_app_live;
struct srv_redis;

struct srv_redis_lease_cfg {
    const char *node_id;           /* copied */
    const char *prefix;            /* copied */
    uint64_t lease_ms;             /* 1000..60000 */
    struct hub *hub;               /* the apps at start: ids, live structs
                                      (a reload's: srv_redis_lease_app_added) */
    struct hub_cluster *cluster;   /* the edge hook */
    struct hub_backplane_stats *st;
    struct srv_redis *redis;       /* rejoin's argument (opaque here) */
    /* REJOIN after this node was reaped (srv_redis_dir_rejoin, the
     * cluster directory's, server/redis/redis.h); NULL = none. A hook, not
     * a call: redis.c drives the lease, so the lease names nothing of
     * redis.c (neither its functions nor its header). */
    void (*rejoin)(struct srv_redis *r);
};

struct srv_redis_lease;

/* Owned; NULL when out of memory. Main thread, after the hub exists. */
struct srv_redis_lease *
srv_redis_lease_create(const struct srv_redis_lease_cfg *cfg);
/* After the backplane thread stopped (or never started). NULL: no-op. */
void srv_redis_lease_destroy(struct srv_redis_lease *l);
/*
 * A reload published app index (id, its live struct, which lasts for the
 * hub): from the next tick on its connections count cluster-wide. 0 or
 * -ENOMEM (the app keeps a per-node quota). Main thread; NULL: no-op.
 */
int srv_redis_lease_app_added(struct srv_redis_lease *l, unsigned index,
                              const char *id, struct hub_app_live *live);

/* The backplane came up on cmd: the first tick goes out at once (call
 * this before any other command on the new connection: a first
 * registration claims what an earlier run of this node id left). */
void srv_redis_lease_up(struct srv_redis_lease *l, struct ev_loop *loop,
                        struct srv_redis_async *cmd);
/* The connection is gone (call before it is freed). */
void srv_redis_lease_down(struct srv_redis_lease *l);
/*
 * A clean stop: deregister (reap this node's own share) and call done(ctx)
 * when that is finished, the connection went, or a deadline passed.
 * Returns false (done not called) when there is nothing to do: Redis
 * down, or never registered.
 */
bool srv_redis_lease_leave(struct srv_redis_lease *l, void (*done)(void *ctx),
                           void *ctx);

#endif
