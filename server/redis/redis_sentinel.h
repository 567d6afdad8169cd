/*
 * server/redis/redis_sentinel.h - Redis Sentinel (--redis-sentinel,
 * --redis-master): which address is the primary now. The backplane asks
 * the sentinels in turn (the one that answered last first) with SENTINEL
 * get-master-addr-by-name before every connect, and keeps a subscription
 * to one sentinel's +switch-master to hear of a failover at once; the
 * webhook sender asks synchronously before each of its connects.
 *
 * The sentinels are spoken to as Redis is: over TLS when the scheme is
 * rediss (verifying --redis-tls-server-name, or the sentinel's host), with
 * AUTH when --redis-sentinel-password-file is given. What a sentinel
 * answers is only a hint: the connection layer checks ROLE of the address
 * it names (server/redis/redis_conn.h), and a reply of -READONLY ends a
 * connection (server/redis/redis_async.h), so a stale answer costs a
 * reconnect, never a split.
 *
 * Memory: one question's connection at a time and one subscription
 * connection per process thread that asks; the answers are two strings.
 *
 * Thread: a struct srv_redis_sentinel is the backplane thread's;
 * srv_redis_sentinel_ask_sync runs on any thread that may block.
 */
#ifndef SRV_REDIS_SENTINEL_H
#define SRV_REDIS_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

#include <ev.h>
#include <openssl/ssl.h>

#include "server/config/redis_url.h"

struct srv_secret;

/* How to reach the sentinels (part of struct srv_redis_conn). */
struct srv_redis_sentinels {
    struct srv_redis_addr addr[SRV_REDIS_SENTINELS_MAX];
    size_t n;                /* 0: no Sentinel, the URL's address */
    char master[129];        /* --redis-master */
    struct srv_secret *pass; /* borrowed; NULL: no AUTH */
    SSL_CTX *tls;            /* borrowed; NULL: plaintext */
    char tls_name[256];      /* "": the host's */
};

/* The primary: host and port, or NULL and why nobody named one. */
typedef void srv_redis_sentinel_fn(void *ctx, const char *host, int port,
                                   const char *why);

struct srv_redis_sentinel;

/* The backplane's asker on loop; switched(ctx, host, port, NULL) on every
 * +switch-master for this master. NULL when out of memory. */
struct srv_redis_sentinel *
srv_redis_sentinel_create(struct ev_loop *loop,
                          const struct srv_redis_sentinels *cfg,
                          srv_redis_sentinel_fn *switched, void *ctx);
void srv_redis_sentinel_destroy(struct srv_redis_sentinel *s);

/*
 * Ask the sentinels in turn for the primary; fn(ctx, ...) once, later
 * (never from inside this call). A question still running is dropped
 * (its fn never called).
 */
void srv_redis_sentinel_ask(struct srv_redis_sentinel *s,
                            srv_redis_sentinel_fn *fn, void *ctx);

/* Drop the question running, if any (its fn is never called). */
void srv_redis_sentinel_cancel(struct srv_redis_sentinel *s);

/* Keep the +switch-master subscription open (opened again if it went). */
void srv_redis_sentinel_watch(struct srv_redis_sentinel *s);

/*
 * The same question, blocking (each sentinel within timeout): 0 with the
 * primary in *out, or -EHOSTUNREACH with every sentinel's reason in why.
 */
int srv_redis_sentinel_ask_sync(const struct srv_redis_sentinels *cfg,
                                const struct timeval *timeout,
                                struct srv_redis_addr *out, char *why,
                                size_t len);

#endif
