/*
 * server/redis/redis_dir_ops.h - the cluster-wide directory's ops on the
 * backplane thread (server/redis/redis_dir_ops.c): JOIN, LEAVE, QUERY and
 * ONLINE ops of hub/cluster/cluster.h run as scripts, what waits for a
 * channel's SUBSCRIBE, and the presence views' lists. Private to the
 * files of server/redis/.
 *
 * Thread: the backplane thread only.
 */
#ifndef SRV_REDIS_DIR_OPS_H
#define SRV_REDIS_DIR_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "hub/cluster/cluster.h"

struct srv_redis_dir;

/* A JOIN, LEAVE, QUERY or ONLINE op; true when d kept op (it frees it
 * later). */
bool srv_redis_dir_op(struct srv_redis_dir *d, struct hub_cluster_op *op);
/* Redis confirmed the SUBSCRIBE of broker channel name. */
void srv_redis_dir_confirmed(struct srv_redis_dir *d, const char *name,
                             size_t len);
/* The node unsubscribes broker channel name (no local subscriber left):
 * what waited for its SUBSCRIBE runs now, in order, as the SUBSCRIBE's
 * confirmation (which no longer counts) will not run it. */
void srv_redis_dir_unsubscribed(struct srv_redis_dir *d, const char *name,
                                size_t len);

/* An ONLINE op: run, or parked until the user channel's SUBSCRIBE is
 * confirmed (true: d kept op). */
bool srv_redis_dir_online_in(struct srv_redis_dir *d,
                             struct hub_cluster_op *op);
/* A presence view's list read again once its member channel is confirmed
 * (ctx = d; the hub_cluster_views callback). */
void srv_redis_dir_view(void *ctx, unsigned app, const char *name,
                        size_t len);
/* The views waiting for their member channel, dropped. */
void srv_redis_dir_refresh_clear(struct srv_redis_dir *d);
/* Redis went: what was parked is answered locally (an online op counts
 * lost), the waiting views are dropped. */
void srv_redis_dir_park_down(struct srv_redis_dir *d);

#endif
