/*
 * server/reload.c - SIGHUP reloads the configuration's apps, operator
 * tokens and Redis password while the loops run (issue 13, item 5; the
 * secret files, docs/CONFIG.md "Secrets in files").
 *
 * The configuration is read again from the same sources as at start (the
 * --config file, the environment and the flags of this process, so a flag
 * still wins over the file, then every secret file they name) and
 * validated as at start. Taken from it: the apps (their secrets
 * included, from "secret"/"secret_file" or --app-secret-file), the admin
 * and metrics tokens and the Redis password; every other option keeps its
 * start value (a restart applies them). A configuration that does not
 * load or validate (a secret file that cannot be read included) is
 * refused with one error line naming the option, the file and errno's
 * text, and nothing changes.
 *
 * Tokens and the password are replaced in their live copies
 * (server/config/secret.h): the next /metrics or console request and the next
 * Redis connect read them. Good apps are copied into owned hub apps
 * (hub_app_dup), built into the next table (hub_apptab_build: the same id
 * keeps its index) and published (hub_apps_publish, whose inbox nodes
 * move or close the sessions on each loop); the next signature check
 * reads the new secret. One line tells what changed, and one per app
 * whose key/secret pairs lost or gained a key (key rotation: the
 * connections on a removed key close with 4001, hub/loop/appswap.c).
 *
 * Thread: the main thread only (from its sigwait loop), one at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/appswap.h"
#include "hub/cluster/cluster.h"
#include "server/redis/redis.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook.h"

/* " (id, id, ...)" for up to 4 ids of the indices that changed as want,
 * into buf; "" when none. The ids are the operator's own text, but may
 * hold anything: the log line escapes control characters. */
static void ids_of(const struct hub_apptab *cur, const struct hub_apptab *next,
                   enum hub_app_change want, char *buf, size_t len)
{
    size_t o = 0;
    unsigned shown = 0, more = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < next->n; i++) {
        const struct hub_app *a;

        if (hub_apptab_change(cur, next, i) != want)
            continue;
        a = want == HUB_APP_REMOVED ? hub_apptab_get(cur, i)
                                    : hub_apptab_get(next, i);
        if (shown == 4) {
            more++;
            continue;
        }
        o += (size_t)snprintf(buf + o, len - o, "%s%s", shown ? ", " : " (",
                              a->id);
        if (o >= len - 2)
            o = len - 2; /* cut: leave room for the ")" */
        shown++;
    }
    if (more) {
        o += (size_t)snprintf(buf + o, len - o, ", %u more", more);
        if (o >= len - 2)
            o = len - 2;
    }
    if (shown)
        snprintf(buf + o, len - o, ")");
}

/* " k1, k2" for the keys of a that b lacks (b NULL: all of a's), into
 * buf; "" when none. Keys are public: they travel in every URL. */
static void keys_gone(const struct hub_app *a, const struct hub_app *b,
                      char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (unsigned k = 0; k < hub_app_n_keys(a) && o < len - 1; k++) {
        const char *key = hub_app_key_at(a, k);

        if (b && hub_app_key_find(b, key, strlen(key)) >= 0)
            continue;
        o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : " ", key);
    }
}

/* Key rotation: one line for each of the first few apps (present in both
 * tables) whose key/secret pairs lost or gained a key, said before the
 * publish, while cur is still ours: which keys go (their connections
 * close with 4001) and which come (they connect from now on). */
static void log_key_changes(const struct hub_apptab *cur,
                            const struct hub_apptab *next)
{
    char gone[400], added[400];
    unsigned shown = 0, more = 0;

    for (unsigned i = 0; i < cur->n; i++) {
        const struct hub_app *a = hub_apptab_get(cur, i);
        const struct hub_app *b = hub_apptab_get(next, i);

        if (hub_apptab_change(cur, next, i) != HUB_APP_CHANGED)
            continue;
        keys_gone(a, b, gone, sizeof(gone));
        keys_gone(b, a, added, sizeof(added));
        if (!gone[0] && !added[0])
            continue;
        if (shown == 4) {
            more++;
            continue;
        }
        shown++;
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "keys",
                                .app = b->id),
                      "keys: app %s:%s%s%s%s%s", b->id,
                gone[0] ? " removed" : "", gone,
                gone[0] ? " (its connections close with 4001)" : "",
                added[0] ? (gone[0] ? ", added" : " added") : "", added);
    }
    if (more)
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "keys"),
                      "keys: %u more apps' keys changed", more);
}

/* The tokens and the Redis password a SIGHUP read again, said in the log. */
static void reload_secrets(struct srv *srv, const struct srv_config *tmp)
{
    char secrets[96];

    if (srv_secrets_update(&srv->secrets, tmp, secrets, sizeof(secrets)))
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed", .reason = "secrets"),
                      "secrets: out of memory; some keep their "
                      "old value");
    if (secrets[0])
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "secrets"),
                      "secrets: reloaded: %s replaced%s", secrets,
                      strstr(secrets, "Redis")
                          ? " (the Redis password applies from the next "
                            "reconnect)"
                          : "");
    else if (srv_config_has_secret_files(tmp))
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "secrets"),
                      "secrets: reloaded: no change");
}

/*
 * The new app table next (built from v, n apps) replaces the hub's: the
 * cluster and the webhook sender learn of it in their order, the table is
 * published, and the line says what changed. 0, or -1 with the old apps
 * kept (next discarded or published, never leaked).
 */
static int apply_apps(struct srv *srv, struct srv_config *tmp,
                      struct hub_app **v, unsigned n,
                      struct hub_apptab *next, const char *from)
{
    const struct hub_apptab *cur = hub_apps(srv->hub);
    char added[160], removed[160], changed[160];
    struct hub_apptab_diff d;
    unsigned i, first_new;

    hub_apptab_diff(cur, next, &d);
    if (!d.added && !d.removed && !d.changed) {
        /* Webhooks are not part of the table's diff: the sender may still
         * have something to change. */
        srv_wh_reload_prepare(srv, tmp->apps, v, n, next->n);
        srv_wh_reload(srv, tmp->apps, v, n, next->n);
        hub_apptab_discard(next);
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "apps"),
                      "apps: reloaded from %s: no change (%u "
                                 "apps)", from, n);
        return 0;
    }
    /* With --redis the cluster must know a new app's id before any loop
     * can see the app (hub/cluster/cluster.h). */
    for (i = cur->n; srv->cluster && i < next->n; i++) {
        if (next->apps[i] &&
            hub_cluster_app_added(srv->cluster, i, next->apps[i]->id)) {
            hub_apptab_discard(next);
            srv_log_event(HUB_LOG_ERR, 0,
                          HUB_LOG_F(.event = "reload_failed",
                                    .reason = "out_of_memory"),
                          "apps: not reloaded, keeping the old "
                                    "ones: out of memory");
            return -1;
        }
    }
    /* And which of the apps' edges its scripts queue for the webhooks
     * (the first webhooks since the start also start the sender here). */
    srv_wh_reload_prepare(srv, tmp->apps, v, n, next->n);
    ids_of(cur, next, HUB_APP_ADDED, added, sizeof(added));
    ids_of(cur, next, HUB_APP_REMOVED, removed, sizeof(removed));
    ids_of(cur, next, HUB_APP_CHANGED, changed, sizeof(changed));
    log_key_changes(cur, next);
    /* After the publish cur may be freed at any moment: the names are
     * copied above, and its size here. */
    first_new = cur->n;
    if (hub_apps_publish(srv->hub, next)) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "out_of_memory"),
                      "apps: not reloaded, keeping the old ones: "
                                "out of memory");
        return -1;
    }
    /* The new apps' connections count cluster-wide from the next lease
     * tick. next stays valid here: only the next reload (this thread)
     * retires it. */
    for (i = first_new; srv->redis && i < next->n; i++) {
        if (next->apps[i] &&
            srv_redis_app_added(srv->redis, i, next->apps[i]->id,
                                next->live[i]))
            srv_log_event(HUB_LOG_WARN, 0,
                          HUB_LOG_F(.event = "out_of_memory",
                                    .app = next->apps[i]->id),
                          "apps: %s: out of memory, its "
                    "max_connections counts this node only",
                    next->apps[i]->id);
    }
    srv_wh_reload(srv, tmp->apps, v, n, next->n);
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "reload", .reason = "apps"),
                  "apps: reloaded from %s: %u added%s, %u "
                             "removed%s, %u changed%s, %u unchanged (%u apps)",
            from, d.added, added, d.removed, removed,
            d.changed, changed, d.unchanged, n);
    return 0;
}

int srv_config_reload(struct srv *srv)
{
    const char *from = srv->cfg->config_file ? srv->cfg->config_file
                                             : "the flags and environment";
    struct srv_config *tmp = calloc(1, sizeof(*tmp));
    const struct hub_apptab *cur = hub_apps(srv->hub);
    struct hub_apptab *next = NULL;
    struct hub_app **v = NULL;
    char err[512];
    unsigned n = 0, i;
    int rc = -1;

    /* Flags and environment are the same as at start: without a file
     * to read again nothing can have changed. */
    if (!srv->cfg->config_file && !srv_config_has_secret_files(srv->cfg)) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "nothing"),
                      "apps: SIGHUP: started without --config "
                      "or a secret file, no apps to reload");
        free(tmp);
        return 0;
    }
    if (!tmp) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "out_of_memory"),
                      "SIGHUP: configuration not reloaded, "
                      "keeping the old apps and secrets: out of "
                      "memory");
        return -1;
    }
    srv_config_defaults(tmp);
    if (srv_config_load(tmp, srv->argc, srv->argv, srv->envp, err,
                        sizeof(err)) ||
        srv_config_validate(tmp, err, sizeof(err))) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed", .reason = "config"),
                      "SIGHUP: configuration not reloaded, "
                      "keeping the old apps and secrets: %s", err);
        goto out;
    }
    /* The tokens and the Redis password first: they do not depend on the
     * apps, and the apps' steps below may stop early. */
    reload_secrets(srv, tmp);
    n = tmp->n_apps;
    v = calloc(n, sizeof(*v));
    for (i = 0; v && i < n; i++)
        if (!(v[i] = hub_app_dup(&tmp->apps[i])))
            break;
    if (!v || i < n || !(next = hub_apptab_build(cur, v, n))) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "out_of_memory"),
                      "apps: not reloaded, keeping the old ones: "
                                "out of memory");
        goto out;
    }
    rc = apply_apps(srv, tmp, v, n, next, from);
out:
    /* The table holds its own references; these are ours. */
    for (i = 0; v && i < n; i++)
        hub_app_unref(v[i]);
    free(v);
    srv_config_fini(tmp);
    free(tmp);
    return rc;
}
