/*
 * server/redis/redis_socket.h - the TCP socket under every connection to
 * Redis or a sentinel, for the asynchronous (server/redis/redis_async.h)
 * and the synchronous (server/redis/redis_sync.h) transport: resolved,
 * non-blocking, close-on-exec, TCP_NODELAY and SO_KEEPALIVE, its connect
 * begun.
 *
 * Thread: any (no state of its own).
 */
#ifndef SRV_REDIS_SOCKET_H
#define SRV_REDIS_SOCKET_H

#include <stddef.h>

/*
 * A socket to host:port, its connect begun (to the first address that
 * takes it): *fd owned by the caller. 0, or -errno with the reason in why
 * (len bytes).
 */
int srv_redis_socket_connect(const char *host, int port, int *fd, char *why,
                             size_t len);

#endif
