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
#include "server/config/settings.h"
#include "server/redis/redis_tls.h"

void srv_redis_conn_init(struct srv_redis_conn *c,
                         const struct srv_redis_url *u,
                         struct srv_secret *pass)
{
    memset(c, 0, sizeof(*c));
    c->url = *u;
    c->pass = pass;
}

int srv_redis_conn_from_config(struct srv_redis_conn *c,
                               const struct srv_config *cfg,
                               struct srv_secrets *sec, char *why, size_t len)
{
    struct srv_redis_url url;
    struct srv_redis_sentinels *st = &c->sentinels;

    /* Validated at load (server/config/validate.c): these cannot fail on
     * the text, only on what OpenSSL makes of the files. */
    if (srv_redis_url_parse(cfg->redis, &url, why, len))
        return -EINVAL;
    srv_redis_conn_init(c, &url, &sec->redis_password);
    if (cfg->redis_tls_server_name)
        snprintf(c->tls_name, sizeof(c->tls_name), "%s",
                 cfg->redis_tls_server_name);
    if (url.tls) {
        c->tls = srv_redis_tls_ctx_create(cfg->redis_tls_ca_file,
                                          cfg->redis_tls_cert_file,
                                          cfg->redis_tls_key_file, why, len);
        if (!c->tls)
            return -EINVAL;
    }
    if (!cfg->redis_sentinel)
        return 0;
    if (srv_redis_sentinels_parse(cfg->redis_sentinel, st->addr,
                                  SRV_REDIS_SENTINELS_MAX, &st->n, why, len)) {
        srv_redis_conn_fini(c);
        return -EINVAL;
    }
    snprintf(st->master, sizeof(st->master), "%s",
             cfg->redis_master ? cfg->redis_master : "");
    st->pass = cfg->redis_sentinel_password_file ? &sec->redis_sentinel_password
                                                 : NULL;
    /* The sentinels are spoken to as Redis is. */
    st->tls = c->tls;
    snprintf(st->tls_name, sizeof(st->tls_name), "%s", c->tls_name);
    return 0;
}

void srv_redis_conn_describe(const struct srv_redis_conn *c, char *out,
                             size_t cap)
{
    if (c->sentinels.n)
        snprintf(out, cap, "master %s via %zu sentinel%s",
                 c->sentinels.master, c->sentinels.n,
                 c->sentinels.n == 1 ? "" : "s");
    else
        snprintf(out, cap, "%s:%d", c->url.host, c->url.port);
}

bool srv_redis_conn_checks_role(const struct srv_redis_conn *c)
{
    return c->sentinels.n > 0;
}

bool srv_redis_conn_role_ok(const redisReply *r, char *why, size_t len)
{
    const redisReply *k;

    if (r && r->type == REDIS_REPLY_ERROR) {
        snprintf(why, len, "ROLE: %.*s", (int)r->len, r->str);
        return false;
    }
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        (k = r->element[0])->type != REDIS_REPLY_STRING) {
        snprintf(why, len, "ROLE: no answer");
        return false;
    }
    if (strcmp(k->str, "master") != 0) {
        snprintf(why, len,
                 "ROLE is %s, not master: the sentinels' answer "
                 "is stale",
                 k->str);
        return false;
    }
    return true;
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
                                             struct ev_loop *loop,
                                             const struct srv_redis_addr *at,
                                             char *why, size_t len)
{
    return srv_redis_async_open(loop, at ? at->host : c->url.host,
                                at ? at->port : c->url.port, c->tls,
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
    struct srv_redis_addr at = {"", c->url.port};
    struct srv_redis_sync *s;
    struct sync_start ss;
    redisReply *r;
    const char *role = "ROLE";
    bool ok;

    snprintf(at.host, sizeof(at.host), "%s", c->url.host);
    if (c->sentinels.n &&
        srv_redis_sentinel_ask_sync(&c->sentinels, timeout, &at, why, len))
        return NULL;
    s = srv_redis_sync_open(at.host, at.port, c->tls, c->tls_name, timeout, why,
                            len);
    ss = (struct sync_start){s, why, len};
    if (!s)
        return NULL;
    if (srv_redis_conn_setup(c, SRV_REDIS_SELECT_ALWAYS, sync_send, &ss)) {
        srv_redis_sync_close(s);
        return NULL;
    }
    if (!srv_redis_conn_checks_role(c))
        return s;
    r = srv_redis_sync_argv(s, 1, &role, NULL);
    ok = srv_redis_conn_role_ok(r, why, len);
    if (r)
        freeReplyObject(r);
    if (!ok) {
        srv_redis_sync_close(s);
        return NULL;
    }
    return s;
}
