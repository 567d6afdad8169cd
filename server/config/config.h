/*
 * server/config/config.h - lubdub's configuration: defaults, then the JSON file
 * (--config), then LUBDUB_* environment variables, then command-line flags
 * (later sources win). Durations accept "25s", "500ms", "2m", "1h" or a bare
 * number of milliseconds; sizes accept "64KiB", "1MiB", "10k" or bytes.
 *
 * Every option has a flag (--ping-interval), an environment variable
 * (LUBDUB_PING_INTERVAL) and a JSON key ("ping_interval"); docs/CONFIG.md
 * lists them all and a test keeps it in sync with --help.
 *
 * This is the loader's public API; it includes the struct the server reads
 * (settings.h), the option table (options.h), the checks (validate.h) and
 * --help (help.h), so a caller needs this header alone.
 *
 * Thread: main thread only, before any loop starts; afterwards the struct is
 * read-only and shared by every loop.
 */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "server/config/help.h"
#include "server/config/options.h"
#include "server/config/settings.h"
#include "server/config/validate.h"

/* Fill cfg with the embedded defaults (the default app included). */
void srv_config_defaults(struct srv_config *cfg);

/*
 * Apply --config FILE (if given among argv, else LUBDUB_CONFIG), then the
 * environment (envp, NULL-terminated "K=V" strings; may be NULL), then argv
 * (argv[0] is the program name), then read the secret files they name
 * (--app-secret-file, --admin-token-file, --metrics-token-file,
 * --redis-password-file; an app's "secret_file" is read with its app). On
 * error returns -EINVAL (-ENOMEM when out of memory) and writes one line
 * naming the option and its source (a file: its path and errno's text) to
 * err (NUL-terminated, errlen bytes); cfg then holds partial values and
 * still needs srv_config_fini(). With --help, --version or --new-app it
 * sets that flag and returns 0 without reading the file or the
 * environment. Warnings (unknown LUBDUB_* variables) are left in
 * cfg->warnings, one line each, for the caller to report.
 */
int srv_config_load(struct srv_config *cfg, int argc, char **argv,
                    char **envp, char *err, size_t errlen);

/* Does cfg name any secret file (so that a SIGHUP has something to read
 * again even without --config)? */
bool srv_config_has_secret_files(const struct srv_config *cfg);

/*
 * Apply one JSON config text (len bytes, not NUL-terminated) as if it were
 * the --config file called name (used in errors): no environment, no flags
 * (the secret files it names are read).
 * Same return values and error lines as srv_config_load(). For tests and
 * the fuzzer (tests/fuzz/fuzz_config.c).
 */
int srv_config_load_buffer(struct srv_config *cfg, const char *text,
                           size_t len, const char *name, char *err,
                           size_t errlen);

/* Free what load allocated; cfg may be reused after defaults(). */
void srv_config_fini(struct srv_config *cfg);

#endif
