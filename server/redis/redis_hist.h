/*
 * server/redis/redis_hist.h - recovery's reads of a channel's history
 * stream on the backplane thread (server/redis/redis_hist.c).
 *
 * Thread: the backplane thread.
 */
#ifndef SRV_REDIS_HIST_H
#define SRV_REDIS_HIST_H

struct srv_redis;
struct hub_cluster_op;

/* Run op's read (op->hrd, taken): its answer goes back to its loop, once. */
void srv_redis_hist_read(struct srv_redis *r, struct hub_cluster_op *op);

#endif
