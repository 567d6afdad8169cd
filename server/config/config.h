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
 * Thread: main thread only, before any loop starts; afterwards the struct is
 * read-only and shared by every loop.
 */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hub/app/app.h"

enum srv_log_format { SRV_LOG_TEXT, SRV_LOG_JSON };
enum srv_event_loop { SRV_LOOP_LIBEV, SRV_LOOP_POLL };

/*
 * Strings (apps' included) are owned by the struct, except those pointing at
 * the option table's defaults and choices, which are borrowed from it;
 * srv_config_fini() tells the two apart. Callers only read them.
 */
struct srv_config {
    /* Network. */
    char *bind;                /* "127.0.0.1" */
    uint16_t port;             /* 6001; 0 picks a free port (tests) */
    unsigned loops;            /* 0 = online CPUs */
    char *tls_cert;            /* NULL = plain ws/http */
    char *tls_key;
    char *allowed_origins;     /* comma list; NULL = any */
    char *trusted_proxies;     /* CIDR list; NULL = trust no proxy */
    uint32_t max_connections;  /* hub-wide, 0 = unlimited (default 0) */
    uint32_t fd_limit;         /* soft RLIMIT_NOFILE, 0 = derive (fdlimit.h) */

    /* Operator surfaces (server/metrics_listen.c, server/ops/console.c). */
    uint16_t metrics_port;     /* 0 = /metrics and /stats on --port */
    char *metrics_bind;        /* NULL = --bind */
    char *metrics_token;       /* NULL = no bearer token asked */
    char *admin_token;         /* NULL = the console is off (404) */
    /* Secrets in files (server/config/secret.h): paths, read at load into
     * metrics_token, admin_token, app0.secret and redis_password. */
    char *metrics_token_file;
    char *admin_token_file;

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
    uint64_t write_timeout_ms; /* queued, nothing written: 4100; default 10s */
    uint64_t max_queued_total; /* hub-wide send queues; 0 = derived from RAM */
    uint32_t max_subscriptions; /* channels per connection; default 100 */
    uint32_t subscribe_rate;    /* (un)subscribes per second; default 50 */
    /* Cache channels and subscription counts (hub/channel/cache.h, hub/channel/subcount.h) */
    uint64_t cache_ttl_ms;      /* default 30 min */
    uint64_t cache_max_bytes;   /* per app; default 16 MiB; 0 = no cap */
    uint64_t subscription_count_interval_ms; /* default 1 s */
    uint32_t ws_rx_buffer;     /* lws read size per WebSocket, per round */
    int ws_direct_read;        /* 1: the read bypass (server/lws/direct.h) */

    /* REST. */
    uint64_t auth_timestamp_window_s; /* default 600; 0 = not checked */

    /* Apps: no cap on their number. apps/n_apps is a view of the file's
     * "apps" (file_apps, owned) when it lists them, else of the default
     * app app0 (set by --app-id/--app-key/--app-secret); load and
     * defaults keep it pointing at the right one. */
    struct hub_app *apps;
    unsigned n_apps;               /* >= 1 after load (default app) */
    struct hub_app app0;
    struct hub_app *file_apps;
    unsigned n_file_apps;
    bool allow_default_secret;     /* on a non-loopback bind */
    bool dev_auth_endpoint;        /* /auth signs with the app secret; dev only,
                                      refused on a non-loopback bind */
    char *app_secret_file;         /* the default app's secret, in a file */

    /* Files and logs. */
    char *web_root;            /* static files for / and /dashboard */
    char *log_level;           /* "error","warn","info","debug" (default info) */
    enum srv_log_format log_format;
    enum srv_event_loop event_loop; /* libev (epoll) or lws's poll() */

    /* Webhooks (docs/WEBHOOKS.md); the webhooks themselves are per app. */
    char *state_dir;               /* durable state; NULL = memory only */
    char *webhook_ca_file;         /* CA bundle for https; NULL = system */
    uint64_t webhook_delay_ms;     /* vacated / member_removed, default 3s */
    uint64_t webhook_timeout_ms;   /* per request, default 4s */
    uint64_t webhook_retry_window_ms; /* then dead letter, default 5m */
    uint64_t webhook_backoff_max_ms;  /* retry backoff cap, default 60s */
    uint64_t webhook_max_pending;  /* bytes of batches held, default 64MiB */
    uint32_t webhook_stream_max;   /* --redis: entries per app's stream */
    bool webhook_dead_letters;     /* --webhook-dead-letters: list, exit */
    char *webhook_replay;          /* --webhook-replay ID|all: then exit */
    /* Scale-out (docs/SCALING.md). */
    char *redis;               /* redis://[user:pass@]host:port/db; NULL = one node */
    char *node_id;             /* NULL = derived: host-pid-random */
    char *redis_prefix;        /* Redis channel prefix, default "lubdub" */
    uint64_t node_lease_ms;    /* --node-lease, 1s..60s, default 3s */
    char *redis_password_file; /* overrides the password in --redis */
    char *redis_password;      /* read from it; NULL = the URL's (if any) */
    char *cluster_key_file;    /* --cluster-key-file; NULL = no key */

    /* Set by parsing, not options. */
    bool check_only;           /* --check-config */
    bool help;                 /* --help */
    char *config_file;         /* --config / LUBDUB_CONFIG; NULL = none */
};

/*
 * The option table. One row per option drives flags, environment variables,
 * JSON keys, --help and the docs check. An option named "ping_interval" is
 * the flag --ping-interval, the variable LUBDUB_PING_INTERVAL and the JSON
 * key "ping_interval"; srv_config_option_name() spells them.
 */
enum srv_option_type {
    SRV_OPT_STRING,   /* text */
    SRV_OPT_UINT,     /* decimal integer */
    SRV_OPT_DURATION, /* stored in milliseconds */
    SRV_OPT_SECONDS,  /* duration syntax, stored in whole seconds */
    SRV_OPT_SIZE,     /* stored in bytes */
    SRV_OPT_BOOL,
    SRV_OPT_CHOICE,   /* one of choices, stored as a borrowed string */
    SRV_OPT_ENUM,     /* one of choices, stored as its index */
};

/* Where an option may be set (srv_option_desc.sources). */
#define SRV_SRC_FLAG 1u
#define SRV_SRC_ENV 2u
#define SRV_SRC_FILE 4u

/* srv_option_desc.flags. */
#define SRV_OPTF_NULLABLE 1u      /* an empty value means unset */
#define SRV_OPTF_DEFAULT_APP 2u   /* sets the default app; not with "apps" */
#define SRV_OPTF_BUILD_DEFAULT 4u /* the default is chosen at compile time */

struct srv_option_desc {
    const char *name;            /* JSON spelling: "ping_interval" */
    enum srv_option_type type;
    unsigned sources;            /* SRV_SRC_* */
    unsigned flags;              /* SRV_OPTF_* */
    const char *def;             /* default as text; NULL = unset */
    const char *metavar;         /* "ADDR"; NULL = derived from the type */
    const char *help;            /* one or two sentences */
    const char *const *choices;  /* NULL-terminated, CHOICE and ENUM */
    uint64_t min, max;           /* numeric range in the stored unit */
    char short_flag;             /* 'h' for -h; 0 = none */
    /* Private to config.c: where the value lives in its struct. */
    size_t offset_;
    size_t size_;
    /* The environment variable when it is not LUBDUB_<NAME>; NULL = that. */
    const char *env;
};

/* *out gets the table (borrowed, static); returns the number of rows. */
size_t srv_config_options(const struct srv_option_desc **out);

/* Format a configuration error into err (errlen bytes, always one line):
 * control characters quoted back from keys, names or values are written
 * as \xNN.  Shared by every part of the loader (config.c,
 * config_webhooks.c).  Does nothing when err is NULL or errlen is 0. */
void srv_config_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Spell d for one source (SRV_SRC_FLAG "--ping-interval", SRV_SRC_ENV
 * "LUBDUB_PING_INTERVAL", SRV_SRC_FILE "ping_interval") into buf.
 * Returns 0, -ENOENT if d cannot be set from that source, -ENOSPC if buf
 * is too small.
 */
int srv_config_option_name(const struct srv_option_desc *d, unsigned source,
                           char *buf, size_t len);

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
 * still needs srv_config_fini(). With --help it sets help and returns 0
 * without reading the file or the environment.
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

/* Cross-option checks (TLS pair, default secret on non-loopback, ...). */
int srv_config_validate(const struct srv_config *cfg, char *err, size_t errlen);

/*
 * server/config/config_webhooks.c: parse an app's "webhooks" array (val) into
 * app->webhooks (owned by the app; hub_wh_app_free). label names the
 * key in errors. 0, or -EINVAL / -ENOMEM with one line in err.
 */
struct json_t;
int srv_config_webhooks(struct hub_app *app, struct json_t *val,
                        const char *label, char *err, size_t errlen);

/* Print --help: every option with flag, env var, JSON key, default. */
void srv_config_print_help(FILE *out);

/* Free what load allocated; cfg may be reused after defaults(). */
void srv_config_fini(struct srv_config *cfg);

#endif
