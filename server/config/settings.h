/*
 * server/config/settings.h - struct srv_config: every setting lubdub runs
 * with, as the option table (server/config/options.c) fills it. The rest of
 * the server reads it through server/config/config.h, which includes this.
 *
 * It is its own header, below every part of the loader, so that the table,
 * the loaders, the checks and the secret files can all name the struct
 * without including the loader's public API (config.h) above them.
 *
 * Thread: main thread only, before any loop starts; afterwards the struct is
 * read-only and shared by every loop.
 */
#ifndef SRV_SETTINGS_H
#define SRV_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/app/app.h"

enum srv_log_format { SRV_LOG_TEXT, SRV_LOG_JSON };
/* The "<N>" priority prefix (docs/LOGS.md): auto = when stderr is the
 * journal. */
enum srv_log_priority { SRV_LOG_PRIO_AUTO, SRV_LOG_PRIO_ON, SRV_LOG_PRIO_OFF };

/* Room for the rows of the option table (options.c asserts it fits). */
#define SRV_CONFIG_MAX_OPTIONS 128
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

    /* Operator surfaces (server/ops/ops_http.c, server/ops/console.c). */
    uint16_t metrics_port;     /* 0 = /metrics and /stats on --port */
    char *metrics_bind;        /* NULL = --bind */
    char *metrics_token;       /* NULL = no bearer token asked */
    char *admin_token;         /* NULL = the console is off (404) */
    /* Secrets in files (server/config/secret.h): paths, read at load into
     * metrics_token, admin_token, app0.secret, redis_password and
     * redis_sentinel_password. */
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
    /* History (issue 35): every byte the history rings hold, hub-wide. */
    uint64_t history_max_bytes; /* default 64 MiB, 64 KiB..16 GiB */
    uint32_t ws_rx_buffer;     /* lws read size per WebSocket, per round */
    int ws_direct_read;        /* 1: the read bypass (server/lws/direct.h) */
    /* permessage-deflate (issue 34): the hub's switch (an app's own
     * "compression" key can only turn it off for that app) and the
     * smallest frame, in wire bytes, that goes compressed. */
    int compression;           /* 1: on (default), 0: off */
    uint32_t compression_min_size; /* default 128, 0..16 MiB */

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
    enum srv_log_priority log_priority;
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
    bool ready_requires_redis; /* /readyz 503 while not joined, even after */
    char *redis_password_file; /* overrides the password in --redis */
    char *redis_password;      /* read from it; NULL = the URL's (if any) */
    /* TLS to Redis and its sentinels (rediss:// only; validate.c). */
    char *redis_tls_ca_file;   /* NULL = the system's default store */
    char *redis_tls_cert_file; /* client certificate; with the key or not */
    char *redis_tls_key_file;
    char *redis_tls_server_name; /* name verified and sent as SNI; NULL =
                                    the host connected to */
    /* Sentinel (server/config/redis_url.h, srv_redis_sentinels_parse):
     * with it, --redis (default redis://localhost:6379/0, set by
     * validate.c) gives only the scheme, user, password and db. */
    char *redis_sentinel;      /* "host:port[,host:port...]"; NULL = none */
    char *redis_master;        /* the master's name the sentinels know */
    char *redis_sentinel_password_file; /* AUTH to the sentinels */
    char *redis_sentinel_password;      /* read from it; NULL = no AUTH */
    char *cluster_key_file;    /* --cluster-key-file; NULL = no key */

    /* Set by parsing, not options. */
    bool check_only;           /* --check-config */
    bool help;                 /* --help */
    bool version;              /* --version: print it, exit */
    bool print_config;         /* --print-config: print this, exit */
    bool new_app;              /* --new-app: print a random app, exit */
    char *config_file;         /* --config / LUBDUB_CONFIG; NULL = none */

    /* What the load noticed (server/config/apply.h): where each option's
     * value came from, src_[row of the option table] (0: the default, or
     * SRV_SRC_FILE, SRV_SRC_ENV, SRV_SRC_FLAG: the last source that set
     * it; --print-config shows it), and the warnings, each line ending
     * in '\n' (owned; NULL: none), which main() logs once the log is up:
     * unknown LUBDUB_* variables. */
    unsigned char src_[SRV_CONFIG_MAX_OPTIONS];
    char *warnings;
};


#endif
