/*
 * hub/loop/compress.c - permessage-deflate on a loop: the compressed
 * variant of a frame (hub/loop/compress.h), the inbound inflate into the
 * loop's buffer, and the session's two bits.
 */
#include "hub/loop/compress.h"

#include <errno.h>
#include <stdlib.h>

#include "hub/app/app.h"
#include "hub/base/log.h"
#include "hub/loop/session.h"
#include "hub/wire/deflate.h"

struct hub_frame *hub_loop_zframe(struct hub_loop *l, struct hub_frame *f)
{
    struct hub_frame *z = atomic_load_explicit(&f->z, memory_order_acquire);
    struct hub_frame *seen = NULL;

    if (z)
        return z == HUB_FRAME_PLAIN ? f : z;
    /* Small frames gain a few bytes for a deflate call each; only whole
     * text frames are ever compressed (RFC 7692 section 6.1). */
    if (f->len < l->cfg->compression_min_size || f->pair ||
        f->bytes[f->head] != 0x81)
        return f;
    if (!l->deflate)
        l->deflate = hub_deflate_new();
    z = l->deflate ? hub_deflate_frame(l->deflate, f) : NULL;
    if (!z)
        z = HUB_FRAME_PLAIN; /* not smaller, or no memory: plain is valid */
    if (!atomic_compare_exchange_strong_explicit(&f->z, &seen, z,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        /* Another loop made it first: theirs is the one everybody sends. */
        if (z != HUB_FRAME_PLAIN)
            hub_frame_unref(z);
        z = seen;
    } else if (z != HUB_FRAME_PLAIN) {
        HUB_STAT_ADD(l->stats.compressed_frames, 1);
        HUB_STAT_ADD(l->stats.compressed_bytes_in, f->len);
        HUB_STAT_ADD(l->stats.compressed_bytes_out, z->len);
    }
    return z == HUB_FRAME_PLAIN ? f : z;
}

int hub_loop_inflate(struct hub_loop *l, const void *in, size_t len,
                     const char **out, size_t *out_len)
{
    size_t cap = (size_t)l->cfg->max_message + 1;
    int rc;

    if (!l->deflate && !(l->deflate = hub_deflate_new()))
        return -ENOMEM;
    if (!l->inflate_buf && !(l->inflate_buf = malloc(cap)))
        return -ENOMEM;
    rc = hub_inflate(l->deflate, in, len, l->inflate_buf, cap, out_len);
    if (rc == 0 && *out_len > l->cfg->max_message)
        rc = -EMSGSIZE;
    if (rc == 0) {
        *out = l->inflate_buf;
        HUB_STAT_ADD(l->stats.inflated_messages, 1);
    }
    return rc;
}

int hub_session_inflate(struct hub_session *s, const char **msg,
                        size_t *msg_len)
{
    int rc = hub_loop_inflate(s->loop, *msg, *msg_len, msg, msg_len);

    if (rc == -EMSGSIZE) {
        HUB_LOG_EVENT(HUB_LOG_INFO, s->loop->id,
                      HUB_LOG_F(.event = "message_too_big",
                                .socket_id = HUB_SID(s),
                                .app = s->app ? s->app->id : NULL,
                                .code = 1009, .reason = "inflated"),
                      "socket %s: compressed message inflates past %u "
                      "bytes: closing 1009",
                      HUB_SID(s), s->loop->cfg->max_message);
        hub_session_close(s, 1009, "message too big", HUB_CLOSE_TOO_BIG,
                          true);
    } else if (rc == -EINVAL) {
        hub_session_close(s, 1007, "invalid compressed data",
                          HUB_CLOSE_ERROR, true);
    } else if (rc) {
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
    }
    return rc ? -1 : 0;
}

void hub_loop_compress_fini(struct hub_loop *l)
{
    hub_deflate_free(l->deflate);
    l->deflate = NULL;
    free(l->inflate_buf);
    l->inflate_buf = NULL;
}

void hub_session_set_pmd(struct hub_session *s)
{
    s->pmd = true;
    if (s->loop)
        HUB_STAT_ADD(s->loop->stats.compression_sessions, 1);
    hub_session_compress_update(s);
}

bool hub_session_pmd(const struct hub_session *s)
{
    return s->pmd;
}

void hub_session_compress_update(struct hub_session *s)
{
    s->zout = s->pmd && s->app && s->app->compression;
}
