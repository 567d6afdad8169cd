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
    size_t at, tried, good;        /* q's sentinel, how many, who knew */
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
        r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len == 0 || r->element[0]->len >= hcap) {
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

static void try_next(struct srv_redis_sentinel *s);

static void drop_q(struct srv_redis_sentinel *s)
{
    struct srv_redis_async *q = s->q;

    s->q = NULL;
    ev_timer_stop(s->loop, &s->q_w);
    if (q) {
        srv_redis_async_set_data(q, NULL);
        srv_redis_async_close(q);
    }
}

static void finish(struct srv_redis_sentinel *s, bool ok)
{
    drop_q(s);
    if (!ok)
        s->host[0] = '\0';
    ev_timer_set(&s->answer_w, 0., 0.);
    ev_timer_start(s->loop, &s->answer_w);
}

static void answer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct srv_redis_sentinel *s = t->data;
    srv_redis_sentinel_fn *fn = s->fn;

    (void)loop;
    (void)revents;
    s->fn = NULL;
    if (fn)
        fn(s->fctx, s->host[0] ? s->host : NULL, s->port,
           s->host[0] ? NULL : s->why);
}

/* This sentinel failed: why noted, the next one asked. */
static void failed(struct srv_redis_sentinel *s, const char *why)
{
    add_reason(s->why, sizeof(s->why), &s->cfg.addr[s->at], why);
    drop_q(s);
    try_next(s);
}

static void q_closed(struct srv_redis_async *c, void *data, const char *why)
{
    struct srv_redis_sentinel *s = data;

    if (!s || c != s->q)
        return;
    s->q = NULL; /* freed after this callback */
    failed(s, why);
}

static void q_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    failed(t->data, "no answer within 1 s");
}

static void auth_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *s = priv;
    const redisReply *r = reply;
    char why[200];

    if (!r || !srv_redis_async_data(c) || c != s->q ||
        r->type != REDIS_REPLY_ERROR)
        return;
    snprintf(why, sizeof(why), "AUTH: %.*s", (int)r->len, r->str);
    failed(s, why);
}

static void addr_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *s = priv;
    char why[200];

    if (!reply || !srv_redis_async_data(c) || c != s->q)
        return;
    if (parse_addr(reply, s->cfg.master, s->host, sizeof(s->host), &s->port,
                   why, sizeof(why))) {
        failed(s, why);
        return;
    }
    s->good = s->at;
    finish(s, true);
}

/* Open a connection to sentinel i, AUTHed: NULL with why. */
static struct srv_redis_async *open_to(struct srv_redis_sentinel *s, size_t i,
                                       srv_redis_async_closed_fn *closed,
                                       srv_redis_async_fn *push,
                                       srv_redis_async_fn *auth, char *why,
                                       size_t len)
{
    const struct srv_redis_addr *a = &s->cfg.addr[i];
    struct srv_redis_async *c = srv_redis_async_open(
        s->loop, a->host, a->port, s->cfg.tls, s->cfg.tls_name, why, len);
    char pass[SRV_SECRET_FILE_MAX + 1];

    if (!c)
        return NULL;
    srv_redis_async_on(c, closed, push, s);
    password(&s->cfg, pass, sizeof(pass));
    if (pass[0] && srv_redis_async_cmd(c, auth, s, "AUTH %s", pass)) {
        snprintf(why, len, "out of memory");
        srv_redis_async_close(c);
        c = NULL;
    }
    explicit_bzero(pass, sizeof(pass));
    return c;
}

static void try_next(struct srv_redis_sentinel *s)
{
    char why[200];

    while (s->tried < s->cfg.n) {
        s->at = (s->good + s->tried++) % s->cfg.n;
        s->q = open_to(s, s->at, q_closed, NULL, auth_cb, why, sizeof(why));
        if (s->q &&
            srv_redis_async_cmd(s->q, addr_cb, s,
                                "SENTINEL get-master-addr-by-name %s",
                                s->cfg.master) == 0) {
            ev_timer_set(&s->q_w, ASK_TIMEOUT_S, 0.);
            ev_timer_start(s->loop, &s->q_w);
            return;
        }
        if (s->q)
            snprintf(why, sizeof(why), "out of memory");
        drop_q(s);
        add_reason(s->why, sizeof(s->why), &s->cfg.addr[s->at], why);
    }
    finish(s, false);
}

void srv_redis_sentinel_cancel(struct srv_redis_sentinel *s)
{
    drop_q(s);
    ev_timer_stop(s->loop, &s->answer_w);
    s->fn = NULL;
}

void srv_redis_sentinel_ask(struct srv_redis_sentinel *s,
                            srv_redis_sentinel_fn *fn, void *ctx)
{
    srv_redis_sentinel_cancel(s);
    s->fn = fn;
    s->fctx = ctx;
    s->tried = 0;
    s->why[0] = '\0';
    s->host[0] = '\0';
    try_next(s);
}

/* Asynchronous: the subscription. */

static void drop_w(struct srv_redis_sentinel *s)
{
    struct srv_redis_async *w = s->w;

    s->w = NULL;
    if (w) {
        srv_redis_async_set_data(w, NULL);
        srv_redis_async_close(w);
    }
}

static void w_closed(struct srv_redis_async *c, void *data, const char *why)
{
    struct srv_redis_sentinel *s = data;

    (void)why;
    if (s && c == s->w) {
        s->w = NULL;                   /* freed after this callback */
        s->w_at = (s->w_at + 1) % s->cfg.n; /* the next watch, elsewhere */
    }
}

static void w_auth(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *s = priv;
    const redisReply *r = reply;

    if (r && srv_redis_async_data(c) && c == s->w &&
        r->type == REDIS_REPLY_ERROR)
        drop_w(s);
}

/* "+switch-master": "<name> <old ip> <old port> <new ip> <new port>". */
static void w_push(struct srv_redis_async *c, void *reply, void *priv)
{
    struct srv_redis_sentinel *s = priv;
    const redisReply *r = reply;
    char name[130], oh[256], nh[256];
    int op, np;

    if (!r || !srv_redis_async_data(c) || c != s->w ||
        r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[2]->type != REDIS_REPLY_STRING ||
        strcasecmp(r->element[0]->str, "message"))
        return;
    if (sscanf(r->element[2]->str, "%129s %255s %d %255s %d", name, oh, &op,
               nh, &np) == 5 &&
        !strcmp(name, s->cfg.master) && np > 0 && np < 65536 && s->switched)
        s->switched(s->sctx, nh, np, NULL);
}

void srv_redis_sentinel_watch(struct srv_redis_sentinel *s)
{
    char why[200];

    if (s->w)
        return;
    s->w = open_to(s, s->w_at, w_closed, w_push, w_auth, why, sizeof(why));
    if (!s->w)
        return; /* tried again at the next call */
    if (srv_redis_async_send_push(s->w, "SUBSCRIBE +switch-master"))
        drop_w(s);
}

struct srv_redis_sentinel *
srv_redis_sentinel_create(struct ev_loop *loop,
                          const struct srv_redis_sentinels *cfg,
                          srv_redis_sentinel_fn *switched, void *ctx)
{
    struct srv_redis_sentinel *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->loop = loop;
    s->cfg = *cfg;
    s->switched = switched;
    s->sctx = ctx;
    ev_timer_init(&s->q_w, q_timeout, 0., 0.);
    s->q_w.data = s;
    ev_timer_init(&s->answer_w, answer_cb, 0., 0.);
    s->answer_w.data = s;
    return s;
}

void srv_redis_sentinel_destroy(struct srv_redis_sentinel *s)
{
    if (!s)
        return;
    drop_q(s);
    drop_w(s);
    ev_timer_stop(s->loop, &s->answer_w);
    free(s);
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
