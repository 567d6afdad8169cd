/*
 * hub/base/backoff.c - the exponential backoff schedule of
 * hub/base/backoff.h: doubling from a base to a cap, and that step
 * jittered into its upper half. Pure arithmetic.
 *
 * Thread: any.
 */
#include "hub/base/backoff.h"

uint64_t hub_backoff_step_ms(unsigned attempt, uint64_t base_ms,
                             uint64_t max_ms)
{
    uint64_t d = base_ms ? base_ms : 1;

    /* d < max_ms before each doubling: d stays below 2 * max_ms, so it
     * cannot overflow while max_ms <= 2^63. */
    for (unsigned i = 1; i < attempt && d < max_ms; i++)
        d *= 2;
    return d > max_ms ? max_ms : d;
}

uint64_t hub_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t max_ms,
                        uint64_t rnd)
{
    uint64_t d = hub_backoff_step_ms(attempt, base_ms, max_ms);

    /* Uniform over [d/2, d], both ends included. */
    return d / 2 + (d - d / 2 ? rnd % (d - d / 2 + 1) : 0);
}
