/*
 * hub/cluster/cluster_cache.h - the cluster-wide cache of cache channels
 * (--redis): the contract, and the one function the receiving side calls.
 *
 * Every node's hub_cache (hub/channel/cache.h) is a replica the loops read; a
 * loop never waits on Redis. An HTTP API event on a cache channel leaves its
 * node as one HUB_CLUSTER_ENV_CACHE envelope (hub/cluster/cluster_envelope.h),
 * published on the one broker channel "<prefix>:cache" that every node
 * subscribes to whatever its subscribers (so that a node has the state its
 * next subscriber needs), and written to the Redis key "<prefix>:cache:<app
 * id>:<channel>" with SET ... PX <remaining ms>, so that a node that comes up
 * (or back) loads the live entries once.
 *
 * A receiving node delivers the event to its own subscribers of the
 * channel, then keeps the frame it built for them (the payload bytes as
 * they came, no re-encode) under the app's byte cap, for the remaining
 * life the envelope carries: the writer's TTL, less the time it waited
 * in the writer's queue; a loaded entry lives what Redis's PTTL says. No
 * clock is compared across nodes (a replica may outlive the writer's
 * entry by the bus latency, never by a clock skew).
 *
 * The Redis key, the broker channel and the remaining life of a CACHE op
 * are public (hub/cluster/cluster.h: hub_cluster_cache_channel,
 * hub_cluster_cache_pattern, hub_cluster_op_ttl, hub_cluster_load).
 *
 * Thread: the backplane thread (with the cluster's delivery lock held).
 */
#ifndef HUB_CLUSTER_CACHE_H
#define HUB_CLUSTER_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "hub/cluster/cluster_envelope.h"

struct hub;
struct hub_app;

/*
 * e (kind HUB_CLUSTER_ENV_CACHE, of app): when deliver, hand it to this node's
 * subscribers of its channel; then keep it as the channel's last event
 * for ttl_ms. 0, or -ENOMEM (then the older entry is gone too).
 */
int hub__cluster_cache_apply(struct hub *h, const struct hub_app *app,
                             const struct hub_cluster_envelope *e,
                             uint64_t ttl_ms, bool deliver);

#endif
