/*
 * tests/unit/test_memtrim.c - srv_memtrim_due (server/base/memtrim.c): a trim
 * after a burst of handshakes once the count has stood still, never
 * during the burst, never twice for one burst, never for a trickle; and
 * srv_memtrim_run does not fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "server/base/memtrim.h"

static void test_memtrim_burst_then_quiet(void **state)
{
    struct srv_memtrim t;
    uint64_t now = 5000, n = 10;

    (void)state;
    srv_memtrim_init(&t, n, now);
    /* The burst: the count moves every second, no trim. */
    for (int i = 0; i < 20; i++) {
        n += 100;
        now += 1000;
        assert_false(srv_memtrim_due(&t, n, now));
    }
    /* Still for less than the quiet time. */
    assert_false(srv_memtrim_due(&t, n, now + SRV_MEMTRIM_QUIET_MS - 1));
    assert_true(srv_memtrim_due(&t, n, now + SRV_MEMTRIM_QUIET_MS));
    /* Once per burst. */
    assert_false(srv_memtrim_due(&t, n, now + 10 * SRV_MEMTRIM_QUIET_MS));
}

static void test_memtrim_trickle(void **state)
{
    struct srv_memtrim t;
    uint64_t now = 0, n = 0;

    (void)state;
    srv_memtrim_init(&t, n, now);
    /* Fewer than the minimum since the last trim: nothing to give back. */
    n += SRV_MEMTRIM_MIN_HANDSHAKES - 1;
    assert_false(srv_memtrim_due(&t, n, ++now));
    assert_false(srv_memtrim_due(&t, n, now + 60000));
    /* One more and quiet again: due. */
    n++;
    now += 60000;
    assert_false(srv_memtrim_due(&t, n, now));
    assert_true(srv_memtrim_due(&t, n, now + SRV_MEMTRIM_QUIET_MS));
}

static void test_memtrim_start_counts_nothing_before(void **state)
{
    struct srv_memtrim t;

    (void)state;
    /* Handshakes before init are not a burst of ours. */
    srv_memtrim_init(&t, 100000, 0);
    assert_false(srv_memtrim_due(&t, 100000, 60000));
}

static void test_memtrim_run(void **state)
{
    void *p[64];

    (void)state;
    for (int i = 0; i < 64; i++)
        p[i] = malloc(32 * 1024);
    for (int i = 0; i < 64; i += 2)
        free(p[i]);
    (void)srv_memtrim_run();
    for (int i = 1; i < 64; i += 2)
        free(p[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memtrim_burst_then_quiet),
        cmocka_unit_test(test_memtrim_trickle),
        cmocka_unit_test(test_memtrim_start_counts_nothing_before),
        cmocka_unit_test(test_memtrim_run),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
