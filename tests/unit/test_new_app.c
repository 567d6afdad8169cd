/*
 * tests/unit/test_new_app.c - --new-app (server/config/new_app.h): the
 * id, key and secret have Pusher's shapes, two draws differ, and what it
 * prints is a JSON object that loads as an app of a config file and
 * passes the checks on a public bind (its secret is no default).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/config/config.h"
#include "server/config/new_app.h"

static bool all_of(const char *s, const char *set)
{
    return s[strspn(s, set)] == '\0';
}

static void test_new_app_shapes(void **state)
{
    struct srv_new_app a;

    (void)state;
    assert_int_equal(srv_new_app_make(&a), 0);
    assert_int_equal(strlen(a.id), SRV_NEW_APP_ID_LEN);
    assert_true(all_of(a.id, "0123456789"));
    assert_true(a.id[0] != '0');
    assert_int_equal(strlen(a.key), 20);
    assert_true(all_of(a.key, "0123456789abcdef"));
    assert_true(strlen(a.secret) >= 20);
    assert_int_equal(strlen(a.secret), SRV_NEW_APP_SECRET_LEN);
    assert_true(all_of(a.secret, "0123456789abcdef"));
    assert_int_equal(hub_app_id_check(a.id, NULL), 0);
}

static void test_new_app_draws_differ(void **state)
{
    struct srv_new_app a, b;

    (void)state;
    assert_int_equal(srv_new_app_make(&a), 0);
    assert_int_equal(srv_new_app_make(&b), 0);
    /* 80 and 128 bits: equal only if the source is broken. */
    assert_string_not_equal(a.key, b.key);
    assert_string_not_equal(a.secret, b.secret);
    assert_string_not_equal(a.key, a.secret);
}

static void test_new_app_print_loads_as_app(void **state)
{
    struct srv_new_app a;
    struct srv_config cfg;
    char *text = NULL, *file, err[512];
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    json_t *obj;

    (void)state;
    assert_non_null(out);
    assert_int_equal(srv_new_app_make(&a), 0);
    srv_new_app_print(out, &a);
    fclose(out);
    /* A JSON object of exactly the three keys. */
    obj = json_loads(text, 0, NULL);
    assert_non_null(obj);
    assert_int_equal(json_object_size(obj), 3);
    assert_string_equal(json_string_value(json_object_get(obj, "id")), a.id);
    assert_string_equal(json_string_value(json_object_get(obj, "key")),
                        a.key);
    assert_string_equal(json_string_value(json_object_get(obj, "secret")),
                        a.secret);
    json_decref(obj);
    /* Pasted into "apps" as printed, on a public bind. */
    assert_true(asprintf(&file, "{\"bind\": \"0.0.0.0\", \"apps\": [%s]}",
                         text) > 0);
    srv_config_defaults(&cfg);
    if (srv_config_load_buffer(&cfg, file, strlen(file), "new.json", err,
                               sizeof(err)) ||
        srv_config_validate(&cfg, err, sizeof(err)))
        fail_msg("the new app does not load: %s", err);
    assert_int_equal(cfg.n_apps, 1);
    assert_string_equal(cfg.apps[0].id, a.id);
    assert_string_equal(cfg.apps[0].key, a.key);
    assert_string_equal(cfg.apps[0].secret, a.secret);
    srv_config_fini(&cfg);
    free(file);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_app_shapes),
        cmocka_unit_test(test_new_app_draws_differ),
        cmocka_unit_test(test_new_app_print_loads_as_app),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
