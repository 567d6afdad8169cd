/*
 * server/redis/redis.c - the backplane thread of server/redis/redis.h:
 * its two connections to Redis (opened through server/redis/redis_conn.h,
 * set up, watched by a PING a second, dropped and retried with backoff),
 * the up and down transitions that the subscriptions, the cache entries,
 * the directory and the lease follow, the dispatch of the loops' ops
 * (publishing: server/redis/redis_pub.c; subscriptions:
 * server/redis/redis_sub.c; the directory: server/redis/redis_dir_ops.c),
 * and the thread's life. Its state is server/redis/redis_int.h.
 *
 * Thread: as server/redis/redis.h says.
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
#include <hiredis/hiredis.h>

#include "hub/base/backoff.h"
#include "hub/base/chantab.h"
#include "hub/base/rng.h"
#include "hub/loop/stats.h"
#include "server/redis/redis_conn.h"
#include "server/redis/redis_dir.h"
#include "server/redis/redis_dir_ops.h"
#include "server/redis/redis_dir_rejoin.h"
#include "server/redis/redis_int.h"
#include "server/redis/redis_lease.h"
#include "server/redis/redis_hist.h"
#include "server/redis/redis_inspect.h"
#include "server/redis/redis_pub.h"
#include "server/redis/redis_sub.h"
#include "server/lws/srv.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define CONNECT_TIMEOUT_S 5.0
#define PING_EVERY_S 1.0
#define PING_DEADLINE_NS (3ull * 1000000000ull)

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(struct srv_redis *r)
{
    /* Jitter, nothing secret. */
    return hub_xorshift64s(&r->rng);
}

/* Connection handling. */

static void start_connect(struct srv_redis *r);

/* Close both connections; no callback of ours acts on them after this
 * (their data is cleared; pending PUBLISH callbacks count lost). */
static void drop_connections(struct srv_redis *r)
{
    struct srv_redis_async *a = r->cmd, *b = r->sub;

    r->cmd = r->sub = NULL;
    if (a) {
        srv_redis_async_set_data(a, NULL);
        srv_redis_async_close(a);
    }
    if (b) {
        srv_redis_async_set_data(b, NULL);
        srv_redis_async_close(b);
    }
}

/* The address to dial: the primary the sentinels named, or NULL (the
 * URL's). */
static const struct srv_redis_addr *target_of(const struct srv_redis *r)
{
    return r->sentinel ? &r->at : NULL;
}

/* Where Redis is, for a log line. */
static void where_of(const struct srv_redis *r, char *out, size_t cap)
{
    if (r->sentinel && r->at.host[0])
        snprintf(out, cap, "%.255s:%d (master %.128s)", r->at.host,
                 r->at.port, r->conn.sentinels.master);
    else
        srv_redis_conn_describe(&r->conn, out, cap);
}

static void go_down(struct srv_redis *r, const char *why)
{
    char where[450];
    uint64_t delay;

    ev_timer_stop(r->loop, &r->connect_w);
    ev_timer_stop(r->loop, &r->ping_w);
    r->ping_out = false;
    /* Node lease (server/redis/redis_lease.h): before the connection goes. */
    srv_redis_lease_down(r->lease);
    /* The directory answers locally from now on; what waited on Redis is
     * answered so (the dropped connections fail their calls). */
    bool was_up = r->up;
    bool new_why = srv_redis_ready_down(&r->ready, why, was_up);

    if (r->c)
        hub_cluster_dir_set_up(r->c, false);
    r->up = false;
    drop_connections(r);
    if (r->sentinel)
        srv_redis_sentinel_cancel(r->sentinel);
    if (r->dir)
        srv_redis_dir_down(r->dir);
    if (was_up) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_link", .reason = "down"),
                      "backplane: down (%s); local delivery goes on, cross-node "
                      "messages are lost until Redis is back", why);
    } else if (!r->told_down) {
        where_of(r, where, sizeof(where));
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_link", .reason = "unreachable",
                                .url = where),
                      "backplane: redis %s unreachable (%s); serving local "
                      "subscribers only, retrying",
                      where, why);
    } else if (new_why) {
        where_of(r, where, sizeof(where));
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_link", .reason = "unreachable",
                                .url = where),
                      "backplane: redis %s still unreachable, now: %s; retrying",
                      where, why);
    }
    r->told_down = true;
    r->up = false;
    atomic_store(&r->up_flag, false);
    HUB_STAT_SET(r->st->up, 0);
    srv_redis_rx_down(r);
    /* 100 ms doubled up to 5 s, jittered to 50..100 % of the step so
     * that nodes do not retry in step (hub/base/backoff.h). */
    delay = hub_backoff_ms(++r->attempts, BACKOFF_MIN_MS, BACKOFF_MAX_MS,
                           rnd(r));
    ev_timer_set(&r->retry_w, (double)delay / 1000.0, 0.);
    ev_timer_start(r->loop, &r->retry_w);
}

static void go_up(struct srv_redis *r)
{
    char where[450];
    unsigned k;

    ev_timer_stop(r->loop, &r->connect_w);
    r->up = true;
    atomic_store(&r->up_flag, true);
    HUB_STAT_SET(r->st->up, 1);
    srv_redis_ready_up(&r->ready, r->dir != NULL); /* joined after REJOIN */
    if (r->ever_up)
        HUB_STAT_ADD(r->st->reconnects, 1);
    r->ever_up = true;
    r->told_down = false;
    r->attempts = 0;
    /* Node lease (server/redis/redis_lease.h): its tick is the first
     * command on the new connection, so that a first registration sees no
     * join of this run. */
    srv_redis_lease_up(r->lease, r->loop, r->cmd);
    k = srv_redis_rx_up(r);
    where_of(r, where, sizeof(where));
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "redis_link", .reason = "up",
                            .url = where),
                  "backplane: up, redis %s db %d%s, node %s, %u channels "
                  "subscribed",
                  where, r->conn.url.db, r->conn.tls ? " over TLS" : "",
                  r->node_id, k);
    /* Sentinel: hear of the next failover at once. */
    if (r->sentinel)
        srv_redis_sentinel_watch(r->sentinel);
    ev_timer_again(r->loop, &r->ping_w);
    /* After the SUBSCRIBEs: what is published from now on arrives. */
    srv_redis_cache_load(r, "0", 1);
    /* The directory: scripts, then this node's share (REJOIN). */
    if (r->dir)
        srv_redis_dir_up(r->dir);
}

static void setup_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    redisReply *rep = reply;
    char why[160];

    if (!srv_redis_async_data(ac) || (ac != r->cmd && ac != r->sub))
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

/* ROLE's answer: not the primary is a disconnect; else a setup reply. */
static void role_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;
    char why[200];

    if (reply && srv_redis_async_data(ac) && (ac == r->cmd || ac == r->sub) &&
        !srv_redis_conn_role_ok(reply, why, sizeof(why))) {
        go_down(r, why);
        return;
    }
    setup_cb(ac, reply, priv);
}

/* A connection ended on its own: refused, TLS refused, Redis gone. */
static void closed_cb(struct srv_redis_async *ac, void *data, const char *why)
{
    struct srv_redis *r = data;

    if (!r)
        return;
    /* ac is freed after this callback. */
    if (ac == r->cmd)
        r->cmd = NULL;
    if (ac == r->sub)
        r->sub = NULL;
    go_down(r, why);
}

/* One command of a connection's start, answered in setup_cb. */
struct setup_ctx {
    struct srv_redis *r;
    struct srv_redis_async *ac;
};

static int setup_send(void *ctx, int argc, const char **argv,
                      const size_t *lens)
{
    struct setup_ctx *sc = ctx;

    srv_redis_async_argv(sc->ac, setup_cb, sc->r, argc, argv, lens);
    sc->r->setup_left++;
    return 0;
}

/* why (160 bytes) gets the reason when this returns NULL. */
static struct srv_redis_async *open_one(struct srv_redis *r, bool select,
                                        char *why)
{
    struct srv_redis_async *ac =
        srv_redis_conn_async(&r->conn, r->loop, target_of(r), why, 160);
    struct setup_ctx s = { r, ac };

    if (!ac)
        return NULL;
    srv_redis_async_on(ac, closed_cb, select ? NULL : srv_redis_sub_push, r);
    /* AUTH with the password in force now (a SIGHUP may have replaced
     * it), and SELECT on the command connection (pub/sub knows no db). */
    srv_redis_conn_setup(&r->conn, select ? SRV_REDIS_SELECT_NONZERO
                                          : SRV_REDIS_SELECT_NONE,
                         setup_send, &s);
    srv_redis_async_cmd(ac, setup_cb, r, "PING");
    r->setup_left++;
    /* Sentinel: what they named must be the primary still. */
    if (srv_redis_conn_checks_role(&r->conn)) {
        srv_redis_async_cmd(ac, role_cb, r, "ROLE");
        r->setup_left++;
    }
    return ac;
}

static void open_both(struct srv_redis *r)
{
    const struct srv_redis_addr *at = target_of(r);
    char why[160] = "cannot connect";

    r->setup_left = 0;
    srv_redis_ready_connecting(&r->ready, at ? at->host : r->conn.url.host,
                               at ? at->port : r->conn.url.port);
    r->cmd = open_one(r, true, why);
    r->sub = r->cmd ? open_one(r, false, why) : NULL;
    if (!r->cmd || !r->sub)
        go_down(r, why);
}

/* The sentinels' answer: connect there, or go down with their reasons. */
static void asked_cb(void *ctx, const char *host, int port, const char *why)
{
    struct srv_redis *r = ctx;

    if (!host) {
        go_down(r, why);
        return;
    }
    snprintf(r->at.host, sizeof(r->at.host), "%s", host);
    r->at.port = port;
    open_both(r);
}

/* A failover: the sentinels promoted another primary. */
static void switched_cb(void *ctx, const char *host, int port, const char *why)
{
    struct srv_redis *r = ctx;

    (void)why;
    if (!strcmp(host, r->at.host) && port == r->at.port)
        return;
    srv_log_event(HUB_LOG_WARN, 0,
                  HUB_LOG_F(.event = "redis_link", .reason = "switch_master"),
                  "backplane: sentinels switched master %s to %s:%d; reconnecting",
                  r->conn.sentinels.master, host, port);
    if (r->up || r->cmd || r->sub) {
        r->attempts = 0;
        go_down(r, "the primary changed (+switch-master)");
    } else if (ev_is_active(&r->retry_w)) {
        /* Down and waiting out a backoff: the new primary is there now. */
        ev_timer_stop(r->loop, &r->retry_w);
        r->attempts = 0;
        start_connect(r);
    }
}

static void start_connect(struct srv_redis *r)
{
    ev_timer_set(&r->connect_w, CONNECT_TIMEOUT_S, 0.);
    ev_timer_start(r->loop, &r->connect_w);
    if (r->sentinel) {
        r->at.host[0] = '\0';
        srv_redis_sentinel_ask(r->sentinel, asked_cb, r);
    } else
        open_both(r);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    start_connect(w->data);
}

static void connect_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct srv_redis *r = w->data;
    bool tls = (r->cmd && srv_redis_async_in_handshake(r->cmd)) ||
               (r->sub && srv_redis_async_in_handshake(r->sub));

    (void)loop;
    (void)revents;
    /* rediss:// against a port that speaks plaintext never finishes the
     * handshake: say so rather than blame the connect. */
    go_down(r, tls ? "TLS handshake timed out (does Redis speak TLS on "
                     "this port?)"
                   : "connect timed out");
}

static void ping_cb(struct srv_redis_async *ac, void *reply, void *priv)
{
    struct srv_redis *r = priv;

    if (!reply || !srv_redis_async_data(ac) || ac != r->cmd)
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
    if (r->sentinel)
        srv_redis_sentinel_watch(r->sentinel);
    if (r->ping_out) {
        if (now_ns() - r->ping_at_ns > PING_DEADLINE_NS)
            go_down(r, "no reply to PING for 3 s");
        return;
    }
    r->ping_at_ns = now_ns();
    if (srv_redis_async_cmd(r->cmd, ping_cb, r, "PING") == 0)
        r->ping_out = true;
}

/* The loops' ops, in their order. */

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    struct srv_redis *r = w->data;
    struct hub_cluster_op *op, *next;

    (void)loop;
    (void)revents;
    /* The socket inspector's questions and answers (redis_inspect.c). */
    srv_redis_inspect_flush(r);
    for (op = hub_cluster_take(r->c); op; op = next) {
        next = op->next;
        switch (op->kind) {
        case HUB_COP_SUB:
            srv_redis_rx_sub(r, op);
            break;
        case HUB_COP_UNSUB:
            srv_redis_rx_unsub(r, op);
            break;
        case HUB_COP_EVENT:
        case HUB_COP_TERMINATE:
        case HUB_COP_COUNT:
            srv_redis_pub_event(r, op);
            break;
        case HUB_COP_CACHE:
            srv_redis_pub_cache(r, op);
            break;
        case HUB_COP_HREAD:
            srv_redis_hist_read(r, op);
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

/* The cluster-wide directory. */

void srv_redis_dir_rejoin(struct srv_redis *r)
{
    if (r->dir && r->up)
        srv_redis_dir_rejoin_now(r->dir);
}

static struct srv_redis_async *srv_redis_cmd_ctx(struct srv_redis *r)
{
    return r->up ? r->cmd : NULL;
}

/* Lifetime. */

static void stop_finish(void *arg)
{
    struct srv_redis *r = arg;
    struct ev_loop *loop = r->loop;

    srv_redis_lease_down(r->lease);
    ev_timer_stop(loop, &r->retry_w);
    ev_timer_stop(loop, &r->connect_w);
    ev_timer_stop(loop, &r->ping_w);
    drop_connections(r);
    /* The sentinels' connections go with the thread's loop. */
    srv_redis_sentinel_destroy(r->sentinel);
    r->sentinel = NULL;
    ev_async_stop(loop, &r->wake_w);
    ev_async_stop(loop, &r->stop_w);
    ev_break(loop, EVBREAK_ALL);
}

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    struct srv_redis *r = w->data;

    (void)revents;
    /* Node lease (server/redis/redis_lease.h): a clean stop deregisters
     * at once, after what the loops queued last (their leaves) went out. */
    wake_cb(loop, &r->wake_w, 0);
    if (srv_redis_lease_leave(r->lease, stop_finish, r))
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

struct srv_redis *srv_redis_create(struct srv_redis_conn *conn,
                                   const char *node_id)
{
    struct srv_redis *r = calloc(1, sizeof(*r));

    if (!r) {
        srv_redis_conn_fini(conn);
        return NULL;
    }
    r->conn = *conn; /* stolen: its TLS context is ours now */
    conn->tls = NULL;
    r->node_id = strdup(node_id);
    if (getenv("LUBDUB_TEST_DROP_RX"))
        r->test_drop_every = (unsigned)strtoul(getenv("LUBDUB_TEST_DROP_RX"),
                                               NULL, 10);
    r->loop = ev_loop_new(EVFLAG_AUTO);
    r->ring = calloc(MAX_INFLIGHT, sizeof(*r->ring));
    if (r->loop && r->conn.sentinels.n)
        r->sentinel = srv_redis_sentinel_create(r->loop, &r->conn.sentinels,
                                                switched_cb, r);
    /* The readiness last: nothing after it fails, so no path undoes it. */
    if (!r->node_id || !r->loop || !r->ring || hub_chantab_init(&r->tx, 64) ||
        hub_chantab_init(&r->rx, 64) ||
        (r->conn.sentinels.n && !r->sentinel) ||
        srv_redis_ready_init(&r->ready)) {
        srv_redis_sentinel_destroy(r->sentinel);
        srv_redis_conn_fini(&r->conn);
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
    srv_redis_new_epoch(r);
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

void srv_redis_set_lease(struct srv_redis *r, struct srv_redis_lease *l)
{
    r->lease = l;
}

int srv_redis_app_added(struct srv_redis *r, unsigned index, const char *id,
                        struct hub_app_live *live)
{
    return r ? srv_redis_lease_app_added(r->lease, index, id, live) : 0;
}

void srv_redis_attach(struct srv_redis *r, struct hub_cluster *c)
{
    r->c = c;
    r->st = hub_cluster_stats(c);
    hub_cluster_set_fill(c, srv_redis_hist_fill, r);
    srv_redis_ready_set_stats(&r->ready, r->st);
    r->dir = srv_redis_dir_create(r, srv_redis_cmd_ctx,
                                  srv_redis_rx_confirmed, c, r->node_id);
    srv_redis_dir_set_ready(r->dir, &r->ready);
    if (!r->dir)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "out_of_memory"),
                      "backplane: out of memory for the "
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

const struct srv_redis_ready *srv_redis_readiness(const struct srv_redis *r)
{
    return &r->ready;
}

void srv_redis_stop(struct srv_redis *r)
{
    if (!r)
        return;
    if (r->started) {
        ev_async_send(r->loop, &r->stop_w);
        pthread_join(r->thread, NULL);
    } else {
        drop_connections(r);
    }
    /* Freeing the connections ran their callbacks; nothing is left. */
    srv_redis_tx_clear(r);
    srv_redis_rx_clear(r);
    hub_chantab_fini(&r->tx);
    hub_chantab_fini(&r->rx);
    srv_redis_dir_free(r->dir);
    srv_redis_inspect_fini(r);
    srv_redis_sentinel_destroy(r->sentinel);
    ev_loop_destroy(r->loop);
    srv_redis_conn_fini(&r->conn);
    srv_redis_lease_destroy(r->lease);
    srv_redis_ready_fini(&r->ready);
    free(r->ring);
    free(r->node_id);
    free(r);
}
