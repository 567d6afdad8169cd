/*
 * server/redis/redis_dir_rejoin.c - REJOIN (server/redis/redis_dir_rejoin.h,
 * docs/SCALING.md): this node's share in Redis replaced by what its
 * directory really has, in chunks of SRV_REJOIN_CHUNK fields sent back to
 * back (server/redis/lua/dir_rejoin.lua), then the online share
 * (online_rejoin.lua) and each signed-in user's resync, then the sweep of
 * the old share's rest (dir_rejoin_sweep.lua), one log line, and every
 * presence view's list read again.
 *
 * Thread: the backplane thread only.
 */
#include "server/redis/redis_dir_rejoin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/stats.h"
#include "server/redis/redis_dir_int.h"
#include "server/redis/redis_dir_ops.h"
#include "server/redis/redis_ready.h"
#include "server/lws/srv.h"

static void rejoin_step(struct srv_redis_dir *d);

/* One REJOIN chunk answered (or not: the REJOIN failed): its totals
 * added. */
static void rejoin_done(struct srv_redis_call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (k->gen != d->rj.gen)
        return;
    d->rj.left--;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 6 ||
        !srv_redis_call_is_bulk(rep->element[5])) {
        d->rj.failed = true;
    } else {
        for (int i = 0; i < 5; i++)
            if (!srv_redis_call_is_int(rep->element[i]))
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
static void sweep_done(struct srv_redis_call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;
    const redisReply *st;

    if (k->gen != d->rj.gen)
        return;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        !srv_redis_call_is_bulk(st = rep->element[0]) ||
        !srv_redis_call_is_int(rep->element[1])) {
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

/* A chunk of the online REJOIN answered: {users, appeared}. */
static void online_rejoin_done(struct srv_redis_call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (k->gen != d->rj.gen)
        return;
    d->rj.left--;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        !srv_redis_call_is_int(rep->element[0]) ||
        !srv_redis_call_is_int(rep->element[1])) {
        d->rj.failed = true;
    } else {
        d->rj.on[0] += rep->element[0]->integer;
        d->rj.on[1] += rep->element[1]->integer;
    }
    rejoin_step(d);
}

/* REJOIN: the share as the wrapped directory has it. */
struct share {
    struct srv_redis_dir *d;
    struct srv_redis_call *subs, *mem; /* argument lists only */
    long long n_s, n_m;
};

static void share_chan(void *ctx, unsigned app, const char *name, size_t len,
                       uint32_t subs)
{
    struct share *sh = ctx;
    const char *id = hub_cluster_app_id(sh->d->c, app);

    if (!id || (len && name[0] == '#'))
        return;
    srv_redis_call_field(sh->subs, id, name, len, NULL);
    srv_redis_call_argf(sh->subs, "%u", (unsigned)subs);
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

    srv_redis_call_field(sh->mem, id, name, len, uid);
    srv_redis_call_argf(sh->mem, "%u", (unsigned)conns);
    srv_redis_call_arg(sh->mem, info ? info : "");
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
        srv_redis_call_arg_n(sh->mem, st ? st : "", st ? (size_t)n : 0);
    free(st);
    sh->n_m++;
}

/* The online share for REJOIN (docs/SCALING.md, "Watchlists and online
 * state"): per user (app id, uid, n ids, ids...) in args, the argument
 * ranges in ent. */
struct oshare {
    struct srv_redis_dir *d;
    struct srv_redis_call *args; /* argument list only */
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
    srv_redis_call_arg(os->args, aid);
    srv_redis_call_arg(os->args, id);
    srv_redis_call_argf(os->args, "%zu", n);
    for (size_t i = 0; i < n; i++)
        srv_redis_call_arg(os->args, ids[i]);
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
    struct oshare os = {
        d, calloc(1, sizeof(struct srv_redis_call)), NULL, 0, 0, false};
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
        struct srv_redis_call *k = srv_redis_call_new(
            &d->calls, d, SRV_SCRIPT_ONLINE_REJOIN, online_rejoin_done, NULL);
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
        srv_redis_call_arg(k, "0");
        srv_redis_call_arg(k, hub_cluster_prefix(d->c));
        srv_redis_call_arg(k, d->node);
        srv_redis_call_argf(k, "%zu", j - i);
        for (; i < j; i++)
            for (int a = 0; a < os.ent[i].n; a++)
                srv_redis_call_arg_n(k, os.args->argv[os.ent[i].at + a],
                                     os.args->argvlen[os.ent[i].at + a]);
        d->rj.chunks++;
        d->rj.left++;
        srv_redis_call_send(k); /* a failure here counts down at once */
    }
    /* The resyncs: every user's watched users as Redis has them after the
     * chunks (a user swept away later gets its offline edge after this). */
    for (i = 0; !d->rj.failed && i < os.n; i++) {
        struct hub_cluster_op *op = hub_cluster_online_state_op(
            d->c, os.ent[i].app, os.args->argv[os.ent[i].at + 1]);

        if (op && !srv_redis_dir_online_in(d, op))
            hub_cluster_op_free(op);
    }
    free(os.ent);
    srv_redis_call_free(os.args);
}

/* The next step of the REJOIN in progress, once its chunks are all
 * answered: one sweep step while the old share has a rest, then the end
 * (the one log line, the views' lists). */
static void rejoin_step(struct srv_redis_dir *d)
{
    struct srv_redis_call *k;

    if (!d->rj.sent_all || d->rj.left)
        return;
    if (!d->rj.failed && d->rj.tok) {
        k = srv_redis_call_new(&d->calls, d, SRV_SCRIPT_REJOIN_SWEEP,
                               sweep_done, NULL);
        if (k) {
            k->gen = d->rj.gen;
            srv_redis_call_arg(k, "0");
            srv_redis_call_arg(k, hub_cluster_prefix(d->c));
            srv_redis_call_arg(k, d->node);
            srv_redis_call_arg(k, d->rj.tok);
            srv_redis_call_argf(k, "%d", SRV_REJOIN_CHUNK);
            srv_redis_call_send(k); /* its reply (or failure) steps again */
            return;
        }
        d->rj.failed = true;
    }
    d->rj.sent_all = false; /* ended: nothing steps it again */
    free(d->rj.tok);
    d->rj.tok = NULL;
    /* In sync (joined: /readyz's 200), or not until the next reconnect. */
    srv_redis_ready_synced(d->ready, !d->rj.failed, "a script call failed");
    if (d->rj.failed) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_rejoin",
                                .reason = "incomplete"),
                      "backplane: rejoin of the directory incomplete (a script "
                      "call of %u failed); the next reconnect rejoins again",
                      d->rj.chunks);
    } else {
        HUB_STAT_ADD(d->st->rejoins, 1);
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "redis_rejoin"),
                      "backplane: rejoined the directory: %lld subscriptions on "
                      "%lld channels, %lld presence members (%lld users appeared, "
                      "%lld left cluster-wide)",
                      d->rj.tot[0], d->rj.tot[1], d->rj.tot[2], d->rj.tot[3],
                      d->rj.tot[4]);
        if (d->rj.on[0])
            srv_log_event(HUB_LOG_INFO, 0,
                          HUB_LOG_F(.event = "redis_rejoin",
                                    .reason = "online"),
                          "backplane: rejoined online state: %lld signed-in "
                          "users (%lld came online cluster-wide)",
                          d->rj.on[0], d->rj.on[1]);
        /* The totals moved: subscription counts are read anew. */
        hub_cluster_counts_refresh(d->c);
    }
    /* Then every view's list, once its member channel is confirmed: after
     * the sweep, so that no list still has a member the sweep removes. */
    hub_cluster_views(d->c, srv_redis_dir_view, d);
}

void srv_redis_dir_rejoin_now(struct srv_redis_dir *d)
{
    struct share sh = {d, calloc(1, sizeof(struct srv_redis_call)),
                       calloc(1, sizeof(struct srv_redis_call)), 0, 0};
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
    srv_redis_dir_refresh_clear(d);
    srv_redis_ready_syncing(d->ready);
    if (!srv_redis_call_conn(&d->calls) || !sh.subs || !sh.mem) {
        /* Down: the next up rejoins; up: out of memory, as a failure. */
        if (srv_redis_call_conn(&d->calls))
            srv_redis_ready_synced(d->ready, false, "out of memory");
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
        struct srv_redis_call *k = srv_redis_call_new(
            &d->calls, d, SRV_SCRIPT_REJOIN, rejoin_done, NULL);

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
        srv_redis_call_arg(k, "0");
        srv_redis_call_arg(k, hub_cluster_prefix(d->c));
        srv_redis_call_arg(k, d->node);
        srv_redis_call_arg(k, first ? "1" : "0");
        srv_redis_call_argf(k, "%lld", ns);
        for (long long i = 2 * is; i < 2 * (is + ns); i++)
            srv_redis_call_arg_n(k, sh.subs->argv[i], sh.subs->argvlen[i]);
        srv_redis_call_argf(k, "%lld", nm);
        for (long long i = 4 * im; i < 4 * (im + nm); i++)
            srv_redis_call_arg_n(k, sh.mem->argv[i], sh.mem->argvlen[i]);
        is += ns;
        im += nm;
        first = false;
        d->rj.chunks++;
        d->rj.left++;
        srv_redis_call_send(k); /* a failure here counts down at once */
    }
    srv_redis_call_free(sh.subs);
    srv_redis_call_free(sh.mem);
    if (!d->rj.failed)
        rejoin_online(d);
    d->rj.sent_all = true;
    rejoin_step(d);
}
