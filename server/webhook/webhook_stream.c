/*
 * server/webhook/webhook_stream.c - the Redis connection of the cluster's
 * webhook stream (server/webhook/webhook_stream.h): the stream consumer
 * made and freed (a clean stop releases the leases it holds), its own
 * synchronous connection (server/redis/redis_sync.h) (connect, AUTH, SELECT,
 * the scripts' SCRIPT LOAD, the reconnect backoff; short timeouts, on the
 * sender thread, never a loop thread), one command (a script as EVALSHA,
 * again as EVAL on NOSCRIPT), and the names of an app's keys.
 *
 * The whole (docs/WEBHOOKS.md, "In a cluster"; webhook_stream.h names the
 * file of each part). The join / leave / reap scripts queue each app's
 * edges in Redis (P:wh:<app>, a stream; closing edges first wait out the
 * delay in P:whd:<app>, a ZSET). Here, on the sender thread:
 *
 * - client events and cache misses the loops saw are XADDed to the stream
 *   (the local engine takes them while Redis does not answer);
 * - per app, a lease P:whl:<app> (SET NX PX --node-lease, renewed a third
 *   of the way) says which node consumes the app's stream; only the
 *   holder moves due delayed edges to the stream (the pump) and reads;
 * - one consumer group per endpoint (hub_wh_stream_group: named from its URL),
 *   consumer = the node id; entries read become batches in the
 *   endpoint's FIFO (webhook_send.c sends them, with its retries); an
 *   entry is XACKed for the group when its batch is delivered or
 *   dead-lettered, or at once when the endpoint's filter does not take it;
 * - taking a lease claims every pending entry of each group (XAUTOCLAIM,
 *   min-idle 0: the lease says nobody else consumes) and reads this
 *   consumer's pending list from id 0 before new entries: a dead holder's
 *   undelivered batches are sent again (receivers deduplicate by event
 *   id, "<app id>-<entry id>");
 * - entries every group has acknowledged are trimmed (XTRIM MINID);
 * - after a reload (docs/WEBHOOKS.md, "Reloads"): a missing group starts
 *   at 0 only in a stream without groups, else at $; the holder destroys
 *   the groups no configured endpoint names; an app that lost its
 *   webhooks gives its lease up and lets its keys expire
 *   (server/redis/lua/wh_stream_retire.lua).
 *
 * Its scripts are files of server/redis/lua/ (wh_stream_*.lua), embedded
 * at build time (server/redis/redis_lua.h). Each is loaded (SCRIPT LOAD)
 * on every connect and called by its SHA (EVALSHA): an idle lease holder
 * sends 40 bytes a call, not the text (docs/SCALING.md). A script Redis
 * refused to load stays on EVAL; one Redis lost (NOSCRIPT: SCRIPT FLUSH, a
 * failover) is sent once more as EVAL and loaded again.
 *
 * Thread: the sender thread.
 */
#include "server/webhook/webhook_stream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "hub/base/backoff.h"
#include "hub/loop/stats.h"
#include "server/config/redis_url.h"
#include "server/redis/redis_conn.h"
#include "server/redis/redis_lua.h"
#include "server/lws/srv.h"

#define RETRY_MS 500               /* reconnects: doubled up to 10 s */
#define RETRY_MAX_MS 10000
#define IO_TIMEOUT_MS 500          /* every command; a sender, not a loop */

int srv_wh_stream_create(struct srv_wh *wh)
{
    const struct srv_config *cfg = wh->cfg;
    struct srv_whs *z;
    char err[300];

    if (!cfg->redis || !wh->srv->node_id)
        return 0;
    z = calloc(1, sizeof(*z));
    if (!z)
        return -1;
    /* Where and how, as the backplane (server/redis/redis_conn.h): the
     * password from --redis-password-file or the URL, replaced by a
     * SIGHUP and read at each connect (server/config/secret.h); TLS; the
     * sentinels, asked before each connect. */
    if (srv_redis_conn_from_config(&z->conn, cfg, &wh->srv->secrets, err,
                                   sizeof(err))) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "webhook_stream"),
                      "webhooks: redis stream: %s", err);
        free(z);
        return -1;
    }
    if (!(z->node = strdup(wh->srv->node_id)) ||
        !(z->prefix = strdup(cfg->redis_prefix))) {
        srv_redis_conn_fini(&z->conn);
        free(z->node);
        free(z);
        return -1;
    }
    z->lease_ms = cfg->node_lease_ms ? cfg->node_lease_ms : 3000;
    z->max_entries = cfg->webhook_stream_max ? cfg->webhook_stream_max
                                             : HUB_WHS_MAX_ENTRIES;
    snprintf(z->lease_txt, sizeof(z->lease_txt), "%" PRIu64, z->lease_ms);
    wh->whs = z;
    return 0;
}

static void disconnect(struct srv_whs *z)
{
    if (z->rc)
        srv_redis_sync_close(z->rc);
    z->rc = NULL;
    atomic_store(&z->up, false);
}

/* The connection broke: logged once, dropped (reconnected later). The
 * leases are renewed, or found lost, after the reconnect. */
static void lost(struct srv_whs *z)
{
    if (!z->told_down)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "webhook_stream_link",
                                .reason = "down"),
                      "webhooks: redis stream connection lost "
                      "(%s); edges wait in redis, client events "
                      "go to the local engine",
                      srv_redis_sync_error(z->rc)[0] ? srv_redis_sync_error(z->rc)
                      : "no reply");
    z->told_down = true;
    disconnect(z);
}

static const char *const script_text[SRV_WHS_SCRIPT_N] = {
    [SRV_WHS_ADD] = srv_redis_lua_wh_stream_add,
    [SRV_WHS_LEASE] = srv_redis_lua_wh_stream_lease,
    [SRV_WHS_RELEASE] = srv_redis_lua_wh_stream_release,
    [SRV_WHS_RETIRE] = srv_redis_lua_wh_stream_retire,
    [SRV_WHS_PUMP] = srv_redis_lua_wh_stream_pump,
    [SRV_WHS_CONSUMERS] = srv_redis_lua_wh_stream_consumers,
};

#define CMD_ARGS 16                /* the most words of a script call */

void srv__wh_stream_script(const struct srv_whs *z, enum srv_whs_script s,
                           bool eval, const char **av)
{
    if (z->sha[s][0] && !eval) {
        av[0] = "EVALSHA";
        av[1] = z->sha[s];
    } else {
        av[0] = "EVAL";
        av[1] = script_text[s];
    }
}

bool srv__wh_stream_is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && r->str &&
           !strncmp(r->str, "NOSCRIPT", 8);
}

/* The script argv calls (EVAL <one of the texts above>, by address: the
 * callers pass the texts themselves), or -1. */
static int script_of(int argc, const char **argv)
{
    if (argc < 2 || argc > CMD_ARGS || strcmp(argv[0], "EVAL"))
        return -1;
    for (int i = 0; i < SRV_WHS_SCRIPT_N; i++)
        if (argv[1] == script_text[i])
            return i;
    return -1;
}

/* SCRIPT LOAD of script s: its SHA, or "" (it goes as EVAL) when Redis
 * refused it. false when the connection broke. */
static bool load_one(struct srv_whs *z, enum srv_whs_script s)
{
    const char *av[3] = { "SCRIPT", "LOAD", script_text[s] };
    redisReply *r = srv_redis_sync_argv(z->rc, 3, av, NULL);

    z->sha[s][0] = '\0';
    if (!r)
        return false;
    if (r->type == REDIS_REPLY_STRING && r->len == 40)
        memcpy(z->sha[s], r->str, 41);
    freeReplyObject(r);
    return true;
}

void srv__wh_stream_noscript(struct srv_whs *z, enum srv_whs_script s)
{
    HUB_STAT_ADD(z->noscript, 1);
    if (!z->told_noscript)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "redis_script_failed",
                                .reason = "noscript"),
                      "webhooks: redis stream: a script was not in redis's "
                      "cache (NOSCRIPT: flushed, or a failover); sent as EVAL "
                      "and loaded again");
    z->told_noscript = true;
    if (z->rc && !load_one(z, s))
        lost(z);
}

/* A command; NULL (and the connection dropped when it broke). An EVAL of
 * a stream script goes as EVALSHA when its SHA is loaded, and once more
 * as EVAL when Redis answers NOSCRIPT (the script did not run). */
static redisReply *cmd(struct srv_whs *z, int argc, const char **argv,
                       const size_t *lens)
{
    int s = script_of(argc, argv);
    bool retry = false;
    redisReply *r;

    if (!z->rc)
        return NULL;
    if (s >= 0 && z->sha[s][0]) {
        const char *av[CMD_ARGS];
        size_t lv[CMD_ARGS];

        memcpy(av, argv, (size_t)argc * sizeof(*av));
        srv__wh_stream_script(z, (enum srv_whs_script)s, false, av);
        if (lens) {
            memcpy(lv, lens, (size_t)argc * sizeof(*lv));
            lv[0] = strlen(av[0]);
            lv[1] = strlen(av[1]);
        }
        r = srv_redis_sync_argv(z->rc, argc, av, lens ? lv : NULL);
        if (!srv__wh_stream_is_noscript(r)) {
            if (!r)
                lost(z);
            return r;
        }
        freeReplyObject(r);
        retry = true;
    }
    r = srv_redis_sync_argv(z->rc, argc, argv, lens);
    if (!r)
        lost(z);
    else if (retry)
        srv__wh_stream_noscript(z, (enum srv_whs_script)s);
    return r;
}

/* Every script loaded on a new connection: 0, or -1 when it broke. */
static int load_all(struct srv_whs *z)
{
    z->told_noscript = false;
    for (int i = 0; i < SRV_WHS_SCRIPT_N; i++)
        if (!load_one(z, (enum srv_whs_script)i))
            return -1;
    return 0;
}

static bool connect_now(struct srv_whs *z, uint64_t now)
{
    struct timeval tv = { IO_TIMEOUT_MS / 1000,
                          (IO_TIMEOUT_MS % 1000) * 1000 };
    char why[160];

    if (z->rc)
        return true;
    if (now < z->retry_ms)
        return false;
    /* A Redis that does not answer costs the sender at most one timeout
     * per attempt, and the attempts thin out (hub/base/backoff.h). */
    z->retry_ms = now + hub_backoff_step_ms(++z->attempts, RETRY_MS,
                                            RETRY_MAX_MS);
    /* Connected, AUTHed with the password in force now, SELECTed
     * (server/redis/redis_conn.h); a failed attempt is not logged. */
    z->rc = srv_redis_conn_sync(&z->conn, &tv, why, sizeof(why));
    if (!z->rc)
        return false;
    /* The scripts' SHAs, so every call sends 40 bytes, not the text: a
     * connection that breaks here is a failed attempt like any other. */
    if (load_all(z)) {
        disconnect(z);
        return false;
    }
    atomic_store(&z->up, true);
    z->attempts = 0;
    if (z->told_down)
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "webhook_stream_link",
                                .reason = "up"),
                      "webhooks: redis stream connection back");
    z->told_down = false;
    return true;
}

/* The connection above, for the stream's other files. */

bool srv__wh_stream_connect(struct srv_whs *z, uint64_t now)
{
    return connect_now(z, now);
}

redisReply *srv__wh_stream_cmd(struct srv_whs *z, int argc, const char **argv,
                               const size_t *lens)
{
    return cmd(z, argc, argv, lens);
}

void srv__wh_stream_lost(struct srv_whs *z)
{
    lost(z);
}

int srv__wh_stream_key(char *out, size_t n, const struct srv_whs *z,
                       const char *what, const char *app)
{
    int k = snprintf(out, n, "%s:%s:%s", z->prefix, what, app);

    return k < 0 || (size_t)k >= n ? -1 : 0;
}

void srv_wh_stream_free(struct srv_wh *wh)
{
    struct srv_whs *z = wh->whs;
    char k[512];

    if (!z)
        return;
    /* A clean stop hands the apps over at once, not after the lease. */
    for (unsigned i = 0; z->rc && wh->view && i < z->n_apps &&
                         i < wh->view->n;
         i++) {
        /* server/redis/lua/wh_stream_release.lua: only ours. */
        const char *av[5] = {"EVAL", srv_redis_lua_wh_stream_release, "1", k,
                             z->node};
        redisReply *r;

        if (!z->apps[i].held || !wh->view->apps[i].id ||
            srv__wh_stream_key(k, sizeof(k), z, "whl", wh->view->apps[i].id))
            continue;
        r = srv__wh_stream_cmd(z, 5, av, NULL);
        freeReplyObject(r);
    }
    disconnect(z);
    srv_redis_conn_fini(&z->conn);
    for (unsigned i = 0; i < z->n_apps; i++)
        free(z->apps[i].id);
    free(z->apps);
    free(z->node);
    free(z->prefix);
    free(z);
    wh->whs = NULL;
}
