/*
 * server/redis/redis_dir.c - the cluster-wide directory's network half
 * (server/redis/redis_dir.h; the design is docs/SCALING.md).
 */
#include "server/redis/redis_dir.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "hub/loop/stats.h"
#include "hub/webhook/wh_stream.h"
#include "server/redis/redis_lua.h"
#include "server/lws/srv.h"

enum srv_script {
    SRV_SCRIPT_JOIN,
    SRV_SCRIPT_LEAVE,
    SRV_SCRIPT_INFO,
    SRV_SCRIPT_LIST,
    SRV_SCRIPT_MEMBERS,
    SRV_SCRIPT_REJOIN,
    SRV_SCRIPT_REJOIN_SWEEP,
    SRV_SCRIPT_ONLINE_SIGNIN,
    SRV_SCRIPT_ONLINE_SIGNOUT,
    SRV_SCRIPT_ONLINE_REJOIN,
    SRV_SCRIPT_N,
};

/* Fields in one REJOIN chunk, and users in one online REJOIN chunk
 * (server/redis/lua/dir_rejoin.lua, online_rejoin.lua). */
#define SRV_REJOIN_CHUNK 1000

static const char *const script_text[SRV_SCRIPT_N] = {
    [SRV_SCRIPT_JOIN] = srv_lua_dir_join,
    [SRV_SCRIPT_LEAVE] = srv_lua_dir_leave,
    [SRV_SCRIPT_INFO] = srv_lua_dir_info,
    [SRV_SCRIPT_LIST] = srv_lua_dir_list,
    [SRV_SCRIPT_MEMBERS] = srv_lua_dir_members,
    [SRV_SCRIPT_REJOIN] = srv_lua_dir_rejoin,
    [SRV_SCRIPT_REJOIN_SWEEP] = srv_lua_dir_rejoin_sweep,
    [SRV_SCRIPT_ONLINE_SIGNIN] = srv_lua_online_signin,
    [SRV_SCRIPT_ONLINE_SIGNOUT] = srv_lua_online_signout,
    [SRV_SCRIPT_ONLINE_REJOIN] = srv_lua_online_rejoin,
};

/* A presence view to refresh once its member channel is confirmed. */
struct refresh {
    struct refresh *next;
    unsigned app;
    char *mchan;
    size_t mlen;
    char *name;
    size_t len;
};

struct srv_redis_dir {
    struct srv_redis *r;
    redisAsyncContext *(*cmd_fn)(struct srv_redis *r);
    bool (*confirmed_fn)(struct srv_redis *r, const char *name, size_t len);
    struct hub_cluster *c;
    struct hub_backplane_stats *st;
    char *node;
    char sha[SRV_SCRIPT_N][41];    /* "" until SCRIPT LOAD answered */
    unsigned load_gen;             /* a load's replies after a reconnect */
    struct hub_cluster_op *parked, **parked_tail;
    struct refresh *refresh;
    /* The REJOIN in progress: its chunks (SRV_REJOIN_CHUNK fields a
     * script), then the sweep of the old share's rest, then the views'
     * lists. Replies of an earlier one (gen) are ignored. */
    struct {
        unsigned gen;
        unsigned chunks, left;     /* chunks sent; still unanswered */
        bool sent_all, failed;
        long long tot[5];          /* subs, channels, members, +, - */
        long long on[2];           /* online users, appeared */
        char *tok;                 /* the old share's reap token */
    } rj;
};

enum purpose {
    P_JOIN,
    P_JOIN_STALE,                  /* answered by a members read */
    P_LEAVE,
    P_QUERY,
    P_REJOIN,
    P_REJOIN_SWEEP,
    P_REFRESH,
    P_ONLINE,                      /* a signin or signout script */
    P_ONLINE_REJOIN,               /* a chunk of the online REJOIN */
};

/* One script call in flight: its arguments are kept for a NOSCRIPT
 * retry (EVAL with the text). */
struct call {
    struct srv_redis_dir *d;
    enum srv_script script;
    enum purpose purpose;
    struct hub_cluster_dirop *dop;
    unsigned app;                  /* REFRESH */
    unsigned gen;                  /* REJOIN, REJOIN_SWEEP: d->rj.gen */
    char *name;
    size_t len;
    int argc, cap;
    char **argv;
    size_t *argvlen;
    bool retried, oom;
    int stamp_arg;                 /* JOIN: the stamp's argv index, 0 none */
};


struct srv_redis_dir *srv_redis_dir_create(
    struct srv_redis *r,
    redisAsyncContext *(*cmd)(struct srv_redis *r),
    bool (*confirmed)(struct srv_redis *r, const char *name, size_t len),
    struct hub_cluster *c, const char *node_id)
{
    struct srv_redis_dir *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    d->node = strdup(node_id);
    if (!d->node) {
        free(d);
        return NULL;
    }
    d->r = r;
    d->cmd_fn = cmd;
    d->confirmed_fn = confirmed;
    d->c = c;
    d->st = hub_cluster_stats(c);
    d->parked_tail = &d->parked;
    return d;
}

static void refresh_clear(struct srv_redis_dir *d)
{
    struct refresh *f, *fn;

    for (f = d->refresh; f; f = fn) {
        fn = f->next;
        free(f->mchan);
        free(f->name);
        free(f);
    }
    d->refresh = NULL;
}

void srv_redis_dir_free(struct srv_redis_dir *d)
{
    struct hub_cluster_op *op, *next;

    if (!d)
        return;
    /* Joins still waiting for a SUBSCRIBE: their callers get -ECANCELED
     * at the cluster's destroy, after the loops (hub/cluster/cluster.h). */
    for (op = d->parked; op; op = next) {
        next = op->next;
        hub_cluster_dir_cancel(d->c, op->dop);
        op->dop = NULL;
        hub_cluster_op_free(op);
    }
    refresh_clear(d);
    free(d->rj.tok);
    free(d->node);
    free(d);
}

/* Arguments. */

static void arg_n(struct call *k, const char *s, size_t n)
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

static void arg(struct call *k, const char *s)
{
    arg_n(k, s, strlen(s));
}

static void argf(struct call *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void argf(struct call *k, const char *fmt, ...)
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
    arg_n(k, s, (size_t)n);
    free(s);
}

/* "app US ch [US uid]" */
static void arg_field(struct call *k, const char *app, const char *ch,
                      size_t len, const char *uid)
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
    arg_n(k, f, n);
    free(f);
}

static struct call *call_new(struct srv_redis_dir *d, enum srv_script s,
                             enum purpose p, struct hub_cluster_dirop *dop)
{
    struct call *k = calloc(1, sizeof(*k));

    if (!k)
        return NULL;
    k->d = d;
    k->script = s;
    k->purpose = p;
    k->dop = dop;
    arg(k, "EVALSHA");
    arg(k, "");
    return k;
}

static void call_free(struct call *k)
{
    for (int i = 0; i < k->argc; i++)
        free(k->argv[i]);
    free(k->argv);
    free(k->argvlen);
    free(k->name);
    free(k);
}

static void rejoin_step(struct srv_redis_dir *d);

/* Failure: no answer from Redis. */
static void call_failed(struct call *k)
{
    struct srv_redis_dir *d = k->d;

    switch (k->purpose) {
    case P_JOIN:
    case P_JOIN_STALE:
    case P_LEAVE:
    case P_QUERY:
        hub_cluster_dir_local(d->c, k->dop);
        k->dop = NULL;
        break;
    case P_ONLINE:
        /* Its watchers are told nothing now; the next REJOIN's resync
         * corrects what they show. */
        HUB_STAT_ADD_SHARED(d->st->lost, 1);
        break;
    case P_REJOIN:
    case P_ONLINE_REJOIN:
        if (k->gen == d->rj.gen) {
            d->rj.failed = true;
            d->rj.left--;
            call_free(k);
            rejoin_step(d);
            return;
        }
        break;
    case P_REJOIN_SWEEP:
        if (k->gen == d->rj.gen) {
            d->rj.failed = true;
            call_free(k);
            rejoin_step(d);
            return;
        }
        break;
    case P_REFRESH:
        break;
    }
    call_free(k);
}

static void call_cb(redisAsyncContext *ac, void *reply, void *priv);

/* Send k (EVALSHA when the SHA is known, else EVAL); on failure k is
 * answered locally and freed. */
static void call_send(struct call *k)
{
    struct srv_redis_dir *d = k->d;
    redisAsyncContext *cmd = d->cmd_fn(d->r);
    const char *sha = d->sha[k->script];

    if (!cmd || k->oom) {
        call_failed(k);
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
        call_failed(k);
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
        int n = hub_cluster_member_stamp(d->c, dop->app_id, dop->name,
                                         dop->len, dop->uid,
                                         strlen(dop->uid), dop->info,
                                         strlen(dop->info), &st);

        if (n < 0) {
            k->oom = true;
            call_failed(k);
            return;
        }
        free(k->argv[k->stamp_arg]);
        k->argv[k->stamp_arg] = st ? st : strdup("");
        k->argvlen[k->stamp_arg] = st ? (size_t)n : 0;
        if (!k->argv[k->stamp_arg]) {
            k->oom = true;
            call_failed(k);
            return;
        }
    }
    if (redisAsyncCommandArgv(cmd, call_cb, k, k->argc,
                              (const char **)k->argv, k->argvlen) !=
        REDIS_OK) {
        call_failed(k);
        return;
    }
}

static bool is_int(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER;
}

static bool is_bulk(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_STRING && e->str;
}

/* Members from rep->element[from..] as (uid, info) pairs; NULL with *n 0
 * when none; *bad when an element is not a string. */
static struct hub_cluster_member *members_of(const redisReply *rep,
                                             size_t from, size_t *n,
                                             bool *bad)
{
    struct hub_cluster_member *m;
    size_t k = 0;

    *n = 0;
    *bad = false;
    if (rep->elements <= from)
        return NULL;
    if ((rep->elements - from) % 2) {
        *bad = true;
        return NULL;
    }
    m = calloc((rep->elements - from) / 2, sizeof(*m));
    if (!m)
        return NULL;
    for (size_t i = from; i + 1 < rep->elements; i += 2) {
        const redisReply *u = rep->element[i], *v = rep->element[i + 1];

        if (!is_bulk(u) || !is_bulk(v) || !u->len) {
            *bad = true;
            continue;
        }
        m[k++] = (struct hub_cluster_member){ u->str, v->str, u->len,
                                              v->len };
    }
    *n = k;
    return m;
}

static void got_join(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;
    struct hub_cluster_member *m = NULL;
    size_t n = 0;
    bool bad = false;
    size_t first = k->purpose == P_JOIN ? 3 : 1;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < first ||
        !is_int(rep->element[0]) ||
        (first == 3 && (!is_int(rep->element[1]) ||
                        !is_int(rep->element[2])))) {
        HUB_STAT_ADD(d->st->bad, 1);
        hub_cluster_dir_local(d->c, k->dop);
        k->dop = NULL;
        return;
    }
    if (first == 3 && rep->element[0]->integer < 0) {
        hub_cluster_dir_joined(d->c, k->dop, -ENOSPC, false, false, 0, NULL,
                               0);
        k->dop = NULL;
        return;
    }
    m = members_of(rep, first, &n, &bad);
    if (bad)
        HUB_STAT_ADD(d->st->bad, 1);
    if (first == 3)
        hub_cluster_dir_joined(d->c, k->dop, 0, rep->element[0]->integer == 1,
                               rep->element[1]->integer == 1,
                               (uint64_t)rep->element[2]->integer, m, n);
    else
        hub_cluster_dir_joined(d->c, k->dop, 0, false, false,
                               (uint64_t)rep->element[0]->integer, m, n);
    k->dop = NULL;
    free(m);
}

static void got_leave(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
        !is_int(rep->element[0]) || !is_int(rep->element[1])) {
        HUB_STAT_ADD(d->st->bad, 1);
        hub_cluster_dirop_free(k->dop);
    } else {
        hub_cluster_dir_left(d->c, k->dop, rep->element[0]->integer == 1,
                             rep->element[1]->integer == 1);
    }
    k->dop = NULL;
}

static void got_query(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;
    struct hub_cluster_dirop *dop = k->dop;
    struct hub_dir_query *q = dop->q;
    json_t *j = NULL;

    k->dop = NULL;
    if (rep->type != REDIS_REPLY_ARRAY) {
        HUB_STAT_ADD(d->st->bad, 1);
        hub_cluster_dir_local(d->c, dop);
        return;
    }
    if (q->kind == HUB_DIR_Q_INFO) {
        struct hub_channel_info ci = { 0 };

        if (rep->elements >= 2 && is_int(rep->element[0]) &&
            is_int(rep->element[1])) {
            long long s = rep->element[0]->integer,
                      u = rep->element[1]->integer;

            ci.subscription_count = s > 0 ? (uint32_t)s : 0;
            ci.occupied = s > 0;
            ci.user_count = u > 0 ? (uint32_t)u : 0;
        }
        hub_cluster_dir_queried(d->c, dop, &ci, NULL);
        return;
    }
    if (q->kind == HUB_DIR_Q_LIST) {
        j = json_object();
        for (size_t i = 0; j && i + 1 < rep->elements; i += 2) {
            const redisReply *ch = rep->element[i], *u = rep->element[i + 1];
            json_t *o;

            if (!is_bulk(ch) || !is_int(u) || memchr(ch->str, 0, ch->len))
                continue;
            o = json_object();
            if (o && q->user_count &&
                json_object_set_new(o, "user_count",
                                    json_integer(u->integer))) {
                json_decref(o);
                o = NULL;
            }
            if (!o || json_object_setn_new(j, ch->str, ch->len, o)) {
                json_decref(j);
                j = NULL;
            }
        }
    } else {
        j = json_array();
        for (size_t i = 0; j && i < rep->elements; i++) {
            const redisReply *u = rep->element[i];

            if (!is_bulk(u))
                continue;
            if (json_array_append_new(j, json_pack("{s:s%}", "id", u->str,
                                                   u->len))) {
                json_decref(j);
                j = NULL;
            }
        }
    }
    hub_cluster_dir_queried(d->c, dop, NULL, j);
}

/* One REJOIN chunk answered: its totals added. */
static void got_rejoin(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (k->gen != d->rj.gen)
        return;
    d->rj.left--;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 6 ||
        !is_bulk(rep->element[5])) {
        d->rj.failed = true;
    } else {
        for (int i = 0; i < 5; i++)
            if (!is_int(rep->element[i]))
                d->rj.failed = true;
        for (int i = 0; i < 5 && !d->rj.failed; i++)
            d->rj.tot[i] += rep->element[i]->integer;
        if (!d->rj.tok && rep->element[5]->len &&
            !(d->rj.tok = strdup(rep->element[5]->str)))
            d->rj.failed = true;
    }
    rejoin_step(d);
}

/* One step of the sweep answered: {"more"|"done"|"lost", removed}. */
static void got_sweep(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;
    const redisReply *st;

    if (k->gen != d->rj.gen)
        return;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        !is_bulk(st = rep->element[0]) || !is_int(rep->element[1])) {
        d->rj.failed = true;
        rejoin_step(d);
        return;
    }
    d->rj.tot[4] += rep->element[1]->integer;
    if (strcmp(st->str, "more")) {
        /* done, or lost: another node's reaper finishes the token. */
        free(d->rj.tok);
        d->rj.tok = NULL;
    }
    rejoin_step(d);
}

/* A signin's {edge, online, skipped} or a signout's {edge}. */
static void got_online(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        !is_int(rep->element[0])) {
        HUB_STAT_ADD(d->st->bad, 1);
        return;
    }
    if (rep->element[0]->integer > 0)
        HUB_STAT_ADD(d->st->online_edges, 1);
    if (rep->elements >= 3 && is_int(rep->element[2]) &&
        rep->element[2]->integer > 0)
        HUB_STAT_ADD(d->st->watch_skipped,
                     (uint64_t)rep->element[2]->integer);
}

/* A chunk of the online REJOIN answered: {users, appeared}. */
static void got_online_rejoin(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (k->gen != d->rj.gen)
        return;
    d->rj.left--;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        !is_int(rep->element[0]) || !is_int(rep->element[1])) {
        d->rj.failed = true;
    } else {
        d->rj.on[0] += rep->element[0]->integer;
        d->rj.on[1] += rep->element[1]->integer;
    }
    rejoin_step(d);
}

static void got_refresh(struct call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;
    struct hub_cluster_member *m;
    size_t n;
    bool bad;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        !is_int(rep->element[0])) {
        HUB_STAT_ADD(d->st->bad, 1);
        return;
    }
    m = members_of(rep, 1, &n, &bad);
    if (bad)
        HUB_STAT_ADD(d->st->bad, 1);
    hub_cluster_view_refresh(d->c, k->app, k->name, k->len,
                             (uint64_t)rep->element[0]->integer, m, n);
    free(m);
}

static void call_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct call *k = priv;
    redisReply *rep = reply;

    (void)ac;
    if (!rep) {
        call_failed(k);
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        if (!k->retried && rep->str && !strncmp(rep->str, "NOSCRIPT", 8)) {
            k->retried = true;
            k->d->sha[k->script][0] = '\0';
            call_send(k);
            return;
        }
        srv_log(HUB_LOG_WARN, 0, "backplane: directory script failed: %.*s",
                (int)rep->len, rep->str ? rep->str : "");
        HUB_STAT_ADD(k->d->st->bad, 1);
        call_failed(k);
        return;
    }
    switch (k->purpose) {
    case P_JOIN:
    case P_JOIN_STALE:
        got_join(k, rep);
        break;
    case P_LEAVE:
        got_leave(k, rep);
        break;
    case P_QUERY:
        got_query(k, rep);
        break;
    case P_REJOIN:
        got_rejoin(k, rep);
        break;
    case P_REJOIN_SWEEP:
        got_sweep(k, rep);
        break;
    case P_REFRESH:
        got_refresh(k, rep);
        break;
    case P_ONLINE:
        got_online(k, rep); /* the script published what it decided */
        break;
    case P_ONLINE_REJOIN:
        got_online_rejoin(k, rep);
        break;
    }
    call_free(k);
}

/* Keys. */

static void key_node(struct call *k, const char *what)
{
    argf(k, "%s:%s:%s", hub_cluster_prefix(k->d->c), what, k->d->node);
}

static void key_app(struct call *k, const char *what, const char *app)
{
    argf(k, "%s:%s:%s", hub_cluster_prefix(k->d->c), what, app);
}

static void key_chan(struct call *k, const char *what, const char *app,
                     const char *ch, size_t len)
{
    argf(k, "%s:%s:%s:%.*s", hub_cluster_prefix(k->d->c), what, app,
         (int)len, ch);
}

/* KEYS ns nm ni gs gm gi gq, and wh whd whn when wh (durable webhooks:
 * the script queues the app's edges itself). */
static void keys7(struct call *k, const struct hub_cluster_dirop *dop,
                  bool wh)
{
    arg(k, wh ? "10" : "7");
    key_node(k, "ns");
    key_node(k, "nm");
    key_node(k, "ni");
    key_app(k, "gs", dop->app_id);
    key_chan(k, "gm", dop->app_id, dop->name, dop->len);
    key_chan(k, "gi", dop->app_id, dop->name, dop->len);
    key_app(k, "gq", dop->app_id);
    if (wh) {
        key_app(k, "wh", dop->app_id);
        key_app(k, "whd", dop->app_id);
        key_app(k, "whn", dop->app_id);
    }
}

/* The webhook ARGV tail: the delay and the stream's bound. */
static void wh_args(struct srv_redis_dir *d, struct call *k,
                    uint64_t delay_ms)
{
    argf(k, "%llu", (unsigned long long)delay_ms);
    argf(k, "%u", hub_cluster_wh_max(d->c));
}

static void send_members(struct srv_redis_dir *d, struct call *k,
                         const char *app_id, const char *name, size_t len)
{
    arg(k, "2");
    key_app(k, "gq", app_id);
    key_chan(k, "gi", app_id, name, len);
    arg_n(k, name, len);
    call_send(k);
    (void)d;
}

static void run_join(struct srv_redis_dir *d, struct hub_cluster_dirop *dop)
{
    struct call *k;
    uint64_t delay = 0;
    bool wh;

    if (hub_cluster_dir_stale(d->c, dop)) {
        /* Counted in the latest REJOIN already: only the answer. */
        if (!dop->presence || !dop->req) {
            hub_cluster_dir_joined(d->c, dop, 0, false, false, 0, NULL, 0);
            return;
        }
        k = call_new(d, SRV_SCRIPT_MEMBERS, P_JOIN_STALE, dop);
        if (!k) {
            hub_cluster_dir_local(d->c, dop);
            return;
        }
        send_members(d, k, dop->app_id, dop->name, dop->len);
        return;
    }
    k = call_new(d, SRV_SCRIPT_JOIN, P_JOIN, dop);
    if (!k) {
        hub_cluster_dir_local(d->c, dop);
        return;
    }
    wh = hub_cluster_wh_redis(d->c, dop->app, &delay);
    keys7(k, dop, wh);
    arg_field(k, dop->app_id, dop->name, dop->len, NULL);
    arg_n(k, dop->name, dop->len);
    argf(k, "%u", (unsigned)dop->max_members);
    if (dop->presence) {
        arg(k, dop->uid);
        arg(k, dop->info);
        arg_field(k, dop->app_id, dop->name, dop->len, dop->uid);
        key_chan(k, "m", dop->app_id, dop->name, dop->len);
        k->stamp_arg = k->argc;
        arg(k, ""); /* the stamp, made by call_send() */
    }
    if (wh)
        wh_args(d, k, delay);
    call_send(k);
}

static void run_leave(struct srv_redis_dir *d, struct hub_cluster_dirop *dop)
{
    struct call *k;
    uint64_t delay = 0;
    bool wh;

    if (hub_cluster_dir_stale(d->c, dop)) {
        hub_cluster_dirop_free(dop);
        return;
    }
    k = call_new(d, SRV_SCRIPT_LEAVE, P_LEAVE, dop);
    if (!k) {
        hub_cluster_dirop_free(dop); /* the next REJOIN corrects it */
        return;
    }
    wh = hub_cluster_wh_redis(d->c, dop->app, &delay);
    keys7(k, dop, wh);
    arg_field(k, dop->app_id, dop->name, dop->len, NULL);
    arg_n(k, dop->name, dop->len);
    if (dop->presence) {
        arg(k, dop->uid);
        arg_field(k, dop->app_id, dop->name, dop->len, dop->uid);
        key_chan(k, "m", dop->app_id, dop->name, dop->len);
    }
    if (wh)
        wh_args(d, k, delay);
    call_send(k);
}

static void run_query(struct srv_redis_dir *d, struct hub_cluster_dirop *dop)
{
    struct hub_dir_query *q = dop->q;
    struct call *k;

    if (q->kind == HUB_DIR_Q_USERS) {
        /* A plain HKEYS: no script needed. */
        redisAsyncContext *cmd = d->cmd_fn(d->r);
        char *key = NULL;

        k = call_new(d, SRV_SCRIPT_INFO, P_QUERY, dop);
        if (!k || !cmd ||
            asprintf(&key, "%s:gm:%s:%.*s", hub_cluster_prefix(d->c),
                     dop->app_id, (int)dop->len, dop->name) < 0) {
            if (k) {
                call_failed(k);
            } else {
                hub_cluster_dir_local(d->c, dop);
            }
            return;
        }
        if (redisAsyncCommand(cmd, call_cb, k, "HKEYS %s", key) != REDIS_OK)
            call_failed(k);
        free(key);
        return;
    }
    k = call_new(d, q->kind == HUB_DIR_Q_INFO ? SRV_SCRIPT_INFO
                                               : SRV_SCRIPT_LIST,
                 P_QUERY, dop);
    if (!k) {
        hub_cluster_dir_local(d->c, dop);
        return;
    }
    if (q->kind == HUB_DIR_Q_INFO) {
        arg(k, "2");
        key_app(k, "gs", dop->app_id);
        key_chan(k, "gm", dop->app_id, dop->name, dop->len);
        arg_n(k, dop->name, dop->len);
    } else {
        arg(k, "1");
        key_app(k, "gs", dop->app_id);
        argf(k, "%s:gm:%s:", hub_cluster_prefix(d->c), dop->app_id);
        arg(k, q->prefix ? q->prefix : "");
        arg(k, q->user_count ? "1" : "0");
    }
    call_send(k);
}

/* A parked op with broker channel name? */
static bool parked_on(const struct srv_redis_dir *d, const char *name,
                      size_t len)
{
    for (const struct hub_cluster_op *op = d->parked; op; op = op->next)
        if (op->rchan_len == len && !memcmp(op->rchan, name, len))
            return true;
    return false;
}

static void park(struct srv_redis_dir *d, struct hub_cluster_op *op)
{
    op->next = NULL;
    *d->parked_tail = op;
    d->parked_tail = &op->next;
    HUB_STAT_ADD(d->st->dir_parked, 1);
}

/* The parked list, emptied; the gauge follows. */
static struct hub_cluster_op *unpark_all(struct srv_redis_dir *d)
{
    struct hub_cluster_op *op = d->parked;
    uint64_t n = 0;

    for (const struct hub_cluster_op *o = op; o; o = o->next)
        n++;
    d->parked = NULL;
    d->parked_tail = &d->parked;
    HUB_STAT_SET(d->st->dir_parked, HUB_STAT_GET(d->st->dir_parked) - n);
    return op;
}

/* An online change's script (docs/SCALING.md, "Watchlists and online
 * state"); takes oop. */
static void run_online(struct srv_redis_dir *d, struct hub_cluster_onop *oop)
{
    bool first = oop->first, replace = oop->replace;
    struct call *k;

    if (hub_cluster_online_stale(d->c, oop)) {
        /* In the latest online snapshot already: a signout has nothing
         * left to do, a signin still owes the user its initial state. */
        if (!oop->signin) {
            hub_cluster_onop_free(oop);
            return;
        }
        first = replace = false;
    }
    k = call_new(d, oop->signin ? SRV_SCRIPT_ONLINE_SIGNIN
                                : SRV_SCRIPT_ONLINE_SIGNOUT,
                 P_ONLINE, NULL);
    if (!k) {
        HUB_STAT_ADD_SHARED(d->st->lost, 1);
        hub_cluster_onop_free(oop);
        return;
    }
    arg(k, "0");
    arg(k, hub_cluster_prefix(d->c));
    arg(k, d->node);
    arg(k, oop->app_id);
    arg(k, oop->uid);
    if (oop->signin) {
        arg(k, first ? "1" : "0");
        arg(k, replace ? "1" : "0");
        argf(k, "%u", (unsigned)oop->max_watchers);
        arg(k, oop->full ? "1" : "0");
        argf(k, "%zu", replace ? oop->n : (size_t)0);
        for (size_t i = 0; replace && i < oop->n; i++)
            arg(k, oop->ids[i]);
    }
    hub_cluster_onop_free(oop);
    call_send(k);
}

/* An ONLINE op: a signin waits until Redis confirmed the SUBSCRIBE of the
 * user's channel (its initial state is published there), and nothing of a
 * user overtakes a parked op of that user. True when op is kept. */
static bool online_in(struct srv_redis_dir *d, struct hub_cluster_op *op)
{
    struct hub_cluster_onop *oop = op->oop;

    if (!oop)
        return false;
    if (!d->cmd_fn(d->r)) {
        HUB_STAT_ADD_SHARED(d->st->lost, 1);
        return false;
    }
    if ((oop->signin && !d->confirmed_fn(d->r, op->rchan, op->rchan_len)) ||
        parked_on(d, op->rchan, op->rchan_len)) {
        park(d, op);
        return true;
    }
    op->oop = NULL;
    run_online(d, oop);
    return false;
}

bool srv_redis_dir_op(struct srv_redis_dir *d, struct hub_cluster_op *op)
{
    struct hub_cluster_dirop *dop = op->dop;

    if (op->kind == HUB_COP_ONLINE)
        return online_in(d, op);
    if (!dop)
        return false;
    if (!d->cmd_fn(d->r)) {
        op->dop = NULL;
        hub_cluster_dir_local(d->c, dop);
        return false;
    }
    switch (dop->kind) {
    case HUB_COP_JOIN:
        /* After subscription_succeeded nothing published on the channel
         * may miss this node: the join waits for the SUBSCRIBE. */
        if (!d->confirmed_fn(d->r, op->rchan, op->rchan_len) ||
            parked_on(d, op->rchan, op->rchan_len)) {
            park(d, op);
            return true;
        }
        op->dop = NULL;
        run_join(d, dop);
        return false;
    case HUB_COP_LEAVE:
        /* Never before a join of the channel that still waits. */
        if (parked_on(d, op->rchan, op->rchan_len)) {
            park(d, op);
            return true;
        }
        op->dop = NULL;
        run_leave(d, dop);
        return false;
    default:
        op->dop = NULL;
        run_query(d, dop);
        return false;
    }
}

static void send_refresh(struct srv_redis_dir *d, unsigned app,
                         const char *name, size_t len)
{
    const char *id = hub_cluster_app_id(d->c, app);
    struct call *k = id ? call_new(d, SRV_SCRIPT_MEMBERS, P_REFRESH, NULL)
                        : NULL;

    if (!k)
        return;
    k->app = app;
    k->name = malloc(len + 1);
    if (!k->name) {
        call_free(k);
        return;
    }
    memcpy(k->name, name, len);
    k->name[len] = '\0';
    k->len = len;
    send_members(d, k, id, name, len);
}

static void run_parked(struct srv_redis_dir *d, const char *name,
                       size_t len);

/* Broker channel name's SUBSCRIBE was confirmed (send: the views' lists
 * waiting for it go out) or will not be (the views are dropped): the
 * refresh records go, then what is parked on it runs, in order. */
static void channel_settled(struct srv_redis_dir *d, const char *name,
                            size_t len, bool send)
{
    struct refresh **pf = &d->refresh, *f;

    while ((f = *pf)) {
        if (f->mlen == len && !memcmp(f->mchan, name, len)) {
            *pf = f->next;
            if (send)
                send_refresh(d, f->app, f->name, f->len);
            free(f->mchan);
            free(f->name);
            free(f);
        } else {
            pf = &f->next;
        }
    }
    run_parked(d, name, len);
}

void srv_redis_dir_confirmed(struct srv_redis_dir *d, const char *name,
                             size_t len)
{
    channel_settled(d, name, len, true);
}

void srv_redis_dir_unsubscribed(struct srv_redis_dir *d, const char *name,
                                size_t len)
{
    /* Every op parked on it came before this UNSUBSCRIBE (one ordered
     * stream): the joins and leaves of members already gone, a signin and
     * signout of a user already gone. The Redis state gets them in their
     * order; a later join waits for the next SUBSCRIBE. */
    channel_settled(d, name, len, false);
}

/* Run the ops parked on broker channel name, in order; keep the rest. */
static void run_parked(struct srv_redis_dir *d, const char *name, size_t len)
{
    struct hub_cluster_op *op, *next;

    for (op = unpark_all(d); op; op = next) {
        next = op->next;
        op->next = NULL;
        if (op->rchan_len == len && !memcmp(op->rchan, name, len) &&
            op->kind == HUB_COP_ONLINE) {
            struct hub_cluster_onop *oop = op->oop;

            op->oop = NULL;
            if (oop)
                run_online(d, oop);
            hub_cluster_op_free(op);
        } else if (op->rchan_len == len && !memcmp(op->rchan, name, len)) {
            struct hub_cluster_dirop *dop = op->dop;

            op->dop = NULL;
            if (dop->kind == HUB_COP_JOIN)
                run_join(d, dop);
            else
                run_leave(d, dop);
            hub_cluster_op_free(op);
        } else {
            park(d, op);
        }
    }
}

void srv_redis_dir_down(struct srv_redis_dir *d)
{
    struct hub_cluster_op *op, *next;

    for (op = unpark_all(d); op; op = next) {
        struct hub_cluster_dirop *dop = op->dop;

        next = op->next;
        op->dop = NULL;
        if (dop)
            hub_cluster_dir_local(d->c, dop);
        else /* an online op: the resync mends */
            HUB_STAT_ADD_SHARED(d->st->lost, 1);
        hub_cluster_op_free(op);
    }
    refresh_clear(d);
    /* A REJOIN in progress ends here, silently: the next up rejoins. */
    d->rj.gen++;
    d->rj.sent_all = false;
    free(d->rj.tok);
    d->rj.tok = NULL;
    for (int i = 0; i < SRV_SCRIPT_N; i++)
        d->sha[i][0] = '\0';
}

/* SCRIPT LOAD: the SHA, for the calls made after its reply. */
struct load {
    struct srv_redis_dir *d;
    int script;
    unsigned gen;
};

static void load_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct load *l = priv;
    redisReply *rep = reply;

    (void)ac;
    if (rep && is_bulk(rep) && rep->len == 40 && l->gen == l->d->load_gen)
        memcpy(l->d->sha[l->script], rep->str, 41);
    free(l);
}

/* REJOIN: the share as the wrapped directory has it. */
struct share {
    struct srv_redis_dir *d;
    struct call *subs, *mem;       /* argument lists only */
    long long n_s, n_m;
};

static void share_chan(void *ctx, unsigned app, const char *name, size_t len,
                       uint32_t subs)
{
    struct share *sh = ctx;
    const char *id = hub_cluster_app_id(sh->d->c, app);

    if (!id || (len && name[0] == '#'))
        return;
    arg_field(sh->subs, id, name, len, NULL);
    argf(sh->subs, "%u", (unsigned)subs);
    sh->n_s++;
}

static void share_member(void *ctx, unsigned app, const char *name,
                         size_t len, const char *uid, const char *info,
                         uint32_t conns)
{
    struct share *sh = ctx;
    const char *id = hub_cluster_app_id(sh->d->c, app);

    if (!id)
        return;
    char *st = NULL;
    int n;

    arg_field(sh->mem, id, name, len, uid);
    argf(sh->mem, "%u", (unsigned)conns);
    arg(sh->mem, info ? info : "");
    /* The stamp of the member_added the chunk may publish: made now, the
     * chunks go out right after the snapshot, before anything else of
     * this node (a NOSCRIPT retry may come after a later envelope: its
     * events are then dropped as replays, and the views' refresh after
     * the REJOIN brings the member anyway). */
    n = hub_cluster_member_stamp(sh->d->c, id, name, len, uid, strlen(uid),
                                 info ? info : "", info ? strlen(info) : 0,
                                 &st);
    if (n < 0)
        sh->mem->oom = true;
    else
        arg_n(sh->mem, st ? st : "", st ? (size_t)n : 0);
    free(st);
    sh->n_m++;
}

static void view_one(void *ctx, unsigned app, const char *name, size_t len)
{
    struct srv_redis_dir *d = ctx;
    const char *id = hub_cluster_app_id(d->c, app);
    struct refresh *f;
    char *mchan = NULL;
    int n;

    if (!id || (n = asprintf(&mchan, "%s:m:%s:%.*s", hub_cluster_prefix(d->c),
                             id, (int)len, name)) < 0)
        return;
    if (d->confirmed_fn(d->r, mchan, (size_t)n)) {
        free(mchan);
        send_refresh(d, app, name, len);
        return;
    }
    f = calloc(1, sizeof(*f));
    if (!f || !(f->name = malloc(len + 1))) {
        free(f);
        free(mchan);
        return;
    }
    memcpy(f->name, name, len);
    f->name[len] = '\0';
    f->len = len;
    f->app = app;
    f->mchan = mchan;
    f->mlen = (size_t)n;
    f->next = d->refresh;
    d->refresh = f;
}

/* The online share for REJOIN (docs/SCALING.md, "Watchlists and online
 * state"): per user (app id, uid, n ids, ids...) in args, the argument
 * ranges in ent. */
struct oshare {
    struct srv_redis_dir *d;
    struct call *args;             /* argument list only */
    struct oent {
        unsigned app;
        int at, n;                 /* args->argv[at .. at + n) */
    } *ent;
    size_t n, cap;
    bool oom;
};

static void share_online(void *ctx, unsigned app, const char *id,
                         const char *const *ids, size_t n)
{
    struct oshare *os = ctx;
    const char *aid = hub_cluster_app_id(os->d->c, app);
    int at = os->args->argc;

    if (!aid || os->oom)
        return;
    if (os->n == os->cap) {
        size_t cap = os->cap ? os->cap * 2 : 64;
        struct oent *v = realloc(os->ent, cap * sizeof(*v));

        if (!v) {
            os->oom = true;
            return;
        }
        os->ent = v;
        os->cap = cap;
    }
    arg(os->args, aid);
    arg(os->args, id);
    argf(os->args, "%zu", n);
    for (size_t i = 0; i < n; i++)
        arg(os->args, ids[i]);
    if (os->args->oom) {
        os->oom = true;
        return;
    }
    os->ent[os->n++] = (struct oent){ app, at, os->args->argc - at };
}

/* The online half of a REJOIN, right after the directory's chunks (the
 * first of which moved the old share aside): chunks of at most
 * SRV_REJOIN_CHUNK users (and about 8 * SRV_REJOIN_CHUNK arguments), then
 * each user's resync once its channel is confirmed. */
static void rejoin_online(struct srv_redis_dir *d)
{
    struct oshare os = { d, calloc(1, sizeof(struct call)), NULL, 0, 0,
                         false };
    size_t i = 0;

    if (!os.args) {
        d->rj.failed = true;
        return;
    }
    os.args->d = d;
    hub_cluster_online_snapshot(d->c, share_online, &os);
    if (os.oom)
        d->rj.failed = true;
    while (!d->rj.failed && i < os.n) {
        struct call *k = call_new(d, SRV_SCRIPT_ONLINE_REJOIN,
                                  P_ONLINE_REJOIN, NULL);
        size_t j = i;
        int nargs = 0;

        if (!k) {
            d->rj.failed = true;
            break;
        }
        while (j < os.n && j - i < SRV_REJOIN_CHUNK &&
               (j == i || nargs + os.ent[j].n <= 8 * SRV_REJOIN_CHUNK))
            nargs += os.ent[j++].n;
        k->gen = d->rj.gen;
        arg(k, "0");
        arg(k, hub_cluster_prefix(d->c));
        arg(k, d->node);
        argf(k, "%zu", j - i);
        for (; i < j; i++)
            for (int a = 0; a < os.ent[i].n; a++)
                arg_n(k, os.args->argv[os.ent[i].at + a],
                      os.args->argvlen[os.ent[i].at + a]);
        d->rj.chunks++;
        d->rj.left++;
        call_send(k); /* a failure here counts down at once */
    }
    /* The resyncs: every user's watched users as Redis has them after the
     * chunks (a user swept away later gets its offline edge after this). */
    for (i = 0; !d->rj.failed && i < os.n; i++) {
        struct hub_cluster_op *op = hub_cluster_online_state_op(
            d->c, os.ent[i].app, os.args->argv[os.ent[i].at + 1]);

        if (op && !online_in(d, op))
            hub_cluster_op_free(op);
    }
    free(os.ent);
    call_free(os.args);
}

/* The next step of the REJOIN in progress, once its chunks are all
 * answered: one sweep step while the old share has a rest, then the end
 * (the one log line, the views' lists). */
static void rejoin_step(struct srv_redis_dir *d)
{
    struct call *k;

    if (!d->rj.sent_all || d->rj.left)
        return;
    if (!d->rj.failed && d->rj.tok) {
        k = call_new(d, SRV_SCRIPT_REJOIN_SWEEP, P_REJOIN_SWEEP, NULL);
        if (k) {
            k->gen = d->rj.gen;
            arg(k, "0");
            arg(k, hub_cluster_prefix(d->c));
            arg(k, d->node);
            arg(k, d->rj.tok);
            argf(k, "%d", SRV_REJOIN_CHUNK);
            call_send(k); /* its reply (or failure) steps again */
            return;
        }
        d->rj.failed = true;
    }
    d->rj.sent_all = false; /* ended: nothing steps it again */
    free(d->rj.tok);
    d->rj.tok = NULL;
    if (d->rj.failed) {
        srv_log(HUB_LOG_WARN, 0,
                "backplane: rejoin of the directory incomplete (a script "
                "call of %u failed); the next reconnect rejoins again",
                d->rj.chunks);
    } else {
        HUB_STAT_ADD(d->st->rejoins, 1);
        srv_log(HUB_LOG_INFO, 0,
                "backplane: rejoined the directory: %lld subscriptions on "
                "%lld channels, %lld presence members (%lld users appeared, "
                "%lld left cluster-wide)",
                d->rj.tot[0], d->rj.tot[1], d->rj.tot[2], d->rj.tot[3],
                d->rj.tot[4]);
        if (d->rj.on[0])
            srv_log(HUB_LOG_INFO, 0,
                    "backplane: rejoined online state: %lld signed-in "
                    "users (%lld came online cluster-wide)",
                    d->rj.on[0], d->rj.on[1]);
        /* The totals moved: subscription counts are read anew. */
        hub_cluster_counts_refresh(d->c);
    }
    /* Then every view's list, once its member channel is confirmed: after
     * the sweep, so that no list still has a member the sweep removes. */
    hub_cluster_views(d->c, view_one, d);
}

void srv_redis_dir_rejoin_now(struct srv_redis_dir *d)
{
    struct share sh = { d, calloc(1, sizeof(struct call)),
                       calloc(1, sizeof(struct call)), 0, 0 };
    long long is = 0, im = 0;
    bool first = true;

    /* A REJOIN still in progress is forgotten (its token is reaped once
     * its lock lapses); this one starts from the share as it is now. */
    d->rj.gen++;
    d->rj.chunks = d->rj.left = 0;
    d->rj.sent_all = d->rj.failed = false;
    memset(d->rj.tot, 0, sizeof(d->rj.tot));
    memset(d->rj.on, 0, sizeof(d->rj.on));
    free(d->rj.tok);
    d->rj.tok = NULL;
    refresh_clear(d);
    if (!d->cmd_fn(d->r) || !sh.subs || !sh.mem) {
        free(sh.subs);
        free(sh.mem);
        return;
    }
    sh.subs->d = sh.mem->d = d;
    hub_cluster_dir_snapshot(d->c, share_chan, share_member, &sh);
    if (sh.subs->oom || sh.mem->oom)
        d->rj.failed = true;
    /* Views whose first subscriber came while Redis was away get one;
     * every view takes the next list whatever its sequence. */
    hub_cluster_views_seed(d->c);
    hub_cluster_views_stale(d->c);
    /* The chunks go out back to back on the command connection, before
     * any later op of this node: to this node's own joins and leaves they
     * are one step, as the single script was. */
    while (!d->rj.failed && (first || is < sh.n_s || im < sh.n_m)) {
        long long ns = sh.n_s - is, nm;
        struct call *k = call_new(d, SRV_SCRIPT_REJOIN, P_REJOIN, NULL);

        if (!k) {
            d->rj.failed = true;
            break;
        }
        if (ns > SRV_REJOIN_CHUNK)
            ns = SRV_REJOIN_CHUNK;
        nm = sh.n_m - im;
        if (nm > SRV_REJOIN_CHUNK - ns)
            nm = SRV_REJOIN_CHUNK - ns;
        k->gen = d->rj.gen;
        arg(k, "0");
        arg(k, hub_cluster_prefix(d->c));
        arg(k, d->node);
        arg(k, first ? "1" : "0");
        argf(k, "%lld", ns);
        for (long long i = 2 * is; i < 2 * (is + ns); i++)
            arg_n(k, sh.subs->argv[i], sh.subs->argvlen[i]);
        argf(k, "%lld", nm);
        for (long long i = 4 * im; i < 4 * (im + nm); i++)
            arg_n(k, sh.mem->argv[i], sh.mem->argvlen[i]);
        is += ns;
        im += nm;
        first = false;
        d->rj.chunks++;
        d->rj.left++;
        call_send(k); /* a failure here counts down at once */
    }
    call_free(sh.subs);
    call_free(sh.mem);
    if (!d->rj.failed)
        rejoin_online(d);
    d->rj.sent_all = true;
    rejoin_step(d);
}

void srv_redis_dir_up(struct srv_redis_dir *d)
{
    redisAsyncContext *cmd = d->cmd_fn(d->r);

    if (!cmd)
        return;
    d->load_gen++;
    for (int i = 0; i < SRV_SCRIPT_N; i++) {
        struct load *l = malloc(sizeof(*l));

        d->sha[i][0] = '\0';
        if (!l)
            continue;
        *l = (struct load){ d, i, d->load_gen };
        if (redisAsyncCommand(cmd, load_cb, l, "SCRIPT LOAD %s",
                              script_text[i]) != REDIS_OK)
            free(l);
    }
    /* The snapshot brings the directory up, under the same lock: from it
     * on joins are sent; made before it, they are in it and the local
     * engine told their edges (hub_cluster_dir_snapshot). Raising the flag
     * here, before the snapshot, lost the webhooks of a join made in
     * between. After: up even when the REJOIN could not start (out of
     * memory before its snapshot), as before. */
    srv_redis_dir_rejoin_now(d);
    hub_cluster_dir_set_up(d->c, true);
}
