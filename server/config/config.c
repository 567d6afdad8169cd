/*
 * server/config/config.c - load lubdub's configuration from the embedded
 * defaults, a JSON file, LUBDUB_* environment variables and command-line
 * flags, in that order (later sources win), then read the secret files
 * every source named (--app-secret-file, --admin-token-file, ...) once it
 * is known which apply (server/config/secret.h); an app's "secret_file" is
 * read with its app. Also the struct's lifecycle: defaults and fini.
 *
 * The parts are apart, lowest first: the option table (options.c), one
 * value into its field (value.c), one source's value with the load's
 * bookkeeping (apply.c), the sources (load_argv.c, load_env.c,
 * load_file.c), then this file; the checks (validate.c) and --help
 * (help.c) beside it.
 *
 * Ownership of strings in struct srv_config: a string field that points at
 * text in the table (a default or one of the choices) is borrowed from the
 * table; any other non-NULL string was strdup()ed and is owned by cfg.
 * srv_config_fini() frees exactly the owned ones.
 *
 * Thread: main thread only, before any loop starts.
 */
#include "server/config/config.h"
#include "server/config/apply.h"
#include "server/config/config_error.h"
#include "server/config/load_argv.h"
#include "server/config/load_env.h"
#include "server/config/load_file.h"
#include "server/config/secret.h"
#include "server/config/value.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int srv__read_secret_files(struct srv__load *ld);

void srv_config_defaults(struct srv_config *cfg)
{
    const struct srv_option_desc *opts;
    size_t n_opts = srv_config_options(&opts);
    size_t i;
    int rc;

    memset(cfg, 0, sizeof(*cfg));
    hub_app_defaults(&cfg->app0);
    cfg->app0.index = 0;
    cfg->apps = &cfg->app0;
    cfg->n_apps = 1;
    for (i = 0; i < n_opts; i++) {
        const struct srv_option_desc *d = &opts[i];

        if (!d->def)
            continue;
        rc = srv__set_text(cfg, d, d->def, d->name, true, NULL, 0);
        /* The table's own defaults must parse; a failure is our bug. */
        assert(rc == 0);
        (void)rc;
    }
}

/* Is d's field one of the default app's own (freed with the apps)? */
static bool srv__in_app0(const struct srv_option_desc *d)
{
    return d->offset_ >= offsetof(struct srv_config, app0) &&
           d->offset_ < offsetof(struct srv_config, app0) +
                            sizeof(struct hub_app);
}

void srv_config_fini(struct srv_config *cfg)
{
    const struct srv_option_desc *opts;
    size_t n_opts = srv_config_options(&opts);
    size_t i;

    for (i = 0; i < n_opts; i++) {
        const struct srv_option_desc *d = &opts[i];

        /* The default app's strings are freed with the apps below. */
        if ((d->type == SRV_OPT_STRING || d->type == SRV_OPT_CHOICE) &&
            !srv__in_app0(d))
            srv__free_string(srv__field(cfg, d));
    }
    srv__free_secret(&cfg->redis_password);
    srv__free_secret(&cfg->redis_sentinel_password);
    srv__file_apps_fini(cfg);
    srv__app_fini(&cfg->app0);
    free(cfg->warnings);
    memset(cfg, 0, sizeof(*cfg));
}

int srv_config_load_buffer(struct srv_config *cfg, const char *text,
                           size_t len, const char *name, char *err,
                           size_t errlen)
{
    struct srv__load ld = {cfg, false, NULL, err, errlen, 0, 0};
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc;

    srv_config_err(err, errlen, "%s", "");
    ld.source = SRV_SRC_FILE;
    rc = srv__load_root(&ld, root, &jerr, name);
    return rc ? rc : srv__read_secret_files(&ld);
}

/*
 * --help, --version and --new-app answer without the file or the
 * environment, so that they work whatever those hold.
 */
static bool srv__answers_alone(const struct srv_config *cfg)
{
    return cfg->help || cfg->version || cfg->new_app;
}

/* The environment, then the flags over it. */
static int srv__env_then_flags(struct srv__load *ld, int argc, char **argv,
                               char **envp)
{
    int rc;

    ld->source = SRV_SRC_ENV;
    rc = srv__apply_env(ld, envp);
    if (rc)
        return rc;
    ld->source = SRV_SRC_FLAG;
    return srv__apply_argv(ld, argc, argv, false);
}

/* The file, the environment and the flags, in that order. */
static int srv__load_sources(struct srv__load *ld, int argc, char **argv,
                             char **envp)
{
    struct srv_config *cfg = ld->cfg;
    const char *env_file;
    char *path;
    int rc;

    ld->source = SRV_SRC_FLAG;
    rc = srv__apply_argv(ld, argc, argv, true);
    if (rc || srv__answers_alone(cfg))
        return rc;
    if (!cfg->config_file) {
        env_file = srv__getenv(envp, SRV_ENV_PREFIX "CONFIG");
        if (env_file && *env_file) {
            ld->source = SRV_SRC_ENV;
            rc = srv__apply(ld, srv__find_flag("config", 6), env_file,
                            SRV_ENV_PREFIX "CONFIG");
            if (rc)
                return rc;
        }
    }
    if (cfg->config_file) {
        /*
         * Keep a copy: the file's path must outlive later passes, which
         * may replace cfg->config_file with the same text.
         */
        path = strdup(cfg->config_file);
        if (!path) {
            srv_config_err(ld->err, ld->errlen, "%s: out of memory",
                           cfg->config_file);
            return -ENOMEM;
        }
        ld->source = SRV_SRC_FILE;
        rc = srv__load_file(ld, path);
        if (rc) {
            free(path);
            return rc;
        }
        rc = srv__env_then_flags(ld, argc, argv, envp);
        free(path);
        return rc;
    }
    return srv__env_then_flags(ld, argc, argv, envp);
}

int srv_config_load(struct srv_config *cfg, int argc, char **argv,
                    char **envp, char *err, size_t errlen)
{
    struct srv__load ld = {cfg, false, NULL, err, errlen, 0, 0};
    int rc;

    srv_config_err(err, errlen, "%s", "");
    rc = srv__load_sources(&ld, argc, argv, envp);
    if (rc || srv__answers_alone(cfg))
        return rc;
    /* Last: only now is it known which files every source asked for. */
    return srv__read_secret_files(&ld);
}

bool srv_config_has_secret_files(const struct srv_config *cfg)
{
    return cfg->app_secret_file || cfg->admin_token_file ||
           cfg->metrics_token_file || cfg->redis_password_file ||
           cfg->redis_sentinel_password_file;
}

/*
 * Read the secret in path (server/config/secret.h) into *slot, replacing what
 * it held; errors name the option. wipe: *slot is a secret of ours
 * (redis_password, redis_sentinel_password), wiped when replaced.
 */
static int srv__read_secret(const char *name, const char *path, char **slot,
                            bool wipe, char *err, size_t errlen)
{
    char flag[64], why[SRV_CFG_WHY_MAX];
    char *v;
    int rc = srv_secret_read_file(path, &v, why, sizeof(why));

    if (rc) {
        srv_config_err(err, errlen, "%s: %s",
                       srv__flag(name, flag, sizeof(flag)), why);
        return rc == -ENOMEM ? -ENOMEM : -EINVAL;
    }
    if (wipe)
        srv__free_secret(slot);
    else
        srv__free_string(slot);
    *slot = v;
    return 0;
}

/* A secret and its file both given: which one was meant is a guess. */
static int srv__both_err(const char *value, const char *file, char *err,
                         size_t errlen)
{
    char a[64], b[64];

    srv_config_err(err, errlen, "%s: %s is set too; give the secret one way "
                   "(the file is the safer)",
                   srv__flag(file, a, sizeof(a)),
                   srv__flag(value, b, sizeof(b)));
    return -EINVAL;
}

static int srv__read_secret_files(struct srv__load *ld)
{
    struct srv_config *cfg = ld->cfg;
    char *err = ld->err;
    size_t errlen = ld->errlen;
    int rc;

    /* Bits as in srv__given[]. */
    if (cfg->admin_token_file && (ld->given & 1u))
        return srv__both_err("admin_token", "admin_token_file", err, errlen);
    if (cfg->metrics_token_file && (ld->given & 2u))
        return srv__both_err("metrics_token", "metrics_token_file", err,
                             errlen);
    if (cfg->app_secret_file && (ld->given & 4u))
        return srv__both_err("app_secret", "app_secret_file", err, errlen);
    rc = 0;
    if (cfg->admin_token_file)
        rc = srv__read_secret("admin_token_file", cfg->admin_token_file,
                              &cfg->admin_token, false, err, errlen);
    if (!rc && cfg->metrics_token_file)
        rc = srv__read_secret("metrics_token_file", cfg->metrics_token_file,
                              &cfg->metrics_token, false, err, errlen);
    if (!rc && cfg->app_secret_file)
        rc = srv__read_secret("app_secret_file", cfg->app_secret_file,
                              &cfg->app0.secret, false, err, errlen);
    if (!rc && cfg->redis_password_file)
        rc = srv__read_secret("redis_password_file",
                              cfg->redis_password_file, &cfg->redis_password,
                              true, err, errlen);
    if (!rc && cfg->redis_sentinel_password_file)
        rc = srv__read_secret("redis_sentinel_password_file",
                              cfg->redis_sentinel_password_file,
                              &cfg->redis_sentinel_password, true, err,
                              errlen);
    return rc;
}
