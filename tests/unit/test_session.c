/*
 * tests/unit/test_session.c - a session's state machine on the fake
 * transport: the send queue and its cork (which frames fit one write, a
 * frame too big for the cork buffer, partial writes resumed mid-frame),
 * the max_queue bound closing with 4100, errors held to the bound, input
 * backpressure (pause past half of max_queue, resume at a quarter), the
 * write deadline counting only progress under the low mark,
 * closing, the deadlines on a fake clock, inbound reassembly and its
 * checks (1009, 1007, the peer's close), the heartbeat's ping and the
 * drain, the pull order (ping, data, close), the pending list, and the
 * session's size. hub_session_check() runs after every mutation.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "fake_hub.h"

struct fixture {
    struct fake_hub fh;
    struct fake_session fs;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));

    if (!fx)
        return -1;
    fake_hub_init(&fx->fh, 1);
    fx->fh.cfg.max_queue = 4096;
    if (fake_hub_start(&fx->fh))
        return -1;
    if (fake_session_open(&fx->fh, &fx->fs, 0, NULL))
        return -1;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    hub_session_fini(&fx->fs.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fx->fh);
    free(fx);
    return 0;
}

/* A sealed frame with n payload bytes of c; f->len = n + header. */
static struct hub_frame *frame_of(size_t n, char c)
{
    struct hub_frame *f = hub_frame_create(n);

    assert_non_null(f);
    memset(hub_frame_payload(f), c, n);
    hub_frame_seal(f, n);
    return f;
}

static void push(struct hub_session *s, size_t n, char c)
{
    struct hub_frame *f = frame_of(n, c);

    assert_int_equal(hub_session_send(s, f), 0);
    hub_frame_unref(f);
    assert_int_equal(hub_session_check(s), 0);
}

static void test_session_send_asks_writable_once(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    push(s, 10, 'a');
    push(s, 10, 'b');
    /* Only the empty -> non-empty edge asks the transport. */
    assert_int_equal(fake_asks(&fx->fh, &fx->fs), 1);
    assert_int_equal(s->q.count, 2);
    assert_int_equal(s->q.bytes, 2 * (10 + 2));
    fake_flush(s);
    assert_int_equal(s->q.bytes, 0);
    push(s, 10, 'c');
    assert_int_equal(fake_asks(&fx->fh, &fx->fs), 2);
}

static void test_session_cork_takes_whole_frames_that_fit(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char buf[64];
    const unsigned char *direct;
    size_t n, dlen;
    unsigned frames;

    push(s, 10, 'a'); /* 12 bytes on the wire */
    push(s, 20, 'b'); /* 22 */
    push(s, 30, 'c'); /* 32 */
    /* Exactly the first two fit: 34 bytes. */
    n = hub_sendq_cork(&s->q, buf, 34, &direct, &dlen, &frames);
    assert_int_equal(n, 34);
    assert_int_equal(frames, 2);
    assert_null(direct);
    assert_int_equal(buf[0], 0x81);
    assert_int_equal(buf[1], 10);
    assert_int_equal(buf[2], 'a');
    assert_int_equal(buf[12], 0x81);
    assert_int_equal(buf[13], 20);
    assert_int_equal(buf[33], 'b');
    /* One byte short of two frames: only the first. */
    n = hub_sendq_cork(&s->q, buf, 33, &direct, &dlen, &frames);
    assert_int_equal(n, 12);
    assert_int_equal(frames, 1);
    /* Corking does not consume; hub_sendq_consume does. */
    assert_int_equal(s->q.count, 3);
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 34);
    hub_sendq_consume(&s->q, n);
    assert_int_equal(hub_session_check(s), 0);
    assert_int_equal(s->q.count, 1);
    assert_int_equal(s->q.bytes, 32);
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 32);
    assert_int_equal(buf[31], 'c');
    hub_sendq_consume(&s->q, n);
    assert_int_equal(s->q.count, 0);
    assert_int_equal(hub_session_check(s), 0);
}

static void test_session_cork_big_frame_goes_direct(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char buf[64];
    const unsigned char *direct;
    size_t n, dlen;
    unsigned frames;

    push(s, 200, 'x'); /* 2 + 2 header bytes: 204 */
    push(s, 5, 'y');
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 0);
    assert_non_null(direct);
    assert_int_equal(dlen, 204);
    assert_int_equal(frames, 1);
    assert_int_equal(direct[0], 0x81);
    assert_int_equal(direct[1], 126);
    assert_int_equal(direct[2] << 8 | direct[3], 200);
    hub_sendq_consume(&s->q, dlen);
    assert_int_equal(hub_session_check(s), 0);
    assert_int_equal(s->q.count, 1);
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 7);
    assert_null(direct);
}

static void test_session_cork_done_partial_resumes_mid_frame(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char buf[64];
    const unsigned char *direct;
    size_t n, dlen;
    unsigned frames;

    push(s, 10, 'a'); /* 12 */
    push(s, 10, 'b'); /* 12 */
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 24);
    /* The transport wrote 15: the first frame and 3 bytes of the next. */
    hub_sendq_consume(&s->q, 15);
    assert_int_equal(hub_session_check(s), 0);
    assert_int_equal(s->q.count, 1);
    assert_int_equal(s->q.head_off, 3);
    assert_int_equal(s->q.bytes, 9);
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 9);
    assert_int_equal(buf[0], 'b');
    assert_int_equal(buf[8], 'b');
    /* Zero bytes written changes nothing. */
    hub_sendq_consume(&s->q, 0);
    assert_int_equal(s->q.head_off, 3);
    assert_int_equal(hub_session_check(s), 0);
    /* Then one byte at a time. */
    for (int i = 0; i < 9; i++) {
        hub_sendq_consume(&s->q, 1);
        assert_int_equal(hub_session_check(s), 0);
    }
    assert_int_equal(s->q.count, 0);
    assert_int_equal(s->q.head_off, 0);
    /* Mid-frame resume also works for a direct frame. */
    push(s, 100, 'z'); /* 102 */
    push(s, 1, 'q');
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 0);
    hub_sendq_consume(&s->q, 50);
    n = hub_sendq_cork(&s->q, buf, sizeof(buf), &direct, &dlen, &frames);
    assert_int_equal(n, 52 + 3);
    assert_int_equal(buf[51], 'z');
    assert_int_equal(buf[52], 0x81);
    hub_sendq_consume(&s->q, n);
    assert_int_equal(s->q.count, 0);
    assert_int_equal(hub_session_check(s), 0);
}

static void test_session_queue_grows_and_wraps(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    /* Interleave pushes and partial drains so head wraps the ring. */
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 7; i++)
            push(s, 3, (char)('a' + i));
        for (int i = 0; i < 5; i++) {
            hub_sendq_consume(&s->q, 5);
            assert_int_equal(hub_session_check(s), 0);
        }
        if (s->q.bytes > 2048)
            fake_flush(s);
    }
    fake_flush(s);
    assert_int_equal(s->q.count, 0);
    assert_int_equal(hub_session_check(s), 0);
}

static void test_session_max_queue_closes_4100(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct hub_frame *f = frame_of(1000, 'x'); /* 1004 bytes */
    int rc = 0, sent = 0;

    while ((rc = hub_session_send(s, f)) == 0)
        sent++;
    /* max_queue is 4096: four fit, the fifth would pass it. */
    assert_int_equal(sent, 4);
    assert_int_equal(rc, -ENOBUFS);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4100);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_SLOW);
    /* The backlog is dropped; only the pusher:error waits. */
    assert_int_equal(s->q.count, 1);
    assert_non_null(strstr(fake_frame_text(s, 0), "\"code\":4100"));
    assert_int_equal(hub_session_check(s), 0);
    /* Nothing more is queued once closing. */
    assert_int_equal(hub_session_send(s, f), -EPIPE);
    assert_int_equal(hub_session_send_text(s, "{}", 2), -EPIPE);
    assert_true(hub_session_has_output(s));
    hub_frame_unref(f);
}

/* An error is a reply like any other: past max_queue the peer is a slow
 * consumer, and only the 4100 is left to go. */
static void test_session_errors_count_against_max_queue(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct hub_frame *f = frame_of(4050, 'x'); /* 4054 of 4096 */

    assert_int_equal(hub_session_send(s, f), 0);
    hub_frame_unref(f);
    hub_session_send_error(s, 4301, "rate limited", false);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4100);
    assert_int_equal(s->q.count, 1);
    assert_non_null(strstr(fake_frame_text(s, 0), "\"code\":4100"));
    assert_true(s->q.bytes <= 4096);
    assert_int_equal(hub_session_check(s), 0);
}

/* A flood of messages the hub must answer, from a peer that reads
 * nothing: the queue never passes max_queue whatever the peer sends. */
static void test_session_error_flood_stays_bounded(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    for (int i = 0; i < 10000 && s->state == HUB_SESSION_OPEN; i++) {
        hub_session_send_error(s, -1, "Invalid message: x", false);
        assert_true(s->q.bytes <= 4096);
    }
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4100);
    assert_int_equal(hub_session_check(s), 0);
}

/* Input backpressure: past half of max_queue the transport stops reading;
 * at a quarter it is told to read again, and the pong deadline waits. */
static void test_session_rx_pause_and_resume(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char buf[8192];
    struct hub_out o;

    push(s, 1000, 'a');
    assert_false(hub_session_rx_pause(s)); /* 1004 of 4096: under 2048 */
    push(s, 1000, 'b');
    push(s, 1000, 'c');
    assert_true(hub_session_rx_pause(s));
    assert_true(hub_session_rx_paused(s));
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.rx_paused), 1);
    /* Asked again while paused: still paused, counted once. */
    assert_true(hub_session_rx_pause(s));
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.rx_paused), 1);
    /* 2008 left is over the low mark (1024): no resume yet. */
    assert_int_equal(hub_session_next_out(s, buf, 1004, &o), HUB_OUT_DATA);
    hub_session_out_done(s, &o, o.len, 0);
    assert_int_equal(fx->fs.conn.resumes, 0);
    assert_true(hub_session_rx_paused(s));
    /* Down to 1004: read again. */
    assert_int_equal(hub_session_next_out(s, buf, 1004, &o), HUB_OUT_DATA);
    hub_session_out_done(s, &o, o.len, 0);
    assert_int_equal(fx->fs.conn.resumes, 1);
    assert_false(hub_session_rx_paused(s));
    assert_int_equal(hub_session_check(s), 0);
}

/* A paused session that closes is read again (the peer's close answer). */
static void test_session_rx_pause_ends_with_the_close(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    push(s, 3000, 'a');
    assert_true(hub_session_rx_pause(s));
    hub_session_close(s, 4200, "bye", HUB_CLOSE_DRAIN, true);
    assert_int_equal(fx->fs.conn.resumes, 1);
    assert_false(hub_session_rx_paused(s));
    /* A closing session is never paused. */
    assert_false(hub_session_rx_pause(s));
}

static void test_session_close_is_idempotent_and_timed(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    push(s, 10, 'a');
    hub_session_close(s, 4200, "bye", HUB_CLOSE_DRAIN, false);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->q.count, 1); /* sent before the close frame */
    hub_session_close(s, 4009, "again", HUB_CLOSE_APP, true);
    assert_int_equal(s->close_code, 4200);
    assert_string_equal(s->close_text, "bye");
    assert_int_equal(s->q.count, 1);
    /* A peer that never finishes the close is killed at close_timeout. */
    fake_hub_advance(&fx->fh, 1990);
    assert_int_equal(fx->fs.conn.kills, 0);
    fake_hub_advance(&fx->fh, 30);
    assert_int_equal(fx->fs.conn.kills, 1);
}

static void test_session_close_drop_queue(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    push(s, 10, 'a');
    push(s, 10, 'b');
    hub_session_close(s, 1009, "too big", HUB_CLOSE_TOO_BIG, true);
    assert_int_equal(s->q.count, 0);
    assert_int_equal(s->q.bytes, 0);
    assert_true(hub_session_has_output(s));
    assert_int_equal(hub_session_check(s), 0);
}

static void test_session_pong_deadline_4201(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct fake_session live;

    assert_int_equal(fake_session_open(&fx->fh, &live, 0, NULL), 0);
    /* Silent past ping_interval: the heartbeat flags a ping. */
    fake_hub_advance(&fx->fh, 25000 + 1000);
    assert_true(s->ping_due);
    assert_true(s->ping_outstanding);
    assert_true(live.s.ping_due);
    /* /stats counts both pong deadlines. */
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.pong_armed), 2);
    /* live answers (any inbound frame counts); s stays silent. */
    hub_session_on_pong(&live.s, fake_now_ms(&fx->fh));
    fake_hub_advance(&fx->fh, 10000 + 100);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4201);
    assert_non_null(strstr(fake_frame_text(s, s->q.count - 1),
                           "\"code\":4201"));
    assert_int_equal(live.s.state, HUB_SESSION_OPEN);
    /* Both fired (live's found it alive): none is armed any more. */
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.pong_armed), 0);
    hub_session_fini(&live.s, HUB_CLOSE_PEER);
}

/*
 * A ping queued by the heartbeat but written only after its loop stalled
 * past the pong timeout gets the whole timeout from the write: the peer
 * answers within it and stays open. A ping written on time keeps its
 * deadline from the heartbeat.
 */
static void test_session_late_ping_write_rearms_pong(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct fake_session prompt;
    uint64_t queued, deadline;

    assert_int_equal(fake_session_open(&fx->fh, &prompt, 0, NULL), 0);
    fake_hub_advance(&fx->fh, 25000 + 1000);
    assert_true(s->ping_due);
    assert_true(prompt.s.ping_due);
    queued = s->ping_sent_ms;
    deadline = hub_timer_deadline_ms(&s->pong_timer);
    assert_int_equal(deadline, queued + 10000);
    /* prompt's ping goes out at once: its deadline stays. */
    hub_session_ping_written(&prompt.s, fake_now_ms(&fx->fh));
    assert_int_equal(hub_timer_deadline_ms(&prompt.s.pong_timer),
                     prompt.s.ping_sent_ms + 10000);
    /* The loop stalls 12 s before it writes s's ping (no advance runs). */
    fx->fh.now_ns += 12000 * 1000000ull;
    hub_session_ping_written(s, fake_now_ms(&fx->fh));
    assert_int_equal(hub_timer_deadline_ms(&s->pong_timer),
                     fake_now_ms(&fx->fh) + 10000);
    fake_hub_advance(&fx->fh, 100);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    /* prompt never answered: its deadline passed during the stall. */
    assert_int_equal(prompt.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(prompt.s.close_code, 4201);
    /* s answers within the new deadline and stays open past it. */
    hub_session_on_pong(s, fake_now_ms(&fx->fh));
    fake_hub_advance(&fx->fh, 10000 + 100);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    assert_false(hub_timer_is_armed(&s->pong_timer));
    hub_session_fini(&prompt.s, HUB_CLOSE_PONG_TIMEOUT);
}

/* An armed pong deadline stopped by a close or a fini leaves the count. */
static void test_session_pong_armed_follows_close_and_fini(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct hub_loop_stats *st = &fx->fh.loops[0]->stats;
    struct fake_session live;

    assert_int_equal(fake_session_open(&fx->fh, &live, 0, NULL), 0);
    fake_hub_advance(&fx->fh, 25000 + 1000);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 2);
    /* Answered, silent again past ping_interval: re-armed, not counted twice. */
    hub_session_on_pong(&live.s, fake_now_ms(&fx->fh));
    hub_session_on_pong(s, fake_now_ms(&fx->fh));
    fake_hub_advance(&fx->fh, 25000 + 1000);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 2);
    hub_session_fini(&live.s, HUB_CLOSE_PEER);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 1);
    hub_session_close(s, 1000, "bye", HUB_CLOSE_PEER, false);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 0);
}

/* stats.queued_bytes is the sum of the loop's queues, whatever empties them. */
static void test_session_queued_bytes_follows_the_queue(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct hub_loop_stats *st = &fx->fh.loops[0]->stats;
    unsigned char buf[64];
    struct hub_out o;
    size_t n;

    assert_int_equal(HUB_STAT_GET(st->queued_bytes), 0);
    push(s, 10, 'a');
    push(s, 20, 'b');
    assert_int_equal(HUB_STAT_GET(st->queued_bytes), s->q.bytes);
    assert_int_equal(hub_session_next_out(s, buf, sizeof(buf), &o),
                     HUB_OUT_DATA);
    n = o.len;
    hub_session_out_done(s, &o, n / 2, 0);  /* a partial write */
    assert_int_equal(HUB_STAT_GET(st->queued_bytes), s->q.bytes);
    push(s, 30, 'c');
    assert_int_equal(HUB_STAT_GET(st->queued_bytes), s->q.bytes);
    hub_session_close(s, 1000, "bye", HUB_CLOSE_PEER, true);
    assert_int_equal(HUB_STAT_GET(st->queued_bytes), 0);
    {
        struct hub_frame *f = frame_of(5, 'x');

        /* Refused once closing: nothing counted. */
        assert_int_equal(hub_session_send(s, f), -EPIPE);
        hub_frame_unref(f);
    }
    assert_int_equal(HUB_STAT_GET(st->queued_bytes), 0);
}

static void test_session_idle_timeout_rearms_on_data(void **state)
{
    struct fake_hub fh;
    struct fake_session fs;
    struct hub_session *s = &fs.s;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.cfg.idle_timeout_ms = 5000;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &fs, 0, &fh.apps[0]), 0);
    fake_hub_advance(&fh, 4000);
    fake_recv(&fh, s, "{\"event\":\"pusher:ping\",\"data\":{}}");
    assert_true(fake_find(s, "pusher:pong") >= 0);
    /* The timer fires at 5 s, sees data at 4 s and re-arms to 9 s. */
    fake_hub_advance(&fh, 4000);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    fake_hub_advance(&fh, 1100);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4202);
    hub_session_fini(s, HUB_CLOSE_IDLE);
    fake_hub_stop(&fh);
}

static void test_session_fini_releases_everything(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_frame *f = frame_of(10, 'k');

    (void)state;
    fake_hub_init(&fh, 1);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 0, &fh.apps[0]);
    fake_subscribe(&fh, &a.s, "presence-f", "{\"user_id\":\"a\"}");
    fake_subscribe(&fh, &a.s, "private-f", NULL);
    assert_int_equal(hub_session_send(&a.s, f), 0);
    hub_session_close(&a.s, 4200, "x", HUB_CLOSE_DRAIN, false);
    assert_int_equal(atomic_load(&fh.hub->sessions), 2);
    hub_session_fini(&a.s, HUB_CLOSE_DRAIN);
    assert_null(a.s.loop);
    assert_int_equal(a.s.q.count, 0);
    assert_int_equal(atomic_load(&fh.hub->sessions), 1);
    assert_int_equal(hub_chanmap_count(fh.loops[0]->chans), 0);
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.closed[HUB_CLOSE_DRAIN]),
                     1);
    /* Idempotent. */
    hub_session_fini(&a.s, HUB_CLOSE_DRAIN);
    /* Only our reference is left on the frame. */
    assert_int_equal(atomic_load(&f->refs), 1);
    hub_frame_unref(f);
    /* The close timer was stopped: advancing kills nothing. */
    fake_hub_advance(&fh, 5000);
    assert_int_equal(a.conn.kills, 0);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* A hub with a write timeout of 1 s and one session (no app). */
static void wt_open(struct fake_hub *fh, struct fake_session *fs,
                    uint64_t idle_ms)
{
    fake_hub_init(fh, 1);
    fh->cfg.write_timeout_ms = 1000;
    fh->cfg.idle_timeout_ms = idle_ms;
    assert_int_equal(fake_hub_start(fh), 0);
    assert_int_equal(fake_session_open(fh, fs, 0, NULL), 0);
}

static void test_session_write_timeout_closes_a_stalled_queue(void **state)
{
    struct fake_hub fh;
    struct fake_session fs;
    struct hub_session *s = &fs.s;
    unsigned char buf[64];
    struct hub_out o;

    (void)state;
    wt_open(&fh, &fs, 0);
    /* Nothing queued: nothing armed for it. */
    assert_false(hub_timer_is_armed(&s->deadline_timer));
    push(s, 10, 'a');
    push(s, 10, 'b');
    assert_true(hub_timer_is_armed(&s->deadline_timer));
    /* The socket takes 5 bytes at 500 ms: progress restarts the window. */
    fake_hub_advance(&fh, 500);
    assert_int_equal(hub_session_next_out(s, buf, sizeof(buf), &o),
                     HUB_OUT_DATA);
    hub_session_out_done(s, &o, 5, 0);
    /* The entry fires (due at 1 s), finds progress 600 ms ago, re-arms. */
    fake_hub_advance(&fh, 600);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    assert_true(hub_timer_is_armed(&s->deadline_timer));
    /* Nothing more taken: closed 1 s after the last progress. */
    fake_hub_advance(&fh, 300);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    fake_hub_advance(&fh, 200);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4100);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_WRITE_TIMEOUT);
    /* The backlog is dropped; the pusher:error is what waits. */
    assert_int_equal(s->q.count, 1);
    assert_non_null(strstr(fake_frame_text(s, 0), "\"code\":4100"));
    assert_int_equal(hub_session_check(s), 0);
    hub_session_fini(s, HUB_CLOSE_WRITE_TIMEOUT);
    assert_int_equal(
        HUB_STAT_GET(fh.loops[0]->stats.closed[HUB_CLOSE_WRITE_TIMEOUT]), 1);
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.closed[HUB_CLOSE_SLOW]),
                     0);
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.queued_bytes), 0);
    fake_hub_stop(&fh);
}

static void test_session_write_timeout_spares_readers_and_quiet(void **state)
{
    struct fake_hub fh;
    struct fake_session fs, quiet;
    struct hub_session *s = &fs.s;

    (void)state;
    wt_open(&fh, &fs, 0);
    assert_int_equal(fake_session_open(&fh, &quiet, 0, NULL), 0);
    /* A reader whose queue empties within the window, for 20 windows. */
    for (int i = 0; i < 40; i++) {
        push(s, 10, 'r');
        fake_hub_advance(&fh, 400);
        fake_flush(s);
        fake_hub_advance(&fh, 100);
    }
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    /* Once empty, the entry lapses: nothing is armed for an empty queue. */
    fake_hub_advance(&fh, 1100);
    assert_false(hub_timer_is_armed(&s->deadline_timer));
    /* A window starts when the queue goes non-empty, not at the last
     * write long ago. */
    push(s, 10, 'n');
    fake_hub_advance(&fh, 900);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    fake_flush(s);
    /* A session with nothing queued is never closed by it. */
    fake_hub_advance(&fh, 30000);
    assert_int_equal(quiet.s.state, HUB_SESSION_OPEN);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    hub_session_fini(&quiet.s, HUB_CLOSE_PEER);
    hub_session_fini(s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_session_write_timeout_shares_the_idle_entry(void **state)
{
    struct fake_hub fh;
    struct fake_session fs;
    struct hub_session *s = &fs.s;

    (void)state;
    /* Idle 5 s and write 1 s on one entry: the earlier deadline wins. */
    wt_open(&fh, &fs, 5000);
    assert_int_equal(hub_timer_deadline_ms(&s->deadline_timer),
                     fake_now_ms(&fh) + 5000);
    push(s, 10, 'a');
    assert_int_equal(hub_timer_deadline_ms(&s->deadline_timer),
                     fake_now_ms(&fh) + 1000);
    fake_hub_advance(&fh, 500);
    fake_flush(s);
    /* Fires at 1 s with an empty queue: back to the idle deadline. */
    fake_hub_advance(&fh, 600);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    assert_true(hub_timer_is_armed(&s->deadline_timer));
    assert_int_equal(hub_timer_deadline_ms(&s->deadline_timer),
                     fake_now_ms(&fh) - 1100 + 5000);
    fake_hub_advance(&fh, 4000);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4202);
    hub_session_fini(s, HUB_CLOSE_IDLE);
    fake_hub_stop(&fh);
}

/* A peer that drains a trickle while its queue stays above the low mark
 * makes no progress: closed after write_timeout whatever it drained. */
static void test_session_write_timeout_counts_only_under_the_low_mark(
    void **state)
{
    struct fake_hub fh;
    struct fake_session fs;
    struct hub_session *s = &fs.s;
    unsigned char buf[64];
    struct hub_out o;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.cfg.write_timeout_ms = 1000;
    fh.cfg.max_queue = 4096;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &fs, 0, NULL), 0);
    for (int i = 0; i < 30; i++)
        push(s, 96, 'a'); /* 3000 bytes: over the low mark, 1024 */
    /* 10 bytes taken every 100 ms: progress of a kind, never under 1024. */
    for (int i = 0; i < 9; i++) {
        fake_hub_advance(&fh, 100);
        assert_int_equal(hub_session_next_out(s, buf, sizeof(buf), &o),
                         HUB_OUT_DATA);
        hub_session_out_done(s, &o, 10, 0);
        assert_int_equal(s->state, HUB_SESSION_OPEN);
    }
    fake_hub_advance(&fh, 200);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4100);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_WRITE_TIMEOUT);
    hub_session_fini(s, HUB_CLOSE_WRITE_TIMEOUT);
    fake_hub_stop(&fh);
}

/* The reassembly buffer grows with the bytes that arrived, never with
 * the length a frame header declares. */
static void test_session_rx_buffer_follows_arrivals(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    const char *msg = NULL;
    size_t len = 0;
    char chunk[700];

    memset(chunk, 'x', sizeof(chunk));
    /* A frame that declares 65,000 bytes and sends 10. */
    assert_int_equal(hub_session_rx_append(s, chunk, 10, 64990, true, false,
                                           now, &msg, &len), 0);
    assert_int_equal(s->rx_cap, 1024);
    /* It doubles as bytes come, and no further. */
    assert_int_equal(hub_session_rx_append(s, chunk, 700, 64290, true, false,
                                           now, &msg, &len), 0);
    assert_int_equal(s->rx_cap, 1024);
    assert_int_equal(hub_session_rx_append(s, chunk, 700, 63590, true, false,
                                           now, &msg, &len), 0);
    assert_int_equal(s->rx_cap, 2048);
    assert_int_equal(s->rx_len, 1410);
    hub_session_rx_done(s);
}

/* Fragments are joined; a message in one piece is handed over in place. */
static void test_session_rx_joins_fragments(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    const char *msg = NULL;
    size_t len = 0;
    static const char one[] = "{\"event\":\"x\"}";

    /* One lws read of a final frame: not copied. */
    assert_int_equal(hub_session_rx_append(s, one, strlen(one), 0, true,
                                           false, now, &msg, &len), 1);
    assert_ptr_equal(msg, one);
    assert_int_equal(len, strlen(one));
    assert_null(s->rx_buf);
    hub_session_rx_done(s);
    /* Three pieces: a frame read in two, then a final fragment. */
    assert_int_equal(hub_session_rx_append(s, "ab", 2, 3, false, false, now,
                                           &msg, &len), 0);
    assert_int_equal(hub_session_rx_append(s, "cde", 3, 0, false, false, now,
                                           &msg, &len), 0);
    assert_int_equal(hub_session_rx_append(s, "fg", 2, 0, true, false, now,
                                           &msg, &len), 1);
    assert_int_equal(len, 7);
    assert_memory_equal(msg, "abcdefg", 7);
    assert_ptr_equal(msg, s->rx_buf);
    /* A final frame with bytes still to read is not the end yet. */
    hub_session_rx_done(s);
    assert_null(s->rx_buf);
    assert_int_equal(s->rx_len, 0);
    assert_int_equal(hub_session_rx_append(s, "h", 1, 1, true, false, now,
                                           &msg, &len), 0);
    assert_int_equal(hub_session_rx_append(s, "i", 1, 0, true, false, now,
                                           &msg, &len), 1);
    assert_memory_equal(msg, "hi", 2);
    hub_session_rx_done(s);
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.msgs_in), 3);
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.bytes_in),
                     strlen(one) + 7 + 2);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
}

/* max_message bytes pass; one more closes 1009, counting what is to come. */
static void test_session_rx_1009_past_max_message(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    size_t max = fx->fh.cfg.max_message;
    char *big = malloc(max + 1);
    const char *msg;
    size_t len;

    assert_non_null(big);
    memset(big, 'a', max + 1);
    assert_int_equal(hub_session_rx_append(s, big, 10, max - 10, false,
                                           false, now, &msg, &len), 0);
    assert_int_equal(hub_session_rx_append(s, big, max - 10, 0, true, false,
                                           now, &msg, &len), 1);
    assert_int_equal(len, max);
    hub_session_rx_done(s);
    /* The first piece of a frame one byte too long: 1009 at once. */
    assert_int_equal(hub_session_rx_append(s, big, 10, max + 1 - 10, false,
                                           false, now, &msg, &len), -1);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 1009);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_TOO_BIG);
    /* Closing: later data is dropped. */
    assert_int_equal(hub_session_rx_append(s, "x", 1, 0, true, false, now,
                                           &msg, &len), -1);
    hub_session_rx_done(s);
    free(big);
}

/* Invalid UTF-8 fails the connection in the piece that shows it... */
static void test_session_rx_1007_mid_message(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    const char *msg;
    size_t len;

    assert_int_equal(hub_session_rx_append(s, "ok", 2, 0, false, false, now,
                                           &msg, &len), 0);
    assert_int_equal(hub_session_rx_append(s, "\xff", 1, 0, false, false,
                                           now, &msg, &len), -1);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 1007);
    hub_session_rx_done(s);
}

/* ... or at the end, for a character cut short; binary is not checked. */
static void test_session_rx_1007_at_the_end(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    const char *msg;
    size_t len;

    assert_int_equal(hub_session_rx_append(s, "\xff\xfe", 2, 0, true, true,
                                           now, &msg, &len), 1);
    hub_session_rx_done(s);
    /* A character split over two fragments is fine... */
    assert_int_equal(hub_session_rx_append(s, "\xc3", 1, 0, false, false,
                                           now, &msg, &len), 0);
    assert_int_equal(hub_session_rx_append(s, "\xa9", 1, 0, true, false,
                                           now, &msg, &len), 1);
    hub_session_rx_done(s);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    /* ... one that never finishes is not. */
    assert_int_equal(hub_session_rx_append(s, "a\xc3", 2, 0, true, false,
                                           now, &msg, &len), -1);
    assert_int_equal(s->close_code, 1007);
}

/* A close payload the hub must not echo closes 1002 / 1007 (an error). */
static void test_session_peer_close_checks_the_payload(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    const char *why = NULL;
    static const unsigned char fine[] = { 0x03, 0xe8, 'b', 'y', 'e' };
    static const unsigned char one[] = { 0x03 };

    assert_int_equal(hub_session_on_peer_close(s, fine, sizeof(fine), now,
                                               &why), 0);
    assert_null(why);
    assert_int_equal(s->state, HUB_SESSION_OPEN);
    assert_int_equal(hub_session_on_peer_close(s, one, sizeof(one), now,
                                               &why), 1002);
    assert_string_equal(why, "invalid close frame");
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_ERROR);
}

/* hub_session_closed: the reason is the close's, or peer while open. */
static void test_session_closed_counts_the_reason(void **state)
{
    struct fixture *fx = *state;
    struct hub_loop_stats *st = &fx->fh.loops[0]->stats;
    struct fake_session other;

    assert_int_equal(fake_session_open(&fx->fh, &other, 0, NULL), 0);
    hub_session_closed(&other.s, fake_now_ms(&fx->fh));
    assert_false(hub_session_live(&other.s));
    assert_int_equal(HUB_STAT_GET(st->closed[HUB_CLOSE_PEER]), 1);
    hub_session_closed(&other.s, fake_now_ms(&fx->fh)); /* no-op */
    assert_int_equal(HUB_STAT_GET(st->closed[HUB_CLOSE_PEER]), 1);
    hub_session_close(&fx->fs.s, 4009, "x", HUB_CLOSE_APP, false);
    hub_session_closed(&fx->fs.s, fake_now_ms(&fx->fh));
    assert_int_equal(HUB_STAT_GET(st->closed[HUB_CLOSE_APP]), 1);
}

/* queue_ping: once per silence, only while open; a deadline that cannot
 * be armed queues nothing. */
static void test_session_queue_ping_skips_and_fails(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    struct hub_loop_stats *st = &fx->fh.loops[0]->stats;
    uint64_t now = fake_now_ms(&fx->fh);
    struct fake_session other;

    assert_int_equal(hub_session_queue_ping(s, now), 0);
    assert_true(s->ping_due);
    assert_true(s->ping_outstanding);
    assert_int_equal(s->ping_sent_ms, (uint32_t)now);
    assert_true(s->ping_sent_us & 1u);
    assert_true(hub_timer_is_armed(&s->pong_timer));
    assert_int_equal(fx->fs.conn.writable_calls, 1);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 1);
    /* Unanswered: skipped, nothing more asked or counted. */
    assert_int_equal(hub_session_queue_ping(s, now + 5), 1);
    assert_int_equal(s->ping_sent_ms, (uint32_t)now);
    assert_int_equal(fx->fs.conn.writable_calls, 1);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 1);
    /* Closing: skipped. */
    assert_int_equal(fake_session_open(&fx->fh, &other, 0, NULL), 0);
    hub_session_close(&other.s, 4009, "x", HUB_CLOSE_APP, false);
    assert_int_equal(hub_session_queue_ping(&other.s, now), 1);
    assert_false(other.s.ping_due);
    hub_session_fini(&other.s, HUB_CLOSE_APP);
    /* -EIO: a pong timeout the wheel cannot hold. */
    assert_int_equal(fake_session_open(&fx->fh, &other, 0, NULL), 0);
    fx->fh.cfg.pong_timeout_ms = HUB_WHEEL_MAX_DELAY_MS + 1;
    assert_int_equal(hub_session_queue_ping(&other.s, now), -EIO);
    assert_false(other.s.ping_due);
    assert_false(other.s.ping_outstanding);
    assert_int_equal(other.conn.writable_calls, 0);
    assert_int_equal(HUB_STAT_GET(st->pong_armed), 1);
    hub_session_fini(&other.s, HUB_CLOSE_PEER);
}

/* The heartbeat asks the session; the drain closes it 4200 on its entry. */
static void test_session_drain_closes_4200(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;

    hub_start_drain(fx->fh.hub);
    fake_hub_drain(&fx->fh);
    assert_true(s->draining);
    /* drain_timeout 1000 - close_timeout 2000 - 500 < 0: no spread. */
    fake_hub_advance(&fx->fh, 10);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 4200);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_DRAIN);
    assert_true(fake_find(s, "\"code\":4200") >= 0);
    /* A closing session is not drained again. */
    hub_session_drain(s, fake_now_ms(&fx->fh), 0);
    assert_int_equal(hub_session_check(s), 0);
}

/* A static reason longer than a close frame can carry. */
static const char long_reason[] =
    "0123456789012345678901234567890123456789012345678901234567890123456789"
    "0123456789012345678901234567890123456789012345678901234567890123456789";

/* The pull order: the ping first, then the data, then the close, then
 * nothing; the state moves to CLOSE_SENT only with the close. */
static void test_session_next_out_order(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char cork[256];
    struct hub_out o;
    char want[32];

    push(s, 10, 'a');
    push(s, 10, 'b');
    assert_int_equal(hub_session_queue_ping(s, fake_now_ms(&fx->fh)), 0);
    assert_int_equal(hub_session_peek_out(s), HUB_OUT_PING);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_PING);
    assert_false(s->want_writable);
    assert_false(s->ping_due);
    /* The payload names the ping by its send time. */
    snprintf(want, sizeof(want), "lubdub-%" PRIu32, s->ping_sent_us);
    assert_int_equal(o.len, strlen(want));
    assert_memory_equal(o.data, want, o.len);
    hub_session_out_done(s, &o, o.len, fake_now_ms(&fx->fh));
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.pings_sent), 1);
    /* Data is left: out_done asked again. */
    assert_true(s->want_writable);
    hub_session_close(s, 4009, long_reason, HUB_CLOSE_APP, false);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_DATA);
    assert_int_equal(o.len, 24);
    assert_int_equal(o.frames, 2);
    assert_ptr_equal(o.data, cork);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    hub_session_out_done(s, &o, o.len, 0);
    assert_int_equal(hub_session_check(s), 0);
    assert_int_equal(s->q.count, 0);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_CLOSE);
    assert_int_equal(s->state, HUB_SESSION_CLOSE_SENT);
    assert_int_equal(o.close_code, 4009);
    assert_int_equal(o.len, 123);
    assert_memory_equal(o.data, long_reason, 123);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_NONE);
    assert_int_equal(hub_session_check(s), 0);
}

/* A close clears a ping still due; drop_queue sends the close at once. */
static void test_session_close_drop_queue_pulls_close_first(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char cork[256];
    struct hub_out o;

    push(s, 10, 'a');
    assert_int_equal(hub_session_queue_ping(s, fake_now_ms(&fx->fh)), 0);
    hub_session_close(s, 1009, "too big", HUB_CLOSE_TOO_BIG, true);
    assert_false(s->ping_due);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_CLOSE);
    assert_int_equal(o.close_code, 1009);
    assert_int_equal(o.len, strlen("too big"));
    assert_int_equal(hub_session_check(s), 0);
}

/* A 4100 drops the backlog, but its pusher:error still precedes the close. */
static void test_session_4100_error_then_close(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    unsigned char cork[256];
    struct hub_out o;
    char text[256];

    push(s, 100, 'a');
    push(s, 100, 'b');
    hub_session_close_behind(s, "Slow consumer", HUB_CLOSE_SLOW);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_DATA);
    assert_int_equal(o.frames, 1);
    assert_true(o.len > 2 && o.len - 2 < sizeof(text));
    memcpy(text, o.data + 2, o.len - 2);
    text[o.len - 2] = '\0';
    assert_non_null(strstr(text, "\"code\":4100"));
    hub_session_out_done(s, &o, o.len, 0);
    assert_int_equal(hub_session_next_out(s, cork, sizeof(cork), &o),
                     HUB_OUT_CLOSE);
    assert_int_equal(o.close_code, 4100);
    assert_int_equal(HUB_STAT_GET(fx->fh.loops[0]->stats.queued_bytes), 0);
}

static struct hub_session *flush_seen[8];
static unsigned flush_n;
static struct hub_session *flush_push_to;

/* The fake transport's flush: record s and serve it; once, queue data
 * for another session meanwhile. */
static void record_flush(void *ctx, struct hub_session *s)
{
    unsigned char cork[256];
    struct hub_out o;

    (void)ctx;
    flush_seen[flush_n++] = s;
    while (hub_session_next_out(s, cork, sizeof(cork), &o) == HUB_OUT_DATA)
        hub_session_out_done(s, &o, o.len, 0);
    if (flush_push_to) {
        struct hub_session *t = flush_push_to;

        flush_push_to = NULL;
        push(t, 5, 'z');
    }
}

/* The pending list: one flush asked per pass, a session listed once, fini
 * unlists, sessions listed while flushing stay for the next pass. */
static void test_session_pending_list(void **state)
{
    struct fixture *fx = *state;
    struct hub_loop *l = fx->fh.loops[0];
    struct hub_session *a = &fx->fs.s;
    struct fake_session b, c;

    assert_int_equal(fake_session_open(&fx->fh, &b, 0, NULL), 0);
    assert_int_equal(fake_session_open(&fx->fh, &c, 0, NULL), 0);
    push(a, 10, 'a');
    push(&b.s, 10, 'b');
    push(a, 10, 'a');
    /* Data only: no writable callback, one flush for both. */
    assert_int_equal(fx->fh.flush_soons, 1);
    assert_int_equal(fx->fs.conn.writable_calls, 0);
    assert_int_equal(b.conn.writable_calls, 0);
    assert_int_equal(l->pending.n, 2);
    /* b goes away before the flush: it is skipped. */
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    flush_n = 0;
    flush_push_to = &c.s;
    hub_loop_flush(l, record_flush, NULL);
    assert_int_equal(flush_n, 1);
    assert_ptr_equal(flush_seen[0], a);
    assert_int_equal(a->q.count, 0);
    assert_false(a->want_writable);
    /* c was listed during the flush: it waits, and asked for a flush. */
    assert_int_equal(l->pending.n, 1);
    assert_ptr_equal(l->pending.v[0], &c.s);
    assert_int_equal(fx->fh.flush_soons, 2);
    flush_n = 0;
    hub_loop_flush(l, record_flush, NULL);
    assert_int_equal(flush_n, 1);
    assert_ptr_equal(flush_seen[0], &c.s);
    assert_int_equal(l->pending.n, 0);
    /* Empty again: the next edge asks again. */
    push(a, 10, 'a');
    assert_int_equal(fx->fh.flush_soons, 3);
    /* A ping due makes the session take the writable path instead. */
    fake_flush(a);
    assert_int_equal(hub_session_queue_ping(a, fake_now_ms(&fx->fh)), 0);
    assert_int_equal(fx->fs.conn.writable_calls, 1);
    assert_int_equal(l->pending.n, 0);
    hub_session_fini(&c.s, HUB_CLOSE_PEER);
}

/* The session must not grow (it is per connection: idle memory). The
 * pending list reuses want_writable; the pull interface added no field. */
#define HUB_SESSION_SIZE_LP64 248

static void test_session_size(void **state)
{
    (void)state;
#if defined(__x86_64__) || defined(__aarch64__)
    assert_int_equal(sizeof(struct hub_session), HUB_SESSION_SIZE_LP64);
#endif
}

/* A reassembly buffer that cannot grow closes 1011 and holds nothing. */
static void test_session_rx_1011_out_of_memory(void **state)
{
    struct fixture *fx = *state;
    struct hub_session *s = &fx->fs.s;
    uint64_t now = fake_now_ms(&fx->fh);
    const char *msg;
    size_t len;
    int rc;

    /* In one piece: nothing to allocate, even with malloc failing. */
    fail_alloc_after(0);
    rc = hub_session_rx_append(s, "{}", 2, 0, true, false, now, &msg, &len);
    assert_int_equal(fail_alloc_hits(), 0);
    fail_alloc_off();
    assert_int_equal(rc, 1);
    hub_session_rx_done(s);
    /* The first fragment needs the buffer: its realloc fails. */
    fail_alloc_after(0);
    rc = hub_session_rx_append(s, "ab", 2, 0, false, false, now, &msg, &len);
    assert_int_equal(fail_alloc_hits(), 1);
    fail_alloc_off();
    assert_int_equal(rc, -1);
    assert_int_equal(s->state, HUB_SESSION_CLOSING);
    assert_int_equal(s->close_code, 1011);
    assert_int_equal(s->close_reason_id, HUB_CLOSE_ERROR);
    assert_null(s->rx_buf);
    assert_int_equal(s->rx_len, 0);
    hub_session_rx_done(s);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_session_send_asks_writable_once),
        T(test_session_cork_takes_whole_frames_that_fit),
        T(test_session_cork_big_frame_goes_direct),
        T(test_session_cork_done_partial_resumes_mid_frame),
        T(test_session_queue_grows_and_wraps),
        T(test_session_max_queue_closes_4100),
        T(test_session_errors_count_against_max_queue),
        T(test_session_error_flood_stays_bounded),
        T(test_session_rx_pause_and_resume),
        T(test_session_rx_pause_ends_with_the_close),
        T(test_session_rx_buffer_follows_arrivals),
        cmocka_unit_test(
            test_session_write_timeout_counts_only_under_the_low_mark),
        T(test_session_close_is_idempotent_and_timed),
        T(test_session_close_drop_queue),
        T(test_session_pong_deadline_4201),
        T(test_session_late_ping_write_rearms_pong),
        T(test_session_pong_armed_follows_close_and_fini),
        T(test_session_queued_bytes_follows_the_queue),
        T(test_session_rx_joins_fragments),
        T(test_session_rx_1009_past_max_message),
        T(test_session_rx_1007_mid_message),
        T(test_session_rx_1007_at_the_end),
        T(test_session_rx_1011_out_of_memory),
        T(test_session_peer_close_checks_the_payload),
        T(test_session_closed_counts_the_reason),
        T(test_session_queue_ping_skips_and_fails),
        T(test_session_drain_closes_4200),
        T(test_session_next_out_order),
        T(test_session_close_drop_queue_pulls_close_first),
        T(test_session_4100_error_then_close),
        T(test_session_pending_list),
        T(test_session_size),
        cmocka_unit_test(test_session_idle_timeout_rearms_on_data),
        cmocka_unit_test(test_session_fini_releases_everything),
        cmocka_unit_test(test_session_write_timeout_closes_a_stalled_queue),
        cmocka_unit_test(test_session_write_timeout_spares_readers_and_quiet),
        cmocka_unit_test(test_session_write_timeout_shares_the_idle_entry),
    };
#undef T

    json_object_seed(1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
