/*
 * hub/wire/deflate.h - permessage-deflate's compression and decompression
 * (RFC 7692 section 7.2) over zlib, for messages taken whole: no context
 * is kept from one message to the next (both sides agree to
 * no_context_takeover at the handshake, hub/wire/pmd.h), so one deflate
 * stream and one inflate stream serve every session of a loop, reset
 * before each message.
 *
 * Outbound, a frame's payload is deflated with Z_SYNC_FLUSH and the
 * trailing 00 00 ff ff removed (section 7.2.1), into a new frame with
 * RSV1 set; the same bytes go to every compressing recipient. Inbound, a
 * message's payload plus the 00 00 ff ff tail is inflated into a buffer
 * whose size bounds what it may become (a deflate bomb costs at most
 * that buffer).
 *
 * Memory: nothing until the first message; then zlib's deflate state at
 * level 6, memLevel 8 (about 268 KiB) and its inflate state with a 32 KiB
 * window (about 40 KiB), per loop, freed with the loop.
 *
 * Thread: one struct hub_deflate belongs to one thread (a loop's).
 */
#ifndef HUB_DEFLATE_H
#define HUB_DEFLATE_H

#include <stddef.h>

#include "hub/wire/frame.h"

struct hub_deflate;

/* Owned; NULL when out of memory. */
struct hub_deflate *hub_deflate_new(void);
void hub_deflate_free(struct hub_deflate *d);

/*
 * The compressed variant of sealed text frame f: a new frame (one
 * reference, owned) whose header has FIN, RSV1 and the text opcode. NULL
 * when the variant would not be smaller than f or memory ran out (the
 * caller then sends f).
 */
struct hub_frame *hub_deflate_frame(struct hub_deflate *d,
                                    const struct hub_frame *f);

/*
 * Inflate one compressed message (in, len: the payload as received,
 * without the tail) into out, which holds cap bytes. 0 with *out_len set;
 * -EMSGSIZE when it inflates past cap; -EINVAL when it is not valid
 * deflate data; -ENOMEM when zlib's state could not be allocated.
 */
int hub_inflate(struct hub_deflate *d, const void *in, size_t len, void *out,
                size_t cap, size_t *out_len);

#endif
