/*
 * tests/unit/test_fail_alloc.c - the failing allocator itself: the
 * countdown fails exactly the allocation it names, once; every wrapped
 * function counts; live counts blocks from the wrappers only; jansson goes
 * through it; FAIL_ALLOC_COUNTDOWN stops after the first clean run.
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
#include <jansson.h>

#include "fail_alloc.h"
#include "hub/wire/frame.h"

static void test_fail_alloc_countdown_fails_one(void **state)
{
    void *a, *b, *c;
    long live = fail_alloc_live();

    (void)state;
    fail_alloc_after(2);
    a = malloc(8);
    b = calloc(2, 8);
    errno = 0;
    c = malloc(8);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(c);
    assert_int_equal(errno, ENOMEM);
    assert_int_equal(fail_alloc_hits(), 1);
    /* One failure per arming: the next ones work. */
    c = realloc(a, 64);
    assert_non_null(c);
    assert_int_equal(fail_alloc_live(), live + 2);
    free(b);
    free(c);
    assert_int_equal(fail_alloc_live(), live);
    fail_alloc_off();
    assert_int_equal(fail_alloc_hits(), 1);
    fail_alloc_after(0);
    assert_int_equal(fail_alloc_hits(), 0);
    fail_alloc_off();
}

static void test_fail_alloc_every_wrapper_counts(void **state)
{
    void *p = malloc(4), *q;
    char *s;

    (void)state;
    assert_non_null(p);
    fail_alloc_after(0);
    q = realloc(p, 100);
    assert_null(q);
    if (q) /* never: p stays valid and is freed below */
        p = q;
    fail_alloc_after(0);
    assert_null(strdup("abc"));
    fail_alloc_after(0);
    assert_null(strndup("abcdef", 3));
    fail_alloc_after(0);
    assert_null(calloc(1, 1));
    fail_alloc_off();
    s = strndup("abcdef", 3);
    assert_string_equal(s, "abc");
    free(s);
    s = strdup("xyz");
    assert_string_equal(s, "xyz");
    free(s);
    free(p);
}

static void test_fail_alloc_foreign_blocks_not_counted(void **state)
{
    long live = fail_alloc_live();
    char *s = NULL;

    (void)state;
    /* libc's asprintf allocates inside libc, unseen; freeing it here must
     * not count as one of ours. */
    assert_true(asprintf(&s, "%d", 42) > 0);
    free(s);
    assert_int_equal(fail_alloc_live(), live);
}

static void test_fail_alloc_covers_jansson_and_libs(void **state)
{
    long live = fail_alloc_live();
    json_t *o;
    struct hub_frame *f;

    (void)state;
    fail_alloc_after(0);
    assert_null(json_object());
    fail_alloc_off();
    o = json_pack("{s:i}", "a", 1);
    assert_non_null(o);
    assert_true(fail_alloc_live() > live);
    json_decref(o);
    assert_int_equal(fail_alloc_live(), live);
    /* The static hub library's calls are wrapped too. */
    fail_alloc_after(0);
    assert_null(hub_frame_create_text("x", 1));
    fail_alloc_off();
    f = hub_frame_create_text("x", 1);
    assert_non_null(f);
    hub_frame_unref(f);
    assert_int_equal(fail_alloc_live(), live);
}

static void test_fail_alloc_countdown_macro(void **state)
{
    long runs = 0, failed_runs = 0;

    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            char *a = strdup("a");
            char *b = a ? strdup("b") : NULL;
            json_t *j = b ? json_string("c") : NULL;

            runs++;
            free(a);
            free(b);
            json_decref(j);
        },
        {
            assert_int_equal(fail_alloc_live(), fa_live_before);
            failed_runs += fa_failed;
        });
    /* Two strdups and at least one allocation in json_string: every one
     * failed in its own run, then one clean run. */
    assert_true(runs >= 4);
    assert_int_equal(failed_runs, runs - 1);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_fail_alloc_countdown_fails_one),
        T(test_fail_alloc_every_wrapper_counts),
        T(test_fail_alloc_foreign_blocks_not_counted),
        T(test_fail_alloc_covers_jansson_and_libs),
        T(test_fail_alloc_countdown_macro),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
