/*
 * timer/clock.c - the real monotonic clock and the fake one tests use.
 * Thread-safe: both only read.
 */
#include "timer/clock.h"

#include <time.h>

static uint64_t monotonic_now_ns(void *ctx)
{
    struct timespec ts;

    (void)ctx;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const struct hub_clock monotonic = { monotonic_now_ns, NULL };

const struct hub_clock *hub_clock_monotonic(void)
{
    return &monotonic;
}

uint64_t hub_clock_fake_now_ns(void *ctx)
{
    return *(const uint64_t *)ctx;
}
