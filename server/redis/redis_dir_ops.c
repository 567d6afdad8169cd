/*
 * server/redis/redis_dir_ops.c - the cluster-wide directory's ops
 * (server/redis/redis_dir_ops.h): JOIN, LEAVE and QUERY of
 * hub/cluster/cluster.h, and the ONLINE changes (signin, signout), each
 * run as its script (server/redis/redis_call.h) and answered back to the
 * cluster; joins and signins parked until Redis confirmed the SUBSCRIBE
 * of their channel, and nothing of a channel overtaking what is parked on
 * it; the presence views' lists read again once their member channel is
 * confirmed.
 *
 * Thread: the backplane thread only.
 */
#include "server/redis/redis_dir_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/stats.h"
#include "server/redis/redis_dir_int.h"

/* Replies. */

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

        if (!srv_redis_call_is_bulk(u) || !srv_redis_call_is_bulk(v) ||
            !u->len) {
            *bad = true;
            continue;
        }
        m[k++] = (struct hub_cluster_member){ u->str, v->str, u->len,
                                              v->len };
    }
    *n = k;
    return m;
}

/* A JOIN's {chan_first, member_first, cseq, members...} (first 3) or a
 * members read's {cseq, members...} (first 1). */
static void got_join(struct srv_redis_call *k, const redisReply *rep,
                     size_t first)
{
    struct srv_redis_dir *d = k->d;
    struct hub_cluster_member *m = NULL;
    size_t n = 0;
    bool bad = false;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < first ||
        !srv_redis_call_is_int(rep->element[0]) ||
        (first == 3 && (!srv_redis_call_is_int(rep->element[1]) ||
                        !srv_redis_call_is_int(rep->element[2])))) {
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

static void got_leave(struct srv_redis_call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
        !srv_redis_call_is_int(rep->element[0]) ||
        !srv_redis_call_is_int(rep->element[1])) {
        HUB_STAT_ADD(d->st->bad, 1);
        hub_cluster_dirop_free(k->dop);
    } else {
        hub_cluster_dir_left(d->c, k->dop, rep->element[0]->integer == 1,
                             rep->element[1]->integer == 1);
    }
    k->dop = NULL;
}

static void got_query(struct srv_redis_call *k, const redisReply *rep)
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

        if (rep->elements >= 2 && srv_redis_call_is_int(rep->element[0]) &&
            srv_redis_call_is_int(rep->element[1])) {
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

            if (!srv_redis_call_is_bulk(ch) || !srv_redis_call_is_int(u) ||
                memchr(ch->str, 0, ch->len))
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

            if (!srv_redis_call_is_bulk(u))
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

/* A signin's {edge, online, skipped} or a signout's {edge}. */
static void got_online(struct srv_redis_call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        !srv_redis_call_is_int(rep->element[0])) {
        HUB_STAT_ADD(d->st->bad, 1);
        return;
    }
    if (rep->element[0]->integer > 0)
        HUB_STAT_ADD(d->st->online_edges, 1);
    if (rep->elements >= 3 && srv_redis_call_is_int(rep->element[2]) &&
        rep->element[2]->integer > 0)
        HUB_STAT_ADD(d->st->watch_skipped,
                     (uint64_t)rep->element[2]->integer);
}

static void got_refresh(struct srv_redis_call *k, const redisReply *rep)
{
    struct srv_redis_dir *d = k->d;
    struct hub_cluster_member *m;
    size_t n;
    bool bad;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        !srv_redis_call_is_int(rep->element[0])) {
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

/* The calls' handlers: a reply, or none (rep NULL): then a JOIN, LEAVE or
 * QUERY is answered by the local engine, a signin or signout counts lost
 * (the next REJOIN's resync corrects what watchers show), a view keeps
 * its list. */

static void dir_local(struct srv_redis_call *k)
{
    hub_cluster_dir_local(k->d->c, k->dop);
    k->dop = NULL;
}

static void join_done(struct srv_redis_call *k, const redisReply *rep)
{
    if (rep)
        got_join(k, rep, 3);
    else
        dir_local(k);
}

/* A join already counted in the latest REJOIN: its members read. */
static void join_stale_done(struct srv_redis_call *k, const redisReply *rep)
{
    if (rep)
        got_join(k, rep, 1);
    else
        dir_local(k);
}

static void leave_done(struct srv_redis_call *k, const redisReply *rep)
{
    if (rep)
        got_leave(k, rep);
    else
        dir_local(k);
}

static void query_done(struct srv_redis_call *k, const redisReply *rep)
{
    if (rep)
        got_query(k, rep);
    else
        dir_local(k);
}

/* The script published what it decided. */
static void online_done(struct srv_redis_call *k, const redisReply *rep)
{
    if (rep)
        got_online(k, rep);
    else
        HUB_STAT_ADD_SHARED(k->d->st->lost, 1);
}

static void refresh_done(struct srv_redis_call *k, const redisReply *rep)
{
    if (rep)
        got_refresh(k, rep);
}

/* Sending. */

/* KEYS ns nm ni gs gm gi gq, and wh whd whn when wh (durable webhooks:
 * the script queues the app's edges itself). */
static void keys7(struct srv_redis_call *k, const struct hub_cluster_dirop *dop,
                  bool wh)
{
    srv_redis_call_arg(k, wh ? "10" : "7");
    srv_redis_call_key_node(k, "ns");
    srv_redis_call_key_node(k, "nm");
    srv_redis_call_key_node(k, "ni");
    srv_redis_call_key_app(k, "gs", dop->app_id);
    srv_redis_call_key_chan(k, "gm", dop->app_id, dop->name, dop->len);
    srv_redis_call_key_chan(k, "gi", dop->app_id, dop->name, dop->len);
    srv_redis_call_key_app(k, "gq", dop->app_id);
    if (wh) {
        srv_redis_call_key_app(k, "wh", dop->app_id);
        srv_redis_call_key_app(k, "whd", dop->app_id);
        srv_redis_call_key_app(k, "whn", dop->app_id);
    }
}

/* The webhook ARGV tail: the delay and the stream's bound. */
static void wh_args(struct srv_redis_dir *d, struct srv_redis_call *k,
                    uint64_t delay_ms)
{
    srv_redis_call_argf(k, "%llu", (unsigned long long)delay_ms);
    srv_redis_call_argf(k, "%u", hub_cluster_wh_max(d->c));
}

static void send_members(struct srv_redis_dir *d, struct srv_redis_call *k,
                         const char *app_id, const char *name, size_t len)
{
    srv_redis_call_arg(k, "2");
    srv_redis_call_key_app(k, "gq", app_id);
    srv_redis_call_key_chan(k, "gi", app_id, name, len);
    srv_redis_call_arg_n(k, name, len);
    srv_redis_call_send(k);
    (void)d;
}

static void run_join(struct srv_redis_dir *d, struct hub_cluster_dirop *dop)
{
    struct srv_redis_call *k;
    uint64_t delay = 0;
    bool wh;

    if (hub_cluster_dir_stale(d->c, dop)) {
        /* Counted in the latest REJOIN already: only the answer. */
        if (!dop->presence || !dop->req) {
            hub_cluster_dir_joined(d->c, dop, 0, false, false, 0, NULL, 0);
            return;
        }
        k = srv_redis_call_new(&d->calls, d, SRV_SCRIPT_MEMBERS,
                               join_stale_done, dop);
        if (!k) {
            hub_cluster_dir_local(d->c, dop);
            return;
        }
        send_members(d, k, dop->app_id, dop->name, dop->len);
        return;
    }
    k = srv_redis_call_new(&d->calls, d, SRV_SCRIPT_JOIN, join_done, dop);
    if (!k) {
        hub_cluster_dir_local(d->c, dop);
        return;
    }
    wh = hub_cluster_wh_redis(d->c, dop->app, &delay);
    keys7(k, dop, wh);
    srv_redis_call_field(k, dop->app_id, dop->name, dop->len, NULL);
    srv_redis_call_arg_n(k, dop->name, dop->len);
    srv_redis_call_argf(k, "%u", (unsigned)dop->max_members);
    if (dop->presence) {
        srv_redis_call_arg(k, dop->uid);
        srv_redis_call_arg(k, dop->info);
        srv_redis_call_field(k, dop->app_id, dop->name, dop->len, dop->uid);
        srv_redis_call_key_chan(k, "m", dop->app_id, dop->name, dop->len);
        k->stamp_arg = k->argc;
        srv_redis_call_arg(k,
                           ""); /* the stamp, made by srv_redis_call_send() */
    }
    if (wh)
        wh_args(d, k, delay);
    srv_redis_call_send(k);
}

static void run_leave(struct srv_redis_dir *d, struct hub_cluster_dirop *dop)
{
    struct srv_redis_call *k;
    uint64_t delay = 0;
    bool wh;

    if (hub_cluster_dir_stale(d->c, dop)) {
        hub_cluster_dirop_free(dop);
        return;
    }
    k = srv_redis_call_new(&d->calls, d, SRV_SCRIPT_LEAVE, leave_done, dop);
    if (!k) {
        hub_cluster_dirop_free(dop); /* the next REJOIN corrects it */
        return;
    }
    wh = hub_cluster_wh_redis(d->c, dop->app, &delay);
    keys7(k, dop, wh);
    srv_redis_call_field(k, dop->app_id, dop->name, dop->len, NULL);
    srv_redis_call_arg_n(k, dop->name, dop->len);
    if (dop->presence) {
        srv_redis_call_arg(k, dop->uid);
        srv_redis_call_field(k, dop->app_id, dop->name, dop->len, dop->uid);
        srv_redis_call_key_chan(k, "m", dop->app_id, dop->name, dop->len);
    }
    if (wh)
        wh_args(d, k, delay);
    srv_redis_call_send(k);
}

static void run_query(struct srv_redis_dir *d, struct hub_cluster_dirop *dop)
{
    struct hub_dir_query *q = dop->q;
    struct srv_redis_call *k;

    if (q->kind == HUB_DIR_Q_USERS) {
        /* A plain HKEYS: no script needed. */
        char *key = NULL;

        k = srv_redis_call_new(&d->calls, d, SRV_SCRIPT_INFO, query_done, dop);
        if (!k || !srv_redis_call_conn(&d->calls) ||
            asprintf(&key, "%s:gm:%s:%.*s", hub_cluster_prefix(d->c),
                     dop->app_id, (int)dop->len, dop->name) < 0) {
            if (k) {
                srv_redis_call_fail(k);
            } else {
                hub_cluster_dir_local(d->c, dop);
            }
            return;
        }
        srv_redis_call_hkeys(k, key);
        free(key);
        return;
    }
    k = srv_redis_call_new(&d->calls, d,
                           q->kind == HUB_DIR_Q_INFO ? SRV_SCRIPT_INFO
                                                     : SRV_SCRIPT_LIST,
                           query_done, dop);
    if (!k) {
        hub_cluster_dir_local(d->c, dop);
        return;
    }
    if (q->kind == HUB_DIR_Q_INFO) {
        srv_redis_call_arg(k, "2");
        srv_redis_call_key_app(k, "gs", dop->app_id);
        srv_redis_call_key_chan(k, "gm", dop->app_id, dop->name, dop->len);
        srv_redis_call_arg_n(k, dop->name, dop->len);
    } else {
        srv_redis_call_arg(k, "1");
        srv_redis_call_key_app(k, "gs", dop->app_id);
        srv_redis_call_argf(k, "%s:gm:%s:", hub_cluster_prefix(d->c),
                            dop->app_id);
        srv_redis_call_arg(k, q->prefix ? q->prefix : "");
        srv_redis_call_arg(k, q->user_count ? "1" : "0");
    }
    srv_redis_call_send(k);
}

/* Parking. */

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
    struct srv_redis_call *k;

    if (hub_cluster_online_stale(d->c, oop)) {
        /* In the latest online snapshot already: a signout has nothing
         * left to do, a signin still owes the user its initial state. */
        if (!oop->signin) {
            hub_cluster_onop_free(oop);
            return;
        }
        first = replace = false;
    }
    k = srv_redis_call_new(&d->calls, d,
                           oop->signin ? SRV_SCRIPT_ONLINE_SIGNIN
                                       : SRV_SCRIPT_ONLINE_SIGNOUT,
                           online_done, NULL);
    if (!k) {
        HUB_STAT_ADD_SHARED(d->st->lost, 1);
        hub_cluster_onop_free(oop);
        return;
    }
    srv_redis_call_arg(k, "0");
    srv_redis_call_arg(k, hub_cluster_prefix(d->c));
    srv_redis_call_arg(k, d->node);
    srv_redis_call_arg(k, oop->app_id);
    srv_redis_call_arg(k, oop->uid);
    if (oop->signin) {
        srv_redis_call_arg(k, first ? "1" : "0");
        srv_redis_call_arg(k, replace ? "1" : "0");
        srv_redis_call_argf(k, "%u", (unsigned)oop->max_watchers);
        srv_redis_call_arg(k, oop->full ? "1" : "0");
        srv_redis_call_argf(k, "%zu", replace ? oop->n : (size_t)0);
        for (size_t i = 0; replace && i < oop->n; i++)
            srv_redis_call_arg(k, oop->ids[i]);
    }
    hub_cluster_onop_free(oop);
    srv_redis_call_send(k);
}

/* An ONLINE op: a signin waits until Redis confirmed the SUBSCRIBE of the
 * user's channel (its initial state is published there), and nothing of a
 * user overtakes a parked op of that user. True when op is kept. */
bool srv_redis_dir_online_in(struct srv_redis_dir *d, struct hub_cluster_op *op)
{
    struct hub_cluster_onop *oop = op->oop;

    if (!oop)
        return false;
    if (!srv_redis_call_conn(&d->calls)) {
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
        return srv_redis_dir_online_in(d, op);
    if (!dop)
        return false;
    if (!srv_redis_call_conn(&d->calls)) {
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

/* The views' lists, and what waits for a SUBSCRIBE. */

void srv_redis_dir_refresh_clear(struct srv_redis_dir *d)
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

static void send_refresh(struct srv_redis_dir *d, unsigned app,
                         const char *name, size_t len)
{
    const char *id = hub_cluster_app_id(d->c, app);
    struct srv_redis_call *k =
        id ? srv_redis_call_new(&d->calls, d, SRV_SCRIPT_MEMBERS, refresh_done,
                                NULL)
           : NULL;

    if (!k)
        return;
    k->app = app;
    k->name = malloc(len + 1);
    if (!k->name) {
        srv_redis_call_free(k);
        return;
    }
    memcpy(k->name, name, len);
    k->name[len] = '\0';
    k->len = len;
    send_members(d, k, id, name, len);
}

void srv_redis_dir_view(void *ctx, unsigned app, const char *name, size_t len)
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

void srv_redis_dir_park_down(struct srv_redis_dir *d)
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
    srv_redis_dir_refresh_clear(d);
}
