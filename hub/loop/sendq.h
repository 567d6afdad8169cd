/*
 * hub/loop/sendq.h - a session's outbound queue: a ring of frame references.
 *
 * The ring starts in the session itself (HUB_SENDQ_INLINE slots) and
 * doubles on the heap when a burst needs more. bytes counts what is queued
 * and not yet written; head_off is how much of the head frame a partial
 * write already took. The queue knows nothing of loops or limits: the
 * session (hub/loop/session.c) bounds it, accounts its bytes and asks for
 * writes.
 *
 * Thread: the owning session's loop only.
 */
#ifndef HUB_SENDQ_H
#define HUB_SENDQ_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/wire/frame.h"

#define HUB_SENDQ_INLINE 2

struct hub_sendq {
    struct hub_frame **ring;   /* inline[] until a burst needs more */
    uint32_t cap;          /* power of two */
    uint32_t head, count;
    uint32_t head_off;     /* bytes of ring[head] already sent */
    uint64_t bytes;        /* queued, unsent */
    struct hub_frame *inline_ring[HUB_SENDQ_INLINE];
};

/* An empty queue on its inline ring (q may be uninitialised). */
void hub_sendq_init(struct hub_sendq *q);
/* Drop everything and free a grown ring; the queue is then unusable
 * until hub_sendq_init(). Idempotent. */
void hub_sendq_fini(struct hub_sendq *q);

/*
 * Append f. take_ref false: the queue holds f without taking a reference
 * (the caller adds it later, see hub_session_push()). 0 or -ENOMEM (the
 * ring could not grow; nothing changed).
 */
int hub_sendq_grow(struct hub_sendq *q); /* double the ring; 0 or -ENOMEM */

/* Inline: a fan-out pushes once per recipient, and only growth is rare. */
static inline int hub_sendq_push(struct hub_sendq *q, struct hub_frame *f,
                                 bool take_ref)
{
    if (q->count == q->cap && hub_sendq_grow(q))
        return -ENOMEM;
    q->ring[(q->head + q->count) & (q->cap - 1)] =
        take_ref ? hub_frame_ref(f) : f;
    q->count++;
    q->bytes += f->len;
    return 0;
}
/* Drop every queued frame; returns the unsent bytes dropped. */
uint64_t hub_sendq_drop(struct hub_sendq *q);

/*
 * Fill buf with as many whole queued frames as fit, from head_off on (a
 * frame larger than cap is returned by pointer in *direct instead, with
 * *direct_len bytes and *frames = 1). Returns the bytes placed in buf.
 * Does not consume: hub_sendq_consume() does, after the write.
 */
size_t hub_sendq_cork(const struct hub_sendq *q, unsigned char *buf,
                      size_t cap, const unsigned char **direct,
                      size_t *direct_len, unsigned *frames);
/* sent bytes of the queue were written: drop the frames they finish and
 * move head_off. Returns the frames dropped. */
unsigned hub_sendq_consume(struct hub_sendq *q, size_t sent);

/* Check the ring's invariants; 0 or -EFAULT. For tests. */
int hub_sendq_check(const struct hub_sendq *q);

#endif
