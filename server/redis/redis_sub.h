/*
 * server/redis/redis_sub.h - the backplane's receiving side
 * (server/redis/redis_sub.c): the table of broker channels this node
 * wants, subscribes to and hears from, on the subscriber connection; and
 * the named-record table helpers both sides use. Private to the files of
 * server/redis/.
 *
 * Thread: the backplane thread (srv_redis_rx_clear: after it stopped).
 */
#ifndef SRV_REDIS_SUB_H
#define SRV_REDIS_SUB_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "hub/base/chantab.h"
#include "hub/cluster/cluster.h"
#include "server/redis/redis_async.h"

struct srv_redis;

/* The record of t named name, or NULL. */
void *srv_redis_tab_find(struct hub_chantab *t, const char *name,
                         size_t len);
/* A record of size sz (its node first, its name at name_off) keyed by
 * name, linked into t; NULL when out of memory. */
void *srv_redis_tab_add(struct hub_chantab *t, size_t sz, size_t name_off,
                        const char *name, size_t len);
/* A string or status reply with its text. */
bool srv_redis_is_str(const redisReply *e);

/* A SUB op: the channel is wanted (and subscribed to while Redis is up). */
void srv_redis_rx_sub(struct srv_redis *r, const struct hub_cluster_op *op);
/* An UNSUB op: no local subscriber is left (what the directory parked on
 * the channel runs now; a presence view goes). */
void srv_redis_rx_unsub(struct srv_redis *r, const struct hub_cluster_op *op);
/* Did Redis confirm the SUBSCRIBE of broker channel name? (True when no
 * record has it: nothing to wait for.) The directory's callback. */
bool srv_redis_rx_confirmed(struct srv_redis *r, const char *name,
                            size_t len);
/* Redis is up: the cache channel wanted, then a SUBSCRIBE for every
 * wanted channel. Returns how many. */
unsigned srv_redis_rx_up(struct srv_redis *r);
/* Redis went: nothing is subscribed or confirmed; unwanted records go. */
void srv_redis_rx_down(struct srv_redis *r);
/* What the subscriber connection hears (its push handler, priv the
 * struct srv_redis): messages, and Redis's (un)subscribe confirmations. */
void srv_redis_sub_push(struct srv_redis_async *ac, void *reply, void *priv);
/* Every record freed. */
void srv_redis_rx_clear(struct srv_redis *r);

#endif
