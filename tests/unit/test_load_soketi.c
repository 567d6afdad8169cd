/*
 * tests/unit/test_load_soketi.c - soketi's configuration read as lubdub's
 * (server/config/load_soketi.h): the SOKETI_* variables and their value
 * conversions, LUBDUB_* winning with one warning when the two differ,
 * unmapped names warned about once, soketi's config.json (dotted and
 * nested) with its apps, and such a file loaded under failing allocations.
 *
 * The first load's warnings are the load's own (cfg.warnings, which main()
 * logs in the configured format); load() copies each load's into a
 * tmpfile() as main() prints them, so that a case sees all it was warned
 * of. srv_soketi_forget_started() makes each case a new process; the
 * environment is an explicit envp.
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

#include "fail_alloc.h"
#include "hub/app/app.h"
#include "server/config/config.h"
#include "server/config/load_soketi.h"
#include "server/config/soketi_map.h"

struct fixture {
    struct srv_config cfg;
    char err[512];
    char path[64];
    FILE *warn;
    char warned[4096];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (!f)
        return -1;
    f->warn = tmpfile();
    if (!f->warn) {
        free(f);
        return -1;
    }
    srv_soketi_forget_started();
    srv_config_defaults(&f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    srv_config_fini(&f->cfg);
    srv_soketi_forget_started();
    fclose(f->warn);
    if (f->path[0])
        unlink(f->path);
    free(f);
    return 0;
}

static const char *write_json(struct fixture *f, const char *json)
{
    size_t len = strlen(json);
    int fd;

    snprintf(f->path, sizeof(f->path), "/tmp/lubdub-soketi-XXXXXX");
    fd = mkstemp(f->path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, len), (ssize_t)len);
    close(fd);
    return f->path;
}

/* Load afresh with envp and, when given, --config path; the load's
 * warnings appended to f->warn, each line as main() prints it. */
static int load(struct fixture *f, char **envp, const char *path)
{
    char *argv[] = {"lubdub", "--config", (char *)path, NULL};
    const char *w;
    int rc;

    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    f->err[0] = '\0';
    rc = srv_config_load(&f->cfg, path ? 3 : 1, argv, envp, f->err,
                         sizeof(f->err));
    for (w = f->cfg.warnings; w && *w;) {
        size_t len = strcspn(w, "\n");

        fprintf(f->warn, "lubdub: warning: %.*s\n", (int)len, w);
        w += len + (w[len] == '\n');
    }
    return rc;
}

/* Everything warned so far, in f->warned. */
static const char *warned(struct fixture *f)
{
    size_t n;

    fflush(f->warn);
    rewind(f->warn);
    n = fread(f->warned, 1, sizeof(f->warned) - 1, f->warn);
    f->warned[n] = '\0';
    fseek(f->warn, 0, SEEK_END);
    return f->warned;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void test_load_soketi_env_default_app_port_debug(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"SOKETI_DEFAULT_APP_ID=app-1", "SOKETI_DEFAULT_APP_KEY=k1",
                   "SOKETI_DEFAULT_APP_SECRET=s1", "SOKETI_PORT=7001",
                   "SOKETI_HOST=0.0.0.0", "SOKETI_DEBUG=1", NULL};
    struct hub_app *a = &f->cfg.apps[0];

    assert_int_equal(load(f, env, NULL), 0);
    assert_int_equal(f->cfg.n_apps, 1);
    assert_string_equal(a->id, "app-1");
    assert_string_equal(a->key, "k1");
    assert_string_equal(a->secret, "s1");
    assert_int_equal(f->cfg.port, 7001);
    assert_string_equal(f->cfg.bind, "0.0.0.0");
    assert_string_equal(f->cfg.log_level, "debug");
    /* soketi's defaults for the app it describes. */
    assert_false(a->client_events);
    assert_int_equal(a->max_event_bytes, 100 * 1024);
    assert_int_equal(a->max_user_info_bytes, 2 * 1024);
    assert_false(a->webhook_batching);
    assert_string_equal(warned(f), "");
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
}

static void test_load_soketi_env_value_conversions(void **state)
{
    struct fixture *f = *state;
    char *env[] = {
        "SOKETI_DEFAULT_APP_MAX_CONNS=-1",
        "SOKETI_DEFAULT_APP_MAX_CLIENT_EVENTS_PER_SEC=-1",
        "SOKETI_DEFAULT_APP_MAX_BACKEND_EVENTS_PER_SEC=20",
        "SOKETI_DEFAULT_APP_ENABLE_CLIENT_MESSAGES=true",
        "SOKETI_DEFAULT_APP_ENABLED=false",
        "SOKETI_DEFAULT_APP_WEBHOOKS=[{\"url\":\"http://127.0.0.1:9/h\","
        "\"event_types\":[\"channel_occupied\"]}]",
        "SOKETI_SHUTDOWN_GRACE_PERIOD=3000", "SOKETI_CHANNEL_CACHE_TTL=3600",
        "SOKETI_EVENT_MAX_SIZE_IN_KB=0.5", "SOKETI_PRESENCE_MAX_MEMBERS=-1",
        "SOKETI_PRESENCE_MAX_MEMBER_SIZE=4", "SOKETI_DEBUG=false",
        "SOKETI_USER_AUTHENTICATION_TIMEOUT=5000",
        "SOKETI_WEBHOOKS_BATCHING=true", "SOKETI_MODE=full", NULL};
    struct hub_app *a = &f->cfg.apps[0];

    assert_int_equal(load(f, env, NULL), 0);
    assert_int_equal(a->max_connections, 0);
    assert_int_equal(a->client_event_rate, 0);
    assert_int_equal(a->max_backend_events_per_second, 20);
    assert_true(a->client_events);
    assert_false(a->enabled);
    assert_int_equal(a->n_webhooks, 1);
    assert_int_equal(f->cfg.drain_timeout_ms, 3000);
    assert_int_equal(f->cfg.cache_ttl_ms, 3600 * 1000);
    assert_int_equal(a->max_event_bytes, 512);
    assert_int_equal(a->max_presence_members, 0);
    assert_int_equal(a->max_user_info_bytes, 4096);
    assert_int_equal(a->user_auth_timeout_ms, 5000);
    assert_true(a->webhook_batching);
    /* SOKETI_DEBUG=false leaves the level alone. */
    assert_string_equal(f->cfg.log_level, "info");
    assert_string_equal(warned(f), "");
}

static void test_load_soketi_env_redis_and_metrics(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"SOKETI_ADAPTER_DRIVER=redis",
                   "SOKETI_DB_REDIS_HOST=redis.local",
                   "SOKETI_DB_REDIS_PORT=6380", "SOKETI_DB_REDIS_DB=2",
                   "SOKETI_DB_REDIS_PASSWORD=p@ss:w/rd",
                   "SOKETI_DB_REDIS_KEY_PREFIX=myapp",
                   "SOKETI_METRICS_ENABLED=true", NULL};
    char *env2[] = {"SOKETI_METRICS_ENABLED=1",
                    "SOKETI_METRICS_SERVER_PORT=9700",
                    "SOKETI_DB_REDIS_HOST=redis.local", NULL};

    assert_int_equal(load(f, env, NULL), 0);
    assert_string_equal(f->cfg.redis,
                        "redis://:p%40ss%3Aw%2Frd@redis.local:6380/2");
    assert_string_equal(f->cfg.redis_prefix, "myapp");
    assert_int_equal(f->cfg.metrics_port, 9601);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
    /* Without the redis adapter the Redis names are warned about (a new
     * process, as far as the warnings go). */
    srv_soketi_forget_started();
    assert_int_equal(load(f, env2, NULL), 0);
    assert_null(f->cfg.redis);
    assert_int_equal(f->cfg.metrics_port, 9700);
    assert_int_equal(count(warned(f), "SOKETI_DB_REDIS_HOST"), 1);
}

static void test_load_soketi_env_lubdub_wins_one_warning(void **state)
{
    struct fixture *f = *state;
    char *differ[] = {"SOKETI_PORT=7001", "LUBDUB_PORT=7002",
                      "SOKETI_DEFAULT_APP_SECRET=soketi-secret",
                      "LUBDUB_APP_SECRET=lubdub-secret", NULL};
    char *same[] = {"SOKETI_SHUTDOWN_GRACE_PERIOD=5000",
                    "LUBDUB_DRAIN_TIMEOUT=5s", NULL};

    assert_int_equal(load(f, differ, NULL), 0);
    assert_int_equal(f->cfg.port, 7002);
    assert_string_equal(f->cfg.apps[0].secret, "lubdub-secret");
    warned(f);
    assert_int_equal(count(f->warned, "SOKETI_PORT and LUBDUB_PORT"), 1);
    assert_int_equal(count(f->warned, "LUBDUB_APP_SECRET wins"), 1);
    /* Values never appear in a warning (secrets are among them). */
    assert_null(strstr(f->warned, "secret="));
    assert_null(strstr(f->warned, "lubdub-secret"));
    /* The same process loading again (a SIGHUP) warns no more. */
    assert_int_equal(load(f, differ, NULL), 0);
    assert_int_equal(f->cfg.port, 7002);
    assert_int_equal(count(warned(f), "SOKETI_PORT and LUBDUB_PORT"), 1);
    /* The same value spelled two ways is no conflict. */
    srv_soketi_forget_started();
    assert_int_equal(load(f, same, NULL), 0);
    assert_int_equal(f->cfg.drain_timeout_ms, 5000);
    assert_int_equal(count(warned(f), "LUBDUB_DRAIN_TIMEOUT"), 0);
}

static void test_load_soketi_env_unmapped_warned_once(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"SOKETI_QUEUE_DRIVER=redis", "SOKETI_NOT_A_NAME=1",
                   "SOKETI_MODE=worker", "SOKETI_PORT=7005",
                   "LUBDUB_SOMETHING=1", NULL};

    assert_int_equal(load(f, env, NULL), 0);
    assert_int_equal(f->cfg.port, 7005);
    load(f, env, NULL);
    warned(f);
    assert_int_equal(count(f->warned, "SOKETI_QUEUE_DRIVER is not "
                                      "supported by lubdub"), 1);
    assert_int_equal(count(f->warned, "SOKETI_NOT_A_NAME is not "
                                      "supported by lubdub"), 1);
    assert_int_equal(count(f->warned, "SOKETI_MODE: lubdub supports only "
                                      "\"full\""), 1);
    assert_int_equal(count(f->warned, "lubdub: warning: SOKETI_"), 3);
    /* LUBDUB_SOMETHING is lubdub's to warn of (load_env.c, on each
     * load), never soketi's. */
    assert_int_equal(count(f->warned, "LUBDUB_SOMETHING"),
                     count(f->warned, "LUBDUB_SOMETHING: not a lubdub "
                                      "option"));
}

static void test_load_soketi_env_bad_value_is_error(void **state)
{
    struct fixture *f = *state;
    char *port[] = {"SOKETI_PORT=abc", NULL};
    char *conns[] = {"SOKETI_DEFAULT_APP_MAX_CONNS=-2", NULL};
    char *hooks[] = {"SOKETI_DEFAULT_APP_WEBHOOKS={}", NULL};

    assert_int_equal(load(f, port, NULL), -EINVAL);
    assert_non_null(strstr(f->err, "SOKETI_PORT"));
    assert_int_equal(load(f, conns, NULL), -EINVAL);
    assert_non_null(strstr(f->err, "SOKETI_DEFAULT_APP_MAX_CONNS"));
    assert_int_equal(load(f, hooks, NULL), -EINVAL);
    assert_non_null(strstr(f->err, "SOKETI_DEFAULT_APP_WEBHOOKS"));
}

static const char soketi_json[] =
    "{\"debug\": true, \"port\": 7003, \"host\": \"127.0.0.1\","
    " \"shutdownGracePeriod\": 2000,"
    " \"eventLimits\": {\"maxNameLength\": 50},"
    " \"presence.maxMembersPerChannel\": 10,"
    " \"cors\": {\"credentials\": false},"
    " \"ping_interval\": \"20s\","
    " \"appManager.array.apps\": ["
    "  {\"id\": 1234, \"key\": \"key-a\", \"secret\": \"secret-a\","
    "   \"maxConnections\": \"-1\", \"enableClientMessages\": true,"
    "   \"maxClientEventsPerSecond\": 5,"
    "   \"maxEventPayloadInKb\": 20,"
    "   \"webhooks\": [{\"url\": \"http://127.0.0.1:9/a\","
    "                   \"event_types\": [\"channel_occupied\"]},"
    "                  {\"lambda_function\": \"fn\","
    "                   \"event_types\": [\"channel_vacated\"]}]},"
    "  {\"id\": \"app-b\", \"key\": \"key-b\", \"secret\": \"secret-b\","
    "   \"enabled\": false, \"maxConnections\": 100,"
    "   \"maxEventNameLength\": 80, \"someFutureKey\": 1}]}";

static void test_load_soketi_file_two_apps(void **state)
{
    struct fixture *f = *state;
    struct hub_app *a, *b;

    assert_int_equal(load(f, NULL, write_json(f, soketi_json)), 0);
    assert_int_equal(f->cfg.n_apps, 2);
    a = &f->cfg.apps[0];
    b = &f->cfg.apps[1];
    assert_string_equal(a->id, "1234");
    assert_string_equal(a->key, "key-a");
    assert_string_equal(b->secret, "secret-b");
    assert_int_equal(a->max_connections, 0);
    assert_true(a->client_events);
    assert_int_equal(a->client_event_rate, 5);
    assert_int_equal(a->max_event_bytes, 20 * 1024);
    assert_int_equal(a->n_webhooks, 1);
    assert_false(b->enabled);
    assert_false(b->client_events);
    assert_int_equal(b->max_connections, 100);
    assert_int_equal(b->max_event_bytes, 100 * 1024);
    /* Hub-wide in soketi: every app; an app's own key wins. */
    assert_int_equal(a->max_event_name, 50);
    assert_int_equal(b->max_event_name, 80);
    assert_int_equal(a->max_presence_members, 10);
    assert_int_equal(b->max_presence_members, 10);
    assert_int_equal(f->cfg.port, 7003);
    assert_string_equal(f->cfg.log_level, "debug");
    assert_int_equal(f->cfg.drain_timeout_ms, 2000);
    /* lubdub's own keys are read in a soketi file too. */
    assert_int_equal(f->cfg.ping_interval_ms, 20000);
    warned(f);
    assert_int_equal(count(f->warned, "\"cors.credentials\" is not "
                                      "supported by lubdub"), 1);
    assert_int_equal(count(f->warned, "apps[1].someFutureKey is not "
                                      "supported by lubdub"), 1);
    assert_int_equal(count(f->warned, "AWS Lambda"), 1);
    assert_int_equal(count(f->warned, "lubdub: warning: "), 3);
    assert_int_equal(srv_config_validate(&f->cfg, f->err, sizeof(f->err)),
                     0);
}

static void test_load_soketi_file_nested_with_env(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"SOKETI_DEFAULT_APP_KEY=from-env",
                   "SOKETI_EVENT_MAX_BATCH_SIZE=3", NULL};

    assert_int_equal(load(f, env, write_json(f,
        "{\"appManager\": {\"driver\": \"array\", \"array\": {\"apps\": ["
        " {\"id\": \"a\", \"key\": \"ka\", \"secret\": \"sa\"},"
        " {\"id\": \"b\", \"key\": \"kb\", \"secret\": \"sb\"}]}},"
        " \"metrics\": {\"enabled\": true, \"port\": 9602}}")), 0);
    assert_int_equal(f->cfg.n_apps, 2);
    /* As soketi does: SOKETI_DEFAULT_APP_* set the first app. */
    assert_string_equal(f->cfg.apps[0].key, "from-env");
    assert_string_equal(f->cfg.apps[1].key, "kb");
    assert_int_equal(f->cfg.apps[0].max_batch_events, 3);
    assert_int_equal(f->cfg.apps[1].max_batch_events, 3);
    assert_int_equal(f->cfg.metrics_port, 9602);
    assert_string_equal(warned(f), "");
}

static void test_load_soketi_file_lubdub_file_untouched(void **state)
{
    struct fixture *f = *state;

    /* "port" alone says nothing: lubdub's file, read as ever. */
    assert_int_equal(load(f, NULL, write_json(f, "{\"port\": 7010}")), 0);
    assert_int_equal(f->cfg.port, 7010);
    unlink(f->path);
    /* With "apps", unknown keys stay errors. */
    assert_int_equal(load(f, NULL, write_json(f,
        "{\"debug\": true, \"apps\": [{\"id\": \"a\", \"key\": \"k\","
        " \"secret\": \"s\"}]}")), -EINVAL);
    assert_non_null(strstr(f->err, "\"debug\": unknown key"));
    assert_string_equal(warned(f), "");
}

/* Nesting deeper than soketi's options, and a key too long for a path:
 * each one warning, the rest of the file read. */
static void test_load_soketi_file_deep_and_long_keys_warned(void **state)
{
    struct fixture *f = *state;
    char json[4096];
    size_t o = 0;

    o += (size_t)snprintf(json + o, sizeof(json) - o, "{\"port\": 7011, ");
    for (int i = 0; i < 20; i++)
        o += (size_t)snprintf(json + o, sizeof(json) - o, "\"cors\": {");
    o += (size_t)snprintf(json + o, sizeof(json) - o, "\"x\": 1");
    for (int i = 0; i < 20; i++)
        json[o++] = '}';
    o += (size_t)snprintf(json + o, sizeof(json) - o, ", \"debug\": {\"");
    memset(json + o, 'k', 600);
    o += 600;
    snprintf(json + o, sizeof(json) - o, "\": 1}}");
    assert_int_equal(load(f, NULL, write_json(f, json)), 0);
    assert_int_equal(f->cfg.port, 7011);
    warned(f);
    assert_int_equal(count(f->warned, "is not supported by lubdub"), 2);
    assert_int_equal(count(f->warned, "a key of 600 bytes"), 1);
}

/* A text longer than any fixed buffer passes whole: a secret cut short
 * would fail every signature, a path cut short name another file. */
static void test_load_soketi_long_texts_pass_whole(void **state)
{
    struct fixture *f = *state;
    char secret[301], path[301], key[301], json[1200];
    char sv[340], pv[340], kv[340];
    char *env[] = {sv, pv, kv, "SOKETI_DEFAULT_APP_ID=app-1", NULL};

    memset(secret, 's', 300);
    secret[300] = '\0';
    memset(key, 'k', 300);
    key[300] = '\0';
    memset(path, 'p', 300);
    path[0] = '/';
    path[300] = '\0';
    snprintf(sv, sizeof(sv), "SOKETI_DEFAULT_APP_SECRET=%s", secret);
    snprintf(kv, sizeof(kv), "SOKETI_DEFAULT_APP_KEY=%s", key);
    snprintf(pv, sizeof(pv), "SOKETI_SSL_CERT=%s", path);
    assert_int_equal(load(f, env, NULL), 0);
    assert_string_equal(f->cfg.apps[0].secret, secret);
    assert_string_equal(f->cfg.apps[0].key, key);
    assert_string_equal(f->cfg.tls_cert, path);
    /* And a file's app. */
    snprintf(json, sizeof(json), "{\"appManager.array.apps\": [{\"id\": "
             "\"a\", \"key\": \"%s\", \"secret\": \"%s\"}]}", key, secret);
    assert_int_equal(load(f, NULL, write_json(f, json)), 0);
    assert_string_equal(f->cfg.apps[0].secret, secret);
    assert_string_equal(f->cfg.apps[0].key, key);
}

/* lubdub's own keys in a soketi file are checked for their JSON types as
 * in lubdub's file: an array is no string (it was read as the text
 * ["https://a.example"], refusing every browser). */
static void test_load_soketi_file_lubdub_keys_typed(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(load(f, NULL, write_json(f,
        "{\"debug\": false, \"allowed_origins\": "
        "[\"https://a.example\"]}")), -EINVAL);
    assert_non_null(strstr(f->err, "\"allowed_origins\": must be a string"));
    unlink(f->path);
    assert_int_equal(load(f, NULL, write_json(f,
        "{\"debug\": false, \"dev_auth_endpoint\": \"true\"}")), -EINVAL);
    assert_non_null(strstr(f->err, "\"dev_auth_endpoint\": must be true "
                                   "or false"));
    unlink(f->path);
    assert_int_equal(load(f, NULL, write_json(f,
        "{\"debug\": false, \"allowed_origins\": \"https://a.example\", "
        "\"ping_interval\": 20000, \"tls_cert\": null}")), 0);
    assert_string_equal(f->cfg.allowed_origins, "https://a.example");
    assert_int_equal(f->cfg.ping_interval_ms, 20000);
    assert_null(f->cfg.tls_cert);
}

/* A Redis username without a password: soketi (ioredis) sends no AUTH,
 * so the user is dropped with a warning; redis://user@host would send
 * AUTH user. */
static void test_load_soketi_env_redis_user_alone_dropped(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"SOKETI_ADAPTER_DRIVER=redis",
                   "SOKETI_DB_REDIS_HOST=redis.local",
                   "SOKETI_DB_REDIS_USERNAME=someuser", NULL};
    char *both[] = {"SOKETI_ADAPTER_DRIVER=redis",
                    "SOKETI_DB_REDIS_USERNAME=someuser",
                    "SOKETI_DB_REDIS_PASSWORD=pw", NULL};
    char pass[400] = "SOKETI_DB_REDIS_PASSWORD=";
    char *longpw[] = {"SOKETI_ADAPTER_DRIVER=redis", pass, NULL};

    assert_int_equal(load(f, env, NULL), 0);
    assert_string_equal(f->cfg.redis, "redis://redis.local:6379/0");
    assert_int_equal(count(warned(f), "SOKETI_DB_REDIS_USERNAME is set "
                                      "without a password; ignored"), 1);
    srv_soketi_forget_started();
    assert_int_equal(load(f, both, NULL), 0);
    assert_string_equal(f->cfg.redis, "redis://someuser:pw@127.0.0.1:6379/0");
    /* A password is never cut (lubdub's URL checks then judge it). */
    memset(pass + 25, '@', 300);
    pass[325] = '\0';
    assert_int_equal(load(f, longpw, NULL), 0);
    assert_int_equal(strlen(f->cfg.redis),
                     strlen("redis://:@127.0.0.1:6379/0") + 3 * 300);
}

/* An app of the file that is not an object says so. */
static void test_load_soketi_file_app_not_object(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(load(f, NULL, write_json(f,
        "{\"appManager.array.apps\": [\"x\"]}")), -EINVAL);
    assert_non_null(strstr(f->err, "appManager.array.apps[0] must be an "
                                   "object"));
}

/* The first load's warnings are the load's (cfg.warnings, logged by
 * main() in the configured format), not lines of their own on stderr. */
static void test_load_soketi_warnings_are_the_loads(void **state)
{
    struct fixture *f = *state;
    char *env[] = {"SOKETI_QUEUE_DRIVER=redis", NULL};

    assert_int_equal(load(f, env, write_json(f,
        "{\"debug\": false, \"cors\": {\"credentials\": true}}")), 0);
    assert_non_null(f->cfg.warnings);
    assert_non_null(strstr(f->cfg.warnings, "\"cors.credentials\" is not "
                                            "supported by lubdub"));
    assert_non_null(strstr(f->cfg.warnings, "SOKETI_QUEUE_DRIVER is not "
                                            "supported by lubdub"));
}

/* jansson's allocations, noting a failure: jansson 2.14 reports some as
 * syntax errors, which are its to report. */
static bool json_alloc_failed;

static void *json_alloc_noting(size_t n)
{
    void *p = malloc(n);

    if (!p)
        json_alloc_failed = true;
    return p;
}

/* Out of memory at each allocation of loading a soketi file: -ENOMEM
 * with an "out of memory" line, or the very apps of a clean load, and
 * nothing leaked either way. */
static void test_load_soketi_file_nomem(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"lubdub", "--config",
                    (char *)write_json(f, soketi_json), NULL};
    struct srv_config cfg;
    unsigned fails = 0;
    int rc;

    json_set_alloc_funcs(json_alloc_noting, free);
    FAIL_ALLOC_COUNTDOWN(
        {
            json_alloc_failed = false;
            srv_config_defaults(&cfg);
            f->err[0] = '\0';
            rc = srv_config_load(&cfg, 3, argv, NULL, f->err,
                                 sizeof(f->err));
        },
        {
            if (fa_failed && rc != -ENOMEM && !json_alloc_failed)
                fail_msg("allocation %ld failed: rc %d, \"%s\"", fa_step,
                         rc, f->err);
            if (rc == -ENOMEM)
                assert_non_null(strstr(f->err, "out of memory"));
            if (rc) {
                assert_true(fa_failed);
                fails++;
            } else {
                assert_int_equal(cfg.n_apps, 2);
                assert_string_equal(cfg.apps[0].id, "1234");
                assert_string_equal(cfg.apps[1].key, "key-b");
                assert_int_equal(cfg.apps[0].max_event_name, 50);
            }
            srv_config_fini(&cfg);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    assert_true(fails > 5);
}

/* docs/MIGRATING.md (or $LUBDUB_DOCS_DIR/MIGRATING.md) names every row of
 * the table: each variable (after SOKETI_) and each app key, in
 * backticks, so that the guide cannot fall behind the code. */
static void test_load_soketi_docs_name_every_row(void **state)
{
    const struct srv_sk_row *rows;
    size_t n = srv_soketi_map_rows(&rows);
    const char *dir = getenv("LUBDUB_DOCS_DIR");
    char path[512], want[128];
    char *docs;
    FILE *fp;
    long len;

    (void)state;
    snprintf(path, sizeof(path), "%s/MIGRATING.md",
             dir ? dir : LUBDUB_SOURCE_DIR "/docs");
    fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    len = ftell(fp);
    rewind(fp);
    docs = calloc(1, (size_t)len + 1);
    assert_non_null(docs);
    assert_int_equal(fread(docs, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "`%s`",
                 rows[i].env ? rows[i].env : rows[i].path);
        if (!strstr(docs, want))
            fail_msg("%s does not name %s", path, want);
    }
    free(docs);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_load_soketi_env_default_app_port_debug),
        T(test_load_soketi_env_value_conversions),
        T(test_load_soketi_env_redis_and_metrics),
        T(test_load_soketi_env_lubdub_wins_one_warning),
        T(test_load_soketi_env_unmapped_warned_once),
        T(test_load_soketi_env_bad_value_is_error),
        T(test_load_soketi_file_two_apps),
        T(test_load_soketi_file_nested_with_env),
        T(test_load_soketi_file_lubdub_file_untouched),
        T(test_load_soketi_file_deep_and_long_keys_warned),
        T(test_load_soketi_file_nomem),
        T(test_load_soketi_long_texts_pass_whole),
        T(test_load_soketi_file_lubdub_keys_typed),
        T(test_load_soketi_env_redis_user_alone_dropped),
        T(test_load_soketi_file_app_not_object),
        T(test_load_soketi_warnings_are_the_loads),
        T(test_load_soketi_docs_name_every_row),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
