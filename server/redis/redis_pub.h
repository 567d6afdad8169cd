/*
 * server/redis/redis_pub.h - the backplane's sending side
 * (server/redis/redis_pub.c): envelopes PUBLISHed with a seq per broker
 * channel, the cache channels' entries written and loaded back. Private
 * to the files of server/redis/.
 *
 * Thread: the backplane thread (srv_redis_new_epoch also at create,
 * srv_redis_tx_clear after stop).
 */
#ifndef SRV_REDIS_PUB_H
#define SRV_REDIS_PUB_H

#include <stddef.h>

#include "hub/cluster/cluster.h"

struct srv_redis;

/* A new random epoch: receivers start counting this node's seqs anew. */
void srv_redis_new_epoch(struct srv_redis *r);
/* An EVENT, TERMINATE or COUNT op PUBLISHed (counted lost when Redis is
 * down or too much is in flight). */
void srv_redis_pub_event(struct srv_redis *r,
                         const struct hub_cluster_op *op);
/* A CACHE op: SET of the channel's entry (PX its life), then PUBLISH. */
void srv_redis_pub_cache(struct srv_redis *r,
                         const struct hub_cluster_op *op);
/* One step of loading the cache entries from Redis, from cursor ("0":
 * the first, after every connect); the next step follows its reply. */
void srv_redis_cache_load(struct srv_redis *r, const char *cursor,
                          size_t len);
/* The seq table emptied. */
void srv_redis_tx_clear(struct srv_redis *r);

#endif
