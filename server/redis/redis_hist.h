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

struct hub_cluster_fill;
/* The cluster's fill function (hub_cluster_set_fill; ctx: the srv_redis):
 * read the stream of req's broker channel, then hub_cluster_fill_answer()
 * with the channel's receive state as it is then. 0, or -1 (nothing
 * queued). */
int srv_redis_hist_fill(void *ctx, struct hub_cluster_fill *req);

#endif
