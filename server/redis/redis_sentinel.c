/*
 * server/redis/redis_sentinel.c - the sentinels' answer to "which address
 * is the primary" (server/redis/redis_sentinel.h): a question asked of
 * each sentinel in turn, each within ASK_TIMEOUT_S, on its own connection
 * (AUTH when a password is set, then SENTINEL get-master-addr-by-name);
 * the +switch-master subscription; and the same question, blocking.
 *
 * Invariants: at most one question's connection (q) and one
 * subscription (w) are open; a callback of a connection that is no
 * longer q or w acts on nothing (their data is cleared before they are
 * closed). The answer reaches the asker from a timer, never from inside
 * srv_redis_sentinel_ask.
 *
 * Thread: the backplane thread (srv_redis_sentinel_ask_sync: any).
 */
#include "server/redis/redis_sentinel.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/config/secret.h"
#include "server/redis/redis_async.h"
#include "server/redis/redis_sync.h"

#define ASK_TIMEOUT_S 1.0

struct srv_redis_sentinel {
    struct ev_loop *loop;
    struct srv_redis_sentinels cfg;
    srv_redis_sentinel_fn *switched;
    void *sctx;
    /* The question. */
    struct srv_redis_async *q;
    srv_redis_sentinel_fn *fn;
    void *fctx;
    size_t at, tried, good; /* q's sentinel, how many, who knew */
    ev_timer q_w, answer_w;
    char host[256];
    int port;
    char why[512];
    /* The subscription. */
    struct srv_redis_async *w;
    size_t w_at;
};

/* The password in force, or "" (wiped by the caller). */
static void password(const struct srv_redis_sentinels *cfg, char *out,
                     size_t cap)
{
    out[0] = '\0';
    if (cfg->pass && srv_secret_copy(cfg->pass, out, cap) < 0)
        out[0] = '\0';
}

/* A reply to get-master-addr-by-name: the address, or why not. */
static int parse_addr(const redisReply *r, const char *master, char *host,
                      size_t hcap, int *port, char *why, size_t len)
{
    long p;
    char *end;

    if (r->type == REDIS_REPLY_NIL) {
        snprintf(why, len, "knows no master named %s", master);
        return -ENOENT;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, len, "%.*s", (int)r->len, r->str ? r->str : "");
        return -EIO;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING || r->element[0]->len == 0 ||
        r->element[0]->len >= hcap) {
        snprintf(why, len, "answered something else than an address");
        return -EIO;
    }
    p = strtol(r->element[1]->str, &end, 10);
    if (*end || p < 1 || p > 65535) {
        snprintf(why, len, "answered a bad port");
        return -EIO;
    }
    memcpy(host, r->element[0]->str, r->element[0]->len);
    host[r->element[0]->len] = '\0';
    *port = (int)p;
    return 0;
}

/* One more reason, "sentinel host:port: why", bounded by the buffer. */
static void add_reason(char *buf, size_t cap, const struct srv_redis_addr *a,
                       const char *why)
{
    size_t n = strlen(buf);

    if (n + 1 < cap)
        snprintf(buf + n, cap - n, "%ssentinel %s:%d: %s", n ? "; " : "",
                 a->host, a->port, why);
}

/* Asynchronous: the question. */

static void try_next(struct srv_redis_sentinel *sn);

static void drop_q(struct srv_redis_sentinel *sn)
{
    struct srv_redis_async *q = sn->q;

    sn->q = NULL;
    ev_timer_stop(sn->loop, &sn->q_w);
    if (q) {
        srv_redis_async_set_data(q, NULL);
        srv_redis_async_close(q);
    }
}

static void finish(struct srv_redis_sentinel *sn, bool ok)
{
    drop_q(sn);
    if (!ok)
        sn->host[0] = '\0';
    ev_timer_set(&sn->answer_w, 0., 0.);
    ev_timer_start(sn->loop, &sn->answer_w);
}

static void answer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct srv_redis_sentinel *sn = t->data;
    srv_redis_sentinel_fn *fn = sn->fn;

    (void)loop;
    (void)revents;
    sn->fn = NULL;
    if (fn)
        fn(sn->fctx, sn->host[0] ? sn->host : NULL, sn->port,
           sn->host[0] ? NULL : sn->why);
}

/* This sentinel failed: why noted, the next one asked. */
static void failed(struct srv_redis_sentinel *sn, const char *why)
{
    add_reason(sn->why, sizeof(sn->why), &sn->cfg.addr[sn->at], why);
    drop_q(sn);
    try_next(sn);
}

static void q_closed(struct srv_redis_async *c, void *data, const char *why)
{
    struct srv_redis_sentinel *sn = data;

    if (!sn || c != sn->q)
        return;
    sn->q = NULL; /* freed after this callback */
    failed(sn, why);
}

static void q_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    failed(t->data, "no answer within 1 s");
}

static void auth_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *sn = priv;
    const redisReply *r = reply;
    char why[200];

    if (!r || !srv_redis_async_data(c) || c != sn->q ||
        r->type != REDIS_REPLY_ERROR)
        return;
    snprintf(why, sizeof(why), "AUTH: %.*s", (int)r->len, r->str);
    failed(sn, why);
}

static void addr_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *sn = priv;
    char why[200];

    if (!reply || !srv_redis_async_data(c) || c != sn->q)
        return;
    if (parse_addr(reply, sn->cfg.master, sn->host, sizeof(sn->host), &sn->port,
                   why, sizeof(why))) {
        failed(sn, why);
        return;
    }
    sn->good = sn->at;
    finish(sn, true);
}

/* Open a connection to sentinel i, AUTHed: NULL with why. */
static struct srv_redis_async *open_to(struct srv_redis_sentinel *sn, size_t i,
                                       srv_redis_async_closed_fn *closed,
                                       srv_redis_async_fn *push,
                                       srv_redis_async_fn *auth, char *why,
                                       size_t len)
{
    const struct srv_redis_addr *a = &sn->cfg.addr[i];
    struct srv_redis_async *c = srv_redis_async_open(
        sn->loop, a->host, a->port, sn->cfg.tls, sn->cfg.tls_name, why, len);
    char pass[SRV_SECRET_FILE_MAX + 1];

    if (!c)
        return NULL;
    srv_redis_async_on(c, closed, push, sn);
    password(&sn->cfg, pass, sizeof(pass));
    if (pass[0] && srv_redis_async_cmd(c, auth, sn, "AUTH %s", pass)) {
        snprintf(why, len, "out of memory");
        srv_redis_async_close(c);
        c = NULL;
    }
    explicit_bzero(pass, sizeof(pass));
    return c;
}

static void try_next(struct srv_redis_sentinel *sn)
{
    char why[200];

    while (sn->tried < sn->cfg.n) {
        sn->at = (sn->good + sn->tried++) % sn->cfg.n;
        sn->q = open_to(sn, sn->at, q_closed, NULL, auth_cb, why, sizeof(why));
        if (sn->q && srv_redis_async_cmd(sn->q, addr_cb, sn,
                                         "SENTINEL get-master-addr-by-name %s",
                                         sn->cfg.master) == 0) {
            ev_timer_set(&sn->q_w, ASK_TIMEOUT_S, 0.);
            ev_timer_start(sn->loop, &sn->q_w);
            return;
        }
        if (sn->q)
            snprintf(why, sizeof(why), "out of memory");
        drop_q(sn);
        add_reason(sn->why, sizeof(sn->why), &sn->cfg.addr[sn->at], why);
    }
    finish(sn, false);
}

void srv_redis_sentinel_cancel(struct srv_redis_sentinel *sn)
{
    drop_q(sn);
    ev_timer_stop(sn->loop, &sn->answer_w);
    sn->fn = NULL;
}

void srv_redis_sentinel_ask(struct srv_redis_sentinel *sn,
                            srv_redis_sentinel_fn *fn, void *ctx)
{
    srv_redis_sentinel_cancel(sn);
    sn->fn = fn;
    sn->fctx = ctx;
    sn->tried = 0;
    sn->why[0] = '\0';
    sn->host[0] = '\0';
    try_next(sn);
}

/* Asynchronous: the subscription. */

static void drop_w(struct srv_redis_sentinel *sn)
{
    struct srv_redis_async *w = sn->w;

    sn->w = NULL;
    if (w) {
        srv_redis_async_set_data(w, NULL);
        srv_redis_async_close(w);
    }
}

static void w_closed(struct srv_redis_async *c, void *data, const char *why)
{
    struct srv_redis_sentinel *sn = data;

    (void)why;
    if (sn && c == sn->w) {
        sn->w = NULL;                          /* freed after this callback */
        sn->w_at = (sn->w_at + 1) % sn->cfg.n; /* the next watch, elsewhere */
    }
}

static void w_auth(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *sn = priv;
    const redisReply *r = reply;

    if (r && srv_redis_async_data(c) && c == sn->w &&
        r->type == REDIS_REPLY_ERROR)
        drop_w(sn);
}

/* "+switch-master": "<name> <old ip> <old port> <new ip> <new port>". */
static void w_push(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *sn = priv;
    const redisReply *r = reply;
    char name[130], oh[256], nh[256];
    int op, np;

    if (!r || !srv_redis_async_data(c) || c != sn->w ||
        r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[2]->type != REDIS_REPLY_STRING ||
        strcasecmp(r->element[0]->str, "message"))
        return;
    if (sscanf(r->element[2]->str, "%129s %255s %d %255s %d", name, oh, &op, nh,
               &np) == 5 &&
        !strcmp(name, sn->cfg.master) && np > 0 && np < 65536 && sn->switched)
        sn->switched(sn->sctx, nh, np, NULL);
}

void srv_redis_sentinel_watch(struct srv_redis_sentinel *sn)
{
    char why[200];

    if (sn->w)
        return;
    sn->w = open_to(sn, sn->w_at, w_closed, w_push, w_auth, why, sizeof(why));
    if (!sn->w)
        return; /* tried again at the next call */
    if (srv_redis_async_send_push(sn->w, "SUBSCRIBE +switch-master"))
        drop_w(sn);
}

struct srv_redis_sentinel *
srv_redis_sentinel_create(struct ev_loop *loop,
                          const struct srv_redis_sentinels *cfg,
                          srv_redis_sentinel_fn *switched, void *ctx)
{
    struct srv_redis_sentinel *sn = calloc(1, sizeof(*sn));

    if (!sn)
        return NULL;
    sn->loop = loop;
    sn->cfg = *cfg;
    sn->switched = switched;
    sn->sctx = ctx;
    ev_timer_init(&sn->q_w, q_timeout, 0., 0.);
    sn->q_w.data = sn;
    ev_timer_init(&sn->answer_w, answer_cb, 0., 0.);
    sn->answer_w.data = sn;
    return sn;
}

void srv_redis_sentinel_destroy(struct srv_redis_sentinel *sn)
{
    if (!sn)
        return;
    drop_q(sn);
    drop_w(sn);
    ev_timer_stop(sn->loop, &sn->answer_w);
    free(sn);
}

/* Blocking. */

/* One sentinel's answer, blocking: 0, or why not. */
static int ask_one(const struct srv_redis_sentinels *cfg,
                   const struct srv_redis_addr *a,
                   const struct timeval *timeout, struct srv_redis_addr *out,
                   char *why, size_t len)
{
    struct srv_redis_sync *c = srv_redis_sync_open(
        a->host, a->port, cfg->tls, cfg->tls_name, timeout, why, len);
    const char *av[3] = {"AUTH"};
    char pass[SRV_SECRET_FILE_MAX + 1];
    redisReply *r = NULL;
    int rc = -EIO;
    bool auth;

    if (!c)
        return -EHOSTUNREACH;
    password(cfg, pass, sizeof(pass));
    auth = pass[0] != '\0';
    if (auth) {
        av[1] = pass;
        r = srv_redis_sync_argv(c, 2, av, NULL);
    }
    explicit_bzero(pass, sizeof(pass));
    if (r && r->type == REDIS_REPLY_ERROR) {
        snprintf(why, len, "AUTH: %.*s", (int)r->len, r->str);
    } else if (r || !auth) {
        if (r)
            freeReplyObject(r);
        av[0] = "SENTINEL";
        av[1] = "get-master-addr-by-name";
        av[2] = cfg->master;
        r = srv_redis_sync_argv(c, 3, av, NULL);
        if (r)
            rc = parse_addr(r, cfg->master, out->host, sizeof(out->host),
                            &out->port, why, len);
    }
    if (!r)
        snprintf(why, len, "%s", srv_redis_sync_error(c));
    if (r)
        freeReplyObject(r);
    srv_redis_sync_close(c);
    return rc;
}

int srv_redis_sentinel_ask_sync(const struct srv_redis_sentinels *cfg,
                                const struct timeval *timeout,
                                struct srv_redis_addr *out, char *why,
                                size_t len)
{
    char one[200];

    why[0] = '\0';
    for (size_t i = 0; i < cfg->n; i++) {
        if (ask_one(cfg, &cfg->addr[i], timeout, out, one, sizeof(one)) == 0)
            return 0;
        add_reason(why, len, &cfg->addr[i], one);
    }
    return -EHOSTUNREACH;
}
