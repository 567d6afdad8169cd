/*
 * timer/clock.h - an injected monotonic clock.
 *
 * Nothing in timer/ or hub/ reads a clock by itself: whoever needs time is
 * handed a struct hub_clock, so tests drive time by hand with a fake clock.
 * hub_clock_monotonic() is the real one (CLOCK_MONOTONIC); server/ passes it
 * down. Any thread may call a clock; the real one is thread-safe.
 */
#ifndef HUB_CLOCK_H
#define HUB_CLOCK_H

#include <stdint.h>

struct hub_clock {
    /* Monotonic nanoseconds; never goes backwards. */
    uint64_t (*now_ns)(void *ctx);
    void *ctx;
};

static inline uint64_t hub_clock_now_ns(const struct hub_clock *c)
{
    return c->now_ns(c->ctx);
}

static inline uint64_t hub_clock_now_ms(const struct hub_clock *c)
{
    return c->now_ns(c->ctx) / 1000000u;
}

/* Borrowed; a static CLOCK_MONOTONIC clock, valid for the process life. */
const struct hub_clock *hub_clock_monotonic(void);

/* A hand-driven clock for tests: now_ns returns *(uint64_t *)ctx. */
uint64_t hub_clock_fake_now_ns(void *ctx);

#endif
