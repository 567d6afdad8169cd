/*
 * tests/unit/test_wsread.c - the read bypass's framing glue
 * (server/lws/wsread.c) over wslay: frames split at every byte, several per
 * read, a ping inside a fragmented message, close echoes, every RFC 6455
 * error it must fail with 1002, no state held by an idle session, and a
 * pause (input backpressure) keeping the rest of a read for resume, and
 * permessage-deflate's RSV1: a compressed message's pieces go to data_z
 * once negotiated, and RSV1 anywhere else fails 1002.
 * The bytes come through a socketpair, read in pieces as a loop would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/lws/wsread.h"

/* What the sink saw. */
struct rec {
    unsigned char msg[128 * 1024];
    size_t msg_len;
    int messages;          /* data pieces ending a message */
    int pieces;
    size_t last_remaining;
    bool last_binary;
    int pongs, want_writes, closes, fails;
    unsigned fail_code;
    unsigned char close_payload[125];
    size_t close_len;
    bool echo;             /* what close() answers */
    struct srv_wsread_loop *pause_L; /* set: pause after each message */
};

static void r_data(void *u, const void *p, size_t len, size_t remaining,
                   bool fin, bool binary)
{
    struct rec *r = u;

    assert_true(r->msg_len + len <= sizeof(r->msg));
    memcpy(r->msg + r->msg_len, p, len);
    r->msg_len += len;
    r->pieces++;
    r->last_remaining = remaining;
    r->last_binary = binary;
    if (fin && remaining == 0) {
        r->messages++;
        if (r->pause_L)
            srv_wsread_pause(r->pause_L);
    }
}

static void r_pong(void *u) { ((struct rec *)u)->pongs++; }
static void r_want(void *u) { ((struct rec *)u)->want_writes++; }

static bool r_close(void *u, const unsigned char *p, size_t len)
{
    struct rec *r = u;

    r->closes++;
    memcpy(r->close_payload, p, len);
    r->close_len = len;
    return r->echo;
}

static void r_fail(void *u, unsigned code, const char *why)
{
    struct rec *r = u;

    assert_non_null(why);
    r->fails++;
    r->fail_code = code;
}

static const struct srv_wsread_sink sink = {
    .data = r_data, .pong = r_pong, .want_write = r_want,
    .close = r_close, .fail = r_fail,
};

/* The same sink for a session that negotiated permessage-deflate: the
 * pieces of compressed messages are counted apart, then recorded. */
static int z_pieces;
static void r_data_z(void *u, const void *p, size_t len, size_t remaining,
                     bool fin, bool binary)
{
    z_pieces++;
    r_data(u, p, len, remaining, fin, binary);
}
static bool r_pmd(void *u)
{
    (void)u;
    return true;
}
static const struct srv_wsread_sink sink_pmd = {
    .data = r_data, .pong = r_pong, .want_write = r_want,
    .close = r_close, .fail = r_fail, .pmd = r_pmd, .data_z = r_data_z,
};

/* A client frame; mask on unless asked otherwise. Returns its length. */
static size_t mkframe(unsigned char *out, unsigned b0, const void *payload,
                      size_t len, bool mask)
{
    static const unsigned char key[4] = {0x11, 0x22, 0x33, 0x44};
    size_t o = 0;

    out[o++] = (unsigned char)b0;
    if (len < 126) {
        out[o++] = (unsigned char)((mask ? 0x80 : 0) | len);
    } else if (len < 65536) {
        out[o++] = (unsigned char)((mask ? 0x80 : 0) | 126);
        out[o++] = (unsigned char)(len >> 8);
        out[o++] = (unsigned char)len;
    } else {
        out[o++] = (unsigned char)((mask ? 0x80 : 0) | 127);
        for (int i = 7; i >= 0; i--)
            out[o++] = (unsigned char)((uint64_t)len >> (8 * i));
    }
    if (mask) {
        memcpy(out + o, key, 4);
        o += 4;
    }
    for (size_t i = 0; i < len; i++)
        out[o + i] = ((const unsigned char *)payload)[i] ^
                     (mask ? key[i & 3] : 0);
    return o + len;
}

/* Push bytes through a socketpair and feed what each recv() returns,
 * reading at most piece bytes at a time. The last feed's result. */
static enum srv_wsread_rc pump(struct srv_wsread_loop *L,
                               struct srv_wsread **sp, const void *bytes,
                               size_t len, size_t piece, struct rec *r)
{
    enum srv_wsread_rc rc = SRV_WSREAD_MORE;
    unsigned char buf[64 * 1024];
    int sv[2];
    size_t sent = 0;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    while (sent < len) {
        size_t chunk = len - sent < 32768 ? len - sent : 32768;
        ssize_t w = write(sv[0], (const char *)bytes + sent, chunk);

        assert_true(w > 0);
        sent += (size_t)w;
        for (size_t got = 0; got < (size_t)w;) {
            size_t want = piece < sizeof(buf) ? piece : sizeof(buf);
            ssize_t n = recv(sv[1], buf, want, 0);

            assert_true(n > 0);
            got += (size_t)n;
            rc = srv_wsread_feed(L, sp, buf, (size_t)n, &sink, r);
            if (rc != SRV_WSREAD_MORE)
                goto out;
        }
    }
out:
    close(sv[0]);
    close(sv[1]);
    return rc;
}

static void test_wsread_one_frame_holds_nothing(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char f[256];
    size_t n = mkframe(f, 0x81, "{\"event\":\"x\"}", 13, true);

    (void)state;
    assert_int_equal(pump(L, &st, f, n, sizeof(f), r), SRV_WSREAD_MORE);
    assert_int_equal(r->messages, 1);
    assert_int_equal(r->pieces, 1);
    assert_memory_equal(r->msg, "{\"event\":\"x\"}", 13);
    assert_false(r->last_binary);
    assert_null(st); /* an idle session holds no state */
    assert_int_equal(srv_wsread_held(st), 0);
    free(r);
    srv_wsread_loop_free(L);
}

static void test_wsread_split_at_every_byte(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    unsigned char payload[300], f[400];
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (unsigned char)('a' + i % 26);
    n = mkframe(f, 0x82, payload, sizeof(payload), true);
    for (size_t piece = 1; piece < n; piece += 7) {
        struct srv_wsread *st = NULL;
        struct rec *r = calloc(1, sizeof(*r));

        assert_int_equal(pump(L, &st, f, n, piece, r), SRV_WSREAD_MORE);
        assert_int_equal(r->messages, 1);
        assert_int_equal(r->msg_len, sizeof(payload));
        assert_memory_equal(r->msg, payload, sizeof(payload));
        assert_true(r->last_binary);
        assert_null(st);
        free(r);
    }
    srv_wsread_loop_free(L);
}

static void test_wsread_state_only_mid_frame(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char f[64];
    size_t n = mkframe(f, 0x81, "hello world", 11, true);

    (void)state;
    /* Half a header, then the rest. */
    assert_int_equal(srv_wsread_feed(L, &st, f, 1, &sink, r), SRV_WSREAD_MORE);
    assert_non_null(st);
    assert_true(srv_wsread_held(st) > 4096);
    assert_int_equal(srv_wsread_feed(L, &st, f + 1, n - 1, &sink, r),
                     SRV_WSREAD_MORE);
    assert_null(st);
    assert_int_equal(r->messages, 1);
    free(r);
    srv_wsread_loop_free(L);
}

/* Input backpressure: a pause after each message keeps the rest of the
 * read (past wslay's own 4 KiB) for resume, which hands the messages over
 * in order, one pause at a time, and then holds nothing. */
static void test_wsread_pause_keeps_the_rest_for_resume(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char *all = malloc(200 * 64);
    char text[64];
    size_t n = 0;
    enum srv_wsread_rc rc;
    int rounds = 0;

    (void)state;
    for (int i = 0; i < 200; i++) {
        int len = snprintf(text, sizeof(text), "{\"event\":\"m%03d\"}", i);

        n += mkframe(all + n, 0x81, text, (size_t)len, true);
    }
    r->pause_L = L;
    rc = srv_wsread_feed(L, &st, all, n, &sink, r);
    assert_int_equal(rc, SRV_WSREAD_PAUSED);
    assert_int_equal(r->messages, 1);
    /* wslay took its 4 KiB; the rest of the read waits in the state. */
    assert_non_null(st);
    assert_true(srv_wsread_held(st) > 4096 + (n - 4096) - 64);
    while (rc == SRV_WSREAD_PAUSED && rounds++ < 1000)
        rc = srv_wsread_resume(L, &st, &sink, r);
    assert_int_equal(rc, SRV_WSREAD_MORE);
    assert_int_equal(r->messages, 200);
    assert_int_equal(rounds, 200);
    /* In order, none lost or doubled. */
    for (int i = 0, off = 0; i < 200; i++) {
        int len = snprintf(text, sizeof(text), "{\"event\":\"m%03d\"}", i);

        assert_memory_equal(r->msg + off, text, (size_t)len);
        off += len;
    }
    assert_null(st);
    /* Resume with nothing kept is a no-op. */
    assert_int_equal(srv_wsread_resume(L, &st, &sink, r), SRV_WSREAD_MORE);
    free(all);
    free(r);
    srv_wsread_loop_free(L);
}

/* A pause that ends the read exactly keeps nothing but the pause. */
static void test_wsread_pause_at_the_end_holds_nothing(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char f[64];
    size_t n = mkframe(f, 0x81, "{\"event\":\"x\"}", 13, true);

    (void)state;
    r->pause_L = L;
    assert_int_equal(srv_wsread_feed(L, &st, f, n, &sink, r),
                     SRV_WSREAD_PAUSED);
    assert_null(st);
    assert_int_equal(srv_wsread_resume(L, &st, &sink, r), SRV_WSREAD_MORE);
    assert_int_equal(r->messages, 1);
    free(r);
    srv_wsread_loop_free(L);
}

static void test_wsread_many_frames_and_big_one(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    size_t big = 70000, n = 0;
    unsigned char *payload = malloc(big), *buf = malloc(big + 64 * 100);

    (void)state;
    for (size_t i = 0; i < big; i++)
        payload[i] = (unsigned char)(i * 7);
    for (int i = 0; i < 50; i++)
        n += mkframe(buf + n, 0x81, "0123456789", 10, true);
    n += mkframe(buf + n, 0x82, payload, big, true);
    n += mkframe(buf + n, 0x81, "", 0, true); /* empty */
    assert_int_equal(pump(L, &st, buf, n, 64 * 1024, r), SRV_WSREAD_MORE);
    assert_int_equal(r->messages, 52);
    assert_int_equal(r->msg_len, 500 + big);
    assert_memory_equal(r->msg + 500, payload, big);
    assert_null(st);
    free(payload);
    free(buf);
    free(r);
    srv_wsread_loop_free(L);
}

static void test_wsread_ping_inside_fragmented_message(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char buf[256], out[125];
    size_t n = 0, len = 0;

    (void)state;
    n += mkframe(buf + n, 0x01, "abc", 3, true);      /* text, no FIN */
    n += mkframe(buf + n, 0x89, "ping!", 5, true);    /* ping */
    n += mkframe(buf + n, 0x00, "def", 3, true);      /* continuation */
    n += mkframe(buf + n, 0x8a, "", 0, true);         /* pong */
    assert_int_equal(pump(L, &st, buf, n, 5, r), SRV_WSREAD_MORE);
    assert_int_equal(r->messages, 0);
    assert_int_equal(r->want_writes, 1);
    assert_int_equal(r->pongs, 1);
    assert_non_null(st); /* the message is open, a pong is owed */
    assert_int_equal(srv_wsread_take_out(&st, out, &len), 0xA);
    assert_int_equal(len, 5);
    assert_memory_equal(out, "ping!", 5);
    assert_int_equal(srv_wsread_take_out(&st, out, &len), 0);
    assert_non_null(st); /* still inside the message */
    n = mkframe(buf, 0x80, "ghi", 3, true);         /* final continuation */
    assert_int_equal(pump(L, &st, buf, n, 2, r), SRV_WSREAD_MORE);
    assert_int_equal(r->messages, 1);
    assert_memory_equal(r->msg, "abcdefghi", 9);
    assert_null(st);
    free(r);
    srv_wsread_loop_free(L);
}

static void test_wsread_close_echo(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char buf[256], out[125];
    const unsigned char cp[] = {0x03, 0xe8, 'b', 'y', 'e'};
    size_t n = 0, len = 0;

    (void)state;
    r->echo = true;
    n += mkframe(buf + n, 0x88, cp, sizeof(cp), true);
    n += mkframe(buf + n, 0x81, "after", 5, true); /* never parsed */
    assert_int_equal(pump(L, &st, buf, n, sizeof(buf), r), SRV_WSREAD_STOP);
    assert_int_equal(r->closes, 1);
    assert_int_equal(r->close_len, sizeof(cp));
    assert_int_equal(r->pieces, 0);
    assert_int_equal(srv_wsread_take_out(&st, out, &len), 0x8);
    assert_int_equal(len, sizeof(cp));
    assert_memory_equal(out, cp, sizeof(cp));
    /* Stopped: nothing more is read as frames. */
    assert_int_equal(srv_wsread_feed(L, &st, buf, n, &sink, r),
                     SRV_WSREAD_STOP);
    assert_int_equal(r->closes, 1);
    srv_wsread_free(&st);
    assert_null(st);
    free(r);
    srv_wsread_loop_free(L);
}

/* A bad frame fails 1002 once; a close after it still reaches the sink. */
static void expect_fail(const unsigned char *bad, size_t bad_len,
                        bool followable)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char buf[512];
    size_t n = 0;
    enum srv_wsread_rc rc;

    memcpy(buf, bad, bad_len);
    n = bad_len;
    n += mkframe(buf + n, 0x81, "ignored", 7, true);
    n += mkframe(buf + n, 0x88, "\x03\xe8", 2, true);
    rc = pump(L, &st, buf, n, 3, r);
    assert_int_equal(r->fails, 1);
    assert_int_equal(r->fail_code, 1002);
    assert_int_equal(r->messages, 0);
    if (followable) {
        assert_int_equal(rc, SRV_WSREAD_STOP); /* ended by the close */
        assert_int_equal(r->closes, 1);
    } else {
        assert_int_equal(rc, SRV_WSREAD_STOP);
        assert_int_equal(r->closes, 0);
    }
    srv_wsread_free(&st);
    free(r);
    srv_wsread_loop_free(L);
}

static void test_wsread_errors(void **state)
{
    unsigned char f[256], big[200];
    size_t n;

    (void)state;
    memset(big, 'p', sizeof(big));
    /* Unmasked client frames (RFC 6455 section 5.1), data and control. */
    n = mkframe(f, 0x81, "x", 1, false);
    expect_fail(f, n, true);
    n = mkframe(f, 0x89, "", 0, false);
    expect_fail(f, n, true);
    for (unsigned rsv = 1; rsv < 8; rsv++) {
        n = mkframe(f, 0x81 | (rsv << 4), "x", 1, true);
        expect_fail(f, n, true);
    }
    for (unsigned op = 3; op < 16; op++) {
        if (op >= 8 && op <= 10)
            continue;
        n = mkframe(f, 0x80 | op, "x", 1, true);
        expect_fail(f, n, true);
    }
    n = mkframe(f, 0x80, "x", 1, true); /* continuation without a start */
    expect_fail(f, n, true);
    n = mkframe(f, 0x01, "a", 1, true); /* text inside a text message */
    n += mkframe(f + n, 0x81, "b", 1, true);
    expect_fail(f, n, true);
    n = mkframe(f, 0x09, "x", 1, true); /* fragmented ping (wslay) */
    expect_fail(f, n, false);
    n = mkframe(f, 0x89, big, 126, true); /* ping over 125 bytes */
    expect_fail(f, n, false);
    /* A 64-bit length with the top bit set. */
    {
        unsigned char t[] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0,
                             1, 2, 3, 4};
        expect_fail(t, sizeof(t), false);
    }
}

/* Found by fuzz_wsread: a header wslay refuses after an earlier failure
 * (the peer answered the 1002 with a ping over 125 bytes instead of a
 * close) reported the failure a second time; wsread.h says once. */
static void test_wsread_bad_header_after_failure_fails_once(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    struct rec *r = calloc(1, sizeof(*r));
    unsigned char buf[256], big[126];
    size_t n = 0;

    (void)state;
    memset(big, 'p', sizeof(big));
    n += mkframe(buf + n, 0x81, "x", 1, false); /* unmasked: 1002 */
    n += mkframe(buf + n, 0x89, big, sizeof(big), true);
    for (size_t piece = 1; piece <= n; piece += n - 1) {
        memset(r, 0, sizeof(*r));
        assert_int_equal(pump(L, &st, buf, n, piece, r), SRV_WSREAD_STOP);
        assert_int_equal(r->fails, 1);
        assert_int_equal(r->fail_code, 1002);
        assert_int_equal(r->want_writes, 0);
        assert_non_null(st); /* stopped: what follows is discarded */
        srv_wsread_free(&st);
    }
    free(r);
    srv_wsread_loop_free(L);
}

static void test_wsread_states_across_sessions(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *a = NULL, *b = NULL;
    struct rec *ra = calloc(1, sizeof(*ra)), *rb = calloc(1, sizeof(*rb));
    unsigned char fa[64], fb[64];
    size_t na = mkframe(fa, 0x81, "session a", 9, true);
    size_t nb = mkframe(fb, 0x81, "session b", 9, true);

    (void)state;
    /* Two sessions of one loop, each mid-frame, interleaved. */
    assert_int_equal(srv_wsread_feed(L, &a, fa, 4, &sink, ra), 0);
    assert_int_equal(srv_wsread_feed(L, &b, fb, 7, &sink, rb), 0);
    assert_int_equal(srv_wsread_feed(L, &a, fa + 4, na - 4, &sink, ra), 0);
    assert_int_equal(srv_wsread_feed(L, &b, fb + 7, nb - 7, &sink, rb), 0);
    assert_memory_equal(ra->msg, "session a", 9);
    assert_memory_equal(rb->msg, "session b", 9);
    assert_null(a);
    assert_null(b);
    free(ra);
    free(rb);
    srv_wsread_loop_free(L);
}

/* RSV1 on the first frame of a message goes to data_z with its
 * continuations; the next plain message to data; RSV1 on a continuation,
 * on a ping, with RSV2, or on a session that did not negotiate: 1002. */
static void test_wsread_rsv1_only_on_a_negotiated_message_start(void **state)
{
    struct srv_wsread_loop *L = srv_wsread_loop_new();
    struct srv_wsread *st = NULL;
    unsigned char b[256];
    struct rec *r = calloc(1, sizeof(*r));
    size_t n = 0;
    static const struct {
        unsigned b0a, b0b;  /* two frames: a start, then what breaks */
        bool pmd;
    } bad[] = {
        { 0x01, 0xC0, true },  /* RSV1 on a continuation */
        { 0x81, 0xC9, true },  /* RSV1 on a ping */
        { 0x81, 0xA1, true },  /* RSV2 */
        { 0x81, 0xC1, false }, /* not negotiated */
    };

    (void)state;
    n += mkframe(b + n, 0x41, "ab", 2, true); /* RSV1, text, no FIN */
    n += mkframe(b + n, 0x80, "cd", 2, true); /* its continuation */
    n += mkframe(b + n, 0x81, "ef", 2, true); /* a plain message */
    z_pieces = 0;
    assert_int_equal(srv_wsread_feed(L, &st, b, n, &sink_pmd, r),
                     SRV_WSREAD_MORE);
    assert_int_equal(r->fails, 0);
    assert_int_equal(r->messages, 2);
    assert_int_equal(z_pieces, 2);
    assert_memory_equal(r->msg, "abcdef", 6);
    assert_null(st);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(r, 0, sizeof(*r));
        n = mkframe(b, bad[i].b0a, "x", 1, true);
        n += mkframe(b + n, bad[i].b0b, "y", 1, true);
        (void)srv_wsread_feed(L, &st, b, n, bad[i].pmd ? &sink_pmd : &sink,
                              r);
        assert_int_equal(r->fails, 1);
        assert_int_equal(r->fail_code, 1002);
        srv_wsread_free(&st);
    }
    free(r);
    srv_wsread_loop_free(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wsread_one_frame_holds_nothing),
        cmocka_unit_test(test_wsread_split_at_every_byte),
        cmocka_unit_test(test_wsread_state_only_mid_frame),
        cmocka_unit_test(test_wsread_many_frames_and_big_one),
        cmocka_unit_test(test_wsread_pause_keeps_the_rest_for_resume),
        cmocka_unit_test(test_wsread_pause_at_the_end_holds_nothing),
        cmocka_unit_test(test_wsread_ping_inside_fragmented_message),
        cmocka_unit_test(test_wsread_close_echo),
        cmocka_unit_test(test_wsread_errors),
        cmocka_unit_test(test_wsread_rsv1_only_on_a_negotiated_message_start),
        cmocka_unit_test(test_wsread_bad_header_after_failure_fails_once),
        cmocka_unit_test(test_wsread_states_across_sessions),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
