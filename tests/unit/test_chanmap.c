/*
 * tests/unit/test_chanmap.c - the loop-local channel index
 * (hub/loop/chanmap.h): get, find and put by app and name, and growth to a
 * thousand channels. Single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fake_hub.h"

static void test_chanmap_get_find_put(void **state)
{
    struct hub_chanmap *m = hub_chanmap_create();
    struct hub_lchan *a, *b;

    (void)state;
    assert_non_null(m);
    assert_null(hub_chanmap_find(m, 0, "a", 1));
    a = hub_chanmap_get(m, 0, "a", 1);
    assert_non_null(a);
    assert_ptr_equal(hub_chanmap_get(m, 0, "a", 1), a);
    assert_ptr_equal(hub_chanmap_find(m, 0, "a", 1), a);
    assert_string_equal(a->name, "a");
    /* Same name in another app is another channel. */
    b = hub_chanmap_get(m, 1, "a", 1);
    assert_ptr_not_equal(a, b);
    assert_int_equal(hub_chanmap_count(m), 2);
    /* Names are compared whole, not as prefixes. */
    assert_null(hub_chanmap_find(m, 0, "ab", 2));
    assert_int_equal(hub_chanmap_get(m, 0, "presence-x", 10)->kind,
                     HUB_CHANNEL_PRESENCE);
    /* put frees only channels without members. */
    a->n_members = 1;
    hub_chanmap_put(m, a);
    assert_ptr_equal(hub_chanmap_find(m, 0, "a", 1), a);
    a->n_members = 0;
    hub_chanmap_put(m, a);
    assert_null(hub_chanmap_find(m, 0, "a", 1));
    assert_int_equal(hub_chanmap_count(m), 2);
    hub_chanmap_destroy(m);
}

static void test_chanmap_grows(void **state)
{
    struct hub_chanmap *m = hub_chanmap_create();
    char name[32];

    (void)state;
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(name, sizeof(name), "ch-%d", i);

        assert_non_null(hub_chanmap_get(m, 0, name, (size_t)n));
    }
    assert_int_equal(hub_chanmap_count(m), 1000);
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(name, sizeof(name), "ch-%d", i);
        struct hub_lchan *c = hub_chanmap_find(m, 0, name, (size_t)n);

        assert_non_null(c);
        assert_string_equal(c->name, name);
        if (i % 2)
            hub_chanmap_put(m, c);
    }
    assert_int_equal(hub_chanmap_count(m), 500);
    hub_chanmap_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chanmap_get_find_put),
        cmocka_unit_test(test_chanmap_grows),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
