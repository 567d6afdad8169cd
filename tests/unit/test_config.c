/*
 * tests/unit/test_config.c - the loader of server/config/config.h: defaults,
 * precedence (defaults < file < environment < flags), value syntax, error
 * messages that name the option and its source, apps, validation, and
 * docs/CONFIG.md kept in sync with the option table.
 *
 * JSON files are written to mkstemp() files and removed by each case. The
 * environment is passed as an explicit envp, never read from the process.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "fail_alloc.h"
#include "hub/app/app.h"
#include "server/config/config.h"

#define MAX_ARGS 32

/* A loaded config plus the error text of the last call. */
struct fixture {
    struct srv_config cfg;
    char err[512];
    char path[64];   /* temp JSON file, "" when none */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (!f)
        return -1;
    srv_config_defaults(&f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    srv_config_fini(&f->cfg);
    if (f->path[0])
        unlink(f->path);
    free(f);
    return 0;
}

/* Write json to a fresh temp file; its path is left in f->path. */
static const char *write_json(struct fixture *f, const char *json)
{
    int fd;
    size_t len = strlen(json);

    snprintf(f->path, sizeof(f->path), "/tmp/lubdub-config-XXXXXX");
    fd = mkstemp(f->path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, len), (ssize_t)len);
    close(fd);
    return f->path;
}

/*
 * Load with envp (NULL-terminated, may be NULL) and the flags that follow,
 * ended by NULL. argv[0] is supplied here.
 */
static int load(struct fixture *f, char **envp, ...)
{
    char *argv[MAX_ARGS] = {"lubdub"};
    int argc = 1;
    va_list ap;
    char *a;

    va_start(ap, envp);
    while ((a = va_arg(ap, char *)) != NULL) {
        assert_true(argc < MAX_ARGS - 1);
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;
    return srv_config_load(&f->cfg, argc, argv, envp, f->err,
                           sizeof(f->err));
}

/* Load then validate, as main does. */
static int load_and_validate(struct fixture *f, char **envp, char *flag1,
                             char *flag2)
{
    int rc = load(f, envp, flag1, flag2, NULL);

    return rc ? rc : srv_config_validate(&f->cfg, f->err, sizeof(f->err));
}

/* The error must fail with -EINVAL and contain every given fragment. */
static void expect_error(struct fixture *f, int rc, const char *a,
                         const char *b)
{
    assert_int_equal(rc, -EINVAL);
    if (a && !strstr(f->err, a))
        fail_msg("error \"%s\" lacks \"%s\"", f->err, a);
    if (b && !strstr(f->err, b))
        fail_msg("error \"%s\" lacks \"%s\"", f->err, b);
    assert_null(strchr(f->err, '\n'));
}

static void test_config_defaults(void **state)
{
    struct fixture *f = *state;
    struct srv_config *c = &f->cfg;

    assert_int_equal(load(f, NULL, NULL), 0);
    assert_string_equal(c->bind, "127.0.0.1");
    assert_int_equal(c->port, 6001);
    assert_int_equal(c->loops, 0);
    assert_null(c->tls_cert);
    assert_null(c->tls_key);
    assert_null(c->allowed_origins);
    assert_int_equal(c->max_connections, 0);
    assert_int_equal(c->tick_ms, 100);
    assert_int_equal(c->ping_interval_ms, 25000);
    assert_int_equal(c->pong_timeout_ms, 10000);
    assert_int_equal(c->idle_timeout_ms, 0);
    assert_int_equal(c->close_timeout_ms, 2000);
    assert_int_equal(c->heartbeat_interval_ms, 0);
    assert_int_equal(c->drain_timeout_ms, 10000);
    assert_int_equal(c->activity_timeout_s, 30);
    assert_int_equal(c->max_message, 64 * 1024);
    assert_int_equal(c->max_queue, 1024 * 1024);
    assert_int_equal(c->auth_timestamp_window_s, 600);
    assert_int_equal(c->compression, 1);
    assert_int_equal(c->compression_min_size, 128);
    assert_false(c->allow_default_secret);
    assert_false(c->dev_auth_endpoint);
    assert_string_equal(c->web_root, "web");
    assert_string_equal(c->log_level, "info");
    assert_int_equal(c->log_format, SRV_LOG_TEXT);
    assert_false(c->check_only);
    assert_false(c->help);
    assert_null(c->config_file);
    assert_int_equal(c->n_apps, 1);
    assert_string_equal(c->apps[0].id, "app-id");
    assert_string_equal(c->apps[0].key, "app-key");
    assert_string_equal(c->apps[0].secret, "app-secret");
    assert_true(c->apps[0].enabled);
    assert_true(c->apps[0].client_events);
    assert_true(c->apps[0].compression);
    assert_int_equal(c->apps[0].client_event_rate, 10);
    assert_int_equal(c->apps[0].max_presence_members, 100);
    assert_int_equal(c->apps[0].index, 0);
    assert_int_equal(srv_config_validate(c, f->err, sizeof(f->err)), 0);
}

static void test_config_precedence_file_env_flags(void **state)
{
    struct fixture *f = *state;
    char cfgvar[96];
    char *env[] = {cfgvar, "LUBDUB_PORT=7002", "LUBDUB_TICK=50ms", NULL};

    write_json(f, "{\"port\": 7001, \"tick\": \"20ms\", "
                  "\"ping_interval\": \"30s\", \"log_level\": \"warn\"}");
    snprintf(cfgvar, sizeof(cfgvar), "LUBDUB_CONFIG=%s", f->path);
    assert_int_equal(load(f, env, "--tick", "10ms", NULL), 0);
    /* File beats defaults; env beats file; flags beat env. */
    assert_int_equal(f->cfg.ping_interval_ms, 30000);
    assert_string_equal(f->cfg.log_level, "warn");
    assert_int_equal(f->cfg.port, 7002);
    assert_int_equal(f->cfg.tick_ms, 10);
    assert_string_equal(f->cfg.config_file, f->path);
}

static void test_config_config_flag_beats_env(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_CONFIG=/nonexistent/lubdub.json", NULL};
    char flag[96];

    write_json(f, "{\"port\": 7001}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, env, flag, NULL), 0);
    assert_int_equal(f->cfg.port, 7001);
    assert_string_equal(f->cfg.config_file, f->path);
}

static void test_config_flag_forms(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(load(f, NULL, "--port", "7000", "--bind=::1",
                          "--dev-auth-endpoint", "--log-format=json",
                          "--allow-default-secret=1",
                          "--no-allow-default-secret", NULL), 0);
    assert_int_equal(f->cfg.port, 7000);
    assert_string_equal(f->cfg.bind, "::1");
    assert_true(f->cfg.dev_auth_endpoint);
    assert_false(f->cfg.allow_default_secret);
    assert_int_equal(f->cfg.log_format, SRV_LOG_JSON);
    assert_int_equal(load(f, NULL, "--dev-auth-endpoint=false",
                          "--allow-default-secret=true", NULL), 0);
    assert_false(f->cfg.dev_auth_endpoint);
    assert_true(f->cfg.allow_default_secret);
    /* The last occurrence wins. */
    assert_int_equal(load(f, NULL, "--port=1", "--port=2", NULL), 0);
    assert_int_equal(f->cfg.port, 2);
}

static void test_config_parse_errors_name_option(void **state)
{
    struct fixture *f = *state;
    char *env_port[] = {"LUBDUB_PORT=70000", NULL};
    char *env_bool[] = {"LUBDUB_DEV_AUTH_ENDPOINT=yes", NULL};

    expect_error(f, load(f, NULL, "--ping-interval", "abc", NULL),
                 "--ping-interval: \"abc\" is not a duration", NULL);
    expect_error(f, load(f, env_port, NULL),
                 "LUBDUB_PORT: 70000 is out of range 0..65535", NULL);
    expect_error(f, load(f, env_bool, NULL),
                 "LUBDUB_DEV_AUTH_ENDPOINT: \"yes\" is not a boolean", NULL);
    expect_error(f, load(f, NULL, "--max-queue=lots", NULL),
                 "--max-queue: \"lots\" is not a size", NULL);
    expect_error(f, load(f, NULL, "--loops=65", NULL),
                 "--loops: 65 is out of range 0..64", NULL);
    expect_error(f, load(f, NULL, "--activity-timeout=0", NULL),
                 "--activity-timeout: 0 is out of range 1..120", NULL);
    expect_error(f, load(f, NULL, "--activity-timeout=121", NULL),
                 "--activity-timeout", "1..120");
    expect_error(f, load(f, NULL, "--max-message=1000", NULL),
                 "--max-message: 1000 is out of range 1KiB..", NULL);
    expect_error(f, load(f, NULL, "--log-level=loud", NULL),
                 "--log-level: \"loud\" is not one of error|warn|info|debug",
                 NULL);
    expect_error(f, load(f, NULL, "--log-format=xml", NULL),
                 "--log-format", "text|json");
    expect_error(f, load(f, NULL, "--bind=", NULL),
                 "--bind: must not be empty", NULL);
    expect_error(f, load(f, NULL, "--port=-1", NULL),
                 "--port: \"-1\" is negative", NULL);
    expect_error(f, load(f, NULL, "--dev-auth-endpoint=maybe", NULL),
                 "--dev-auth-endpoint", "not a boolean");
    expect_error(f, load(f, NULL, "--no-dev-auth-endpoint=1", NULL),
                 "--no-dev-auth-endpoint: takes no value", NULL);
}

static void test_config_file_errors_name_key(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"ping_interval\": \"abc\"}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), f->path,
                 ": \"ping_interval\": \"abc\" is not a duration");
    unlink(f->path);

    write_json(f, "{\"port\": 70000}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "\"port\": 70000 is out of range 0..65535", NULL);
    unlink(f->path);

    write_json(f, "{\"dev_auth_endpoint\": \"true\"}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "\"dev_auth_endpoint\": must be true or false", NULL);
    unlink(f->path);

    write_json(f, "{\"bind\": 17}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "\"bind\": must be a string", NULL);
}

static void test_config_unknown_file_key_rejected(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"pign_interval\": \"25s\"}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "\"pign_interval\": unknown key", f->path);
}

/* Found by fuzz_config: a key with a newline made a two-line error. */
static void test_config_error_is_one_line(void **state)
{
    static const char text[] = "{\"b\\nd\\u0001\": 1}";
    struct srv_config cfg;
    char err[256];

    (void)state;
    srv_config_defaults(&cfg);
    assert_int_equal(srv_config_load_buffer(&cfg, text, sizeof(text) - 1,
                                            "mem.json", err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "mem.json: \"b\\x0ad\\x01\": unknown key");
    srv_config_fini(&cfg);
    srv_config_defaults(&cfg);
    assert_int_equal(srv_config_load_buffer(&cfg, "{\"port\": 1}", 11,
                                            "mem.json", err, sizeof(err)),
                     0);
    assert_int_equal(cfg.port, 1);
    srv_config_fini(&cfg);
}

static void test_config_flag_only_keys_not_in_file(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"app_secret\": \"s\"}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "\"app_secret\": unknown key", NULL);
}

static void test_config_file_syntax_error(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"port\": 7001,\n \"tick\": }");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), f->path, ":2:");
    unlink(f->path);

    write_json(f, "[1, 2]");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "must be a JSON object",
                 NULL);
    unlink(f->path);

    write_json(f, "{\"port\": 1, \"port\": 2}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), f->path, "port");
}

static void test_config_missing_file_rejected(void **state)
{
    struct fixture *f = *state;

    expect_error(f, load(f, NULL, "--config", "/nonexistent/lubdub.json",
                         NULL),
                 "/nonexistent/lubdub.json", NULL);
}

static void test_config_durations(void **state)
{
    static const struct {
        const char *text;
        uint64_t ms;
    } ok[] = {
        {"25s", 25000}, {"500ms", 500}, {"2m", 120000}, {"1h", 3600000},
        {"1.5s", 1500}, {"0.25s", 250}, {"1500", 1500}, {"0", 0},
        {"0.5m", 30000}, {"24h", 86400000},
    };
    static const char *const bad[] = {
        "", "abc", "25 s", "25S", "1.5ms", "s", ".5s", "1.s", "25sec",
        "-1s", "1e3", "0x10", "1.0000001s", "25s ",
    };
    struct fixture *f = *state;
    char flag[64];
    size_t i;

    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        snprintf(flag, sizeof(flag), "--idle-timeout=%s", ok[i].text);
        if (load(f, NULL, flag, NULL))
            fail_msg("%s: %s", ok[i].text, f->err);
        assert_int_equal(f->cfg.idle_timeout_ms, ok[i].ms);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(flag, sizeof(flag), "--idle-timeout=%s", bad[i]);
        expect_error(f, load(f, NULL, flag, NULL), "--idle-timeout: ",
                     NULL);
    }
    /* Past 24h, and past 64 bits. */
    expect_error(f, load(f, NULL, "--idle-timeout=25h", NULL),
                 "--idle-timeout: 25h is out of range 0..24h", NULL);
    expect_error(f, load(f, NULL, "--idle-timeout=18446744073709551616",
                         NULL), "is out of range", NULL);
    expect_error(f, load(f, NULL, "--idle-timeout=99999999999999999h",
                         NULL), "is out of range", NULL);
    expect_error(f, load(f, NULL, "--tick=0", NULL),
                 "--tick: 0 is out of range 1ms..1m", NULL);
}

static void test_config_seconds_must_be_whole(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(load(f, NULL, "--auth-timestamp-window=10m", NULL), 0);
    assert_int_equal(f->cfg.auth_timestamp_window_s, 600);
    assert_int_equal(load(f, NULL, "--auth-timestamp-window=0", NULL), 0);
    assert_int_equal(f->cfg.auth_timestamp_window_s, 0);
    expect_error(f, load(f, NULL, "--auth-timestamp-window=600", NULL),
                 "--auth-timestamp-window: \"600\" is not a whole number of "
                 "seconds", NULL);
    expect_error(f, load(f, NULL, "--auth-timestamp-window=1.5s", NULL),
                 "whole number of seconds", NULL);
    expect_error(f, load(f, NULL, "--auth-timestamp-window=25h", NULL),
                 "out of range 0..24h", NULL);
}

static void test_config_sizes(void **state)
{
    static const struct {
        const char *text;
        uint32_t bytes;
    } ok[] = {
        {"64KiB", 65536}, {"1MiB", 1048576}, {"10k", 10000},
        {"10KB", 10000}, {"10kb", 10000}, {"2048", 2048}, {"1.5KiB", 1536},
        {"1M", 1000000}, {"1GiB", 1073741824}, {"4096b", 4096},
    };
    static const char *const bad[] = {
        "", "lots", "10 KiB", "1.5", "0.1k1", "KiB", "-5KiB", "10Ki",
        "1.0001k",
    };
    struct fixture *f = *state;
    char flag[64];
    size_t i;

    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        snprintf(flag, sizeof(flag), "--max-message=%s", ok[i].text);
        if (load(f, NULL, flag, NULL))
            fail_msg("%s: %s", ok[i].text, f->err);
        assert_int_equal(f->cfg.max_message, ok[i].bytes);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(flag, sizeof(flag), "--max-message=%s", bad[i]);
        expect_error(f, load(f, NULL, flag, NULL), "--max-message: ", NULL);
    }
    expect_error(f, load(f, NULL, "--max-message=2GiB", NULL),
                 "--max-message: 2GiB is out of range 1KiB..1GiB", NULL);
    expect_error(f, load(f, NULL, "--max-message=1023", NULL),
                 "out of range 1KiB..1GiB", NULL);
    assert_int_equal(load(f, NULL, "--max-message=1024", NULL), 0);
}

/* Load json as the --config file (replacing the fixture's last one). */
static int load_json(struct fixture *f, const char *json)
{
    char flag[96];

    if (f->path[0])
        unlink(f->path);
    write_json(f, json);
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    return load(f, NULL, flag, NULL);
}

/*
 * --compression and --compression-min-size (issue 34) in each source's
 * spelling, their precedence, and the values they refuse.
 */
static void test_config_compression_options(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_COMPRESSION=off",
                   "LUBDUB_COMPRESSION_MIN_SIZE=1KiB", NULL};
    char *env_bad[] = {"LUBDUB_COMPRESSION=true", NULL};

    assert_int_equal(load(f, env, NULL), 0);
    assert_int_equal(f->cfg.compression, 0);
    assert_int_equal(f->cfg.compression_min_size, 1024);
    /* Flags beat the environment; both flag forms work. */
    assert_int_equal(load(f, env, "--compression", "on",
                          "--compression-min-size=0", NULL), 0);
    assert_int_equal(f->cfg.compression, 1);
    assert_int_equal(f->cfg.compression_min_size, 0);
    assert_int_equal(load(f, NULL, "--compression=off",
                          "--compression-min-size", "16MiB", NULL), 0);
    assert_int_equal(f->cfg.compression, 0);
    assert_int_equal(f->cfg.compression_min_size, 16u << 20);

    expect_error(f, load(f, NULL, "--compression=yes", NULL),
                 "--compression: \"yes\" is not one of off|on", NULL);
    expect_error(f, load(f, env_bad, NULL),
                 "LUBDUB_COMPRESSION: \"true\" is not one of off|on", NULL);
    expect_error(f, load(f, NULL, "--compression-min-size=17MiB", NULL),
                 "--compression-min-size: 17MiB is out of range 0..16MiB",
                 NULL);
    expect_error(f, load(f, NULL, "--compression-min-size=-1", NULL),
                 "--compression-min-size: \"-1\" is negative", NULL);
    expect_error(f, load(f, NULL, "--compression-min-size=lots", NULL),
                 "--compression-min-size: \"lots\" is not a size", NULL);

    assert_int_equal(load_json(f, "{\"compression\": \"on\", "
                                  "\"compression_min_size\": 4096}"), 0);
    assert_int_equal(f->cfg.compression, 1);
    assert_int_equal(f->cfg.compression_min_size, 4096);
    assert_int_equal(load_json(f, "{\"compression\": \"off\"}"), 0);
    assert_int_equal(f->cfg.compression, 0);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
    /* The hub-wide switch is on|off, as --ws-direct-read is; a JSON
     * boolean is refused rather than guessed at. */
    expect_error(f, load_json(f, "{\"compression\": false}"),
                 "\"compression\"", "must be a string");
    expect_error(f, load_json(f, "{\"compression_min_size\": \"32MiB\"}"),
                 "\"compression_min_size\"", "out of range 0..16MiB");
}

/*
 * An app's "compression" key: true unless the app says false, and a
 * JSON boolean only (hub_app_equal's part is in tests/unit/test_app.c).
 */
static void test_config_app_compression_key(void **state)
{
    static const char *const bad[] = {"\"on\"", "1", "null"};
    struct fixture *f = *state;
    const struct hub_app *a;
    char json[256];

    assert_int_equal(load_json(f, "{\"apps\": ["
                  "{\"id\": \"1\", \"key\": \"k1\", \"secret\": \"s1\"},"
                  "{\"id\": \"2\", \"key\": \"k2\", \"secret\": \"s2\","
                  " \"compression\": false},"
                  "{\"id\": \"3\", \"key\": \"k3\", \"secret\": \"s3\","
                  " \"compression\": true}]}"), 0);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
    a = hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k1", 2);
    assert_non_null(a);
    assert_true(a->compression);
    a = hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k2", 2);
    assert_non_null(a);
    assert_false(a->compression);
    a = hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k3", 2);
    assert_non_null(a);
    assert_true(a->compression);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(json, sizeof(json),
                 "{\"apps\": [{\"id\": \"1\", \"key\": \"k\","
                 " \"secret\": \"s\", \"compression\": %s}]}", bad[i]);
        expect_error(f, load_json(f, json),
                     "apps[0].compression: must be true or false", f->path);
    }
}

static void test_config_json_numbers_and_strings(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"ping_interval\": 1500, \"max_queue\": \"2MiB\", "
                  "\"port\": \"7003\", \"tls_cert\": null, "
                  "\"allow_default_secret\": true, \"log_format\": \"json\"}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, NULL), 0);
    assert_int_equal(f->cfg.ping_interval_ms, 1500);
    assert_int_equal(f->cfg.max_queue, 2 * 1048576);
    assert_int_equal(f->cfg.port, 7003);
    assert_null(f->cfg.tls_cert);
    assert_true(f->cfg.allow_default_secret);
    assert_int_equal(f->cfg.log_format, SRV_LOG_JSON);
    unlink(f->path);

    write_json(f, "{\"ping_interval\": -5}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "\"ping_interval\"",
                 "negative");
    unlink(f->path);

    write_json(f, "{\"ping_interval\": 1.5}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "\"ping_interval\"",
                 "whole number of milliseconds");
}

static void test_config_empty_env_is_unset(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_BIND=", "LUBDUB_PORT=", "LUBDUB_CONFIG=",
                   "LUBDUB_UNKNOWN_THING=1", "LUBDUB_TEST_DATA=/x", NULL};

    assert_int_equal(load(f, env, NULL), 0);
    assert_string_equal(f->cfg.bind, "127.0.0.1");
    assert_int_equal(f->cfg.port, 6001);
}

static void test_config_check_config_sets_check_only(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_CHECK_CONFIG=1", NULL};

    assert_int_equal(load(f, NULL, "--check-config", NULL), 0);
    assert_true(f->cfg.check_only);
    assert_false(f->cfg.help);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(load(f, env, NULL), 0);
    assert_true(f->cfg.check_only);
}

static void test_config_help_skips_file_and_env(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_PORT=nope", NULL};

    assert_int_equal(load(f, env, "--config", "/nonexistent/x.json", "-h",
                          NULL), 0);
    assert_true(f->cfg.help);
    assert_int_equal(f->cfg.port, 6001);
}

static void test_config_unknown_flag_rejected(void **state)
{
    struct fixture *f = *state;

    expect_error(f, load(f, NULL, "--ping-intervall=25s", NULL),
                 "--ping-intervall: unknown option", NULL);
    expect_error(f, load(f, NULL, "--ping_interval=25s", NULL),
                 "--ping_interval: unknown option", NULL);
    expect_error(f, load(f, NULL, "--no-port", NULL),
                 "--no-port: unknown option", NULL);
    expect_error(f, load(f, NULL, "-p", "1", NULL), "-p: unknown option",
                 NULL);
    expect_error(f, load(f, NULL, "serve", NULL),
                 "serve: unexpected argument", NULL);
}

static void test_config_missing_value_rejected(void **state)
{
    struct fixture *f = *state;

    expect_error(f, load(f, NULL, "--port", NULL), "--port: missing value",
                 NULL);
    /* A following flag is not taken as the value. */
    expect_error(f, load(f, NULL, "--bind", "--port=1", NULL),
                 "--bind: missing value", NULL);
    expect_error(f, load(f, NULL, "--config", NULL),
                 "--config: missing value", NULL);
}

static void test_config_apps_from_json(void **state)
{
    struct fixture *f = *state;
    const struct hub_app *a;
    char flag[96];

    write_json(f, "{\"apps\": ["
                  "{\"id\": \"1\", \"key\": \"k1\", \"secret\": \"s1\"},"
                  "{\"id\": \"2\", \"key\": \"k2\", \"secret\": \"s2\","
                  " \"enabled\": false, \"client_events\": false,"
                  " \"max_connections\": 50, \"client_event_rate\": 5,"
                  " \"max_presence_members\": 20,"
                  " \"max_user_info_bytes\": \"2KiB\","
                  " \"max_event_bytes\": 20000,"
                  " \"max_channels_per_event\": 3, \"max_batch_events\": 4,"
                  " \"max_channel_name\": 64}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, NULL), 0);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
    assert_int_equal(f->cfg.n_apps, 2);

    a = hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k1", 2);
    assert_non_null(a);
    assert_string_equal(a->id, "1");
    assert_string_equal(a->secret, "s1");
    assert_int_equal(a->index, 0);
    assert_true(a->enabled);
    assert_int_equal(a->client_event_rate, 10);
    assert_int_equal(a->max_event_bytes, 10240);

    a = hub_app_find_by_id(f->cfg.apps, f->cfg.n_apps, "2xx", 1);
    assert_non_null(a);
    assert_string_equal(a->key, "k2");
    assert_int_equal(a->index, 1);
    assert_false(a->enabled);
    assert_false(a->client_events);
    assert_int_equal(a->max_connections, 50);
    assert_int_equal(a->client_event_rate, 5);
    assert_int_equal(a->max_presence_members, 20);
    assert_int_equal(a->max_user_info_bytes, 2048);
    assert_int_equal(a->max_event_bytes, 20000);
    assert_int_equal(a->max_channels_per_event, 3);
    assert_int_equal(a->max_batch_events, 4);
    assert_int_equal(a->max_channel_name, 64);
    assert_int_equal(a->max_user_id_len, 128);

    assert_null(hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k", 1));
    assert_null(hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k1x", 3));
    assert_null(hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "app-key", 7));
}

static void test_config_app_errors(void **state)
{
    static const struct {
        const char *json;
        const char *want;
    } cases[] = {
        {"{\"apps\": []}", "\"apps\" must be a non-empty array"},
        {"{\"apps\": {}}", "\"apps\" must be a non-empty array"},
        {"{\"apps\": [1]}", "apps[0] must be an object"},
        {"{\"apps\": [{\"id\": \"1\", \"key\": \"k\"}]}",
         "apps[0]: \"secret\" is missing"},
        {"{\"apps\": [{\"id\": \"1\", \"key\": \"\", \"secret\": \"s\"}]}",
         "apps[0].key: must not be empty"},
        {"{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": \"s\","
         " \"colour\": 1}]}", "apps[0].colour: unknown key"},
        {"{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": \"s\","
         " \"max_batch_events\": -1}]}", "apps[0].max_batch_events"},
    };
    struct fixture *f = *state;
    char flag[96];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_json(f, cases[i].json);
        snprintf(flag, sizeof(flag), "--config=%s", f->path);
        expect_error(f, load(f, NULL, flag, NULL), cases[i].want, f->path);
        unlink(f->path);
        f->path[0] = '\0';
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
    }
}

/* Authorized connections and watchlists: the per-app keys, their
 * defaults and their ranges. */
static void test_config_app_signin_options(void **state)
{
    static const struct {
        const char *field;
        const char *want;
    } bad[] = {
        {"\"user_authentication_timeout\": 0",
         "apps[0].user_authentication_timeout"},
        {"\"user_authentication_timeout\": \"2d\"",
         "apps[0].user_authentication_timeout"},
        {"\"max_watchlist\": 100001", "apps[0].max_watchlist"},
        {"\"enable_user_authentication\": 1",
         "apps[0].enable_user_authentication"},
    };
    struct fixture *f = *state;
    const struct hub_app *a;
    char flag[96], json[512];

    write_json(f, "{\"apps\": ["
                  "{\"id\": \"1\", \"key\": \"k1\", \"secret\": \"s1\"},"
                  "{\"id\": \"2\", \"key\": \"k2\", \"secret\": \"s2\","
                  " \"enable_user_authentication\": true,"
                  " \"user_authentication_timeout\": \"5s\","
                  " \"watchlist_events\": false,"
                  " \"max_watchlist\": 7, \"max_watchers\": 0}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, NULL), 0);
    a = hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k1", 2);
    assert_non_null(a);
    assert_false(a->enable_user_authentication);
    assert_int_equal(a->user_auth_timeout_ms, 30000);
    assert_true(a->watchlist_events);
    assert_int_equal(a->max_watchlist, 100);
    assert_int_equal(a->max_watchers, 1000);
    a = hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "k2", 2);
    assert_non_null(a);
    assert_true(a->enable_user_authentication);
    assert_int_equal(a->user_auth_timeout_ms, 5000);
    assert_false(a->watchlist_events);
    assert_int_equal(a->max_watchlist, 7);
    assert_int_equal(a->max_watchers, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unlink(f->path);
        f->path[0] = '\0';
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
        snprintf(json, sizeof(json),
                 "{\"apps\": [{\"id\": \"1\", \"key\": \"k\","
                 " \"secret\": \"s\", %s}]}", bad[i].field);
        write_json(f, json);
        snprintf(flag, sizeof(flag), "--config=%s", f->path);
        expect_error(f, load(f, NULL, flag, NULL), bad[i].want, f->path);
    }
}

/* No cap on the number of apps (the old one was 64); per-app limits and
 * origins (issue 13, item 6) load too, origins as a list or a string. */
static void test_config_many_apps_accepted(void **state)
{
    struct fixture *f = *state;
    enum { N = 1000 };
    char *json = malloc(160 * (N + 2));
    char flag[96];
    size_t off;
    int i;

    assert_non_null(json);
    off = (size_t)sprintf(json, "{\"apps\": [");
    for (i = 0; i < N; i++)
        off += (size_t)sprintf(json + off, "%s{\"id\":\"%d\",\"key\":\"k%d\","
                               "\"secret\":\"s\"%s}", i ? "," : "", i, i,
                               i == 7 ? ",\"allowed_origins\":[\"https://a\","
                                        "\"https://b\"],"
                                        "\"max_backend_events_per_second\":5,"
                                        "\"max_read_requests_per_second\":9"
                               : i == 8 ? ",\"allowed_origins\":\"https://c\""
                                        : "");
    sprintf(json + off, "]}");
    write_json(f, json);
    free(json);
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, flag, NULL), 0);
    assert_int_equal(f->cfg.n_apps, N);
    assert_string_equal(f->cfg.apps[N - 1].key, "k999");
    assert_string_equal(f->cfg.apps[7].allowed_origins, "https://a,https://b");
    assert_int_equal(f->cfg.apps[7].max_backend_events_per_second, 5);
    assert_int_equal(f->cfg.apps[7].max_read_requests_per_second, 9);
    assert_string_equal(f->cfg.apps[8].allowed_origins, "https://c");
    assert_null(f->cfg.apps[9].allowed_origins);
    assert_int_equal(f->cfg.apps[9].max_backend_events_per_second, 0);
}

static void test_config_bad_app_origins_rejected(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"apps\": [{\"id\": \"1\", \"key\": \"k\", "
               "\"secret\": \"s\", \"allowed_origins\": [\"a\", 3]}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "apps[0].allowed_origins[1]",
                 "non-empty string");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    write_json(f, "{\"apps\": [{\"id\": \"1\", \"key\": \"k\", "
               "\"secret\": \"s\", \"allowed_origins\": []}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "apps[0].allowed_origins",
                 "must not be empty");
}

static void test_config_duplicate_app_keys_rejected(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"apps\": ["
                  "{\"id\": \"1\", \"key\": \"k\", \"secret\": \"s1\"},"
                  "{\"id\": \"2\", \"key\": \"k\", \"secret\": \"s2\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, NULL), 0);
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "apps[1]", "key \"k\" is already used by apps[0]");
}

static void test_config_duplicate_app_ids_rejected(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"apps\": ["
                  "{\"id\": \"1\", \"key\": \"a\", \"secret\": \"s1\"},"
                  "{\"id\": \"1\", \"key\": \"b\", \"secret\": \"s2\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, NULL), 0);
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "apps[1]: id \"1\" is already used by apps[0]", NULL);
}

static void test_config_env_sets_default_app(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_APP_ID=42", "LUBDUB_APP_KEY=pk",
                   "LUBDUB_APP_SECRET=hunter2", NULL};

    assert_int_equal(load(f, env, "--app-key=fk", NULL), 0);
    assert_int_equal(f->cfg.n_apps, 1);
    assert_string_equal(f->cfg.apps[0].id, "42");
    assert_string_equal(f->cfg.apps[0].key, "fk");
    assert_string_equal(f->cfg.apps[0].secret, "hunter2");
    /* A real secret may listen publicly. */
    assert_int_equal(load(f, NULL, "--bind=0.0.0.0", NULL), 0);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
}

static void test_config_env_app_with_file_apps_rejected(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_APP_SECRET=hunter2", NULL};
    char flag[96];

    write_json(f, "{\"apps\": [{\"id\": \"1\", \"key\": \"k\", "
                  "\"secret\": \"s\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, env, flag, NULL), "LUBDUB_APP_SECRET: ",
                 "\"apps\"");
}

static void test_config_default_secret_public_bind_refused(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_BIND=0.0.0.0", NULL};

    expect_error(f, load_and_validate(f, env, NULL, NULL),
                 "default secret \"app-secret\"", "LUBDUB_APP_SECRET");
    expect_error(f, load_and_validate(f, NULL, "--bind=::", NULL),
                 "--allow-default-secret", NULL);
    expect_error(f, load_and_validate(f, NULL, "--bind=10.0.0.1", NULL),
                 "10.0.0.1", NULL);
}

static void test_config_default_secret_allowed_with_flag(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_BIND=0.0.0.0", "LUBDUB_ALLOW_DEFAULT_SECRET=true",
                   NULL};

    assert_int_equal(load_and_validate(f, env, NULL, NULL), 0);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(load_and_validate(f, NULL, "--bind=0.0.0.0",
                                       "--allow-default-secret"), 0);
}

static void test_config_default_secret_on_loopback_allowed(void **state)
{
    static char *const binds[] = {
        "--bind=127.0.0.1", "--bind=127.1.2.3", "--bind=::1",
        "--bind=localhost", "--bind=::ffff:127.0.0.1",
    };
    struct fixture *f = *state;
    size_t i;

    for (i = 0; i < sizeof(binds) / sizeof(binds[0]); i++)
        if (load_and_validate(f, NULL, binds[i], NULL))
            fail_msg("%s: %s", binds[i], f->err);
    expect_error(f, load_and_validate(f, NULL, "--bind=128.0.0.1", NULL),
                 "default secret", NULL);
}

/* --dev-auth-endpoint signs anything for anyone: refused unless --bind is
 * loopback, whatever the source, and --allow-default-secret does not
 * lift it. */
static void test_config_dev_auth_endpoint_needs_loopback(void **state)
{
    static char *const public_binds[] = {
        "--bind=0.0.0.0", "--bind=::", "--bind=10.0.0.1", "--bind=128.0.0.1",
    };
    static char *const loopbacks[] = {
        "--bind=127.0.0.1", "--bind=::1", "--bind=localhost",
        "--bind=127.9.9.9", "--bind=::ffff:127.0.0.1",
    };
    struct fixture *f = *state;
    char *env[] = {"LUBDUB_DEV_AUTH_ENDPOINT=true", "LUBDUB_BIND=0.0.0.0",
                   NULL};
    size_t i;

    for (i = 0; i < sizeof(public_binds) / sizeof(public_binds[0]); i++) {
        assert_int_equal(load(f, NULL, public_binds[i], "--dev-auth-endpoint",
                              "--allow-default-secret", NULL), 0);
        expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     "--dev-auth-endpoint: ", "only for a loopback bind");
        assert_non_null(strstr(f->err, public_binds[i] + 7));
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
    }
    expect_error(f, load_and_validate(f, env, "--app-secret=real", NULL),
                 "--dev-auth-endpoint: ", "signs any");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    for (i = 0; i < sizeof(loopbacks) / sizeof(loopbacks[0]); i++) {
        if (load_and_validate(f, NULL, loopbacks[i], "--dev-auth-endpoint"))
            fail_msg("%s: %s", loopbacks[i], f->err);
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
    }
    /* Off, a public bind with a real secret is fine. */
    assert_int_equal(load_and_validate(f, NULL, "--bind=0.0.0.0",
                                       "--app-secret=real"), 0);
}

/* App ids: the default app's (flag or environment) and the file's, at
 * validation (so at start, --check-config and SIGHUP alike). */
static void test_config_app_ids_checked(void **state)
{
    static const struct {
        const char *id;
        const char *want;
    } bad[] = {
        {"a:b", "':' at offset 1"},
        {"a b", "byte 0x20 at offset 1"},
        {"tab\there", "byte 0x09"},
        {"caf\xc3\xa9", "byte 0xc3 at offset 3"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "65 characters long"},
    };
    struct fixture *f = *state;
    char flag[160], json[512];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(flag, sizeof(flag), "--app-id=%s", bad[i].id);
        expect_error(f, load_and_validate(f, NULL, flag, NULL), "--app-id: ",
                     bad[i].want);
        assert_non_null(strstr(f->err, "A-Z a-z 0-9 - _ ."));
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
    }
    {
        char *env[] = {"LUBDUB_APP_ID=eu:1", NULL};

        expect_error(f, load_and_validate(f, env, NULL, NULL), "--app-id: ",
                     "Redis channel names collide");
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
    }
    /* A file's apps are named by their place; the first ones are fine. */
    snprintf(json, sizeof(json),
             "{\"apps\": [{\"id\": \"1234567\", \"key\": \"a\", "
             "\"secret\": \"s\"}, {\"id\": \"My_app.v2-x\", \"key\": \"b\", "
             "\"secret\": \"s\"}, {\"id\": \"eu:1\", \"key\": \"c\", "
             "\"secret\": \"s\"}]}");
    write_json(f, json);
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, NULL), 0);
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "apps[2]: app id \"eu:1\" has ':' at offset 2", NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    unlink(f->path);
    /* 64 characters is the most. */
    write_json(f, "{\"apps\": [{\"id\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", \"key\": \"a\", "
                  "\"secret\": \"s\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, flag, NULL), 0);
    assert_int_equal(strlen(f->cfg.apps[0].id), 64);
}

/* A temp file holding text (len bytes); path (64 bytes) gets its name. */
static void secret_file(char *path, const char *text, size_t len)
{
    int fd;

    snprintf(path, 64, "/tmp/lubdub-secret-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

/* The secret files: read at load, one trailing newline dropped, from a
 * flag, the environment or the JSON file; errors name the option and the
 * file; a secret given both ways is refused. */
static void test_config_secret_files(void **state)
{
    struct fixture *f = *state;
    char sec[64], tok[64], tok2[64], pw[64], empty[64];
    char a[128], b[128], c[128], d[128], json[512];
    char *env[] = {a, NULL};

    secret_file(sec, "app-s3cret\r\n", 12);
    secret_file(tok, "admin-token-0123456789\n", 23);
    secret_file(tok2, "short\n", 6);
    secret_file(pw, "redis pass\n", 11);
    secret_file(empty, "\n", 1);

    snprintf(a, sizeof(a), "--app-secret-file=%s", sec);
    snprintf(b, sizeof(b), "--admin-token-file=%s", tok);
    assert_int_equal(load_and_validate(f, NULL, a, b), 0);
    assert_string_equal(f->cfg.apps[0].secret, "app-s3cret");
    assert_string_equal(f->cfg.admin_token, "admin-token-0123456789");
    assert_true(srv_config_has_secret_files(&f->cfg));
    /* A real secret from the file may listen publicly. */
    assert_int_equal(load_and_validate(f, NULL, "--bind=0.0.0.0", NULL), 0);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_false(srv_config_has_secret_files(&f->cfg));

    /* The environment; the metrics token; the Redis password. */
    snprintf(a, sizeof(a), "LUBDUB_APP_SECRET_FILE=%s", sec);
    snprintf(c, sizeof(c), "--metrics-token-file=%s", tok);
    assert_int_equal(load_and_validate(f, env, c, NULL), 0);
    assert_string_equal(f->cfg.apps[0].secret, "app-s3cret");
    assert_string_equal(f->cfg.metrics_token, "admin-token-0123456789");
    assert_null(f->cfg.redis_password);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    snprintf(d, sizeof(d), "--redis-password-file=%s", pw);
    assert_int_equal(load_and_validate(f, NULL, d,
                                       "--redis=redis://:inurl@h:1/0"), 0);
    assert_string_equal(f->cfg.redis_password, "redis pass");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    expect_error(f, load_and_validate(f, NULL, d, NULL),
                 "--redis-password-file: needs --redis", NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);

    /* JSON keys, like the other options. */
    snprintf(json, sizeof(json), "{\"admin_token_file\": \"%s\", "
             "\"metrics_token_file\": \"%s\", \"redis\": \"redis://h\", "
             "\"redis_password_file\": \"%s\"}", tok, tok, pw);
    write_json(f, json);
    snprintf(b, sizeof(b), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, b, NULL), 0);
    assert_string_equal(f->cfg.admin_token, "admin-token-0123456789");
    assert_string_equal(f->cfg.metrics_token, "admin-token-0123456789");
    assert_string_equal(f->cfg.redis_password, "redis pass");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);

    /* Errors: the option, the file and errno's text; empty; both ways;
     * a short token named by its file option. */
    expect_error(f, load(f, NULL, "--admin-token-file=/nonexistent/tok",
                         NULL),
                 "--admin-token-file: cannot read \"/nonexistent/tok\": ",
                 "No such file or directory");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    snprintf(a, sizeof(a), "--app-secret-file=%s", empty);
    expect_error(f, load(f, NULL, a, NULL), "--app-secret-file: ",
                 "is empty");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    snprintf(a, sizeof(a), "--app-secret-file=%s", sec);
    expect_error(f, load(f, NULL, a, "--app-secret=x", NULL),
                 "--app-secret-file: --app-secret is set too", NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    {
        char *both[] = {"LUBDUB_ADMIN_TOKEN=admin-token-0123456789", NULL};

        snprintf(b, sizeof(b), "--admin-token-file=%s", tok);
        expect_error(f, load(f, both, b, NULL),
                     "--admin-token-file: --admin-token is set too", NULL);
        srv_config_fini(&f->cfg);
        srv_config_defaults(&f->cfg);
    }
    snprintf(c, sizeof(c), "--metrics-token-file=%s", tok2);
    expect_error(f, load_and_validate(f, NULL, c, NULL),
                 "--metrics-token-file: 5 characters, need 16 to 256", NULL);

    unlink(sec);
    unlink(tok);
    unlink(tok2);
    unlink(pw);
    unlink(empty);
}

/* An app's "secret_file" in the file's "apps". */
static void test_config_app_secret_file(void **state)
{
    struct fixture *f = *state;
    char sec[64], flag[96], json[512];

    secret_file(sec, "from-file\n", 10);
    snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"1\", \"key\": \"a\", "
             "\"secret_file\": \"%s\"}, {\"id\": \"2\", \"key\": \"b\", "
             "\"secret\": \"inline\"}]}", sec);
    write_json(f, json);
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, flag, NULL), 0);
    assert_string_equal(f->cfg.apps[0].secret, "from-file");
    assert_string_equal(f->cfg.apps[1].secret, "inline");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    unlink(f->path);

    /* Both, neither, not a string, unreadable (naming the app). */
    snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"1\", \"key\": \"a\", "
             "\"secret\": \"s\", \"secret_file\": \"%s\"}]}", sec);
    write_json(f, json);
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "apps[0]: \"secret\" and \"secret_file\" are both given",
                 NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    unlink(f->path);
    write_json(f, "{\"apps\": [{\"id\": \"1\", \"key\": \"a\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "apps[0]: \"secret\" is missing",
                 NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    unlink(f->path);
    write_json(f, "{\"apps\": [{\"id\": \"1\", \"key\": \"a\", "
                  "\"secret_file\": 3}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL), "apps[0].secret_file (app \"1\")",
                 "must be a non-empty string");
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    unlink(f->path);
    write_json(f, "{\"apps\": [{\"id\": \"ok\", \"key\": \"a\", \"secret\": "
                  "\"s\"}, {\"id\": \"eu-1\", \"key\": \"b\", "
                  "\"secret_file\": \"/nonexistent/eu\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    expect_error(f, load(f, NULL, flag, NULL),
                 "apps[1].secret_file (app \"eu-1\"): cannot read "
                 "\"/nonexistent/eu\": No such file or directory", NULL);
    /* The default app's file option cannot change a file's apps. */
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    unlink(f->path);
    write_json(f, "{\"apps\": [{\"id\": \"1\", \"key\": \"a\", \"secret\": "
                  "\"s\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    {
        char a[96];

        snprintf(a, sizeof(a), "--app-secret-file=%s", sec);
        expect_error(f, load(f, NULL, flag, a, NULL), "--app-secret-file: ",
                     "\"apps\"");
    }
    unlink(sec);
}

/* Secret files through srv_config_load_buffer (the fuzzer's way in),
 * and out of memory while reading one: -ENOMEM and "out of memory",
 * nothing leaked. */
static void test_config_secret_file_out_of_memory(void **state)
{
    char sec[64], json[256], err[512];
    struct srv_config cfg;
    unsigned fails = 0;
    int rc;

    (void)state;
    secret_file(sec, "from-file\n", 10);
    snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"1\", \"key\": \"a\", "
             "\"secret_file\": \"%s\"}], \"admin_token_file\": \"%s\"}", sec,
             sec);
    srv_config_defaults(&cfg);
    assert_int_equal(srv_config_load_buffer(&cfg, json, strlen(json),
                                            "mem.json", err, sizeof(err)), 0);
    /* "from-file" is too short a token: the token's rule applies. */
    assert_int_equal(srv_config_validate(&cfg, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--admin-token-file: 9 characters"));
    srv_config_fini(&cfg);
    snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"1\", \"key\": \"a\", "
             "\"secret_file\": \"%s\"}], \"metrics_token_file\": \"%s\"}",
             sec, sec);
    srv_config_defaults(&cfg);
    assert_int_equal(srv_config_load_buffer(&cfg, json, strlen(json),
                                            "mem.json", err, sizeof(err)), 0);
    assert_string_equal(cfg.apps[0].secret, "from-file");
    assert_string_equal(cfg.metrics_token, "from-file");
    srv_config_fini(&cfg);
    FAIL_ALLOC_COUNTDOWN(
        {
            srv_config_defaults(&cfg);
            err[0] = '\0';
            rc = srv_config_load_buffer(&cfg, json, strlen(json), "mem.json",
                                        err, sizeof(err));
        },
        {
            if (rc == -ENOMEM) {
                assert_non_null(strstr(err, "out of memory"));
                fails++;
            } else if (rc == 0) {
                assert_string_equal(cfg.apps[0].secret, "from-file");
                assert_string_equal(cfg.metrics_token, "from-file");
            }
            srv_config_fini(&cfg);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    assert_true(fails > 0);
    unlink(sec);
}

static void test_config_tls_needs_both_readable(void **state)
{
    struct fixture *f = *state;
    char cert[96], key[96];

    expect_error(f, load_and_validate(f, NULL, "--tls-cert=/x.pem", NULL),
                 "--tls-key: required when --tls-cert is set", NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    expect_error(f, load_and_validate(f, NULL, "--tls-key=/x.pem", NULL),
                 "--tls-cert: required when --tls-key is set", NULL);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);

    write_json(f, "not really a pem");
    snprintf(cert, sizeof(cert), "--tls-cert=%s", f->path);
    snprintf(key, sizeof(key), "--tls-key=%s", "/nonexistent/key.pem");
    expect_error(f, load_and_validate(f, NULL, cert, key),
                 "--tls-key: cannot read \"/nonexistent/key.pem\"", NULL);
    snprintf(key, sizeof(key), "--tls-key=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, cert, key), 0);
    /* An empty value unsets a nullable option. */
    assert_int_equal(load_and_validate(f, NULL, "--tls-cert=",
                                       "--tls-key="), 0);
    assert_null(f->cfg.tls_cert);
}

/* Back to the defaults between the steps of one case. */
static void reset(struct fixture *f)
{
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
}

/* rc of a load, then validated as main does. */
static int then_validate(struct fixture *f, int rc)
{
    return rc ? rc : srv_config_validate(&f->cfg, f->err, sizeof(f->err));
}

/* The --redis-tls-* options (issue 33): from a flag, the environment or
 * the file, with a rediss:// URL; each refused without one, the client
 * pair both or neither, the files readable, the name a host name. */
static void test_config_redis_tls_options(void **state)
{
    struct fixture *f = *state;
    char pem[64], ca[128], cert[128], key[128], json[512];
    char e1[128], e2[128];
    char *env[] = {e1, e2, NULL};

    secret_file(pem, "not really a pem\n", 17);
    snprintf(ca, sizeof(ca), "--redis-tls-ca-file=%s", pem);
    snprintf(cert, sizeof(cert), "--redis-tls-cert-file=%s", pem);
    snprintf(key, sizeof(key), "--redis-tls-key-file=%s", pem);
    assert_int_equal(then_validate(f, load(f, NULL, "--redis=rediss://h:1/0",
                                           ca, cert, key,
                                           "--redis-tls-server-name=r.example",
                                           NULL)), 0);
    assert_string_equal(f->cfg.redis_tls_ca_file, pem);
    assert_string_equal(f->cfg.redis_tls_cert_file, pem);
    assert_string_equal(f->cfg.redis_tls_key_file, pem);
    assert_string_equal(f->cfg.redis_tls_server_name, "r.example");
    reset(f);
    /* None of them is needed: rediss alone verifies with the system's. */
    assert_int_equal(load_and_validate(f, NULL, "--redis=rediss://h", NULL),
                     0);
    assert_null(f->cfg.redis_tls_ca_file);
    assert_null(f->cfg.redis_tls_server_name);
    reset(f);
    snprintf(e1, sizeof(e1), "LUBDUB_REDIS_TLS_CA_FILE=%s", pem);
    snprintf(e2, sizeof(e2), "LUBDUB_REDIS_TLS_SERVER_NAME=10.0.0.7");
    assert_int_equal(load_and_validate(f, env, "--redis=rediss://h", NULL),
                     0);
    assert_string_equal(f->cfg.redis_tls_ca_file, pem);
    assert_string_equal(f->cfg.redis_tls_server_name, "10.0.0.7");
    reset(f);
    snprintf(json, sizeof(json), "{\"redis\": \"rediss://h\", "
             "\"redis_tls_cert_file\": \"%s\", \"redis_tls_key_file\": "
             "\"%s\"}", pem, pem);
    write_json(f, json);
    snprintf(e1, sizeof(e1), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, e1, NULL), 0);
    assert_string_equal(f->cfg.redis_tls_cert_file, pem);
    assert_string_equal(f->cfg.redis_tls_key_file, pem);
    reset(f);

    /* Each needs rediss://. */
    expect_error(f, load_and_validate(f, NULL, "--redis=redis://h", ca),
                 "--redis-tls-ca-file: needs a rediss:// URL in --redis",
                 "not redis://");
    reset(f);
    expect_error(f, load_and_validate(f, NULL, ca, NULL),
                 "--redis-tls-ca-file: needs a rediss:// URL in --redis",
                 "unset");
    reset(f);
    expect_error(f, load_and_validate(f, NULL, "--redis=redis://h",
                                      "--redis-tls-server-name=x"),
                 "--redis-tls-server-name: needs a rediss:// URL", NULL);
    reset(f);
    expect_error(f, load_and_validate(f, NULL, "--redis=redis://h", cert),
                 "--redis-tls-cert-file: needs a rediss:// URL", NULL);
    reset(f);
    expect_error(f, load_and_validate(f, NULL, "--redis=redis://h", key),
                 "--redis-tls-key-file: needs a rediss:// URL", NULL);
    reset(f);
    /* The client certificate and key: both or neither. */
    expect_error(f, load_and_validate(f, NULL, "--redis=rediss://h", cert),
                 "--redis-tls-key-file: required when --redis-tls-cert-file "
                 "is set", NULL);
    reset(f);
    expect_error(f, load_and_validate(f, NULL, "--redis=rediss://h", key),
                 "--redis-tls-cert-file: required when --redis-tls-key-file "
                 "is set", NULL);
    reset(f);
    /* Readable files. */
    expect_error(f, load_and_validate(f, NULL, "--redis=rediss://h",
                                      "--redis-tls-ca-file=/nonexistent/ca"),
                 "--redis-tls-ca-file: cannot read \"/nonexistent/ca\"",
                 "No such file or directory");
    reset(f);
    expect_error(f, then_validate(f, load(f, NULL, "--redis=rediss://h", cert,
                                          "--redis-tls-key-file=/nonexistent/k",
                                          NULL)),
                 "--redis-tls-key-file: cannot read \"/nonexistent/k\"", NULL);
    reset(f);
    expect_error(f, load_and_validate(f, NULL, "--redis=rediss://h",
                                      "--redis-tls-server-name=a b"),
                 "--redis-tls-server-name: 1 to 255 characters", NULL);
    unlink(pem);
}

/* --redis-sentinel and --redis-master: each needs the other; the list
 * parses; without --redis the node is clustered with
 * redis://localhost:6379/0, with it the URL stays as given. */
static void test_config_redis_sentinel_options(void **state)
{
    static const struct {
        char *flag1, *flag2;
        const char *want;
    } bad[] = {
        {"--redis-sentinel=s1", NULL,
         "--redis-sentinel: needs --redis-master"},
        {"--redis-master=m", "--redis=redis://h",
         "--redis-master: needs --redis-sentinel"},
        {"--redis-sentinel=a,,b", "--redis-master=m",
         "--redis-sentinel: sentinel 2 (\"\"): empty"},
        {"--redis-sentinel=a:1,a:1", "--redis-master=m",
         "--redis-sentinel: sentinel 2 (\"a:1\"): named twice"},
        {"--redis-sentinel=a:99999", "--redis-master=m",
         "--redis-sentinel: sentinel 1 (\"a:99999\"): port must be "
         "1..65535"},
        {"--redis-sentinel=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q",
         "--redis-master=m", "--redis-sentinel: more than 16 sentinels"},
        {"--redis-sentinel=a", "--redis-master=m/x",
         "--redis-master: 1 to 128 characters of A-Z a-z 0-9 . _ -"},
    };
    struct fixture *f = *state;
    char e1[64], e2[64], flag[96];
    char *env[] = {e1, e2, NULL};

    assert_null(f->cfg.redis_sentinel);
    assert_null(f->cfg.redis_master);
    assert_int_equal(load_and_validate(f, NULL, "--redis-sentinel=s1,s2:5",
                                       "--redis-master=mymaster"), 0);
    assert_string_equal(f->cfg.redis_sentinel, "s1,s2:5");
    assert_string_equal(f->cfg.redis_master, "mymaster");
    assert_string_equal(f->cfg.redis, "redis://localhost:6379/0");
    /* Validating again keeps it (and fini frees it: ASan). */
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
    assert_string_equal(f->cfg.redis, "redis://localhost:6379/0");
    reset(f);
    assert_int_equal(then_validate(f, load(f, NULL, "--redis-sentinel=s1",
                                           "--redis-master=m",
                                           "--redis=rediss://u:p@x:1/4",
                                           NULL)), 0);
    assert_string_equal(f->cfg.redis, "rediss://u:p@x:1/4");
    reset(f);
    snprintf(e1, sizeof(e1), "LUBDUB_REDIS_SENTINEL=[::1]:26380");
    snprintf(e2, sizeof(e2), "LUBDUB_REDIS_MASTER=m-1.a_b");
    assert_int_equal(load_and_validate(f, env, NULL, NULL), 0);
    assert_string_equal(f->cfg.redis_sentinel, "[::1]:26380");
    assert_string_equal(f->cfg.redis_master, "m-1.a_b");
    reset(f);
    write_json(f, "{\"redis_sentinel\": \"a,b,c\", \"redis_master\": "
                  "\"m\"}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, flag, NULL), 0);
    assert_string_equal(f->cfg.redis_sentinel, "a,b,c");
    assert_string_equal(f->cfg.redis, "redis://localhost:6379/0");
    reset(f);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_error(f, load_and_validate(f, NULL, bad[i].flag1,
                                          bad[i].flag2),
                     bad[i].want, NULL);
        reset(f);
    }
    {
        /* 129 characters, then 128. */
        char name[160] = "--redis-master=";

        memset(name + 15, 'm', 129);
        name[15 + 129] = '\0';
        expect_error(f, load_and_validate(f, NULL, "--redis-sentinel=a",
                                          name),
                     "--redis-master: 1 to 128", NULL);
        reset(f);
        name[15 + 128] = '\0';
        assert_int_equal(load_and_validate(f, NULL, "--redis-sentinel=a",
                                           name), 0);
        reset(f);
    }
    /* The URL is still checked; its host:port is only unused. */
    expect_error(f, then_validate(f, load(f, NULL, "--redis-sentinel=a",
                                          "--redis-master=m",
                                          "--redis=redis://h:0", NULL)),
                 "--redis: port must be 1..65535", NULL);
    reset(f);
    /* TLS with Sentinel: the implied URL is plaintext. */
    expect_error(f, then_validate(f, load(f, NULL, "--redis-sentinel=a",
                                          "--redis-master=m",
                                          "--redis-tls-server-name=r",
                                          NULL)),
                 "--redis-tls-server-name: needs a rediss:// URL in --redis",
                 "with --redis-sentinel");
}

/* --redis-sentinel-password-file: read like --redis-password-file (a
 * secret file, at load), needs --redis-sentinel, and makes a SIGHUP read
 * the secret files again. */
static void test_config_redis_sentinel_password_file(void **state)
{
    struct fixture *f = *state;
    char pw[64], flag[128], json[256];

    secret_file(pw, "sentinel pass\r\n", 15);
    snprintf(flag, sizeof(flag), "--redis-sentinel-password-file=%s", pw);
    assert_int_equal(then_validate(f, load(f, NULL, flag,
                                           "--redis-sentinel=a",
                                           "--redis-master=m", NULL)), 0);
    assert_string_equal(f->cfg.redis_sentinel_password_file, pw);
    assert_string_equal(f->cfg.redis_sentinel_password, "sentinel pass");
    assert_null(f->cfg.redis_password);
    assert_true(srv_config_has_secret_files(&f->cfg));
    reset(f);
    snprintf(json, sizeof(json), "{\"redis_sentinel\": \"a\", "
             "\"redis_master\": \"m\", \"redis_sentinel_password_file\": "
             "\"%s\"}", pw);
    write_json(f, json);
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load_and_validate(f, NULL, flag, NULL), 0);
    assert_string_equal(f->cfg.redis_sentinel_password, "sentinel pass");
    reset(f);
    snprintf(flag, sizeof(flag), "--redis-sentinel-password-file=%s", pw);
    expect_error(f, load_and_validate(f, NULL, flag, "--redis=redis://h"),
                 "--redis-sentinel-password-file: needs --redis-sentinel",
                 NULL);
    reset(f);
    expect_error(f, load(f, NULL, "--redis-sentinel-password-file="
                         "/nonexistent/spw", NULL),
                 "--redis-sentinel-password-file: cannot read "
                 "\"/nonexistent/spw\"", "No such file or directory");
    unlink(pw);
}

static void test_config_tick_must_not_exceed_ping(void **state)
{
    struct fixture *f = *state;

    expect_error(f, load_and_validate(f, NULL, "--tick=30s",
                                      "--ping-interval=20s"),
                 "--tick: 30s must not exceed --ping-interval (20s)", NULL);
    assert_int_equal(load_and_validate(f, NULL, "--tick=20s",
                                       "--ping-interval=20s"), 0);
}

static void test_config_queue_must_hold_a_message(void **state)
{
    struct fixture *f = *state;

    expect_error(f, load_and_validate(f, NULL, "--max-message=2MiB",
                                      "--max-queue=1MiB"),
                 "--max-queue: 1MiB is smaller than --max-message (2MiB)",
                 NULL);
}

static void test_config_validate_checks_hand_built(void **state)
{
    struct fixture *f = *state;

    f->cfg.ping_interval_ms = 0;
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "--ping-interval: 0 is out of range", NULL);
    f->cfg.ping_interval_ms = 25000;
    f->cfg.pong_timeout_ms = 0;
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "--pong-timeout", NULL);
    f->cfg.pong_timeout_ms = 1;
    f->cfg.activity_timeout_s = 121;
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "--activity-timeout: 121 is out of range 1..120", NULL);
    f->cfg.activity_timeout_s = 30;
    f->cfg.n_apps = 0;
    expect_error(f, srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                 "apps", NULL);
    f->cfg.n_apps = 1;
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
}

static void test_config_fini_allows_reuse(void **state)
{
    struct fixture *f = *state;
    char flag[96];

    write_json(f, "{\"bind\": \"::1\", \"apps\": [{\"id\": \"1\", "
                  "\"key\": \"k\", \"secret\": \"s\"}]}");
    snprintf(flag, sizeof(flag), "--config=%s", f->path);
    assert_int_equal(load(f, NULL, flag, "--web-root=/srv/www",
                          "--log-level=debug", NULL), 0);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(load(f, NULL, "--bind=0.0.0.0", NULL), 0);
    assert_string_equal(f->cfg.bind, "0.0.0.0");
    assert_string_equal(f->cfg.apps[0].key, "app-key");
}

static void test_config_option_names(void **state)
{
    const struct srv_option_desc *opts, *d = NULL;
    size_t n = srv_config_options(&opts), i;
    char buf[64];

    (void)state;
    for (i = 0; i < n; i++)
        if (!strcmp(opts[i].name, "ping_interval"))
            d = &opts[i];
    assert_non_null(d);
    assert_int_equal(srv_config_option_name(d, SRV_SRC_FLAG, buf,
                                            sizeof(buf)), 0);
    assert_string_equal(buf, "--ping-interval");
    assert_int_equal(srv_config_option_name(d, SRV_SRC_ENV, buf,
                                            sizeof(buf)), 0);
    assert_string_equal(buf, "LUBDUB_PING_INTERVAL");
    assert_int_equal(srv_config_option_name(d, SRV_SRC_FILE, buf,
                                            sizeof(buf)), 0);
    assert_string_equal(buf, "ping_interval");
    assert_int_equal(srv_config_option_name(d, SRV_SRC_ENV, buf, 8),
                     -ENOSPC);
    for (i = 0; i < n; i++)
        if (!strcmp(opts[i].name, "help"))
            d = &opts[i];
    assert_int_equal(srv_config_option_name(d, SRV_SRC_ENV, buf,
                                            sizeof(buf)), -ENOENT);
}

/* Text every option must show in --help and docs: its default. */
static const char *default_text(const struct srv_option_desc *d)
{
    return d->def ? d->def : "unset";
}

static void test_config_help_lists_every_option(void **state)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts), i, len = 0;
    char *text = NULL, name[64], want[128];
    FILE *out = open_memstream(&text, &len);

    (void)state;
    assert_non_null(out);
    srv_config_print_help(out);
    fclose(out);
    for (i = 0; i < n; i++) {
        const struct srv_option_desc *d = &opts[i];
        const char *entry;

        /* Each entry starts with its flag on a line of its own. */
        srv_config_option_name(d, SRV_SRC_FLAG, name, sizeof(name));
        entry = strstr(text, name);
        assert_non_null(entry);
        if (!srv_config_option_name(d, SRV_SRC_ENV, name, sizeof(name)))
            assert_non_null(strstr(entry, name));
        if (d->sources & SRV_SRC_FILE) {
            snprintf(want, sizeof(want), "json \"%s\"", d->name);
            assert_non_null(strstr(entry, want));
        }
        assert_non_null(strstr(entry, default_text(d)));
    }
    for (i = 0; i < len; i++)
        if (text[i] == '\n')
            assert_true(i < 80 || memchr(text + i - 80, '\n', 80));
    free(text);
}

/* Read a whole text file; fails the test when it cannot. */
static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf;
    long len;

    if (!fp)
        fail_msg("%s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
    buf[len] = '\0';
    fclose(fp);
    return buf;
}

/* path gets rel under the source tree (LUBDUB_SOURCE_DIR at build time). */
static void source_path(char *path, size_t len, const char *rel)
{
    snprintf(path, len, "%s/%s", LUBDUB_SOURCE_DIR, rel);
}

static char *read_docs(void)
{
    const char *dir = getenv("LUBDUB_DOCS_DIR");
    char path[512];

    if (dir && *dir)
        snprintf(path, sizeof(path), "%s/CONFIG.md", dir);
    else
        source_path(path, sizeof(path), "docs/CONFIG.md");
    return read_text(path);
}

/*
 * deploy/lubdub.example.json must load, validate, and hold every file
 * option at its default, spelled as the table spells it.
 */
static void test_config_example_file_has_every_default(void **state)
{
    struct fixture *f = *state;
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts), i;
    char path[512], want[160], *text;

    source_path(path, sizeof(path), "deploy/lubdub.example.json");
    assert_int_equal(load(f, NULL, "--config", path, NULL), 0);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
    assert_int_equal(f->cfg.n_apps, 1);
    text = read_text(path);
    for (i = 0; i < n; i++) {
        const struct srv_option_desc *d = &opts[i];

        if (!(d->sources & SRV_SRC_FILE) ||
            (d->flags & SRV_OPTF_BUILD_DEFAULT))
            continue;
        if (!d->def)
            snprintf(want, sizeof(want), "\"%s\": null,", d->name);
        else if (d->type == SRV_OPT_UINT || d->type == SRV_OPT_BOOL)
            snprintf(want, sizeof(want), "\"%s\": %s,", d->name, d->def);
        else
            snprintf(want, sizeof(want), "\"%s\": \"%s\",", d->name,
                     d->def);
        if (!strstr(text, want))
            fail_msg("deploy/lubdub.example.json lacks %s", want);
    }
    free(text);
}

/* jansson's allocations, noting a failure (free and malloc are fail_alloc's
 * wrappers, as they are for everything in this test). */
static bool json_alloc_failed;

static void *json_alloc_noting(size_t n)
{
    void *p = malloc(n);

    if (!p)
        json_alloc_failed = true;
    return p;
}

/*
 * Out of memory at each allocation of loading the example file, with an
 * environment variable and a flag on top: the load fails with -ENOMEM and
 * an "out of memory" line, or gets the very config of a clean load; fini
 * frees everything either way.
 */
static void test_config_load_out_of_memory(void **state)
{
    char path[512], flag[600], err[512];
    char *envp[] = { "LUBDUB_LOG_LEVEL=debug", NULL };
    struct srv_config ref, cfg;
    unsigned fails = 0;
    int rc;

    (void)state;
    source_path(path, sizeof(path), "deploy/lubdub.example.json");
    snprintf(flag, sizeof(flag), "--config=%s", path);
    char *argv[] = { "lubdub", flag, "--web-root", "/srv/www", NULL };

    json_set_alloc_funcs(json_alloc_noting, free);
    srv_config_defaults(&ref);
    assert_int_equal(srv_config_load(&ref, 4, argv, envp, err, sizeof(err)),
                     0);
    assert_string_equal(ref.log_level, "debug");
    assert_string_equal(ref.web_root, "/srv/www");
    FAIL_ALLOC_COUNTDOWN(
        {
            json_alloc_failed = false;
            srv_config_defaults(&cfg);
            err[0] = '\0';
            rc = srv_config_load(&cfg, 4, argv, envp, err, sizeof(err));
        },
        {
            /* jansson 2.14 reports an allocation failing inside its
             * parser as a syntax error, or even parses a key short; those
             * are its to report. Every failure of ours says so. */
            if (fa_failed && rc != -ENOMEM && !json_alloc_failed)
                fail_msg("allocation %ld failed: rc %d, \"%s\"", fa_step,
                         rc, err);
            if (rc == -ENOMEM)
                assert_non_null(strstr(err, "out of memory"));
            if (rc) {
                assert_true(fa_failed);
                fails++;
            } else {
                assert_string_equal(cfg.bind, ref.bind);
                assert_string_equal(cfg.web_root, ref.web_root);
                assert_string_equal(cfg.log_level, ref.log_level);
                assert_int_equal(cfg.port, ref.port);
                assert_int_equal(cfg.n_apps, ref.n_apps);
                assert_string_equal(cfg.apps[0].id, ref.apps[0].id);
                assert_string_equal(cfg.apps[0].key, ref.apps[0].key);
                assert_string_equal(cfg.apps[0].secret, ref.apps[0].secret);
                assert_int_equal(cfg.apps[0].max_event_bytes,
                                 ref.apps[0].max_event_bytes);
            }
            srv_config_fini(&cfg);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    assert_true(fails > 5);
    srv_config_fini(&ref);
}

/*
 * docs/CONFIG.md has one table row per option, starting "| `--flag`". The
 * row must name the env var (or "—"), the JSON key (or "—") and the
 * default (or "unset"), each in backticks, and there must be no row for a
 * flag the table lacks. A failure names the row and the missing cell.
 */
static void test_config_docs_match_options(void **state)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts), i, rows = 0;
    char *docs = read_docs(), *line, *save = NULL;
    bool *seen = calloc(n, sizeof(*seen));

    (void)state;
    assert_non_null(seen);
    for (line = strtok_r(docs, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        const struct srv_option_desc *d = NULL;
        char flag[64], env[64], want[128];
        size_t flen;

        if (strncmp(line, "| `--", 5))
            continue;
        flen = strcspn(line + 3, "`");
        rows++;
        for (i = 0; i < n && !d; i++) {
            srv_config_option_name(&opts[i], SRV_SRC_FLAG, flag,
                                   sizeof(flag));
            if (strlen(flag) == flen && !strncmp(line + 3, flag, flen))
                d = &opts[i];
        }
        if (!d)
            fail_msg("docs/CONFIG.md documents %.*s, which --help lacks",
                     (int)flen, line + 3);
        if (seen[d - opts])
            fail_msg("docs/CONFIG.md documents %s twice", flag);
        seen[d - opts] = true;

        if (srv_config_option_name(d, SRV_SRC_ENV, env, sizeof(env)))
            snprintf(env, sizeof(env), "—");
        snprintf(want, sizeof(want), "| `%s` |", env);
        if (strcmp(env, "—") && !strstr(line, want))
            fail_msg("%s: row lacks %s", flag, want);

        if (d->sources & SRV_SRC_FILE)
            snprintf(want, sizeof(want), "| `%s` |", d->name);
        else
            snprintf(want, sizeof(want), "| — |");
        if (!strstr(line, want))
            fail_msg("%s: row lacks \"%s\"", flag, want);

        if (d->def)
            snprintf(want, sizeof(want), "| `%s`", d->def);
        else
            snprintf(want, sizeof(want), "| unset |");
        if (!strstr(line, want) &&
            !((d->flags & SRV_OPTF_BUILD_DEFAULT) &&
              strstr(line, "LUBDUB_WEB_ROOT")))
            fail_msg("%s: row lacks default \"%s\"", flag, want);
    }
    for (i = 0; i < n; i++) {
        char flag[64];

        srv_config_option_name(&opts[i], SRV_SRC_FLAG, flag, sizeof(flag));
        if (!seen[i])
            fail_msg("docs/CONFIG.md has no row starting \"| `%s`\"", flag);
    }
    assert_int_equal(rows, n);
    free(seen);
    free(docs);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_config_defaults),
        T(test_config_error_is_one_line),
        T(test_config_precedence_file_env_flags),
        T(test_config_config_flag_beats_env),
        T(test_config_flag_forms),
        T(test_config_parse_errors_name_option),
        T(test_config_file_errors_name_key),
        T(test_config_unknown_file_key_rejected),
        T(test_config_flag_only_keys_not_in_file),
        T(test_config_file_syntax_error),
        T(test_config_missing_file_rejected),
        T(test_config_durations),
        T(test_config_seconds_must_be_whole),
        T(test_config_sizes),
        T(test_config_compression_options),
        T(test_config_json_numbers_and_strings),
        T(test_config_empty_env_is_unset),
        T(test_config_check_config_sets_check_only),
        T(test_config_app_signin_options),
        T(test_config_help_skips_file_and_env),
        T(test_config_unknown_flag_rejected),
        T(test_config_missing_value_rejected),
        T(test_config_apps_from_json),
        T(test_config_app_errors),
        T(test_config_app_compression_key),
        T(test_config_many_apps_accepted),
        T(test_config_bad_app_origins_rejected),
        T(test_config_duplicate_app_keys_rejected),
        T(test_config_duplicate_app_ids_rejected),
        T(test_config_env_sets_default_app),
        T(test_config_env_app_with_file_apps_rejected),
        T(test_config_default_secret_public_bind_refused),
        T(test_config_default_secret_allowed_with_flag),
        T(test_config_default_secret_on_loopback_allowed),
        T(test_config_dev_auth_endpoint_needs_loopback),
        T(test_config_app_ids_checked),
        T(test_config_secret_files),
        T(test_config_app_secret_file),
        T(test_config_secret_file_out_of_memory),
        T(test_config_tls_needs_both_readable),
        T(test_config_redis_tls_options),
        T(test_config_redis_sentinel_options),
        T(test_config_redis_sentinel_password_file),
        T(test_config_tick_must_not_exceed_ping),
        T(test_config_queue_must_hold_a_message),
        T(test_config_validate_checks_hand_built),
        T(test_config_fini_allows_reuse),
        T(test_config_option_names),
        T(test_config_help_lists_every_option),
        T(test_config_docs_match_options),
        T(test_config_load_out_of_memory),
        T(test_config_example_file_has_every_default),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
