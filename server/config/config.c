/*
 * server/config/config.c - load lubdub's configuration from the embedded defaults,
 * a JSON file, LUBDUB_* environment variables and command-line flags, in
 * that order (later sources win), and check the result.
 *
 * One table, srv_options[], describes every option. Flags, environment
 * variables, JSON keys, the defaults themselves, --help and the docs test
 * all read it, so adding an option is adding one row. Values from every
 * source go through one function, srv__set_text(), so a value means the
 * same thing wherever it is written and its errors read the same. The
 * secret files every source named (--app-secret-file, --admin-token-file,
 * ...) are read last, once it is known which apply (server/config/secret.h); an
 * app's "secret_file" is read with its app.
 *
 * Ownership of strings in struct srv_config: a string field that points at
 * text in the table (a default or one of the choices) is borrowed from the
 * table; any other non-NULL string was strdup()ed here and is owned by cfg.
 * srv_config_fini() frees exactly the owned ones.
 *
 * Thread: main thread only, before any loop starts.
 */
#include "server/config/config.h"
#include "hub/cluster/cluster_key.h"
#include "hub/webhook/webhook.h"
#include "server/config/redis_url.h"
#include "server/config/secret.h"
#include "server/base/peeraddr.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>

#ifndef LUBDUB_WEB_ROOT
#define SRV_WEB_ROOT_DEFAULT "web"
#else
#define SRV_WEB_ROOT_DEFAULT LUBDUB_WEB_ROOT
#endif

#define SRV_ENV_PREFIX "LUBDUB_"
#define SRV_DEFAULT_SECRET "app-secret"
#define SRV_MS_PER_DAY UINT64_C(86400000)
/* Room for a secret file's error: its path and errno's text. */
#define SRV_CFG_WHY_MAX 600

static const char *const srv__log_levels[] = {
    "error", "warn", "info", "debug", NULL,
};
static const char *const srv__log_formats[] = {"text", "json", NULL};
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
    {"ws_rx_buffer", SRV_OPT_SIZE, SRV_ALL, 0, "128", NULL,
     "Bytes libwebsockets reads from one WebSocket per loop pass, held by "
     "every connection: more speeds up clients that send a lot, and costs "
     "that much memory per connection. With ws_direct_read on, only TLS "
     "sessions read this way.",
     NULL, 64, 65536, 0, SRV_CFG(ws_rx_buffer)},
    {"ws_direct_read", SRV_OPT_ENUM, SRV_ALL, 0, "on", NULL,
     "Read established plain-TCP WebSockets with one 64 KiB read per loop "
     "pass instead of lws's ws_rx_buffer-sized ones (libev only; TLS "
     "sessions always read through lws).",
     srv__off_on, 0, 0, 0, SRV_CFG(ws_direct_read)},
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
     "Redis of a cluster of nodes, redis://[user:pass@]host:port/db; unset "
     "runs one standalone node (docs/SCALING.md).",
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
    {"redis_password_file", SRV_OPT_STRING, SRV_ALL, SRV_OPTF_NULLABLE, NULL,
     "PATH",
     "File holding the Redis password (one trailing newline is dropped), "
     "used instead of one in --redis; read again on SIGHUP, used from the "
     "next reconnect.",
     NULL, 0, 0, 0, SRV_CFG(redis_password_file)},
    /* Cluster key (hub/cluster/cluster_key.h, docs/SCALING.md "The cluster
     * key"). */
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
    {"help", SRV_OPT_BOOL, SRV_SRC_FLAG, 0, "false", NULL,
     "Print this help and exit.",
     NULL, 0, 0, 'h', SRV_CFG(help)},
};

#define SRV_N_OPTIONS (sizeof(srv_options) / sizeof(srv_options[0]))

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

/* A multiplier for a number's suffix; "" is the bare-number unit. */
struct srv__unit {
    const char *suffix;
    uint64_t mult;
};

static const struct srv__unit srv__duration_units[] = {
    {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {NULL, 0},
};

/* Binary with "i" (KiB), decimal without (k, KB), as disks and SI do. */
static const struct srv__unit srv__size_units[] = {
    {"", 1}, {"b", 1},
    {"k", 1000}, {"kb", 1000}, {"kib", 1024},
    {"m", 1000000}, {"mb", 1000000}, {"mib", 1048576},
    {"g", 1000000000}, {"gb", 1000000000}, {"gib", 1073741824},
    {NULL, 0},
};

static const struct srv__unit srv__plain_units[] = {{"", 1}, {NULL, 0}};

/* State shared by the passes of one srv_config_load(). */
struct srv__load {
    struct srv_config *cfg;
    bool file_has_apps;
    const char *file;   /* borrowed; for error messages */
    char *err;
    size_t errlen;
    /* The secrets some source of this load set (bit i: srv__given[i]),
     * to refuse one given both as a value and as a file. */
    unsigned given;
};

/* The secrets that also have a file option, by their value's field. */
static const size_t srv__given[] = {
    offsetof(struct srv_config, admin_token),
    offsetof(struct srv_config, metrics_token),
    offsetof(struct srv_config, app0.secret),
};

static int srv__read_secret_files(struct srv__load *ld);

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
static bool srv__is_borrowed(const char *p)
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

static void srv__free_string(char **slot)
{
    if (*slot && !srv__is_borrowed(*slot))
        free(*slot);
    *slot = NULL;
}

static void *srv__field(void *base, const struct srv_option_desc *d)
{
    return (char *)base + d->offset_;
}

static uint64_t srv__get_uint(const void *base, const struct srv_option_desc *d)
{
    const char *p = (const char *)base + d->offset_;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;

    switch (d->size_) {
    case sizeof(u16):
        memcpy(&u16, p, sizeof(u16));
        return u16;
    case sizeof(u32):
        memcpy(&u32, p, sizeof(u32));
        return u32;
    default:
        memcpy(&u64, p, sizeof(u64));
        return u64;
    }
}

static void srv__put_uint(void *base, const struct srv_option_desc *d,
                          uint64_t v)
{
    char *p = srv__field(base, d);
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;

    switch (d->size_) {
    case sizeof(u16):
        memcpy(p, &u16, sizeof(u16));
        break;
    case sizeof(u32):
        memcpy(p, &u32, sizeof(u32));
        break;
    default:
        memcpy(p, &v, sizeof(v));
        break;
    }
}

/*
 * Parse "<digits>[.<digits>]<unit>" into *out (value times the unit's
 * multiplier). Returns 0; -EINVAL for anything else; -ERANGE when the
 * result does not fit 64 bits; -EDOM when a fraction does not come out
 * whole in the base unit ("1.5ms"). At most six fractional digits.
 */
static int srv__parse_scaled(const char *s, const struct srv__unit *units,
                             bool fold_case, uint64_t *out)
{
    uint64_t ip = 0, fnum = 0, fden = 1, mult = 0, whole, frac;
    bool overflow = false;
    int nd = 0;
    size_t i;

    if (*s < '0' || *s > '9')
        return -EINVAL;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');

        if (ip > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            ip = ip * 10 + d;
    }
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (++nd > 6)
                return -EINVAL;
            fnum = fnum * 10 + (uint64_t)(*s - '0');
            fden *= 10;
        }
    }
    for (i = 0; units[i].suffix; i++) {
        if (fold_case ? !strcasecmp(s, units[i].suffix)
                      : !strcmp(s, units[i].suffix)) {
            mult = units[i].mult;
            break;
        }
    }
    if (!mult)
        return -EINVAL;
    if (overflow || ip > UINT64_MAX / mult)
        return -ERANGE;
    whole = ip * mult;
    /* fnum < 10^6 and mult < 2^31, so the product cannot overflow. */
    if ((fnum * mult) % fden)
        return -EDOM;
    frac = fnum * mult / fden;
    if (whole > UINT64_MAX - frac)
        return -ERANGE;
    *out = whole + frac;
    return 0;
}

/* Shortest exact spelling of ms: "0", "25s", "2m", "1h" or "1500ms". */
static void srv__fmt_ms(uint64_t ms, char *buf, size_t len)
{
    if (ms == 0)
        snprintf(buf, len, "0");
    else if (ms % 3600000 == 0)
        snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
    else if (ms % 60000 == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
    else if (ms % 1000 == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(buf, len, "%llums", (unsigned long long)ms);
}

static void srv__fmt_size(uint64_t b, char *buf, size_t len)
{
    if (b && b % 1073741824 == 0)
        snprintf(buf, len, "%lluGiB", (unsigned long long)(b / 1073741824));
    else if (b && b % 1048576 == 0)
        snprintf(buf, len, "%lluMiB", (unsigned long long)(b / 1048576));
    else if (b && b % 1024 == 0)
        snprintf(buf, len, "%lluKiB", (unsigned long long)(b / 1024));
    else
        snprintf(buf, len, "%llu", (unsigned long long)b);
}

/* A value of d's type in its own syntax, for range messages. */
static void srv__fmt_value(const struct srv_option_desc *d, uint64_t v,
                           char *buf, size_t len)
{
    switch (d->type) {
    case SRV_OPT_DURATION:
        srv__fmt_ms(v, buf, len);
        break;
    case SRV_OPT_SECONDS:
        srv__fmt_ms(v * 1000, buf, len);
        break;
    case SRV_OPT_SIZE:
        srv__fmt_size(v, buf, len);
        break;
    default:
        snprintf(buf, len, "%llu", (unsigned long long)v);
        break;
    }
}

static int srv__range_err(const struct srv_option_desc *d, const char *label,
                          const char *shown, char *err, size_t errlen)
{
    char lo[32], hi[32];

    srv__fmt_value(d, d->min, lo, sizeof(lo));
    srv__fmt_value(d, d->max, hi, sizeof(hi));
    srv_config_err(err, errlen, "%s: %s is out of range %s..%s", label, shown, lo,
             hi);
    return -EINVAL;
}

/* Parse a numeric value of d's type into its stored unit. */
static int srv__parse_number(const struct srv_option_desc *d,
                             const char *text, const char *label,
                             uint64_t *out, char *err, size_t errlen)
{
    const struct srv__unit *units = srv__plain_units;
    const char *what = "a whole number";
    uint64_t v = 0;
    int rc;

    if (d->type == SRV_OPT_DURATION || d->type == SRV_OPT_SECONDS) {
        units = srv__duration_units;
        what = "a duration (e.g. 25s, 500ms, 2m)";
    } else if (d->type == SRV_OPT_SIZE) {
        units = srv__size_units;
        what = "a size (e.g. 64KiB, 1MiB, 10k)";
    }
    if (text[0] == '-') {
        srv_config_err(err, errlen, "%s: \"%s\" is negative", label, text);
        return -EINVAL;
    }
    rc = srv__parse_scaled(text, units, d->type == SRV_OPT_SIZE, &v);
    if (rc == -ERANGE)
        return srv__range_err(d, label, text, err, errlen);
    if (rc == -EDOM && d->type == SRV_OPT_DURATION) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a whole number of "
                 "milliseconds", label, text);
        return -EINVAL;
    }
    if (rc == -EDOM && d->type == SRV_OPT_SIZE) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a whole number of bytes",
                 label, text);
        return -EINVAL;
    }
    if (rc == 0 && d->type == SRV_OPT_SECONDS && v % 1000)
        rc = -EDOM;
    if (rc == -EDOM && d->type == SRV_OPT_SECONDS) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a whole number of seconds "
                 "(e.g. 600s, 10m; a bare number is milliseconds)", label,
                 text);
        return -EINVAL;
    }
    if (rc) {
        srv_config_err(err, errlen, "%s: \"%s\" is not %s", label, text, what);
        return -EINVAL;
    }
    if (d->type == SRV_OPT_SECONDS)
        v /= 1000;
    if (v < d->min || v > d->max)
        return srv__range_err(d, label, text, err, errlen);
    *out = v;
    return 0;
}

static int srv__parse_bool(const char *text, bool *out)
{
    if (!strcmp(text, "true") || !strcmp(text, "1"))
        *out = true;
    else if (!strcmp(text, "false") || !strcmp(text, "0"))
        *out = false;
    else
        return -EINVAL;
    return 0;
}

/*
 * Set d's field in base (a struct srv_config or a struct hub_app) from
 * text. label names the option and its source in errors: "--port",
 * "LUBDUB_PORT" or "lubdub.json: \"port\"". When borrow is true a string
 * value is stored as is (it must be table text); otherwise it is copied.
 */
static int srv__set_text(void *base, const struct srv_option_desc *d,
                         const char *text, const char *label, bool borrow,
                         char *err, size_t errlen)
{
    char **slot;
    uint64_t v = 0;
    bool b;
    size_t i;
    int rc;

    switch (d->type) {
    case SRV_OPT_STRING:
        slot = srv__field(base, d);
        if (!text || !*text) {
            if (!(d->flags & SRV_OPTF_NULLABLE)) {
                srv_config_err(err, errlen, "%s: must not be empty", label);
                return -EINVAL;
            }
            srv__free_string(slot);
            return 0;
        }
        if (borrow) {
            srv__free_string(slot);
            /* Borrowed table text; fini recognises it and won't free it. */
            *slot = (char *)text;
            return 0;
        } else {
            char *copy = strdup(text);

            if (!copy) {
                srv_config_err(err, errlen, "%s: out of memory", label);
                return -ENOMEM;
            }
            srv__free_string(slot);
            *slot = copy;
        }
        return 0;
    case SRV_OPT_BOOL:
        if (srv__parse_bool(text, &b)) {
            srv_config_err(err, errlen, "%s: \"%s\" is not a boolean (true, false, "
                     "1 or 0)", label, text);
            return -EINVAL;
        }
        memcpy(srv__field(base, d), &b, sizeof(b));
        return 0;
    case SRV_OPT_CHOICE:
    case SRV_OPT_ENUM:
        for (i = 0; d->choices[i]; i++)
            if (!strcmp(text, d->choices[i]))
                break;
        if (!d->choices[i]) {
            char list[128] = "";

            for (i = 0; d->choices[i]; i++) {
                if (i)
                    strncat(list, "|", sizeof(list) - strlen(list) - 1);
                strncat(list, d->choices[i], sizeof(list) - strlen(list) - 1);
            }
            srv_config_err(err, errlen, "%s: \"%s\" is not one of %s", label, text,
                     list);
            return -EINVAL;
        }
        if (d->type == SRV_OPT_CHOICE) {
            slot = srv__field(base, d);
            srv__free_string(slot);
            /* Borrowed from the choices list, like a default. */
            *slot = (char *)d->choices[i];
        } else {
            int idx = (int)i;

            assert(d->size_ == sizeof(idx));
            memcpy(srv__field(base, d), &idx, sizeof(idx));
        }
        return 0;
    default:
        rc = srv__parse_number(d, text, label, &v, err, errlen);
        if (rc)
            return rc;
        srv__put_uint(base, d, v);
        return 0;
    }
}

/* After a source set d: note whether it is a secret now given as a
 * value (an empty value unsets it, and the note with it). */
static void srv__note_given(struct srv__load *ld,
                            const struct srv_option_desc *d)
{
    for (size_t i = 0; i < sizeof(srv__given) / sizeof(srv__given[0]); i++) {
        if (d->offset_ != srv__given[i])
            continue;
        if (*(char **)srv__field(ld->cfg, d))
            ld->given |= 1u << i;
        else
            ld->given &= ~(1u << i);
    }
}

/* Set an option from a source other than the defaults, with its checks. */
static int srv__apply(struct srv__load *ld, const struct srv_option_desc *d,
                      const char *text, const char *label)
{
    int rc;

    if ((d->flags & SRV_OPTF_DEFAULT_APP) && ld->file_has_apps) {
        srv_config_err(ld->err, ld->errlen, "%s: cannot change the default app "
                 "when %s lists \"apps\"; set it there", label, ld->file);
        return -EINVAL;
    }
    rc = srv__set_text(ld->cfg, d, text, label, false, ld->err, ld->errlen);
    if (!rc)
        srv__note_given(ld, d);
    return rc;
}

void srv_config_defaults(struct srv_config *cfg)
{
    size_t i;
    int rc;

    memset(cfg, 0, sizeof(*cfg));
    hub_app_defaults(&cfg->app0);
    cfg->app0.index = 0;
    cfg->apps = &cfg->app0;
    cfg->n_apps = 1;
    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const struct srv_option_desc *d = &srv_options[i];

        if (!d->def)
            continue;
        rc = srv__set_text(cfg, d, d->def, d->name, true, NULL, 0);
        /* The table's own defaults must parse; a failure is our bug. */
        assert(rc == 0);
        (void)rc;
    }
}

/* The default app's id, key and secret may be borrowed table text; the
 * rest of an app's owned fields go through hub/app/app.c's one free path. */
static void srv__app_fini(struct hub_app *app)
{
    srv__free_string(&app->id);
    srv__free_string(&app->key);
    srv__free_string(&app->secret);
    hub_app_webhooks_free(app);
    hub_app_clear(app);
}

/* Drop the file's apps: the view goes back to the default app. */
static void srv__file_apps_fini(struct srv_config *cfg)
{
    for (unsigned i = 0; i < cfg->n_file_apps; i++)
        srv__app_fini(&cfg->file_apps[i]);
    free(cfg->file_apps);
    cfg->file_apps = NULL;
    cfg->n_file_apps = 0;
    cfg->apps = &cfg->app0;
    cfg->n_apps = 1;
}

/* Is d's field one of the default app's own (freed with the apps)? */
static bool srv__in_app0(const struct srv_option_desc *d)
{
    return d->offset_ >= offsetof(struct srv_config, app0) &&
           d->offset_ < offsetof(struct srv_config, app0) +
                            sizeof(struct hub_app);
}

/* Wipe a secret read from a file, then free it. */
static void srv__free_secret(char **slot)
{
    if (*slot) {
        explicit_bzero(*slot, strlen(*slot));
        free(*slot);
    }
    *slot = NULL;
}

void srv_config_fini(struct srv_config *cfg)
{
    size_t i;

    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const struct srv_option_desc *d = &srv_options[i];

        /* The default app's strings are freed with the apps below. */
        if ((d->type == SRV_OPT_STRING || d->type == SRV_OPT_CHOICE) &&
            !srv__in_app0(d))
            srv__free_string(srv__field(cfg, d));
    }
    srv__free_secret(&cfg->redis_password);
    srv__file_apps_fini(cfg);
    srv__app_fini(&cfg->app0);
    memset(cfg, 0, sizeof(*cfg));
}

/* The row whose flag is name[0..len) ("ping-interval"), or NULL. */
static const struct srv_option_desc *srv__find_flag(const char *name,
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

static const struct srv_option_desc *srv__find_short(char c)
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

/*
 * Walk argv. With early set, only syntax is checked and only --config and
 * --help are applied, so the file can be read before the flags that must
 * override it; otherwise every flag is applied in order.
 */
static int srv__apply_argv(struct srv__load *ld, int argc, char **argv,
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
            if (!early || d->offset_ == offsetof(struct srv_config, help)) {
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
        if (early && d->offset_ != offsetof(struct srv_config, help) &&
            d->offset_ != offsetof(struct srv_config, config_file))
            continue;
        rc = srv__apply(ld, d, value, label);
        if (rc)
            return rc;
    }
    return 0;
}

/* The value of name in envp, or NULL. */
static const char *srv__getenv(char **envp, const char *name)
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
static int srv__apply_env(struct srv__load *ld, char **envp)
{
    size_t i;

    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const struct srv_option_desc *d = &srv_options[i];
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

/*
 * Set a field from a JSON value: strings and numbers go through the same
 * text parser as flags ("25s" or 25000 both work for a duration), booleans
 * must be JSON booleans and strings JSON strings (null unsets a nullable).
 */
static int srv__apply_json(struct srv__load *ld, void *base,
                           const struct srv_option_desc *d, json_t *val,
                           const char *label)
{
    char *dumped;
    int rc;

    if (d->type == SRV_OPT_BOOL) {
        if (!json_is_boolean(val)) {
            srv_config_err(ld->err, ld->errlen, "%s: must be true or false",
                     label);
            return -EINVAL;
        }
        return srv__set_text(base, d, json_is_true(val) ? "true" : "false",
                             label, false, ld->err, ld->errlen);
    }
    if (json_is_null(val) && (d->flags & SRV_OPTF_NULLABLE))
        return srv__set_text(base, d, NULL, label, false, ld->err,
                             ld->errlen);
    if (json_is_string(val))
        return srv__set_text(base, d, json_string_value(val), label, false,
                             ld->err, ld->errlen);
    if (d->type == SRV_OPT_STRING || d->type == SRV_OPT_CHOICE ||
        d->type == SRV_OPT_ENUM) {
        srv_config_err(ld->err, ld->errlen, "%s: must be a string", label);
        return -EINVAL;
    }
    dumped = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!dumped) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    rc = srv__set_text(base, d, dumped, label, false, ld->err, ld->errlen);
    free(dumped);
    return rc;
}

/*
 * An app's "allowed_origins" as a JSON array of strings: joined with
 * commas into the same list the string form gives (issue 13, item 6).
 */
static int srv__apply_origin_list(struct srv__load *ld, struct hub_app *app,
                                  const struct srv_option_desc *d,
                                  json_t *val, const char *label)
{
    size_t i, total = 1;
    json_t *v;
    char *list;
    int rc;

    json_array_foreach(val, i, v) {
        if (!json_is_string(v) || !json_string_length(v) ||
            strchr(json_string_value(v), ',')) {
            srv_config_err(ld->err, ld->errlen, "%s[%zu]: must be a non-empty "
                     "string without commas", label, i);
            return -EINVAL;
        }
        total += json_string_length(v) + 1;
    }
    if (!json_array_size(val)) {
        srv_config_err(ld->err, ld->errlen, "%s: must not be empty (leave it out "
                 "for the hub-wide --allowed-origins)", label);
        return -EINVAL;
    }
    list = malloc(total);
    if (!list) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    list[0] = '\0';
    json_array_foreach(val, i, v) {
        if (i)
            strcat(list, ",");
        strcat(list, json_string_value(v));
    }
    rc = srv__set_text(app, d, list, label, false, ld->err, ld->errlen);
    free(list);
    return rc;
}

/*
 * An app's "secret_file" (val) in the apps object obj: the file is read
 * now (server/config/secret.h) into the app's secret. Errors name the app by
 * its place and, when the object has one, its id.
 */
static int srv__app_secret_file(struct srv__load *ld, struct hub_app *app,
                                json_t *obj, json_t *val, const char *label)
{
    const char *id = json_string_value(json_object_get(obj, "id"));
    char why[SRV_CFG_WHY_MAX], named[160] = "";
    char *v;
    int rc;

    if (id)
        snprintf(named, sizeof(named), " (app \"%s\")", id);
    if (!json_is_string(val) || !json_string_length(val)) {
        srv_config_err(ld->err, ld->errlen, "%s%s: must be a non-empty "
                       "string (a file's path)", label, named);
        return -EINVAL;
    }
    rc = srv_secret_read_file(json_string_value(val), &v, why, sizeof(why));
    if (rc) {
        srv_config_err(ld->err, ld->errlen, "%s%s: %s", label, named, why);
        return rc == -ENOMEM ? -ENOMEM : -EINVAL;
    }
    srv__free_string(&app->secret);
    app->secret = v;
    return 0;
}

static int srv__load_apps(struct srv__load *ld, json_t *apps)
{
    struct srv_config *cfg = ld->cfg;
    size_t i, n;
    char label[512];
    int rc;

    if (!json_is_array(apps) || !json_array_size(apps)) {
        srv_config_err(ld->err, ld->errlen, "%s: \"apps\" must be a non-empty "
                 "array of objects", ld->file);
        return -EINVAL;
    }
    n = json_array_size(apps);
    if (n > UINT32_MAX / 2) {
        srv_config_err(ld->err, ld->errlen, "%s: \"apps\" lists %zu apps", ld->file,
                 n);
        return -EINVAL;
    }
    srv__file_apps_fini(cfg);
    cfg->file_apps = calloc(n, sizeof(*cfg->file_apps));
    if (!cfg->file_apps) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", ld->file);
        return -ENOMEM;
    }
    cfg->apps = cfg->file_apps;
    cfg->n_apps = 0;
    ld->file_has_apps = true;

    for (i = 0; i < n; i++) {
        struct hub_app *app = &cfg->file_apps[i];
        json_t *obj = json_array_get(apps, i), *val, *secret_file;
        const char *key;
        static const char *const required[] = {"id", "key", "secret"};
        size_t r;

        hub_app_defaults(app);
        app->index = (unsigned)i;
        cfg->n_apps = cfg->n_file_apps = (unsigned)i + 1;
        if (!json_is_object(obj)) {
            srv_config_err(ld->err, ld->errlen, "%s: apps[%zu] must be an object",
                     ld->file, i);
            return -EINVAL;
        }
        secret_file = json_object_get(obj, "secret_file");
        if (secret_file && json_object_get(obj, "secret")) {
            srv_config_err(ld->err, ld->errlen, "%s: apps[%zu]: \"secret\" "
                           "and \"secret_file\" are both given; give one",
                           ld->file, i);
            return -EINVAL;
        }
        for (r = 0; r < 3; r++) {
            if (!json_object_get(obj, required[r]) &&
                !(r == 2 && secret_file)) {
                srv_config_err(ld->err, ld->errlen, "%s: apps[%zu]: \"%s\" is "
                         "missing", ld->file, i, required[r]);
                return -EINVAL;
            }
        }
        json_object_foreach(obj, key, val) {
            const struct srv_option_desc *d =
                srv__find_key(srv_app_fields, SRV_N_APP_FIELDS, key);

            snprintf(label, sizeof(label), "%s: apps[%zu].%s", ld->file, i,
                     key);
            if (!strcmp(key, "secret_file")) {
                rc = srv__app_secret_file(ld, app, obj, val, label);
                if (rc)
                    return rc;
                continue;
            }
            if (!strcmp(key, "webhooks")) {
                /* server/config/config_webhooks.c: the app owns the list. */
                rc = srv_config_webhooks(app, val, label, ld->err,
                                         ld->errlen);
                if (rc)
                    return rc;
                continue;
            }
            if (!d) {
                srv_config_err(ld->err, ld->errlen, "%s: unknown key", label);
                return -EINVAL;
            }
            if (json_is_array(val) &&
                d->offset_ == offsetof(struct hub_app, allowed_origins))
                rc = srv__apply_origin_list(ld, app, d, val, label);
            else
                rc = srv__apply_json(ld, app, d, val, label);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Apply a parsed file (root, owned: released here) named path. */
static int srv__load_root(struct srv__load *ld, json_t *root,
                          const json_error_t *jerr, const char *path)
{
    json_t *val;
    const char *key;
    char label[512];
    int rc = 0;

    ld->file = path;
    /* jansson 2.14 reports some allocation failures with their code, and
     * the one before parsing starts (its read buffer) with no text at all:
     * every parse or I/O error has a text. */
    if (!root && (json_error_code(jerr) == json_error_out_of_memory ||
                  !jerr->text[0])) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    if (!root) {
        if (jerr->line > 0)
            srv_config_err(ld->err, ld->errlen, "%s:%d:%d: %s", path, jerr->line,
                     jerr->column, jerr->text);
        else
            srv_config_err(ld->err, ld->errlen, "%s: %s", path, jerr->text);
        return -EINVAL;
    }
    if (!json_is_object(root)) {
        srv_config_err(ld->err, ld->errlen, "%s: the top level must be a JSON "
                 "object", path);
        json_decref(root);
        return -EINVAL;
    }
    json_object_foreach(root, key, val) {
        const struct srv_option_desc *d;

        if (!strcmp(key, "apps")) {
            rc = srv__load_apps(ld, val);
            if (rc)
                break;
            continue;
        }
        snprintf(label, sizeof(label), "%s: \"%s\"", path, key);
        d = srv__find_key(srv_options, SRV_N_OPTIONS, key);
        if (!d) {
            srv_config_err(ld->err, ld->errlen, "%s: unknown key", label);
            rc = -EINVAL;
            break;
        }
        rc = srv__apply_json(ld, ld->cfg, d, val, label);
        if (rc)
            break;
        srv__note_given(ld, d);
    }
    json_decref(root);
    return rc;
}

static int srv__load_file(struct srv__load *ld, const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);

    return srv__load_root(ld, root, &jerr, path);
}

int srv_config_load_buffer(struct srv_config *cfg, const char *text,
                           size_t len, const char *name, char *err,
                           size_t errlen)
{
    struct srv__load ld = {cfg, false, NULL, err, errlen, 0};
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc;

    srv_config_err(err, errlen, "%s", "");
    rc = srv__load_root(&ld, root, &jerr, name);
    return rc ? rc : srv__read_secret_files(&ld);
}

/* The file, the environment and the flags, in that order. */
static int srv__load_sources(struct srv__load *ld, int argc, char **argv,
                             char **envp)
{
    struct srv_config *cfg = ld->cfg;
    const char *env_file;
    char *path;
    int rc;

    rc = srv__apply_argv(ld, argc, argv, true);
    if (rc || cfg->help)
        return rc;
    if (!cfg->config_file) {
        env_file = srv__getenv(envp, SRV_ENV_PREFIX "CONFIG");
        if (env_file && *env_file) {
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
        rc = srv__load_file(ld, path);
        if (rc) {
            free(path);
            return rc;
        }
        rc = srv__apply_env(ld, envp);
        if (!rc)
            rc = srv__apply_argv(ld, argc, argv, false);
        free(path);
        return rc;
    }
    rc = srv__apply_env(ld, envp);
    if (rc)
        return rc;
    return srv__apply_argv(ld, argc, argv, false);
}

int srv_config_load(struct srv_config *cfg, int argc, char **argv,
                    char **envp, char *err, size_t errlen)
{
    struct srv__load ld = {cfg, false, NULL, err, errlen, 0};
    int rc;

    srv_config_err(err, errlen, "%s", "");
    rc = srv__load_sources(&ld, argc, argv, envp);
    if (rc || cfg->help)
        return rc;
    /* Last: only now is it known which files every source asked for. */
    return srv__read_secret_files(&ld);
}

bool srv_config_has_secret_files(const struct srv_config *cfg)
{
    return cfg->app_secret_file || cfg->admin_token_file ||
           cfg->metrics_token_file || cfg->redis_password_file;
}

/* 127.0.0.0/8, ::1, ::ffff:127.x.x.x or "localhost". */
static bool srv__is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (!strcasecmp(host, "localhost"))
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        static const unsigned char v4mapped[12] = {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
        };

        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return true;
        return !memcmp(a6.s6_addr, v4mapped, 12) && a6.s6_addr[12] == 127;
    }
    return false;
}

static const char *srv__flag(const char *name, char *buf, size_t len)
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

static int srv__check_readable(const char *name, const char *path, char *err,
                               size_t errlen)
{
    char flag[64];

    if (access(path, R_OK)) {
        srv_config_err(err, errlen, "%s: cannot read \"%s\": %s",
                 srv__flag(name, flag, sizeof(flag)), path, strerror(errno));
        return -EINVAL;
    }
    return 0;
}

/*
 * Read the secret in path (server/config/secret.h) into *slot, replacing what
 * it held; errors name the option. wipe: *slot is a secret of ours
 * (redis_password), wiped when replaced.
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
    return rc;
}

/* 0 when dir is a writable directory, or does not exist and its parent
 * is one (the hub makes it at start); else -1 with errno set. */
static int srv__state_dir_usable(const char *dir)
{
    char parent[4096];
    const char *slash;
    size_t n;

    if (access(dir, F_OK) == 0)
        return access(dir, R_OK | W_OK | X_OK);
    if (errno != ENOENT)
        return -1;
    slash = strrchr(dir, '/');
    if (!slash)
        return access(".", W_OK | X_OK);
    n = slash == dir ? 1 : (size_t)(slash - dir);
    if (n >= sizeof(parent)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(parent, dir, n);
    parent[n] = '\0';
    if (access(parent, W_OK | X_OK))
        return -1;
    errno = ENOENT;
    return 0;
}

/*
 * apps[i]'s id against hub_app_id_check() (hub/app/app.h). The default app
 * is named by its option, a file's app by its place in "apps".
 */
static int srv__check_app_id(const struct srv_config *cfg, unsigned i,
                             char *err, size_t errlen)
{
    const char *id = cfg->apps[i].id;
    char who[64], shown[16];
    size_t bad;
    int rc = hub_app_id_check(id, &bad);

    if (!rc)
        return 0;
    if (cfg->apps == &cfg->app0)
        srv__flag("app_id", who, sizeof(who));
    else
        snprintf(who, sizeof(who), "apps[%u]", i);
    if (rc == -EINVAL) {
        srv_config_err(err, errlen, "%s: app id \"%.80s%s\" is %zu "
                       "characters long; an app id is 1 to %d characters "
                       "of %s", who, id, bad > 80 ? "..." : "", bad,
                       HUB_APP_ID_MAX, HUB_APP_ID_CHARS);
        return -EINVAL;
    }
    /* The bad byte spelled so that a space or a byte past ASCII shows. */
    if (id[bad] > ' ' && id[bad] < 0x7f)
        snprintf(shown, sizeof(shown), "'%c'", id[bad]);
    else
        snprintf(shown, sizeof(shown), "byte 0x%02x",
                 (unsigned)(unsigned char)id[bad]);
    srv_config_err(err, errlen, "%s: app id \"%s\" has %s at offset %zu, "
                   "which app ids may not hold; an app id is 1 to %d "
                   "characters of %s%s", who, id, shown, bad,
                   HUB_APP_ID_MAX, HUB_APP_ID_CHARS,
                   id[bad] == ':' ? " (a ':' would let two apps' Redis "
                                    "channel names collide)" : "");
    return -EINVAL;
}

static int srv__validate_apps(const struct srv_config *cfg, char *err,
                              size_t errlen)
{
    unsigned i, j;
    int rc;

    if (cfg->n_apps < 1) {
        srv_config_err(err, errlen, "apps: %u apps configured; need at least 1",
                 cfg->n_apps);
        return -EINVAL;
    }
    for (i = 0; i < cfg->n_apps; i++) {
        const struct hub_app *a = &cfg->apps[i];

        if (!a->id || !*a->id || !a->key || !*a->key || !a->secret ||
            !*a->secret) {
            srv_config_err(err, errlen, "apps[%u]: id, key and secret must not be "
                     "empty", i);
            return -EINVAL;
        }
        rc = srv__check_app_id(cfg, i, err, errlen);
        if (rc)
            return rc;
        for (j = 0; j < i; j++) {
            const struct hub_app *b = &cfg->apps[j];

            if (!strcmp(a->id, b->id)) {
                srv_config_err(err, errlen, "apps[%u]: id \"%s\" is already used "
                         "by apps[%u]", i, a->id, j);
                return -EINVAL;
            }
            if (!strcmp(a->key, b->key)) {
                srv_config_err(err, errlen, "apps[%u] (id \"%s\"): key \"%s\" is "
                         "already used by apps[%u] (id \"%s\")", i, a->id,
                         a->key, j, b->id);
                return -EINVAL;
            }
        }
    }
    if (cfg->allow_default_secret || !cfg->bind ||
        srv__is_loopback(cfg->bind))
        return 0;
    for (i = 0; i < cfg->n_apps; i++) {
        if (strcmp(cfg->apps[i].secret, SRV_DEFAULT_SECRET))
            continue;
        srv_config_err(err, errlen, "app \"%s\" uses the default secret \"%s\" on "
                 "the public bind %s; set a real secret with "
                 "--app-secret-file or LUBDUB_APP_SECRET (or \"secret_file\" "
                 "or \"secret\" in the config file's \"apps\"), or pass "
                 "--allow-default-secret for a throwaway setup",
                 cfg->apps[i].id, SRV_DEFAULT_SECRET, cfg->bind);
        return -EINVAL;
    }
    return 0;
}

/* 1..64 characters of A-Z a-z 0-9 and extra. */
static bool srv__name_ok(const char *s, const char *extra)
{
    size_t n = s ? strlen(s) : 0;

    if (!n || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr(extra, c)))
            return false;
    }
    return true;
}

/* --redis, --node-id, --redis-prefix (server/config/redis_url.h). */
static int srv__validate_cluster(const struct srv_config *cfg, char *err,
                                 size_t errlen)
{
    struct srv_redis_url u;
    char a[64], why[200];

    if (cfg->redis &&
        srv_redis_url_parse(cfg->redis, &u, why, sizeof(why))) {
        srv_config_err(err, errlen, "%s: %s", srv__flag("redis", a, sizeof(a)),
                 why);
        return -EINVAL;
    }
    if (cfg->redis_password_file && !cfg->redis) {
        srv_config_err(err, errlen, "%s: needs %s",
                       srv__flag("redis_password_file", a, sizeof(a)),
                       srv__flag("redis", why, sizeof(why)));
        return -EINVAL;
    }
    if (cfg->node_id && !srv__name_ok(cfg->node_id, "._-")) {
        srv_config_err(err, errlen,
                 "%s: 1 to 64 characters of A-Z a-z 0-9 . _ -",
                 srv__flag("node_id", a, sizeof(a)));
        return -EINVAL;
    }
    if (!srv__name_ok(cfg->redis_prefix, "._-:")) {
        srv_config_err(err, errlen,
                 "%s: 1 to 64 characters of A-Z a-z 0-9 . _ - :",
                 srv__flag("redis_prefix", a, sizeof(a)));
        return -EINVAL;
    }
    if (cfg->cluster_key_file) {
        /* Read now too, so that --check-config and the start refuse a
         * bad file with one line (server/redis/cluster.c reads it again). */
        char *k1, *k2, kwhy[256];
        size_t l1, l2;

        if (hub_cluster_key_read_file(cfg->cluster_key_file, &k1, &l1, &k2,
                                      &l2, kwhy, sizeof(kwhy))) {
            srv_config_err(err, errlen, "%s: %s",
                     srv__flag("cluster_key_file", a, sizeof(a)), kwhy);
            return -EINVAL;
        }
        OPENSSL_cleanse(k1, l1);
        if (k2)
            OPENSSL_cleanse(k2, l2);
        free(k1);
        free(k2);
    }
    return 0;
}

/* Tokens go in an HTTP header: printable ASCII, no spaces, long enough
 * not to be guessed. */
static int srv__check_token(const char *name, const char *tok, char *err,
                            size_t errlen)
{
    char a[64];
    size_t n = tok ? strlen(tok) : 0;

    if (!tok)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] <= ' ' || tok[i] > '~') {
            srv_config_err(err, errlen, "%s: only printable characters, no spaces",
                     srv__flag(name, a, sizeof(a)));
            return -EINVAL;
        }
    }
    if (n < 16 || n > SRV_SECRET_TOKEN_MAX) {
        srv_config_err(err, errlen, "%s: %zu characters, need 16 to %d",
                 srv__flag(name, a, sizeof(a)), n, SRV_SECRET_TOKEN_MAX);
        return -EINVAL;
    }
    return 0;
}

/* --trusted-proxies: a list server/base/peeraddr.c can parse. */
static int srv__check_proxies(const struct srv_config *cfg, char *err,
                              size_t errlen)
{
    struct srv_peeraddr_cidrs set;
    char a[64], why[160];

    if (!cfg->trusted_proxies ||
        !srv_peeraddr_cidrs_parse(&set, cfg->trusted_proxies, why,
                                  sizeof(why)))
        return 0;
    srv_config_err(err, errlen, "%s: %s",
                   srv__flag("trusted_proxies", a, sizeof(a)), why);
    return -EINVAL;
}

/* --metrics-port, --metrics-bind, --metrics-token, --admin-token. */
static int srv__check_operator(const struct srv_config *cfg, char *err,
                               size_t errlen)
{
    char a[64], b[64];
    int rc;

    if (cfg->metrics_bind && !cfg->metrics_port) {
        srv_config_err(err, errlen, "%s: needs %s",
                 srv__flag("metrics_bind", a, sizeof(a)),
                 srv__flag("metrics_port", b, sizeof(b)));
        return -EINVAL;
    }
    if (cfg->metrics_port && cfg->metrics_port == cfg->port) {
        srv_config_err(err, errlen, "%s: %u is --port too",
                 srv__flag("metrics_port", a, sizeof(a)),
                 (unsigned)cfg->metrics_port);
        return -EINVAL;
    }
    /* A token read from a file is named by the file's option. */
    rc = srv__check_token(cfg->metrics_token_file ? "metrics_token_file"
                                                  : "metrics_token",
                          cfg->metrics_token, err, errlen);
    if (!rc)
        rc = srv__check_token(cfg->admin_token_file ? "admin_token_file"
                                                    : "admin_token",
                              cfg->admin_token, err, errlen);
    return rc;
}

int srv_config_validate(const struct srv_config *cfg, char *err, size_t errlen)
{
    char a[64], b[64], va[32], vb[32];
    size_t i;
    int rc;

    srv_config_err(err, errlen, "%s", "");
    /* Every single-option range, for structs not filled by load. */
    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const struct srv_option_desc *d = &srv_options[i];
        uint64_t v;

        if (d->type == SRV_OPT_STRING && !(d->flags & SRV_OPTF_NULLABLE) &&
            !(d->flags & SRV_OPTF_DEFAULT_APP)) {
            const char *s = *(char *const *)((const char *)cfg + d->offset_);

            if (!s || !*s) {
                srv_config_err(err, errlen, "%s: must not be empty",
                         srv__flag(d->name, a, sizeof(a)));
                return -EINVAL;
            }
        }
        if (d->type != SRV_OPT_UINT && d->type != SRV_OPT_DURATION &&
            d->type != SRV_OPT_SECONDS && d->type != SRV_OPT_SIZE)
            continue;
        v = srv__get_uint(cfg, d);
        if (v < d->min || v > d->max) {
            srv__fmt_value(d, v, va, sizeof(va));
            return srv__range_err(d, srv__flag(d->name, a, sizeof(a)), va,
                                  err, errlen);
        }
    }
    if (!cfg->tls_cert != !cfg->tls_key) {
        srv_config_err(err, errlen, "%s: required when %s is set",
                 srv__flag(cfg->tls_cert ? "tls_key" : "tls_cert", a,
                           sizeof(a)),
                 srv__flag(cfg->tls_cert ? "tls_cert" : "tls_key", b,
                           sizeof(b)));
        return -EINVAL;
    }
    if (cfg->fd_limit && cfg->fd_limit < 64) {
        /* Not the range's minimum: 0 is allowed (derive one). */
        srv_config_err(err, errlen, "%s: %u is too few file descriptors "
                       "for the hub itself (0 derives one, or at least 64)",
                       srv__flag("fd_limit", a, sizeof(a)), cfg->fd_limit);
        return -EINVAL;
    }
    if (cfg->tls_cert) {
        rc = srv__check_readable("tls_cert", cfg->tls_cert, err, errlen);
        if (!rc)
            rc = srv__check_readable("tls_key", cfg->tls_key, err, errlen);
        if (rc)
            return rc;
    }
    if (cfg->webhook_ca_file) {
        rc = srv__check_readable("webhook_ca_file", cfg->webhook_ca_file,
                                 err, errlen);
        if (rc)
            return rc;
    }
    if (cfg->state_dir && srv__state_dir_usable(cfg->state_dir)) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a writable directory "
                 "(nor can it be made): %s",
                 srv__flag("state_dir", a, sizeof(a)), cfg->state_dir,
                 strerror(errno));
        return -EINVAL;
    }
    if (cfg->dev_auth_endpoint && cfg->bind && !srv__is_loopback(cfg->bind)) {
        /* The same shape as the default secret's refusal below, without
         * an escape hatch: nobody needs this on a reachable address. */
        srv_config_err(err, errlen, "%s: POST /auth signs any private or "
                       "presence subscription for anyone who can reach the "
                       "port, so it is only for a loopback bind (127.x.x.x, "
                       "::1, localhost), not %s; in production the app "
                       "server signs subscriptions",
                       srv__flag("dev_auth_endpoint", a, sizeof(a)),
                       cfg->bind);
        return -EINVAL;
    }
    rc = srv__validate_cluster(cfg, err, errlen);
    if (rc)
        return rc;
    rc = srv__check_operator(cfg, err, errlen);
    if (rc)
        return rc;
    rc = srv__check_proxies(cfg, err, errlen);
    if (rc)
        return rc;
    if (cfg->tick_ms > cfg->ping_interval_ms) {
        srv__fmt_ms(cfg->tick_ms, va, sizeof(va));
        srv__fmt_ms(cfg->ping_interval_ms, vb, sizeof(vb));
        srv_config_err(err, errlen, "%s: %s must not exceed %s (%s)",
                 srv__flag("tick", a, sizeof(a)), va,
                 srv__flag("ping_interval", b, sizeof(b)), vb);
        return -EINVAL;
    }
    if (cfg->max_queue < cfg->max_message) {
        srv__fmt_size(cfg->max_queue, va, sizeof(va));
        srv__fmt_size(cfg->max_message, vb, sizeof(vb));
        srv_config_err(err, errlen, "%s: %s is smaller than %s (%s)",
                 srv__flag("max_queue", a, sizeof(a)), va,
                 srv__flag("max_message", b, sizeof(b)), vb);
        return -EINVAL;
    }
    if (cfg->max_queued_total && cfg->max_queued_total < cfg->max_queue) {
        srv__fmt_size(cfg->max_queued_total, va, sizeof(va));
        srv__fmt_size(cfg->max_queue, vb, sizeof(vb));
        srv_config_err(err, errlen, "%s: %s is smaller than %s (%s)",
                 srv__flag("max_queued_total", a, sizeof(a)), va,
                 srv__flag("max_queue", b, sizeof(b)), vb);
        return -EINVAL;
    }
    return srv__validate_apps(cfg, err, errlen);
}

/* Print text wrapped to 78 columns, each line indented by indent spaces. */
static void srv__print_wrapped(FILE *out, const char *text, int indent)
{
    int col = 0;

    while (*text) {
        size_t w = strcspn(text, " ");

        if (col && col + 1 + (int)w > 78) {
            fputc('\n', out);
            col = 0;
        }
        if (!col)
            col = fprintf(out, "%*s%.*s", indent, "", (int)w, text);
        else
            col += fprintf(out, " %.*s", (int)w, text);
        text += w;
        while (*text == ' ')
            text++;
    }
    if (col)
        fputc('\n', out);
}

static const char *srv__metavar(const struct srv_option_desc *d, char *buf,
                                size_t len)
{
    size_t i;

    if (d->metavar)
        return d->metavar;
    switch (d->type) {
    case SRV_OPT_DURATION:
    case SRV_OPT_SECONDS:
        return "DURATION";
    case SRV_OPT_SIZE:
        return "SIZE";
    case SRV_OPT_CHOICE:
    case SRV_OPT_ENUM:
        buf[0] = '\0';
        for (i = 0; d->choices[i]; i++) {
            if (i)
                strncat(buf, "|", len - strlen(buf) - 1);
            strncat(buf, d->choices[i], len - strlen(buf) - 1);
        }
        return buf;
    default:
        return "VALUE";
    }
}

void srv_config_print_help(FILE *out)
{
    size_t i;

    fputs("Usage: lubdub [OPTIONS]\n\n", out);
    srv__print_wrapped(out,
        "A Pusher Channels compatible WebSocket hub. Settings come from the "
        "built-in defaults, then the JSON file named by --config, then "
        "LUBDUB_* environment variables, then these flags; later sources "
        "win. Durations take 25s, 500ms, 2m, 1h or 1.5s (a bare number is "
        "milliseconds). Sizes take 64KiB or 1MiB (binary), 10k, 10KB or 1M "
        "(decimal) or bytes. Booleans take --flag, --no-flag or "
        "--flag=true|false|1|0. Apps beyond the single default one are "
        "listed in the file's \"apps\" array; see docs/CONFIG.md.", 0);
    fputc('\n', out);
    for (i = 0; i < SRV_N_OPTIONS; i++) {
        const struct srv_option_desc *d = &srv_options[i];
        char flag[64], env[64], line[256], mv[64];

        srv_config_option_name(d, SRV_SRC_FLAG, flag, sizeof(flag));
        if (d->short_flag)
            fprintf(out, "  -%c, %s", d->short_flag, flag);
        else if (d->type == SRV_OPT_BOOL)
            fprintf(out, "  %s, --no-%s", flag, flag + 2);
        else
            fprintf(out, "  %s %s", flag, srv__metavar(d, mv, sizeof(mv)));
        fputc('\n', out);
        srv__print_wrapped(out, d->help, 6);
        snprintf(line, sizeof(line), "env %s, json %s%s%s, default %s",
                     srv_config_option_name(d, SRV_SRC_ENV, env, sizeof(env))
                         ? "-" : env,
                     d->sources & SRV_SRC_FILE ? "\"" : "",
                     d->sources & SRV_SRC_FILE ? d->name : "-",
                     d->sources & SRV_SRC_FILE ? "\"" : "",
                     d->def ? d->def : "unset");
        srv__print_wrapped(out, line, 6);
    }
}
