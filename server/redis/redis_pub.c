/*
 * server/redis/redis_pub.c - the backplane's sending side
 * (server/redis/redis_pub.h): each envelope PUBLISHed on the command
 * connection with the next seq of its broker channel (a table of at most
 * MAX_TX_CHANNELS channels, then a new epoch), the commands in flight
 * bounded in number and bytes (counted lost beyond), and the cache
 * channels' last events: SET before PUBLISH, and loaded back on every
 * connect (server/redis/lua/cache_scan.lua).
 *
 * Thread: the backplane thread.
 */
#include "server/redis/redis_pub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/rng.h"
#include "server/redis/redis_int.h"
#include "server/redis/redis_lua.h"
#include "server/redis/redis_sub.h"
#include "server/lws/srv.h"

void srv_redis_new_epoch(struct srv_redis *r)
{
    /* Spread, nothing secret. */
    r->epoch = hub_xorshift64s(&r->rng) | 1;
}

/* The ring of commands in flight on the command connection (PUBLISH and
 * the cache's SET), oldest first, with their sizes: pushed when a command
 * is queued, popped by its reply callback (replies come in order). */
static void inflight_push(struct srv_redis *r, size_t len)
{
    r->ring[(r->ring_head + r->inflight) % MAX_INFLIGHT] = (uint32_t)len;
    r->inflight++;
    r->inflight_bytes += len;
}

static void inflight_pop(struct srv_redis *r)
{
    if (r->inflight) {
        r->inflight_bytes -= r->ring[r->ring_head];
        r->ring_head = (r->ring_head + 1) % MAX_INFLIGHT;
        r->inflight--;
    }
}

static void publish_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;

    (void)ac;
    inflight_pop(r);
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        HUB_STAT_ADD(r->st->published, 1);
    else
        HUB_STAT_ADD_SHARED(r->st->lost, 1);
}

static uint64_t next_seq(struct srv_redis *r, const char *name, size_t len)
{
    struct txrec *t = srv_redis_tab_find(&r->tx, name, len);

    if (!t) {
        if (r->tx.count >= MAX_TX_CHANNELS) {
            srv_redis_tx_clear(r);
            srv_redis_new_epoch(r);
        }
        t = srv_redis_tab_add(&r->tx, sizeof(*t),
                              offsetof(struct txrec, name), name, len);
        if (!t)
            return 0;
    }
    return ++t->seq;
}

void srv_redis_tx_clear(struct srv_redis *r)
{
    struct hub_chan_node *n, *nn;

    for (n = hub_chantab_next(&r->tx, NULL); n; n = nn) {
        nn = hub_chantab_next(&r->tx, n);
        hub_chantab_remove(&r->tx, n);
        free(n);
    }
}

static void hist_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;

    (void)ac;
    inflight_pop(r);
    if (!rep || rep->type == REDIS_REPLY_ERROR)
        HUB_STAT_ADD(r->st->history_write_failed, 1);
}

/*
 * Recovery (docs/RECOVERY.md, docs/SCALING.md "History streams"): a
 * publication with an id goes into its channel's stream before it is
 * PUBLISHed, on the same connection, so a node that receives it can read
 * it there too. The stream is trimmed to about the app's history size and
 * expires ttl after its last write; the last-ids hash (each origin's last
 * seq on the channel) lives twice as long, so a resume can tell "nothing
 * more from that node" from "trimmed". Four commands, in order; their
 * replies are counted like the PUBLISHes' (bounded in number and bytes).
 */
static void hist_write(struct srv_redis *r, const struct hub_cluster_op *op)
{
    const struct hub_frame *f = op->f;
    const char *app = hub_cluster_app_id(r->c, op->app);
    const char *prefix = hub_cluster_prefix(r->c);
    const char *name = op->rchan + op->name_off;
    size_t nlen = op->rchan_len - op->name_off, klen, cap, plen;
    const char *payload;
    char *key, sid[48];
    unsigned long long ttl = op->hist.ttl_ms;

    if (!f || !f->hseq || !op->hist.size || !app || !r->up || !r->cmd ||
        r->inflight + 4 > MAX_INFLIGHT)
        return;
    plen = f->payload_len;
    payload = (const char *)hub_frame_data(f) + (f->len - f->payload_len);
    cap = strlen(prefix) + sizeof(":history-last:") + strlen(app) + 1 + nlen;
    key = malloc(cap);
    if (!key) {
        HUB_STAT_ADD(r->st->history_write_failed, 1);
        return;
    }
    if (op->skip.set)
        snprintf(sid, sizeof(sid), "%llu.%lu",
                 (unsigned long long)op->skip.hi, (unsigned long)op->skip.lo);
    else
        sid[0] = '\0';
    klen = (size_t)snprintf(key, cap, "%s:history:%s:", prefix, app);
    memcpy(key + klen, name, nlen);
    klen += nlen;
    if (srv_redis_async_cmd(r->cmd, hist_cb, r,
                            "XADD %b MAXLEN ~ %u * o %s s %llu t %llu x %s d %b",
                            key, klen, (unsigned)op->hist.size, f->horigin,
                            (unsigned long long)f->hseq,
                            (unsigned long long)op->hist.time_ms, sid, payload,
                            plen) == 0)
        inflight_push(r, plen);
    if (srv_redis_async_cmd(r->cmd, hist_cb, r, "PEXPIRE %b %llu", key, klen,
                            ttl) == 0)
        inflight_push(r, 0);
    klen = (size_t)snprintf(key, cap, "%s:history-last:%s:", prefix, app);
    memcpy(key + klen, name, nlen);
    klen += nlen;
    if (srv_redis_async_cmd(r->cmd, hist_cb, r, "HSET %b %s %llu", key, klen,
                            f->horigin, (unsigned long long)f->hseq) == 0)
        inflight_push(r, 0);
    if (srv_redis_async_cmd(r->cmd, hist_cb, r, "PEXPIRE %b %llu", key, klen,
                            2 * ttl) == 0)
        inflight_push(r, 0);
    free(key);
}

void srv_redis_pub_event(struct srv_redis *r,
                         const struct hub_cluster_op *op)
{
    uint64_t seq = next_seq(r, op->rchan, op->rchan_len);
    unsigned char *env;
    size_t len = 0;

    if (!seq || !r->up || !r->cmd || r->inflight >= MAX_INFLIGHT) {
        HUB_STAT_ADD_SHARED(r->st->lost, 1);
        return;
    }
    env = hub_cluster_encode(r->c, op, r->epoch, seq, &len);
    if (!env || r->inflight_bytes + len > MAX_INFLIGHT_BYTES) {
        free(env);
        HUB_STAT_ADD_SHARED(r->st->lost, 1);
        return;
    }
    if (op->kind == HUB_COP_EVENT)
        hist_write(r, op);
    if (srv_redis_async_cmd(r->cmd, publish_cb, r, "PUBLISH %b %b", op->rchan,
                            op->rchan_len, env, len) == 0) {
        inflight_push(r, len);
    } else {
        HUB_STAT_ADD_SHARED(r->st->lost, 1);
    }
    free(env);
}

static void cache_set_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;

    (void)ac;
    inflight_pop(r);
    if (!rep || rep->type != REDIS_REPLY_STATUS)
        HUB_STAT_ADD(r->st->cache_write_failed, 1);
}

/* SET before PUBLISH: a node loading the keys while this goes out reads
 * this entry or a later one, never one older than what it receives. */
void srv_redis_pub_cache(struct srv_redis *r,
                         const struct hub_cluster_op *op)
{
    uint64_t seq = next_seq(r, op->rchan, op->bus_len);
    uint64_t ttl = hub_cluster_op_ttl(r->c, op);
    unsigned char *env = NULL;
    size_t len = 0;

    if (!seq || !r->up || !r->cmd || r->inflight + 2 > MAX_INFLIGHT ||
        !(env = hub_cluster_encode(r->c, op, r->epoch, seq, &len)) ||
        r->inflight_bytes + 2 * (uint64_t)len > MAX_INFLIGHT_BYTES) {
        free(env);
        HUB_STAT_ADD_SHARED(r->st->lost, 1);
        HUB_STAT_ADD(r->st->cache_write_failed, 1);
        return;
    }
    /* Expired in the queue: the other nodes still deliver it (and keep it
     * for the 1 ms the envelope says), but there is nothing to store. */
    if (!ttl) {
        /* nothing */
    } else if (srv_redis_async_cmd(r->cmd, cache_set_cb, r, "SET %b %b PX %llu",
                                   op->rchan, op->rchan_len, env, len,
                                   (unsigned long long)ttl) == 0) {
        inflight_push(r, len);
    } else {
        HUB_STAT_ADD(r->st->cache_write_failed, 1);
    }
    hist_write(r, op);
    if (srv_redis_async_cmd(r->cmd, publish_cb, r, "PUBLISH %b %b", op->rchan,
                            op->bus_len, env, len) == 0) {
        inflight_push(r, len);
    } else {
        HUB_STAT_ADD_SHARED(r->st->lost, 1);
    }
    free(env);
}

static void cache_load_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;
    const redisReply *cur;

    if (!rep || !srv_redis_async_data(ac) || ac != r->cmd)
        return; /* the connection went: the next go_up loads again */
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        !srv_redis_is_str(rep->element[0])) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "cache_load", .reason = "failed"),
                      "backplane: cannot load the cache "
                      "entries from redis (%s)",
                      rep->type == REDIS_REPLY_ERROR && rep->str ? rep->str
                      : "bad reply");
        return;
    }
    for (size_t i = 1; i + 2 < rep->elements; i += 3) {
        const redisReply *k = rep->element[i], *v = rep->element[i + 1],
                         *t = rep->element[i + 2];

        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            t->type != REDIS_REPLY_INTEGER || t->integer <= 0) {
            HUB_STAT_ADD(r->st->bad, 1);
            continue;
        }
        if (hub_cluster_load(r->c, k->str, k->len, v->str, v->len,
                             (uint64_t)t->integer) == 1)
            r->n_loaded++;
    }
    cur = rep->element[0];
    if (!(cur->len == 1 && cur->str[0] == '0')) {
        srv_redis_cache_load(r, cur->str, cur->len);
        return;
    }
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "cache_load"),
                  "backplane: %llu cache entries loaded from "
                  "redis", (unsigned long long)r->n_loaded);
}

void srv_redis_cache_load(struct srv_redis *r, const char *cursor,
                          size_t len)
{
    const char *pat = hub_cluster_cache_pattern(r->c);

    if (len == 1 && cursor[0] == '0')
        r->n_loaded = 0;

    if (!r->cmd ||
        srv_redis_async_cmd(r->cmd, cache_load_cb, r, "EVAL %s 0 %b %s",
                            srv_redis_lua_cache_scan, cursor, len, pat) != 0)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "cache_load", .reason = "failed"),
                      "backplane: cannot load the cache "
                      "entries from redis");
}
