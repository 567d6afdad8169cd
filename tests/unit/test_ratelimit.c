/*
 * tests/unit/test_ratelimit.c - the REST token bucket (hub/base/ratelimit.h) on
 * a fake clock: a full start, refill at the rate, the cap after a quiet
 * spell, a request larger than one second's worth (served from a full
 * bucket, then paid for), Retry-After in whole seconds, a rate changed
 * between calls, a clock that steps back; and real threads taking from one
 * bucket (the tsan label runs it under ThreadSanitizer) with the total let
 * through exact.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hub/base/ratelimit.h"

static void test_ratelimit_bucket_refill_and_retry(void **state)
{
    struct hub_bucket b;
    uint32_t ra = 0;

    (void)state;
    hub_bucket_init(&b);
    /* Off: anything goes. */
    for (int i = 0; i < 100; i++)
        assert_true(hub_bucket_take(&b, 0, 1000, 0, &ra));
    /* Full at the first call: 5 now, then refused. */
    for (int i = 0; i < 5; i++)
        assert_true(hub_bucket_take(&b, 5, 1, 1000, &ra));
    assert_false(hub_bucket_take(&b, 5, 1, 1000, &ra));
    assert_int_equal(ra, 1);
    /* 5 a second: one token every 200 ms. */
    assert_false(hub_bucket_take(&b, 5, 1, 1199, &ra));
    assert_true(hub_bucket_take(&b, 5, 1, 1200, &ra));
    assert_false(hub_bucket_take(&b, 5, 1, 1200, &ra));
    /* A long quiet spell fills it to one second's worth, no more. */
    for (int i = 0; i < 5; i++)
        assert_true(hub_bucket_take(&b, 5, 1, 1000000, &ra));
    assert_false(hub_bucket_take(&b, 5, 1, 1000000, &ra));
    hub_bucket_fini(&b);
}

static void test_ratelimit_bucket_batch_and_debt(void **state)
{
    struct hub_bucket b;
    uint32_t ra = 0;

    (void)state;
    hub_bucket_init(&b);
    /* A batch of 10 with a full bucket of 5 passes, leaving 5 in debt. */
    assert_true(hub_bucket_take(&b, 5, 10, 0, &ra));
    /* One more needs 6 tokens: 1.2 s, so Retry-After 2. */
    assert_false(hub_bucket_take(&b, 5, 1, 0, &ra));
    assert_int_equal(ra, 2);
    assert_false(hub_bucket_take(&b, 5, 1, 1199, &ra));
    assert_int_equal(ra, 1);
    assert_true(hub_bucket_take(&b, 5, 1, 1200, &ra));
    /* Another batch waits for a full bucket (min(n, rate) tokens). */
    assert_false(hub_bucket_take(&b, 5, 10, 1200, &ra));
    assert_int_equal(ra, 1);
    assert_true(hub_bucket_take(&b, 5, 10, 2200, &ra));
    /* A clock that steps back takes nothing and breaks nothing. */
    assert_false(hub_bucket_take(&b, 5, 1, 100, &ra));
    assert_true(ra >= 1);
    /* A lower rate applies at once (the cap is the new rate). */
    assert_true(hub_bucket_take(&b, 1, 1, 60000, &ra));
    assert_false(hub_bucket_take(&b, 1, 1, 60000, &ra));
    assert_int_equal(ra, 1);
    /* Huge rates and gaps do not overflow. */
    assert_true(hub_bucket_take(&b, 1000000, 1000000, UINT64_MAX / 2, &ra));
    hub_bucket_fini(&b);
}

enum { THREADS = 4, TRIES = 20000, RATE = 1000 };

struct taker {
    struct hub_bucket *b;
    unsigned ok;
};

static void *take_main(void *arg)
{
    struct taker *t = arg;

    /* The clock stands still: only the first second's worth passes. */
    for (int i = 0; i < TRIES; i++)
        t->ok += hub_bucket_take(t->b, RATE, 1, 5000, NULL);
    return NULL;
}

static void test_ratelimit_bucket_threads(void **state)
{
    struct hub_bucket b;
    struct taker t[THREADS];
    pthread_t th[THREADS];
    unsigned total = 0;

    (void)state;
    hub_bucket_init(&b);
    for (int i = 0; i < THREADS; i++) {
        t[i] = (struct taker){&b, 0};
        assert_int_equal(pthread_create(&th[i], NULL, take_main, &t[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += t[i].ok;
    }
    assert_int_equal(total, RATE);
    hub_bucket_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ratelimit_bucket_refill_and_retry),
        cmocka_unit_test(test_ratelimit_bucket_batch_and_debt),
        cmocka_unit_test(test_ratelimit_bucket_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
