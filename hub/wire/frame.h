/*
 * hub/wire/frame.h - an immutable, refcounted, pre-framed WebSocket message.
 *
 * A publish is encoded once into one frame: the WebSocket header
 * (server-to-client, unmasked, FIN + text opcode, 1-, 3- or 9-byte length)
 * followed by the payload. Every recipient's send queue holds a reference;
 * other loops get the same frame through their inbox. Bytes never change
 * after hub_frame_seal().
 *
 * Thread: refcounts are atomic, so any thread may ref/unref. Filling a frame
 * (before it is shared) is single-threaded.
 */
#ifndef HUB_FRAME_H
#define HUB_FRAME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HUB_FRAME_HEADER_MAX 10

struct hub_frame {
    atomic_uint refs;
    uint32_t len;          /* header + payload bytes, valid after seal */
    uint32_t payload_len;
    uint32_t cap;          /* payload capacity */
    uint8_t head;          /* offset of the first header byte in bytes[] */
    /* Two messages in one buffer (recovery's marker and its event, r
     * below): never compressed as one message. */
    uint8_t pair;
    /*
     * The frame as compressing sessions get it (permessage-deflate,
     * hub/loop/compress.h): NULL until a loop first needs it, then the
     * compressed variant (one reference held here, dropped with this
     * frame) or HUB_FRAME_PLAIN when f goes as it is (too small, or not
     * smaller compressed). Set once, by compare-and-swap: any loop
     * holding a reference may be the first.
     */
    _Atomic(struct hub_frame *) z;
    /*
     * Recovery (hub/channel/history.h, hub/loop/resume.h): this
     * publication's id in its channel's history, set before the frame is
     * shared (hseq 0: the channel keeps none; horigin borrowed from the
     * history store, which outlives every frame), and the frame a resuming
     * session gets instead: the lubdub:id marker and this frame in one
     * buffer (pair set), made by the first loop that needs it and
     * installed by compare-and-swap like z; its own z is the marker and
     * this frame's compressed variant.
     */
    uint64_t hseq;
    const char *horigin;
    _Atomic(struct hub_frame *) r;
    unsigned char bytes[]; /* HUB_FRAME_HEADER_MAX + cap */
};

/* The marker of a frame that compressing sessions get as it is. */
extern struct hub_frame hub_frame_plain_mark;
#define HUB_FRAME_PLAIN (&hub_frame_plain_mark)

/* Owned (one reference); NULL on allocation failure. */
struct hub_frame *hub_frame_create(size_t payload_cap);
/* Owned; a sealed text frame holding a copy of payload. */
struct hub_frame *hub_frame_create_text(const void *payload, size_t len);
/* Owned; the wire bytes of two whole frames, a then b, sent as one (pair
 * set: each stays its own message). NULL on allocation failure. */
struct hub_frame *hub_frame_create_pair(const unsigned char *a, size_t alen,
                                        const unsigned char *b, size_t blen);
/* Borrowed; where to write up to cap payload bytes before sealing. */
static inline char *hub_frame_payload(struct hub_frame *f)
{
    return (char *)f->bytes + HUB_FRAME_HEADER_MAX;
}
/* Write the header for payload_len bytes of text; the frame is now sealed. */
void hub_frame_seal(struct hub_frame *f, size_t payload_len);
/* The same with the header's first byte given (FIN, RSV bits, opcode). */
void hub_frame_seal_op(struct hub_frame *f, size_t payload_len,
                       unsigned char first);

/* Borrowed; the wire bytes (header + payload) of a sealed frame. */
static inline const unsigned char *hub_frame_data(const struct hub_frame *f)
{
    return f->bytes + f->head;
}

static inline struct hub_frame *hub_frame_ref(struct hub_frame *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

/* Add n references at once (a loop fanning out to n local recipients). */
static inline void hub_frame_ref_n(struct hub_frame *f, unsigned n)
{
    atomic_fetch_add_explicit(&f->refs, n, memory_order_relaxed);
}

void hub_frame_unref(struct hub_frame *f);

#endif
