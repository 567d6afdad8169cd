/*
 * tests/unit/test_backoff.c - the backoff schedule of hub/base/backoff.h:
 * the step doubles from the base and stops at the cap (a zero base counts
 * as 1 ms, attempt 0 as 1); the jittered delay stays within [d/2, d] and
 * reaches both ends; and the three callers' schedules, with their
 * documented constants: webhooks (1 s base), the backplane's reconnects
 * (100 ms to 5 s, jittered) and the webhook stream's (500 ms to 10 s,
 * not jittered).
 *
 * Thread: the test's only thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hub/base/backoff.h"
#include "hub/base/rng.h"

static void test_backoff_step_doubles_to_the_cap(void **state)
{
    (void)state;
    assert_int_equal(hub_backoff_step_ms(1, 100, 5000), 100);
    assert_int_equal(hub_backoff_step_ms(2, 100, 5000), 200);
    assert_int_equal(hub_backoff_step_ms(3, 100, 5000), 400);
    assert_int_equal(hub_backoff_step_ms(6, 100, 5000), 3200);
    assert_int_equal(hub_backoff_step_ms(7, 100, 5000), 5000);
    assert_int_equal(hub_backoff_step_ms(1000, 100, 5000), 5000);
    assert_int_equal(hub_backoff_step_ms(4000000000u, 100, 5000), 5000);
}

static void test_backoff_step_edges(void **state)
{
    (void)state;
    /* Attempt 0 is the first step; a zero base is 1 ms; a base above the
     * cap is the cap. */
    assert_int_equal(hub_backoff_step_ms(0, 100, 5000), 100);
    assert_int_equal(hub_backoff_step_ms(1, 0, 5000), 1);
    assert_int_equal(hub_backoff_step_ms(4, 0, 5000), 8);
    assert_int_equal(hub_backoff_step_ms(1, 9000, 5000), 5000);
    assert_int_equal(hub_backoff_step_ms(3, 100, 0), 0);
}

static void test_backoff_jitter_within_half_to_full(void **state)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    uint64_t lo = UINT64_MAX, hi = 0;

    (void)state;
    for (int i = 0; i < 20000; i++) {
        uint64_t d = hub_backoff_ms(3, 100, 5000, hub_xorshift64s(&rng));

        assert_in_range(d, 200, 400);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    /* 201 values, 20000 draws: both ends come up. */
    assert_int_equal(lo, 200);
    assert_int_equal(hi, 400);
    /* The random value picks the point, both ends included. */
    assert_int_equal(hub_backoff_ms(3, 100, 5000, 0), 200);
    assert_int_equal(hub_backoff_ms(3, 100, 5000, 200), 400);
    assert_int_equal(hub_backoff_ms(3, 100, 5000, 201), 200);
}

static void test_backoff_jitter_of_tiny_steps(void **state)
{
    (void)state;
    /* d 1: [0, 1]; d 0 (a zero cap): always 0. */
    assert_int_equal(hub_backoff_ms(1, 1, 10, 0), 0);
    assert_int_equal(hub_backoff_ms(1, 1, 10, 1), 1);
    assert_int_equal(hub_backoff_ms(1, 1, 10, 2), 0);
    assert_int_equal(hub_backoff_ms(5, 100, 0, 12345), 0);
}

static void test_backoff_callers_schedules(void **state)
{
    uint64_t rng = 42;
    static const uint64_t stream[] = { 500, 1000, 2000, 4000, 8000, 10000,
                                       10000 };

    (void)state;
    /* The webhook stream's reconnects: 500 ms doubled up to 10 s. */
    for (unsigned a = 1; a <= 7; a++)
        assert_int_equal(hub_backoff_step_ms(a, 500, 10000), stream[a - 1]);
    /* The backplane's: 100 ms doubled up to 5 s, each 50..100 % of it. */
    for (unsigned a = 1; a <= 12; a++) {
        uint64_t step = hub_backoff_step_ms(a, 100, 5000);
        uint64_t d = hub_backoff_ms(a, 100, 5000, hub_xorshift64s(&rng));

        assert_in_range(d, step / 2, step);
        assert_true(step <= 5000);
    }
    /* Webhook deliveries: a 1 s base, here capped at an hour. */
    assert_int_equal(hub_backoff_step_ms(13, 1000, 3600000), 3600000);
    assert_int_equal(hub_backoff_step_ms(12, 1000, 3600000), 2048000);
}

static void test_backoff_webhook_schedule(void **state)
{
    (void)state;
    /* The webhook deliveries' schedule (webhook_send.c: base 1 s, cap
     * --webhook-backoff-max): exponential, capped, jittered into [d/2, d]. */
    assert_int_equal(hub_backoff_ms(1, 1000, 60000, 0), 500);
    assert_int_equal(hub_backoff_ms(1, 1000, 60000, 500), 1000);
    assert_int_equal(hub_backoff_ms(2, 1000, 60000, 0), 1000);
    assert_int_equal(hub_backoff_ms(3, 1000, 60000, 0), 2000);
    assert_int_equal(hub_backoff_ms(7, 1000, 60000, 0), 30000);
    assert_int_equal(hub_backoff_ms(8, 1000, 60000, 0), 30000);
    assert_int_equal(hub_backoff_ms(100, 1000, 60000, 30000), 60000);
    for (uint64_t r = 0; r < 5000; r += 37) {
        for (unsigned a = 1; a < 40; a++) {
            uint64_t d = hub_backoff_ms(a, 1000, 60000, r * 7919);
            uint64_t full = a > 7 ? 60000 : 1000ull << (a - 1);

            if (full > 60000)
                full = 60000;
            assert_true(d >= full / 2 && d <= full);
        }
    }
    assert_true(hub_backoff_ms(1, 0, 10, 0) <= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_step_doubles_to_the_cap),
        cmocka_unit_test(test_backoff_step_edges),
        cmocka_unit_test(test_backoff_jitter_within_half_to_full),
        cmocka_unit_test(test_backoff_jitter_of_tiny_steps),
        cmocka_unit_test(test_backoff_callers_schedules),
        cmocka_unit_test(test_backoff_webhook_schedule),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
