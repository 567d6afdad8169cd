/*
 * hub/loop/sendq.c - the frame-reference ring behind a session's send queue.
 */
#include "hub/loop/sendq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void hub_sendq_init(struct hub_sendq *q)
{
    memset(q, 0, sizeof(*q));
    q->ring = q->inline_ring;
    q->cap = HUB_SENDQ_INLINE;
}

uint64_t hub_sendq_drop(struct hub_sendq *q)
{
    uint64_t bytes = q->bytes;

    while (q->count) {
        hub_frame_unref(q->ring[q->head]);
        q->head = (q->head + 1) & (q->cap - 1);
        q->count--;
    }
    q->head = q->head_off = 0;
    q->bytes = 0;
    return bytes;
}

void hub_sendq_fini(struct hub_sendq *q)
{
    if (!q->ring)
        return;
    (void)hub_sendq_drop(q);
    if (q->ring != q->inline_ring)
        free(q->ring);
    q->ring = NULL;
    q->cap = 0;
}

int hub_sendq_grow(struct hub_sendq *q)
{
    uint32_t cap = q->cap * 2;
    struct hub_frame **ring = malloc((size_t)cap * sizeof(*ring));

    if (!ring)
        return -ENOMEM;
    for (uint32_t i = 0; i < q->count; i++)
        ring[i] = q->ring[(q->head + i) & (q->cap - 1)];
    if (q->ring != q->inline_ring)
        free(q->ring);
    q->ring = ring;
    q->cap = cap;
    q->head = 0;
    return 0;
}

size_t hub_sendq_cork(const struct hub_sendq *q, unsigned char *buf,
                      size_t cap, const unsigned char **direct,
                      size_t *direct_len, unsigned *frames)
{
    size_t placed = 0;
    uint32_t off = q->head_off;

    *direct = NULL;
    *direct_len = 0;
    *frames = 0;
    for (uint32_t i = 0; i < q->count; i++) {
        struct hub_frame *f = q->ring[(q->head + i) & (q->cap - 1)];
        size_t n = f->len - off;

        if (placed + n > cap) {
            if (placed == 0) {
                *direct = hub_frame_data(f) + off;
                *direct_len = n;
                *frames = 1;
            }
            break;
        }
        memcpy(buf + placed, hub_frame_data(f) + off, n);
        placed += n;
        (*frames)++;
        off = 0;
    }
    return placed;
}

unsigned hub_sendq_consume(struct hub_sendq *q, size_t sent)
{
    unsigned dropped = 0;

    q->bytes -= sent;
    while (sent && q->count) {
        struct hub_frame *f = q->ring[q->head];
        size_t n = f->len - q->head_off;

        if (sent < n) {
            q->head_off += (uint32_t)sent;
            break;
        }
        sent -= n;
        hub_frame_unref(f);
        q->head = (q->head + 1) & (q->cap - 1);
        q->count--;
        q->head_off = 0;
        dropped++;
    }
    return dropped;
}

int hub_sendq_check(const struct hub_sendq *q)
{
    uint64_t bytes = 0;

    if (q->count > q->cap || (q->cap & (q->cap - 1)))
        return -EFAULT;
    for (uint32_t i = 0; i < q->count; i++)
        bytes += q->ring[(q->head + i) & (q->cap - 1)]->len;
    if (bytes - q->head_off != q->bytes)
        return -EFAULT;
    return 0;
}
