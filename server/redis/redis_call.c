/*
 * server/redis/redis_call.c - the directory's script calls of
 * server/redis/redis_call.h: their arguments, EVALSHA or EVAL (the texts
 * of server/redis/redis_lua.h), the NOSCRIPT retry, SCRIPT LOAD on every
 * connect, and the reply handed to the call's handler.
 *
 * Thread: the backplane thread only.
 */
#include "server/redis/redis_call.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/stats.h"
#include "server/redis/redis_lua.h"
#include "server/lws/srv.h"

static const char *const script_text[SRV_SCRIPT_N] = {
    [SRV_SCRIPT_JOIN] = srv_redis_lua_dir_join,
    [SRV_SCRIPT_LEAVE] = srv_redis_lua_dir_leave,
    [SRV_SCRIPT_INFO] = srv_redis_lua_dir_info,
    [SRV_SCRIPT_LIST] = srv_redis_lua_dir_list,
    [SRV_SCRIPT_MEMBERS] = srv_redis_lua_dir_members,
    [SRV_SCRIPT_REJOIN] = srv_redis_lua_dir_rejoin,
    [SRV_SCRIPT_REJOIN_SWEEP] = srv_redis_lua_dir_rejoin_sweep,
    [SRV_SCRIPT_ONLINE_SIGNIN] = srv_redis_lua_online_signin,
    [SRV_SCRIPT_ONLINE_SIGNOUT] = srv_redis_lua_online_signout,
    [SRV_SCRIPT_ONLINE_REJOIN] = srv_redis_lua_online_rejoin,
};

struct srv_redis_async *srv_redis_call_conn(const struct srv_redis_call_ctx *cx)
{
    return cx->cmd_fn(cx->r);
}

/* Arguments. */

void srv_redis_call_arg_n(struct srv_redis_call *k, const char *s, size_t n)
{
    char *p;

    if (k->oom)
        return;
    if (k->argc == k->cap) {
        int cap = k->cap ? k->cap * 2 : 16;
        char **v = realloc(k->argv, (size_t)cap * sizeof(*v));
        size_t *l;

        if (v)
            k->argv = v;
        l = v ? realloc(k->argvlen, (size_t)cap * sizeof(*l)) : NULL;
        if (!l) {
            k->oom = true;
            return;
        }
        k->argvlen = l;
        k->cap = cap;
    }
    p = malloc(n + 1);
    if (!p) {
        k->oom = true;
        return;
    }
    memcpy(p, s, n);
    p[n] = '\0';
    k->argv[k->argc] = p;
    k->argvlen[k->argc++] = n;
}

void srv_redis_call_arg(struct srv_redis_call *k, const char *s)
{
    srv_redis_call_arg_n(k, s, strlen(s));
}

void srv_redis_call_argf(struct srv_redis_call *k, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        k->oom = true;
        return;
    }
    srv_redis_call_arg_n(k, s, (size_t)n);
    free(s);
}

void srv_redis_call_field(struct srv_redis_call *k, const char *app,
                          const char *ch, size_t len, const char *uid)
{
    size_t al = strlen(app), ul = uid ? strlen(uid) : 0;
    size_t n = al + 1 + len + (uid ? 1 + ul : 0);
    char *f = malloc(n);

    if (!f) {
        k->oom = true;
        return;
    }
    memcpy(f, app, al);
    f[al] = 0x1f;
    memcpy(f + al + 1, ch, len);
    if (uid) {
        f[al + 1 + len] = 0x1f;
        memcpy(f + al + 2 + len, uid, ul);
    }
    srv_redis_call_arg_n(k, f, n);
    free(f);
}

/* Calls. */

struct srv_redis_call *srv_redis_call_new(struct srv_redis_call_ctx *cx,
                                          struct srv_redis_dir *d,
                                          enum srv_script script,
                                          srv_redis_call_fn *done,
                                          struct hub_cluster_dirop *dop)
{
    struct srv_redis_call *k = calloc(1, sizeof(*k));

    if (!k)
        return NULL;
    k->cx = cx;
    k->d = d;
    k->script = script;
    k->done = done;
    k->dop = dop;
    srv_redis_call_arg(k, "EVALSHA");
    srv_redis_call_arg(k, "");
    return k;
}

void srv_redis_call_free(struct srv_redis_call *k)
{
    for (int i = 0; i < k->argc; i++)
        free(k->argv[i]);
    free(k->argv);
    free(k->argvlen);
    free(k->name);
    free(k);
}

void srv_redis_call_fail(struct srv_redis_call *k)
{
    k->done(k, NULL);
    srv_redis_call_free(k);
}

static void call_cb(struct srv_redis_async *ac, void *reply, void *priv);

/* EVALSHA when the SHA is known, else EVAL. */
void srv_redis_call_send(struct srv_redis_call *k)
{
    struct srv_redis_call_ctx *cx = k->cx;
    struct srv_redis_async *cmd = srv_redis_call_conn(cx);
    const char *sha = cx->sha[k->script];

    if (!cmd || k->oom) {
        srv_redis_call_fail(k);
        return;
    }
    free(k->argv[0]);
    free(k->argv[1]);
    if (sha[0] && !k->retried) {
        k->argv[0] = strdup("EVALSHA");
        k->argv[1] = strdup(sha);
    } else {
        k->argv[0] = strdup("EVAL");
        k->argv[1] = strdup(script_text[k->script]);
    }
    if (!k->argv[0] || !k->argv[1]) {
        k->oom = true;
        srv_redis_call_fail(k);
        return;
    }
    k->argvlen[0] = strlen(k->argv[0]);
    k->argvlen[1] = strlen(k->argv[1]);
    if (k->stamp_arg && k->dop) {
        /* Stamped now, not when built: its counter must be above every
         * envelope this node sent before the call (a parked join waited,
         * a NOSCRIPT retry comes later). */
        struct hub_cluster_dirop *dop = k->dop;
        char *st = NULL;
        int n = hub_cluster_member_stamp(cx->c, dop->app_id, dop->name,
                                         dop->len, dop->uid,
                                         strlen(dop->uid), dop->info,
                                         strlen(dop->info), &st);

        if (n < 0) {
            k->oom = true;
            srv_redis_call_fail(k);
            return;
        }
        free(k->argv[k->stamp_arg]);
        k->argv[k->stamp_arg] = st ? st : strdup("");
        k->argvlen[k->stamp_arg] = st ? (size_t)n : 0;
        if (!k->argv[k->stamp_arg]) {
            k->oom = true;
            srv_redis_call_fail(k);
            return;
        }
    }
    if (srv_redis_async_argv(cmd, call_cb, k, k->argc, (const char **)k->argv,
                             k->argvlen) != 0) {
        srv_redis_call_fail(k);
        return;
    }
}

void srv_redis_call_hkeys(struct srv_redis_call *k, const char *key)
{
    struct srv_redis_async *cmd = srv_redis_call_conn(k->cx);

    if (!cmd || srv_redis_async_cmd(cmd, call_cb, k, "HKEYS %s", key) != 0)
        srv_redis_call_fail(k);
}

bool srv_redis_call_is_int(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER;
}

bool srv_redis_call_is_bulk(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_STRING && e->str;
}

static void call_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis_call *k = priv;
    redisReply *rep = reply;

    (void)ac;
    if (!rep) {
        srv_redis_call_fail(k);
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        if (!k->retried && rep->str && !strncmp(rep->str, "NOSCRIPT", 8)) {
            k->retried = true;
            k->cx->sha[k->script][0] = '\0';
            srv_redis_call_send(k);
            return;
        }
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_script_failed"),
                      "backplane: directory script failed: %.*s",
                      (int)rep->len, rep->str ? rep->str : "");
        HUB_STAT_ADD(k->cx->st->bad, 1);
        srv_redis_call_fail(k);
        return;
    }
    k->done(k, rep);
    srv_redis_call_free(k);
}

/* Keys. */

void srv_redis_call_key_node(struct srv_redis_call *k, const char *what)
{
    srv_redis_call_argf(k, "%s:%s:%s", hub_cluster_prefix(k->cx->c), what,
                        k->cx->node);
}

void srv_redis_call_key_app(struct srv_redis_call *k, const char *what,
                            const char *app)
{
    srv_redis_call_argf(k, "%s:%s:%s", hub_cluster_prefix(k->cx->c), what, app);
}

void srv_redis_call_key_chan(struct srv_redis_call *k, const char *what,
                             const char *app, const char *ch, size_t len)
{
    srv_redis_call_argf(k, "%s:%s:%s:%.*s", hub_cluster_prefix(k->cx->c), what,
                        app, (int)len, ch);
}

/* SCRIPT LOAD: the SHA, for the calls made after its reply. */
struct load {
    struct srv_redis_call_ctx *cx;
    int script;
    unsigned gen;
};

static void load_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct load *l = priv;
    redisReply *rep = reply;

    (void)ac;
    if (rep && srv_redis_call_is_bulk(rep) && rep->len == 40 &&
        l->gen == l->cx->load_gen)
        memcpy(l->cx->sha[l->script], rep->str, 41);
    free(l);
}

void srv_redis_call_load_all(struct srv_redis_call_ctx *cx)
{
    struct srv_redis_async *cmd = srv_redis_call_conn(cx);

    if (!cmd)
        return;
    cx->load_gen++;
    for (int i = 0; i < SRV_SCRIPT_N; i++) {
        struct load *l = malloc(sizeof(*l));

        cx->sha[i][0] = '\0';
        if (!l)
            continue;
        *l = (struct load){ cx, i, cx->load_gen };
        if (srv_redis_async_cmd(cmd, load_cb, l, "SCRIPT LOAD %s",
                                script_text[i]) != 0)
            free(l);
    }
}

void srv_redis_call_forget_all(struct srv_redis_call_ctx *cx)
{
    for (int i = 0; i < SRV_SCRIPT_N; i++)
        cx->sha[i][0] = '\0';
}
