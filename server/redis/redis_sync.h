/*
 * server/redis/redis_sync.h - lubdub's own synchronous connection to
 * Redis, for a thread that may block on it (the webhook sender's stream,
 * server/webhook/webhook_stream.c; a sentinel's question): a blocking
 * socket whose every read and write is bounded by the timeout given at
 * open, TLS on it when asked (server/redis/redis_tls.h), commands
 * formatted by hiredis and replies parsed by its redisReader.
 *
 * After any failure (a timeout, the peer gone, a protocol error, a reply
 * of -READONLY: the address is a replica now) the connection is broken:
 * every later call fails at once, and the caller closes it and opens
 * another.
 *
 * Thread: one at a time (the caller's).
 */
#ifndef SRV_REDIS_SYNC_H
#define SRV_REDIS_SYNC_H

#include <stddef.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

struct srv_redis_sync;

/*
 * A connection to host:port, connected within timeout (which then bounds
 * every read and write); with tls (borrowed, outlives it) a TLS session
 * verifying name (NULL or "": host). NULL with the reason in why.
 */
struct srv_redis_sync *srv_redis_sync_open(const char *host, int port,
                                           SSL_CTX *tls, const char *name,
                                           const struct timeval *timeout,
                                           char *why, size_t len);

/* One command and its reply (owned: freeReplyObject); NULL when the
 * connection broke (srv_redis_sync_error says why). lens NULL: C strings. */
redisReply *srv_redis_sync_argv(struct srv_redis_sync *s, int argc,
                                const char **argv, const size_t *lens);

/* Pipelining: queue commands, then take their replies in order (the
 * first take writes what is queued). 0 or -1 (broken). */
int srv_redis_sync_append(struct srv_redis_sync *s, int argc, const char **argv,
                          const size_t *lens);
int srv_redis_sync_take(struct srv_redis_sync *s, redisReply **reply);

/* Why the connection broke; "" while it works. */
const char *srv_redis_sync_error(const struct srv_redis_sync *s);

/* NULL is ignored. */
void srv_redis_sync_close(struct srv_redis_sync *s);

#endif
