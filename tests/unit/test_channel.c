/*
 * tests/unit/test_channel.c - the loop-local channel index, the hub-wide
 * directory (subscription counts, presence per user, limits, the JSON of
 * the REST queries) and the socket_id exclusion parser. Publication through
 * sessions is in test_pusher.c.
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

#include "fake_hub.h"

/* Local index. */

static void test_channel_chanmap_get_find_put(void **state)
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

static void test_channel_chanmap_grows(void **state)
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

/* Directory. */

static void test_channel_directory_counts_subscriptions(void **state)
{
    struct hub_directory *d = hub_directory_create();
    struct hub_channel_info ci;
    bool last;

    (void)state;
    hub_directory_info(d, 0, "c", 1, &ci);
    assert_false(ci.occupied);
    assert_int_equal(hub_directory_join(d, 0, "c", 1, NULL), 0);
    assert_int_equal(hub_directory_join(d, 0, "c", 1, NULL), 0);
    hub_directory_info(d, 0, "c", 1, &ci);
    assert_true(ci.occupied);
    assert_int_equal(ci.subscription_count, 2);
    assert_int_equal(ci.user_count, 0);
    hub_directory_info(d, 1, "c", 1, &ci);
    assert_false(ci.occupied);
    hub_directory_leave_seq(d, 0, "c", 1, NULL, &last, NULL);
    assert_false(last);
    hub_directory_leave_seq(d, 0, "c", 1, NULL, &last, NULL);
    hub_directory_info(d, 0, "c", 1, &ci);
    assert_false(ci.occupied);
    assert_int_equal(ci.subscription_count, 0);
    /* Leaving an unknown channel is harmless. */
    hub_directory_leave_seq(d, 0, "zz", 2, NULL, &last, NULL);
    hub_directory_destroy(d);
}

static int join_user(struct hub_directory *d, const char *ch, const char *uid,
                     const char *info, uint32_t max, bool *first,
                     json_t **members)
{
    struct hub_presence_join j = { 0 };
    int rc;

    j.user_id = uid;
    j.user_info = info;
    j.max_members = max;
    rc = hub_directory_join(d, 0, ch, strlen(ch), &j);
    if (first)
        *first = j.first;
    if (members)
        *members = j.members_json ? json_loads(j.members_json, 0, NULL)
                                  : NULL;
    free(j.members_json);
    return rc;
}

static void test_channel_directory_presence_edges_per_user(void **state)
{
    struct hub_directory *d = hub_directory_create();
    struct hub_channel_info ci;
    json_t *members, *want;
    bool first, last;

    (void)state;
    assert_int_equal(join_user(d, "presence-p", "u1", "{\"n\":1}", 0, &first,
                               &members), 0);
    assert_true(first);
    want = json_loads("{\"presence\":{\"ids\":[\"u1\"],"
                      "\"hash\":{\"u1\":{\"n\":1}},\"count\":1}}", 0, NULL);
    assert_true(json_equal(members, want));
    json_decref(want);
    json_decref(members);
    /* The same user's second connection is not a new member. */
    assert_int_equal(join_user(d, "presence-p", "u1", "{\"n\":2}", 0, &first,
                               NULL), 0);
    assert_false(first);
    assert_int_equal(join_user(d, "presence-p", "u2", NULL, 0, &first,
                               &members), 0);
    assert_true(first);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(members, "presence"), "count")),
                     2);
    /* A member without user_info is listed with {}. */
    assert_true(json_is_object(json_object_get(
        json_object_get(json_object_get(members, "presence"), "hash"), "u2")));
    json_decref(members);
    hub_directory_info(d, 0, "presence-p", 10, &ci);
    assert_int_equal(ci.user_count, 2);
    assert_int_equal(ci.subscription_count, 3);

    hub_directory_leave_seq(d, 0, "presence-p", 10, "u1", &last, NULL);
    assert_false(last);
    hub_directory_info(d, 0, "presence-p", 10, &ci);
    assert_int_equal(ci.user_count, 2);
    hub_directory_leave_seq(d, 0, "presence-p", 10, "u1", &last, NULL);
    assert_true(last);
    hub_directory_info(d, 0, "presence-p", 10, &ci);
    assert_int_equal(ci.user_count, 1);
    hub_directory_leave_seq(d, 0, "presence-p", 10, "u2", &last, NULL);
    assert_true(last);
    hub_directory_info(d, 0, "presence-p", 10, &ci);
    assert_false(ci.occupied);
    assert_int_equal(ci.user_count, 0);
    hub_directory_destroy(d);
}

static void test_channel_directory_member_limit(void **state)
{
    struct hub_directory *d = hub_directory_create();
    struct hub_channel_info ci;
    bool first, last;

    (void)state;
    assert_int_equal(join_user(d, "presence-l", "a", NULL, 2, &first, NULL),
                     0);
    assert_int_equal(join_user(d, "presence-l", "b", NULL, 2, &first, NULL),
                     0);
    assert_int_equal(join_user(d, "presence-l", "c", NULL, 2, &first, NULL),
                     -ENOSPC);
    /* An existing member's extra connection still fits. */
    assert_int_equal(join_user(d, "presence-l", "a", NULL, 2, &first, NULL),
                     0);
    assert_false(first);
    hub_directory_info(d, 0, "presence-l", 10, &ci);
    assert_int_equal(ci.user_count, 2);
    assert_int_equal(ci.subscription_count, 3);
    hub_directory_leave_seq(d, 0, "presence-l", 10, "b", &last, NULL);
    assert_true(last);
    assert_int_equal(join_user(d, "presence-l", "c", NULL, 2, &first, NULL),
                     0);
    assert_true(first);
    hub_directory_info(d, 0, "presence-l", 10, &ci);
    assert_int_equal(ci.user_count, 2);
    hub_directory_destroy(d);
}

static void test_channel_directory_list_and_users_json(void **state)
{
    struct hub_directory *d = hub_directory_create();
    json_t *list, *users, *want;

    (void)state;
    join_user(d, "presence-a", "1", NULL, 0, NULL, NULL);
    join_user(d, "presence-a", "2", NULL, 0, NULL, NULL);
    join_user(d, "presence-a", "2", NULL, 0, NULL, NULL);
    join_user(d, "presence-b", "3", NULL, 0, NULL, NULL);
    hub_directory_join(d, 0, "public", 6, NULL);
    hub_directory_join(d, 1, "other-app", 9, NULL);

    list = hub_directory_list(d, 0, "presence-", true);
    want = json_loads("{\"presence-a\":{\"user_count\":2},"
                      "\"presence-b\":{\"user_count\":1}}", 0, NULL);
    assert_true(json_equal(list, want));
    json_decref(list);
    json_decref(want);
    list = hub_directory_list(d, 0, NULL, false);
    want = json_loads("{\"presence-a\":{},\"presence-b\":{},\"public\":{}}",
                      0, NULL);
    assert_true(json_equal(list, want));
    json_decref(list);
    json_decref(want);
    list = hub_directory_list(d, 0, "nope-", false);
    assert_int_equal(json_object_size(list), 0);
    json_decref(list);

    users = hub_directory_users(d, 0, "presence-a", 10);
    assert_int_equal(json_array_size(users), 2);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(users, 0), "id")), "1");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(users, 1), "id")), "2");
    json_decref(users);
    users = hub_directory_users(d, 0, "presence-none", 13);
    assert_int_equal(json_array_size(users), 0);
    json_decref(users);
    hub_directory_destroy(d);
}

static void test_channel_excl_parse(void **state)
{
    struct hub_skip ex;

    (void)state;
    assert_int_equal(hub_skip_parse(&ex, "123.456"), 0);
    assert_true(ex.set);
    assert_true(ex.hi == 123 && ex.lo == 456);
    assert_int_equal(hub_skip_parse(&ex, "1.4294967295"), 0);
    assert_int_equal(hub_skip_parse(&ex, "1.4294967296"), -EINVAL);
    assert_false(ex.set);
    assert_int_equal(hub_skip_parse(&ex, "1."), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, ".1"), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, "1.2.3"), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, "-1.2"), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, "1.2 "), -EINVAL);
    assert_int_equal(hub_skip_parse(&ex, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_channel_chanmap_get_find_put),
        cmocka_unit_test(test_channel_chanmap_grows),
        cmocka_unit_test(test_channel_directory_counts_subscriptions),
        cmocka_unit_test(test_channel_directory_presence_edges_per_user),
        cmocka_unit_test(test_channel_directory_member_limit),
        cmocka_unit_test(test_channel_directory_list_and_users_json),
        cmocka_unit_test(test_channel_excl_parse),
    };

    json_object_seed(1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
