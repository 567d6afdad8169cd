/*
 * server/redis/redis_inspect.h - the socket inspector across the cluster
 * (server/redis/redis_inspect.c; docs/OPERATIONS.md, "Dashboard and
 * console"): a node asks every other node through Redis and they answer
 * from their own loops (hub/ops/inspect.h).
 *
 * Thread: srv_redis_inspect_ask() from any thread (a loop); attach and
 * fini on the main thread; the rest on the backplane thread.
 */
#ifndef SRV_REDIS_INSPECT_H
#define SRV_REDIS_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub;
struct hub_inspect_req;
struct srv_redis;

/* Requests at most this long, replies at most SRV_INSPECT_REPLY_MAX
 * (then sent without the sockets' subscription lists), and at most
 * SRV_INSPECT_OUT_MAX messages waiting for the backplane thread. */
#define SRV_INSPECT_REPLY_MAX (256 * 1024)
#define SRV_INSPECT_OUT_MAX 64

/* The hub whose loops answer the other nodes (before the thread starts);
 * 0 or -ENOMEM. */
int srv_redis_inspect_attach(struct srv_redis *r, struct hub *h,
                             const char *prefix, const char *node_id);
/* Ask the other nodes about rq (app_id: its app's id), for the query id
 * of this node's hub (their answers go to hub_inspect_remote()). */
void srv_redis_inspect_ask(struct srv_redis *r, uint64_t id,
                           const char *app_id,
                           const struct hub_inspect_req *rq);
/* Backplane thread: publish what waits (the wake handler). */
void srv_redis_inspect_flush(struct srv_redis *r);
/* Backplane thread: the broker channels to subscribe on every connect,
 * into ch; how many (0 before attach). */
unsigned srv_redis_inspect_channels(const struct srv_redis *r,
                                    const char *ch[2]);
/* Backplane thread: a message on channel ch; true when it was the
 * inspector's (handled here), false for anything else. */
bool srv_redis_inspect_msg(struct srv_redis *r, const char *ch, size_t chlen,
                           const char *data, size_t len);
/* srv_redis_stop(): no answer is sent from now on; the state goes with
 * the last query that still refers to it. */
void srv_redis_inspect_fini(struct srv_redis *r);

#endif
