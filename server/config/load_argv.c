/*
 * server/config/load_argv.c - the command line (server/config/load_argv.h):
 * long flags with their value joined (--port=6001) or next (--port 6001),
 * booleans as --flag, --no-flag or --flag=true|false|1|0, and -h. It is
 * walked twice: early for --config and the commands that answer without
 * the file or the environment (--help, --version, --new-app) alone, then
 * in full after the file and the environment, so that flags win.
 *
 * Thread: main thread, while the configuration loads.
 */
#include "server/config/load_argv.h"
#include "server/config/apply.h"
#include "server/config/config_error.h"
#include "server/config/options.h"
#include "server/config/settings.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The flags the early walk applies: --config, and the commands that
 * answer alone (srv_config_load returns before the file for them). */
static bool srv__early(const struct srv_option_desc *d)
{
    return d->offset_ == offsetof(struct srv_config, help) ||
           d->offset_ == offsetof(struct srv_config, version) ||
           d->offset_ == offsetof(struct srv_config, new_app) ||
           d->offset_ == offsetof(struct srv_config, config_file);
}

/*
 * Walk argv. With early set, only syntax is checked and only --config,
 * --help, --version and --new-app are applied, so the file can be read
 * before the flags that must override it; otherwise every flag is applied
 * in order.
 */
int srv__apply_argv(struct srv__load *ld, int argc, char **argv,
                    bool early)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *name, *eq, *value = NULL;
        const struct srv_option_desc *d;
        char label[96];
        bool negated = false;
        size_t len;
        int rc;

        if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2] &&
            (d = srv__find_short(arg[1]))) {
            /* Only booleans have short forms today. */
            snprintf(label, sizeof(label), "-%c", arg[1]);
            if (!early || srv__early(d)) {
                rc = srv__apply(ld, d, "true", label);
                if (rc)
                    return rc;
            }
            continue;
        }
        if (arg[0] == '-' && arg[1] && arg[1] != '-') {
            srv_config_err(ld->err, ld->errlen, "%s: unknown option (see --help)",
                     arg);
            return -EINVAL;
        }
        if (strncmp(arg, "--", 2) || !arg[2]) {
            srv_config_err(ld->err, ld->errlen, "%s: unexpected argument "
                     "(options start with --; see --help)", arg);
            return -EINVAL;
        }
        name = arg + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        d = srv__find_flag(name, len);
        if (!d && len > 3 && !strncmp(name, "no-", 3)) {
            d = srv__find_flag(name + 3, len - 3);
            if (d && d->type == SRV_OPT_BOOL)
                negated = true;
            else
                d = NULL;
        }
        snprintf(label, sizeof(label), "--%.*s", (int)len, name);
        if (!d) {
            srv_config_err(ld->err, ld->errlen, "%s: unknown option (see --help)",
                     label);
            return -EINVAL;
        }
        if (d->type == SRV_OPT_BOOL) {
            if (negated && eq) {
                srv_config_err(ld->err, ld->errlen, "%s: takes no value", label);
                return -EINVAL;
            }
            value = eq ? eq + 1 : negated ? "false" : "true";
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
            value = argv[++i];
        } else {
            srv_config_err(ld->err, ld->errlen, "%s: missing value", label);
            return -EINVAL;
        }
        if (early && !srv__early(d))
            continue;
        rc = srv__apply(ld, d, value, label);
        if (rc)
            return rc;
    }
    return 0;
}
