/*
 * tests/unit/fnv_flood.h - names that collide under the hub's old channel
 * hash (FNV-1a 64 over (app, name), unkeyed), for the test and the bench
 * that show the keyed hash spreads them (tests/unit/test_hash.c,
 * bench/bench_hash.c; docs/RELIABILITY.md, "Hash flooding").
 *
 * FNV-1a's low 16 bits after a byte depend only on its low 16 bits before
 * (xor and multiply carry upwards only): a machine of 65,536 states, so
 * two 3-byte blocks that lead from one state to the same state are a
 * birthday search, a few hundred blocks. (Two 2-byte blocks of printable
 * bytes never meet: the multiplier spreads their difference too far.)
 * Such pairs in a row, one per stage, give 2^stages names of one
 * low-16-bit hash (a Joux multicollision), built in about a millisecond;
 * the old tables picked buckets from those low bits.
 *
 * Header-only (static functions). Thread: the caller's.
 */
#ifndef TESTS_UNIT_FNV_FLOOD_H
#define TESTS_UNIT_FNV_FLOOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { FNV_FLOOD_PREFIX = 3, FNV_FLOOD_BLOCK = 3 };
#define FNV_FLOOD_NAME_LEN(stages) \
    (FNV_FLOOD_PREFIX + FNV_FLOOD_BLOCK * (stages))

static const char fnv_flood_charset[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

/* The old hub_chan_hash, kept only to build names that collide under it. */
static inline uint64_t fnv_flood_old_hash(unsigned app, const char *name,
                                          size_t len)
{
    uint64_t h = 1469598103934665603ull ^ app;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The old hash's low 16 bits after one more byte. */
static inline uint16_t fnv_flood_step16(uint16_t l, unsigned char b)
{
    return (uint16_t)((l ^ b) * (1099511628211ull & 0xffff));
}

/*
 * The two blocks of each stage, after the prefix "hf-" of app 0: pick[st]
 * [0] and pick[st][1] lead the low 16 bits to the same state. false when
 * a stage found no pair (never seen; a caller fails on it).
 */
static inline bool fnv_flood_picks(char (*pick)[2][FNV_FLOOD_BLOCK],
                                   unsigned stages)
{
    static int seen[1 << 16];
    uint16_t l = (uint16_t)fnv_flood_old_hash(0, "hf-", FNV_FLOOD_PREFIX);

    for (unsigned st = 0; st < stages; st++) {
        bool found = false;

        memset(seen, -1, sizeof(seen));
        for (int i = 0; i < 64 * 64 * 64 && !found; i++) {
            uint16_t e = l;

            for (int b = FNV_FLOOD_BLOCK - 1; b >= 0; b--)
                e = fnv_flood_step16(
                    e, (unsigned char)fnv_flood_charset[(i >> (6 * b)) & 63]);
            if (seen[e] < 0) {
                seen[e] = i;
                continue;
            }
            for (int b = 0; b < FNV_FLOOD_BLOCK; b++) {
                int sh = 6 * (FNV_FLOOD_BLOCK - 1 - b);

                pick[st][0][b] = fnv_flood_charset[(seen[e] >> sh) & 63];
                pick[st][1][b] = fnv_flood_charset[(i >> sh) & 63];
            }
            l = e;
            found = true;
        }
        if (!found)
            return false;
    }
    return true;
}

/* Name n of the flood (n < 2^stages) into out, not terminated. */
static inline void fnv_flood_name(char *out,
                                  char (*pick)[2][FNV_FLOOD_BLOCK],
                                  unsigned stages, unsigned n)
{
    memcpy(out, "hf-", FNV_FLOOD_PREFIX);
    for (unsigned st = 0; st < stages; st++)
        memcpy(out + FNV_FLOOD_PREFIX + FNV_FLOOD_BLOCK * st,
               pick[st][(n >> st) & 1], FNV_FLOOD_BLOCK);
}

#endif
