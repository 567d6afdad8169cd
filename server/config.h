/*
 * server/config.h - lubdub's configuration: defaults, then the JSON file
 * (--config), then LUBDUB_* environment variables, then command-line flags
 * (later sources win). Durations accept "25s", "500ms", "2m", "1h" or a bare
 * number of milliseconds; sizes accept "64KiB", "1MiB", "10k" or bytes.
 *
 * Every option has a flag (--ping-interval), an environment variable
 * (LUBDUB_PING_INTERVAL) and a JSON key ("ping_interval"); docs/CONFIG.md
 * lists them all and a test keeps it in sync with --help.
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

#include "hub/app.h"

#define SRV_MAX_APPS 64

enum srv_log_format { SRV_LOG_TEXT, SRV_LOG_JSON };

struct srv_config {
    /* Network. */
    char *bind;                /* "127.0.0.1" */
    uint16_t port;             /* 6001; 0 picks a free port (tests) */
    unsigned loops;            /* 0 = online CPUs */
    char *tls_cert;            /* NULL = plain ws/http */
    char *tls_key;
    char *allowed_origins;     /* comma list; NULL = any */
    uint32_t max_connections;  /* hub-wide, 0 = unlimited (default 0) */

    /* Liveness (milliseconds). */
    uint64_t tick_ms;              /* wheel tick, default 100 */
    uint64_t ping_interval_ms;     /* default 25000 */
    uint64_t pong_timeout_ms;      /* default 10000 */
    uint64_t idle_timeout_ms;      /* default 0 = off */
    uint64_t close_timeout_ms;     /* default 2000 */
    uint64_t heartbeat_interval_ms; /* default 0 = derive from ping interval */
    uint64_t drain_timeout_ms;     /* default 10000 */
    uint32_t activity_timeout_s;   /* advertised to clients, default 30 */

    /* Limits (bytes). */
    uint32_t max_message;      /* inbound, default 64 KiB */
    uint32_t max_queue;        /* per-session send queue, default 1 MiB */

    /* REST. */
    uint64_t auth_timestamp_window_s; /* default 600; 0 = not checked */

    /* Apps. */
    struct hub_app apps[SRV_MAX_APPS];
    unsigned n_apps;               /* >= 1 after load (default app) */
    bool allow_default_secret;     /* on a non-loopback bind */
    bool dev_auth_endpoint;        /* /auth signs with the app secret; dev only */

    /* Files and logs. */
    char *web_root;            /* static files for / and /dashboard */
    char *log_level;           /* "error","warn","info","debug" (default info) */
    enum srv_log_format log_format;

    /* Set by parsing, not options. */
    bool check_only;           /* --check-config */
    bool help;                 /* --help */
};

/* Fill cfg with the embedded defaults (the default app included). */
void srv_config_defaults(struct srv_config *cfg);

/*
 * Apply --config FILE (if given among argv), then the environment (envp,
 * NULL-terminated "K=V" strings), then argv. On error returns -EINVAL and
 * writes one line naming the option to err (NUL-terminated, errlen bytes).
 */
int srv_config_load(struct srv_config *cfg, int argc, char **argv,
                    char **envp, char *err, size_t errlen);

/* Cross-option checks (TLS pair, default secret on non-loopback, ...). */
int srv_config_validate(const struct srv_config *cfg, char *err, size_t errlen);

/* Print --help: every option with flag, env var, JSON key, default. */
void srv_config_print_help(FILE *out);

/* Free what load allocated; cfg may be reused after defaults(). */
void srv_config_fini(struct srv_config *cfg);

/* Borrowed from cfg; NULL when no app has that key / id. */
const struct hub_app *srv_config_find_app_by_key(
    const struct srv_config *cfg, const char *key, size_t key_len);
const struct hub_app *srv_config_find_app_by_id(
    const struct srv_config *cfg, const char *id, size_t id_len);

#endif
