/*
 * tests/fuzz/fuzz_wsread.c - libFuzzer target for the read bypass's
 * framing glue (server/lws/wsread.c over wslay_frame_recv): the bytes a
 * hostile client can send after the upgrade, fed in pieces whose sizes
 * come from the input, so every split of headers, masks and payloads is
 * tried, 1-byte feeds included.
 *
 * Input: [opts] [fail_at] [nsizes] [nsizes piece sizes] [stream...]
 *   opts bit 0, 1  what close() answers (echo or not) in session 0, 1
 *   opts bit 2     two sessions of one loop, fed the same stream in turn
 *                  with different pieces (they share the loop's spare
 *                  wslay context, so one must never see the other's bytes)
 *   opts bit 3     take the owed control frame after every feed, as the
 *                  writable callback would; otherwise only at the end
 *   opts bit 4, 5  session 0, 1 pauses after every whole message (input
 *                  backpressure); the harness resumes until the piece is
 *                  parsed, and what the sink sees must be the same
 *   opts bit 6     the sessions negotiated permessage-deflate: RSV1 on a
 *                  message's first frame is allowed and its pieces go to
 *                  data_z (RFC 7692 section 6); anywhere else it fails
 *   fail_at        the n-th allocation wsread makes fails (0: none); its
 *                  malloc, calloc and wslay context all count
 *                  (tests/fuzz/fuzz_wsread_alloc.h)
 *   piece size     v < 0xc0: v + 1 bytes; else (v - 0xbf) * 256 bytes;
 *                  used in turn, cycling; no sizes: one feed of it all
 *
 * A small reference decoder, written from RFC 6455 and the contract in
 * server/lws/wsread.h rather than from wsread.c, decodes the whole stream
 * first into the events the sink must see and, for every byte offset,
 * whether a frame ends there. The sink then checks each call against the
 * next expected event as it comes: data pieces in order, complete, with
 * the unmasked bytes as sent, remaining/fin/binary right, nothing before
 * its bytes were fed; control payloads of at most 125 bytes; a failure
 * (1002) once, and after it nothing but the peer's close; after a close
 * nothing at all. After each feed it checks that exactly the events whose
 * bytes have all arrived were delivered (nothing held back), the return
 * code, and the memory rule of wsread.h: a session holds no state exactly
 * when it is on a frame boundary with no message open and nothing owed,
 * and never holds a wslay context on a boundary. ASan finds leaks and
 * over-reads (each piece is fed from an exact-size copy).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

#include "server/lws/wsread.h"
#include "tests/fuzz/fuzz.h"
#define FUZZ_WSREAD_HARNESS
#include "tests/fuzz/fuzz_wsread_alloc.h"

/* ---- allocation failures (fuzz_wsread_alloc.h) ---- */

static long alloc_n;  /* allocations wsread made for this input */
static long fail_at;  /* the one that fails (1-based), 0 for none */
static bool injected; /* it failed since the flag was last cleared */

static bool fail_now(void)
{
    if (++alloc_n != fail_at)
        return false;
    injected = true;
    return true;
}

void *fuzz_wsread_malloc(size_t n) { return fail_now() ? NULL : malloc(n); }

void *fuzz_wsread_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : calloc(n, size);
}

int fuzz_wsread_context_init(wslay_frame_context_ptr *ctx,
                             const struct wslay_frame_callbacks *cbs,
                             void *user)
{
    if (fail_now())
        return WSLAY_ERR_NOMEM;
    return wslay_frame_context_init(ctx, cbs, user);
}

/* ---- the reference decoder ---- */

enum { EV_DATA, EV_PING, EV_PONG, EV_CLOSE, EV_FAIL };

struct ev {
    int type;
    bool fin, binary; /* EV_DATA */
    bool z;           /* EV_DATA of a compressed message (data_z) */
    uint64_t hdr_end; /* the payload's offset in the stream */
    uint64_t len;     /* payload length */
    uint64_t first;   /* bytes fed by which the event starts arriving */
    uint64_t ready;   /* bytes fed by which it has all arrived */
};

struct ref {
    uint8_t *plain;  /* the stream with every payload unmasked */
    struct ev *ev;
    size_t n_ev;
    /* Per offset 0..n: -1 inside a frame; else whether a fragmented
     * message is open there. */
    int8_t *boundary;
    uint64_t stop_at; /* bytes fed from which the feed says STOP */
};

static void push(struct ref *R, int type, uint64_t first, uint64_t ready)
{
    struct ev *e = &R->ev[R->n_ev++];

    memset(e, 0, sizeof(*e));
    e->type = type;
    e->first = first;
    e->ready = ready;
}

/* A header wslay refuses (a control frame over 125 bytes or fragmented, a
 * non-minimal or 2^63 length), known once `at` bytes are in: the stream
 * cannot be followed past it. */
static void unfollowable(struct ref *R, uint64_t at, bool failed)
{
    if (!failed)
        push(R, EV_FAIL, at, at);
    R->stop_at = at;
}

static void ref_decode(struct ref *R, const uint8_t *in, size_t n, bool pmd)
{
    uint64_t pos = 0;
    int msg = 0; /* open fragmented message: 1 text, 2 binary */
    bool msg_z = false, failed = false;

    R->n_ev = 0;
    R->stop_at = UINT64_MAX;
    memcpy(R->plain, in, n);
    memset(R->boundary, -1, n + 1);
    R->boundary[0] = 0;
    while (pos < n) {
        uint64_t h = pos + 2, len, avail, end;
        const uint8_t *key = NULL;
        unsigned fin, rsv, op;
        bool bad, deliver;

        if (h > n)
            break;
        fin = in[pos] >> 7;
        rsv = (in[pos] >> 4) & 7;
        op = in[pos] & 15;
        len = in[pos + 1] & 127;
        if (op >= 8 && (len > 125 || !fin)) {
            unfollowable(R, h, failed);
            break;
        }
        if (len == 126) {
            if (h + 2 > n)
                break;
            len = (uint64_t)in[h] << 8 | in[h + 1];
            h += 2;
            if (len < 126) {
                unfollowable(R, h, failed);
                break;
            }
        } else if (len == 127) {
            if (h + 8 > n)
                break;
            len = 0;
            for (int i = 0; i < 8; i++)
                len = len << 8 | in[h + i];
            h += 8;
            if (len < 65536 || len >> 63) {
                unfollowable(R, h, failed);
                break;
            }
        }
        if (in[pos + 1] & 0x80) {
            if (h + 4 > n)
                break;
            key = in + h;
            h += 4;
        }
        avail = n - h < len ? n - h : len;
        if (len && !avail)
            break; /* a header alone: nothing to report yet */
        if (key)
            for (uint64_t i = 0; i < avail; i++)
                R->plain[h + i] ^= key[i & 3];
        end = h + len;
        /* RSV1 only on a data message's first frame, with the extension;
         * RSV2 and RSV3 never. */
        bad = !key || (rsv & 3) ||
              ((rsv & 4) && (!pmd || !(op == 1 || op == 2))) ||
              (op == 0 && !msg) ||
              ((op == 1 || op == 2) && msg) || (op >= 3 && op <= 7) ||
              op > 10;
        if (bad && !failed) {
            push(R, EV_FAIL, h + (len > 0), h + (len > 0));
            failed = true;
        }
        /* After a failure only the peer's close still counts. */
        deliver = !bad && (!failed || op == 8);
        if (deliver && (op == 1 || op == 2)) {
            msg = (int)op;
            msg_z = (rsv & 4) != 0;
        }
        /* Data as it comes; a control frame only when it is whole. */
        if (deliver && (op <= 2 || end <= n)) {
            struct ev *e;

            push(R, op <= 2 ? EV_DATA : op == 8 ? EV_CLOSE
                                      : op == 9 ? EV_PING : EV_PONG,
                 op <= 2 ? h + (len > 0) : end, end);
            e = &R->ev[R->n_ev - 1];
            e->fin = fin;
            e->binary = msg == 2;
            e->z = op <= 2 && msg_z;
            e->hdr_end = h;
            e->len = len;
        }
        if (end > n)
            break;
        if (deliver && op == 8) {
            R->stop_at = end;
            break;
        }
        if (deliver && op <= 2 && fin)
            msg = 0;
        pos = end;
        R->boundary[pos] = msg != 0;
    }
}

/* ---- the sessions and the checking sink ---- */

struct sess {
    struct srv_wsread *st;
    const struct ref *R;
    uint64_t fed;     /* stream bytes fed so far */
    size_t idx;       /* the next expected event */
    uint64_t pos;     /* payload bytes of it delivered (EV_DATA) */
    size_t exp_idx;   /* events whose bytes have all been fed */
    size_t next;      /* the next piece size to use */
    bool echo;        /* what close() answers */
    bool pausing;     /* the sink pauses after every whole message */
    struct srv_wsread_loop *L;
    bool failed, closed, dead;
    bool close_owed, pong_owed;
    size_t close_ev, pong_ev; /* the events whose payload is owed */
};

static const struct ev *expect(struct sess *s, int type)
{
    const struct ev *e;

    CHECK(!s->closed); /* nothing at all after a close */
    CHECK(s->idx < s->R->n_ev);
    e = &s->R->ev[s->idx];
    CHECK(e->type == type);
    CHECK(e->first <= s->fed);
    return e;
}

static void k_piece(void *u, const void *p, size_t len, size_t remaining,
                    bool fin, bool binary, bool z)
{
    struct sess *s = u;
    const struct ev *e = expect(s, EV_DATA);

    CHECK(z == e->z);
    CHECK(!s->failed);
    CHECK(p != NULL);
    CHECK(len > 0 || e->len == 0);
    CHECK(s->pos + len <= e->len);
    CHECK(e->hdr_end + s->pos + len <= s->fed);
    CHECK(memcmp(p, s->R->plain + e->hdr_end + s->pos, len) == 0);
    CHECK(remaining == e->len - s->pos - len);
    CHECK(fin == e->fin);
    CHECK(binary == e->binary);
    s->pos += len;
    if (s->pos == e->len) {
        s->idx++;
        s->pos = 0;
        /* Input backpressure after a message: the feed stops and keeps
         * the rest, which resume must hand over exactly as a feed would. */
        if (s->pausing && fin)
            srv_wsread_pause(s->L);
    }
}

static void k_data(void *u, const void *p, size_t len, size_t remaining,
                   bool fin, bool binary)
{
    k_piece(u, p, len, remaining, fin, binary, false);
}

static void k_data_z(void *u, const void *p, size_t len, size_t remaining,
                     bool fin, bool binary)
{
    k_piece(u, p, len, remaining, fin, binary, true);
}

static bool pmd_on;
static bool k_pmd(void *u)
{
    (void)u;
    return pmd_on;
}

static void k_pong(void *u)
{
    struct sess *s = u;

    expect(s, EV_PONG);
    CHECK(!s->failed);
    CHECK(s->R->ev[s->idx].ready <= s->fed);
    s->idx++;
}

static void k_want_write(void *u)
{
    struct sess *s = u;

    expect(s, EV_PING);
    CHECK(!s->failed);
    CHECK(s->R->ev[s->idx].ready <= s->fed);
    s->pong_owed = true; /* the latest ping's */
    s->pong_ev = s->idx++;
}

static bool k_close(void *u, const unsigned char *p, size_t len)
{
    struct sess *s = u;
    const struct ev *e = expect(s, EV_CLOSE);

    CHECK(e->ready <= s->fed);
    CHECK(len <= 125 && len == e->len);
    CHECK(len == 0 || memcmp(p, s->R->plain + e->hdr_end, len) == 0);
    s->closed = true;
    if (s->echo) {
        s->close_owed = true;
        s->close_ev = s->idx;
    }
    s->idx++;
    return s->echo;
}

static void k_fail(void *u, unsigned code, const char *why)
{
    struct sess *s = u;
    const struct ev *e = expect(s, EV_FAIL);

    CHECK(e->ready <= s->fed);
    CHECK(code == 1002);
    CHECK(why != NULL && *why);
    CHECK(!s->failed); /* once */
    s->failed = true;
    s->idx++;
}

static const struct srv_wsread_sink sink = {
    .data = k_data, .data_z = k_data_z, .pmd = k_pmd,
    .pong = k_pong, .want_write = k_want_write,
    .close = k_close, .fail = k_fail,
};

/* wsread.h's memory rule, after a feed or a take. */
static void check_held(const struct sess *s)
{
    const struct ref *R = s->R;
    bool stopped = s->fed >= R->stop_at;
    bool boundary = R->boundary[s->fed] >= 0;
    bool none = !s->failed && !stopped && boundary &&
                R->boundary[s->fed] == 0 && !s->pong_owed && !s->close_owed;
    size_t held = srv_wsread_held(s->st);

    CHECK((s->st == NULL) == none);
    CHECK(held <= 4096 + 160 + 1024);
    /* On a boundary (or stopped) the wslay context is the loop's again. */
    if (boundary || stopped)
        CHECK(held < 4096);
}

static void after_feed(struct sess *s, enum srv_wsread_rc rc, bool nomem,
                       bool had_none)
{
    const struct ref *R = s->R;
    uint64_t pos = 0;

    if (rc == SRV_WSREAD_NOMEM) {
        /* Only when an allocation failed, and nothing half made. The
         * transport drops the session (server/lws/direct.c). */
        CHECK(nomem);
        if (had_none)
            CHECK(s->st == NULL);
        srv_wsread_free(&s->st);
        s->dead = true;
        return;
    }
    CHECK(!nomem);
    CHECK(rc == SRV_WSREAD_MORE || rc == SRV_WSREAD_STOP);
    CHECK((rc == SRV_WSREAD_STOP) == (s->fed >= R->stop_at));
    /* Everything whose bytes are in was delivered, nothing else. */
    while (s->exp_idx < R->n_ev && R->ev[s->exp_idx].ready <= s->fed)
        s->exp_idx++;
    if (s->exp_idx < R->n_ev && R->ev[s->exp_idx].type == EV_DATA &&
        R->ev[s->exp_idx].first <= s->fed)
        pos = s->fed - R->ev[s->exp_idx].hdr_end;
    CHECK(s->idx == s->exp_idx);
    CHECK(s->pos == pos);
    check_held(s);
}

/* What the writable callback would send: a close echo before a pong. */
static void take(struct sess *s)
{
    unsigned char out[125];
    size_t len = SIZE_MAX;
    unsigned op = srv_wsread_take_out(&s->st, out, &len);
    const struct ev *e = NULL;

    if (s->close_owed) {
        CHECK(op == 0x8);
        e = &s->R->ev[s->close_ev];
        s->close_owed = false;
        s->pong_owed = false; /* nothing follows a close */
    } else if (s->pong_owed) {
        CHECK(op == 0xA);
        e = &s->R->ev[s->pong_ev];
        s->pong_owed = false;
    } else {
        CHECK(op == 0);
    }
    if (e) {
        CHECK(len <= 125 && len == e->len);
        CHECK(len == 0 || memcmp(out, s->R->plain + e->hdr_end, len) == 0);
    }
    check_held(s);
}

static size_t piece(const uint8_t *sizes, size_t nsizes, size_t k)
{
    unsigned v;

    if (!nsizes)
        return SIZE_MAX;
    v = sizes[k % nsizes];
    return v < 0xc0 ? v + 1 : (size_t)(v - 0xbf) * 256;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct srv_wsread_loop *L;
    struct sess s[2];
    struct ref R;
    const uint8_t *sizes, *in;
    size_t nsizes, n, n_sess;
    uint8_t opts;
    bool more;

    if (size < 3)
        return 0;
    opts = data[0];
    nsizes = data[2];
    if (nsizes > size - 3)
        nsizes = size - 3;
    sizes = data + 3;
    in = sizes + nsizes;
    n = size - 3 - nsizes;

    R.plain = malloc(n ? n : 1);
    R.ev = malloc((n / 2 + 2) * sizeof(*R.ev));
    R.boundary = malloc(n + 1);
    CHECK(R.plain && R.ev && R.boundary);
    pmd_on = (opts >> 6) & 1;
    ref_decode(&R, in, n, pmd_on);

    alloc_n = 0;
    fail_at = data[1];
    injected = false;
    L = srv_wsread_loop_new();
    CHECK(!L == injected);
    if (!L)
        goto out;

    n_sess = opts & 4 ? 2 : 1;
    memset(s, 0, sizeof(s));
    for (size_t i = 0; i < n_sess; i++) {
        s[i].R = &R;
        s[i].echo = (opts >> i) & 1;
        s[i].pausing = (opts >> (4 + i)) & 1;
        s[i].L = L;
        s[i].next = i; /* the second session splits differently */
    }
    do {
        more = false;
        for (size_t i = 0; i < n_sess; i++) {
            struct sess *x = &s[i];
            size_t c;
            uint8_t *copy;
            bool had_none = x->st == NULL;
            enum srv_wsread_rc rc;

            if (x->dead || x->fed == n)
                continue;
            c = piece(sizes, nsizes, x->next++);
            if (c > n - x->fed)
                c = n - x->fed;
            copy = malloc(c);
            CHECK(copy != NULL);
            memcpy(copy, in + x->fed, c);
            x->fed += c;
            injected = false;
            rc = srv_wsread_feed(L, &x->st, copy, c, &sink, x);
            free(copy);
            /* Paused: resume until the read is all parsed (each resume
             * may pause again, after one more message at least). */
            for (size_t guard = 0; rc == SRV_WSREAD_PAUSED; guard++) {
                CHECK(x->pausing);
                CHECK(guard <= c + 1);
                had_none = false;
                rc = srv_wsread_resume(L, &x->st, &sink, x);
            }
            after_feed(x, rc, injected, had_none);
            if (!x->dead && (opts & 8))
                take(x);
            more = more || (!x->dead && x->fed < n);
        }
    } while (more);
    for (size_t i = 0; i < n_sess; i++) {
        if (!s[i].dead)
            take(&s[i]);
        srv_wsread_free(&s[i].st);
    }
    srv_wsread_loop_free(L);
out:
    free(R.plain);
    free(R.ev);
    free(R.boundary);
    return 0;
}
