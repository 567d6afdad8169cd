/*
 * tests/unit/test_config_keys.c - server/config/config_keys.c and its
 * checks in server/config/validate.c: an app's "keys" (key rotation, issue
 * 36 item 8) as the config file gives them, the first pair becoming the
 * app's key and secret and the others its more_keys in order, a pair's
 * secret from a file, "keys" refused beside "key", "secret" or
 * "secret_file" with one line naming the file, the app and both keys,
 * every bad value refused with one line, duplicate keys (within an app and
 * across apps) and the default secret on a public bind refused, a
 * reload's comparison seeing a change of the pairs (hub_app_equal), and
 * every allocation failing in turn.
 *
 * Files are given as text (srv_config_load_buffer), named "k.json".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "hub/app/app.h"
#include "server/config/config.h"
#include "config_fixture.h"

/* Load the file text json, then validate; the config is reset first. */
static int load_text(struct fixture *f, const char *json)
{
    int rc;

    srv_config_fini(&f->cfg);
    srv_config_defaults(&f->cfg);
    f->err[0] = '\0';
    rc = srv_config_load_buffer(&f->cfg, json, strlen(json), "k.json",
                                f->err, sizeof(f->err));
    return rc ? rc : srv_config_validate(&f->cfg, f->err, sizeof(f->err));
}

/* A file of one app (id "a1") whose other keys are rest (after "id"). */
static int load_app(struct fixture *f, const char *rest)
{
    char json[8192];

    snprintf(json, sizeof(json), "{\"apps\": [{\"id\": \"a1\", %s}]}", rest);
    return load_text(f, json);
}

/* rest refused with -EINVAL and one line holding want and b (b may be
 * NULL) and naming the file. */
static void expect_refused(struct fixture *f, const char *rest,
                           const char *want, const char *b)
{
    int rc = load_app(f, rest);

    if (rc != -EINVAL)
        fail_msg("%s: rc %d, \"%s\"", rest, rc, f->err);
    if (!strstr(f->err, want) || (b && !strstr(f->err, b)) ||
        !strstr(f->err, "k.json"))
        fail_msg("%s: error \"%s\" lacks \"%s\", \"%s\" or the file", rest,
                 f->err, want, b ? b : "");
    assert_null(strchr(f->err, '\n'));
}

/* A secret file holding text; its path in path (64 bytes). */
static void secret_file(char *path, const char *text)
{
    int fd;

    snprintf(path, 64, "/tmp/lubdub-keys-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* Three pairs, the middle one's secret from a file (its newline
 * dropped): the first is key and secret, the others more_keys in order,
 * and each key finds its pair. */
static void test_config_keys_pairs_in_order(void **state)
{
    struct fixture *f = *state;
    const struct hub_app *a;
    char sec[64], rest[512];

    secret_file(sec, "from-file\n");
    snprintf(rest, sizeof(rest), "\"keys\": [{\"key\": \"new\", \"secret\": "
             "\"s-new\"}, {\"key\": \"mid\", \"secret_file\": \"%s\"}, "
             "{\"key\": \"old\", \"secret\": \"s-old\"}]", sec);
    assert_int_equal(load_app(f, rest), 0);
    unlink(sec);
    a = &f->cfg.apps[0];
    assert_string_equal(a->key, "new");
    assert_string_equal(a->secret, "s-new");
    assert_int_equal(a->n_more_keys, 2);
    assert_int_equal(hub_app_n_keys(a), 3);
    assert_string_equal(hub_app_key_at(a, 1), "mid");
    assert_string_equal(hub_app_secret_at(a, 1), "from-file");
    assert_string_equal(hub_app_key_at(a, 2), "old");
    assert_string_equal(hub_app_secret_at(a, 2), "s-old");
    assert_null(hub_app_key_at(a, 3));
    assert_null(hub_app_secret_at(a, 3));
    assert_int_equal(hub_app_key_find(a, "old", 3), 2);
    assert_int_equal(hub_app_key_find(a, "new", 3), 0);
    assert_int_equal(hub_app_key_find(a, "olde", 3), 2); /* not NUL-ended */
    assert_int_equal(hub_app_key_find(a, "ol", 2), -1);
    assert_int_equal(hub_app_key_find(a, NULL, 0), -1);
    /* The configuration's own scan finds the app by any key. */
    assert_ptr_equal(hub_app_find_by_key(f->cfg.apps, f->cfg.n_apps, "mid", 3),
                     a);
    /* One pair is the single-pair app it always was; up to the bound. */
    assert_int_equal(load_app(f, "\"keys\": [{\"key\": \"k\", \"secret\": "
                                 "\"s\"}]"), 0);
    assert_int_equal(hub_app_n_keys(&f->cfg.apps[0]), 1);
    assert_null(f->cfg.apps[0].more_keys);
    {
        char many[4096];
        size_t o = (size_t)snprintf(many, sizeof(many), "\"keys\": [");

        for (unsigned i = 0; i < HUB_APP_KEYS_MAX; i++)
            o += (size_t)snprintf(many + o, sizeof(many) - o,
                                  "%s{\"key\": \"k%u\", \"secret\": \"s%u\"}",
                                  i ? ", " : "", i, i);
        snprintf(many + o, sizeof(many) - o, "]");
        assert_int_equal(load_app(f, many), 0);
        assert_int_equal(hub_app_n_keys(&f->cfg.apps[0]), HUB_APP_KEYS_MAX);
        /* One more is refused, naming the bound. */
        snprintf(many + o, sizeof(many) - o,
                 ", {\"key\": \"k99\", \"secret\": \"s\"}]");
        expect_refused(f, many, "apps[0].keys (app \"a1\")",
                       "1 to 16 key/secret pairs");
    }
}

/* "keys" beside "key", "secret" or "secret_file": one line naming the
 * file, the app (place and id) and both keys. */
static void test_config_keys_exclusive_with_key_and_secret(void **state)
{
    struct fixture *f = *state;
    static const char pairs[] =
        "\"keys\": [{\"key\": \"k\", \"secret\": \"s\"}]";
    char rest[256];

    snprintf(rest, sizeof(rest), "%s, \"key\": \"k0\"", pairs);
    expect_refused(f, rest, "k.json: apps[0] (app \"a1\"): \"keys\" and "
                            "\"key\" are both given", NULL);
    snprintf(rest, sizeof(rest), "\"secret\": \"s0\", %s", pairs);
    expect_refused(f, rest, "apps[0] (app \"a1\"): \"keys\" and \"secret\" "
                            "are both given", NULL);
    snprintf(rest, sizeof(rest), "%s, \"secret_file\": \"/nonexistent\"",
             pairs);
    expect_refused(f, rest, "\"keys\" and \"secret_file\" are both given",
                   NULL);
    /* Without "keys", "key" and a secret are still required. */
    expect_refused(f, "\"secret\": \"s\"", "apps[0]: \"key\" is missing",
                   NULL);
}

/* Each bad value: one line naming the pair and what is wrong. */
static void test_config_keys_bad_values_refused(void **state)
{
    struct fixture *f = *state;

    expect_refused(f, "\"keys\": {\"key\": \"k\"}", "apps[0].keys (app "
                   "\"a1\"): must be an array", NULL);
    expect_refused(f, "\"keys\": []", "apps[0].keys (app \"a1\")",
                   "1 to 16");
    expect_refused(f, "\"keys\": [\"k:s\"]", "apps[0].keys[0] (app \"a1\")",
                   "must be an object");
    expect_refused(f, "\"keys\": [{\"secret\": \"s\"}]",
                   "apps[0].keys[0] (app \"a1\").key: is missing", NULL);
    expect_refused(f, "\"keys\": [{\"key\": \"\", \"secret\": \"s\"}]",
                   "keys[0] (app \"a1\").key: must be a non-empty string",
                   NULL);
    expect_refused(f, "\"keys\": [{\"key\": \"k\", \"secret\": \"s\"}, "
                      "{\"key\": \"k2\"}]",
                   "keys[1] (app \"a1\"): give one of \"secret\" and "
                   "\"secret_file\"", NULL);
    expect_refused(f, "\"keys\": [{\"key\": \"k\", \"secret\": \"s\", "
                      "\"secret_file\": \"/x\"}]", "keys[0] (app \"a1\")",
                   "not both");
    expect_refused(f, "\"keys\": [{\"key\": \"k\", \"secret\": 5}]",
                   "keys[0] (app \"a1\").secret: must be a non-empty string",
                   NULL);
    expect_refused(f, "\"keys\": [{\"key\": \"k\", \"secret\": \"\"}]",
                   ".secret: must be a non-empty string", NULL);
    expect_refused(f, "\"keys\": [{\"key\": \"k\", \"secret\": \"s\", "
                      "\"sekret\": \"t\"}]",
                   "keys[0] (app \"a1\").sekret: unknown key", NULL);
    expect_refused(f, "\"keys\": [{\"key\": \"k\", \"secret_file\": "
                      "\"/nonexistent/k\"}]",
                   "keys[0] (app \"a1\").secret_file: cannot read "
                   "\"/nonexistent/k\"", NULL);
}

/* A key names one app and one pair: the same key twice in an app, or in
 * two apps (as a first or a later pair), is refused. */
static void test_config_keys_duplicates_refused(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(load_text(f, "{\"apps\": [{\"id\": \"a1\", \"keys\": "
                                  "[{\"key\": \"k1\", \"secret\": \"s\"}, "
                                  "{\"key\": \"k1\", \"secret\": \"t\"}]}]}"),
                     -EINVAL);
    assert_non_null(strstr(f->err, "apps[0] (id \"a1\"): key \"k1\" is "
                                    "already used by keys[0] of the same "
                                    "app"));
    assert_int_equal(load_text(f, "{\"apps\": [{\"id\": \"a1\", \"keys\": "
                                  "[{\"key\": \"k1\", \"secret\": \"s\"}, "
                                  "{\"key\": \"k2\", \"secret\": \"t\"}]}, "
                                  "{\"id\": \"a2\", \"key\": \"k2\", "
                                  "\"secret\": \"u\"}]}"),
                     -EINVAL);
    assert_non_null(strstr(f->err, "apps[1] (id \"a2\"): key \"k2\" is "
                                    "already used by apps[0] (id \"a1\")"));
    assert_int_equal(load_text(f, "{\"apps\": [{\"id\": \"a1\", \"key\": "
                                  "\"k1\", \"secret\": \"s\"}, {\"id\": "
                                  "\"a2\", \"keys\": [{\"key\": \"k2\", "
                                  "\"secret\": \"t\"}, {\"key\": \"k1\", "
                                  "\"secret\": \"u\"}]}]}"),
                     -EINVAL);
    assert_non_null(strstr(f->err, "apps[1] (id \"a2\"): key \"k1\" is "
                                    "already used by apps[0] (id \"a1\")"));
    /* Distinct keys across two apps of several pairs each are fine. */
    assert_int_equal(load_text(f, "{\"apps\": [{\"id\": \"a1\", \"keys\": "
                                  "[{\"key\": \"k1\", \"secret\": \"s\"}, "
                                  "{\"key\": \"k2\", \"secret\": \"s\"}]}, "
                                  "{\"id\": \"a2\", \"keys\": [{\"key\": "
                                  "\"k3\", \"secret\": \"t\"}, {\"key\": "
                                  "\"k4\", \"secret\": \"t\"}]}]}"),
                     0);
}

/* The default secret is refused on a public bind in any pair, not only
 * the first. */
static void test_config_keys_default_secret_refused(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(load_text(f, "{\"bind\": \"0.0.0.0\", \"apps\": [{"
                                  "\"id\": \"a1\", \"keys\": [{\"key\": "
                                  "\"k1\", \"secret\": \"real\"}, {\"key\": "
                                  "\"k2\", \"secret\": \"app-secret\"}]}]}"),
                     -EINVAL);
    assert_non_null(strstr(f->err, "app \"a1\" uses the default secret"));
    assert_int_equal(load_text(f, "{\"bind\": \"127.0.0.1\", \"apps\": [{"
                                  "\"id\": \"a1\", \"keys\": [{\"key\": "
                                  "\"k1\", \"secret\": \"real\"}, {\"key\": "
                                  "\"k2\", \"secret\": \"app-secret\"}]}]}"),
                     0);
}

/* A reload tells a changed app by hub_app_equal: the pairs' keys,
 * secrets, number and order all count; hub_app_dup copies them. */
static void test_config_keys_reload_sees_pair_changes(void **state)
{
    struct fixture *f = *state;
    static const char base[] =
        "{\"apps\": [{\"id\": \"a1\", \"keys\": [{\"key\": \"k1\", "
        "\"secret\": \"s1\"}, {\"key\": \"k2\", \"secret\": \"s2\"}]}]}";
    static const char *const changed[] = {
        /* The second secret, the second key, a third pair, one pair
         * gone, the order. */
        "{\"apps\": [{\"id\": \"a1\", \"keys\": [{\"key\": \"k1\", "
        "\"secret\": \"s1\"}, {\"key\": \"k2\", \"secret\": \"s3\"}]}]}",
        "{\"apps\": [{\"id\": \"a1\", \"keys\": [{\"key\": \"k1\", "
        "\"secret\": \"s1\"}, {\"key\": \"k3\", \"secret\": \"s2\"}]}]}",
        "{\"apps\": [{\"id\": \"a1\", \"keys\": [{\"key\": \"k1\", "
        "\"secret\": \"s1\"}, {\"key\": \"k2\", \"secret\": \"s2\"}, "
        "{\"key\": \"k3\", \"secret\": \"s3\"}]}]}",
        "{\"apps\": [{\"id\": \"a1\", \"key\": \"k1\", \"secret\": "
        "\"s1\"}]}",
        "{\"apps\": [{\"id\": \"a1\", \"keys\": [{\"key\": \"k2\", "
        "\"secret\": \"s2\"}, {\"key\": \"k1\", \"secret\": \"s1\"}]}]}",
    };
    struct hub_app *c;

    assert_int_equal(load_text(f, base), 0);
    c = hub_app_dup(&f->cfg.apps[0]);
    assert_non_null(c);
    assert_true(hub_app_equal(c, &f->cfg.apps[0]));
    assert_int_equal(c->n_more_keys, 1);
    assert_ptr_not_equal(c->more_keys, f->cfg.apps[0].more_keys);
    assert_ptr_not_equal(c->more_keys[0].secret,
                         f->cfg.apps[0].more_keys[0].secret);
    assert_string_equal(hub_app_secret_at(c, 1), "s2");
    for (size_t i = 0; i < sizeof(changed) / sizeof(changed[0]); i++) {
        assert_int_equal(load_text(f, changed[i]), 0);
        if (hub_app_equal(c, &f->cfg.apps[0]))
            fail_msg("change %zu not seen", i);
    }
    assert_int_equal(load_text(f, base), 0);
    assert_true(hub_app_equal(c, &f->cfg.apps[0]));
    hub_app_free(c);
}

/* The file test_config_keys_out_of_memory loads: three pairs. */
static const char oom_json[] =
    "{\"apps\": [{\"id\": \"a1\", \"keys\": [{\"key\": \"k1\", "
    "\"secret\": \"s1\"}, {\"key\": \"k2\", \"secret\": \"s2\"}, "
    "{\"key\": \"k3\", \"secret\": \"s3\"}]}]}";

/* One run's outcome, the allocator disarmed: a load that failed did so
 * with "out of memory" (when -ENOMEM) because an allocation failed (1);
 * a load that met no failure holds the three pairs, and its copy c (NULL
 * when hub_app_dup failed) equals it (0). */
static int oom_outcome(int rc, const char *err, bool failed,
                       const struct hub_app *c, const struct hub_app *app)
{
    if (rc == -ENOMEM)
        assert_non_null(strstr(err, "out of memory"));
    if (rc || !c) {
        /* The load's own failure, hub_app_dup's, or jansson's. */
        assert_true(failed);
        return rc ? 1 : 0;
    }
    if (!failed) {
        assert_int_equal(hub_app_n_keys(app), 3);
        assert_string_equal(hub_app_secret_at(app, 2), "s3");
        assert_true(hub_app_equal(c, app));
    }
    return 0;
}

/* Every allocation of a load with three pairs (and of the app's copy)
 * failing in turn: -ENOMEM with "out of memory", or a whole result;
 * nothing leaked either way. */
static void test_config_keys_out_of_memory(void **state)
{
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
            rc = srv_config_load_buffer(&cfg, oom_json, strlen(oom_json),
                                        "k.json", err, sizeof(err));
            c = rc ? NULL : hub_app_dup(&cfg.apps[0]);
        },
        {
            fails += (unsigned)oom_outcome(rc, err, fa_failed, c,
                                           &cfg.apps[0]);
            hub_app_free(c);
            srv_config_fini(&cfg);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    assert_true(fails > 3);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_config_keys_pairs_in_order),
        T(test_config_keys_exclusive_with_key_and_secret),
        T(test_config_keys_bad_values_refused),
        T(test_config_keys_duplicates_refused),
        T(test_config_keys_default_secret_refused),
        T(test_config_keys_reload_sees_pair_changes),
        cmocka_unit_test(test_config_keys_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
