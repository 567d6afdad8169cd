/*
 * tests/unit/test_list.c - the intrusive list of timer/list.h.
 *
 * Covers linking at both ends, iteration order, unlinking while iterating,
 * and that unlinking twice is harmless. Single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "timer/list.h"

struct item {
    int id;
    struct hub_list link;
};

static void test_list_init_is_empty(void **state)
{
    struct hub_list head = HUB_LIST_INIT(head);
    struct hub_list node;

    (void)state;
    assert_true(hub_list_is_empty(&head));
    hub_list_init(&node);
    assert_false(hub_list_is_linked(&node));
}

static void test_list_link_tail_and_head_keep_order(void **state)
{
    struct hub_list head;
    struct item it[4];
    struct hub_list *pos;
    int want[4] = { 3, 0, 1, 2 };
    int i = 0;

    (void)state;
    hub_list_init(&head);
    for (int k = 0; k < 4; k++) {
        it[k].id = k;
        hub_list_init(&it[k].link);
    }
    hub_list_link_tail(&head, &it[0].link);
    hub_list_link_tail(&head, &it[1].link);
    hub_list_link_tail(&head, &it[2].link);
    hub_list_link_head(&head, &it[3].link);
    assert_false(hub_list_is_empty(&head));
    hub_list_for_each(pos, &head) {
        assert_int_equal(hub_container_of(pos, struct item, link)->id,
                         want[i]);
        i++;
    }
    assert_int_equal(i, 4);
    assert_ptr_equal(head.prev, &it[2].link);
}

static void test_list_unlink_twice_is_harmless(void **state)
{
    struct hub_list head;
    struct item a, b;

    (void)state;
    hub_list_init(&head);
    hub_list_init(&a.link);
    hub_list_init(&b.link);
    hub_list_link_tail(&head, &a.link);
    hub_list_link_tail(&head, &b.link);
    assert_true(hub_list_is_linked(&a.link));
    hub_list_unlink(&a.link);
    assert_false(hub_list_is_linked(&a.link));
    hub_list_unlink(&a.link);
    assert_ptr_equal(head.next, &b.link);
    assert_ptr_equal(b.link.prev, &head);
    hub_list_unlink(&b.link);
    assert_true(hub_list_is_empty(&head));
}

static void test_list_for_each_safe_allows_unlink(void **state)
{
    struct hub_list head;
    struct item it[6];
    struct hub_list *pos, *tmp;
    int left = 0;

    (void)state;
    hub_list_init(&head);
    for (int k = 0; k < 6; k++) {
        it[k].id = k;
        hub_list_link_tail(&head, &it[k].link);
    }
    hub_list_for_each_safe(pos, tmp, &head) {
        if (hub_container_of(pos, struct item, link)->id % 2 == 0)
            hub_list_unlink(pos);
    }
    hub_list_for_each(pos, &head) {
        assert_int_equal(hub_container_of(pos, struct item, link)->id % 2, 1);
        left++;
    }
    assert_int_equal(left, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_init_is_empty),
        cmocka_unit_test(test_list_link_tail_and_head_keep_order),
        cmocka_unit_test(test_list_unlink_twice_is_harmless),
        cmocka_unit_test(test_list_for_each_safe_allows_unlink),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
