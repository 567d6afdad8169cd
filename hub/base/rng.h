/*
 * hub/base/rng.h - xorshift64*, the one small generator the hub uses where it
 * needs spread and not secrecy (loop jitter and socket ids, hub/loop/loop.h;
 * webhook retry jitter, server/webhook/webhook_send.c; backplane reconnect jitter
 * and epochs, server/redis/redis.c and redis_pub.c). Inline: none of them calls
 * into a common file for it. The state is one uint64_t, never 0.
 */
#ifndef HUB_RNG_H
#define HUB_RNG_H

#include <stdint.h>

static inline uint64_t hub_xorshift64s(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

#endif
