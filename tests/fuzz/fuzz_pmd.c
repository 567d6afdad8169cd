/*
 * tests/fuzz/fuzz_pmd.c - libFuzzer target for what a hostile client's
 * permessage-deflate reaches: the Sec-WebSocket-Extensions offer
 * (hub_pmd_negotiate, hub/wire/pmd.h) and a compressed message's bytes
 * (hub_inflate, hub/wire/deflate.h), and the hub's own compression of a
 * frame made of the input (hub_deflate_frame) read back.
 *
 * Input: [mode] [cap lo] [cap hi] [bytes...]
 *   mode & 3 == 0  negotiate bytes: an accepted answer starts with
 *                  "permessage-deflate; server_no_context_takeover;
 *                  client_no_context_takeover", fits HUB_PMD_ANSWER_MAX,
 *                  and is itself an offer that gets the same answer
 *   mode & 3 == 1  inflate bytes into a buffer of cap + 1 bytes (cap from
 *                  the next two bytes, at most 64 KiB): 0 with at most cap
 *                  + 1 bytes, -EMSGSIZE or -EINVAL, never anything else;
 *                  then the same stream state inflates a valid message
 *   otherwise      bytes as a text frame: its compressed variant, when it
 *                  has one, is smaller, carries RSV1, and inflates back to
 *                  the bytes exactly
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/wire/deflate.h"
#include "hub/wire/pmd.h"
#include "tests/fuzz/fuzz.h"

static const char prefix[] = "permessage-deflate; server_no_context_takeover; "
                             "client_no_context_takeover";

static void negotiate(const uint8_t *in, size_t n)
{
    char out[HUB_PMD_ANSWER_MAX], again[HUB_PMD_ANSWER_MAX];

    if (!hub_pmd_negotiate((const char *)in, n, out, sizeof(out)))
        return;
    CHECK(strlen(out) < sizeof(out));
    CHECK(strncmp(out, prefix, sizeof(prefix) - 1) == 0);
    CHECK(hub_pmd_negotiate(out, strlen(out), again, sizeof(again)) == 1);
    CHECK(strcmp(out, again) == 0);
}

static void inflate_any(struct hub_deflate *d, const uint8_t *in, size_t n,
                        size_t cap)
{
    /* An exact-size copy: ASan sees any read past the message. */
    uint8_t *copy = malloc(n ? n : 1), *out = malloc(cap + 1);
    size_t got = (size_t)-1;
    int rc;

    memcpy(copy, in, n);
    rc = hub_inflate(d, copy, n, out, cap + 1, &got);
    CHECK(rc == 0 || rc == -EMSGSIZE || rc == -EINVAL);
    if (rc == 0)
        CHECK(got <= cap);
    /* 0x00 with the tail is an empty stored block: empty text. */
    CHECK(hub_inflate(d, "\x00", 1, out, cap + 1, &got) == 0 && got == 0);
    free(copy);
    free(out);
}

static void round_trip(struct hub_deflate *d, const uint8_t *in, size_t n)
{
    struct hub_frame *f = hub_frame_create_text(in, n), *z;
    const unsigned char *w;
    uint8_t *out;
    size_t hl, got = 0;

    CHECK(f != NULL);
    z = hub_deflate_frame(d, f);
    if (z) {
        w = hub_frame_data(z);
        CHECK(w[0] == 0xC1);
        CHECK(z->len < f->len);
        hl = z->len - z->payload_len;
        out = malloc(n + 1);
        CHECK(hub_inflate(d, w + hl, z->payload_len, out, n + 1, &got) == 0);
        CHECK(got == n && memcmp(out, in, n) == 0);
        free(out);
        hub_frame_unref(z);
    }
    hub_frame_unref(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct hub_deflate *d;

    if (size < 3)
        return 0;
    if (!d)
        d = hub_deflate_new(); /* one per process, as one per loop */
    CHECK(d != NULL);
    switch (data[0] & 3) {
    case 0:
        negotiate(data + 3, size - 3);
        break;
    case 1:
        inflate_any(d, data + 3, size - 3,
                    ((size_t)data[1] | (size_t)data[2] << 8));
        break;
    default:
        round_trip(d, data + 3, size - 3);
    }
    return 0;
}
