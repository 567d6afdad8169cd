/*
 * hub/base/hash.c - the process key and SipHash-2-4 through libsodium
 * (hub/base/hash.h). The key is a plain array: it is written before any other
 * thread exists and only read afterwards.
 */
#include "hub/base/hash.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>

_Static_assert(crypto_shorthash_siphash24_KEYBYTES == HUB_HASH_KEY_BYTES,
               "SipHash-2-4 takes a 16-byte key");
_Static_assert(crypto_shorthash_siphash24_BYTES == sizeof(uint64_t),
               "SipHash-2-4 gives 64 bits");

static unsigned char key[HUB_HASH_KEY_BYTES];

int hub_hash_init(void)
{
    /* sodium_init() picks the random source (getrandom on Linux, which
     * blocks only until the kernel's pool is first seeded); randombytes
     * aborts the process rather than return a weak key. */
    if (sodium_init() < 0)
        return -EIO;
    randombytes_buf(key, sizeof(key));
    return 0;
}

void hub_hash_set_key(const unsigned char k[HUB_HASH_KEY_BYTES])
{
    memcpy(key, k, sizeof(key));
}

uint64_t hub_hash(const void *p, size_t n)
{
    unsigned char out[crypto_shorthash_siphash24_BYTES];
    uint64_t h;

    (void)crypto_shorthash_siphash24(out, p, n, key);
    /* The bytes as the host holds a uint64_t: only this process reads the
     * value, so its byte order does not matter. */
    memcpy(&h, out, sizeof(h));
    return h;
}

uint64_t hub_hash_app(unsigned tweak, const void *p, size_t n)
{
    /* The golden-ratio multiplier: odd, so distinct tweaks stay distinct,
     * and its low bits differ for neighbouring apps. */
    return hub_hash(p, n) ^ ((uint64_t)tweak * 0x9E3779B97F4A7C15ull);
}
