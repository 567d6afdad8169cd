/*
 * tests/unit/test_app.c - hub/app/app.c's app id check (hub_app_id_check):
 * the characters and lengths it takes, and for the rest, which byte it
 * blames (the first bad one) or the length it reports. Also the
 * "compression" switch (issue 34) through the defaults and the one copy
 * and compare path.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hub/app/app.h"

static void test_app_id_accepts_the_allowed_set(void **state)
{
    static const char *const ok[] = {
        "1", "123456", "app-id", "my_app.v2", "A-Z.a-z_0-9", "-", ".", "_",
        "x",
    };
    char longest[HUB_APP_ID_MAX + 1];
    size_t bad = 12345;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (hub_app_id_check(ok[i], &bad))
            fail_msg("\"%s\" refused", ok[i]);
    }
    /* Nothing is written on success. */
    assert_int_equal(bad, 12345);
    memset(longest, 'z', HUB_APP_ID_MAX);
    longest[HUB_APP_ID_MAX] = '\0';
    assert_int_equal(hub_app_id_check(longest, NULL), 0);
}

static void test_app_id_refuses_empty_and_long(void **state)
{
    char over[HUB_APP_ID_MAX + 2];
    size_t bad = 99;

    (void)state;
    assert_int_equal(hub_app_id_check("", &bad), -EINVAL);
    assert_int_equal(bad, 0);
    assert_int_equal(hub_app_id_check(NULL, &bad), -EINVAL);
    memset(over, '7', HUB_APP_ID_MAX + 1);
    over[HUB_APP_ID_MAX + 1] = '\0';
    assert_int_equal(hub_app_id_check(over, &bad), -EINVAL);
    assert_int_equal(bad, HUB_APP_ID_MAX + 1);
    /* bad may be NULL. */
    assert_int_equal(hub_app_id_check(over, NULL), -EINVAL);
}

static void test_app_id_names_the_first_bad_byte(void **state)
{
    static const struct {
        const char *id;
        size_t at;
    } cases[] = {
        {"a:b", 1},         /* would collide in "prefix:appid:channel" */
        {":", 0},
        {"ab c", 2},        /* whitespace */
        {"tab\there", 3},
        {"nl\n", 2},        /* control characters */
        {"\x7f", 0},
        {"caf\xc3\xa9", 3}, /* past ASCII: the first byte of the UTF-8 */
        {"a/b", 1},         /* would change a REST path */
        {"a?b", 1},
        {"a%b", 1},
        {"a*b", 1},         /* a Redis pattern character */
        {"ok:then:again", 2},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t bad = 999;

        assert_int_equal(hub_app_id_check(cases[i].id, &bad), -EILSEQ);
        if (bad != cases[i].at)
            fail_msg("case %zu: blamed %zu, want %zu", i, bad, cases[i].at);
    }
}

/* An app that sets nothing is compressed (the hub's switch decides). */
static void test_app_defaults_compression_on(void **state)
{
    struct hub_app app;

    (void)state;
    memset(&app, 0, sizeof(app));
    hub_app_defaults(&app);
    assert_true(app.compression);
}

/* A reload that flips "compression" changes the app: hub_app_equal()
 * tells, and hub_app_dup() keeps the value. */
static void test_app_equal_compares_compression(void **state)
{
    struct hub_app a, *c;

    (void)state;
    memset(&a, 0, sizeof(a));
    hub_app_defaults(&a);
    a.id = "1";
    a.key = "k";
    a.secret = "s";
    c = hub_app_dup(&a);
    assert_non_null(c);
    assert_true(c->compression);
    assert_true(hub_app_equal(&a, c));
    c->compression = false;
    assert_false(hub_app_equal(&a, c));
    assert_false(hub_app_equal(c, &a));
    a.compression = false;
    assert_true(hub_app_equal(&a, c));
    hub_app_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_app_id_accepts_the_allowed_set),
        cmocka_unit_test(test_app_id_refuses_empty_and_long),
        cmocka_unit_test(test_app_id_names_the_first_bad_byte),
        cmocka_unit_test(test_app_defaults_compression_on),
        cmocka_unit_test(test_app_equal_compares_compression),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
