/*
 * bench/fnv_hash.c - hub/base/hash.h's functions as they were before the key:
 * unkeyed FNV-1a 64, the tweak (an app index) folded into the offset
 * basis, exactly the old hub_chan_hash and webhook key hash. Only
 * bench_hash_fnv links it (bench/CMakeLists.txt), to measure the old
 * tables beside the new in one run; never the hub.
 *
 * Thread: any (no state).
 */
#include "hub/base/hash.h"

int hub_hash_init(void)
{
    return 0;
}

void hub_hash_set_key(const unsigned char key[HUB_HASH_KEY_BYTES])
{
    (void)key;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t hub_hash(const void *p, size_t n)
{
    return fnv1a(1469598103934665603ull, p, n);
}

uint64_t hub_hash_app(unsigned tweak, const void *p, size_t n)
{
    return fnv1a(1469598103934665603ull ^ tweak, p, n);
}
