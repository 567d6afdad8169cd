/*
 * tests/unit/test_config_history.c - server/config/config_history.c: an
 * app's "history" key (issue 35) as the config file gives it (an object,
 * true, false, null, absent), each bad value refused with one line naming
 * the file, the app and the key, a reload's comparison seeing a change
 * (hub_app_equal), every allocation failing in turn, and the hub-wide
 * --history-max-bytes from each source.
 *
 * Files are given as text (srv_config_load_buffer), named "h.json".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "hub/app/app.h"
#include "server/config/config.h"
#include "config_fixture.h"

/* Load a file of one app (id "a1") whose "history" is history (NULL:
 * no such key), then validate; the config is reset first. */
static int load_app(struct fixture *f, const char *history)
{
    char json[2048];
    int rc;

    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    f->err[0] = '\0';
    if (history)
        snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"a1\", "
                 "\"key\": \"k1\", \"secret\": \"s1\", \"history\": %s}]}",
                 history);
    else
        snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"a1\", "
                 "\"key\": \"k1\", \"secret\": \"s1\"}]}");
    rc = srv_config_load_buffer(&f->cfg, json, strlen(json), "h.json",
                                f->err, sizeof(f->err));
    return rc ? rc : srv_config_validate(&f->cfg, f->err, sizeof(f->err));
}

/* history refused with -EINVAL and one line holding want and naming the
 * file and the app. */
static void expect_refused(struct fixture *f, const char *history,
                           const char *want)
{
    int rc = load_app(f, history);

    if (rc != -EINVAL)
        fail_msg("%s: rc %d, \"%s\"", history, rc, f->err);
    if (!strstr(f->err, want) || !strstr(f->err, "h.json: apps[0].history") ||
        !strstr(f->err, "(app \"a1\")"))
        fail_msg("%s: error \"%s\" lacks \"%s\", the file or the app",
                 history, f->err, want);
    assert_null(strchr(f->err, '\n'));
}

static void test_config_history_object_sets_every_key(void **state)
{
    struct fixture *f = *state;
    const struct hub_app *a;

    assert_int_equal(load_app(f, "{\"ttl\": \"90s\", \"size\": 500, "
                                 "\"channels\": [\"orders-*\", \"news\"], "
                                 "\"max_bytes\": \"8MiB\"}"), 0);
    a = &f->cfg.apps[0];
    assert_true(a->history);
    assert_int_equal(a->history_ttl_ms, 90000);
    assert_int_equal(a->history_size, 500);
    assert_int_equal(a->history_max_bytes, 8u << 20);
    assert_int_equal(a->n_history_channels, 2);
    assert_string_equal(a->history_channels[0], "orders-*");
    assert_string_equal(a->history_channels[1], "news");
    assert_true(hub_app_history_on(a, "orders-1", 8));
    assert_true(hub_app_history_on(a, "news", 4));
    assert_false(hub_app_history_on(a, "sport", 5));
    /* Numbers in the option syntax both ways: ms, events and bytes. */
    assert_int_equal(load_app(f, "{\"ttl\": 1000, \"size\": \"100000\", "
                                 "\"max_bytes\": 0}"), 0);
    a = &f->cfg.apps[0];
    assert_int_equal(a->history_ttl_ms, 1000);
    assert_int_equal(a->history_size, 100000);
    assert_int_equal(a->history_max_bytes, 0);
    assert_int_equal(a->n_history_channels, 0);
    assert_int_equal(load_app(f, "{\"ttl\": \"24h\", \"size\": 1, "
                                 "\"max_bytes\": \"16GiB\"}"), 0);
    assert_int_equal(f->cfg.apps[0].history_ttl_ms, 86400000);
    assert_int_equal(f->cfg.apps[0].history_max_bytes, UINT64_C(16) << 30);
}

/* true: on with the defaults; {} the same; the defaults hold every
 * channel. */
static void test_config_history_true_takes_defaults(void **state)
{
    static const char *const on[] = {"true", "{}"};
    struct fixture *f = *state;

    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        const struct hub_app *a;

        assert_int_equal(load_app(f, on[i]), 0);
        a = &f->cfg.apps[0];
        assert_true(a->history);
        assert_int_equal(a->history_ttl_ms, 120000);
        assert_int_equal(a->history_size, 1000);
        assert_int_equal(a->history_max_bytes, 0);
        assert_int_equal(a->n_history_channels, 0);
        assert_null(a->history_channels);
        assert_true(hub_app_history_on(a, "presence-room", 13));
        assert_true(hub_app_history_on(a, "cache-x", 7));
    }
}

static void test_config_history_false_null_absent_off(void **state)
{
    static const char *const off[] = {"false", "null", NULL};
    struct fixture *f = *state;

    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
        assert_int_equal(load_app(f, off[i]), 0);
        assert_false(f->cfg.apps[0].history);
        assert_int_equal(f->cfg.apps[0].history_ttl_ms, 120000);
        assert_int_equal(f->cfg.apps[0].history_size, 1000);
        assert_false(hub_app_history_on(&f->cfg.apps[0], "news", 4));
    }
    /* The default app (no "apps") keeps none either. */
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_false(f->cfg.apps[0].history);
}

/* One refused value of a history key and the words its error must hold. */
struct refusal {
    const char *value;
    const char *want;
};

/* {"key": value} refused for each case, the error naming the key. */
static void refuse_each(struct fixture *f, const char *key,
                        const struct refusal *c, size_t n)
{
    char history[256], named[64];

    snprintf(named, sizeof(named), "history.%s (app \"a1\"): ", key);
    for (size_t i = 0; i < n; i++) {
        snprintf(history, sizeof(history), "{\"%s\": %s}", key,
                 c[i].value);
        expect_refused(f, history, named);
        expect_refused(f, history, c[i].want);
    }
}

static void test_config_history_bad_ttl_refused(void **state)
{
    /* A bare number is milliseconds, as for every duration: 120 is too
     * short. */
    static const struct refusal ttl[] = {
        {"\"0s\"", ": 0s is out of range 1s..24h"},
        {"\"999ms\"", "out of range 1s..24h"},
        {"\"25h\"", "out of range 1s..24h"},
        {"120", "120 is out of range 1s..24h"},
        {"\"2d\"", "\"2d\" is not a duration"},
        {"\"-1s\"", "is negative"},
        {"1.5", "must be a whole number or a string (e.g. \"120s\")"},
        {"true", "must be a whole number or a string"},
        {"null", "must be a whole number or a string"},
    };

    refuse_each(*state, "ttl", ttl, sizeof(ttl) / sizeof(ttl[0]));
}

/* size, and max_bytes with it: the other numbers. */
static void test_config_history_bad_size_refused(void **state)
{
    static const struct refusal size[] = {
        {"0", "0 is out of range 1..100000"},
        {"100001", "out of range 1..100000"},
        {"-5", "is negative"},
        {"\"1k\"", "is not a whole number"},
        {"[1]", "must be a whole number or a string (e.g. 1000)"},
    }, max_bytes[] = {
        {"\"17GiB\"", "17GiB is out of range 0..16GiB"},
        {"\"lots\"", "is not a size"},
        {"{}", "must be a whole number or a string (e.g. \"8MiB\")"},
    };

    refuse_each(*state, "size", size, sizeof(size) / sizeof(size[0]));
    refuse_each(*state, "max_bytes", max_bytes,
                sizeof(max_bytes) / sizeof(max_bytes[0]));
}

static void test_config_history_bad_channels_refused(void **state)
{
    struct fixture *f = *state;
    char json[1400], *p;

    expect_refused(f, "{\"channels\": []}", "history.channels (app");
    expect_refused(f, "{\"channels\": []}", "must be an array of 1 to 64");
    expect_refused(f, "{\"channels\": \"news\"}", "must be an array");
    expect_refused(f, "{\"channels\": {}}", "must be an array");
    expect_refused(f, "{\"channels\": [\"news\", 7]}",
                   "history.channels[1] (app \"a1\"): must be a string");
    expect_refused(f, "{\"channels\": [\"\"]}",
                   "channels[0] (app \"a1\"): 0 bytes; a pattern is 1 to 200");
    expect_refused(f, "{\"channels\": [\"a*b\"]}",
                   "only a trailing '*' means a prefix");
    expect_refused(f, "{\"channels\": [\"**\"]}", "is not a channel name");
    expect_refused(f, "{\"channels\": [\"a b\"]}", "is not a channel name");
    expect_refused(f, "{\"channels\": [\"#server-to-user-1\"]}",
                   "keep no history");
    expect_refused(f, "{\"channels\": [\"#*\"]}", "keep no history");
    /* 201 bytes. */
    p = json + snprintf(json, sizeof(json), "{\"channels\": [\"");
    memset(p, 'c', 201);
    snprintf(p + 201, 8, "\"]}");
    expect_refused(f, json, "201 bytes; a pattern is 1 to 200");
    /* 200 bytes, and 199 with a '*', are fine. */
    p[200] = '\0';
    strcat(json, "\", \"");
    p = json + strlen(json);
    memset(p, 'd', 199);
    snprintf(p + 199, 8, "*\"]}");
    assert_int_equal(load_app(f, json), 0);
    assert_int_equal(f->cfg.apps[0].n_history_channels, 2);
    /* 65 patterns. */
    p = json + snprintf(json, sizeof(json), "{\"channels\": [");
    for (int i = 0; i < 65; i++)
        p += sprintf(p, "%s\"c%d\"", i ? ", " : "", i);
    strcpy(p, "]}");
    expect_refused(f, json, "must be an array of 1 to 64");
    /* 64 are fine. */
    strcpy(strstr(json, ", \"c64\""), "]}");
    assert_int_equal(load_app(f, json), 0);
    assert_int_equal(f->cfg.apps[0].n_history_channels, 64);
}

static void test_config_history_unknown_key_refused(void **state)
{
    struct fixture *f = *state;

    expect_refused(f, "{\"tll\": \"1s\"}",
                   "history.tll (app \"a1\"): unknown key (history takes "
                   "ttl, size, channels, max_bytes)");
    expect_refused(f, "{\"ttl\": \"1s\", \"Size\": 5}", "history.Size");
    expect_refused(f, "\"on\"", "must be true, false or an object");
    expect_refused(f, "1", "must be true, false or an object");
    expect_refused(f, "[\"news\"]", "must be true, false or an object");
}

/* The app is named by its id wherever the id stands in its object. */
static void test_config_history_error_names_app_given_later(void **state)
{
    static const char json[] = "{\"apps\": [{\"history\": {\"size\": 0}, "
                               "\"key\": \"k\", \"secret\": \"s\", "
                               "\"id\": \"late\"}]}";
    struct fixture *f = *state;

    assert_int_equal(srv_config_load_buffer(&f->cfg, json, strlen(json),
                                            "h.json", f->err,
                                            sizeof(f->err)), -EINVAL);
    assert_non_null(strstr(f->err, "h.json: apps[0].history.size "
                                   "(app \"late\"): 0 is out of range"));
}

/*
 * A SIGHUP reload tells changed apps by hub_app_equal() on hub_app_dup()
 * copies: a change of any history key is a change, the same history is
 * none, and the copy owns its own list.
 */
static void test_config_history_reload_sees_change(void **state)
{
    static const char *const variants[] = {
        NULL,
        "true",
        "{\"ttl\": \"60s\"}",
        "{\"size\": 10}",
        "{\"max_bytes\": \"1MiB\"}",
        "{\"channels\": [\"news\"]}",
        "{\"channels\": [\"news*\"]}",
        "{\"channels\": [\"news\", \"sport\"]}",
        "{\"channels\": [\"sport\", \"news\"]}",
    };
    enum { N = sizeof(variants) / sizeof(variants[0]) };
    struct fixture *f = *state;
    struct hub_app *copy[N];

    for (size_t i = 0; i < N; i++) {
        assert_int_equal(load_app(f, variants[i]), 0);
        copy[i] = hub_app_dup(&f->cfg.apps[0]);
        assert_non_null(copy[i]);
        assert_true(hub_app_equal(copy[i], &f->cfg.apps[0]));
        if (f->cfg.apps[0].n_history_channels)
            assert_ptr_not_equal(copy[i]->history_channels,
                                 f->cfg.apps[0].history_channels);
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            if ((i == j) != hub_app_equal(copy[i], copy[j]))
                fail_msg("%s against %s: equal is %d",
                         variants[i] ? variants[i] : "(absent)",
                         variants[j] ? variants[j] : "(absent)",
                         hub_app_equal(copy[i], copy[j]));
    /* "true" and the object of every default are the same history. */
    assert_int_equal(load_app(f, "{\"ttl\": \"120s\", \"size\": 1000}"), 0);
    assert_true(hub_app_equal(copy[1], &f->cfg.apps[0]));
    /* The copies outlive the configuration they came from. */
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_string_equal(copy[8]->history_channels[1], "news");
    for (size_t i = 0; i < N; i++)
        hub_app_free(copy[i]);
}

/* Every allocation of a load with a history list failing in turn: -ENOMEM
 * with "out of memory" (or jansson's own error), nothing leaked, and the
 * full list once nothing fails. */
static void test_config_history_out_of_memory(void **state)
{
    static const char json[] =
        "{\"apps\": [{\"id\": \"a1\", \"key\": \"k\", \"secret\": \"s\", "
        "\"history\": {\"channels\": [\"a*\", \"b\", \"c-*\"], "
        "\"ttl\": \"5s\"}}]}";
    struct srv_config cfg;
    char err[512];
    unsigned fails = 0;
    struct hub_app *c;
    int rc;

    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            srv_config_defaults(&cfg);
            err[0] = '\0';
            rc = srv_config_load_buffer(&cfg, json, strlen(json), "h.json",
                                        err, sizeof(err));
            c = rc ? NULL : hub_app_dup(&cfg.apps[0]);
        },
        {
            if (rc == -ENOMEM)
                assert_non_null(strstr(err, "out of memory"));
            if (rc) {
                assert_true(fa_failed);
                fails++;
            } else if (c && !fa_failed) {
                assert_int_equal(c->n_history_channels, 3);
                assert_string_equal(c->history_channels[2], "c-*");
                assert_true(hub_app_equal(c, &cfg.apps[0]));
            } else {
                /* hub_app_dup's own failure, or jansson's (which may
                 * parse on with a short key): nothing may leak. */
                assert_true(fa_failed);
            }
            if (!rc && !fa_failed) {
                assert_int_equal(cfg.apps[0].n_history_channels, 3);
                assert_int_equal(cfg.apps[0].history_ttl_ms, 5000);
            }
            hub_app_free(c);
            srv_config_fini(&cfg);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    assert_true(fails > 3);
}

/* --history-max-bytes: 64MiB by default, from the file, the environment
 * and the flag, within 64KiB..16GiB. */
static void test_config_history_max_bytes_option(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"lubdub", "--history-max-bytes", "1GiB", NULL};
    char *envp[] = {"LUBDUB_HISTORY_MAX_BYTES=128MiB", NULL};
    char *argv_low[] = {"lubdub", "--history-max-bytes=64000", NULL};
    char *argv_high[] = {"lubdub", "--history-max-bytes", "17GiB", NULL};
    static const char json[] = "{\"history_max_bytes\": \"96MiB\"}";

    assert_int_equal(f->cfg.history_max_bytes, UINT64_C(64) << 20);
    assert_int_equal(srv_config_load_buffer(&f->cfg, json, strlen(json),
                                            "h.json", f->err,
                                            sizeof(f->err)), 0);
    assert_int_equal(f->cfg.history_max_bytes, UINT64_C(96) << 20);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(srv_config_load(&f->cfg, 1, argv, envp, f->err,
                                     sizeof(f->err)), 0);
    assert_int_equal(f->cfg.history_max_bytes, UINT64_C(128) << 20);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(srv_config_load(&f->cfg, 3, argv, envp, f->err,
                                     sizeof(f->err)), 0);
    assert_int_equal(f->cfg.history_max_bytes, UINT64_C(1) << 30);
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(srv_config_load(&f->cfg, 2, argv_low, NULL, f->err,
                                     sizeof(f->err)), -EINVAL);
    assert_non_null(strstr(f->err, "--history-max-bytes: 64000 is out of "
                                   "range 64KiB..16GiB"));
    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(srv_config_load(&f->cfg, 3, argv_high, NULL, f->err,
                                     sizeof(f->err)), -EINVAL);
    assert_non_null(strstr(f->err, "out of range 64KiB..16GiB"));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_config_history_object_sets_every_key),
        T(test_config_history_true_takes_defaults),
        T(test_config_history_false_null_absent_off),
        T(test_config_history_bad_ttl_refused),
        T(test_config_history_bad_size_refused),
        T(test_config_history_bad_channels_refused),
        T(test_config_history_unknown_key_refused),
        T(test_config_history_error_names_app_given_later),
        T(test_config_history_reload_sees_change),
        T(test_config_history_out_of_memory),
        T(test_config_history_max_bytes_option),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
