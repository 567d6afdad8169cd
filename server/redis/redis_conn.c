/*
 * server/redis/redis_conn.c - connections to the --redis server
 * (server/redis/redis_conn.h): the TCP connect (plaintext or TLS, the
 * transports of server/redis/redis_async.c and redis_sync.c), and the
 * AUTH and SELECT that start a session, built once for both.
 *
 * Thread: any (no state of its own).
 */
#include "server/redis/redis_conn.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/config/secret.h"

void srv_redis_conn_init(struct srv_redis_conn *c,
                         const struct srv_redis_url *u,
                         struct srv_secret *pass)
{
    memset(c, 0, sizeof(*c));
    c->url = *u;
    c->pass = pass;
}

void srv_redis_conn_fini(struct srv_redis_conn *c)
{
    if (c->tls)
        SSL_CTX_free(c->tls);
    c->tls = NULL;
}

int srv_redis_conn_setup(const struct srv_redis_conn *c,
                         enum srv_redis_select sel, srv_redis_send_fn *send,
                         void *ctx)
{
    char pass[SRV_SECRET_FILE_MAX + 1];
    char db[16];
    const char *av[3];
    size_t al[3];
    int n = 0, rc = 0;

    /* The password in force now: a SIGHUP may have replaced it. */
    if (!c->pass)
        snprintf(pass, sizeof(pass), "%s", c->url.pass);
    else if (srv_secret_copy(c->pass, pass, sizeof(pass)) < 0)
        pass[0] = '\0';
    if (pass[0]) {
        av[n] = "AUTH";
        al[n++] = 4;
        if (c->url.user[0]) {
            av[n] = c->url.user;
            al[n] = strlen(c->url.user);
            n++;
        }
        av[n] = pass;
        al[n] = strlen(pass);
        n++;
        rc = send(ctx, n, av, al);
    }
    explicit_bzero(pass, sizeof(pass));
    if (rc)
        return rc;
    if (sel == SRV_REDIS_SELECT_ALWAYS ||
        (sel == SRV_REDIS_SELECT_NONZERO && c->url.db)) {
        snprintf(db, sizeof(db), "%d", c->url.db);
        av[0] = "SELECT";
        al[0] = 6;
        av[1] = db;
        al[1] = strlen(db);
        rc = send(ctx, 2, av, al);
    }
    return rc;
}

struct srv_redis_async *srv_redis_conn_async(const struct srv_redis_conn *c,
                                             struct ev_loop *loop, char *why,
                                             size_t len)
{
    return srv_redis_async_open(loop, c->url.host, c->url.port, c->tls,
                                c->tls_name, why, len);
}

/* The synchronous start: each command answered before the next. */
struct sync_start {
    struct srv_redis_sync *s;
    char *why;
    size_t len;
};

static int sync_send(void *ctx, int argc, const char **argv,
                     const size_t *lens)
{
    struct sync_start *ss = ctx;
    redisReply *r = srv_redis_sync_argv(ss->s, argc, argv, lens);
    int rc = 0;

    if (!r) {
        snprintf(ss->why, ss->len, "%s", srv_redis_sync_error(ss->s));
        rc = -EIO;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(ss->why, ss->len, "%s: %.*s", argv[0], (int)r->len,
                 r->str ? r->str : "");
        rc = -EACCES;
    }
    if (r)
        freeReplyObject(r);
    return rc;
}

struct srv_redis_sync *srv_redis_conn_sync(const struct srv_redis_conn *c,
                                           const struct timeval *timeout,
                                           char *why, size_t len)
{
    struct srv_redis_sync *s = srv_redis_sync_open(
        c->url.host, c->url.port, c->tls, c->tls_name, timeout, why, len);
    struct sync_start ss = { s, why, len };

    if (!s)
        return NULL;
    if (srv_redis_conn_setup(c, SRV_REDIS_SELECT_ALWAYS, sync_send, &ss)) {
        srv_redis_sync_close(s);
        return NULL;
    }
    return s;
}
