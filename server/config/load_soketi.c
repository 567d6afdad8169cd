/*
 * server/config/load_soketi.c - soketi's configuration read as lubdub's
 * (server/config/load_soketi.h), so that a soketi deployment moves to
 * lubdub without rewriting its environment or its config.json.
 *
 * One table (server/config/soketi_map.c) says what each of soketi's names
 * becomes: its
 * SOKETI_* variable (soketi's cli.ts spelling, after the prefix), its
 * option path (the dotted key of soketi's config.json), where it lands in
 * lubdub (an option, the default app's key, or a key of every app) and how
 * its value is converted (soketi's -1 for "no limit" is lubdub's 0, its
 * kilobytes are bytes, its seconds get a unit, its "debug" is a log level).
 * The Redis adapter and the metrics server are groups of names read
 * together (sk_redis(), sk_metrics()). The environment is applied before
 * LUBDUB_*, so a LUBDUB_* variable for the same option wins; a soketi
 * config.json is applied as the --config file, its apps translated into
 * lubdub's "apps" array and read by lubdub's own loader (load_file.c), so
 * they are checked exactly as lubdub's are.
 *
 * Nothing here is an error that soketi would have accepted: a name lubdub
 * has no use for is warned about (once per process for the environment,
 * which cannot change; on every load for the file, through the log once
 * the hub runs) and skipped. Only a value that cannot be converted (a port
 * that is not a number) is an error, as it would be in LUBDUB_*. The
 * warnings never quote a value, since secrets are among them.
 *
 * Invariant: the texts a load holds (struct sk_ctx) are bounded by the
 * table's size; file texts are freed before the load returns.
 *
 * Thread: main thread, while the configuration loads (the statics below
 * are touched by it alone).
 */
#include "server/config/load_soketi.h"
#include "server/config/apply.h"
#include "server/config/config_error.h"
#include "server/config/config_webhooks.h"
#include "server/config/options.h"
#include "server/config/settings.h"
#include "server/config/soketi_map.h"
#include "server/config/soketi_redis.h"
#include "server/config/value.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/base/log.h"

#define SK_APPS_PATH "appManager.array.apps"

/* One load's soketi values: the environment's (borrowed from envp) or the
 * file's (owned, freed by sk_ctx_fini()). */
struct sk_ctx {
    struct srv__load *ld;
    char **envp;                 /* NULL for the file */
    bool quiet;                  /* no warnings (a later env pass) */
    const char *text[SRV_SK_MAX_ROWS];      /* by row; NULL = not given */
    char *owned[SRV_SK_MAX_ROWS];
    json_t *apps_src;            /* the file's apps (borrowed) */
    json_t *all_apps;            /* SRV_SK_APPS values for the file's apps */
};

/* Row i of the table, and their number. */
static const struct srv_sk_row *sk_row(size_t i)
{
    const struct srv_sk_row *rows;

    (void)srv_soketi_map_rows(&rows);
    return &rows[i];
}

static size_t sk_n(void)
{
    const struct srv_sk_row *rows;

    return srv_soketi_map_rows(&rows);
}

/* The first load is over: the hub logs, the environment was warned of. */
static bool sk_started;

void srv_soketi_forget_started(void)
{
    sk_started = false;
}

/*
 * One warning line. Before the hub runs, in the load's warnings
 * (srv__warn(): main() logs them once the log exists, in its format,
 * JSON under --log-format json, or prints them for a command that exits
 * first); after (a SIGHUP reload), in the log at once.
 */
__attribute__((format(printf, 2, 3)))
static void sk_warn(const struct sk_ctx *c, const char *fmt, ...)
{
    char raw[600], line[700];
    va_list ap;

    if (c->quiet)
        return;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    if (!sk_started) {
        srv__warn(c->ld, "%s", raw);
        return;
    }
    /* One line whatever a name from the environment holds. */
    srv_config_err(line, sizeof(line), "%s", raw);
    hub_log(HUB_LOG_WARN, 0, "config: %s", line);
}

/* The value of the variable name in envp, or NULL. */
static const char *sk_getenv(char **envp, const char *name)
{
    size_t n = strlen(name);

    while (envp && *envp) {
        const char *kv = *envp++;

        if (!strncmp(kv, name, n) && kv[n] == '=')
            return kv + n + 1;
    }
    return NULL;
}

/* The option called name, whatever its sources. */
static const struct srv_option_desc *sk_option(const char *name)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts);

    for (size_t i = 0; i < n; i++)
        if (!strcmp(opts[i].name, name))
            return &opts[i];
    return NULL;
}

static const char *sk_val(const struct sk_ctx *c, const char *env)
{
    for (size_t i = 0; i < sk_n(); i++)
        if (sk_row(i)->env && !strcmp(sk_row(i)->env, env))
            return c->text[i];
    return NULL;
}

/* The name a warning or an error gives row i. */
static const char *sk_label(const struct sk_ctx *c, size_t i, char *buf,
                            size_t len)
{
    if (c->envp)
        snprintf(buf, len, SRV_SOKETI_PREFIX "%s", sk_row(i)->env);
    else
        snprintf(buf, len, "%s: \"%s\"", c->ld->file, sk_row(i)->path);
    return buf;
}

static const char *sk_label_env(const struct sk_ctx *c, const char *env,
                                char *buf, size_t len)
{
    for (size_t i = 0; i < sk_n(); i++)
        if (sk_row(i)->env && !strcmp(sk_row(i)->env, env))
            return sk_label(c, i, buf, len);
    snprintf(buf, len, "%s", env);
    return buf;
}

static bool sk_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* 1 true, 0 false, -1 neither. soketi JSON-parses its variables, so
 * "true" and 1 are both true. */
static int sk_truth(const char *s)
{
    if (!strcmp(s, "true") || !strcmp(s, "1"))
        return 1;
    if (!strcmp(s, "false") || !strcmp(s, "0"))
        return 0;
    return -1;
}

static int sk_bad(struct sk_ctx *c, const char *label, const char *want)
{
    srv_config_err(c->ld->err, c->ld->errlen, "%s: must be %s", label, want);
    return -EINVAL;
}

/* Room for a converted number: SRV_SK_SEC's at most 12 digits and its
 * unit, SRV_SK_KIB's bytes (below 2^32). */
#define SK_NUM_MAX 32

/*
 * Row r's value text t as lubdub's text in *res. 1: nothing to set; 0:
 * *res set, to t itself (a text passes through whole, whatever its length:
 * a secret cut short would fail every signature) or, for a converted
 * number, to num (SK_NUM_MAX bytes); -EINVAL with one line in ld->err.
 */
static int sk_convert(struct sk_ctx *c, const struct srv_sk_row *r,
                      const char *t, const char *label, const char **res,
                      char num[SK_NUM_MAX])
{
    double kb;
    char *end;
    int b;

    switch (r->conv) {
    case SRV_SK_UINT:
    case SRV_SK_MS:
        if (!sk_digits(t))
            return sk_bad(c, label, "a non-negative integer");
        break;
    case SRV_SK_LIMIT:
        if (!strcmp(t, "-1"))
            t = "0";
        else if (!sk_digits(t))
            return sk_bad(c, label, "-1 (no limit) or a non-negative "
                                    "integer");
        break;
    case SRV_SK_BOOL:
    case SRV_SK_DEBUG:
        b = sk_truth(t);
        if (b < 0)
            return sk_bad(c, label, "true or false");
        if (r->conv == SRV_SK_DEBUG && !b)
            return 1;
        t = r->conv == SRV_SK_DEBUG ? "debug" : b ? "true" : "false";
        break;
    case SRV_SK_SEC:
        if (!sk_digits(t) || strlen(t) > 12)
            return sk_bad(c, label, "a whole number of seconds");
        snprintf(num, SK_NUM_MAX, "%ss", t);
        *res = num;
        return 0;
    case SRV_SK_KIB:
        kb = strtod(t, &end);
        if (*end || end == t || !isfinite(kb) || kb < 0 || kb > 4194303)
            return sk_bad(c, label, "a number of kilobytes");
        snprintf(num, SK_NUM_MAX, "%llu",
                 (unsigned long long)(kb * 1024 + 0.5));
        *res = num;
        return 0;
    case SRV_SK_ONLY:
        if (strcmp(t, r->target))
            sk_warn(c, "%s: lubdub supports only \"%s\"; ignored "
                    "(docs/MIGRATING.md)", label, r->target);
        return 1;
    default:
        break;
    }
    *res = t;
    return 0;
}

/*
 * Do the texts a and b give d the same value? Each is parsed into a
 * scratch struct; one that does not parse differs.
 */
static bool sk_same(const struct srv_option_desc *d, const char *a,
                    const char *b)
{
    struct srv_config *s = calloc(2, sizeof(*s));
    bool same = false;
    char **sa, **sb;

    if (!s)
        return false;
    if (!srv__set_text(&s[0], d, a, "", false, NULL, 0) &&
        !srv__set_text(&s[1], d, b, "", false, NULL, 0)) {
        if (d->type == SRV_OPT_STRING || d->type == SRV_OPT_CHOICE) {
            sa = srv__field(&s[0], d);
            sb = srv__field(&s[1], d);
            same = (!*sa && !*sb) || (*sa && *sb && !strcmp(*sa, *sb));
        } else {
            same = srv__get_uint(&s[0], d) == srv__get_uint(&s[1], d);
        }
    }
    if (d->type == SRV_OPT_STRING || d->type == SRV_OPT_CHOICE) {
        srv__free_string(srv__field(&s[0], d));
        srv__free_string(srv__field(&s[1], d));
    }
    free(s);
    return same;
}

/*
 * Set lubdub's option name to text from soketi's label. From the
 * environment, a LUBDUB_* variable for the option (or also, a second one
 * that gives it another way) wins: soketi's value is skipped, with a
 * warning when the two differ.
 */
static int sk_set_option(struct sk_ctx *c, const char *name,
                         const char *text, const char *label,
                         const char *also)
{
    const struct srv_option_desc *d = sk_option(name);
    char lname[64];
    const char *lv;

    if (c->envp &&
        !srv_config_option_name(d, SRV_SRC_ENV, lname, sizeof(lname))) {
        lv = sk_getenv(c->envp, lname);
        if (lv && *lv) {
            if (!sk_same(d, lv, text))
                sk_warn(c, "%s and %s are both set, to different values; "
                        "%s wins", label, lname, lname);
            return 0;
        }
        lv = also ? sk_getenv(c->envp, also) : NULL;
        if (lv && *lv) {
            sk_warn(c, "%s and %s are both set; %s wins", label, also, also);
            return 0;
        }
    }
    return srv__apply(c->ld, d, text, label);
}

/* Key (lubdub's app key) of app to text. */
static int sk_set_app(struct sk_ctx *c, struct hub_app *app, const char *key,
                      const char *text, const char *label)
{
    const struct srv_option_desc *d = srv__find_app_key(key);

    return srv__set_text(app, d, text, label, false, c->ld->err,
                         c->ld->errlen);
}

/* soketi's defaults where lubdub's differ (sk_app_defaults) on app. */
static int sk_app_soketi_defaults(struct sk_ctx *c, struct hub_app *app)
{
    const char *const (*def)[2];
    size_t n = srv_soketi_map_app_defaults(&def);
    int rc = 0;

    for (size_t i = 0; i < n && !rc; i++)
        rc = sk_set_app(c, app, def[i][0], def[i][1], "soketi's defaults");
    return rc;
}

/*
 * soketi's webhooks array (val) in lubdub's shape: the same keys, except
 * that AWS Lambda webhooks ("lambda_function", "lambda") have no place in
 * lubdub: such a webhook without a "url" is dropped, and the Lambda keys
 * of one with a URL too, each with a warning. A new reference, or NULL
 * (out of memory, or not an array: left to lubdub's checks).
 */
static json_t *sk_webhooks(struct sk_ctx *c, json_t *val, const char *label)
{
    json_t *out, *w, *copy;
    size_t i;
    int bad = 0;

    if (!json_is_array(val))
        return json_incref(val);
    out = json_array();
    json_array_foreach(val, i, w) {
        if (!json_is_object(w) || !(json_object_get(w, "lambda_function") ||
                                    json_object_get(w, "lambda"))) {
            bad |= json_array_append(out, w);
            continue;
        }
        sk_warn(c, "%s[%zu]: AWS Lambda webhooks are not supported by "
                "lubdub; %s", label, i, json_object_get(w, "url") ?
                "its Lambda keys are ignored" : "dropped");
        if (!json_object_get(w, "url"))
            continue;
        copy = json_copy(w);
        json_object_del(copy, "lambda_function");
        json_object_del(copy, "lambda");
        bad |= json_array_append_new(out, copy);
    }
    if (bad) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- The Redis adapter and the metrics server ----------------------- */

/*
 * --redis from soketi's database.redis, in *url (owned; soketi_redis.h).
 * A username without a password is dropped with a warning: ioredis,
 * soketi's client, sends AUTH only with a password, and redis://user@host
 * would be read as the password "user".
 */
static int sk_redis_url(struct sk_ctx *c, char **url, const char *label)
{
    const char *host = sk_val(c, "DB_REDIS_HOST"),
               *port = sk_val(c, "DB_REDIS_PORT"),
               *db = sk_val(c, "DB_REDIS_DB"),
               *user = sk_val(c, "DB_REDIS_USERNAME"),
               *pass = sk_val(c, "DB_REDIS_PASSWORD");
    char other[512];

    *url = NULL;
    if ((port && !sk_digits(port)) || (db && !sk_digits(db)))
        return sk_bad(c, label, "used with a numeric SOKETI_DB_REDIS_PORT "
                                "and SOKETI_DB_REDIS_DB");
    pass = pass && *pass ? pass : NULL;
    if (user && *user && !pass)
        sk_warn(c, "%s is set without a password; ignored, as soketi sends "
                "no AUTH without one (docs/MIGRATING.md)",
                sk_label_env(c, "DB_REDIS_USERNAME", other, sizeof(other)));
    return srv_soketi_redis_url(host && *host ? host : "127.0.0.1",
                                port ? port : "6379", db ? db : "0",
                                user && *user ? user : NULL, pass, url);
}

/* adapter.driver "redis" with database.redis: lubdub's --redis (and the
 * sentinels, and the prefix). Other adapters have no place in lubdub. */
static int sk_redis(struct sk_ctx *c)
{
    static const char *const parts[] = {
        "DB_REDIS_HOST", "DB_REDIS_PORT", "DB_REDIS_DB", "DB_REDIS_USERNAME",
        "DB_REDIS_PASSWORD", "DB_REDIS_KEY_PREFIX", "DB_REDIS_SENTINELS",
        "DB_REDIS_INSTANCE_NAME", NULL,
    };
    const char *drv = sk_val(c, "ADAPTER_DRIVER"), *v;
    char label[512], list[SRV_SOKETI_SENTINELS_LEN], other[512], *url;
    int rc;

    sk_label_env(c, "ADAPTER_DRIVER", label, sizeof(label));
    if (drv && strcmp(drv, "redis") && strcmp(drv, "local"))
        sk_warn(c, "%s: the \"%s\" adapter is not supported by lubdub (its "
                "cluster runs on Redis); ignored", label, drv);
    if (!drv || strcmp(drv, "redis")) {
        for (size_t i = 0; parts[i]; i++)
            if (sk_val(c, parts[i]))
                sk_warn(c, "%s: lubdub reads it only for the redis adapter; "
                        "ignored", sk_label_env(c, parts[i], other,
                                                sizeof(other)));
        return 0;
    }
    rc = sk_redis_url(c, &url, label);
    if (!rc)
        rc = sk_set_option(c, "redis", url, label, NULL);
    if (url)
        explicit_bzero(url, strlen(url));
    free(url);
    v = sk_val(c, "DB_REDIS_KEY_PREFIX");
    if (!rc && v && *v && !sk_val(c, "ADAPTER_REDIS_PREFIX"))
        rc = sk_set_option(c, "redis_prefix", v,
                           sk_label_env(c, "DB_REDIS_KEY_PREFIX", other,
                                        sizeof(other)), NULL);
    v = sk_val(c, "DB_REDIS_SENTINELS");
    if (rc || !v)
        return rc;
    sk_label_env(c, "DB_REDIS_SENTINELS", other, sizeof(other));
    rc = srv_soketi_sentinels(v, list, sizeof(list));
    if (rc == -EINVAL)
        return sk_bad(c, other, "a JSON array of {\"host\", \"port\"}");
    /* Never cut: a list lubdub's --redis-sentinel would refuse anyway. */
    if (rc)
        return sk_bad(c, other, "at most 16 sentinels, each host below 256 "
                                "bytes");
    rc = sk_set_option(c, "redis_sentinel", list, other, NULL);
    v = sk_val(c, "DB_REDIS_INSTANCE_NAME");
    if (!rc)
        rc = sk_set_option(c, "redis_master", v ? v : "mymaster", other,
                           NULL);
    return rc;
}

/* metrics.enabled: soketi's metrics server on its own port (9601 unless
 * metrics.port) is lubdub's --metrics-port. Off, lubdub still serves
 * /metrics on --port, as it always does. */
static int sk_metrics(struct sk_ctx *c)
{
    const char *on = sk_val(c, "METRICS_ENABLED"),
               *port = sk_val(c, "METRICS_SERVER_PORT"),
               *host = sk_val(c, "METRICS_HOST");
    char label[512];
    int b, rc;

    if (!on)
        return 0;
    sk_label_env(c, "METRICS_ENABLED", label, sizeof(label));
    b = sk_truth(on);
    if (b < 0)
        return sk_bad(c, label, "true or false");
    if (!b)
        return 0;
    if (port)
        sk_label_env(c, "METRICS_SERVER_PORT", label, sizeof(label));
    rc = sk_set_option(c, "metrics_port", port ? port : "9601", label, NULL);
    if (!rc && host)
        rc = sk_set_option(c, "metrics_bind", host,
                           sk_label_env(c, "METRICS_HOST", label,
                                        sizeof(label)), NULL);
    return rc;
}

/* ---- Rows to lubdub ------------------------------------------------- */

/* obj[key] = val (a new reference, NULL when out of memory). */
static int sk_put(json_t *obj, const char *key, json_t *val)
{
    return val && !json_object_set_new(obj, key, val) ? 0 : -ENOMEM;
}

/* Lubdub's JSON for an app key's text: a boolean or a string. */
static json_t *sk_app_json(const char *key, const char *text)
{
    const struct srv_option_desc *d = srv__find_app_key(key);

    return d->type == SRV_OPT_BOOL ? json_boolean(!strcmp(text, "true"))
                                   : json_string(text);
}

/* An SRV_SK_APP row from the environment: the first app (the default app's
 * id, key and secret are lubdub's --app-* options, so LUBDUB_APP_* win). */
static int sk_env_app(struct sk_ctx *c, const struct srv_sk_row *r,
                      const char *text, const char *label)
{
    struct srv_config *cfg = c->ld->cfg;
    char opt[16];
    json_t *j, *w;
    int rc;

    if (r->conv == SRV_SK_WEBHOOKS) {
        j = json_loads(text, JSON_DECODE_ANY, NULL);
        if (!json_is_array(j)) {
            json_decref(j);
            return sk_bad(c, label, "a JSON array of webhooks");
        }
        w = sk_webhooks(c, j, label);
        rc = w ? srv_config_webhooks(&cfg->apps[0], w, label, c->ld->err,
                                     c->ld->errlen) : -ENOMEM;
        json_decref(w);
        json_decref(j);
        return rc;
    }
    if (!c->ld->file_has_apps && (!strcmp(r->target, "id") ||
                                  !strcmp(r->target, "key") ||
                                  !strcmp(r->target, "secret"))) {
        snprintf(opt, sizeof(opt), "app_%s", r->target);
        return sk_set_option(c, opt, text, label,
                             !strcmp(r->target, "secret") ?
                             SRV_ENV_PREFIX "APP_SECRET_FILE" : NULL);
    }
    return sk_set_app(c, &cfg->apps[0], r->target, text, label);
}

/* Row i's value (c->text[i]) applied: options and, from the environment,
 * the apps; from the file, SRV_SK_APPS values wait for its apps. */
static int sk_apply_row(struct sk_ctx *c, size_t i)
{
    const struct srv_sk_row *r = sk_row(i);
    struct srv_config *cfg = c->ld->cfg;
    char label[512], num[SK_NUM_MAX];
    const char *text;
    int rc;

    if (r->conv == SRV_SK_GROUP)
        return 0;
    sk_label(c, i, label, sizeof(label));
    if (r->conv == SRV_SK_WEBHOOKS)
        return sk_env_app(c, r, c->text[i], label);
    rc = sk_convert(c, r, c->text[i], label, &text, num);
    if (rc)
        return rc > 0 ? 0 : rc;
    if (r->scope == SRV_SK_HUB)
        return sk_set_option(c, r->target, text, label, NULL);
    if (r->scope == SRV_SK_APP)
        return sk_env_app(c, r, text, label);
    if (!c->envp && c->apps_src) {
        return sk_put(c->all_apps, r->target, sk_app_json(r->target, text));
    }
    for (unsigned a = 0; a < cfg->n_apps; a++) {
        rc = sk_set_app(c, &cfg->apps[a], r->target, text, label);
        if (rc)
            return rc;
    }
    return 0;
}

static int sk_apply_rows(struct sk_ctx *c)
{
    int rc = 0;

    for (size_t i = 0; i < sk_n() && !rc; i++)
        if (c->text[i])
            rc = sk_apply_row(c, i);
    if (!rc)
        rc = sk_redis(c);
    if (!rc)
        rc = sk_metrics(c);
    return rc;
}

/* ---- The environment ------------------------------------------------ */

int srv_soketi_apply_env(struct srv__load *ld, char **envp)
{
    struct sk_ctx c = {.ld = ld, .envp = envp, .quiet = sk_started};
    size_t plen = strlen(SRV_SOKETI_PREFIX), i;
    const struct srv_sk_row *r;
    bool app = false;
    int rc = 0;

    for (char **e = envp; e && *e; e++) {
        const char *name = *e + plen, *eq = strchr(*e, '=');

        if (strncmp(*e, SRV_SOKETI_PREFIX, plen) || !eq || eq < name)
            continue;
        r = srv_soketi_map_env(name, (size_t)(eq - name));
        i = r ? (size_t)(r - sk_row(0)) : sk_n();
        if (i == sk_n()) {
            sk_warn(&c, "%.*s is not supported by lubdub; ignored (see "
                    "docs/MIGRATING.md)", (int)(eq - *e), *e);
            continue;
        }
        /* Empty is unset, as with LUBDUB_*. */
        c.text[i] = eq[1] ? eq + 1 : NULL;
        app |= c.text[i] && sk_row(i)->scope == SRV_SK_APP;
    }
    /* The default app soketi describes, when no file described the apps
     * (a soketi config.json gave its own apps soketi's defaults). */
    if (app && !ld->file)
        rc = sk_app_soketi_defaults(&c, &ld->cfg->apps[0]);
    if (!rc)
        rc = sk_apply_rows(&c);
    sk_started = true;
    return rc;
}

/* ---- The file -------------------------------------------------------- */

static bool sk_is_soketi(json_t *root)
{
    const char *key;
    json_t *val;

    if (json_object_get(root, "apps"))
        return false;
    json_object_foreach(root, key, val) {
        if (strchr(key, '.'))
            return true;
        if (srv_soketi_map_is_root(key))
            return true;
    }
    return false;
}

/* A leaf's value as text (owned), NULL for null (unset). */
static char *sk_json_text(json_t *v)
{
    char buf[64];

    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        return strdup(buf);
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%.15g", json_real_value(v));
        return strdup(buf);
    }
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "true" : "false");
    if (json_is_null(v))
        return NULL;
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* One leaf of the file at path: a row's value, soketi's apps, a key of
 * lubdub's own, or a warning. */
static int sk_leaf(struct sk_ctx *c, const char *path, json_t *val)
{
    const struct srv_option_desc *d;
    char label[600];
    int rc;

    if (!strcmp(path, SK_APPS_PATH)) {
        c->apps_src = val;
        return 0;
    }
    for (size_t i = 0; i < sk_n(); i++) {
        if (sk_row(i)->scope == SRV_SK_APP || strcmp(sk_row(i)->path, path))
            continue;
        free(c->owned[i]);
        c->owned[i] = sk_json_text(val);
        c->text[i] = c->owned[i] && *c->owned[i] ? c->owned[i] : NULL;
        return json_is_null(val) || c->owned[i] ? 0 : -ENOMEM;
    }
    snprintf(label, sizeof(label), "%s: \"%s\"", c->ld->file, path);
    d = strchr(path, '.') ? NULL : srv__find_option_key(path);
    if (!d) {
        sk_warn(c, "%s is not supported by lubdub; ignored (see "
                "docs/MIGRATING.md)", label);
        return 0;
    }
    /* lubdub's own key in a soketi file: read as lubdub's file reads it
     * (load_file.c), with its JSON types checked: an array is no string. */
    rc = srv__apply_json(c->ld, c->ld->cfg, d, val, label);
    if (!rc)
        srv__note_given(c->ld, d);
    return rc;
}

/* Deeper than soketi's options go (four levels): an object there is a
 * leaf, which bounds the recursion whatever the file nests. */
#define SK_MAX_DEPTH 8

/* Walk obj's keys under prefix, depth levels down: objects are soketi's
 * nested options (dot.set), everything else a leaf. */
static int sk_walk(struct sk_ctx *c, json_t *obj, const char *prefix,
                   int depth)
{
    const char *key;
    json_t *val;
    char path[512];
    int rc;

    json_object_foreach(obj, key, val) {
        if ((size_t)snprintf(path, sizeof(path), "%s%s%s", prefix,
                             *prefix ? "." : "", key) >= sizeof(path)) {
            sk_warn(c, "%s: a key of %zu bytes is not supported by lubdub; "
                    "ignored", c->ld->file, strlen(key));
            continue;
        }
        if (json_is_object(val) && depth < SK_MAX_DEPTH)
            rc = sk_walk(c, val, path, depth + 1);
        else
            rc = sk_leaf(c, path, val);
        if (rc)
            return rc;
    }
    return 0;
}

/* One soketi app object (src, apps[i]) as lubdub's, in *out. */
static int sk_file_app(struct sk_ctx *c, json_t *src, size_t i, json_t **out)
{
    const char *const (*def)[2];
    size_t n = srv_soketi_map_app_defaults(&def);
    const struct srv_sk_row *r;
    const char *key;
    json_t *app = json_object(), *val;
    char label[600], num[SK_NUM_MAX], *t;
    const char *text;
    int rc = 0;

    *out = app;
    if (!app)
        return -ENOMEM;
    for (size_t k = 0; k < n && !rc; k++)
        rc = sk_put(app, def[k][0], sk_app_json(def[k][0], def[k][1]));
    if (rc || json_object_update(app, c->all_apps))
        return -ENOMEM;
    if (!json_is_object(src)) {
        srv_config_err(c->ld->err, c->ld->errlen, "%s: %s[%zu] must be an "
                       "object", c->ld->file, SK_APPS_PATH, i);
        return -EINVAL;
    }
    json_object_foreach(src, key, val) {
        snprintf(label, sizeof(label), "%s: %s[%zu].%s", c->ld->file,
                 SK_APPS_PATH, i, key);
        r = srv_soketi_map_app_key(key);
        if (!r) {
            sk_warn(c, "%s is not supported by lubdub; ignored (see "
                    "docs/MIGRATING.md)", label);
            continue;
        }
        if (r->conv == SRV_SK_WEBHOOKS) {
            rc = sk_put(app, "webhooks", sk_webhooks(c, val, label));
            if (rc)
                return rc;
            continue;
        }
        t = sk_json_text(val);
        if (!t && !json_is_null(val))
            return -ENOMEM;
        rc = t ? sk_convert(c, r, t, label, &text, num) : 1;
        if (rc == 0 && sk_put(app, r->target, sk_app_json(r->target, text)))
            rc = -ENOMEM;
        free(t);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The lubdub file still to be read: {"apps": [...]} or {}. */
static int sk_file_rest(struct sk_ctx *c, json_t **rest)
{
    json_t *apps, *app;
    size_t i;
    int rc;

    *rest = json_object();
    if (!*rest)
        return -ENOMEM;
    if (!c->apps_src)
        return 0;
    if (!json_is_array(c->apps_src)) {
        srv_config_err(c->ld->err, c->ld->errlen, "%s: \"%s\" must be an "
                       "array of app objects", c->ld->file, SK_APPS_PATH);
        return -EINVAL;
    }
    apps = json_array();
    if (sk_put(*rest, "apps", apps))
        return -ENOMEM;
    for (i = 0; i < json_array_size(c->apps_src); i++) {
        rc = sk_file_app(c, json_array_get(c->apps_src, i), i, &app);
        if (json_array_append_new(apps, app) && !rc)
            rc = -ENOMEM;
        if (rc)
            return rc;
    }
    return 0;
}

int srv_soketi_file(struct srv__load *ld, json_t **root)
{
    struct sk_ctx c = {.ld = ld};
    json_t *rest = NULL;
    int rc;

    if (!json_is_object(*root) || !sk_is_soketi(*root))
        return 0;
    c.all_apps = json_object();
    rc = c.all_apps ? sk_walk(&c, *root, "", 0) : -ENOMEM;
    /* soketi's default app, when the file lists none, is lubdub's. */
    if (!rc && !c.apps_src)
        rc = sk_app_soketi_defaults(&c, &ld->cfg->apps[0]);
    if (!rc)
        rc = sk_apply_rows(&c);
    if (!rc)
        rc = sk_file_rest(&c, &rest);
    for (size_t i = 0; i < sk_n(); i++)
        free(c.owned[i]);
    json_decref(c.all_apps);
    if (rc == -ENOMEM && ld->err && !ld->err[0])
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", ld->file);
    if (rc) {
        json_decref(rest);
        return rc;
    }
    json_decref(*root);
    *root = rest;
    return 0;
}
