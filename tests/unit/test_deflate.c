/*
 * tests/unit/test_deflate.c - hub/wire/deflate.h: a frame's compressed
 * variant is RFC 7692's form (FIN, RSV1, text; raw deflate ending in a
 * sync flush with its 00 00 ff ff cut) and inflates back byte for byte
 * with a stock zlib inflater; a frame that would not shrink has none;
 * inbound, a message inflates whole, a deflate bomb stops at the buffer,
 * and corrupt, cut short or final-block (BFINAL) streams are told apart.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "deflate_client.h"

#include "hub/wire/deflate.h"

static const char json[] =
    "{\"event\":\"App\\\\Events\\\\OrderShipped\",\"channel\":\"private-orders"
    "\",\"data\":\"{\\\"order\\\":{\\\"id\\\":1,\\\"status\\\":\\\"shipped\\\""
    ",\\\"items\\\":[{\\\"id\\\":1,\\\"sku\\\":\\\"A\\\",\\\"quantity\\\":1},{"
    "\\\"id\\\":2,\\\"sku\\\":\\\"B\\\",\\\"quantity\\\":1},{\\\"id\\\":3,\\\""
    "sku\\\":\\\"C\\\",\\\"quantity\\\":1}]}}\"}";

/* A stock inflater as a client runs it (RFC 7692 section 7.2.2). */
static size_t stock_inflate(const unsigned char *in, size_t len,
                            unsigned char *out, size_t cap)
{
    z_stream z;
    unsigned char *buf = malloc(len + 4);

    memcpy(buf, in, len);
    memcpy(buf + len, "\x00\x00\xff\xff", 4);
    memset(&z, 0, sizeof(z));
    assert_int_equal(inflateInit2(&z, -15), Z_OK);
    z.next_in = buf;
    z.avail_in = (uInt)len + 4;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_true(inflate(&z, Z_SYNC_FLUSH) == Z_OK);
    assert_int_equal(z.avail_in, 0);
    inflateEnd(&z);
    free(buf);
    return cap - z.avail_out;
}

static void test_deflate_frame_is_rfc7692_and_inflates_back(void **state)
{
    struct hub_deflate *d = hub_deflate_new();
    struct hub_frame *f = hub_frame_create_text(json, strlen(json));
    struct hub_frame *z, *z2;
    unsigned char out[4096];
    const unsigned char *w;
    size_t hl, n;

    (void)state;
    z = hub_deflate_frame(d, f);
    assert_non_null(z);
    w = hub_frame_data(z);
    assert_int_equal(w[0], 0xC1); /* FIN, RSV1, text */
    assert_true(z->len < f->len);
    hl = (w[1] & 0x7f) == 126 ? 4 : 2;
    assert_int_equal(z->len, hl + z->payload_len);
    n = stock_inflate(w + hl, z->payload_len, out, sizeof(out));
    assert_int_equal(n, strlen(json));
    assert_memory_equal(out, json, n);
    /* No context is kept: the same frame compresses the same way again. */
    z2 = hub_deflate_frame(d, f);
    assert_non_null(z2);
    assert_int_equal(z2->len, z->len);
    assert_memory_equal(hub_frame_data(z2), hub_frame_data(z), z->len);
    hub_frame_unref(z2);
    hub_frame_unref(z);
    hub_frame_unref(f);
    hub_deflate_free(d);
}

static void test_deflate_frame_not_smaller_has_no_variant(void **state)
{
    struct hub_deflate *d = hub_deflate_new();
    unsigned char noise[300];
    struct hub_frame *f;
    uint32_t x = 12345;

    (void)state;
    for (size_t i = 0; i < sizeof(noise); i++) {
        x = x * 1103515245u + 12345u;
        noise[i] = (unsigned char)(x >> 24);
    }
    f = hub_frame_create_text(noise, sizeof(noise));
    assert_null(hub_deflate_frame(d, f));
    hub_frame_unref(f);
    f = hub_frame_create_text("a", 1);
    assert_null(hub_deflate_frame(d, f));
    hub_frame_unref(f);
    hub_deflate_free(d);
}

static void test_deflate_inflate_round_trip_and_limits(void **state)
{
    struct hub_deflate *d = hub_deflate_new();
    unsigned char c[4096], out[4096];
    size_t n, got = 0;

    (void)state;
    n = client_deflate(json, strlen(json), c, sizeof(c), false);
    assert_int_equal(hub_inflate(d, c, n, out, sizeof(out), &got), 0);
    assert_int_equal(got, strlen(json));
    assert_memory_equal(out, json, got);
    /* Exactly the limit fits when the buffer is the limit plus one. */
    assert_int_equal(hub_inflate(d, c, n, out, strlen(json) + 1, &got), 0);
    /* One byte short: too big. */
    assert_int_equal(hub_inflate(d, c, n, out, strlen(json), &got),
                     -EMSGSIZE);
    /* A client that ends its message with a final block (7.2.3.3). */
    n = client_deflate(json, strlen(json), c, sizeof(c), true);
    assert_int_equal(hub_inflate(d, c, n, out, sizeof(out), &got), 0);
    assert_int_equal(got, strlen(json));
    hub_deflate_free(d);
}

static void test_deflate_inflate_bomb_stops_at_the_buffer(void **state)
{
    struct hub_deflate *d = hub_deflate_new();
    size_t big = 10u << 20, n, got = 0;
    unsigned char *zeros = calloc(1, big), *c = malloc(64 * 1024);
    unsigned char *out = malloc(65537);

    (void)state;
    n = client_deflate(zeros, big, c, 64 * 1024, false);
    assert_true(n < 64 * 1024);
    assert_int_equal(hub_inflate(d, c, n, out, 65537, &got), -EMSGSIZE);
    /* The state is reset for the next message. */
    n = client_deflate(json, strlen(json), c, 64 * 1024, false);
    assert_int_equal(hub_inflate(d, c, n, out, 65537, &got), 0);
    assert_int_equal(got, strlen(json));
    free(zeros);
    free(c);
    free(out);
    hub_deflate_free(d);
}

static void test_deflate_inflate_corrupt_and_cut_short_refused(void **state)
{
    struct hub_deflate *d = hub_deflate_new();
    unsigned char c[4096], out[4096];
    size_t n, got = 0;

    (void)state;
    /* BTYPE 11 is reserved: not deflate data. */
    assert_int_equal(hub_inflate(d, "\xff\xff\xff\xff", 4, out, sizeof(out),
                                 &got), -EINVAL);
    /* A message cut in the middle of its block. */
    n = client_deflate(json, strlen(json), c, sizeof(c), false);
    assert_int_equal(hub_inflate(d, c, n / 2, out, sizeof(out), &got),
                     -EINVAL);
    /* Nothing at all is an empty stored block once the tail is added... */
    assert_int_equal(hub_inflate(d, "", 0, out, sizeof(out), &got), -EINVAL);
    /* ... but 0x00 (a stored block header) with the tail is empty text. */
    assert_int_equal(hub_inflate(d, "\x00", 1, out, sizeof(out), &got), 0);
    assert_int_equal(got, 0);
    hub_deflate_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deflate_frame_is_rfc7692_and_inflates_back),
        cmocka_unit_test(test_deflate_frame_not_smaller_has_no_variant),
        cmocka_unit_test(test_deflate_inflate_round_trip_and_limits),
        cmocka_unit_test(test_deflate_inflate_bomb_stops_at_the_buffer),
        cmocka_unit_test(test_deflate_inflate_corrupt_and_cut_short_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
