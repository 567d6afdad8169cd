/*
 * server/config/load_env.c - the LUBDUB_* environment variables
 * (server/config/load_env.h), read from the envp the caller passes, never
 * from the process's environment, so that tests and the fuzzer choose it.
 *
 * Thread: main thread, while the configuration loads.
 */
#include "server/config/load_env.h"
#include "server/config/apply.h"
#include "server/config/load_soketi.h"
#include "server/config/options.h"

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
 * Apply every LUBDUB_* variable the table knows. An empty variable counts
 * as unset, so "LUBDUB_TLS_CERT=" in a compose file does no harm; names
 * the table does not know are ignored, since other tools share the prefix.
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
    return 0;
}
