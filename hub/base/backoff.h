/*
 * hub/base/backoff.h - the one exponential backoff schedule: the delay
 * before a retry after attempt failures doubles from a base up to a cap,
 * and may be jittered into the upper half of that step so that many
 * clients that failed together do not retry together.
 *
 * Its callers keep their own constants (and document them): webhook
 * deliveries (1 s to --webhook-backoff-max, server/webhook/webhook_send.c),
 * the Redis backplane's reconnects (100 ms to 5 s, jittered; server/redis/redis.c)
 * and the durable webhook stream's reconnects (500 ms to 10 s, not
 * jittered; server/webhook/webhook_stream.c).
 *
 * Thread: any (pure; the caller brings its random value).
 */
#ifndef HUB_BACKOFF_H
#define HUB_BACKOFF_H

#include <stdint.h>

/*
 * The step after attempt failures (attempt >= 1; 0 counts as 1):
 * base_ms * 2^(attempt-1), capped at max_ms (base_ms 0 counts as 1).
 */
uint64_t hub_backoff_step_ms(unsigned attempt, uint64_t base_ms,
                             uint64_t max_ms);

/*
 * That step d jittered into [d/2, d] by rnd (any 64-bit value, e.g.
 * hub_xorshift64s()): the delay before attempt number attempt + 1.
 */
uint64_t hub_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t max_ms,
                        uint64_t rnd);

#endif
