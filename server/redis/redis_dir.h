/*
 * server/redis/redis_dir.h - the cluster-wide directory on the backplane
 * thread: the scripts of server/redis/redis_lua.h run for the JOIN, LEAVE
 * and QUERY ops of hub/cluster/cluster.h and for online changes
 * (server/redis/redis_dir_ops.h), their replies handed back to the
 * cluster, REJOIN on every connect (server/redis/redis_dir_rejoin.h),
 * joins held until their channel's SUBSCRIBE is confirmed. This header:
 * the directory's life. Private to the files of server/redis/.
 *
 * Thread: the backplane thread only (create and free from the main
 * thread before start / after stop).
 */
#ifndef SRV_REDIS_DIR_H
#define SRV_REDIS_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "server/redis/redis_async.h"

#include "hub/cluster/cluster.h"

struct srv_redis;
struct srv_redis_dir;

/* cmd: the command connection while Redis is up, else NULL; confirmed:
 * whether Redis confirmed the SUBSCRIBE of broker channel name (true when
 * r has no record of it: nothing to wait for). Both from server/redis/redis.c,
 * called back with r. */
struct srv_redis_dir *srv_redis_dir_create(
    struct srv_redis *r, struct srv_redis_async *(*cmd)(struct srv_redis *r),
    bool (*confirmed)(struct srv_redis *r, const char *name, size_t len),
    struct hub_cluster *c, const char *node_id);
void srv_redis_dir_free(struct srv_redis_dir *d);
struct srv_redis_ready;
/* The readiness a REJOIN's start and end are told to
 * (server/redis/redis_ready.h; borrowed, outlives d). Before start. */
void srv_redis_dir_set_ready(struct srv_redis_dir *d,
                             struct srv_redis_ready *rd);
/* Redis is up (after the SUBSCRIBEs were sent): load the scripts, REJOIN. */
void srv_redis_dir_up(struct srv_redis_dir *d);
/* Redis went (after its connections were dropped): held joins answered
 * locally. */
void srv_redis_dir_down(struct srv_redis_dir *d);

#endif
