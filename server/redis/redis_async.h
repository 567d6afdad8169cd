/*
 * server/redis/redis_async.h - lubdub's own asynchronous connection to
 * Redis, on a libev loop: a socket, TLS on it when the context says so
 * (server/redis/redis_tls.h), commands formatted by hiredis
 * (redisFormatCommandArgv, redisvFormatCommand) into one output buffer,
 * and replies parsed by hiredis's redisReader. It replaces hiredis's
 * async API, which has no TLS in Debian 12's hiredis 0.14.
 *
 * Replies come back in the order of the commands: each command's callback
 * gets its reply, once (owned by the connection: valid during the call).
 * On a subscriber connection (srv_redis_async_on(..., push, ...)) the
 * messages and the (un)subscribe confirmations are no command's reply and
 * go to push; SUBSCRIBE and UNSUBSCRIBE are sent with
 * srv_redis_async_send_push, which awaits no reply of its own.
 *
 * A connection ends once: when the caller closes it
 * (srv_redis_async_close), or on its own (connect refused, TLS refused,
 * the peer closed, a protocol error, a reply of -READONLY: the address is
 * a replica), when closed(c, data, why) is called.
 * Either way every command still awaiting its reply has its callback
 * called first with NULL, and the connection is freed after (never while
 * one of its callbacks runs: a callback may close its own connection).
 *
 * Thread: the thread running the loop.
 */
#ifndef SRV_REDIS_ASYNC_H
#define SRV_REDIS_ASYNC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <ev.h>
#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

struct srv_redis_async;

/* A reply (redisReply *; NULL: none will come), borrowed during the call. */
typedef void srv_redis_async_fn(struct srv_redis_async *c, void *reply,
                                void *priv);
/* The connection ended on its own; why is one line. c is freed after. */
typedef void srv_redis_async_closed_fn(struct srv_redis_async *c, void *data,
                                       const char *why);

/*
 * A new connection to host:port, connecting on loop; with tls (borrowed,
 * outlives the connection) a TLS session verifying name (NULL or "":
 * host). Commands may be queued at once: they go out once connected.
 * NULL with the reason in why (len bytes) when it could not even begin
 * (a host that does not resolve, no memory).
 */
struct srv_redis_async *srv_redis_async_open(struct ev_loop *loop,
                                             const char *host, int port,
                                             SSL_CTX *tls, const char *name,
                                             char *why, size_t len);

/* The caller's callbacks and data (push: NULL but on subscribers). */
void srv_redis_async_on(struct srv_redis_async *c,
                        srv_redis_async_closed_fn *closed,
                        srv_redis_async_fn *push, void *data);
void *srv_redis_async_data(const struct srv_redis_async *c);
void srv_redis_async_set_data(struct srv_redis_async *c, void *data);

/*
 * Queue a command: argc words argv[i] of lens[i] bytes (lens NULL: C
 * strings), or a hiredis format (%s, %b, %d ...). fn (may be NULL) gets
 * its reply. 0, or -1 when the connection has ended or memory ran out
 * (fn is then never called).
 */
int srv_redis_async_argv(struct srv_redis_async *c, srv_redis_async_fn *fn,
                         void *priv, int argc, const char **argv,
                         const size_t *lens);
int srv_redis_async_cmd(struct srv_redis_async *c, srv_redis_async_fn *fn,
                        void *priv, const char *fmt, ...);
/* A command whose replies are pushes (SUBSCRIBE, UNSUBSCRIBE). */
int srv_redis_async_send_push(struct srv_redis_async *c, const char *fmt, ...);

/* Connected, and its TLS handshake not done yet: a connect that times
 * out then reached something that does not speak TLS (or is too slow to). */
bool srv_redis_async_in_handshake(const struct srv_redis_async *c);

/* Bytes formatted and not yet written to the socket. */
size_t srv_redis_async_unsent(const struct srv_redis_async *c);

/* End the connection (closed is not called); NULL is ignored. */
void srv_redis_async_close(struct srv_redis_async *c);

#endif
