/*
 * server/lws/wsread.c - the framing glue of the read bypass: wslay's frame
 * parser (wslay_frame_recv) over the bytes one recv() returned, with the
 * RFC 6455 rules wslay's frame layer leaves to its caller (reserved bits,
 * opcodes, continuation order; wslay itself fails control frames over 125
 * bytes or fragmented, and non-minimal or 2^63 lengths). What the frames
 * mean goes to the sink (server/lws/wsread.h). See docs/LWS.md, "The read
 * bypass".
 *
 * wslay reads through a callback into its context's own 4 KiB buffer and
 * keeps a partial header, mask and payload position there, so a context
 * is a session's parse state. To keep idle sessions at zero bytes, a
 * context is only a session's while it holds something: the feed counts
 * the bytes given to wslay and the bytes of the frames it returned (the
 * header length follows from the payload length, as wslay refuses
 * non-minimal encodings); when they match and no frame is open, the
 * context is back at its start state and returns to the loop's spare.
 *
 * Input backpressure (srv_wsread_pause, hub_session_rx_pause): the sink
 * may stop the feed after a message; the bytes of the read not yet given
 * to wslay are copied into the session's state (at most one read, 64 KiB
 * on the bypass) and parsed first when the session resumes. wslay's own
 * buffer keeps what it already took, as between two reads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

#include "server/lws/wsread.h"

#define CTL_MAX 125

struct srv_wsread {
    wslay_frame_context_ptr w;   /* NULL: on a boundary, nothing buffered */
    uint64_t unparsed;           /* bytes in w not yet in a returned frame */
    uint64_t frame_off;          /* payload bytes of the open frame seen */
    bool in_frame;               /* a frame's first chunk was returned */
    bool stopped;                /* after a close or bad header: discard */
    bool failed;                 /* failed (1002): only a close counts */
    bool skip;                   /* the open frame is not delivered */
    bool msg_z;                  /* the open message is compressed (RSV1) */
    uint8_t msg;                 /* open fragmented message: 1 text, 2 binary */
    uint8_t ctl_len;             /* control payload gathered so far */
    uint8_t out_op;              /* owed: 0x8 close echo, else 0 */
    uint8_t out_len;
    bool pong_owed;
    uint8_t pong_len;
    uint8_t ctl[CTL_MAX];
    uint8_t out[CTL_MAX];
    uint8_t pong[CTL_MAX];
    uint8_t *held;               /* kept by a pause; owned, or NULL */
    size_t held_len;
};

struct srv_wsread_loop {
    wslay_frame_context_ptr spare; /* at its start state, or NULL */
    struct srv_wsread scratch;     /* state of a session that holds none */
    struct srv_wsread *cur;        /* the feed's state */
    const uint8_t *in;             /* the feed's bytes not given to wslay */
    size_t in_len;
    bool pause;                    /* the sink asked to stop (a pause) */
};

static ssize_t recv_cb(uint8_t *buf, size_t len, int flags, void *user)
{
    struct srv_wsread_loop *L = user;
    size_t n = len < L->in_len ? len : L->in_len;

    (void)flags;
    if (!n)
        return WSLAY_ERR_WANT_READ;
    memcpy(buf, L->in, n);
    L->in += n;
    L->in_len -= n;
    L->cur->unparsed += n;
    return (ssize_t)n;
}

static ssize_t send_cb(const uint8_t *data, size_t len, int flags, void *u)
{
    (void)data, (void)len, (void)flags, (void)u;
    return -1; /* frames go out through lws, never through wslay */
}

static const struct wslay_frame_callbacks wslay_cbs = {
    .send_callback = send_cb,
    .recv_callback = recv_cb,
};

struct srv_wsread_loop *srv_wsread_loop_new(void)
{
    return calloc(1, sizeof(struct srv_wsread_loop));
}

void srv_wsread_loop_free(struct srv_wsread_loop *L)
{
    if (!L)
        return;
    if (L->spare)
        wslay_frame_context_free(L->spare);
    free(L);
}

static bool holds(const struct srv_wsread *st)
{
    return st->w || st->msg || st->out_op || st->pong_owed || st->stopped ||
           st->failed || st->held;
}

size_t srv_wsread_held(const struct srv_wsread *st)
{
    return st ? sizeof(*st) + (st->w ? 4096 + 160 : 0) + st->held_len : 0;
}

void srv_wsread_pause(struct srv_wsread_loop *L)
{
    L->pause = true;
}

void srv_wsread_free(struct srv_wsread **sp)
{
    if (!*sp)
        return;
    if ((*sp)->w)
        wslay_frame_context_free((*sp)->w);
    free((*sp)->held);
    free(*sp);
    *sp = NULL;
}

/* wslay's header length for a frame of this payload and mask. */
static uint64_t header_len(uint64_t plen, bool mask)
{
    return 2 + (plen > 65535 ? 8 : plen > 125 ? 2 : 0) + (mask ? 4 : 0);
}

/* RSV1 of a frame (RFC 7692 section 6): allowed only on the first frame
 * of a data message, once permessage-deflate was negotiated. NULL or why
 * the connection fails. */
static const char *frame_rsv(struct srv_wsread *st,
                             const struct wslay_frame_iocb *f,
                             const struct srv_wsread_sink *k, void *u)
{
    if (f->rsv & (WSLAY_RSV2_BIT | WSLAY_RSV3_BIT))
        return "reserved bits set";
    if (!(f->rsv & WSLAY_RSV1_BIT))
        return NULL;
    if (wslay_is_ctrl_frame(f->opcode))
        return "RSV1 on a control frame";
    if (f->opcode == WSLAY_CONTINUATION_FRAME)
        return "RSV1 on a continuation frame";
    if (!k->pmd || !k->pmd(u))
        return "RSV1 without permessage-deflate";
    return NULL;
}

/* A frame's first chunk: the rules wslay's frame layer does not check. */
static const char *frame_start(struct srv_wsread *st,
                               const struct wslay_frame_iocb *f,
                               const struct srv_wsread_sink *k, void *u)
{
    const char *bad;

    /* RFC 6455 section 5.1: a server must fail an unmasked client frame
     * (lws 4.1.6 cannot tell; this path can). */
    if (!f->mask)
        return "unmasked client frame";
    if ((bad = frame_rsv(st, f, k, u)))
        return bad;
    switch (f->opcode) {
    case WSLAY_CONTINUATION_FRAME:
        return st->msg ? NULL : "continuation without a start";
    case WSLAY_TEXT_FRAME:
    case WSLAY_BINARY_FRAME:
        if (st->msg)
            return "new message inside a fragmented one";
        st->msg = f->opcode == WSLAY_TEXT_FRAME ? 1 : 2;
        st->msg_z = (f->rsv & WSLAY_RSV1_BIT) != 0;
        return NULL;
    case WSLAY_CONNECTION_CLOSE:
    case WSLAY_PING:
    case WSLAY_PONG:
        st->ctl_len = 0;
        return NULL;
    default:
        return "reserved opcode";
    }
}

/* One chunk wslay returned. SRV_WSREAD_STOP after a close or failure. */
static enum srv_wsread_rc chunk(struct srv_wsread *st,
                                const struct wslay_frame_iocb *f,
                                const struct srv_wsread_sink *k, void *u)
{
    const char *bad;
    bool done;

    if (!st->in_frame) {
        /* After a failure frames are still parsed (the stream is in step)
         * so that the peer's answering close ends the connection; nothing
         * but that close means anything any more. */
        bad = frame_start(st, f, k, u);
        if (bad && !st->failed) {
            k->fail(u, 1002, bad);
            st->failed = true;
            st->msg = 0, st->msg_z = false;
        }
        st->skip = bad || (st->failed && f->opcode != WSLAY_CONNECTION_CLOSE);
        st->in_frame = true;
        st->frame_off = 0;
        st->unparsed -= header_len(f->payload_length, f->mask);
    }
    st->unparsed -= f->data_length;
    st->frame_off += f->data_length;
    done = st->frame_off == f->payload_length;
    if (done)
        st->in_frame = false;
    if (st->skip)
        return SRV_WSREAD_MORE;
    if (!wslay_is_ctrl_frame(f->opcode)) {
        bool binary = st->msg == 2, z = st->msg_z;

        if (done && f->fin)
            st->msg = 0, st->msg_z = false;
        if (f->data_length || f->payload_length == 0)
            (z ? k->data_z : k->data)(
                u, f->data_length ? f->data : (const uint8_t *)"",
                f->data_length, f->payload_length - st->frame_off, f->fin,
                binary);
        return SRV_WSREAD_MORE;
    }
    /* wslay refuses control frames over 125 bytes: ctl always fits. */
    memcpy(st->ctl + st->ctl_len, f->data, f->data_length);
    st->ctl_len += (uint8_t)f->data_length;
    if (!done)
        return SRV_WSREAD_MORE;
    switch (f->opcode) {
    case WSLAY_PING:
        /* Only the latest ping needs its pong (RFC 6455 section 5.5.3). */
        memcpy(st->pong, st->ctl, st->ctl_len);
        st->pong_len = st->ctl_len;
        st->pong_owed = true;
        k->want_write(u);
        return SRV_WSREAD_MORE;
    case WSLAY_PONG:
        k->pong(u);
        return SRV_WSREAD_MORE;
    default:
        if (k->close(u, st->ctl, st->ctl_len)) {
            memcpy(st->out, st->ctl, st->ctl_len);
            st->out_len = st->ctl_len;
            st->out_op = WSLAY_CONNECTION_CLOSE;
        }
        return SRV_WSREAD_STOP;
    }
}

/* Frames from L->in through wslay into the sink until the input is used
 * up (MORE), the sink pauses (PAUSED) or the connection fails (STOP). */
static enum srv_wsread_rc parse(struct srv_wsread_loop *L,
                                struct srv_wsread *st,
                                const struct srv_wsread_sink *k, void *u)
{
    enum srv_wsread_rc rc = SRV_WSREAD_MORE;
    struct wslay_frame_iocb f;
    ssize_t r;

    for (;;) {
        memset(&f, 0, sizeof(f));
        r = wslay_frame_recv(st->w, &f);
        if (r == WSLAY_ERR_WANT_READ)
            break;
        if (r < 0) {
            /* A length or control-frame rule (wslay_frame_recv). The
             * context's state is now unknown: it is not reused. After an
             * earlier failure the connection is already failing: the sink
             * hears of it once (the transport counts and closes once). */
            wslay_frame_context_free(st->w);
            st->w = NULL;
            if (!st->failed)
                k->fail(u, 1002, r == WSLAY_ERR_PROTO ? "invalid frame header"
                                                      : "frame parse error");
            rc = SRV_WSREAD_STOP;
            break;
        }
        if ((rc = chunk(st, &f, k, u)) != SRV_WSREAD_MORE)
            break;
        if (L->pause) {
            rc = SRV_WSREAD_PAUSED;
            break;
        }
    }
    return rc;
}

/* After a feed: what a pause left unread is kept, a stopped state drops
 * wslay's, a context back at its start state returns to the loop's spare,
 * and the state moves between the loop's scratch and the session's own
 * allocation (*sp) as it starts or stops holding anything. */
static enum srv_wsread_rc settle(struct srv_wsread_loop *L,
                                 struct srv_wsread **sp,
                                 struct srv_wsread *st, enum srv_wsread_rc rc)
{
    if (rc == SRV_WSREAD_PAUSED && L->in_len) {
        /* What wslay has not taken waits for srv_wsread_resume(). */
        st->held = malloc(L->in_len);
        if (!st->held)
            rc = SRV_WSREAD_NOMEM;
        else {
            memcpy(st->held, L->in, L->in_len);
            st->held_len = L->in_len;
        }
    }
    L->cur = NULL;
    L->in = NULL;
    L->in_len = 0;
    if (rc == SRV_WSREAD_STOP) {
        /* Nothing more is parsed: drop what wslay still holds. */
        if (st->w)
            wslay_frame_context_free(st->w);
        st->w = NULL;
        st->msg = 0, st->msg_z = false;
        st->stopped = true;
    }
    if (st->w && st->unparsed == 0 && !st->in_frame) {
        /* Back at wslay's start state with nothing buffered. */
        if (L->spare)
            wslay_frame_context_free(st->w);
        else
            L->spare = st->w;
        st->w = NULL;
    }
    if (st == &L->scratch) {
        if (holds(st)) {
            struct srv_wsread *n = malloc(sizeof(*n));

            if (!n) {
                if (st->w)
                    wslay_frame_context_free(st->w);
                st->w = NULL;
                free(st->held);
                st->held = NULL;
                return SRV_WSREAD_NOMEM;
            }
            memcpy(n, st, sizeof(*n));
            *sp = n;
        }
    } else if (!holds(st)) {
        free(st);
        *sp = NULL;
    }
    return rc;
}

enum srv_wsread_rc srv_wsread_feed(struct srv_wsread_loop *L,
                                   struct srv_wsread **sp, const void *buf,
                                   size_t len,
                                   const struct srv_wsread_sink *k, void *u)
{
    struct srv_wsread *st = *sp;
    enum srv_wsread_rc rc;

    if (st && st->stopped)
        return SRV_WSREAD_STOP;
    if (!st) {
        st = &L->scratch;
        memset(st, 0, sizeof(*st));
    }
    if (!st->w) {
        if (!L->spare &&
            wslay_frame_context_init(&L->spare, &wslay_cbs, L) != 0) {
            L->spare = NULL;
            return SRV_WSREAD_NOMEM;
        }
        st->w = L->spare;
        L->spare = NULL;
    }
    L->cur = st;
    L->in = buf;
    L->in_len = len;
    L->pause = false;
    rc = parse(L, st, k, u);
    L->pause = false;
    return settle(L, sp, st, rc);
}

enum srv_wsread_rc srv_wsread_resume(struct srv_wsread_loop *L,
                                     struct srv_wsread **sp,
                                     const struct srv_wsread_sink *k,
                                     void *u)
{
    struct srv_wsread *st = *sp;
    uint8_t *h;
    size_t n;
    enum srv_wsread_rc rc;

    if (!st)
        return SRV_WSREAD_MORE;
    /* The feed may keep a new copy of what it does not parse. */
    h = st->held;
    n = st->held_len;
    st->held = NULL;
    st->held_len = 0;
    rc = srv_wsread_feed(L, sp, h ? h : (const uint8_t *)"", n, k, u);
    free(h);
    return rc;
}

unsigned srv_wsread_take_out(struct srv_wsread **sp, unsigned char *out,
                             size_t *len)
{
    struct srv_wsread *st = *sp;
    unsigned op = 0;

    if (!st)
        return 0;
    if (st->out_op) {
        op = st->out_op;
        memcpy(out, st->out, st->out_len);
        *len = st->out_len;
        st->out_op = 0;
        st->pong_owed = false; /* nothing follows a close */
    } else if (st->pong_owed) {
        op = WSLAY_PONG;
        memcpy(out, st->pong, st->pong_len);
        *len = st->pong_len;
        st->pong_owed = false;
    }
    if (!holds(st)) {
        free(st);
        *sp = NULL;
    }
    return op;
}
