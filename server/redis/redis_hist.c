/*
 * server/redis/redis_hist.c - recovery's reads of a channel's history
 * stream (docs/RECOVERY.md, docs/SCALING.md "History streams"): a
 * HUB_COP_HREAD op's read (hub/loop/backplane.h struct hub_hist_read) runs
 * server/redis/lua/history_read.lua on the command connection and its
 * answer goes back to the asking loop (hub_cluster_hist_answer). The writes
 * are server/redis/redis_pub.c's (before each PUBLISH).
 *
 * A read reaches Redis after this node's own earlier writes (one
 * connection, in order), and after the SUBSCRIBE of the channel was
 * confirmed (a subscription's join waits for it), so whatever it misses
 * this node receives live.
 *
 * Thread: the backplane thread.
 */
#include "server/redis/redis_hist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/cluster/cluster.h"
#include "hub/loop/publish.h"
#include "server/redis/redis_int.h"
#include "timer/clock.h"
#include "server/redis/redis_lua.h"
#include "server/redis/redis_sub.h"
#include "server/lws/srv.h"

static uint64_t num(const redisReply *v)
{
    char buf[32];
    size_t n;

    if (v->type == REDIS_REPLY_INTEGER)
        return v->integer > 0 ? (uint64_t)v->integer : 0;
    if (v->type != REDIS_REPLY_STRING || !v->len || v->len >= sizeof(buf))
        return 0;
    n = v->len;
    memcpy(buf, v->str, n);
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

static bool is(const redisReply *k, const char *name)
{
    return k->type == REDIS_REPLY_STRING && k->len == strlen(name) &&
           !memcmp(k->str, name, k->len);
}

/* One XRANGE entry [id, [field, value, ...]] into e: 0, or -EINVAL. */
static int entry(const redisReply *x, struct hub_hist_entry *e)
{
    const redisReply *f;

    memset(e, 0, sizeof(*e));
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
        (f = x->element[1])->type != REDIS_REPLY_ARRAY)
        return -EINVAL;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];

        if (v->type != REDIS_REPLY_STRING)
            continue;
        if (is(k, "o") && v->len && v->len <= HUB_HIST_ORIGIN_MAX) {
            memcpy(e->origin, v->str, v->len);
            e->origin[v->len] = '\0';
        } else if (is(k, "s")) {
            e->seq = num(v);
        } else if (is(k, "t")) {
            e->time_ms = num(v);
        } else if (is(k, "x") && v->len) {
            struct hub_skip sk;
            char sid[48];

            if (v->len < sizeof(sid)) {
                memcpy(sid, v->str, v->len);
                sid[v->len] = '\0';
                if (!hub_skip_parse(&sk, sid)) {
                    e->ex = true;
                    e->ex_hi = sk.hi;
                    e->ex_lo = sk.lo;
                }
            }
        } else if (is(k, "d") && !e->data) {
            e->data = malloc(v->len + 1);
            if (!e->data)
                return -ENOMEM;
            memcpy(e->data, v->str, v->len);
            e->data[v->len] = '\0';
            e->len = v->len;
        }
    }
    if (!e->origin[0] || !e->seq || !e->data) {
        free(e->data);
        e->data = NULL;
        return -EINVAL;
    }
    return 0;
}

static int parse(struct hub_hist_read *rd, const redisReply *rep)
{
    const redisReply *es, *last, *del, *t;

    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 6)
        return -EIO;
    es = rep->element[0];
    last = rep->element[1];
    del = rep->element[2];
    t = rep->element[3];
    if (es->type != REDIS_REPLY_ARRAY || last->type != REDIS_REPLY_ARRAY ||
        del->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_ARRAY ||
        t->elements != 2)
        return -EIO;
    rd->now_ms = num(t->element[0]) * 1000 + num(t->element[1]) / 1000;
    rd->deleted_ms = strtoull(del->str, NULL, 10);
    if (rep->element[4]->type == REDIS_REPLY_STRING)
        rd->first_ms = strtoull(rep->element[4]->str, NULL, 10);
    rd->anchored = rep->element[5]->type == REDIS_REPLY_INTEGER &&
                   rep->element[5]->integer == 1;
    for (size_t i = 0; i + 1 < last->elements; i += 2) {
        const redisReply *k = last->element[i];

        if (k->type != REDIS_REPLY_STRING || !k->len ||
            k->len > HUB_HIST_ORIGIN_MAX)
            continue;
        if (rd->n_last == HUB_HIST_LAST_MAX) {
            rd->last_full = true;
            break;
        }
        memcpy(rd->last[rd->n_last].origin, k->str, k->len);
        rd->last[rd->n_last].origin[k->len] = '\0';
        rd->last[rd->n_last].seq = num(last->element[i + 1]);
        rd->n_last++;
    }
    if (!es->elements)
        return 0;
    rd->e = calloc(es->elements, sizeof(*rd->e));
    if (!rd->e)
        return -EIO;
    for (size_t i = 0; i < es->elements; i++) {
        int rc = entry(es->element[i], &rd->e[rd->n]);

        if (rc == -ENOMEM)
            return -EIO;
        if (rc == 0)
            rd->n++;
    }
    return 0;
}

/* A read in flight: its callback runs once, with the reply or NULL. */
struct hist_call {
    struct srv_redis *r;
    struct hub_hist_read *rd;
};

static void read_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct hist_call *k = priv;
    struct hub_hist_read *rd = k->rd;
    struct srv_redis *r = k->r;

    (void)ac;
    free(k);
    rd->rc = parse(rd, reply);
    if (rd->rc) {
        const redisReply *rp = reply;

        /* A refused read is the operator's to see (an ACL without
         * XRANGE, docs/SCALING.md), once a minute at most: every resume
         * would say it. */
        uint64_t now = hub_clock_now_ms(hub_clock_monotonic());

        if (!r->hist_warned_ms || now - r->hist_warned_ms >= 60000) {
            r->hist_warned_ms = now;
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "resume_failed",
                                    .channel = rd->name,
                                    .reason = "history_read_failed"),
                          "recovery: reading the stream of %s "
                          "failed (%s); the client is told lubdub:resume_failed "
                          "(history_read_failed counts them)",
                          rd->name,
                          rp && rp->type == REDIS_REPLY_ERROR && rp->str ? rp->str
                          : rp ? "a bad reply" : "no reply");
        }
        for (size_t i = 0; i < rd->n; i++)
            free(rd->e[i].data);
        free(rd->e);
        rd->e = NULL;
        rd->n = 0;
        HUB_STAT_ADD(r->st->history_read_failed, 1);
    }
    hub_cluster_hist_answer(r->c, rd);
}

void srv_redis_hist_read(struct srv_redis *r, struct hub_cluster_op *op)
{
    struct hub_hist_read *rd = op->hrd;
    const char *prefix = hub_cluster_prefix(r->c);
    size_t plen = strlen(prefix), klen;
    struct hist_call *k = malloc(sizeof(*k));
    char *last, count[24], page[2], a[HUB_HIST_ORIGIN_MAX + 24], b[24];

    op->hrd = NULL;
    rd->rc = -EIO;
    /* The stream's key is op->rchan ("<prefix>:history:<app>:<ch>"); the
     * last-ids hash's is the same with "history-last". */
    klen = op->rchan_len + sizeof("-last") - 1;
    last = malloc(klen + 1);
    if (!k || !last || !r->up || !r->cmd) {
        free(k);
        free(last);
        HUB_STAT_ADD(r->st->history_read_failed, 1);
        hub_cluster_hist_answer(r->c, rd);
        return;
    }
    memcpy(last, op->rchan, plen + sizeof(":history") - 1);
    memcpy(last + plen + sizeof(":history") - 1, "-last", 5);
    memcpy(last + plen + sizeof(":history-last") - 1,
           op->rchan + plen + sizeof(":history") - 1,
           op->rchan_len - plen - (sizeof(":history") - 1));
    last[klen] = '\0';
    k->r = r;
    k->rd = rd;
    page[0] = rd->page;
    page[1] = '\0';
    snprintf(count, sizeof(count), "%zu", rd->count);
    snprintf(a, sizeof(a), "%s", rd->after_origin);
    if (rd->page == 't')
        snprintf(a, sizeof(a), "%llu", (unsigned long long)rd->since_ms);
    else if (rd->page == 'w')
        snprintf(a, sizeof(a), "%llu", (unsigned long long)rd->ttl_ms);
    snprintf(b, sizeof(b), "%llu", (unsigned long long)rd->after_seq);
    if (srv_redis_async_cmd(r->cmd, read_cb, k,
                            "EVAL %s 2 %b %b %s %s %s %s %s",
                            srv_redis_lua_history_read, op->rchan,
                            op->rchan_len, last, klen,
                            rd->entries ? "1" : "0", count, page, a,
                            b) != 0) {
        free(k);
        HUB_STAT_ADD(r->st->history_read_failed, 1);
        hub_cluster_hist_answer(r->c, rd);
    }
    free(last);
}

/* A fill's read in flight. */
struct fill_call {
    struct srv_redis *r;
    struct hub_cluster_fill *req;
};

static void fill_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct fill_call *k = priv;
    struct srv_redis *r = k->r;
    struct hub_cluster_fill *req = k->req;
    struct hub_hist_read *rd = calloc(1, sizeof(*rd));
    struct rxrec *x;

    (void)ac;
    free(k);
    if (rd && (rd->rc = parse(rd, reply)) != 0)
        HUB_STAT_ADD(r->st->history_read_failed, 1);
    /* The channel as it is received now (it may have gone meanwhile). */
    x = srv_redis_tab_find(&r->rx, req->rchan, req->rchan_len);
    hub_cluster_fill_answer(r->c, x && x->want ? &x->rx : NULL, req,
                            rd && !rd->rc ? rd : NULL);
    hub_hist_read_free(rd);
}

int srv_redis_hist_fill(void *ctx, struct hub_cluster_fill *req)
{
    struct srv_redis *r = ctx;
    const char *prefix = hub_cluster_prefix(r->c);
    size_t plen = strlen(prefix), rest, slen, llen;
    struct fill_call *k;
    char *keys;

    /* req->rchan is "<prefix>:<app>:<ch>"; the stream's key
     * "<prefix>:history:<app>:<ch>", the hash's "...history-last:...". */
    if (!r->up || !r->cmd || req->rchan_len <= plen)
        return -1;
    rest = req->rchan_len - plen;
    slen = plen + sizeof(":history") - 1 + rest;
    llen = slen + sizeof("-last") - 1;
    keys = malloc(slen + llen + 2);
    k = malloc(sizeof(*k));
    if (!keys || !k) {
        free(keys);
        free(k);
        return -1;
    }
    memcpy(keys, prefix, plen);
    memcpy(keys + plen, ":history", sizeof(":history") - 1);
    memcpy(keys + plen + sizeof(":history") - 1, req->rchan + plen, rest);
    keys[slen] = '\0';
    memcpy(keys + slen + 1, prefix, plen);
    memcpy(keys + slen + 1 + plen, ":history-last", sizeof(":history-last") - 1);
    memcpy(keys + slen + 1 + plen + sizeof(":history-last") - 1,
           req->rchan + plen, rest);
    keys[slen + 1 + llen] = '\0';
    k->r = r;
    k->req = req;
    if (srv_redis_async_cmd(r->cmd, fill_cb, k, "EVAL %s 2 %b %b 1",
                            srv_redis_lua_history_read, keys, slen,
                            keys + slen + 1, llen) != 0) {
        free(k);
        free(keys);
        return -1;
    }
    free(keys);
    return 0;
}
