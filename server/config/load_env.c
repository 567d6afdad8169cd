/*
 * server/config/load_env.c - the LUBDUB_* environment variables
 * (server/config/load_env.h), read from the envp the caller passes, never
 * from the process's environment, so that tests and the fuzzer choose it;
 * and a warning for each LUBDUB_* name that is no option, with the option
 * it most likely meant.
 *
 * Thread: main thread, while the configuration loads.
 */
#include "server/config/load_env.h"
#include "server/config/apply.h"
#include "server/config/load_soketi.h"
#include "server/config/options.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The value of name in envp, or NULL. */
const char *srv__getenv(char **envp, const char *name)
{
    size_t len = strlen(name);

    for (; envp && *envp; envp++)
        if (!strncmp(*envp, name, len) && (*envp)[len] == '=')
            return *envp + len + 1;
    return NULL;
}

/*
 * LUBDUB_* names read by something other than the option table, which an
 * unknown-variable warning must not name: lubdub's own test hooks
 * (LUBDUB_TEST_*, read with getenv() by server/main.c and
 * server/redis/redis.c), the container's health check
 * (deploy/healthcheck.sh), the image build's argument and the test
 * harnesses, whose hubs inherit their environment
 * (tests/integration/lib/hub.js, tests/container/, tests/unit/).
 */
static const char *const srv__env_elsewhere[] = {
    "LUBDUB_HEALTH_PORT",       /* deploy/healthcheck.sh */
    "LUBDUB_BINARY",            /* tests: the hub to run */
    "LUBDUB_TIME_SCALE",        /* tests: sanitizer builds' slowness */
    "LUBDUB_CHROMIUM",          /* tests/integration/lib/browser.js */
    "LUBDUB_EXPECT_TLS_PMD",    /* tests/integration/rfc7692.test.js */
    "LUBDUB_DOCS_DIR",          /* tests/unit: docs checked elsewhere */
    "LUBDUB_CI_CACHE",          /* tests/container/lib.js */
    "LUBDUB_CI_STORAGE_DRIVER", /* tests/container/lib.js */
    /* deploy/Dockerfile's build argument, in the environment of the
     * image build's own --check-config. */
    "LUBDUB_COMMIT",
    NULL,
};

/* Is the variable name (name[0..len)) read by something else? */
static bool srv__env_read_elsewhere(const char *name, size_t len)
{
    static const char test[] = SRV_ENV_PREFIX "TEST_";

    if (len >= sizeof(test) - 1 && !strncmp(name, test, sizeof(test) - 1))
        return true;
    for (size_t i = 0; srv__env_elsewhere[i]; i++)
        if (strlen(srv__env_elsewhere[i]) == len &&
            !strncmp(name, srv__env_elsewhere[i], len))
            return true;
    return false;
}

/*
 * One warning per LUBDUB_* variable that is no option and nothing else's,
 * with the nearest option's variable when one is close: a typo would
 * otherwise leave the option at its default without a word. Not an
 * error, since other tools may share the prefix.
 */
static void srv__warn_unknown_env(struct srv__load *ld, char **envp)
{
    size_t plen = strlen(SRV_ENV_PREFIX);

    for (; envp && *envp; envp++) {
        const char *eq = strchr(*envp, '=');
        size_t len = eq ? (size_t)(eq - *envp) : strlen(*envp);
        char name[128], near[64];

        if (strncmp(*envp, SRV_ENV_PREFIX, plen) ||
            srv__env_read_elsewhere(*envp, len))
            continue;
        if (len >= sizeof(name)) {
            srv__warn(ld, "%.*s...: not a lubdub option, ignored",
                      (int)(sizeof(name) - 1), *envp);
            continue;
        }
        memcpy(name, *envp, len);
        name[len] = '\0';
        if (srv__find_env(name))
            continue;
        if (!srv__near_env(name, near, sizeof(near)))
            srv__warn(ld, "%s: not a lubdub option, ignored; did you mean "
                      "%s?", name, near);
        else
            srv__warn(ld, "%s: not a lubdub option, ignored", name);
    }
}

/*
 * Apply every LUBDUB_* variable the table knows. An empty variable counts
 * as unset, so "LUBDUB_TLS_CERT=" in a compose file does no harm; a name
 * the table does not know is warned about (srv__warn_unknown_env).
 */
int srv__apply_env(struct srv__load *ld, char **envp)
{
    const struct srv_option_desc *opts;
    size_t n_opts = srv_config_options(&opts);
    size_t i;
    /* soketi's names first, so that LUBDUB_* win (load_soketi.h). */
    int soketi = srv_soketi_apply_env(ld, envp);

    if (soketi)
        return soketi;
    for (i = 0; i < n_opts; i++) {
        const struct srv_option_desc *d = &opts[i];
        const char *value;
        char name[64];
        int rc;

        if (srv_config_option_name(d, SRV_SRC_ENV, name, sizeof(name)))
            continue;
        value = srv__getenv(envp, name);
        if (!value || !*value)
            continue;
        rc = srv__apply(ld, d, value, name);
        if (rc)
            return rc;
    }
    srv__warn_unknown_env(ld, envp);
    return 0;
}
