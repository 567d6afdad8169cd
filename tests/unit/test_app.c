/*
 * tests/unit/test_app.c - hub/app/app.c's app id check (hub_app_id_check):
 * the characters and lengths it takes, and for the rest, which byte it
 * blames (the first bad one) or the length it reports. Also the
 * "compression" switch (issue 34) through the defaults and the one copy
 * and compare path, and history (issue 35): which channels
 * hub_app_history_on() says keep it, and its fields through the defaults
 * and the copy, compare and free path.
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

/* The channel name, NUL-terminated, through hub_app_history_on(). */
static bool on(const struct hub_app *a, const char *name)
{
    return hub_app_history_on(a, name, strlen(name));
}

static void test_app_defaults_history_off(void **state)
{
    struct hub_app app;

    (void)state;
    memset(&app, 0xff, sizeof(app));
    hub_app_defaults(&app);
    assert_false(app.history);
    assert_int_equal(app.history_ttl_ms, 120000);
    assert_int_equal(app.history_size, 1000);
    assert_int_equal(app.history_max_bytes, 0);
    app.history_channels = NULL;
    app.n_history_channels = 0;
    assert_false(on(&app, "news"));
    assert_false(hub_app_history_on(NULL, "news", 4));
}

/* app with history on, the defaults and the n patterns of list (borrowed). */
static void history_app(struct hub_app *app, char **list, unsigned n)
{
    memset(app, 0, sizeof(*app));
    hub_app_defaults(app);
    app->history = true;
    app->history_channels = list;
    app->n_history_channels = n;
}

/* No list: every channel of every kind, never a "#" one. */
static void test_app_history_on_every_channel_without_list(void **state)
{
    static const char *const yes[] = {
        "news", "private-a", "private-encrypted-a", "presence-room",
        "cache-x", "private-cache-x", "presence-cache-x", "a", "*",
    };
    struct hub_app app;

    (void)state;
    history_app(&app, NULL, 0);
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!on(&app, yes[i]))
            fail_msg("\"%s\" keeps no history", yes[i]);
    assert_false(on(&app, "#server-to-user-1"));
    assert_false(on(&app, "#"));
}

/* A trailing '*' is a prefix (the empty rest included); any other
 * pattern the whole name; the name's length, not a NUL, ends it. */
static void test_app_history_on_matches_prefix_and_exact(void **state)
{
    char *list[] = {"orders-*", "news", "presence-lobby*"};
    struct hub_app app;

    (void)state;
    history_app(&app, list, 3);
    assert_true(on(&app, "orders-1"));
    assert_true(on(&app, "orders-"));
    assert_false(on(&app, "orders"));
    assert_false(on(&app, "private-orders-1"));
    assert_true(on(&app, "news"));
    assert_false(on(&app, "news2"));
    assert_false(on(&app, "new"));
    assert_false(on(&app, "News"));
    assert_true(on(&app, "presence-lobby"));
    assert_true(on(&app, "presence-lobby-2"));
    /* Not NUL-terminated: "newsroom" cut to 4 bytes is "news". */
    assert_true(hub_app_history_on(&app, "newsroom", 4));
    assert_false(hub_app_history_on(&app, "orders-1", 6));
    /* Off, the list says nothing. */
    app.history = false;
    assert_false(on(&app, "news"));
}

/* "*" alone is every channel; a "#" name never, even so. */
static void test_app_history_on_never_hash_names(void **state)
{
    char *list[] = {"*"};
    struct hub_app app;

    (void)state;
    history_app(&app, list, 1);
    assert_true(on(&app, "anything"));
    assert_true(on(&app, "private-x"));
    assert_false(on(&app, "#server-to-user-42"));
}

/* hub_app_dup() copies the list (its own strings), hub_app_equal() sees
 * every history field, hub_app_free() frees the copy (ASan checks). */
static void test_app_equal_compares_history(void **state)
{
    char *list[] = {"a*", "b"}, *other[] = {"a*", "c"};
    struct hub_app a, *c;

    (void)state;
    history_app(&a, list, 2);
    a.id = "1";
    a.key = "k";
    a.secret = "s";
    c = hub_app_dup(&a);
    assert_non_null(c);
    assert_true(hub_app_equal(&a, c));
    assert_int_equal(c->n_history_channels, 2);
    assert_ptr_not_equal(c->history_channels, list);
    assert_ptr_not_equal(c->history_channels[0], list[0]);
    assert_string_equal(c->history_channels[1], "b");
    assert_true(on(c, "abc"));
    assert_false(on(c, "c"));

    c->history = false;
    assert_false(hub_app_equal(&a, c));
    c->history = true;
    c->history_ttl_ms++;
    assert_false(hub_app_equal(&a, c));
    c->history_ttl_ms--;
    c->history_size--;
    assert_false(hub_app_equal(&a, c));
    c->history_size++;
    c->history_max_bytes = 1;
    assert_false(hub_app_equal(c, &a));
    c->history_max_bytes = 0;
    assert_true(hub_app_equal(&a, c));
    a.history_channels = other;
    assert_false(hub_app_equal(&a, c));
    a.n_history_channels = 1;
    a.history_channels = list;
    assert_false(hub_app_equal(&a, c));
    a.n_history_channels = 0;
    a.history_channels = NULL;
    assert_false(hub_app_equal(&a, c));
    hub_app_free(c);
    /* No list copies as none. */
    c = hub_app_dup(&a);
    assert_non_null(c);
    assert_null(c->history_channels);
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
        cmocka_unit_test(test_app_defaults_history_off),
        cmocka_unit_test(test_app_history_on_every_channel_without_list),
        cmocka_unit_test(test_app_history_on_matches_prefix_and_exact),
        cmocka_unit_test(test_app_history_on_never_hash_names),
        cmocka_unit_test(test_app_equal_compares_history),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
