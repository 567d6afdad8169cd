/*
 * hub/loop/compress.h - permessage-deflate on a loop (RFC 7692; the
 * wire-level work is hub/wire/deflate.h, the handshake hub/wire/pmd.h).
 *
 * Outbound: a frame goes to a compressing session as its compressed
 * variant, made once per frame by the first loop that needs it and then
 * shared by reference like the frame itself (struct hub_frame's z); a
 * frame under compression_min_size, or not smaller compressed, goes as
 * it is. A session compresses when its peer negotiated the extension
 * (hub_session_set_pmd, from the transport) and its app's "compression"
 * key is true (hub_session_compress_update, at the app match and at a
 * reload).
 *
 * Inbound: a compressed message, once whole, is inflated into the loop's
 * one buffer of max_message bytes (plus one, to tell a message of
 * exactly max_message from a bigger one): a deflate bomb costs at most
 * that buffer, allocated at the loop's first compressed message and held
 * until the loop ends.
 *
 * Thread: the loop's own (hub_loop_zframe may race other loops on one
 * frame: the compare-and-swap keeps one variant).
 */
#ifndef HUB_COMPRESS_H
#define HUB_COMPRESS_H

#include <stddef.h>

#include "hub/loop/loop.h"
#include "hub/wire/frame.h"

struct hub_session;

/* The frame a compressing session gets for f (borrowed: f's variant,
 * which f holds, or f itself). */
struct hub_frame *hub_loop_zframe(struct hub_loop *l, struct hub_frame *f);

/*
 * Inflate a compressed message (in, len) into the loop's buffer: 0 with
 * the message in *out / *out_len (valid until the loop's next inflate);
 * -EMSGSIZE past max_message; -EINVAL when it is not deflate data;
 * -ENOMEM.
 */
int hub_loop_inflate(struct hub_loop *l, const void *in, size_t len,
                     const char **out, size_t *out_len);

/*
 * A whole compressed message of s (*msg, *msg_len) inflated in place of
 * itself (valid until the loop's next inflate). 0, or -1 with s closing:
 * 1009 past max_message, 1007 when it does not inflate, 1011 without
 * memory.
 */
int hub_session_inflate(struct hub_session *s, const char **msg,
                        size_t *msg_len);

/* Free the loop's compression state (hub_loop_destroy). */
void hub_loop_compress_fini(struct hub_loop *l);

/* The transport negotiated permessage-deflate for s (before the app is
 * known; the outbound side follows hub_session_compress_update). */
void hub_session_set_pmd(struct hub_session *s);
/* Whether s's peer may send compressed messages. */
bool hub_session_pmd(const struct hub_session *s);
/* Recompute whether s's data frames go compressed: negotiated and the
 * app's "compression" key on. At the app match and at each reload. */
void hub_session_compress_update(struct hub_session *s);

#endif
