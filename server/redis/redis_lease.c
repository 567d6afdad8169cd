/*
 * server/redis/redis_lease.c - the node lease and the reaper of
 * server/redis/redis_lease.h.
 */
#include "server/redis/redis_lease.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <ev.h>
#include "server/redis/redis_async.h"
#include <hiredis/hiredis.h>

#include "hub/app/apptab.h"
#include "hub/cluster/cluster.h"
#include "hub/loop/directory.h"
#include "hub/loop/loop.h"
#include "hub/base/rng.h"
#include "hub/loop/stats.h"
#include "hub/webhook/wh_stream.h"
#include "server/redis/redis_lua.h"
#include "server/lws/srv.h"

#define REAP_CHUNK "1000"           /* fields per reap script call */
#define LEAVE_DEADLINE_MS 2000      /* a clean stop waits at most this */

enum { S_TICK, S_REAP, S_LEAVE, S_N };

struct lapp {
    char *id;
    unsigned index;                /* the app's index in the hub */
    struct hub_app_live *live;
};

/* A claimed share being reaped, oldest first. */
struct reap {
    struct reap *next;
    char *dead, *token;
    uint64_t subs, mems;
    bool self;                     /* this node's own share */
    bool told;                     /* logged a failed step */
};

struct srv_redis_lease {
    char *node_id, *prefix;
    char epoch[17];
    uint64_t rng;                  /* tick jitter */
    uint64_t lease_ms;
    char lease_txt[24];
    struct hub_cluster *cluster;
    struct hub_backplane_stats *st;
    struct srv_redis *redis;
    void (*rejoin)(struct srv_redis *r);
    /* The apps whose connections the tick counts: those at start, then
     * each one a reload adds (srv_redis_lease_app_added, main thread), appended
     * only, so a tick's reply matches the list it was sent with. apps_mu
     * guards the array; the backplane thread holds it while it reads. */
    pthread_mutex_t apps_mu;
    struct lapp *apps;
    unsigned n_apps, cap_apps;

    struct ev_loop *loop;
    struct srv_redis_async *cmd; /* NULL while down */
    ev_timer tick_w, leave_w;
    bool registered;               /* a tick was answered in this run */
    bool tick_out;                 /* a tick awaits its reply */
    bool first_tick;               /* it is the first on this connection */
    bool ever_up;                  /* a connection came up in this run */
    double grace_until;            /* no reaping before (ev_now; after a
                                      reconnect) */
    bool reap_out;                 /* a reap step awaits its reply */
    bool failing;                  /* logged a failed renewal */
    char sha[S_N][41];             /* "" until SCRIPT LOAD answered */
    struct reap *q;

    bool leaving;
    void (*leave_done)(void *ctx);
    void *leave_ctx;
};

static const char *const lua_text[S_N] = {
    [S_TICK] = srv_redis_lua_lease_tick,
    [S_REAP] = srv_redis_lua_lease_reap,
    [S_LEAVE] = srv_redis_lua_lease_leave,
};

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents);
static void leave_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents);

struct srv_redis_lease *
srv_redis_lease_create(const struct srv_redis_lease_cfg *cfg)
{
    struct srv_redis_lease *l = calloc(1, sizeof(*l));
    const struct hub_apptab *t = hub_apps(cfg->hub);
    uint64_t e = 0;

    if (!l)
        return NULL;
    l->node_id = strdup(cfg->node_id);
    l->prefix = strdup(cfg->prefix);
    pthread_mutex_init(&l->apps_mu, NULL);
    l->cap_apps = t->n ? t->n : 1;
    l->apps = calloc(l->cap_apps, sizeof(*l->apps));
    if (!l->node_id || !l->prefix || !l->apps)
        goto fail;
    /* The apps at start (main thread, before the loops run: the table is
     * stable). Their live structs last for the hub. */
    for (unsigned i = 0; i < t->n; i++) {
        if (!t->apps[i])
            continue;
        l->apps[l->n_apps].id = strdup(t->apps[i]->id);
        l->apps[l->n_apps].live = t->live[i];
        l->apps[l->n_apps].index = i;
        if (!l->apps[l->n_apps].id)
            goto fail;
        l->n_apps++;
    }
    if (getrandom(&e, sizeof(e), 0) != sizeof(e))
        e = (uint64_t)(uintptr_t)l ^ 0x9e3779b97f4a7c15ull;
    snprintf(l->epoch, sizeof(l->epoch), "%016" PRIx64, e);
    l->rng = e | 1;
    l->lease_ms = cfg->lease_ms;
    snprintf(l->lease_txt, sizeof(l->lease_txt), "%" PRIu64, l->lease_ms);
    l->cluster = cfg->cluster;
    l->st = cfg->st;
    l->redis = cfg->redis;
    l->rejoin = cfg->rejoin;
    ev_timer_init(&l->tick_w, tick_cb, 0., (double)l->lease_ms / 3000.0);
    l->tick_w.data = l;
    ev_timer_init(&l->leave_w, leave_timeout_cb, 0., 0.);
    l->leave_w.data = l;
    return l;
fail:
    srv_redis_lease_destroy(l);
    return NULL;
}

static void q_pop(struct srv_redis_lease *l)
{
    struct reap *x = l->q;

    if (!x)
        return;
    l->q = x->next;
    free(x->dead);
    free(x->token);
    free(x);
}

int srv_redis_lease_app_added(struct srv_redis_lease *l, unsigned index,
                              const char *id, struct hub_app_live *live)
{
    char *copy;
    int rc = 0;

    if (!l)
        return 0;
    copy = strdup(id);
    if (!copy)
        return -ENOMEM;
    /* Only after a successful publish, and a published table never
     * gives an index to a second app: index is new here. */
    pthread_mutex_lock(&l->apps_mu);
    if (l->n_apps == l->cap_apps) {
        struct lapp *a = realloc(l->apps, 2 * l->cap_apps * sizeof(*a));

        if (!a) {
            free(copy);
            rc = -ENOMEM;
            goto out;
        }
        l->apps = a;
        l->cap_apps *= 2;
    }
    l->apps[l->n_apps++] = (struct lapp){ copy, index, live };
out:
    pthread_mutex_unlock(&l->apps_mu);
    return rc;
}

void srv_redis_lease_destroy(struct srv_redis_lease *l)
{
    if (!l)
        return;
    while (l->q)
        q_pop(l);
    for (unsigned i = 0; i < l->n_apps; i++)
        free(l->apps[i].id);
    free(l->apps);
    pthread_mutex_destroy(&l->apps_mu);
    free(l->node_id);
    free(l->prefix);
    free(l);
}

/* Is this reply for the current connection (not one being freed)? */
static bool ours(struct srv_redis_lease *l, struct srv_redis_async *ac,
                 void *reply)
{
    return reply && ac && srv_redis_async_data(ac) && l->cmd && ac == l->cmd;
}

static bool is_str(const redisReply *e)
{
    return e && (e->type == REDIS_REPLY_STRING ||
                 e->type == REDIS_REPLY_STATUS) && e->str;
}

static bool str_is(const redisReply *e, const char *s)
{
    return is_str(e) && e->len == strlen(s) && !memcmp(e->str, s, e->len);
}

static uint64_t int_of(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER && e->integer > 0
               ? (uint64_t)e->integer : 0;
}

/* Scripts. */

struct load_req {
    struct srv_redis_lease *l;
    unsigned k;
};

static void load_reply(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct load_req *q = priv;
    struct srv_redis_lease *l = q->l;
    redisReply *rep = reply;

    if (ours(l, ac, reply) && is_str(rep) && rep->len == 40) {
        memcpy(l->sha[q->k], rep->str, 40);
        l->sha[q->k][40] = '\0';
    }
    free(q);
}

/* SCRIPT LOAD of script k; its SHA is used once the answer came. */
static void send_load(struct srv_redis_lease *l, unsigned k)
{
    struct load_req *q = malloc(sizeof(*q));

    if (!q)
        return;
    q->l = l;
    q->k = k;
    if (srv_redis_async_cmd(l->cmd, load_reply, q, "SCRIPT LOAD %s",
                            lua_text[k]) != 0)
        free(q);
}

static void send_loads(struct srv_redis_lease *l)
{
    for (unsigned k = 0; k < S_N; k++)
        send_load(l, k);
}

/* EVALSHA k (EVAL until its SHA is known) with "0" keys and argv. */
static int run_script(struct srv_redis_lease *l, unsigned k,
                      srv_redis_async_fn *fn, void *priv, int argc,
                      const char **argv)
{
    const char **av = malloc((size_t)(argc + 3) * sizeof(*av));
    size_t *al = malloc((size_t)(argc + 3) * sizeof(*al));
    int n = 0, rc = -1;

    if (!l->cmd || !av || !al)
        goto out;
    if (l->sha[k][0]) {
        av[n] = "EVALSHA";
        al[n++] = 7;
        av[n] = l->sha[k];
        al[n++] = 40;
    } else {
        av[n] = "EVAL";
        al[n++] = 4;
        av[n] = lua_text[k];
        al[n++] = strlen(lua_text[k]);
    }
    av[n] = "0";
    al[n++] = 1;
    for (int i = 0; i < argc; i++, n++) {
        av[n] = argv[i];
        al[n] = strlen(argv[i]);
    }
    rc = srv_redis_async_argv(l->cmd, fn, priv, n, av, al) == 0 ? 0 : -1;
out:
    free(av);
    free(al);
    return rc;
}

/* A NOSCRIPT error (SCRIPT FLUSH, a restarted Redis): EVAL next time. */
static void check_noscript(struct srv_redis_lease *l, unsigned k,
                           const redisReply *rep)
{
    if (rep->type == REDIS_REPLY_ERROR && rep->str &&
        !strncmp(rep->str, "NOSCRIPT", 8)) {
        /* Redis lost its scripts (SCRIPT FLUSH, or a restart the
         * connection outlived): EVAL until the new SHA is in. */
        l->sha[k][0] = '\0';
        if (l->cmd)
            send_load(l, k);
    }
}

/* The reaper. */

static void reap_next(struct srv_redis_lease *l);

static void report_edges(struct srv_redis_lease *l, const redisReply *ed)
{
    for (size_t i = 0; ed && i + 3 < ed->elements; i += 4) {
        const redisReply *k = ed->element[i], *a = ed->element[i + 1],
                         *c = ed->element[i + 2], *u = ed->element[i + 3];
        struct hub_dir_edge e;
        int app;
        char *uid;

        if (!is_str(k) || !is_str(a) || !is_str(c) || !is_str(u))
            continue;
        /* By the cluster's ids, which a reload extends: an app added
         * since the start is found too. An app this node never had (a
         * reload added it elsewhere): its webhooks are another node's. */
        app = hub_cluster_app_index(l->cluster, a->str, a->len);
        if (app < 0 || !(uid = strndup(u->str, u->len)))
            continue;
        e = (struct hub_dir_edge){
            .kind = k->str[0] == 'r' ? HUB_DIR_MEMBER_LAST
                                     : HUB_DIR_CHANNEL_LAST,
            .app = (unsigned)app,
            .name = c->str,
            .len = c->len,
            .user_id = k->str[0] == 'r' ? uid : NULL,
        };
        hub_cluster_report_edge(l->cluster, &e);
        free(uid);
    }
}

static void reap_done(struct srv_redis_lease *l, struct reap *x)
{
    unsigned long long s = x->subs, m = x->mems;

    if (l->leaving && x->self) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "redis_lease",
                                .reason = "deregistered"),
                      "backplane: node %s deregistered; removed "
                      "its %llu subscriptions and %llu members", l->node_id, s, m);
    } else if (x->self) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "redis_lease",
                                .reason = "reaped_earlier_run"),
                      "backplane: removed what an earlier run of "
                      "node %s left: %llu subscriptions and %llu members",
                      l->node_id, s, m);
    } else {
        HUB_STAT_ADD(l->st->reaped, 1);
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "redis_lease", .reason = "reaped"),
                      "backplane: node %s lease expired; removed "
                      "its %llu subscriptions and %llu members", x->dead, s, m);
    }
}

static void leave_finish(struct srv_redis_lease *l);

static void reap_reply(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis_lease *l = priv;
    redisReply *rep = reply;
    struct reap *x = l->q;
    bool self;

    if (!ours(l, ac, reply))
        return;
    l->reap_out = false;
    if (!x)
        return;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 4 ||
        !is_str(rep->element[0])) {
        check_noscript(l, S_REAP, rep);
        /* Kept: the next tick tries again (this node still holds the
         * token's lock for 30 s; after that any node resumes it). */
        if (!x->told)
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "redis_lease",
                                    .reason = "reap_failed"),
                          "backplane: reaping %s failed (%s); "
                          "retrying each tick", x->dead,
                          rep->type == REDIS_REPLY_ERROR && rep->str ? rep->str
                          : "bad reply");
        x->told = true;
        return;
    }
    x->subs += int_of(rep->element[1]);
    x->mems += int_of(rep->element[2]);
    if (rep->element[3]->type == REDIS_REPLY_ARRAY)
        report_edges(l, rep->element[3]);
    if (str_is(rep->element[0], "more") && !(l->leaving && !x->self)) {
        reap_next(l);
        return;
    }
    if (str_is(rep->element[0], "done"))
        reap_done(l, x);
    /* "lost": another node resumed it; a stop abandons others' tokens
     * (their locks expire and a survivor resumes them). */
    self = x->self;
    q_pop(l);
    if (l->leaving && self) {
        leave_finish(l);
        return;
    }
    reap_next(l);
}

/* Send the head token's next step, if none is out. */
static void reap_next(struct srv_redis_lease *l)
{
    struct reap *x = l->q;
    const char **av;
    char delay[24], bound[24];
    uint64_t d = 0;
    unsigned span;
    int n = 6;

    if (!x || l->reap_out || !l->cmd)
        return;
    span = hub_cluster_app_span(l->cluster);
    av = calloc(6 + (size_t)span, sizeof(*av));
    if (!av)
        return;                    /* the next tick tries again */
    av[0] = l->prefix;
    av[1] = l->node_id;
    av[2] = x->token;
    av[3] = REAP_CHUNK;
    /* The apps whose closing edges the script queues for the webhooks:
     * those of the current configuration (the set each reload publishes,
     * hub_cluster_set_wh), by the cluster's ids, which outlive it. */
    for (unsigned i = 0; i < span; i++) {
        const char *id;

        if (hub_cluster_wh_redis(l->cluster, i, &d) &&
            (id = hub_cluster_app_id(l->cluster, i)))
            av[n++] = id;
    }
    snprintf(delay, sizeof(delay), "%" PRIu64, d);
    snprintf(bound, sizeof(bound), "%u", hub_cluster_wh_max(l->cluster));
    av[4] = delay;
    av[5] = bound;
    if (run_script(l, S_REAP, reap_reply, l, n, av) == 0)
        l->reap_out = true;
    free(av);
}

static void q_push(struct srv_redis_lease *l, const char *dead, size_t dlen,
                   const char *tok, size_t tlen, bool self)
{
    struct reap *x = calloc(1, sizeof(*x)), **p;

    if (!x || !(x->dead = strndup(dead, dlen)) ||
        !(x->token = strndup(tok, tlen))) {
        /* Out of memory: the token's lock expires, a node resumes it. */
        if (x) {
            free(x->dead);
            free(x);
        }
        return;
    }
    x->self = self;
    for (p = &l->q; *p; p = &(*p)->next)
        ;
    *p = x;
}

/* The tick. */

static void tick_reply(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis_lease *l = priv;
    redisReply *rep = reply;
    const redisReply *sums, *cl;
    bool first;

    if (!ours(l, ac, reply))
        return;
    l->tick_out = false;
    first = l->first_tick;
    l->first_tick = false;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 4 ||
        !is_str(rep->element[0]) ||
        rep->element[2]->type != REDIS_REPLY_ARRAY ||
        rep->element[3]->type != REDIS_REPLY_ARRAY) {
        check_noscript(l, S_TICK, rep);
        HUB_STAT_ADD(l->st->lease_failures, 1);
        if (!l->failing)
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "redis_lease",
                                    .reason = "renew_failed"),
                          "backplane: lease renewal failed (%s)",
                          rep->type == REDIS_REPLY_ERROR && rep->str ? rep->str
                          : "bad reply");
        l->failing = true;
        return;
    }
    if (l->failing)
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "redis_lease", .reason = "renewed"),
                      "backplane: lease renewed again");
    l->failing = false;
    if (str_is(rep->element[0], "reaped")) {
        HUB_STAT_ADD(l->st->lease_lost, 1);
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_lease", .reason = "lost"),
                      "backplane: this node (%s) was reaped while "
                      "away (its lease expired, or Redis lost its keys); "
                      "re-registering what it has", l->node_id);
        /* The first tick on a connection is followed there by the
         * directory's own REJOIN (it runs on every connect). */
        if (l->rejoin && !first)
            l->rejoin(l->redis);
    }
    l->registered = true;
    HUB_STAT_SET(l->st->nodes, int_of(rep->element[1]));
    sums = rep->element[2];
    pthread_mutex_lock(&l->apps_mu);
    for (size_t i = 0; i < sums->elements && i < l->n_apps; i++)
        atomic_store_explicit(&l->apps[i].live->remote_sessions,
                              (uint_fast32_t)int_of(sums->element[i]),
                              memory_order_relaxed);
    pthread_mutex_unlock(&l->apps_mu);
    cl = rep->element[3];
    for (size_t i = 0; i + 1 < cl->elements; i += 2) {
        const redisReply *d = cl->element[i], *t = cl->element[i + 1];
        bool self;

        if (!is_str(d) || !is_str(t))
            continue;
        self = d->len == strlen(l->node_id) &&
               !memcmp(d->str, l->node_id, d->len);
        q_push(l, d->str, d->len, t->str, t->len, self);
    }
    reap_next(l);
}

static void send_tick(struct srv_redis_lease *l)
{
    const char **av;
    char (*counts)[24];
    char nabuf[16];
    unsigned n = 0;

    if (!l->cmd || l->leaving)
        return;
    if (l->tick_out) {
        /* The last one is still unanswered: Redis is slow. */
        HUB_STAT_ADD(l->st->lease_failures, 1);
        return;
    }
    pthread_mutex_lock(&l->apps_mu); /* the ids until the call copied them */
    av = malloc((7 + 2 * (size_t)l->n_apps) * sizeof(*av));
    counts = malloc((l->n_apps ? l->n_apps : 1) * sizeof(*counts));
    if (!av || !counts) {
        pthread_mutex_unlock(&l->apps_mu);
        free(av);
        free(counts);
        HUB_STAT_ADD(l->st->lease_failures, 1);
        return;
    }
    av[n++] = l->prefix;
    av[n++] = l->node_id;
    av[n++] = l->epoch;
    av[n++] = l->lease_txt;
    av[n++] = l->registered ? "1" : "0";
    snprintf(nabuf, sizeof(nabuf), "%u", l->n_apps);
    av[n++] = nabuf;
    for (unsigned i = 0; i < l->n_apps; i++) {
        snprintf(counts[i], sizeof(counts[i]), "%lu",
                 (unsigned long)atomic_load_explicit(
                     &l->apps[i].live->sessions, memory_order_relaxed));
        av[n++] = l->apps[i].id;
        av[n++] = counts[i];
    }
    av[n++] = ev_now(l->loop) < l->grace_until ? "0" : "1";
    if (run_script(l, S_TICK, tick_reply, l, (int)n, av) == 0)
        l->tick_out = true;
    pthread_mutex_unlock(&l->apps_mu);
    free(av);
    free(counts);
    reap_next(l); /* a step that failed earlier */
}

/* The next tick in 75..100 % of lease/3: nodes started together would
 * otherwise look for a dead node's key in step with its last renewal,
 * just before it expires, and find it a whole tick late. Renewals only
 * come sooner, never later. */
static double next_tick_s(struct srv_redis_lease *l)
{
    double r = (double)(hub_xorshift64s(&l->rng) % 1000) / 1000.0;

    return (double)l->lease_ms / 3000.0 * (0.75 + 0.25 * r);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct srv_redis_lease *l = w->data;

    (void)revents;
    send_tick(l);
    w->repeat = next_tick_s(l);
    ev_timer_again(loop, w);
}

void srv_redis_lease_up(struct srv_redis_lease *l, struct ev_loop *loop,
                        struct srv_redis_async *cmd)
{
    if (!l)
        return;
    l->loop = loop;
    l->cmd = cmd;
    l->tick_out = l->reap_out = false;
    l->first_tick = true;
    /* After a reconnect, one lease before judging others dead: they may
     * be coming back from the same outage (lease_tick.lua). */
    if (l->ever_up)
        l->grace_until = ev_now(loop) + (double)l->lease_ms / 1000.0;
    l->ever_up = true;
    for (unsigned k = 0; k < S_N; k++)
        l->sha[k][0] = '\0';
    /* First: a first registration claims an earlier run's state before
     * this run's own joins reach Redis (same connection, in order). */
    send_tick(l);
    send_loads(l);
    l->tick_w.repeat = next_tick_s(l);
    ev_timer_again(loop, &l->tick_w);
}

static void finish_cb(struct ev_loop *loop, ev_timer *w, int revents);

void srv_redis_lease_down(struct srv_redis_lease *l)
{
    if (!l || !l->loop)
        return;
    l->cmd = NULL;
    l->tick_out = l->reap_out = false;
    ev_timer_stop(l->loop, &l->tick_w);
    /* Tokens are not lost: their locks expire and a node resumes them. */
    while (l->q)
        q_pop(l);
    /* Without Redis every node counts its own connections. */
    pthread_mutex_lock(&l->apps_mu);
    for (unsigned i = 0; i < l->n_apps; i++)
        atomic_store_explicit(&l->apps[i].live->remote_sessions, 0,
                              memory_order_relaxed);
    pthread_mutex_unlock(&l->apps_mu);
    if (l->leaving && l->leave_done) {
        /* Not from inside go_down: finish on the next loop iteration. */
        ev_timer_stop(l->loop, &l->leave_w);
        ev_timer_init(&l->leave_w, finish_cb, 0., 0.);
        l->leave_w.data = l;
        ev_timer_start(l->loop, &l->leave_w);
    }
}

/* A clean stop. */

static void leave_finish(struct srv_redis_lease *l)
{
    void (*done)(void *) = l->leave_done;

    if (!done)
        return;
    l->leave_done = NULL;
    ev_timer_stop(l->loop, &l->leave_w);
    ev_timer_stop(l->loop, &l->tick_w);
    done(l->leave_ctx);
}

static void finish_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    leave_finish(w->data);
}

static void leave_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct srv_redis_lease *l = w->data;

    (void)loop;
    (void)revents;
    srv_log_event(HUB_LOG_WARN, 0,
                  HUB_LOG_F(.event = "redis_lease", .reason = "leave_timeout"),
                  "backplane: deregistration unfinished after "
                  "%d ms; the other nodes finish it", LEAVE_DEADLINE_MS);
    leave_finish(l);
}

static void leave_reply(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis_lease *l = priv;
    redisReply *rep = reply;

    if (!ours(l, ac, reply))
        return;
    if (!is_str(rep)) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_lease",
                                .reason = "leave_failed"),
                      "backplane: cannot deregister (%s); the "
                      "other nodes reap this node when its lease expires",
                      rep->type == REDIS_REPLY_ERROR && rep->str ? rep->str
                      : "bad reply");
        leave_finish(l);
        return;
    }
    q_push(l, l->node_id, strlen(l->node_id), rep->str, rep->len, true);
    if (!l->q) {
        leave_finish(l);
        return;
    }
    reap_next(l);
}

bool srv_redis_lease_leave(struct srv_redis_lease *l, void (*done)(void *ctx),
                           void *ctx)
{
    const char **av;
    char nabuf[16];
    unsigned n = 0;
    int rc;

    if (!l || !l->cmd || !l->registered || l->leaving)
        return false;
    pthread_mutex_lock(&l->apps_mu);
    av = malloc((3 + (size_t)l->n_apps) * sizeof(*av));
    if (!av) {
        pthread_mutex_unlock(&l->apps_mu);
        return false;
    }
    av[n++] = l->prefix;
    av[n++] = l->node_id;
    snprintf(nabuf, sizeof(nabuf), "%u", l->n_apps);
    av[n++] = nabuf;
    for (unsigned i = 0; i < l->n_apps; i++)
        av[n++] = l->apps[i].id;
    rc = run_script(l, S_LEAVE, leave_reply, l, (int)n, av);
    pthread_mutex_unlock(&l->apps_mu);
    free(av);
    if (rc)
        return false;
    l->leaving = true;
    l->leave_done = done;
    l->leave_ctx = ctx;
    ev_timer_stop(l->loop, &l->tick_w);
    /* Other nodes' tokens are abandoned (their locks expire and a
     * survivor resumes them); one with a step out is dropped when its
     * reply comes (reap_reply), and the self token goes behind it. */
    if (l->q) {
        struct reap *keep = l->reap_out ? l->q : NULL;

        if (keep)
            l->q = keep->next;
        while (l->q)
            q_pop(l);
        if (keep) {
            keep->next = NULL;
            l->q = keep;
        }
    }
    ev_timer_init(&l->leave_w, leave_timeout_cb,
                  (double)LEAVE_DEADLINE_MS / 1000.0, 0.);
    l->leave_w.data = l;
    ev_timer_start(l->loop, &l->leave_w);
    return true;
}
