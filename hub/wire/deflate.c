/*
 * hub/wire/deflate.c - hub/wire/deflate.h over zlib (windowBits -15: raw
 * deflate, as RFC 7692 carries it). zlib rather than libdeflate: both
 * give the same ratio on the bench corpus (487 and 488 B of 1,278), and
 * neither is faster in every run (libdeflate 0.85-1.7x zlib's speed per
 * message over three sittings: docs/BENCHMARKS.md, "Compression"), but
 * libdeflate's output always ends in a block with BFINAL set, while
 * deflate(Z_SYNC_FLUSH) gives the form every client inflates (section
 * 7.2.1), and zlib's streaming inflate takes the message and its 4-byte
 * tail as two inputs, with no copy. The compression is paid once per
 * publication, not per recipient.
 */
#include "hub/wire/deflate.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* zlib's default level: on the corpus, level 1 costs 0.78x the time for
 * 5 % more bytes, and bytes are paid per recipient, time per publication. */
#define DEFLATE_LEVEL 6
#define DEFLATE_MEMLEVEL 8

struct hub_deflate {
    z_stream def, inf;
    bool def_ok, inf_ok;          /* the stream was initialised */
};

static const unsigned char tail[4] = { 0x00, 0x00, 0xff, 0xff };

struct hub_deflate *hub_deflate_new(void)
{
    return calloc(1, sizeof(struct hub_deflate));
}

void hub_deflate_free(struct hub_deflate *d)
{
    if (!d)
        return;
    if (d->def_ok)
        deflateEnd(&d->def);
    if (d->inf_ok)
        inflateEnd(&d->inf);
    free(d);
}

static bool def_ready(struct hub_deflate *d)
{
    if (d->def_ok)
        return deflateReset(&d->def) == Z_OK;
    memset(&d->def, 0, sizeof(d->def));
    d->def_ok = deflateInit2(&d->def, DEFLATE_LEVEL, Z_DEFLATED, -15,
                             DEFLATE_MEMLEVEL, Z_DEFAULT_STRATEGY) == Z_OK;
    return d->def_ok;
}

struct hub_frame *hub_deflate_frame(struct hub_deflate *d,
                                    const struct hub_frame *f)
{
    /* Worth sending only when smaller, header included: the variant's
     * payload gets at most f's payload length minus one, plus the 4 bytes
     * of tail the flush writes and we cut. */
    size_t in_len = f->payload_len, cap = in_len + sizeof(tail);
    struct hub_frame *z;
    size_t out;

    if (in_len < 2 || !def_ready(d))
        return NULL;
    z = hub_frame_create(cap);
    if (!z)
        return NULL;
    d->def.next_in = (Bytef *)(f->bytes + HUB_FRAME_HEADER_MAX);
    d->def.avail_in = (uInt)in_len;
    d->def.next_out = (Bytef *)hub_frame_payload(z);
    d->def.avail_out = (uInt)cap;
    /* With all the input given and the flush asked for, a deflate that
     * leaves no output room may not have finished: then it is no smaller. */
    if (deflate(&d->def, Z_SYNC_FLUSH) != Z_OK || d->def.avail_in ||
        d->def.avail_out == 0) {
        hub_frame_unref(z);
        return NULL;
    }
    out = cap - d->def.avail_out;
    if (out < sizeof(tail) ||
        memcmp(hub_frame_payload(z) + out - sizeof(tail), tail,
               sizeof(tail)) != 0) {
        hub_frame_unref(z);
        return NULL;
    }
    out -= sizeof(tail);
    hub_frame_seal_op(z, out, 0xC1); /* FIN, RSV1, text */
    if (z->len >= f->len) {
        hub_frame_unref(z);
        return NULL;
    }
    return z;
}

static bool inf_ready(struct hub_deflate *d)
{
    if (d->inf_ok)
        return inflateReset(&d->inf) == Z_OK;
    memset(&d->inf, 0, sizeof(d->inf));
    d->inf_ok = inflateInit2(&d->inf, -15) == Z_OK;
    return d->inf_ok;
}

/* One input through inflate. 1: this input is used up; 0: the stream
 * ended (a block with BFINAL: the rest is ignored, RFC 7692 7.2.3.3);
 * -EMSGSIZE: out is full with input left; -EINVAL: bad data. */
static int inflate_some(z_stream *z, const void *in, size_t len)
{
    int rc;

    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)len;
    while (z->avail_in) {
        if (z->avail_out == 0)
            return -EMSGSIZE;
        /* Z_BLOCK: stop at each block's end, so that after the tail the
         * stream can be checked to end on a block boundary. */
        rc = inflate(z, Z_BLOCK);
        if (rc == Z_STREAM_END)
            return 0;
        if (rc == Z_BUF_ERROR && z->avail_out == 0)
            return -EMSGSIZE;
        if (rc != Z_OK)
            return -EINVAL;
    }
    return 1;
}

int hub_inflate(struct hub_deflate *d, const void *in, size_t len, void *out,
                size_t cap, size_t *out_len)
{
    z_stream *z = &d->inf;
    int rc;

    if (len > UINT32_MAX || cap > UINT32_MAX)
        return -EMSGSIZE;
    if (!inf_ready(d))
        return -ENOMEM;
    z->next_out = out;
    z->avail_out = (uInt)cap;
    rc = inflate_some(z, in, len);
    if (rc == 1)
        rc = inflate_some(z, tail, sizeof(tail));
    if (rc < 0)
        return rc;
    /* The tail is an empty stored block: a message cut short leaves the
     * stream inside a block (data_type's 128: waiting for a block header). */
    if (rc == 1 && !(z->data_type & 128))
        return -EINVAL;
    /* Inflate stops when out is full: it may hold more. One byte of room
     * more would tell, but a full buffer is already at the limit (the
     * caller's cap is the limit plus one). */
    *out_len = cap - z->avail_out;
    if (z->avail_out == 0)
        return -EMSGSIZE;
    return 0;
}
