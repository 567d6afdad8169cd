/*
 * tests/unit/deflate_client.h - a client's compressed message as RFC 7692
 * section 7.2.1 makes it (raw deflate, sync flush, 00 00 ff ff cut) or,
 * with final, ending in a BFINAL block (section 7.2.3.3), through the
 * system's zlib: what the unit tests feed the hub's inflate.
 */
#ifndef TESTS_UNIT_DEFLATE_CLIENT_H
#define TESTS_UNIT_DEFLATE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <zlib.h>

/* Bytes written to out (cap bytes); the test fails when zlib does. */
static inline size_t client_deflate(const void *in, size_t len,
                                    unsigned char *out, size_t cap,
                                    bool final)
{
    z_stream z;
    size_t n;

    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, -15, 9,
                                  Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_true(deflate(&z, final ? Z_FINISH : Z_SYNC_FLUSH) >= 0);
    n = cap - z.avail_out;
    deflateEnd(&z);
    if (final)
        return n;
    assert_memory_equal(out + n - 4, "\x00\x00\xff\xff", 4);
    return n - 4;
}

#endif
