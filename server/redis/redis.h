/*
 * server/redis/redis.h - the backplane thread: one libev loop, two hiredis
 * async connections to Redis (commands: PUBLISH and PING; subscriber:
 * SUBSCRIBE/UNSUBSCRIBE), and the hand-off with the loops through
 * hub/cluster/cluster.h's queue, woken by an ev_async (an eventfd).
 *
 * Redis down: publications are counted lost, never queued; SUB/UNSUB
 * still update the channel set, which is re-subscribed whole when Redis
 * returns. Reconnects back off exponentially from 100 ms to 5 s with
 * jitter. A PING a second measures the round trip (the rtt histogram)
 * and detects a Redis that stopped answering (3 s without a reply is a
 * disconnect). One log line per state change.
 *
 * Thread: create, start and stop from the main thread; srv_redis_wake()
 * from any thread; everything else on the backplane thread.
 */
#ifndef SRV_REDIS_H
#define SRV_REDIS_H

#include "hub/cluster/cluster.h"
#include "server/config/redis_url.h"

struct srv_redis;

struct srv_redis_conn;
/* Owned; NULL when out of memory. conn (server/redis/redis_conn.h:
 * where, as whom, TLS, the sentinels) is stolen, even on failure; the
 * password it borrows is the one in force, read at each connect, so a
 * SIGHUP that replaces it applies from the next reconnect. */
struct srv_redis *srv_redis_create(struct srv_redis_conn *conn,
                                   const char *node_id);
struct srv_redis_lease;
/* The node lease and reaper (server/redis/redis_lease.h), owned from now on
 * (before start). */
void srv_redis_set_lease(struct srv_redis *r, struct srv_redis_lease *l);
struct hub_app_live;
/* A reload added app index: its connections count cluster-wide
 * (srv_redis_lease_app_added). Main thread. 0 or -ENOMEM. */
int srv_redis_app_added(struct srv_redis *r, unsigned index, const char *id,
                        struct hub_app_live *live);
/* The cluster whose queue it serves (before start). */
void srv_redis_attach(struct srv_redis *r, struct hub_cluster *c);
/* The hub_cluster_cfg wake function (ctx = the struct srv_redis). */
void srv_redis_wake(void *ctx);
/* 0 or -errno (the thread could not start). */
int srv_redis_start(struct srv_redis *r);
/* Stop the thread, close the connections, free r. Before the loops go. */
void srv_redis_stop(struct srv_redis *r);
/* Is the backplane connected (any thread)? */
bool srv_redis_up(const struct srv_redis *r);
struct srv_redis_ready;
/* Whether the node has joined, since when not, why: read it with
 * srv_redis_ready_get() or srv_redis_ready_joined()
 * (server/redis/redis_ready.h), from any thread. Borrowed; valid until
 * srv_redis_stop(). */
const struct srv_redis_ready *srv_redis_readiness(const struct srv_redis *r);

/*
 * The cluster-wide directory (server/redis/redis_dir.c, docs/SCALING.md):
 * replace this node's share in Redis with what the local directory really
 * has (REJOIN), then refresh every presence view. Runs by itself on every
 * (re)connect; the lease renewal calls it when Redis says this node was
 * reaped. Backplane thread only; nothing happens while Redis is down.
 */
void srv_redis_dir_rejoin(struct srv_redis *r);

#endif
