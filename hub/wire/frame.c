/*
 * hub/wire/frame.c - pre-framed shared buffers. The header is written right in
 * front of the payload so the wire bytes are contiguous and one write can
 * send them, or a copy into a cork buffer can take them in one memcpy.
 */
#include "hub/wire/frame.h"

#include <stdlib.h>
#include <string.h>

struct hub_frame hub_frame_plain_mark;

struct hub_frame *hub_frame_create(size_t payload_cap)
{
    struct hub_frame *f;

    if (payload_cap > UINT32_MAX - HUB_FRAME_HEADER_MAX)
        return NULL;
    f = malloc(sizeof(*f) + HUB_FRAME_HEADER_MAX + payload_cap);
    if (!f)
        return NULL;
    atomic_init(&f->refs, 1);
    f->len = 0;
    f->payload_len = 0;
    f->cap = (uint32_t)payload_cap;
    f->head = HUB_FRAME_HEADER_MAX;
    f->pair = 0;
    atomic_init(&f->z, NULL);
    f->hseq = 0;
    f->horigin = NULL;
    atomic_init(&f->r, NULL);
    return f;
}

struct hub_frame *hub_frame_create_pair(const unsigned char *a, size_t alen,
                                        const unsigned char *b, size_t blen)
{
    struct hub_frame *f;

    if (alen > UINT32_MAX / 2 || blen > UINT32_MAX / 2)
        return NULL;
    f = hub_frame_create(alen + blen);
    if (!f)
        return NULL;
    memcpy(f->bytes + f->head, a, alen);
    memcpy(f->bytes + f->head + alen, b, blen);
    f->len = (uint32_t)(alen + blen);
    f->payload_len = f->len;
    f->pair = 1;
    return f;
}

struct hub_frame *hub_frame_create_text(const void *payload, size_t len)
{
    struct hub_frame *f = hub_frame_create(len);

    if (!f)
        return NULL;
    memcpy(hub_frame_payload(f), payload, len);
    hub_frame_seal(f, len);
    return f;
}

void hub_frame_seal(struct hub_frame *f, size_t payload_len)
{
    hub_frame_seal_op(f, payload_len, 0x81); /* FIN, text */
}

void hub_frame_seal_op(struct hub_frame *f, size_t payload_len,
                       unsigned char first)
{
    unsigned char *p;
    unsigned hlen;

    if (payload_len < 126)
        hlen = 2;
    else if (payload_len <= 0xffff)
        hlen = 4;
    else
        hlen = 10;
    f->head = (uint8_t)(HUB_FRAME_HEADER_MAX - hlen);
    p = f->bytes + f->head;
    p[0] = first;
    if (hlen == 2) {
        p[1] = (unsigned char)payload_len;
    } else if (hlen == 4) {
        p[1] = 126;
        p[2] = (unsigned char)(payload_len >> 8);
        p[3] = (unsigned char)payload_len;
    } else {
        p[1] = 127;
        for (int i = 0; i < 8; i++)
            p[2 + i] = (unsigned char)((uint64_t)payload_len >> (56 - 8 * i));
    }
    f->payload_len = (uint32_t)payload_len;
    f->len = (uint32_t)(payload_len + hlen);
}

void hub_frame_unref(struct hub_frame *f)
{
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) {
        struct hub_frame *z = atomic_load_explicit(&f->z,
                                                   memory_order_acquire);

        struct hub_frame *r = atomic_load_explicit(&f->r,
                                                   memory_order_acquire);

        if (z && z != HUB_FRAME_PLAIN)
            hub_frame_unref(z);
        if (r)
            hub_frame_unref(r);
        free(f);
    }
}
