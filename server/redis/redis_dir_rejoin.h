/*
 * server/redis/redis_dir_rejoin.h - REJOIN of the cluster-wide directory
 * (server/redis/redis_dir_rejoin.c): replace this node's share in Redis
 * with what the local directory really has, then refresh every presence
 * view. Runs on every (re)connect (srv_redis_dir_up) and when the lease
 * renewal finds this node was reaped (srv_redis_dir_rejoin,
 * server/redis/redis.h). A REJOIN still in progress is forgotten.
 *
 * Thread: the backplane thread only; nothing happens while Redis is down.
 */
#ifndef SRV_REDIS_DIR_REJOIN_H
#define SRV_REDIS_DIR_REJOIN_H

struct srv_redis_dir;

void srv_redis_dir_rejoin_now(struct srv_redis_dir *d);

#endif
