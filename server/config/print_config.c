/*
 * server/config/print_config.c - --print-config
 * (server/config/print_config.h): each option's value spelled as a flag
 * takes it, with the source the load noted (struct srv_config's src_[]),
 * then the apps.
 *
 * What is a secret is decided by name, so that an option added later is
 * masked without anyone remembering to: a name ending in "secret",
 * "token" or "password" (app_secret, admin_token, metrics_token; the
 * "_file" options hold paths and are shown), the user and password of the
 * --redis URL (the whole URL when it does not parse: it is printed also
 * when validation failed), a --redis-sentinel list with an '@' in it, and
 * every app's secret. Nothing else the configuration
 * holds is secret (an app's webhook headers may be, and are not printed:
 * only how many webhooks an app has).
 *
 * Thread: main thread.
 */
#include "server/config/print_config.h"
#include "server/config/options.h"
#include "server/config/redis_url.h"
#include "server/config/settings.h"
#include "server/config/value.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/base/version.h"

/* The commands: flags that make lubdub print something and exit. */
static const char *const srv__commands[] = {
    "help", "version", "print_config", "new_app", "check_config",
    "webhook_dead_letters", "webhook_replay", NULL,
};

/* The width names are padded to: the longest option name. */
#define SRV_PRINT_NAME_WIDTH 28

static bool srv__is_command(const struct srv_option_desc *d)
{
    for (size_t i = 0; srv__commands[i]; i++)
        if (!strcmp(d->name, srv__commands[i]))
            return true;
    return false;
}

static bool srv__ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);

    return n >= t && !strcmp(s + n - t, tail);
}

/* Is d's value a secret (see the top of the file)? */
static bool srv__is_secret(const struct srv_option_desc *d)
{
    return srv__ends_with(d->name, "secret") ||
           srv__ends_with(d->name, "token") ||
           srv__ends_with(d->name, "password");
}

/* Text from a source, control characters as \xNN, so that one option
 * stays one line. */
static void srv__put_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
}

/* A URL with its userinfo (user and password, or a lone password:
 * server/config/redis_url.h) as ****, whatever its scheme: the userinfo
 * is everything from after "://" (or from the start, when a typo lost
 * the "//") up to the last '@' (a password's '@' need not be escaped). */
static void srv__put_url(FILE *out, const char *url)
{
    const char *rest = strstr(url, "://"), *at;

    rest = rest ? rest + 3 : url;
    at = strrchr(rest, '@');
    if (!at) {
        srv__put_text(out, url);
        return;
    }
    fprintf(out, "%.*s" SRV_PRINT_MASK, (int)(rest - url), url);
    srv__put_text(out, at);
}

/*
 * The --redis URL: masked as srv__put_url() does when it parses, and as
 * **** whole when it does not, since --print-config also prints a
 * configuration that failed validation, and a URL the parser cannot read
 * (redis:/:pass@host) cannot be trusted to show where its password is.
 */
static void srv__put_redis_url(FILE *out, const char *url)
{
    struct srv_redis_url u;

    if (srv_redis_url_parse(url, &u, NULL, 0)) {
        fputs(SRV_PRINT_MASK, out);
        return;
    }
    explicit_bzero(&u, sizeof(u));
    srv__put_url(out, url);
}

/* Does option d hold addresses that could carry a userinfo? The
 * --redis-sentinel list takes none (host[:port],...), but one typed there
 * would be printed: a list with an '@' shows as **** whole. */
static bool srv__is_address_list(const struct srv_option_desc *d)
{
    return !strcmp(d->name, "redis_sentinel");
}

/* d's value in cfg, spelled as a flag takes it. */
static void srv__put_value(FILE *out, const struct srv_option_desc *d,
                           const struct srv_config *cfg)
{
    void *field = srv__field((void *)cfg, d);
    char buf[32];
    bool b;
    int idx;

    switch (d->type) {
    case SRV_OPT_STRING:
    case SRV_OPT_CHOICE:
        if (!*(char **)field)
            fputs("unset", out);
        else if (srv__is_secret(d))
            fputs(SRV_PRINT_MASK, out);
        else if (!strcmp(d->name, "redis"))
            srv__put_redis_url(out, *(char **)field);
        else if (srv__is_address_list(d) && strchr(*(char **)field, '@'))
            fputs(SRV_PRINT_MASK, out);
        else
            srv__put_text(out, *(char **)field);
        return;
    case SRV_OPT_BOOL:
        memcpy(&b, field, sizeof(b));
        fputs(b ? "true" : "false", out);
        return;
    case SRV_OPT_ENUM:
        memcpy(&idx, field, sizeof(idx));
        fputs(d->choices[idx], out);
        return;
    default:
        srv__fmt_value(d, srv__get_uint(cfg, d), buf, sizeof(buf));
        fputs(buf, out);
        return;
    }
}

static const char *srv__source_word(unsigned src)
{
    switch (src) {
    case SRV_SRC_FILE:
        return "file";
    case SRV_SRC_ENV:
        return "env";
    case SRV_SRC_FLAG:
        return "flag";
    default:
        return "default";
    }
}

/* The row named name and its index, or NULL. */
static const struct srv_option_desc *srv__row(
    const struct srv_option_desc *opts, size_t n, const char *name,
    size_t *at)
{
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(opts[i].name, name)) {
            *at = i;
            return &opts[i];
        }
    }
    return NULL;
}

/* Row i's source, or, for a secret its NAME_file option replaced, that
 * option's source "via NAME_file". */
static void srv__put_source(FILE *out, const struct srv_option_desc *opts,
                            size_t n, size_t i, const struct srv_config *cfg)
{
    const struct srv_option_desc *f;
    char name[80];
    size_t fi;

    snprintf(name, sizeof(name), "%s_file", opts[i].name);
    if (srv__is_secret(&opts[i]) && (f = srv__row(opts, n, name, &fi)) &&
        *(char **)srv__field((void *)cfg, f)) {
        fprintf(out, "(%s via %s)\n", srv__source_word(cfg->src_[fi]),
                name);
        return;
    }
    fprintf(out, "(%s)\n", srv__source_word(cfg->src_[i]));
}

/* The apps: the file's, or the default one the app_* options set. */
static void srv__put_apps(FILE *out, const struct srv_config *cfg)
{
    fprintf(out, "apps (%s):\n",
            cfg->n_file_apps ? "file" : "the default app");
    for (unsigned i = 0; i < cfg->n_apps; i++) {
        const struct hub_app *a = &cfg->apps[i];

        fputs("  id=", out);
        srv__put_text(out, a->id ? a->id : "unset");
        fputs(" key=", out);
        srv__put_text(out, a->key ? a->key : "unset");
        fputs(" secret=" SRV_PRINT_MASK, out);
        /* Rotation's further pairs ("keys"): their keys, never secrets. */
        for (unsigned k = 1; k < hub_app_n_keys(a); k++) {
            fprintf(out, " key%u=", k + 1);
            srv__put_text(out, hub_app_key_at(a, k));
            fprintf(out, " secret%u=" SRV_PRINT_MASK, k + 1);
        }
        if (!a->enabled)
            fputs(" enabled=false", out);
        if (a->n_webhooks)
            fprintf(out, " webhooks=%u", (unsigned)a->n_webhooks);
        fputc('\n', out);
    }
}

void srv_config_print(FILE *out, const struct srv_config *cfg)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts);

    fprintf(out, "# lubdub %s (commit %s): the effective configuration\n"
                 "# name = value   (source: default, file, env or flag); "
                 "secrets show as " SRV_PRINT_MASK "\n",
            hub_version(), hub_commit());
    for (size_t i = 0; i < n; i++) {
        if (srv__is_command(&opts[i]))
            continue;
        fprintf(out, "%-*s = ", SRV_PRINT_NAME_WIDTH, opts[i].name);
        srv__put_value(out, &opts[i], cfg);
        fputs("   ", out);
        srv__put_source(out, opts, n, i, cfg);
    }
    srv__put_apps(out, cfg);
}
