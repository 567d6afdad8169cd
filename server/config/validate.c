/*
 * server/config/validate.c - the checks on a loaded configuration
 * (server/config/validate.h): every option's range, then the rules across
 * options, the files that must be readable or writable, --redis and the
 * names the cluster uses (the TLS and Sentinel options with them), the
 * operator tokens, the trusted proxies and the apps. Each refusal is one
 * line naming the option as a flag. One change it makes: --redis-sentinel
 * without --redis sets cfg->redis (srv__validate_cluster).
 *
 * Thread: main thread, before any loop starts, and at a reload.
 */
#include "server/config/validate.h"
#include "server/config/config_error.h"
#include "server/config/options.h"
#include "server/config/redis_url.h"
#include "server/config/secret.h"
#include "server/config/settings.h"
#include "server/config/value.h"
#include "hub/cluster/cluster_key.h"
#include "server/base/peeraddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "hub/app/app.h"

/* 127.0.0.0/8, ::1, ::ffff:127.x.x.x or "localhost". */
static bool srv__is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (!strcasecmp(host, "localhost"))
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        static const unsigned char v4mapped[12] = {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
        };

        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return true;
        return !memcmp(a6.s6_addr, v4mapped, 12) && a6.s6_addr[12] == 127;
    }
    return false;
}

static int srv__check_readable(const char *name, const char *path, char *err,
                               size_t errlen)
{
    char flag[64];

    if (access(path, R_OK)) {
        srv_config_err(err, errlen, "%s: cannot read \"%s\": %s",
                 srv__flag(name, flag, sizeof(flag)), path, strerror(errno));
        return -EINVAL;
    }
    return 0;
}

/* 0 when dir is a writable directory, or does not exist and its parent
 * is one (the hub makes it at start); else -1 with errno set. */
static int srv__state_dir_usable(const char *dir)
{
    char parent[4096];
    const char *slash;
    size_t n;

    if (access(dir, F_OK) == 0)
        return access(dir, R_OK | W_OK | X_OK);
    if (errno != ENOENT)
        return -1;
    slash = strrchr(dir, '/');
    if (!slash)
        return access(".", W_OK | X_OK);
    n = slash == dir ? 1 : (size_t)(slash - dir);
    if (n >= sizeof(parent)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(parent, dir, n);
    parent[n] = '\0';
    if (access(parent, W_OK | X_OK))
        return -1;
    errno = ENOENT;
    return 0;
}

/*
 * apps[i]'s id against hub_app_id_check() (hub/app/app.h). The default app
 * is named by its option, a file's app by its place in "apps".
 */
static int srv__check_app_id(const struct srv_config *cfg, unsigned i,
                             char *err, size_t errlen)
{
    const char *id = cfg->apps[i].id;
    char who[64], shown[16];
    size_t bad;
    int rc = hub_app_id_check(id, &bad);

    if (!rc)
        return 0;
    if (cfg->apps == &cfg->app0)
        srv__flag("app_id", who, sizeof(who));
    else
        snprintf(who, sizeof(who), "apps[%u]", i);
    if (rc == -EINVAL) {
        srv_config_err(err, errlen, "%s: app id \"%.80s%s\" is %zu "
                       "characters long; an app id is 1 to %d characters "
                       "of %s", who, id, bad > 80 ? "..." : "", bad,
                       HUB_APP_ID_MAX, HUB_APP_ID_CHARS);
        return -EINVAL;
    }
    /* The bad byte spelled so that a space or a byte past ASCII shows. */
    if (id[bad] > ' ' && id[bad] < 0x7f)
        snprintf(shown, sizeof(shown), "'%c'", id[bad]);
    else
        snprintf(shown, sizeof(shown), "byte 0x%02x",
                 (unsigned)(unsigned char)id[bad]);
    srv_config_err(err, errlen, "%s: app id \"%s\" has %s at offset %zu, "
                   "which app ids may not hold; an app id is 1 to %d "
                   "characters of %s%s", who, id, shown, bad,
                   HUB_APP_ID_MAX, HUB_APP_ID_CHARS,
                   id[bad] == ':' ? " (a ':' would let two apps' Redis "
                                    "channel names collide)" : "");
    return -EINVAL;
}

/*
 * Every key of apps[i] (each of its key/secret pairs': key rotation) is
 * non-empty, has a non-empty secret, and is used by no pair before it, of
 * apps[i] or of an app before it: a key names one app and one pair
 * (hub/app/apptab.h finds the app by it).
 */
static int srv__check_app_keys(const struct srv_config *cfg, unsigned i,
                               char *err, size_t errlen)
{
    const struct hub_app *a = &cfg->apps[i];
    unsigned n = hub_app_n_keys(a);

    if (n > HUB_APP_KEYS_MAX) {
        srv_config_err(err, errlen, "apps[%u] (id \"%s\"): %u keys; at "
                       "most %u", i, a->id, n, (unsigned)HUB_APP_KEYS_MAX);
        return -EINVAL;
    }
    for (unsigned k = 0; k < n; k++) {
        const char *key = hub_app_key_at(a, k);
        const char *secret = hub_app_secret_at(a, k);

        if (!*key || !secret || !*secret) {
            srv_config_err(err, errlen, "apps[%u] (id \"%s\"): keys[%u]: "
                           "key and secret must not be empty", i, a->id, k);
            return -EINVAL;
        }
        for (unsigned j = 0; j <= i; j++) {
            const struct hub_app *b = &cfg->apps[j];
            int at = hub_app_key_find(b, key, strlen(key));

            if (at < 0 || (j == i && (unsigned)at >= k))
                continue;
            if (j == i)
                srv_config_err(err, errlen, "apps[%u] (id \"%s\"): key "
                               "\"%s\" is already used by keys[%d] of the "
                               "same app", i, a->id, key, at);
            else
                srv_config_err(err, errlen, "apps[%u] (id \"%s\"): key "
                               "\"%s\" is already used by apps[%u] (id "
                               "\"%s\")", i, a->id, key, j, b->id);
            return -EINVAL;
        }
    }
    return 0;
}

/* Does any pair of a have the default secret? */
static bool srv__default_secret(const struct hub_app *a)
{
    for (unsigned k = 0; k < hub_app_n_keys(a); k++)
        if (!strcmp(hub_app_secret_at(a, k), SRV_DEFAULT_SECRET))
            return true;
    return false;
}

static int srv__validate_apps(const struct srv_config *cfg, char *err,
                              size_t errlen)
{
    unsigned i, j;
    int rc;

    if (cfg->n_apps < 1) {
        srv_config_err(err, errlen, "apps: %u apps configured; need at least 1",
                 cfg->n_apps);
        return -EINVAL;
    }
    for (i = 0; i < cfg->n_apps; i++) {
        const struct hub_app *a = &cfg->apps[i];

        if (!a->id || !*a->id || !a->key || !*a->key || !a->secret ||
            !*a->secret) {
            srv_config_err(err, errlen, "apps[%u]: id, key and secret must not be "
                     "empty", i);
            return -EINVAL;
        }
        rc = srv__check_app_id(cfg, i, err, errlen);
        if (rc)
            return rc;
        for (j = 0; j < i; j++) {
            const struct hub_app *b = &cfg->apps[j];

            if (!strcmp(a->id, b->id)) {
                srv_config_err(err, errlen, "apps[%u]: id \"%s\" is already used "
                         "by apps[%u]", i, a->id, j);
                return -EINVAL;
            }
        }
        rc = srv__check_app_keys(cfg, i, err, errlen);
        if (rc)
            return rc;
    }
    if (cfg->allow_default_secret || !cfg->bind ||
        srv__is_loopback(cfg->bind))
        return 0;
    for (i = 0; i < cfg->n_apps; i++) {
        if (!srv__default_secret(&cfg->apps[i]))
            continue;
        srv_config_err(err, errlen, "app \"%s\" uses the default secret \"%s\" on "
                 "the public bind %s; set a real secret with "
                 "--app-secret-file or LUBDUB_APP_SECRET (or \"secret_file\" "
                 "or \"secret\" in the config file's \"apps\"), or pass "
                 "--allow-default-secret for a throwaway setup",
                 cfg->apps[i].id, SRV_DEFAULT_SECRET, cfg->bind);
        return -EINVAL;
    }
    return 0;
}

/* 1..max characters of A-Z a-z 0-9 and extra. */
static bool srv__name_ok(const char *s, size_t max, const char *extra)
{
    size_t n = s ? strlen(s) : 0;

    if (!n || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr(extra, c)))
            return false;
    }
    return true;
}

/* v as srv__name_ok(v, max, extra) wants it, or -EINVAL with one line
 * naming the option and the characters it takes. */
static int srv__check_name(const char *opt, const char *v, size_t max,
                           const char *extra, char *err, size_t errlen)
{
    char a[64], shown[32] = "";

    if (srv__name_ok(v, max, extra))
        return 0;
    for (size_t i = 0; extra[i] && i < sizeof(shown) / 2 - 1; i++) {
        shown[2 * i] = ' ';
        shown[2 * i + 1] = extra[i];
        shown[2 * i + 2] = '\0';
    }
    srv_config_err(err, errlen, "%s: 1 to %zu characters of A-Z a-z 0-9%s",
                   srv__flag(opt, a, sizeof(a)), max, shown);
    return -EINVAL;
}

/* The URL a node with --redis-sentinel and no --redis is clustered with:
 * plaintext, no AUTH, db 0; the sentinels give the address. */
#define SRV_SENTINEL_DEFAULT_URL "redis://localhost:6379/0"

/*
 * The --redis-tls-* options: each needs a rediss:// URL (tls, of the URL
 * in force; implied: the URL is SRV_SENTINEL_DEFAULT_URL, which the
 * operator did not write), the client certificate and key come together,
 * and every file is readable.
 */
static int srv__validate_redis_tls(const struct srv_config *cfg, bool tls,
                                   bool implied, char *err, size_t errlen)
{
    static const char *const opts[] = {
        "redis_tls_ca_file", "redis_tls_cert_file", "redis_tls_key_file",
        "redis_tls_server_name",
    };
    const char *vals[] = {
        cfg->redis_tls_ca_file, cfg->redis_tls_cert_file,
        cfg->redis_tls_key_file, cfg->redis_tls_server_name,
    };
    char a[64], b[64];
    int rc = 0;

    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        if (!vals[i] || tls)
            continue;
        srv_config_err(err, errlen, "%s: needs a rediss:// URL in %s%s",
                       srv__flag(opts[i], a, sizeof(a)),
                       srv__flag("redis", b, sizeof(b)),
                       !cfg->redis ? ", which is unset" :
                       implied ? " (with --redis-sentinel, --redis "
                                 "rediss://localhost/0 asks for TLS)"
                               : ", not redis://");
        return -EINVAL;
    }
    if (!cfg->redis_tls_cert_file != !cfg->redis_tls_key_file) {
        bool cert = cfg->redis_tls_cert_file != NULL;

        srv_config_err(err, errlen, "%s: required when %s is set",
                       srv__flag(cert ? "redis_tls_key_file"
                                      : "redis_tls_cert_file", a, sizeof(a)),
                       srv__flag(cert ? "redis_tls_cert_file"
                                      : "redis_tls_key_file", b, sizeof(b)));
        return -EINVAL;
    }
    for (size_t i = 0; !rc && i < 3; i++)
        if (vals[i])
            rc = srv__check_readable(opts[i], vals[i], err, errlen);
    if (!rc && cfg->redis_tls_server_name)
        rc = srv__check_name("redis_tls_server_name",
                             cfg->redis_tls_server_name, 255, ".-_:", err,
                             errlen);
    return rc;
}

/* The option named first needs the second: one line saying so. */
static int srv__needs(const char *opt, const char *needed, char *err,
                      size_t errlen)
{
    char a[64], b[64];

    srv_config_err(err, errlen, "%s: needs %s", srv__flag(opt, a, sizeof(a)),
                   srv__flag(needed, b, sizeof(b)));
    return -EINVAL;
}

/* --redis-sentinel with --redis-master (each needs the other), the list
 * parsing, the master's name, and the sentinels' password file. */
static int srv__validate_sentinel(const struct srv_config *cfg, char *err,
                                  size_t errlen)
{
    struct srv_redis_addr addrs[SRV_REDIS_SENTINELS_MAX];
    char a[64], why[200];
    size_t n;

    if (cfg->redis_sentinel && !cfg->redis_master)
        return srv__needs("redis_sentinel", "redis_master", err, errlen);
    if (cfg->redis_master && !cfg->redis_sentinel)
        return srv__needs("redis_master", "redis_sentinel", err, errlen);
    if (cfg->redis_sentinel_password_file && !cfg->redis_sentinel)
        return srv__needs("redis_sentinel_password_file", "redis_sentinel",
                          err, errlen);
    if (!cfg->redis_sentinel)
        return 0;
    if (srv_redis_sentinels_parse(cfg->redis_sentinel, addrs,
                                  SRV_REDIS_SENTINELS_MAX, &n, why,
                                  sizeof(why))) {
        srv_config_err(err, errlen, "%s: %s",
                       srv__flag("redis_sentinel", a, sizeof(a)), why);
        return -EINVAL;
    }
    return srv__check_name("redis_master", cfg->redis_master, 128, "._-",
                           err, errlen);
}

/*
 * --redis, its TLS and Sentinel options, --node-id, --redis-prefix
 * (server/config/redis_url.h). With --redis-sentinel and no --redis, the
 * node is clustered as if --redis SRV_SENTINEL_DEFAULT_URL had been
 * given: cfg->redis is set to it (owned, freed like any option's value),
 * so that every "cfg->redis set: clustered" test in the server holds.
 */
static int srv__validate_cluster(struct srv_config *cfg, char *err,
                                 size_t errlen)
{
    struct srv_redis_url u = {.tls = false};
    bool implied = false;
    char a[64], why[200];
    int rc;

    if (cfg->redis_sentinel && !cfg->redis) {
        if (!(cfg->redis = strdup(SRV_SENTINEL_DEFAULT_URL))) {
            srv_config_err(err, errlen, "%s: out of memory",
                           srv__flag("redis_sentinel", a, sizeof(a)));
            return -ENOMEM;
        }
        implied = true;
    }
    /* Only the scheme is wanted here: the password is wiped at once. */
    rc = cfg->redis ? srv_redis_url_parse(cfg->redis, &u, why, sizeof(why))
                    : 0;
    explicit_bzero(u.pass, sizeof(u.pass));
    if (rc) {
        srv_config_err(err, errlen, "%s: %s", srv__flag("redis", a, sizeof(a)),
                 why);
        return -EINVAL;
    }
    rc = srv__validate_sentinel(cfg, err, errlen);
    if (!rc)
        rc = srv__validate_redis_tls(cfg, u.tls, implied, err, errlen);
    if (rc)
        return rc;
    if (cfg->redis_password_file && !cfg->redis)
        return srv__needs("redis_password_file", "redis", err, errlen);
    if (cfg->node_id)
        rc = srv__check_name("node_id", cfg->node_id, 64, "._-", err,
                             errlen);
    if (!rc)
        rc = srv__check_name("redis_prefix", cfg->redis_prefix, 64, "._-:",
                             err, errlen);
    if (rc)
        return rc;
    if (cfg->cluster_key_file) {
        /* Read now too, so that --check-config and the start refuse a
         * bad file with one line (server/redis/cluster.c reads it again). */
        char *k1, *k2, kwhy[256];
        size_t l1, l2;

        if (hub_cluster_key_read_file(cfg->cluster_key_file, &k1, &l1, &k2, &l2,
                               kwhy, sizeof(kwhy))) {
            srv_config_err(err, errlen, "%s: %s",
                     srv__flag("cluster_key_file", a, sizeof(a)), kwhy);
            return -EINVAL;
        }
        OPENSSL_cleanse(k1, l1);
        if (k2)
            OPENSSL_cleanse(k2, l2);
        free(k1);
        free(k2);
    }
    return 0;
}

/* Tokens go in an HTTP header: printable ASCII, no spaces, long enough
 * not to be guessed. */
static int srv__check_token(const char *name, const char *tok, char *err,
                            size_t errlen)
{
    char a[64];
    size_t n = tok ? strlen(tok) : 0;

    if (!tok)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] <= ' ' || tok[i] > '~') {
            srv_config_err(err, errlen, "%s: only printable characters, no spaces",
                     srv__flag(name, a, sizeof(a)));
            return -EINVAL;
        }
    }
    if (n < 16 || n > SRV_SECRET_TOKEN_MAX) {
        srv_config_err(err, errlen, "%s: %zu characters, need 16 to %d",
                 srv__flag(name, a, sizeof(a)), n, SRV_SECRET_TOKEN_MAX);
        return -EINVAL;
    }
    return 0;
}

/* --trusted-proxies: a list server/base/peeraddr.c can parse. */
static int srv__check_proxies(const struct srv_config *cfg, char *err,
                              size_t errlen)
{
    struct srv_peeraddr_cidrs set;
    char a[64], why[160];

    if (!cfg->trusted_proxies ||
        !srv_peeraddr_cidrs_parse(&set, cfg->trusted_proxies, why,
                                  sizeof(why)))
        return 0;
    srv_config_err(err, errlen, "%s: %s",
                   srv__flag("trusted_proxies", a, sizeof(a)), why);
    return -EINVAL;
}

/* --metrics-port, --metrics-bind, --metrics-token, --admin-token. */
static int srv__check_operator(const struct srv_config *cfg, char *err,
                               size_t errlen)
{
    char a[64], b[64];
    int rc;

    if (cfg->metrics_bind && !cfg->metrics_port) {
        srv_config_err(err, errlen, "%s: needs %s",
                 srv__flag("metrics_bind", a, sizeof(a)),
                 srv__flag("metrics_port", b, sizeof(b)));
        return -EINVAL;
    }
    if (cfg->metrics_port && cfg->metrics_port == cfg->port) {
        srv_config_err(err, errlen, "%s: %u is --port too",
                 srv__flag("metrics_port", a, sizeof(a)),
                 (unsigned)cfg->metrics_port);
        return -EINVAL;
    }
    /* A token read from a file is named by the file's option. */
    rc = srv__check_token(cfg->metrics_token_file ? "metrics_token_file"
                                                  : "metrics_token",
                          cfg->metrics_token, err, errlen);
    if (!rc)
        rc = srv__check_token(cfg->admin_token_file ? "admin_token_file"
                                                    : "admin_token",
                              cfg->admin_token, err, errlen);
    return rc;
}

/* Every single-option range and non-empty string again, for structs not
 * filled by load. */
static int srv__check_ranges(const struct srv_config *cfg, char *err,
                             size_t errlen)
{
    const struct srv_option_desc *opts;
    size_t n_opts = srv_config_options(&opts);
    char a[64], va[32];
    size_t i;

    for (i = 0; i < n_opts; i++) {
        const struct srv_option_desc *d = &opts[i];
        uint64_t v;

        if (d->type == SRV_OPT_STRING && !(d->flags & SRV_OPTF_NULLABLE) &&
            !(d->flags & SRV_OPTF_DEFAULT_APP)) {
            const char *s = *(char *const *)((const char *)cfg + d->offset_);

            if (!s || !*s) {
                srv_config_err(err, errlen, "%s: must not be empty",
                         srv__flag(d->name, a, sizeof(a)));
                return -EINVAL;
            }
        }
        if (d->type != SRV_OPT_UINT && d->type != SRV_OPT_DURATION &&
            d->type != SRV_OPT_SECONDS && d->type != SRV_OPT_SIZE)
            continue;
        v = srv__get_uint(cfg, d);
        if (v < d->min || v > d->max) {
            srv__fmt_value(d, v, va, sizeof(va));
            return srv__range_err(d, srv__flag(d->name, a, sizeof(a)), va,
                                  err, errlen);
        }
    }
    return 0;
}

/* The host side: the TLS pair, the descriptor limit, the files that must
 * be readable and the state directory. */
static int srv__check_host(const struct srv_config *cfg, char *err,
                           size_t errlen)
{
    char a[64], b[64];
    int rc;

    if (!cfg->tls_cert != !cfg->tls_key) {
        srv_config_err(err, errlen, "%s: required when %s is set",
                 srv__flag(cfg->tls_cert ? "tls_key" : "tls_cert", a,
                           sizeof(a)),
                 srv__flag(cfg->tls_cert ? "tls_cert" : "tls_key", b,
                           sizeof(b)));
        return -EINVAL;
    }
    if (cfg->fd_limit && cfg->fd_limit < 64) {
        /* Not the range's minimum: 0 is allowed (derive one). */
        srv_config_err(err, errlen, "%s: %u is too few file descriptors "
                       "for the hub itself (0 derives one, or at least 64)",
                       srv__flag("fd_limit", a, sizeof(a)), cfg->fd_limit);
        return -EINVAL;
    }
    if (cfg->tls_cert) {
        rc = srv__check_readable("tls_cert", cfg->tls_cert, err, errlen);
        if (!rc)
            rc = srv__check_readable("tls_key", cfg->tls_key, err, errlen);
        if (rc)
            return rc;
    }
    if (cfg->webhook_ca_file) {
        rc = srv__check_readable("webhook_ca_file", cfg->webhook_ca_file,
                                 err, errlen);
        if (rc)
            return rc;
    }
    if (cfg->state_dir && srv__state_dir_usable(cfg->state_dir)) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a writable directory "
                 "(nor can it be made): %s",
                 srv__flag("state_dir", a, sizeof(a)), cfg->state_dir,
                 strerror(errno));
        return -EINVAL;
    }
    return 0;
}

/* The tick within the ping interval; each queue bound above the one it
 * must hold. */
static int srv__check_sizes(const struct srv_config *cfg, char *err,
                            size_t errlen)
{
    char a[64], b[64], va[32], vb[32];

    if (cfg->tick_ms > cfg->ping_interval_ms) {
        srv__fmt_ms(cfg->tick_ms, va, sizeof(va));
        srv__fmt_ms(cfg->ping_interval_ms, vb, sizeof(vb));
        srv_config_err(err, errlen, "%s: %s must not exceed %s (%s)",
                 srv__flag("tick", a, sizeof(a)), va,
                 srv__flag("ping_interval", b, sizeof(b)), vb);
        return -EINVAL;
    }
    if (cfg->max_queue < cfg->max_message) {
        srv__fmt_size(cfg->max_queue, va, sizeof(va));
        srv__fmt_size(cfg->max_message, vb, sizeof(vb));
        srv_config_err(err, errlen, "%s: %s is smaller than %s (%s)",
                 srv__flag("max_queue", a, sizeof(a)), va,
                 srv__flag("max_message", b, sizeof(b)), vb);
        return -EINVAL;
    }
    if (cfg->max_queued_total && cfg->max_queued_total < cfg->max_queue) {
        srv__fmt_size(cfg->max_queued_total, va, sizeof(va));
        srv__fmt_size(cfg->max_queue, vb, sizeof(vb));
        srv_config_err(err, errlen, "%s: %s is smaller than %s (%s)",
                 srv__flag("max_queued_total", a, sizeof(a)), va,
                 srv__flag("max_queue", b, sizeof(b)), vb);
        return -EINVAL;
    }
    return 0;
}

int srv_config_validate(struct srv_config *cfg, char *err, size_t errlen)
{
    char a[64];
    int rc;

    srv_config_err(err, errlen, "%s", "");
    rc = srv__check_ranges(cfg, err, errlen);
    if (!rc)
        rc = srv__check_host(cfg, err, errlen);
    if (rc)
        return rc;
    if (cfg->dev_auth_endpoint && cfg->bind && !srv__is_loopback(cfg->bind)) {
        /* The same shape as the default secret's refusal below, without
         * an escape hatch: nobody needs this on a reachable address. */
        srv_config_err(err, errlen, "%s: POST /auth signs any private or "
                       "presence subscription for anyone who can reach the "
                       "port, so it is only for a loopback bind (127.x.x.x, "
                       "::1, localhost), not %s; in production the app "
                       "server signs subscriptions",
                       srv__flag("dev_auth_endpoint", a, sizeof(a)),
                       cfg->bind);
        return -EINVAL;
    }
    rc = srv__validate_cluster(cfg, err, errlen);
    if (!rc)
        rc = srv__check_operator(cfg, err, errlen);
    if (!rc)
        rc = srv__check_proxies(cfg, err, errlen);
    if (!rc)
        rc = srv__check_sizes(cfg, err, errlen);
    if (rc)
        return rc;
    return srv__validate_apps(cfg, err, errlen);
}
