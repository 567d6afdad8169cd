/*
 * server/redis/redis_dir_int.h - the state of the cluster-wide directory
 * on the backplane thread, shared by its files: redis_dir.c (its life),
 * redis_dir_ops.c (ops, parking, the views' lists) and
 * redis_dir_rejoin.c (REJOIN). Types only.
 *
 * Thread: the backplane thread only (created and freed on the main
 * thread before start / after stop).
 */
#ifndef SRV_REDIS_DIR_INT_H
#define SRV_REDIS_DIR_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "hub/cluster/cluster.h"
#include "server/redis/redis_call.h"

/* Fields in one REJOIN chunk, and users in one online REJOIN chunk
 * (server/redis/lua/dir_rejoin.lua, online_rejoin.lua). */
#define SRV_REJOIN_CHUNK 1000

/* A presence view to refresh once its member channel is confirmed. */
struct refresh {
    struct refresh *next;
    unsigned app;
    char *mchan;
    size_t mlen;
    char *name;
    size_t len;
};

struct srv_redis_dir {
    struct srv_redis_call_ctx calls; /* the connection, the scripts' SHAs */
    struct srv_redis *r;
    bool (*confirmed_fn)(struct srv_redis *r, const char *name, size_t len);
    struct hub_cluster *c;
    struct hub_backplane_stats *st;
    struct srv_redis_ready *ready; /* told when a REJOIN starts and ends */
    char *node;
    struct hub_cluster_op *parked, **parked_tail;
    struct refresh *refresh;
    /* The REJOIN in progress: its chunks (SRV_REJOIN_CHUNK fields a
     * script), then the sweep of the old share's rest, then the views'
     * lists. Replies of an earlier one (gen) are ignored. */
    struct {
        unsigned gen;
        unsigned chunks, left;     /* chunks sent; still unanswered */
        bool sent_all, failed;
        long long tot[5];          /* subs, channels, members, +, - */
        long long on[2];           /* online users, appeared */
        char *tok;                 /* the old share's reap token */
    } rj;
};

#endif
