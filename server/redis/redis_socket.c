/*
 * server/redis/redis_socket.c - the TCP socket under every connection to
 * Redis or a sentinel (server/redis/redis_socket.h).
 *
 * Thread: any (no state of its own).
 */
#include "server/redis/redis_socket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int srv_redis_socket_connect(const char *host, int port, int *fd, char *why,
                             size_t len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM},
                    *res, *a;
    char ps[8];
    int rc, s = -1, err = ECONNREFUSED, one = 1;

    snprintf(ps, sizeof(ps), "%d", port);
    /* A name is resolved here, blocking, as hiredis did: a node's Redis
     * is an address or a name its resolver answers at once. */
    rc = getaddrinfo(host, ps, &hints, &res);
    if (rc) {
        snprintf(why, len, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -EHOSTUNREACH;
    }
    for (a = res; a; a = a->ai_next) {
        s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   a->ai_protocol);
        if (s < 0) {
            err = errno;
            continue;
        }
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS)
            break;
        err = errno;
        close(s);
        s = -1;
    }
    freeaddrinfo(res);
    if (s < 0) {
        snprintf(why, len, "%s", strerror(err));
        return -err;
    }
    *fd = s;
    return 0;
}
