/*
 * server/config/help.c - --help (server/config/help.h): a usage paragraph,
 * then the options by topic (apps first, then listen and TLS, limits,
 * liveness, cluster, webhooks, operations), per option its flag and
 * metavar, its help text and a line with its environment variable, JSON
 * key and default, each wrapped to 78 columns.
 *
 * The topics are a table of option names here, not a field of every row
 * of the option table, so that a row is added in one place and given its
 * topic in another; tests/unit/test_help.c fails when a row has none (it
 * would still be printed, under "Other options").
 *
 * Thread: main thread.
 */
#include "server/config/help.h"
#include "server/config/options.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The topics' headings, in the order --help prints them. */
static const char *const srv__topic_titles[SRV_HELP_TOPICS] = {
    "Apps: credentials, and what the apps' channels keep",
    "Listen and TLS: address, port, TLS, origins, proxies, the loops",
    "Limits: connections, messages, send queues, rates",
    "Liveness: pings, timeouts, the drain",
    "Cluster: Redis, nodes, the cluster key",
    "Webhooks: delivery, retries, dead letters",
    "Operations: the file, commands, logs, metrics, the console",
};

/* Each option's topic, in the order --help lists them within it. */
static const struct {
    const char *name;
    enum srv_help_topic topic;
} srv__topics[] = {
    {"app_id", SRV_HELP_APPS},
    {"app_key", SRV_HELP_APPS},
    {"app_secret", SRV_HELP_APPS},
    {"app_secret_file", SRV_HELP_APPS},
    {"allow_default_secret", SRV_HELP_APPS},
    {"dev_auth_endpoint", SRV_HELP_APPS},
    {"auth_timestamp_window", SRV_HELP_APPS},
    {"cache_ttl", SRV_HELP_APPS},
    {"cache_max_bytes", SRV_HELP_APPS},
    {"sub_count_interval", SRV_HELP_APPS},
    {"history_max_bytes", SRV_HELP_APPS},
    {"bind", SRV_HELP_LISTEN},
    {"port", SRV_HELP_LISTEN},
    {"tls_cert", SRV_HELP_LISTEN},
    {"tls_key", SRV_HELP_LISTEN},
    {"allowed_origins", SRV_HELP_LISTEN},
    {"trusted_proxies", SRV_HELP_LISTEN},
    {"compression", SRV_HELP_LISTEN},
    {"compression_min_size", SRV_HELP_LISTEN},
    {"loops", SRV_HELP_LISTEN},
    {"event_loop", SRV_HELP_LISTEN},
    {"ws_direct_read", SRV_HELP_LISTEN},
    {"ws_rx_buffer", SRV_HELP_LISTEN},
    {"max_connections", SRV_HELP_LIMITS},
    {"fd_limit", SRV_HELP_LIMITS},
    {"max_message", SRV_HELP_LIMITS},
    {"max_queue", SRV_HELP_LIMITS},
    {"write_timeout", SRV_HELP_LIMITS},
    {"max_queued_total", SRV_HELP_LIMITS},
    {"max_subscriptions", SRV_HELP_LIMITS},
    {"subscribe_rate", SRV_HELP_LIMITS},
    {"ping_interval", SRV_HELP_LIVENESS},
    {"pong_timeout", SRV_HELP_LIVENESS},
    {"idle_timeout", SRV_HELP_LIVENESS},
    {"close_timeout", SRV_HELP_LIVENESS},
    {"activity_timeout", SRV_HELP_LIVENESS},
    {"heartbeat_interval", SRV_HELP_LIVENESS},
    {"tick", SRV_HELP_LIVENESS},
    {"drain_timeout", SRV_HELP_LIVENESS},
    {"redis", SRV_HELP_CLUSTER},
    {"redis_password_file", SRV_HELP_CLUSTER},
    {"node_id", SRV_HELP_CLUSTER},
    {"redis_prefix", SRV_HELP_CLUSTER},
    {"node_lease", SRV_HELP_CLUSTER},
    {"ready_requires_redis", SRV_HELP_CLUSTER},
    {"redis_tls_ca_file", SRV_HELP_CLUSTER},
    {"redis_tls_cert_file", SRV_HELP_CLUSTER},
    {"redis_tls_key_file", SRV_HELP_CLUSTER},
    {"redis_tls_server_name", SRV_HELP_CLUSTER},
    {"redis_sentinel", SRV_HELP_CLUSTER},
    {"redis_master", SRV_HELP_CLUSTER},
    {"redis_sentinel_password_file", SRV_HELP_CLUSTER},
    {"cluster_key_file", SRV_HELP_CLUSTER},
    {"state_dir", SRV_HELP_WEBHOOKS},
    {"webhook_delay", SRV_HELP_WEBHOOKS},
    {"webhook_timeout", SRV_HELP_WEBHOOKS},
    {"webhook_retry_window", SRV_HELP_WEBHOOKS},
    {"webhook_backoff_max", SRV_HELP_WEBHOOKS},
    {"webhook_max_pending", SRV_HELP_WEBHOOKS},
    {"webhook_stream_max", SRV_HELP_WEBHOOKS},
    {"webhook_ca_file", SRV_HELP_WEBHOOKS},
    {"webhook_dead_letters", SRV_HELP_WEBHOOKS},
    {"webhook_replay", SRV_HELP_WEBHOOKS},
    {"config", SRV_HELP_OPERATIONS},
    {"check_config", SRV_HELP_OPERATIONS},
    {"print_config", SRV_HELP_OPERATIONS},
    {"version", SRV_HELP_OPERATIONS},
    {"new_app", SRV_HELP_OPERATIONS},
    {"help", SRV_HELP_OPERATIONS},
    {"log_level", SRV_HELP_OPERATIONS},
    {"log_format", SRV_HELP_OPERATIONS},
    /* Issue 36's structured logs (--log-priority); a name the table
     * lacks is skipped. */
    {"log_priority", SRV_HELP_OPERATIONS},
    {"metrics_port", SRV_HELP_OPERATIONS},
    {"metrics_bind", SRV_HELP_OPERATIONS},
    {"metrics_token", SRV_HELP_OPERATIONS},
    {"metrics_token_file", SRV_HELP_OPERATIONS},
    {"admin_token", SRV_HELP_OPERATIONS},
    {"admin_token_file", SRV_HELP_OPERATIONS},
    {"web_root", SRV_HELP_OPERATIONS},
};

#define SRV_N_TOPICS (sizeof(srv__topics) / sizeof(srv__topics[0]))

int srv_config_help_topic(const char *name)
{
    for (size_t i = 0; i < SRV_N_TOPICS; i++)
        if (!strcmp(srv__topics[i].name, name))
            return (int)srv__topics[i].topic;
    return -ENOENT;
}

const char *srv_config_help_topic_title(enum srv_help_topic t)
{
    return (unsigned)t < SRV_HELP_TOPICS ? srv__topic_titles[t] : NULL;
}

/* One word of w bytes; a tab in it is a space the wrap may not break at
 * (json "redis_sentinel_password_file" stays on one line). */
static int srv__put_word(FILE *out, const char *text, size_t w)
{
    for (size_t i = 0; i < w; i++)
        fputc(text[i] == '\t' ? ' ' : text[i], out);
    return (int)w;
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
            col = fprintf(out, "%*s", indent, "");
        else
            col += fprintf(out, " ");
        col += srv__put_word(out, text, w);
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

/* One option's entry: flag and metavar, help, env, JSON key, default. */
static void srv__print_option(FILE *out, const struct srv_option_desc *d)
{
    char flag[64], env[64], line[256], mv[64];

    srv_config_option_name(d, SRV_SRC_FLAG, flag, sizeof(flag));
    if (d->short_flag)
        fprintf(out, "  -%c, %s", d->short_flag, flag);
    else if (d->type == SRV_OPT_BOOL && d->sources == SRV_SRC_FLAG)
        fprintf(out, "  %s", flag);     /* a command: nothing to negate */
    else if (d->type == SRV_OPT_BOOL)
        fprintf(out, "  %s, --no-%s", flag, flag + 2);
    else
        fprintf(out, "  %s %s", flag, srv__metavar(d, mv, sizeof(mv)));
    fputc('\n', out);
    srv__print_wrapped(out, d->help, 6);
    snprintf(line, sizeof(line), "env %s, json\t%s%s%s, default\t%s",
             srv_config_option_name(d, SRV_SRC_ENV, env, sizeof(env))
                 ? "-" : env,
             d->sources & SRV_SRC_FILE ? "\"" : "",
             d->sources & SRV_SRC_FILE ? d->name : "-",
             d->sources & SRV_SRC_FILE ? "\"" : "",
             d->def ? d->def : "unset");
    srv__print_wrapped(out, line, 6);
}

/* The row called name, or NULL. */
static const struct srv_option_desc *srv__row(
    const struct srv_option_desc *opts, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(opts[i].name, name))
            return &opts[i];
    return NULL;
}

void srv_config_print_help(FILE *out)
{
    const struct srv_option_desc *opts;
    size_t n_opts = srv_config_options(&opts);
    bool other = false;

    fputs("Usage: lubdub [OPTIONS]\n\n", out);
    srv__print_wrapped(out,
        "A Pusher Channels compatible WebSocket hub. Settings come from the "
        "built-in defaults, then the JSON file named by --config, then "
        "LUBDUB_* environment variables, then these flags; later sources "
        "win. Durations take 25s, 500ms, 2m, 1h or 1.5s (a bare number is "
        "milliseconds). Sizes take 64KiB or 1MiB (binary), 10k, 10KB or 1M "
        "(decimal) or bytes. Booleans take --flag, --no-flag or "
        "--flag=true|false|1|0. Apps beyond the single default one are "
        "listed in the file's \"apps\" array; see docs/CONFIG.md. "
        "--print-config shows what a setup ends up with.", 0);
    for (unsigned t = 0; t < SRV_HELP_TOPICS; t++) {
        fprintf(out, "\n%s\n", srv__topic_titles[t]);
        for (size_t i = 0; i < SRV_N_TOPICS; i++) {
            const struct srv_option_desc *d =
                srv__row(opts, n_opts, srv__topics[i].name);

            if (d && srv__topics[i].topic == t)
                srv__print_option(out, d);
        }
    }
    /* A row without a topic is still shown (test_help fails on it). */
    for (size_t i = 0; i < n_opts; i++) {
        if (srv_config_help_topic(opts[i].name) >= 0)
            continue;
        if (!other)
            fputs("\nOther options\n", out);
        other = true;
        srv__print_option(out, &opts[i]);
    }
}
