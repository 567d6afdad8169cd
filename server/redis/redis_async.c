/*
 * server/redis/redis_async.c - the asynchronous connection to Redis of
 * server/redis/redis_async.h: one ev_io on the socket, a connect, a TLS
 * handshake when asked, then an output buffer written when the socket
 * takes it and input fed to a redisReader, its replies handed to the
 * commands' callbacks in order.
 *
 * Invariants: q holds one slot per command sent with a callback slot, in
 * order; the io watcher wants EV_WRITE exactly while there is something
 * to write (or the TLS layer asked to write); depth counts the callbacks
 * of this connection running, and a connection that has ended (dead) is
 * freed only at depth 0. Memory: the output buffer holds what the caller
 * queued and Redis has not taken yet (callers bound it:
 * srv_redis_async_unsent); input is parsed as it comes, 16 KiB a read.
 *
 * Thread: the thread running the loop.
 */
#include "server/redis/redis_async.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/redis/redis_socket.h"
#include "server/redis/redis_tls.h"

#define READ_CHUNK 16384
#define READS_PER_EVENT 64 /* then the loop serves the others */

enum state { ST_CONNECTING, ST_HANDSHAKE, ST_OPEN };

struct slot {
    srv_redis_async_fn *fn;
    void *priv;
};

struct srv_redis_async {
    struct ev_loop *loop;
    ev_io io;
    int fd;
    SSL *ssl;     /* NULL: plaintext */
    SSL_CTX *tls; /* borrowed */
    enum state st;
    bool dead, tls_wants_write;
    unsigned depth;
    redisReader *reader;
    char *out; /* [off, len) not yet written */
    size_t off, len, cap;
    struct slot *q; /* ring: head, n of cap */
    size_t head, n, qcap;
    srv_redis_async_closed_fn *closed;
    srv_redis_async_fn *push;
    void *data;
    char host[256], name[256];
};

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);

struct srv_redis_async *srv_redis_async_open(struct ev_loop *loop,
                                             const char *host, int port,
                                             SSL_CTX *tls, const char *name,
                                             char *why, size_t len)
{
    struct srv_redis_async *c = calloc(1, sizeof(*c));

    if (!c || !(c->reader = redisReaderCreate())) {
        snprintf(why, len, "out of memory");
        free(c);
        return NULL;
    }
    if (srv_redis_socket_connect(host, port, &c->fd, why, len)) {
        redisReaderFree(c->reader);
        free(c);
        return NULL;
    }
    c->loop = loop;
    c->tls = tls;
    snprintf(c->host, sizeof(c->host), "%s", host);
    snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
    c->st = ST_CONNECTING;
    ev_io_init(&c->io, io_cb, c->fd, EV_READ | EV_WRITE);
    c->io.data = c;
    ev_io_start(loop, &c->io);
    return c;
}

void srv_redis_async_on(struct srv_redis_async *c,
                        srv_redis_async_closed_fn *closed,
                        srv_redis_async_fn *push, void *data)
{
    c->closed = closed;
    c->push = push;
    c->data = data;
}

void *srv_redis_async_data(const struct srv_redis_async *c)
{
    return c->data;
}

void srv_redis_async_set_data(struct srv_redis_async *c, void *data)
{
    c->data = data;
}

bool srv_redis_async_in_handshake(const struct srv_redis_async *c)
{
    return c->st == ST_HANDSHAKE;
}

size_t srv_redis_async_unsent(const struct srv_redis_async *c)
{
    return c->len - c->off;
}

/* The events the watcher waits for, as the state says. */
static void want(struct srv_redis_async *c)
{
    int ev = EV_READ;

    if (c->st == ST_CONNECTING || c->tls_wants_write ||
        (c->st == ST_OPEN && c->len > c->off))
        ev |= EV_WRITE;
    if ((c->io.events & (EV_READ | EV_WRITE)) == ev)
        return;
    ev_io_stop(c->loop, &c->io);
    ev_io_set(&c->io, c->fd, ev);
    ev_io_start(c->loop, &c->io);
}

static void release(struct srv_redis_async *c)
{
    free(c->out);
    free(c->q);
    redisReaderFree(c->reader);
    free(c);
}

/* The socket goes; every command awaiting a reply is told none comes.
 * closed is called when why is not NULL (the connection ended itself). */
static void end(struct srv_redis_async *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    ev_io_stop(c->loop, &c->io);
    if (c->ssl)
        SSL_free(c->ssl);
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    c->depth++;
    while (c->n) {
        struct slot s = c->q[c->head];

        c->head = (c->head + 1) % c->qcap;
        c->n--;
        if (s.fn)
            s.fn(c, NULL, s.priv);
    }
    if (why && c->closed)
        c->closed(c, c->data, why);
    if (--c->depth == 0)
        release(c);
}

void srv_redis_async_close(struct srv_redis_async *c)
{
    if (c)
        end(c, NULL);
}

/* Room for one more slot in the ring. */
static int slot_push(struct srv_redis_async *c, srv_redis_async_fn *fn,
                     void *priv)
{
    if (c->n == c->qcap) {
        size_t cap = c->qcap ? c->qcap * 2 : 64;
        struct slot *q = malloc(cap * sizeof(*q));

        if (!q)
            return -1;
        for (size_t i = 0; i < c->n; i++)
            q[i] = c->q[(c->head + i) % c->qcap];
        free(c->q);
        c->q = q;
        c->head = 0;
        c->qcap = cap;
    }
    c->q[(c->head + c->n) % c->qcap] = (struct slot){fn, priv};
    c->n++;
    return 0;
}

/* Append a formatted command (owned by hiredis's allocator: freed here). */
static int out_append(struct srv_redis_async *c, char *cmd, int n)
{
    if (n < 0 || !cmd)
        return -1;
    if (c->off && c->off == c->len)
        c->off = c->len = 0;
    if (c->len + (size_t)n > c->cap) {
        size_t live = c->len - c->off, cap = c->cap ? c->cap : 4096;
        char *p;

        while (cap < live + (size_t)n)
            cap *= 2;
        p = malloc(cap);
        if (!p) {
            free(cmd);
            return -1;
        }
        if (live) /* the first buffer: out is NULL */
            memcpy(p, c->out + c->off, live);
        free(c->out);
        c->out = p;
        c->cap = cap;
        c->off = 0;
        c->len = live;
    }
    memcpy(c->out + c->len, cmd, (size_t)n);
    c->len += (size_t)n;
    free(cmd);
    want(c);
    return 0;
}

static int queue(struct srv_redis_async *c, bool slot, srv_redis_async_fn *fn,
                 void *priv, char *cmd, int n)
{
    if (c->dead || (slot && slot_push(c, fn, priv))) {
        free(cmd);
        return -1;
    }
    if (out_append(c, cmd, n)) {
        if (slot)
            c->n--;
        return -1;
    }
    return 0;
}

int srv_redis_async_argv(struct srv_redis_async *c, srv_redis_async_fn *fn,
                         void *priv, int argc, const char **argv,
                         const size_t *lens)
{
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);

    return queue(c, true, fn, priv, cmd, n);
}

/* A hiredis format and its arguments, queued (slot: a reply of its own). */
static int vqueue(struct srv_redis_async *c, bool slot, srv_redis_async_fn *fn,
                  void *priv, const char *fmt, va_list ap)
{
    char *cmd = NULL;
    int n = redisvFormatCommand(&cmd, fmt, ap);

    return queue(c, slot, fn, priv, cmd, n);
}

int srv_redis_async_cmd(struct srv_redis_async *c, srv_redis_async_fn *fn,
                        void *priv, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vqueue(c, true, fn, priv, fmt, ap);
    va_end(ap);
    return rc;
}

int srv_redis_async_send_push(struct srv_redis_async *c, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vqueue(c, false, NULL, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

/* A message or (un)subscribe confirmation of a subscriber connection. */
static bool is_push(const redisReply *r)
{
    static const char *const kinds[] = {
        "message",     "pmessage",   "subscribe",
        "unsubscribe", "psubscribe", "punsubscribe",
    };
    const redisReply *k;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
        return false;
    k = r->element[0];
    if (k->type != REDIS_REPLY_STRING || !k->str)
        return false;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (!strcasecmp(k->str, kinds[i]))
            return true;
    return false;
}

/* -READONLY: the address is a replica now (a failover happened), where
 * every write fails while PUBLISH still works and reaches only that
 * replica's subscribers. lubdub never talks on to a replica. */
static bool is_readonly(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->str &&
           !strncmp(r->str, "READONLY", 8);
}

/* Hand every complete reply to whom it is for. */
static void dispatch(struct srv_redis_async *c)
{
    void *rep;
    bool ro;

    while (!c->dead) {
        if (redisReaderGetReply(c->reader, &rep) != REDIS_OK) {
            end(c, "protocol error in Redis's reply");
            return;
        }
        if (!rep)
            return;
        if (c->push && (is_push(rep) || !c->n)) {
            c->push(c, rep, c->data);
        } else if (c->n) {
            struct slot s = c->q[c->head];

            c->head = (c->head + 1) % c->qcap;
            c->n--;
            if (s.fn)
                s.fn(c, rep, s.priv);
        }
        /* A reply nobody asked for (a command connection has no pushes)
         * is dropped. */
        ro = is_readonly(rep);
        freeReplyObject(rep);
        if (ro)
            end(c, "READONLY: the address is a replica now");
    }
}

/* Bytes from the socket into the reader; false when the connection ended. */
static bool read_some(struct srv_redis_async *c)
{
    char buf[READ_CHUNK], why[200];

    for (int i = 0; i < READS_PER_EVENT; i++) {
        ssize_t k;

        if (c->ssl) {
            int r = SSL_read(c->ssl, buf, sizeof(buf));

            if (r <= 0) {
                int e = srv_redis_tls_error(c->ssl, r, why, sizeof(why));

                if (e == SSL_ERROR_WANT_READ)
                    return true;
                if (e == SSL_ERROR_WANT_WRITE) {
                    c->tls_wants_write = true;
                    return true;
                }
                end(c, why);
                return false;
            }
            k = r;
        } else {
            k = read(c->fd, buf, sizeof(buf));
            if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return true;
            if (k <= 0) {
                end(c, k ? strerror(errno) : "connection closed");
                return false;
            }
        }
        if (redisReaderFeed(c->reader, buf, (size_t)k) != REDIS_OK) {
            end(c, "out of memory");
            return false;
        }
        dispatch(c);
        if (c->dead)
            return false;
    }
    /* Out of turns: a TLS record already read waits in OpenSSL, where no
     * readiness of the socket would wake us for it. */
    if (c->ssl && SSL_has_pending(c->ssl))
        ev_feed_event(c->loop, &c->io, EV_READ);
    return true;
}

/* The output buffer to the socket, as far as it takes it. */
static bool write_some(struct srv_redis_async *c)
{
    char why[200];

    c->tls_wants_write = false;
    while (c->off < c->len) {
        size_t left = c->len - c->off;
        ssize_t k;

        if (c->ssl) {
            int r = SSL_write(c->ssl, c->out + c->off,
                              left > INT32_MAX ? INT32_MAX : (int)left);

            if (r <= 0) {
                int e = srv_redis_tls_error(c->ssl, r, why, sizeof(why));

                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    c->tls_wants_write = e == SSL_ERROR_WANT_WRITE;
                    return true;
                }
                end(c, why);
                return false;
            }
            k = r;
        } else {
            k = send(c->fd, c->out + c->off, left, MSG_NOSIGNAL);
            if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return true;
            if (k < 0) {
                end(c, strerror(errno));
                return false;
            }
        }
        c->off += (size_t)k;
    }
    c->off = c->len = 0;
    return true;
}

/* The connect finished (or failed); TLS starts, or the connection opens. */
static bool connected(struct srv_redis_async *c)
{
    int err = 0;
    socklen_t sl = sizeof(err);
    char why[200];

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
        err = errno;
    if (err == EINPROGRESS)
        return true;
    if (err) {
        end(c, strerror(err));
        return false;
    }
    if (!c->tls) {
        c->st = ST_OPEN;
        return true;
    }
    c->ssl = srv_redis_tls_session(c->tls, c->fd, c->host, c->name, why,
                                   sizeof(why));
    if (!c->ssl) {
        end(c, why);
        return false;
    }
    c->st = ST_HANDSHAKE;
    return true;
}

static bool handshake(struct srv_redis_async *c)
{
    char why[200];
    int r = SSL_do_handshake(c->ssl), e;

    if (r == 1) {
        c->tls_wants_write = false;
        c->st = ST_OPEN;
        return true;
    }
    e = srv_redis_tls_error(c->ssl, r, why, sizeof(why));
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->tls_wants_write = e == SSL_ERROR_WANT_WRITE;
        return true;
    }
    end(c, why);
    return false;
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct srv_redis_async *c = w->data;
    bool ok = true;

    (void)loop;
    c->depth++;
    if (c->st == ST_CONNECTING && (revents & (EV_WRITE | EV_READ)))
        ok = connected(c);
    if (ok && c->st == ST_HANDSHAKE)
        ok = handshake(c);
    if (ok && c->st == ST_OPEN) {
        /* Writes first: a reply cannot come before its command went. */
        ok = write_some(c);
        if (ok && (revents & EV_READ || c->ssl))
            ok = read_some(c);
        /* Callbacks may have queued more: send it now. */
        if (ok && c->len > c->off && !c->tls_wants_write)
            ok = write_some(c);
    }
    if (!c->dead)
        want(c);
    if (--c->depth == 0 && c->dead)
        release(c);
}
