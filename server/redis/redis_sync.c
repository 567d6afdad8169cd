/*
 * server/redis/redis_sync.c - the synchronous connection to Redis of
 * server/redis/redis_sync.h: a non-blocking connect waited for with
 * poll(), then a blocking socket with SO_RCVTIMEO and SO_SNDTIMEO, plain
 * or under TLS; commands collected in one buffer, written when a reply is
 * taken; replies parsed by a redisReader.
 *
 * Memory: the output buffer holds the commands appended since the last
 * take (the caller's pipeline, bounded by it); input is parsed as it
 * comes, 16 KiB a read.
 *
 * Thread: one at a time (the caller's).
 */
#include "server/redis/redis_sync.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/redis/redis_socket.h"
#include "server/redis/redis_tls.h"

#define READ_CHUNK 16384

struct srv_redis_sync {
    int fd;
    SSL *ssl;
    redisReader *reader;
    char *out;
    size_t len, cap;
    char err[200];
};

static int ms_of(const struct timeval *tv)
{
    long ms = tv->tv_sec * 1000 + tv->tv_usec / 1000;

    return ms > 0 ? (int)ms : 1;
}

/* Wait for the non-blocking connect, then make the socket blocking. */
static int finish_connect(int fd, const struct timeval *timeout, char *why,
                          size_t len)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0, r;
    socklen_t sl = sizeof(err);

    do
        r = poll(&p, 1, ms_of(timeout));
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        snprintf(why, len, "connect timed out");
        return -ETIMEDOUT;
    }
    if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
        err = errno;
    if (err) {
        snprintf(why, len, "%s", strerror(err));
        return -err;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, timeout, sizeof(*timeout)) ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, timeout, sizeof(*timeout))) {
        snprintf(why, len, "%s", strerror(errno));
        return -errno;
    }
    return 0;
}

struct srv_redis_sync *srv_redis_sync_open(const char *host, int port,
                                           SSL_CTX *tls, const char *name,
                                           const struct timeval *timeout,
                                           char *why, size_t len)
{
    struct srv_redis_sync *rs = calloc(1, sizeof(*rs));
    int r;

    if (!rs || !(rs->reader = redisReaderCreate())) {
        snprintf(why, len, "out of memory");
        free(rs);
        return NULL;
    }
    rs->fd = -1;
    if (srv_redis_socket_connect(host, port, &rs->fd, why, len) ||
        finish_connect(rs->fd, timeout, why, len))
        goto fail;
    if (tls) {
        rs->ssl = srv_redis_tls_session(tls, rs->fd, host, name, why, len);
        if (!rs->ssl)
            goto fail;
        r = SSL_connect(rs->ssl);
        if (r != 1) {
            r = srv_redis_tls_error(rs->ssl, r, why, len);
            if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
                snprintf(why, len, "TLS handshake timed out");
            goto fail;
        }
    }
    return rs;
fail:
    srv_redis_sync_close(rs);
    return NULL;
}

static int broken(struct srv_redis_sync *rs, const char *why)
{
    if (!rs->err[0])
        snprintf(rs->err, sizeof(rs->err), "%s", why);
    return -1;
}

const char *srv_redis_sync_error(const struct srv_redis_sync *rs)
{
    return rs->err;
}

int srv_redis_sync_append(struct srv_redis_sync *rs, int argc,
                          const char **argv, const size_t *lens)
{
    char *cmd = NULL;
    int n;

    if (rs->err[0])
        return -1;
    n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (n < 0 || !cmd)
        return broken(rs, "out of memory");
    if (rs->len + (size_t)n > rs->cap) {
        size_t cap = rs->cap ? rs->cap : 4096;
        char *p;

        while (cap < rs->len + (size_t)n)
            cap *= 2;
        p = realloc(rs->out, cap);
        if (!p) {
            free(cmd);
            return broken(rs, "out of memory");
        }
        rs->out = p;
        rs->cap = cap;
    }
    memcpy(rs->out + rs->len, cmd, (size_t)n);
    rs->len += (size_t)n;
    free(cmd);
    return 0;
}

/* What a failed system call or TLS call means, as the broken reason. */
static int io_failed(struct srv_redis_sync *rs, int r, bool eof)
{
    char why[200];

    if (rs->ssl) {
        /* On a blocking socket OpenSSL reports SO_RCVTIMEO's or
         * SO_SNDTIMEO's expiry (EAGAIN) as wanting to read or write, and
         * then leaves why as it was. */
        int e = srv_redis_tls_error(rs->ssl, r, why, sizeof(why));

        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ||
            (errno == EAGAIN && !strcmp(why, "connection closed")))
            snprintf(why, sizeof(why), "timed out");
        return broken(rs, why);
    }
    if (eof)
        return broken(rs, "connection closed");
    return broken(rs, errno == EAGAIN ? "timed out" : strerror(errno));
}

static int flush(struct srv_redis_sync *rs)
{
    size_t off = 0;

    while (off < rs->len) {
        size_t left = rs->len - off;
        ssize_t k;

        if (rs->ssl) {
            int r = SSL_write(rs->ssl, rs->out + off,
                              left > INT32_MAX ? INT32_MAX : (int)left);

            if (r <= 0)
                return io_failed(rs, r, false);
            k = r;
        } else {
            k = send(rs->fd, rs->out + off, left, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return io_failed(rs, -1, false);
        }
        off += (size_t)k;
    }
    rs->len = 0;
    return 0;
}

int srv_redis_sync_take(struct srv_redis_sync *rs, redisReply **reply)
{
    void *rep = NULL;
    char buf[READ_CHUNK];

    *reply = NULL;
    if (rs->err[0] || flush(rs))
        return -1;
    for (;;) {
        ssize_t k;

        if (redisReaderGetReply(rs->reader, &rep) != REDIS_OK)
            return broken(rs, "protocol error in Redis's reply");
        if (rep) {
            const redisReply *e = rep;

            /* A replica now (server/redis/redis_async.h): the reply is
             * the caller's, the connection is not. */
            if (e->type == REDIS_REPLY_ERROR && e->str &&
                !strncmp(e->str, "READONLY", 8))
                broken(rs, "READONLY: the address is a replica now");
            *reply = rep;
            return 0;
        }
        if (rs->ssl) {
            int r = SSL_read(rs->ssl, buf, sizeof(buf));

            if (r <= 0)
                return io_failed(rs, r, r == 0);
            k = r;
        } else {
            k = read(rs->fd, buf, sizeof(buf));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return io_failed(rs, -1, k == 0);
        }
        if (redisReaderFeed(rs->reader, buf, (size_t)k) != REDIS_OK)
            return broken(rs, "out of memory");
    }
}

redisReply *srv_redis_sync_argv(struct srv_redis_sync *rs, int argc,
                                const char **argv, const size_t *lens)
{
    redisReply *r = NULL;

    if (srv_redis_sync_append(rs, argc, argv, lens) ||
        srv_redis_sync_take(rs, &r))
        return NULL;
    return r;
}

void srv_redis_sync_close(struct srv_redis_sync *rs)
{
    if (!rs)
        return;
    if (rs->ssl)
        SSL_free(rs->ssl);
    if (rs->fd >= 0)
        close(rs->fd);
    if (rs->reader)
        redisReaderFree(rs->reader);
    free(rs->out);
    free(rs);
}
