/*
 * server/config/print_config.h - --print-config: the effective
 * configuration, after the defaults, the file, the environment and the
 * flags, one option a line with where its value came from, then the apps;
 * every secret shown as ****. docs/CONFIG.md ("Commands") documents the
 * format; tests/unit/test_print_config.c checks the sources and the masks.
 *
 * Thread: main thread.
 */
#ifndef SRV_PRINT_CONFIG_H
#define SRV_PRINT_CONFIG_H

#include <stdio.h>

struct srv_config;

/* What a secret's value is printed as, whatever it is. */
#define SRV_PRINT_MASK "****"

/*
 * Print cfg (loaded by srv_config_load(), which noted each option's
 * source) to out:
 *
 *   name = value   (source)
 *
 * for every option but the commands (--help, --version, --print-config,
 * --new-app, --check-config, --webhook-dead-letters, --webhook-replay),
 * in the table's order, names padded to one column; source is default,
 * file, env or flag, and "<source> via NAME_file" for a secret read from
 * the file NAME_file names. Values are spelled as a flag takes them
 * ("25s", "64KiB", "true"), "unset" when unset; the --redis URL's user
 * and password become ****. Then "apps (file):" or "apps (the default
 * app):" and one line per app: "  id=ID key=KEY secret=****".
 */
void srv_config_print(FILE *out, const struct srv_config *cfg);

#endif
