/*
 * server/redis/cluster.c - with --redis, the hub is made with the cluster
 * backplane (hub/cluster/cluster.h) served by the Redis thread
 * (server/redis/redis.h); without, with the in-process one, exactly as a
 * single node always was.
 *
 * Start with Redis unreachable, refusing the password or not running: the
 * node serves its own clients at once and the thread keeps retrying; one
 * log line says so, and /readyz answers 503 until the node has joined
 * (srv_redis_cluster_ready, docs/SCALING.md "Readiness").
 *
 * Thread: main.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "hub/hub.h"
#include "hub/loop/backplane.h"
#include "hub/cluster/cluster_key.h"
#include "hub/cluster/cluster.h"
#include "server/redis/redis.h"
#include "server/redis/redis_conn.h"
#include "server/redis/redis_inspect.h"
#include "server/redis/redis_lease.h"
#include "server/redis/redis_ready.h"
#include "server/lws/srv.h"

/* hostname-pid-random, cut to what a node id may hold. */
static char *derive_node_id(void)
{
    char host[64] = "node", out[65];
    unsigned rnd = 0;
    size_t j = 0;

    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "node");
    host[sizeof(host) - 1] = '\0';
    if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd = (unsigned)getpid() * 2654435761u;
    /* Keep only the characters a node id allows. */
    for (size_t i = 0; host[i] && j < 40; i++) {
        char c = host[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '_')
            host[j++] = c;
    }
    host[j] = '\0';
    snprintf(out, sizeof(out), "%.40s-%ld-%04x", j ? host : "node",
             (long)getpid(), rnd & 0xffff);
    return strdup(out);
}

/* FNV-1a of the id, folded to 16 bits, never 0. */
static uint32_t node_tag(const char *id)
{
    uint64_t h = 1469598103934665603ull;

    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 1099511628211ull;
    h = (h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48)) & 0xffff;
    return h ? (uint32_t)h : 1;
}

/* --cluster-key-file, read once, at start (docs/SCALING.md: a rotation
 * restarts the nodes one by one, each accepting both keys). 0 or -1
 * (logged). */
static int set_cluster_key(struct srv *srv, const struct srv_config *cfg)
{
    char *k1 = NULL, *k2 = NULL;
    size_t l1 = 0, l2 = 0;
    struct hub_cluster_key *key = NULL;
    char err[200];

    if (!hub_cluster_key_read_file(cfg->cluster_key_file, &k1, &l1, &k2, &l2, err,
                            sizeof(err)))
        key = hub_cluster_key_create(k1, l1, k2, l2, cfg->redis_prefix,
                              srv->node_id,
                              cfg->node_lease_ms ? cfg->node_lease_ms : 3000);
    else
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "cluster_key"),
                      "--cluster-key-file: %s", err);
    if (k1)
        OPENSSL_cleanse(k1, l1);
    if (k2)
        OPENSSL_cleanse(k2, l2);
    free(k1);
    free(k2);
    if (!key)
        return -1;
    hub_cluster_set_key(srv->cluster, key);
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "cluster_key"),
                  "backplane: cluster key loaded (%d key%s); every envelope "
                  "is MACed and checked",
                  l2 ? 2 : 1, l2 ? "s, signing with the first" : "");
    return 0;
}

struct hub *srv_redis_cluster_hub_create(struct srv *srv)
{
    const struct srv_config *cfg = srv->cfg;
    struct srv_redis_conn conn;
    struct hub_backplane bp;
    struct hub_cluster_cfg cc;
    struct hub *h;
    char err[300], where[300];

    if (!cfg->redis)
        return hub_create(&srv->hcfg, hub_clock_monotonic());
    /* The URL was validated at load; what can fail here is TLS: a CA,
     * certificate or key OpenSSL refuses. */
    if (srv_redis_conn_from_config(&conn, cfg, &srv->secrets, err,
                                   sizeof(err))) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "redis_url"),
                      "--redis: %s", err);
        return NULL;
    }
    srv_redis_conn_describe(&conn, where, sizeof(where));
    srv->node_id = cfg->node_id ? strdup(cfg->node_id) : derive_node_id();
    if (!srv->node_id) {
        srv_redis_conn_fini(&conn);
        return NULL;
    }
    /* From here on every JSON log line names this node (docs/LOGS.md). */
    srv_log_set_node(srv->node_id);
    srv->hcfg.node_tag = node_tag(srv->node_id);
    srv->redis = srv_redis_create(&conn, srv->node_id);
    if (!srv->redis)
        return NULL;
    cc = (struct hub_cluster_cfg){
        .node_id = srv->node_id,
        .prefix = cfg->redis_prefix,
        .apps = srv->hcfg.apps,
        .n_apps = srv->hcfg.n_apps,
        .wake = srv_redis_wake,
        .wake_ctx = srv->redis,
    };
    srv->cluster = hub_cluster_create(&cc);
    if (!srv->cluster)
        goto fail;
    if (cfg->cluster_key_file && set_cluster_key(srv, cfg)) {
        hub_cluster_destroy(srv->cluster);
        goto fail;
    }
    hub_cluster_backplane(srv->cluster, &bp);
    h = hub_create_with(&srv->hcfg, hub_clock_monotonic(), &bp);
    if (!h) {
        hub_cluster_destroy(srv->cluster);
        goto fail;
    }
    hub_cluster_set_hub(srv->cluster, h);
    srv_redis_attach(srv->redis, srv->cluster);
    /* The socket inspector across nodes: without it (out of memory) the
     * console inspects this node only. */
    if (srv_redis_inspect_attach(srv->redis, h, cfg->redis_prefix,
                                 srv->node_id))
        srv_log(HUB_LOG_WARN, 0, "backplane: out of memory for the socket "
                "inspector; the console inspects this node only");
    /* Node lease and reaper (server/redis/redis_lease.h). */
    {
        const struct srv_redis_lease_cfg lc = {
            .node_id = srv->node_id,
            .prefix = cfg->redis_prefix,
            .lease_ms = cfg->node_lease_ms,
            .hub = h,
            .cluster = srv->cluster,
            .st = hub_cluster_stats(srv->cluster),
            .redis = srv->redis,
            .rejoin = srv_redis_dir_rejoin,
        };
        struct srv_redis_lease *lease = srv_redis_lease_create(&lc);

        if (!lease) {
            hub_destroy(h);
            srv->cluster = NULL;
            srv_redis_stop(srv->redis);
            srv->redis = NULL;
            return NULL;
        }
        srv_redis_set_lease(srv->redis, lease);
    }
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "redis_link", .reason = "connecting",
                            .url = where),
                  "backplane: node %s, redis %s db %d%s, prefix %s; connecting",
                  srv->node_id, where, conn.url.db,
                  conn.url.tls ? " over TLS" : "", cfg->redis_prefix);
    return h;
fail:
    srv->cluster = NULL;
    srv_redis_stop(srv->redis);
    srv->redis = NULL;
    return NULL;
}

int srv_redis_cluster_start(struct srv *srv)
{
    if (!srv->redis)
        return 0;
    if (srv_redis_start(srv->redis)) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "backplane_thread"),
                      "backplane: cannot start its thread");
        return -1;
    }
    return 0;
}

void srv_redis_cluster_stop(struct srv *srv)
{
    if (!srv->redis)
        return;
    /* No loop is left to publish; the thread's loop may now go. */
    hub_cluster_set_wake(srv->cluster, NULL, NULL);
    srv_redis_stop(srv->redis);
    srv->redis = NULL;
    free(srv->node_id);
    srv->node_id = NULL;
}

_Static_assert(SRV_READYZ_BODY_MAX >= SRV_REDIS_READY_BODY_MAX,
               "a /readyz body fits");

unsigned srv_redis_cluster_ready(const struct srv *srv, char *body,
                                 size_t cap)
{
    struct srv_redis_ready_view v;

    if (!srv->redis) {
        snprintf(body, cap, "ready\n");
        return 200;
    }
    srv_redis_ready_get(srv_redis_readiness(srv->redis), &v);
    return srv_redis_ready_answer(&v, srv->cfg->ready_requires_redis, body,
                                  cap);
}

const char *srv_redis_cluster_state(const struct srv *srv)
{
    if (!srv->redis)
        return NULL;
    return srv_redis_up(srv->redis) ? "up" : "down";
}
