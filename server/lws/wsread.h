/*
 * server/lws/wsread.h - RFC 6455 frames of an established session, parsed by
 * libwslay's frame API from bytes the loop read itself (server/lws/direct.c;
 * docs/DESIGN.md section 14). No I/O and no lws here: the caller
 * hands in what recv() returned and gets the frames' meaning through a
 * sink, so the unit test drives it with plain buffers.
 *
 * Memory: one wslay frame context (about 4.2 KiB, its own input buffer)
 * per loop is reused by every session whose read ends on a frame boundary
 * with nothing left over, which is every idle session and nearly every
 * read of a small message. A session whose read ends inside a frame, or
 * inside a fragmented message, or that owes the peer a pong or a close
 * echo, gets its own state (struct srv_wsread) until that is over.
 *
 * Thread: the loop's own.
 */
#ifndef SRV_WSREAD_H
#define SRV_WSREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srv_wsread;
struct srv_wsread_loop;

/* What the frames meant. u is the feed's. */
struct srv_wsread_sink {
    /* A piece of a data message: len bytes at p, remaining bytes of this
     * frame still to come, fin when the frame is its message's last,
     * binary for a binary message (as lws reports LWS_CALLBACK_RECEIVE).
     * Empty frames come as one call with len 0. */
    void (*data)(void *u, const void *p, size_t len, size_t remaining,
                 bool fin, bool binary);
    /* permessage-deflate (RFC 7692): RSV1 on a message's first frame asks
     * pmd(u) whether the session negotiated it (NULL: never); if so the
     * message's pieces, still compressed, go to data_z (as to data),
     * else the connection fails 1002. RSV1 anywhere else (a continuation
     * or control frame) and RSV2, RSV3 always fail it. */
    bool (*pmd)(void *u);
    void (*data_z)(void *u, const void *p, size_t len, size_t remaining,
                   bool fin, bool binary);
    /* A whole pong frame arrived. */
    void (*pong)(void *u);
    /* A ping arrived: its pong is pending (srv_wsread_take_out); the
     * transport should ask for a writable callback. */
    void (*want_write)(void *u);
    /* A whole close frame (payload p, len <= 125). Nothing after it is
     * parsed: the feed returns SRV_WSREAD_STOP. Return true to have the
     * payload kept as the close echo owed (srv_wsread_take_out). */
    bool (*close)(void *u, const unsigned char *p, size_t len);
    /* The peer broke RFC 6455: fail the connection with code (1002) and
     * the reason text, once. Frames are still parsed after it and only a
     * close frame still reaches the sink (the peer's answer), except when
     * wslay refused a header: then the stream cannot be followed and the
     * feed returns SRV_WSREAD_STOP. */
    void (*fail)(void *u, unsigned code, const char *why);
};

enum srv_wsread_rc {
    SRV_WSREAD_MORE = 0,     /* everything parsed; read on */
    SRV_WSREAD_STOP = 1,     /* close or failure: read nothing more */
    SRV_WSREAD_PAUSED = 2,   /* srv_wsread_pause(): read nothing until
                                srv_wsread_resume() */
    SRV_WSREAD_NOMEM = -1,   /* state could not be allocated */
};

/* A loop's shared parser. NULL when out of memory. */
struct srv_wsread_loop *srv_wsread_loop_new(void);
void srv_wsread_loop_free(struct srv_wsread_loop *L);

/*
 * Parse len bytes the socket gave (buf, any split) for the session whose
 * state is *sp (NULL while it holds none: then nothing is allocated unless
 * the read leaves something over). Calls the sink in wire order.
 */
enum srv_wsread_rc srv_wsread_feed(struct srv_wsread_loop *L,
                                   struct srv_wsread **sp, const void *buf,
                                   size_t len,
                                   const struct srv_wsread_sink *k, void *u);

/*
 * From inside the sink (a data callback): stop after this message. The
 * feed then returns SRV_WSREAD_PAUSED and keeps the bytes it was given and
 * did not parse (at most the one read it was fed) in the session's state,
 * to be parsed by srv_wsread_resume() before anything read later.
 */
void srv_wsread_pause(struct srv_wsread_loop *L);
/* Parse what a pause kept, as srv_wsread_feed() would (it may pause
 * again). SRV_WSREAD_MORE when nothing was kept. */
enum srv_wsread_rc srv_wsread_resume(struct srv_wsread_loop *L,
                                     struct srv_wsread **sp,
                                     const struct srv_wsread_sink *k,
                                     void *u);

/* The control frame the session owes the peer, if any: a close echo
 * (op 0x8) before a pong (op 0xA) with the latest ping's payload. Copies it to out (125 bytes) and clears it;
 * frees the state when nothing else is held. Returns the opcode, 0 for
 * none. */
unsigned srv_wsread_take_out(struct srv_wsread **sp, unsigned char *out,
                             size_t *len);

/* Bytes held per session right now (0 when *sp is NULL). For tests. */
size_t srv_wsread_held(const struct srv_wsread *st);

/* Drop a session's state (it closed). */
void srv_wsread_free(struct srv_wsread **sp);

#endif
