/*
 * server/redis/redis_conn.c - connections to the --redis server
 * (server/redis/redis_conn.h): the TCP connect, and the AUTH and SELECT
 * that start a session, built once for the asynchronous and the
 * synchronous API.
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
    c->url = *u;
    c->pass = pass;
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

redisAsyncContext *srv_redis_conn_async(const struct srv_redis_conn *c,
                                        char *why, size_t len)
{
    redisAsyncContext *ac = redisAsyncConnect(c->url.host, c->url.port);

    if (!ac) {
        snprintf(why, len, "out of memory");
        return NULL;
    }
    if (ac->err) {
        snprintf(why, len, "%s", ac->errstr);
        redisAsyncFree(ac);
        return NULL;
    }
    return ac;
}

/* The synchronous start: each command answered before the next. */
struct sync_start {
    redisContext *rc;
    char *why;
    size_t len;
};

static int sync_send(void *ctx, int argc, const char **argv,
                     const size_t *lens)
{
    struct sync_start *ss = ctx;
    redisReply *r = redisCommandArgv(ss->rc, argc, argv, lens);
    int rc = 0;

    if (!r) {
        snprintf(ss->why, ss->len, "%s",
                 ss->rc->errstr[0] ? ss->rc->errstr : "no reply");
        rc = -EIO;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(ss->why, ss->len, "%s: %.*s", argv[0], (int)r->len,
                 r->str ? r->str : "");
        rc = -EACCES;
    }
    freeReplyObject(r);
    return rc;
}

redisContext *srv_redis_conn_sync(const struct srv_redis_conn *c,
                                  const struct timeval *timeout, char *why,
                                  size_t len)
{
    redisContext *rc = redisConnectWithTimeout(c->url.host, c->url.port,
                                               *timeout);
    struct sync_start s = { rc, why, len };

    if (!rc || rc->err) {
        snprintf(why, len, "%s", rc ? rc->errstr : "out of memory");
        redisFree(rc);
        return NULL;
    }
    redisSetTimeout(rc, *timeout);
    if (srv_redis_conn_setup(c, SRV_REDIS_SELECT_ALWAYS, sync_send, &s)) {
        redisFree(rc);
        return NULL;
    }
    return rc;
}
