/*
 * server/redis/redis.c - the backplane thread of server/redis/redis.h.
 */
#include "server/redis/redis.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <ev.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "hub/base/chantab.h"
#include "hub/base/rng.h"
#include "hub/loop/stats.h"
#include "server/redis/redis_dir.h"
#include "server/redis/redis_lease.h"
#include "server/lws/srv.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define CONNECT_TIMEOUT_S 5.0
#define PING_EVERY_S 1.0
#define PING_DEADLINE_NS (3ull * 1000000000ull)
#define MAX_INFLIGHT 100000     /* PUBLISHes awaiting their reply */
#define MAX_INFLIGHT_BYTES (64u * 1024 * 1024) /* and their envelope bytes */
#define MAX_TX_CHANNELS 65536   /* then the seq table restarts (new epoch) */

/* Sending side: the next seq per broker channel. */
struct txrec {
    struct hub_chan_node node;
    uint64_t seq;
    char name[];
};

/* Receiving side: a broker channel this node wants (want), is subscribed
 * to on the current connection (subscribed), or still has UNSUBSCRIBEs in
 * flight for (a SUBSCRIBE waits for their reply: hiredis drops the
 * channel's callback on it). */
struct rxrec {
    struct hub_chan_node node;
    bool want, subscribed, confirmed; /* confirmed: Redis said subscribe */
    bool member;                   /* a presence member-event channel */
    unsigned unsub_inflight;
    struct hub_cluster_rx rx;
    char name[];
};

struct srv_redis {
    struct srv_redis_url url;
    struct srv_secret *pass;       /* borrowed; NULL = url.pass */
    char *node_id;
    struct hub_cluster *c;
    struct hub_backplane_stats *st;
    pthread_t thread;
    bool started;
    struct ev_loop *loop;
    ev_async wake_w, stop_w;
    ev_timer retry_w, connect_w, ping_w;
    redisAsyncContext *cmd, *sub;
    unsigned setup_left;           /* setup replies still awaited */
    bool up, ever_up, told_down;
    atomic_bool up_flag;
    unsigned attempts;
    uint64_t epoch, rng;
    struct hub_chantab tx, rx;
    /* PUBLISHes awaiting Redis's reply, oldest first: their envelope
     * sizes in a ring (replies come back in order), so that a slow Redis
     * never makes hiredis's output buffer grow past MAX_INFLIGHT_BYTES. */
    uint32_t *ring;
    size_t ring_head, inflight;
    uint64_t inflight_bytes;
    uint64_t n_confirmed;          /* rx records with confirmed set */
    uint64_t ping_at_ns;
    bool ping_out;
    uint64_t n_loaded;             /* cache entries kept by this load */
    struct srv_redis_dir *dir;     /* the cluster-wide directory */
    struct srv_lease *lease;       /* node lease and reaper; owned, or NULL */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(struct srv_redis *r)
{
    /* Jitter and epochs, nothing secret. */
    return hub_xorshift64s(&r->rng);
}

static void new_epoch(struct srv_redis *r)
{
    r->epoch = rnd(r) | 1;
}

static void stat_add(uint64_t *v, uint64_t n)
{
    __atomic_fetch_add(v, n, __ATOMIC_RELAXED);
}

static void stat_set(uint64_t *v, uint64_t n)
{
    __atomic_store_n(v, n, __ATOMIC_RELAXED);
}

static void *tab_find(struct hub_chantab *t, const char *name, size_t len)
{
    return hub_chantab_find(t, 0, name, len, hub_chan_hash(0, name, len));
}

/* A record of size sz (its node first) keyed by name, linked into t. */
static void *tab_add(struct hub_chantab *t, size_t sz, size_t name_off,
                     const char *name, size_t len)
{
    char *p = calloc(1, sz + len + 1);
    struct hub_chan_node *n = (struct hub_chan_node *)(void *)p;

    if (!p)
        return NULL;
    memcpy(p + name_off, name, len);
    n->app = 0;
    n->name = p + name_off;
    n->name_len = (uint32_t)len;
    n->hash = hub_chan_hash(0, name, len);
    hub_chantab_insert(t, n);
    return p;
}

static void set_confirmed(struct srv_redis *r, struct rxrec *x, bool on);

static void rx_remove(struct srv_redis *r, struct rxrec *x)
{
    set_confirmed(r, x, false);
    hub_chantab_remove(&r->rx, &x->node);
    hub_cluster_rx_fini(&x->rx);
    free(x);
}

static void tx_clear(struct srv_redis *r)
{
    struct hub_chan_node *n, *nn;

    for (n = hub_chantab_next(&r->tx, NULL); n; n = nn) {
        nn = hub_chantab_next(&r->tx, n);
        hub_chantab_remove(&r->tx, n);
        free(n);
    }
}

/* The channels gauge follows every change of a record's confirmed flag,
 * so nothing walks the table per wakeup. */
static void set_confirmed(struct srv_redis *r, struct rxrec *x, bool on)
{
    if (x->confirmed == on)
        return;
    x->confirmed = on;
    if (on)
        r->n_confirmed++;
    else
        r->n_confirmed--;
    stat_set(&r->st->channels, r->n_confirmed);
}

static void subscribe_cb(redisAsyncContext *ac, void *reply, void *priv);

static void send_subscribe(struct srv_redis *r, struct rxrec *x)
{
    if (redisAsyncCommand(r->sub, subscribe_cb, r, "SUBSCRIBE %b", x->name,
                          (size_t)x->node.name_len) == REDIS_OK)
        x->subscribed = true;
}

/* Connection handling. */

static void start_connect(struct srv_redis *r);

/* Close both connections; no callback of ours acts on them after this
 * (their data is cleared; pending PUBLISH callbacks count lost). */
static void drop_connections(struct srv_redis *r)
{
    redisAsyncContext *a = r->cmd, *b = r->sub;

    r->cmd = r->sub = NULL;
    if (a) {
        a->data = NULL;
        redisAsyncFree(a);
    }
    if (b) {
        b->data = NULL;
        redisAsyncFree(b);
    }
}

static void go_down(struct srv_redis *r, const char *why)
{
    struct hub_chan_node *n, *nn;
    double delay;
    unsigned shift;

    ev_timer_stop(r->loop, &r->connect_w);
    ev_timer_stop(r->loop, &r->ping_w);
    r->ping_out = false;
    /* Node lease (server/redis/redis_lease.h): before the connection goes. */
    srv_lease_down(r->lease);
    /* The directory answers locally from now on; what waited on Redis is
     * answered so (the dropped connections fail their calls). */
    bool was_up = r->up;

    if (r->c)
        hub_cluster_dir_set_up(r->c, false);
    r->up = false;
    drop_connections(r);
    if (r->dir)
        srv_redis_dir_down(r->dir);
    if (was_up) {
        srv_log(HUB_LOG_WARN, 0,
                "backplane: down (%s); local delivery goes on, cross-node "
                "messages are lost until Redis is back", why);
    } else if (!r->told_down) {
        srv_log(HUB_LOG_WARN, 0,
                "backplane: redis %s:%d unreachable (%s); serving local "
                "subscribers only, retrying", r->url.host, r->url.port, why);
    }
    r->told_down = true;
    r->up = false;
    atomic_store(&r->up_flag, false);
    stat_set(&r->st->up, 0);
    for (n = hub_chantab_next(&r->rx, NULL); n; n = nn) {
        struct rxrec *x = (struct rxrec *)(void *)n;

        nn = hub_chantab_next(&r->rx, n);
        x->subscribed = false;
        set_confirmed(r, x, false);
        x->unsub_inflight = 0;
        if (!x->want)
            rx_remove(r, x);
    }
    shift = r->attempts < 6 ? r->attempts : 6;
    delay = (double)BACKOFF_MIN_MS * (double)(1u << shift);
    if (delay > BACKOFF_MAX_MS)
        delay = BACKOFF_MAX_MS;
    /* Jitter: 50..100 % of the step, so nodes do not retry in step. */
    delay *= 0.5 + 0.5 * (double)(rnd(r) % 1000) / 1000.0;
    r->attempts++;
    ev_timer_set(&r->retry_w, delay / 1000.0, 0.);
    ev_timer_start(r->loop, &r->retry_w);
}

static bool is_str(const redisReply *e);
static void cache_rx_want(struct srv_redis *r);
static void cache_load(struct srv_redis *r, const char *cursor, size_t len);

static void go_up(struct srv_redis *r)
{
    unsigned k = 0;

    ev_timer_stop(r->loop, &r->connect_w);
    r->up = true;
    atomic_store(&r->up_flag, true);
    stat_set(&r->st->up, 1);
    if (r->ever_up)
        stat_add(&r->st->reconnects, 1);
    r->ever_up = true;
    r->told_down = false;
    r->attempts = 0;
    /* Node lease (server/redis/redis_lease.h): its tick is the first command on
     * the new connection, so that a first registration sees no join of
     * this run. */
    srv_lease_up(r->lease, r->loop, r->cmd);
    cache_rx_want(r);
    for (struct hub_chan_node *n = hub_chantab_next(&r->rx, NULL); n;
         n = hub_chantab_next(&r->rx, n)) {
        struct rxrec *x = (struct rxrec *)(void *)n;

        if (x->want) {
            send_subscribe(r, x);
            k++;
        }
    }
    srv_log(HUB_LOG_INFO, 0,
            "backplane: up, redis %s:%d db %d, node %s, %u channels "
            "subscribed", r->url.host, r->url.port, r->url.db, r->node_id, k);
    ev_timer_again(r->loop, &r->ping_w);
    /* After the SUBSCRIBEs: what is published from now on arrives. */
    cache_load(r, "0", 1);
    /* The directory: scripts, then this node's share (REJOIN). */
    if (r->dir)
        srv_redis_dir_up(r->dir);
}

static void setup_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;
    char why[160];

    if (!ac->data || (ac != r->cmd && ac != r->sub))
        return;
    if (!rep)
        return;
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "%.*s", (int)rep->len, rep->str);
        go_down(r, why);
        return;
    }
    if (r->setup_left && --r->setup_left == 0)
        go_up(r);
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
    struct srv_redis *r = ac->data;

    if (!r || status == REDIS_OK)
        return;
    /* hiredis frees ac after this callback. */
    if (ac == r->cmd)
        r->cmd = NULL;
    if (ac == r->sub)
        r->sub = NULL;
    go_down(r, ac->errstr[0] ? ac->errstr : "connect failed");
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    struct srv_redis *r = ac->data;

    (void)status;
    if (!r)
        return;
    if (ac == r->cmd)
        r->cmd = NULL;
    if (ac == r->sub)
        r->sub = NULL;
    go_down(r, ac->errstr[0] ? ac->errstr : "connection closed");
}

/* why (160 bytes) gets hiredis's reason when this returns NULL. */
static redisAsyncContext *open_one(struct srv_redis *r, bool select,
                                   char *why)
{
    redisAsyncContext *ac = redisAsyncConnect(r->url.host, r->url.port);
    char pass[SRV_SECRET_FILE_MAX + 1];

    if (!ac) {
        snprintf(why, 160, "out of memory");
        return NULL;
    }
    if (ac->err) {
        snprintf(why, 160, "%s", ac->errstr);
        redisAsyncFree(ac);
        return NULL;
    }
    ac->data = r;
    redisLibevAttach(r->loop, ac);
    redisAsyncSetConnectCallback(ac, connect_cb);
    redisAsyncSetDisconnectCallback(ac, disconnect_cb);
    /* The password in force now: a SIGHUP may have replaced it
     * (server/config/secret.h). hiredis formats the command at once, so the
     * copy is wiped right after. */
    if (!r->pass)
        snprintf(pass, sizeof(pass), "%s", r->url.pass);
    else if (srv_secret_copy(r->pass, pass, sizeof(pass)) < 0)
        pass[0] = '\0';
    if (pass[0]) {
        if (r->url.user[0])
            redisAsyncCommand(ac, setup_cb, r, "AUTH %s %s", r->url.user,
                              pass);
        else
            redisAsyncCommand(ac, setup_cb, r, "AUTH %s", pass);
        r->setup_left++;
    }
    explicit_bzero(pass, sizeof(pass));
    if (select && r->url.db) {
        redisAsyncCommand(ac, setup_cb, r, "SELECT %d", r->url.db);
        r->setup_left++;
    }
    redisAsyncCommand(ac, setup_cb, r, "PING");
    r->setup_left++;
    return ac;
}

static void start_connect(struct srv_redis *r)
{
    char why[160] = "cannot connect";

    r->setup_left = 0;
    r->cmd = open_one(r, true, why);
    r->sub = r->cmd ? open_one(r, false, why) : NULL;
    if (!r->cmd || !r->sub) {
        go_down(r, why);
        return;
    }
    ev_timer_set(&r->connect_w, CONNECT_TIMEOUT_S, 0.);
    ev_timer_start(r->loop, &r->connect_w);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    start_connect(w->data);
}

static void connect_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    go_down(w->data, "connect timed out");
}

static void ping_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;

    if (!reply || !ac->data || ac != r->cmd)
        return;
    hub_hist_add(&r->st->rtt, (now_ns() - r->ping_at_ns) / 1000);
    r->ping_out = false;
}

static void ping_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct srv_redis *r = w->data;

    (void)loop;
    (void)revents;
    if (!r->up || !r->cmd)
        return;
    if (r->ping_out) {
        if (now_ns() - r->ping_at_ns > PING_DEADLINE_NS)
            go_down(r, "no reply to PING for 3 s");
        return;
    }
    r->ping_at_ns = now_ns();
    if (redisAsyncCommand(r->cmd, ping_cb, r, "PING") == REDIS_OK)
        r->ping_out = true;
}

/* Publishing. */

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

static void publish_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;

    (void)ac;
    inflight_pop(r);
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        stat_add(&r->st->published, 1);
    else
        stat_add(&r->st->lost, 1);
}

static uint64_t next_seq(struct srv_redis *r, const char *name, size_t len)
{
    struct txrec *t = tab_find(&r->tx, name, len);

    if (!t) {
        if (r->tx.count >= MAX_TX_CHANNELS) {
            tx_clear(r);
            new_epoch(r);
        }
        t = tab_add(&r->tx, sizeof(*t), offsetof(struct txrec, name), name,
                    len);
        if (!t)
            return 0;
    }
    return ++t->seq;
}

static void send_event(struct srv_redis *r, const struct hub_cluster_op *op)
{
    uint64_t seq = next_seq(r, op->rchan, op->rchan_len);
    unsigned char *env;
    size_t len = 0;

    if (!seq || !r->up || !r->cmd || r->inflight >= MAX_INFLIGHT) {
        stat_add(&r->st->lost, 1);
        return;
    }
    env = hub_cluster_encode(r->c, op, r->epoch, seq, &len);
    if (!env || r->inflight_bytes + len > MAX_INFLIGHT_BYTES) {
        free(env);
        stat_add(&r->st->lost, 1);
        return;
    }
    if (redisAsyncCommand(r->cmd, publish_cb, r, "PUBLISH %b %b", op->rchan,
                          op->rchan_len, env, len) == REDIS_OK) {
        inflight_push(r, len);
    } else {
        stat_add(&r->st->lost, 1);
    }
    free(env);
}

/* Cache channels across nodes (hub/cluster/cluster_cache.h). */

/* Every node listens to the cache channel, whatever its subscribers. */
static void cache_rx_want(struct srv_redis *r)
{
    size_t len;
    const char *ch = hub_cluster_cache_channel(r->c, &len);
    struct rxrec *x = tab_find(&r->rx, ch, len);

    if (!x)
        x = tab_add(&r->rx, sizeof(*x), offsetof(struct rxrec, name), ch,
                    len);
    if (x)
        x->want = true;
}

static void cache_set_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;

    (void)ac;
    inflight_pop(r);
    if (!rep || rep->type != REDIS_REPLY_STATUS)
        stat_add(&r->st->cache_write_failed, 1);
}

/* SET before PUBLISH: a node loading the keys while this goes out reads
 * this entry or a later one, never one older than what it receives. */
static void send_cache(struct srv_redis *r, const struct hub_cluster_op *op)
{
    uint64_t seq = next_seq(r, op->rchan, op->bus_len);
    uint64_t ttl = hub_cluster_op_ttl(r->c, op);
    unsigned char *env = NULL;
    size_t len = 0;

    if (!seq || !r->up || !r->cmd || r->inflight + 2 > MAX_INFLIGHT ||
        !(env = hub_cluster_encode(r->c, op, r->epoch, seq, &len)) ||
        r->inflight_bytes + 2 * (uint64_t)len > MAX_INFLIGHT_BYTES) {
        free(env);
        stat_add(&r->st->lost, 1);
        stat_add(&r->st->cache_write_failed, 1);
        return;
    }
    /* Expired in the queue: the other nodes still deliver it (and keep it
     * for the 1 ms the envelope says), but there is nothing to store. */
    if (!ttl) {
        /* nothing */
    } else if (redisAsyncCommand(r->cmd, cache_set_cb, r, "SET %b %b PX %llu",
                                 op->rchan, op->rchan_len, env, len,
                                 (unsigned long long)ttl) == REDIS_OK) {
        inflight_push(r, len);
    } else {
        stat_add(&r->st->cache_write_failed, 1);
    }
    if (redisAsyncCommand(r->cmd, publish_cb, r, "PUBLISH %b %b", op->rchan,
                          op->bus_len, env, len) == REDIS_OK) {
        inflight_push(r, len);
    } else {
        stat_add(&r->st->lost, 1);
    }
    free(env);
}

/* One SCAN step over the cache keys with each key's name, value and
 * remaining life, in one round trip: the reply is {cursor, key, value,
 * pttl, ...}. */
static const char cache_scan_lua[] =
    "local s = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 200) "
    "local r = {s[1]} "
    "for _, k in ipairs(s[2]) do "
    "  local v = redis.pcall('GET', k) "
    "  local t = redis.call('PTTL', k) "
    "  if type(v) == 'string' and t > 0 then "
    "    r[#r + 1] = k; r[#r + 1] = v; r[#r + 1] = t "
    "  end "
    "end "
    "return r";

static void cache_load_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;
    const redisReply *cur;

    if (!rep || !ac->data || ac != r->cmd)
        return; /* the connection went: the next go_up loads again */
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        !is_str(rep->element[0])) {
        srv_log(HUB_LOG_WARN, 0, "backplane: cannot load the cache "
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
            stat_add(&r->st->bad, 1);
            continue;
        }
        if (hub_cluster_load(r->c, k->str, k->len, v->str, v->len,
                             (uint64_t)t->integer) == 1)
            r->n_loaded++;
    }
    cur = rep->element[0];
    if (!(cur->len == 1 && cur->str[0] == '0')) {
        cache_load(r, cur->str, cur->len);
        return;
    }
    srv_log(HUB_LOG_INFO, 0, "backplane: %llu cache entries loaded from "
            "redis", (unsigned long long)r->n_loaded);
}

static void cache_load(struct srv_redis *r, const char *cursor, size_t len)
{
    const char *pat = hub_cluster_cache_pattern(r->c);

    if (len == 1 && cursor[0] == '0')
        r->n_loaded = 0;

    if (!r->cmd ||
        redisAsyncCommand(r->cmd, cache_load_cb, r, "EVAL %s 0 %b %s",
                          cache_scan_lua, cursor, len, pat) != REDIS_OK)
        srv_log(HUB_LOG_WARN, 0, "backplane: cannot load the cache "
                "entries from redis");
}

static void do_sub(struct srv_redis *r, const struct hub_cluster_op *op)
{
    struct rxrec *x = tab_find(&r->rx, op->rchan, op->rchan_len);

    if (!x)
        x = tab_add(&r->rx, sizeof(*x), offsetof(struct rxrec, name),
                    op->rchan, op->rchan_len);
    if (!x)
        return; /* out of memory: this channel hears only local traffic */
    x->want = true;
    x->member = op->member;
    if (r->up && r->sub && !x->subscribed && !x->unsub_inflight)
        send_subscribe(r, x);
}

static void do_unsub(struct srv_redis *r, const struct hub_cluster_op *op)
{
    struct rxrec *x = tab_find(&r->rx, op->rchan, op->rchan_len);

    /* Its SUBSCRIBE's confirmation no longer counts (x->subscribed goes
     * false below): what waited for it must not wait forever. */
    if (r->dir)
        srv_redis_dir_unsubscribed(r->dir, op->rchan, op->rchan_len);
    if (op->member)
        hub_cluster_view_drop(r->c, op->app, op->rchan + op->name_off,
                              op->rchan_len - op->name_off);
    if (!x)
        return;
    x->want = false;
    set_confirmed(r, x, false);
    hub_cluster_rx_fini(&x->rx);
    if (x->subscribed && r->up && r->sub &&
        redisAsyncCommand(r->sub, subscribe_cb, r, "UNSUBSCRIBE %b", x->name,
                          (size_t)x->node.name_len) == REDIS_OK) {
        x->subscribed = false;
        x->unsub_inflight++;
        return;
    }
    x->subscribed = false;
    if (!x->unsub_inflight)
        rx_remove(r, x);
}

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    struct srv_redis *r = w->data;
    struct hub_cluster_op *op, *next;

    (void)loop;
    (void)revents;
    for (op = hub_cluster_take(r->c); op; op = next) {
        next = op->next;
        switch (op->kind) {
        case HUB_COP_SUB:
            do_sub(r, op);
            break;
        case HUB_COP_UNSUB:
            do_unsub(r, op);
            break;
        case HUB_COP_EVENT:
        case HUB_COP_TERMINATE:
        case HUB_COP_COUNT:
            send_event(r, op);
            break;
        case HUB_COP_CACHE:
            send_cache(r, op);
            break;
        case HUB_COP_JOIN:
        case HUB_COP_LEAVE:
        case HUB_COP_QUERY:
        case HUB_COP_ONLINE:
            if (r->dir && srv_redis_dir_op(r->dir, op))
                continue; /* held until its channel is confirmed */
            break;
        }
        hub_cluster_op_free(op);
    }
}

/* Receiving. */

static bool is_str(const redisReply *e)
{
    return e && (e->type == REDIS_REPLY_STRING ||
                 e->type == REDIS_REPLY_STATUS) && e->str;
}

static void subscribe_cb(redisAsyncContext *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;
    const redisReply *kind, *ch;
    struct rxrec *x;

    if (!rep || !ac->data || ac != r->sub)
        return;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
        !is_str(rep->element[0]) || !is_str(rep->element[1])) {
        stat_add(&r->st->bad, 1);
        return;
    }
    kind = rep->element[0];
    ch = rep->element[1];
    x = tab_find(&r->rx, ch->str, ch->len);
    if (!strcasecmp(kind->str, "message")) {
        if (rep->element[2]->type != REDIS_REPLY_STRING) {
            stat_add(&r->st->bad, 1);
            return;
        }
        if (x && x->member) {
            if (x->want)
                hub_cluster_member_msg(r->c, ch->str, ch->len,
                                       rep->element[2]->str,
                                       rep->element[2]->len);
            return;
        }
        hub_cluster_receive(r->c, x && x->want ? &x->rx : NULL, ch->str,
                            ch->len, rep->element[2]->str,
                            rep->element[2]->len);
    } else if (!strcasecmp(kind->str, "subscribe") && x) {
        if (x->subscribed) {
            set_confirmed(r, x, true);
            if (r->dir)
                srv_redis_dir_confirmed(r->dir, x->name, x->node.name_len);
        }
    } else if (!strcasecmp(kind->str, "unsubscribe") && x) {
        if (x->unsub_inflight)
            x->unsub_inflight--;
        if (!x->unsub_inflight) {
            if (x->want && r->up)
                send_subscribe(r, x);
            else if (!x->want)
                rx_remove(r, x);
        }
    }
}

/* The cluster-wide directory. */

void srv_redis_dir_rejoin(struct srv_redis *r)
{
    if (r->dir && r->up)
        srv_redis_dir_rejoin_now(r->dir);
}

static redisAsyncContext *srv_redis_cmd_ctx(struct srv_redis *r)
{
    return r->up ? r->cmd : NULL;
}

static bool srv_redis_chan_confirmed(struct srv_redis *r, const char *name,
                                     size_t len)
{
    struct rxrec *x = tab_find(&r->rx, name, len);

    return !x || x->confirmed;
}

/* Lifetime. */

static void stop_finish(void *arg)
{
    struct srv_redis *r = arg;
    struct ev_loop *loop = r->loop;

    srv_lease_down(r->lease);
    ev_timer_stop(loop, &r->retry_w);
    ev_timer_stop(loop, &r->connect_w);
    ev_timer_stop(loop, &r->ping_w);
    drop_connections(r);
    ev_async_stop(loop, &r->wake_w);
    ev_async_stop(loop, &r->stop_w);
    ev_break(loop, EVBREAK_ALL);
}

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    struct srv_redis *r = w->data;

    (void)revents;
    /* Node lease (server/redis/redis_lease.h): a clean stop deregisters at once,
     * after what the loops queued last (their leaves) went out. */
    wake_cb(loop, &r->wake_w, 0);
    if (srv_lease_leave(r->lease, stop_finish, r))
        return;
    stop_finish(r);
}

static void *thread_main(void *arg)
{
    struct srv_redis *r = arg;

    start_connect(r);
    ev_run(r->loop, 0);
    return NULL;
}

struct srv_redis *srv_redis_create(const struct srv_redis_url *u,
                                   const char *node_id,
                                   struct srv_secret *pass)
{
    struct srv_redis *r = calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    r->url = *u;
    r->pass = pass;
    r->node_id = strdup(node_id);
    r->loop = ev_loop_new(EVFLAG_AUTO);
    r->ring = calloc(MAX_INFLIGHT, sizeof(*r->ring));
    if (!r->node_id || !r->loop || !r->ring || hub_chantab_init(&r->tx, 64) ||
        hub_chantab_init(&r->rx, 64)) {
        if (r->loop)
            ev_loop_destroy(r->loop);
        hub_chantab_fini(&r->tx);
        hub_chantab_fini(&r->rx);
        free(r->ring);
        free(r->node_id);
        free(r);
        return NULL;
    }
    if (getrandom(&r->rng, sizeof(r->rng), 0) != sizeof(r->rng) || !r->rng)
        r->rng = now_ns() | 1;
    new_epoch(r);
    atomic_init(&r->up_flag, false);
    ev_async_init(&r->wake_w, wake_cb);
    r->wake_w.data = r;
    ev_async_init(&r->stop_w, stop_cb);
    r->stop_w.data = r;
    ev_timer_init(&r->retry_w, retry_cb, 0., 0.);
    r->retry_w.data = r;
    ev_timer_init(&r->connect_w, connect_timeout_cb, 0., 0.);
    r->connect_w.data = r;
    ev_timer_init(&r->ping_w, ping_timer_cb, 0., PING_EVERY_S);
    r->ping_w.data = r;
    ev_async_start(r->loop, &r->wake_w);
    ev_async_start(r->loop, &r->stop_w);
    return r;
}

void srv_redis_set_lease(struct srv_redis *r, struct srv_lease *l)
{
    r->lease = l;
}

int srv_redis_app_added(struct srv_redis *r, unsigned index, const char *id,
                        struct hub_app_live *live)
{
    return r ? srv_lease_app_added(r->lease, index, id, live) : 0;
}

void srv_redis_attach(struct srv_redis *r, struct hub_cluster *c)
{
    r->c = c;
    r->st = hub_cluster_stats(c);
    r->dir = srv_redis_dir_create(r, srv_redis_cmd_ctx,
                                  srv_redis_chan_confirmed, c, r->node_id);
    if (!r->dir)
        srv_log(HUB_LOG_WARN, 0, "backplane: out of memory for the "
                "directory; channel state stays per node");
}

void srv_redis_wake(void *ctx)
{
    struct srv_redis *r = ctx;

    ev_async_send(r->loop, &r->wake_w);
}

int srv_redis_start(struct srv_redis *r)
{
    int rc = pthread_create(&r->thread, NULL, thread_main, r);

    if (rc)
        return -rc;
    r->started = true;
    return 0;
}

bool srv_redis_up(const struct srv_redis *r)
{
    return r && atomic_load(&r->up_flag);
}

void srv_redis_stop(struct srv_redis *r)
{
    struct hub_chan_node *n, *nn;

    if (!r)
        return;
    if (r->started) {
        ev_async_send(r->loop, &r->stop_w);
        pthread_join(r->thread, NULL);
    } else {
        drop_connections(r);
    }
    /* Freeing the connections ran their callbacks; nothing is left. */
    tx_clear(r);
    for (n = hub_chantab_next(&r->rx, NULL); n; n = nn) {
        nn = hub_chantab_next(&r->rx, n);
        rx_remove(r, (struct rxrec *)(void *)n);
    }
    hub_chantab_fini(&r->tx);
    hub_chantab_fini(&r->rx);
    srv_redis_dir_free(r->dir);
    ev_loop_destroy(r->loop);
    srv_lease_destroy(r->lease);
    free(r->ring);
    free(r->node_id);
    free(r);
}
