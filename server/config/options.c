/*
 * server/config/options.c - the option table, srv_options[]: one row per
 * option of lubdub, and srv_app_fields[], the keys of one object in the
 * file's "apps" array. Flags, environment variables, JSON keys, the
 * defaults themselves, --help and the docs test all read these rows, so
 * adding an option is adding one row here. Beside the table: the lookups
 * the loaders use (by flag, short flag, JSON key, name) and how a row's
 * name is spelled for each source.
 *
 * The rest of the loader is apart: server/config/value.c parses a value
 * into its field, load_argv.c, load_env.c and load_file.c read the
 * sources, config.c orders them and reads the secret files, validate.c
 * checks the result and help.c prints --help.
 *
 * Thread: any (the tables are constant).
 */
#include "server/config/options.h"
#include "server/config/didyoumean.h"
#include "server/config/settings.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifndef LUBDUB_WEB_ROOT
#define SRV_WEB_ROOT_DEFAULT "web"
#else
#define SRV_WEB_ROOT_DEFAULT LUBDUB_WEB_ROOT
#endif

#define SRV_MS_PER_DAY UINT64_C(86400000)

static const char *const srv__log_levels[] = {
    "error", "warn", "info", "debug", NULL,
};
static const char *const srv__log_formats[] = {"text", "json", NULL};
static const char *const srv__log_priorities[] = {"auto", "on", "off", NULL};
static const char *const srv__event_loops[] = {"libev", "poll", NULL};
static const char *const srv__off_on[] = {"off", "on", NULL};

#define SRV_CFG(field) offsetof(struct srv_config, field), \
    sizeof(((struct srv_config *)0)->field), NULL
/* A row whose environment variable is not LUBDUB_<NAME>. */
#define SRV_CFG_ENV(field, env) offsetof(struct srv_config, field), \
    sizeof(((struct srv_config *)0)->field), env
#define SRV_APP(field) offsetof(struct hub_app, field), \
    sizeof(((struct hub_app *)0)->field), NULL

#define SRV_ALL (SRV_SRC_FLAG | SRV_SRC_ENV | SRV_SRC_FILE)


/*
 * Ranges are in the stored unit: milliseconds for durations, seconds for
 * SRV_OPT_SECONDS, bytes for sizes. Cross-option rules (tick <= ping
 * interval, max_queue >= max_message, ...) live in srv_config_validate().
 */
static const struct srv_option_desc srv_options[] = {
    {"bind", SRV_OPT_STRING, SRV_ALL, 0, "127.0.0.1", "ADDR",
     "Address to listen on. Anything but 127.x.x.x, ::1 or localhost "
     "is public and needs a real app secret.",
     NULL, 0, 0, 0, SRV_CFG(bind)},
    {"port", SRV_OPT_UINT, SRV_ALL, 0, "6001", "PORT",
     "TCP port for WebSocket, REST and stats; 0 picks a free port.",
     NULL, 0, 65535, 0, SRV_CFG(port)},
    {"loops", SRV_OPT_UINT, SRV_ALL, 0, "0", "N",
     "Event loops (threads); 0 uses one per online CPU.",
     NULL, 0, 64, 0, SRV_CFG(loops)},
    {"tls_cert", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "PATH",
     "PEM certificate chain; with --tls-key serves wss and https.",
     NULL, 0, 0, 0, SRV_CFG(tls_cert)},
    {"tls_key", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "PATH",
     "PEM private key for --tls-cert.",
     NULL, 0, 0, 0, SRV_CFG(tls_key)},
    {"allowed_origins", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "LIST",
     "Comma-separated Origin values allowed to open WebSockets; unset "
     "allows any.",
     NULL, 0, 0, 0, SRV_CFG(allowed_origins)},
    {"trusted_proxies", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "LIST",
     "Comma-separated CIDRs (IPv4, IPv6) of proxies whose X-Forwarded-For "
     "names the client; unset uses the socket's peer.",
     NULL, 0, 0, 0, SRV_CFG(trusted_proxies)},
    {"max_connections", SRV_OPT_UINT, SRV_ALL, 0, "0", "N",
     "Connections across the whole hub; 0 is unlimited.",
     NULL, 0, UINT32_MAX, 0, SRV_CFG(max_connections)},
    {"fd_limit", SRV_OPT_UINT, SRV_ALL, 0, "0", "N",
     "File descriptors the hub may hold (its socket capacity; lws walks "
     "a table of this size on every close); 0 derives it from "
     "--max-connections or the hard limit (at most 65536).",
     NULL, 0, 10000000, 0, SRV_CFG(fd_limit)},
    {"metrics_port", SRV_OPT_UINT, SRV_ALL, 0, "0", "PORT",
     "Serve /metrics and /stats on this port only (plain HTTP, on the "
     "first loop); 0 serves them on --port.",
     NULL, 0, 65535, 0, SRV_CFG(metrics_port)},
    {"metrics_bind", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "ADDR",
     "Address for --metrics-port; unset uses --bind.",
     NULL, 0, 0, 0, SRV_CFG(metrics_bind)},
    {"metrics_token", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "TOKEN",
     "Require \"Authorization: Bearer TOKEN\" on /metrics and /stats "
     "(16 or more printable characters); unset asks for none.",
     NULL, 0, 0, 0, SRV_CFG(metrics_token)},
    {"admin_token", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "TOKEN",
     "Token of the operator console at /console (16 or more printable "
     "characters); unset turns the console off (404).",
     NULL, 0, 0, 0, SRV_CFG(admin_token)},
    {"metrics_token_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "File holding --metrics-token (one trailing newline is dropped), "
     "read again on SIGHUP; safer than the flag, which every local user "
     "can read. Not with --metrics-token.",
     NULL, 0, 0, 0, SRV_CFG(metrics_token_file)},
    {"admin_token_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "File holding --admin-token (one trailing newline is dropped), read "
     "again on SIGHUP. Not with --admin-token.",
     NULL, 0, 0, 0, SRV_CFG(admin_token_file)},
    {"tick", SRV_OPT_DURATION, SRV_ALL, 0, "100ms", NULL,
     "Timing wheel resolution; deadlines fire up to one tick late.",
     NULL, 1, 60000, 0, SRV_CFG(tick_ms)},
    {"ping_interval", SRV_OPT_DURATION, SRV_ALL, 0, "25s", NULL,
     "Ping a connection after this long without inbound traffic.",
     NULL, 1, SRV_MS_PER_DAY, 0, SRV_CFG(ping_interval_ms)},
    {"pong_timeout", SRV_OPT_DURATION, SRV_ALL, 0, "10s", NULL,
     "Close a pinged connection (4201) that stays silent this long.",
     NULL, 1, SRV_MS_PER_DAY, 0, SRV_CFG(pong_timeout_ms)},
    {"idle_timeout", SRV_OPT_DURATION, SRV_ALL, 0, "0", NULL,
     "Close a connection (4202) that sends no message this long; 0 is off.",
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_CFG(idle_timeout_ms)},
    {"close_timeout", SRV_OPT_DURATION, SRV_ALL, 0, "2s", NULL,
     "Drop a peer that has not finished a close handshake after this long.",
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_CFG(close_timeout_ms)},
    {"heartbeat_interval", SRV_OPT_DURATION, SRV_ALL, 0, "0", NULL,
     "How often each loop scans for silent connections; 0 derives it from "
     "--ping-interval.",
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_CFG(heartbeat_interval_ms)},
    {"drain_timeout", SRV_OPT_DURATION, SRV_ALL, 0, "10s", NULL,
     "On SIGTERM, how long connections get to close before exit.",
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_CFG(drain_timeout_ms)},
    {"activity_timeout", SRV_OPT_UINT, SRV_ALL, 0, "30", "SECONDS",
     "Seconds advertised to clients in pusher:connection_established "
     "(1..120).",
     NULL, 1, 120, 0, SRV_CFG(activity_timeout_s)},
    {"max_message", SRV_OPT_SIZE, SRV_ALL, 0, "64KiB", NULL,
     "Largest inbound WebSocket message; bigger ones close with 1009.",
     NULL, 1024, UINT32_C(1) << 30, 0, SRV_CFG(max_message)},
    {"max_queue", SRV_OPT_SIZE, SRV_ALL, 0, "1MiB", NULL,
     "Send queue per connection; a reader that falls further behind is "
     "closed (4100).",
     NULL, 1024, UINT32_C(1) << 31, 0, SRV_CFG(max_queue)},
    {"write_timeout", SRV_OPT_DURATION, SRV_ALL, 0, "10s", NULL,
     "Close a connection (4100) whose send queue holds bytes the socket "
     "has taken none of for this long: a reader that stopped reading on a "
     "quiet channel; 0 is off.",
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_CFG(write_timeout_ms)},
    {"max_queued_total", SRV_OPT_SIZE, SRV_ALL, 0, "0", NULL,
     "Send queues of all connections together, split evenly between the "
     "loops; past a loop's share its connections furthest behind are "
     "closed (4100). 0 uses 1/8 of the memory (the cgroup limit if lower), "
     "at most 16GiB and at least --max-queue per loop.",
     NULL, 0, UINT64_C(1) << 50, 0, SRV_CFG(max_queued_total)},
    {"max_subscriptions", SRV_OPT_UINT, SRV_ALL, 0, "100", "N",
     "Channels one connection may subscribe to; more are refused with "
     "pusher:subscription_error. 0 is unlimited.",
     NULL, 0, UINT32_MAX, 0, SRV_CFG(max_subscriptions)},
    {"subscribe_rate", SRV_OPT_UINT, SRV_ALL, 0, "50", "N",
     "Subscribe, unsubscribe and signin requests per second one connection "
     "may send, after a burst of three times its max_subscriptions (at least 100); "
     "more are refused with pusher:error 4301, and 16 refusals in a row "
     "close it (4100). 0 is unlimited.",
     NULL, 0, 1000, 0, SRV_CFG(subscribe_rate)},
    {"cache_ttl", SRV_OPT_DURATION, SRV_ALL, 0, "30m", NULL,
     "How long a cache channel keeps its last event (Pusher's 30 minutes); "
     "an app's own cache_ttl wins.",
     NULL, 1, SRV_MS_PER_DAY, 0, SRV_CFG(cache_ttl_ms)},
    {"cache_max_bytes", SRV_OPT_SIZE, SRV_ALL, 0, "16MiB", NULL,
     "Memory for cached events per app; past it the oldest are evicted. "
     "0 is no cap; an app's own cache_max_bytes wins.",
     NULL, 0, UINT64_C(1) << 40, 0, SRV_CFG(cache_max_bytes)},
    {"sub_count_interval", SRV_OPT_DURATION, SRV_ALL, 0, "1s",
     NULL,
     "At most one pusher_internal:subscription_count per channel this "
     "often (apps with subscription_count on).",
     NULL, 1, 600000, 0, SRV_CFG(subscription_count_interval_ms)},
    /* History (issue 35; docs/CONFIG.md "History", docs/RECOVERY.md). */
    {"history_max_bytes", SRV_OPT_SIZE, SRV_ALL, 0, "64MiB", NULL,
     "Memory for the events kept for recovery by every app with "
     "\"history\" on, together; past it the oldest are evicted. Read at "
     "start.",
     NULL, UINT64_C(64) << 10, UINT64_C(16) << 30, 0,
     SRV_CFG(history_max_bytes)},
    {"ws_rx_buffer", SRV_OPT_SIZE, SRV_ALL, 0, "128", NULL,
     "Bytes libwebsockets reads from one WebSocket per loop pass, held by "
     "every connection: more speeds up clients that send a lot, and costs "
     "that much memory per connection. With ws_direct_read on, only the "
     "handshake and sessions the bypass declines read this way.",
     NULL, 64, 65536, 0, SRV_CFG(ws_rx_buffer)},
    {"ws_direct_read", SRV_OPT_ENUM, SRV_ALL, 0, "on", NULL,
     "Read established WebSockets, plain TCP and TLS, with one 64 KiB "
     "read per loop pass instead of lws's ws_rx_buffer-sized ones (libev "
     "only).",
     srv__off_on, 0, 0, 0, SRV_CFG(ws_direct_read)},
    /* Compression (issue 34; docs/CONFIG.md "Compression"). Read at
     * start only: a session negotiates at its upgrade, and the loops read
     * both through their hub_config copy. */
    {"compression", SRV_OPT_ENUM, SRV_ALL, 0, "on", NULL,
     "permessage-deflate (RFC 7692) for clients that offer it, on sessions "
     "the read bypass reads (plain TCP and TLS, --event-loop libev, "
     "--ws-direct-read on); each publication is compressed once and "
     "shared by every compressing subscriber.",
     srv__off_on, 0, 0, 0, SRV_CFG(compression)},
    {"compression_min_size", SRV_OPT_SIZE, SRV_ALL, 0, "128", "BYTES",
     "Frames smaller than this many bytes go uncompressed (0..16MiB).",
     NULL, 0, UINT32_C(16) << 20, 0, SRV_CFG(compression_min_size)},
    {"auth_timestamp_window", SRV_OPT_SECONDS, SRV_ALL, 0, "600s", NULL,
     "REST auth_timestamp must be this close to now, in whole seconds; "
     "0 skips the check.",
     NULL, 0, 86400, 0, SRV_CFG(auth_timestamp_window_s)},
    {"allow_default_secret", SRV_OPT_BOOL, SRV_ALL, 0, "false", NULL,
     "Allow the default secret \"app-secret\" on a non-loopback bind "
     "(throwaway setups only).",
     NULL, 0, 0, 0, SRV_CFG(allow_default_secret)},
    {"dev_auth_endpoint", SRV_OPT_BOOL, SRV_ALL, 0, "false", NULL,
     "Serve /auth, which signs any subscription with the app secret; "
     "development only, refused unless --bind is loopback.",
     NULL, 0, 0, 0, SRV_CFG(dev_auth_endpoint)},
    {"web_root", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_BUILD_DEFAULT,
     SRV_WEB_ROOT_DEFAULT, "DIR",
     "Directory of static files for / and /dashboard (the default can be "
     "set at build time with LUBDUB_WEB_ROOT).",
     NULL, 0, 0, 0, SRV_CFG(web_root)},
    {"log_level", SRV_OPT_CHOICE, SRV_ALL, 0, "info", NULL,
     "Least severe level that is logged.",
     srv__log_levels, 0, 0, 0, SRV_CFG(log_level)},
    {"log_format", SRV_OPT_ENUM, SRV_ALL, 0, "text", NULL,
     "Log lines as plain text or as one JSON object each.",
     srv__log_formats, 0, 0, 0, SRV_CFG(log_format)},
    {"log_priority", SRV_OPT_ENUM, SRV_ALL, 0, "auto", NULL,
     "Start each log line with its syslog priority, <3> to <7>, for "
     "journald; auto: when stderr is the journal ($JOURNAL_STREAM).",
     srv__log_priorities, 0, 0, 0, SRV_CFG(log_priority)},
    {"event_loop", SRV_OPT_ENUM, SRV_ALL, 0, "libev", NULL,
     "Event loop under each lws context: libev (epoll; cost per wakeup "
     "follows the ready sockets) or poll (lws's built-in poll(), cost "
     "follows all sockets).",
     srv__event_loops, 0, 0, 0, SRV_CFG(event_loop)},
    {"state_dir", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "DIR",
     "Directory for durable state (pending webhooks, in webhooks.db); "
     "unset keeps them in memory only.",
     NULL, 0, 0, 0, SRV_CFG(state_dir)},
    {"webhook_ca_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "PEM CA bundle that verifies https webhook receivers; unset uses the "
     "system's.",
     NULL, 0, 0, 0, SRV_CFG(webhook_ca_file)},
    {"webhook_delay", SRV_OPT_DURATION, SRV_ALL, 0, "3s", NULL,
     "How long channel_vacated and member_removed wait; a rejoin within it "
     "sends nothing. 0 sends them at once.",
     NULL, 0, 60000, 0, SRV_CFG(webhook_delay_ms)},
    {"webhook_timeout", SRV_OPT_DURATION, SRV_ALL, 0, "4s", NULL,
     "Time a webhook receiver gets to answer one request.",
     NULL, 100, 60000, 0, SRV_CFG(webhook_timeout_ms)},
    {"webhook_retry_window", SRV_OPT_DURATION, SRV_ALL, 0, "5m", NULL,
     "How long a failing webhook batch is retried before it becomes a "
     "dead letter.",
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_CFG(webhook_retry_window_ms)},
    {"webhook_backoff_max", SRV_OPT_DURATION, SRV_ALL, 0, "60s", NULL,
     "Longest wait between two retries (exponential from 1s, jittered).",
     NULL, 10, 3600000, 0, SRV_CFG(webhook_backoff_max_ms)},
    {"webhook_max_pending", SRV_OPT_SIZE, SRV_ALL, 0, "64MiB", NULL,
     "Bytes of webhook batches held (and stored) at once; past it new "
     "batches are dropped and counted.",
     NULL, 65536, UINT64_C(1) << 34, 0, SRV_CFG(webhook_max_pending)},
    {"webhook_stream_max", SRV_OPT_UINT, SRV_ALL, 0, "100000", "N",
     "With --redis: entries an app's webhook stream in Redis holds at "
     "most; past it new events are dropped and counted.",
     NULL, 1000, 10000000, 0, SRV_CFG(webhook_stream_max)},
    {"webhook_dead_letters", SRV_OPT_BOOL, SRV_SRC_FLAG, 0, "false", NULL,
     "Print the dead-lettered webhook batches in --state-dir as JSON lines, "
     "then exit.",
     NULL, 0, 0, 0, SRV_CFG(webhook_dead_letters)},
    {"webhook_replay", SRV_OPT_STRING, SRV_SRC_FLAG, SRV_OPTF_NULLABLE, NULL,
     "ID|all",
     "Queue one dead letter (by id) or all of them for delivery again, "
     "then exit; a running hub picks them up within seconds.",
     NULL, 0, 0, 0, SRV_CFG(webhook_replay)},
    {"app_id", SRV_OPT_STRING, SRV_SRC_FLAG | SRV_SRC_ENV,
     SRV_OPTF_DEFAULT_APP, "app-id", "ID",
     "Id of the single default app (REST /apps/ID); not with \"apps\" in "
     "the file.",
     NULL, 0, 0, 0, SRV_CFG(app0.id)},
    {"app_key", SRV_OPT_STRING, SRV_SRC_FLAG | SRV_SRC_ENV,
     SRV_OPTF_DEFAULT_APP, "app-key", "KEY",
     "Key of the default app (WebSocket /app/KEY); not with \"apps\" in "
     "the file.",
     NULL, 0, 0, 0, SRV_CFG(app0.key)},
    {"app_secret", SRV_OPT_STRING, SRV_SRC_FLAG | SRV_SRC_ENV,
     SRV_OPTF_DEFAULT_APP, SRV_DEFAULT_SECRET, "SECRET",
     "Secret of the default app; prefer --app-secret-file, since flags "
     "show in ps. Not with \"apps\" in the file.",
     NULL, 0, 0, 0, SRV_CFG(app0.secret)},
    {"app_secret_file", SRV_OPT_STRING, SRV_SRC_FLAG | SRV_SRC_ENV,
     SRV_OPTF_DEFAULT_APP | SRV_OPTF_NULLABLE, NULL, "PATH",
     "File holding the default app's secret (one trailing newline is "
     "dropped), read again on SIGHUP. Not with --app-secret, nor with "
     "\"apps\" in the file (there, \"secret_file\").",
     NULL, 0, 0, 0, SRV_CFG(app_secret_file)},
    {"redis", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "URL",
     "Redis of a cluster of nodes, redis[s]://[user:pass@]host:port/db "
     "(rediss: TLS); unset runs one standalone node (docs/SCALING.md). "
     "With --redis-sentinel its host:port is unused.",
     NULL, 0, 0, 0, SRV_CFG_ENV(redis, "LUBDUB_REDIS_URL")},
    {"node_id", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL, "NAME",
     "This node's name in the cluster (1-64 of A-Z a-z 0-9 . _ -), unique "
     "per process; unset derives hostname-pid-random.",
     NULL, 0, 0, 0, SRV_CFG(node_id)},
    {"redis_prefix", SRV_OPT_STRING, SRV_ALL, 0, "lubdub", "TEXT",
     "Prefix of this cluster's Redis channels, so that several clusters "
     "can share one Redis (1-64 of A-Z a-z 0-9 . _ - :).",
     NULL, 0, 0, 0, SRV_CFG(redis_prefix)},
    /* Node lease (server/redis/redis_lease.h). */
    {"node_lease", SRV_OPT_DURATION, SRV_ALL, 0, "3s", NULL,
     "How long a silent node stays in the cluster before another node "
     "removes its subscriptions and members (renewed every third of it).",
     NULL, 1000, 60000, 0, SRV_CFG(node_lease_ms)},
    /* Readiness (server/redis/redis_ready.h, docs/SCALING.md). */
    {"ready_requires_redis", SRV_OPT_BOOL, SRV_ALL, 0, "false", NULL,
     "With --redis: /readyz answers 503 whenever the node is not joined "
     "(Redis down, its directory out of sync), not only before it first "
     "joined.",
     NULL, 0, 0, 0, SRV_CFG(ready_requires_redis)},
    {"redis_password_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "File holding the Redis password (one trailing newline is dropped), "
     "used instead of one in --redis; read again on SIGHUP, used from the "
     "next reconnect.",
     NULL, 0, 0, 0, SRV_CFG(redis_password_file)},
    /* TLS and Sentinel (issue 33; server/config/redis_url.h). */
    {"redis_tls_ca_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "PEM CA bundle that verifies Redis's (and the sentinels') "
     "certificate; needs a rediss:// --redis. Unset uses the system's.",
     NULL, 0, 0, 0, SRV_CFG(redis_tls_ca_file)},
    {"redis_tls_cert_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "PEM client certificate shown to Redis, with --redis-tls-key-file; "
     "unset shows none.",
     NULL, 0, 0, 0, SRV_CFG(redis_tls_cert_file)},
    {"redis_tls_key_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "PEM private key of --redis-tls-cert-file.",
     NULL, 0, 0, 0, SRV_CFG(redis_tls_key_file)},
    {"redis_tls_server_name", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE,
     NULL, "NAME",
     "Name verified in Redis's certificate and sent as SNI; unset uses the "
     "host connected to (with --redis-sentinel, the address it gives).",
     NULL, 0, 0, 0, SRV_CFG(redis_tls_server_name)},
    {"redis_sentinel", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "LIST",
     "Sentinels to ask for the master, host[:port][,host[:port]...] "
     "(port 26379 by default, at most 16); needs --redis-master. --redis "
     "then gives only the scheme, user, password and db (unset: "
     "redis://localhost:6379/0).",
     NULL, 0, 0, 0, SRV_CFG(redis_sentinel)},
    {"redis_master", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "NAME",
     "The master's name the sentinels know (1-128 of A-Z a-z 0-9 . _ -); "
     "needs --redis-sentinel.",
     NULL, 0, 0, 0, SRV_CFG(redis_master)},
    {"redis_sentinel_password_file", SRV_OPT_STRING, SRV_ALL,
     SRV_OPTF_NULLABLE, NULL, "PATH",
     "File holding the sentinels' password (one trailing newline is "
     "dropped); read again on SIGHUP, used from the next reconnect. Needs "
     "--redis-sentinel.",
     NULL, 0, 0, 0, SRV_CFG(redis_sentinel_password_file)},
    /* Cluster key (hub/cluster/cluster_key.h, docs/SCALING.md "The cluster key"). */
    {"cluster_key_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "File of the cluster key (one line; two during a rotation: sign with "
     "the first, accept either); the same on every node. Unset: nothing "
     "is MACed. Read at start.",
     NULL, 0, 0, 0, SRV_CFG(cluster_key_file)},
    {"config", SRV_OPT_STRING, SRV_SRC_FLAG | SRV_SRC_ENV, SRV_OPTF_NULLABLE,
     NULL, "FILE",
     "JSON file read before the environment and the flags.",
     NULL, 0, 0, 0, SRV_CFG(config_file)},
    {"check_config", SRV_OPT_BOOL, SRV_SRC_FLAG | SRV_SRC_ENV, 0, "false",
     NULL, "Load and validate the configuration, then exit.",
     NULL, 0, 0, 0, SRV_CFG(check_only)},
    /* The commands that print and exit (issue 36; docs/CONFIG.md
     * "Commands"): flags only, like --help. */
    {"version", SRV_OPT_BOOL, SRV_SRC_FLAG, 0, "false", NULL,
     "Print the version and the git commit it was built from, then exit.",
     NULL, 0, 0, 0, SRV_CFG(version)},
    {"print_config", SRV_OPT_BOOL, SRV_SRC_FLAG, 0, "false", NULL,
     "Print the effective configuration, one option a line with where its "
     "value came from (default, file, env or flag) and secrets as ****, "
     "then exit.",
     NULL, 0, 0, 0, SRV_CFG(print_config)},
    {"new_app", SRV_OPT_BOOL, SRV_SRC_FLAG, 0, "false", NULL,
     "Print a new app with a random id, key and secret, as a JSON object "
     "for the file's \"apps\", then exit.",
     NULL, 0, 0, 0, SRV_CFG(new_app)},
    {"help", SRV_OPT_BOOL, SRV_SRC_FLAG, 0, "false", NULL,
     "Print this help and exit.",
     NULL, 0, 0, 'h', SRV_CFG(help)},
};

#define SRV_N_OPTIONS (sizeof(srv_options) / sizeof(srv_options[0]))
/* struct srv_config notes each row's source (src_[]). */
_Static_assert(SRV_N_OPTIONS <= SRV_CONFIG_MAX_OPTIONS,
               "raise SRV_CONFIG_MAX_OPTIONS in server/config/settings.h");


/*
 * The keys of one object in the file's "apps" array. They share the option
 * machinery but are not options: each app has its own copy.
 */
static const struct srv_option_desc srv_app_fields[] = {
    {"id", SRV_OPT_STRING, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(id)},
    {"key", SRV_OPT_STRING, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(key)},
    {"secret", SRV_OPT_STRING, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(secret)},
    {"enabled", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(enabled)},
    {"client_events", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(client_events)},
    {"max_connections", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_connections)},
    {"client_event_rate", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(client_event_rate)},
    {"max_presence_members", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_presence_members)},
    {"max_user_info_bytes", SRV_OPT_SIZE, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_user_info_bytes)},
    {"max_user_id_len", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_user_id_len)},
    {"max_event_bytes", SRV_OPT_SIZE, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_event_bytes)},
    {"max_event_name", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_event_name)},
    {"max_channels_per_event", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL,
     NULL, NULL, 0, UINT32_MAX, 0, SRV_APP(max_channels_per_event)},
    {"max_batch_events", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_batch_events)},
    {"max_channel_name", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_channel_name)},
    {"webhook_batching", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(webhook_batching)},
    /* Authorized connections and watchlists (hub/pusher/watchlist.c). */
    {"enable_user_authentication", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL,
     NULL, NULL, 0, 0, 0, SRV_APP(enable_user_authentication)},
    {"user_authentication_timeout", SRV_OPT_DURATION, SRV_SRC_FILE, 0, NULL,
     NULL, NULL, NULL, 1, SRV_MS_PER_DAY, 0, SRV_APP(user_auth_timeout_ms)},
    {"watchlist_events", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(watchlist_events)},
    {"max_watchlist", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 100000, 0, SRV_APP(max_watchlist)},
    {"max_watchers", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_watchers)},
    {"cache_ttl", SRV_OPT_DURATION, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, SRV_MS_PER_DAY, 0, SRV_APP(cache_ttl_ms)},
    {"cache_max_bytes", SRV_OPT_SIZE, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT64_C(1) << 40, 0, SRV_APP(cache_max_bytes)},
    {"max_subscriptions", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, UINT32_MAX, 0, SRV_APP(max_subscriptions)},
    {"subscription_count", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(subscription_count)},
    /* permessage-deflate for this app's sessions, with --compression on
     * (issue 34). */
    {"compression", SRV_OPT_BOOL, SRV_SRC_FILE, 0, NULL, NULL, NULL,
     NULL, 0, 0, 0, SRV_APP(compression)},
    /* Issue 13 item 6: per-app REST rate limits and origins. A JSON array
     * of strings is also taken for allowed_origins (srv__load_apps). */
    {"max_backend_events_per_second", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL,
     NULL, NULL, NULL, 0, 1000000, 0, SRV_APP(max_backend_events_per_second)},
    {"max_read_requests_per_second", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL,
     NULL, NULL, NULL, 0, 1000000, 0, SRV_APP(max_read_requests_per_second)},
    {"allowed_origins", SRV_OPT_STRING, SRV_SRC_FILE, SRV_OPTF_NULLABLE,
     NULL, NULL, NULL, NULL, 0, 0, 0, SRV_APP(allowed_origins)},
};

#define SRV_N_APP_FIELDS (sizeof(srv_app_fields) / sizeof(srv_app_fields[0]))

size_t srv_config_options(const struct srv_option_desc **out)
{
    *out = srv_options;
    return SRV_N_OPTIONS;
}

int srv_config_option_name(const struct srv_option_desc *d, unsigned source,
                           char *buf, size_t len)
{
    const char *prefix = "";
    size_t i, plen, nlen = strlen(d->name);

    if (!(d->sources & source))
        return -ENOENT;
    if (source == SRV_SRC_ENV && d->env) {
        if (strlen(d->env) + 1 > len)
            return -ENOSPC;
        memcpy(buf, d->env, strlen(d->env) + 1);
        return 0;
    }
    if (source == SRV_SRC_FLAG)
        prefix = "--";
    else if (source == SRV_SRC_ENV)
        prefix = SRV_ENV_PREFIX;
    plen = strlen(prefix);
    if (plen + nlen + 1 > len)
        return -ENOSPC;
    memcpy(buf, prefix, plen);
    for (i = 0; i < nlen; i++) {
        char c = d->name[i];

        if (source == SRV_SRC_FLAG && c == '_')
            c = '-';
        else if (source == SRV_SRC_ENV && c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        buf[plen + i] = c;
    }
    buf[plen + nlen] = '\0';
    return 0;
}

/*
 * True when p points at text in the tables, which cfg borrows; see the
 * ownership note at the top of the file.
 */
bool srv__is_borrowed(const char *p)
{
    size_t i, j;

    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const struct srv_option_desc *d = &srv_options[i];

        if (p == d->def)
            return true;
        for (j = 0; d->choices && d->choices[j]; j++)
            if (p == d->choices[j])
                return true;
    }
    return false;
}

/* The row whose flag is name[0..len) ("ping-interval"), or NULL. */
const struct srv_option_desc *srv__find_flag(const char *name,
                                             size_t len)
{
    size_t i, j;

    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const char *n = srv_options[i].name;

        if (!(srv_options[i].sources & SRV_SRC_FLAG) || strlen(n) != len)
            continue;
        for (j = 0; j < len; j++)
            if (name[j] != (n[j] == '_' ? '-' : n[j]))
                break;
        if (j == len)
            return &srv_options[i];
    }
    return NULL;
}

const struct srv_option_desc *srv__find_short(char c)
{
    size_t i;

    for (i = 0; i < SRV_N_OPTIONS; i++)
        if (c && srv_options[i].short_flag == c)
            return &srv_options[i];
    return NULL;
}

static const struct srv_option_desc *srv__find_key(
    const struct srv_option_desc *table, size_t n, const char *key)
{
    size_t i;

    for (i = 0; i < n; i++)
        if ((table[i].sources & SRV_SRC_FILE) && !strcmp(table[i].name, key))
            return &table[i];
    return NULL;
}

const struct srv_option_desc *srv__find_option_key(const char *key)
{
    return srv__find_key(srv_options, SRV_N_OPTIONS, key);
}

const struct srv_option_desc *srv__find_app_key(const char *key)
{
    return srv__find_key(srv_app_fields, SRV_N_APP_FIELDS, key);
}

/* The row whose environment variable is name ("LUBDUB_PORT"), or NULL. */
const struct srv_option_desc *srv__find_env(const char *name)
{
    char env[64];

    for (size_t i = 0; i < SRV_N_OPTIONS; i++)
        if (!srv_config_option_name(&srv_options[i], SRV_SRC_ENV, env,
                                    sizeof(env)) && !strcmp(env, name))
            return &srv_options[i];
    return NULL;
}

/* The nearest of table's file keys (and extra's, NULL-terminated) to key. */
static const char *srv__near_key(const struct srv_option_desc *table,
                                 size_t n, const char *const *extra,
                                 const char *key)
{
    struct srv_didyoumean m;

    srv_didyoumean_init(&m, key);
    for (size_t i = 0; i < n; i++)
        if (table[i].sources & SRV_SRC_FILE)
            srv_didyoumean_offer(&m, table[i].name);
    for (; extra && *extra; extra++)
        srv_didyoumean_offer(&m, *extra);
    return srv_didyoumean_get(&m);
}

const char *srv__near_option_key(const char *key)
{
    static const char *const apps[] = {"apps", NULL};

    return srv__near_key(srv_options, SRV_N_OPTIONS, apps, key);
}

const char *srv__near_app_key(const char *key, const char *const *extra)
{
    return srv__near_key(srv_app_fields, SRV_N_APP_FIELDS, extra, key);
}

int srv__near_env(const char *name, char *buf, size_t len)
{
    char envs[SRV_N_OPTIONS][64];
    struct srv_didyoumean m;
    const char *best;
    size_t plen = strlen(SRV_ENV_PREFIX);

    /* Compared without the prefix, which both share: the threshold then
     * follows the length of the part that was typed. */
    if (strncmp(name, SRV_ENV_PREFIX, plen))
        return -ENOENT;
    srv_didyoumean_init(&m, name + plen);
    for (size_t i = 0; i < SRV_N_OPTIONS; i++) {
        envs[i][0] = '\0';
        if (!srv_config_option_name(&srv_options[i], SRV_SRC_ENV, envs[i],
                                    sizeof(envs[i])) &&
            !strncmp(envs[i], SRV_ENV_PREFIX, plen))
            srv_didyoumean_offer(&m, envs[i] + plen);
    }
    best = srv_didyoumean_get(&m);
    if (!best)
        return -ENOENT;
    if (snprintf(buf, len, "%s%s", SRV_ENV_PREFIX, best) >= (int)len)
        return -ENOSPC;
    return 0;
}

const char *srv__flag(const char *name, char *buf, size_t len)
{
    const struct srv_option_desc *d = NULL;

    /* By name, whatever its sources (--app-id has no JSON key). */
    for (size_t i = 0; i < SRV_N_OPTIONS && !d; i++)
        if (!strcmp(srv_options[i].name, name))
            d = &srv_options[i];
    if (!d || srv_config_option_name(d, SRV_SRC_FLAG, buf, len))
        snprintf(buf, len, "%s", name);
    return buf;
}
