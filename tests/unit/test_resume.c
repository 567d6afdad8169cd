/*
 * tests/unit/test_resume.c - recovery on a loop (hub/loop/resume.h) on a
 * two-loop fake hub: the pair frame a resuming session gets (the lubdub:id
 * marker then the event, byte for byte; with compression the marker and
 * the event's compressed variant; made once; a pair never compressed as
 * one message), and, through the real protocol (lubdub:resume, a
 * subscribe, hub_history_publish), a resumed subscription's guard: the
 * replay paced under the low mark and continued as the queue drains,
 * live frames above the floor held behind it and sent after it in order,
 * those at or under the floor dropped, the guard gone at the first live
 * frame above the floor, an unsubscribe or the session's end mid-replay
 * freeing everything, and the held bytes' bound closing 4100.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/channel/history.h"
#include "hub/loop/compress.h"
#include "hub/loop/resume.h"
#include "hub/pusher/subscribe.h"
#include "hub/wire/protocol.h"

#define MAXQ 4096u

static unsigned refs(struct hub_frame *f)
{
    return atomic_load(&f->refs);
}

static void start(struct fake_hub *fh, bool compress)
{
    fake_hub_init(fh, 2);
    fh->cfg.max_queue = MAXQ;
    fh->cfg.max_subscriptions = 100;
    if (compress) {
        fh->cfg.compression = true;
        fh->cfg.compression_min_size = 64;
        fh->apps[0].compression = true;
    }
    fh->apps[0].history = true;
    fh->apps[0].history_ttl_ms = 120000;
    fh->apps[0].history_size = 1000;
    assert_int_equal(fake_hub_start(fh), 0);
}

static struct hub_history *hist(struct fake_hub *fh)
{
    return hub_history_of(fh->hub);
}

/* Event i on ch: data "n<i> " padded to about 200 bytes. */
static struct hub_frame *event_on(const char *ch, unsigned i)
{
    char data[256];
    int n = snprintf(data, sizeof(data), "\"n%u ", i);
    struct hub_frame *f;

    memset(data + n, 'y', 200);
    data[n + 200] = '"';
    f = hub_proto_event_frame("e", ch, data, (size_t)n + 201, NULL);
    assert_non_null(f);
    return f;
}

static struct hub_frame *event(unsigned i)
{
    return event_on("c", i);
}

/* Publish event i on ch from loop 0 (no loop runs its inbox yet); the
 * caller's reference is returned. */
static struct hub_frame *publish_on(struct fake_hub *fh, const char *ch,
                                    unsigned i)
{
    struct hub_frame *f = event_on(ch, i);
    const struct hub_pub_req r = { 0, ch, strlen(ch), f, NULL, false, NULL };

    assert_int_equal(hub_history_publish(hist(fh), fh->loops[0], &fh->apps[0],
                                         &r, false),
                     0);
    assert_int_not_equal(f->hseq, 0);
    return f;
}

static struct hub_frame *publish_nodrain(struct fake_hub *fh, unsigned i)
{
    return publish_on(fh, "c", i);
}

static uint64_t publish(struct fake_hub *fh, unsigned i)
{
    struct hub_frame *f = publish_nodrain(fh, i);
    uint64_t seq = f->hseq;

    hub_frame_unref(f);
    fake_hub_drain(fh);
    return seq;
}

/*
 * What the client reads, one token a message: "ok" (succeeded), "pos",
 * "id<seq>" (a marker), "n<i>" (event i; "zn<i>" compressed), "resumed",
 * "failed", "err" (pusher:error), "?".
 */
struct wire {
    char log[8192];
    size_t len;
};

static void wire_token(struct wire *w, const unsigned char *p, size_t n,
                       bool z)
{
    char text[1024], tok[64];
    const char *q;

    if (z) {
        snprintf(tok, sizeof(tok), "z");
    } else {
        if (n >= sizeof(text))
            n = sizeof(text) - 1;
        memcpy(text, p, n);
        text[n] = '\0';
        if ((q = strstr(text, "\"lubdub:id\"")))
            snprintf(tok, sizeof(tok), "id%s",
                     strrchr(text, ',') ? strrchr(text, ',') + 1 : "?");
        else if ((q = strstr(text, "\"data\":\"n")))
            snprintf(tok, sizeof(tok), "n%u", (unsigned)atoi(q + 9));
        else if (strstr(text, "subscription_succeeded"))
            snprintf(tok, sizeof(tok), "ok");
        else if (strstr(text, "lubdub:resumed"))
            snprintf(tok, sizeof(tok), "resumed");
        else if (strstr(text, "lubdub:pos"))
            snprintf(tok, sizeof(tok), "pos");
        else if (strstr(text, "lubdub:resume_failed"))
            snprintf(tok, sizeof(tok), "failed");
        else if (strstr(text, "pusher:error"))
            snprintf(tok, sizeof(tok), "err");
        else
            snprintf(tok, sizeof(tok), "?");
        /* "id5]}" -> "id5" */
        if (tok[0] == 'i' && strchr(tok, ']'))
            *strchr(tok, ']') = '\0';
    }
    w->len += (size_t)snprintf(w->log + w->len, sizeof(w->log) - w->len,
                               "%s%s", w->len ? " " : "", tok);
}

/* Every WebSocket message in f's wire bytes into w. */
static void wire_frame(struct wire *w, const struct hub_frame *f)
{
    const unsigned char *p = hub_frame_data(f), *end = p + f->len;

    while (p < end) {
        size_t hl = 2, n = p[1] & 0x7f;

        if (n == 126) {
            n = (size_t)p[2] << 8 | p[3];
            hl = 4;
        }
        assert_true(p + hl + n <= end);
        assert_int_equal(p[0] & 0x0f, 1);
        wire_token(w, p + hl, n, p[0] & 0x40);
        p += hl + n;
    }
}

/* The transport writes s's first k queued frames (all when k is 0),
 * logging them. */
static void wire_write(struct wire *w, struct hub_session *s, unsigned k)
{
    static unsigned char buf[256 * 1024];

    hub_pending_forget(&s->loop->pending, s);
    hub_loop_flush(s->loop, fake_flush_none, NULL);
    for (unsigned i = 0; s->q.count && (!k || i < k); i++) {
        const struct hub_frame *f = s->q.ring[s->q.head];
        struct hub_out o = { .kind = HUB_OUT_DATA };

        wire_frame(w, f);
        (void)hub_sendq_cork(&s->q, buf, sizeof(buf), &o.data, &o.len,
                             &o.frames);
        hub_session_out_done(s, &o, f->len, 0);
    }
    s->want_writable = false;
}

static void resume_msg(struct fake_hub *fh, struct hub_session *s,
                       uint64_t seq)
{
    char text[512];

    if (seq == UINT64_MAX)
        snprintf(text, sizeof(text),
                 "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,"
                 "\"away_ms\":0,\"channels\":{}}}");
    else
        snprintf(text, sizeof(text),
                 "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,"
                 "\"away_ms\":0,\"channels\":{\"c\":{\"%s\":%llu}}}}",
                 hub_history_origin(hist(fh)), (unsigned long long)seq);
    fake_recv(fh, s, text);
    assert_true(hub_resume_enabled(s));
}

/* A session on loop 1 that comes back knowing seq of c: resumed and
 * subscribed (its guard set). */
static void come_back(struct fake_hub *fh, struct fake_session *b,
                      uint64_t seq)
{
    assert_int_equal(fake_session_open(fh, b, 1, &fh->apps[0]), 0);
    fake_flush(&b->s);
    resume_msg(fh, &b->s, seq);
    fake_subscribe(fh, &b->s, "c", NULL);
    assert_true(b->s.rguard);
}

static void test_resume_rframe_pair_bytes(void **state)
{
    struct fake_hub fh;
    struct hub_frame *f = event(7), *r, *r2;
    unsigned char want[1024];
    char marker[128];
    int mlen;

    (void)state;
    start(&fh, false);
    f->hseq = 42;
    f->horigin = "b0123abcd";
    mlen = snprintf(marker, sizeof(marker),
                    "{\"event\":\"lubdub:id\",\"data\":[\"b0123abcd\",42]}");
    want[0] = 0x81;
    want[1] = (unsigned char)mlen;
    memcpy(want + 2, marker, (size_t)mlen);
    memcpy(want + 2 + mlen, hub_frame_data(f), f->len);
    r = hub_loop_rframe(fh.loops[0], f, false);
    assert_non_null(r);
    assert_int_equal(r->len, 2 + (size_t)mlen + f->len);
    assert_memory_equal(hub_frame_data(r), want, r->len);
    assert_true(r->pair);
    /* Made once, held by f: every loop gets the same. */
    assert_ptr_equal(atomic_load(&f->r), r);
    r2 = hub_loop_rframe(fh.loops[1], f, false);
    assert_ptr_equal(r2, r);
    assert_int_equal(refs(r), 1);
    hub_frame_unref(f);
    fake_hub_stop(&fh);
}

static void test_resume_rframe_compressed_pair(void **state)
{
    struct fake_hub fh;
    struct hub_frame *f = event(9), *r, *z, *zf;
    struct wire w = { .len = 0 };
    size_t mlen;

    (void)state;
    start(&fh, true);
    f->hseq = 5;
    f->horigin = "bfeedbeef";
    r = hub_loop_rframe(fh.loops[0], f, false);
    assert_non_null(r);
    /* A pair is two messages: never compressed as one. */
    assert_ptr_equal(hub_loop_zframe(fh.loops[0], r), r);
    z = hub_loop_rframe(fh.loops[0], f, true);
    assert_non_null(z);
    assert_ptr_not_equal(z, r);
    assert_true(z->pair);
    assert_ptr_equal(hub_loop_rframe(fh.loops[1], f, true), z);
    /* The marker as it is, then f's own compressed variant. */
    zf = hub_loop_zframe(fh.loops[0], f);
    assert_ptr_not_equal(zf, f);
    mlen = r->len - f->len;
    assert_int_equal(z->len, mlen + zf->len);
    assert_memory_equal(hub_frame_data(z), hub_frame_data(r), mlen);
    assert_memory_equal(hub_frame_data(z) + mlen, hub_frame_data(zf),
                        zf->len);
    wire_frame(&w, z);
    assert_string_equal(w.log, "id5 z");
    /* A session sending the compressed pair sends it as it is. */
    assert_ptr_equal(hub_loop_zframe(fh.loops[0], z), z);
    hub_frame_unref(f);
    /* A frame under the compression threshold: the pair itself. */
    f = hub_proto_event_frame("e", "c", "1", 1, NULL);
    assert_non_null(f);
    assert_true(f->len < 64);
    f->hseq = 6;
    f->horigin = "bfeedbeef";
    r = hub_loop_rframe(fh.loops[0], f, false);
    assert_non_null(r);
    assert_ptr_equal(hub_loop_rframe(fh.loops[1], f, true), r);
    hub_frame_unref(f);
    fake_hub_stop(&fh);
}

/* A session that enabled resume gets history frames as their pair, and
 * lubdub:pos before a fresh subscription's succeeded; others the frame. */
static void test_resume_markers_on_resuming_sessions_only(void **state)
{
    struct fake_hub fh;
    struct fake_session a, p;
    struct wire wa = { .len = 0 }, wp = { .len = 0 };
    uint64_t s1;
    char want[64];

    (void)state;
    start(&fh, false);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &p, 1, &fh.apps[0]), 0);
    fake_flush(&a.s);
    fake_flush(&p.s);
    resume_msg(&fh, &a.s, UINT64_MAX);
    fake_subscribe(&fh, &a.s, "c", NULL);
    fake_subscribe(&fh, &p.s, "c", NULL);
    s1 = publish(&fh, 1);
    wire_write(&wa, &a.s, 0);
    wire_write(&wp, &p.s, 0);
    snprintf(want, sizeof(want), "pos ok id%llu n1", (unsigned long long)s1);
    assert_string_equal(wa.log, want);
    assert_string_equal(wp.log, "ok n1");
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&p.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/*
 * The whole guard: a client that knew event 3 comes back while 4..10 are
 * kept; 10 is still in its loop's inbox; 11 and 12 come during the
 * replay, 13 after it.
 */
static void test_resume_guard_paced_replay_then_held(void **state)
{
    struct fake_hub fh;
    struct fake_session b;
    struct wire w = { .len = 0 };
    uint64_t seq[14], low = HUB_RX_LOW(MAXQ);
    struct hub_frame *f10;
    char want[1024];
    size_t o = 0;
    unsigned writes = 0;

    (void)state;
    start(&fh, false);
    for (unsigned i = 1; i <= 9; i++)
        seq[i] = publish(&fh, i);
    f10 = publish_nodrain(&fh, 10);
    seq[10] = f10->hseq;
    hub_frame_unref(f10);
    /* Run loop 0's inbox only: loop 1 still holds 10. */
    hub_loop_drain_inbox(fh.loops[0], fake_now_ms(&fh));
    come_back(&fh, &b, seq[3]);
    /* Paced: under the low mark, but the replay is not all there. */
    assert_true(b.s.q.bytes <= low);
    assert_true(b.s.q.count < 1 + 7);
    assert_int_equal(fake_find(&b.s, "lubdub:resumed"), -1);
    /* 10 reaches loop 1 now: the replay has it. 11 and 12 are held. */
    fake_hub_drain(&fh);
    seq[11] = publish(&fh, 11);
    seq[12] = publish(&fh, 12);
    assert_int_equal(fake_find(&b.s, "\"n11 "), -1);
    /* A pump without progress of the queue adds nothing. */
    {
        uint32_t before = b.s.q.count;

        hub_resume_pump(&b.s);
        assert_int_equal(b.s.q.count, before);
    }
    /* As the socket takes frames one by one, the rest follows. */
    while (b.s.q.count && writes < 100) {
        wire_write(&w, &b.s, 1);
        writes++;
        assert_true(b.s.q.bytes <= low || b.s.q.count == 1);
    }
    o += (size_t)snprintf(want + o, sizeof(want) - o, "ok");
    for (unsigned i = 4; i <= 10; i++)
        o += (size_t)snprintf(want + o, sizeof(want) - o, " id%llu n%u",
                              (unsigned long long)seq[i], i);
    o += (size_t)snprintf(want + o, sizeof(want) - o, " resumed");
    for (unsigned i = 11; i <= 12; i++)
        o += (size_t)snprintf(want + o, sizeof(want) - o, " id%llu n%u",
                              (unsigned long long)seq[i], i);
    assert_string_equal(w.log, want);
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.replayed_events), 7);
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.resumes), 1);
    /* The guard stays until a live frame passes its floor. */
    assert_true(b.s.rguard);
    seq[13] = publish(&fh, 13);
    assert_false(b.s.rguard);
    w.len = 0;
    wire_write(&w, &b.s, 0);
    snprintf(want, sizeof(want), "id%llu n13", (unsigned long long)seq[13]);
    assert_string_equal(w.log, want);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* An empty replay: succeeded, resumed; a live frame at the floor (still in
 * the inbox when the client subscribed) dropped, the next one ends the
 * guard. */
static void test_resume_guard_floor_drops_then_ends(void **state)
{
    struct fake_hub fh;
    struct fake_session b;
    struct wire w = { .len = 0 };
    struct hub_frame *f2;
    uint64_t s1, s2, s3;
    char want[128];

    (void)state;
    start(&fh, false);
    s1 = publish(&fh, 1);
    f2 = publish_nodrain(&fh, 2);
    s2 = f2->hseq;
    hub_frame_unref(f2);
    hub_loop_drain_inbox(fh.loops[0], fake_now_ms(&fh));
    /* It knew 2 already (it had it on its earlier connection). */
    come_back(&fh, &b, s2);
    fake_hub_drain(&fh);
    assert_true(b.s.rguard);
    s3 = publish(&fh, 3);
    assert_false(b.s.rguard);
    wire_write(&w, &b.s, 0);
    snprintf(want, sizeof(want), "ok resumed id%llu n3",
             (unsigned long long)s3);
    assert_string_equal(w.log, want);
    (void)s1;
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* Mid-replay, with live frames held: an unsubscribe, then the session's
 * end, free every reference. */
static void test_resume_guard_freed_on_unsubscribe_and_end(void **state)
{
    struct fake_hub fh;
    struct fake_session b;
    struct wire w = { .len = 0 };
    struct hub_frame *live, *first;
    uint64_t s1 = 0;

    (void)state;
    start(&fh, false);
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 1; i <= 10; i++) {
            uint64_t s = publish(&fh, i);

            if (!s1)
                s1 = s;
        }
        come_back(&fh, &b, s1);
        live = publish_nodrain(&fh, 99);
        fake_hub_drain(&fh);
        /* Held: the history's, ours and the guard's. */
        assert_int_equal(refs(live), 3);
        if (round == 0) {
            hub_pusher_unsubscribe(&b.s, "c", 1);
            assert_false(b.s.rguard);
            assert_int_equal(refs(live), 2);
            wire_write(&w, &b.s, 0);
            /* Nothing of the replay after the unsubscribe. */
            assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.replayed_events)
                                 < 9,
                             1);
            hub_session_fini(&b.s, HUB_CLOSE_PEER);
        } else {
            hub_session_fini(&b.s, HUB_CLOSE_PEER);
            assert_int_equal(refs(live), 2);
        }
        hub_frame_unref(live);
    }
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.resume_sessions), 0);
    first = NULL;
    (void)first;
    fake_hub_stop(&fh);
}

/* Live frames held behind a replay the client does not read: past
 * max_queue bytes held, a slow consumer (4100). */
static void test_resume_guard_held_bound_closes_4100(void **state)
{
    struct fake_hub fh;
    struct fake_session b;
    struct hub_frame *len;
    uint64_t s1 = 0;
    unsigned i;

    (void)state;
    start(&fh, false);
    for (i = 1; i <= 20; i++) {
        uint64_t s = publish(&fh, i);

        if (!s1)
            s1 = s;
    }
    come_back(&fh, &b, s1);
    len = event(100);
    for (i = 100; i < 200 && b.s.state == HUB_SESSION_OPEN; i++)
        publish(&fh, i);
    assert_int_not_equal(b.s.state, HUB_SESSION_OPEN);
    /* max_queue bytes were held; the next one was one too many. */
    assert_int_equal(i - 100, MAXQ / len->len + 1);
    hub_frame_unref(len);
    assert_true(fake_find(&b.s, "replay backlog full") >= 0);
    assert_true(fake_find(&b.s, "4100") >= 0);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* A compressing client's replay: each marker as it is, each event its
 * compressed variant; then its live frames the same way. */
static void test_resume_guard_compressed_replay(void **state)
{
    struct fake_hub fh;
    struct fake_session b;
    struct wire w = { .len = 0 };
    uint64_t seq[8];
    char want[256];

    (void)state;
    start(&fh, true);
    for (unsigned i = 1; i <= 5; i++)
        seq[i] = publish(&fh, i);
    memset(&b, 0, sizeof(b));
    assert_int_equal(hub_session_init(&b.s, fh.loops[1], &b.conn,
                                      fake_now_ms(&fh)), 0);
    hub_session_set_pmd(&b.s);
    hub_pusher_open(&b.s, &fh.apps[0]);
    assert_true(b.s.zout);
    fake_flush(&b.s);
    resume_msg(&fh, &b.s, seq[1]);
    fake_subscribe(&fh, &b.s, "c", NULL);
    seq[6] = publish(&fh, 6);
    while (b.s.q.count)
        wire_write(&w, &b.s, 1);
    snprintf(want, sizeof(want), "id%llu z id%llu z id%llu z id%llu z ",
             (unsigned long long)seq[2], (unsigned long long)seq[3],
             (unsigned long long)seq[4], (unsigned long long)seq[5]);
    assert_non_null(strstr(w.log, want));
    snprintf(want, sizeof(want), " id%llu z", (unsigned long long)seq[6]);
    assert_non_null(strstr(w.log, want));
    assert_true(strstr(w.log, want) > strstr(w.log, "id"));
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.replayed_events), 4);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* Two resumed channels on one session share its queue: both replays go,
 * each in its order with its own lubdub:resumed, and both guards end. */
static void test_resume_guard_two_channels(void **state)
{
    struct fake_hub fh;
    struct fake_session b;
    struct wire w = { .len = 0 };
    uint64_t c1 = 0, d1 = 0;
    char text[512];
    const char *p;

    (void)state;
    start(&fh, false);
    for (unsigned i = 1; i <= 8; i++) {
        struct hub_frame *f = publish_on(&fh, "c", i);

        c1 = c1 ? c1 : f->hseq;
        hub_frame_unref(f);
        f = publish_on(&fh, "d", 100 + i);
        d1 = d1 ? d1 : f->hseq;
        hub_frame_unref(f);
    }
    fake_hub_drain(&fh);
    assert_int_equal(fake_session_open(&fh, &b, 1, &fh.apps[0]), 0);
    fake_flush(&b.s);
    snprintf(text, sizeof(text),
             "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,"
             "\"away_ms\":0,\"channels\":{\"c\":{\"%s\":%llu},"
             "\"d\":{\"%s\":%llu}}}}",
             hub_history_origin(hist(&fh)), (unsigned long long)c1,
             hub_history_origin(hist(&fh)), (unsigned long long)d1);
    fake_recv(&fh, &b.s, text);
    fake_subscribe(&fh, &b.s, "c", NULL);
    fake_subscribe(&fh, &b.s, "d", NULL);
    hub_frame_unref(publish_on(&fh, "d", 120));
    hub_frame_unref(publish_on(&fh, "c", 20));
    fake_hub_drain(&fh);
    for (unsigned k = 0; b.s.q.count && k < 200; k++)
        wire_write(&w, &b.s, 1);
    /* c: 2..8 then 20; d: 102..108 then 120; two resumed. */
    p = w.log;
    for (unsigned i = 2; i <= 8; i++) {
        char t[16];

        snprintf(t, sizeof(t), " n%u", i);
        assert_non_null(p = strstr(p, t));
    }
    assert_non_null(strstr(p, " n20"));
    p = w.log;
    for (unsigned i = 102; i <= 108; i++) {
        char t[16];

        snprintf(t, sizeof(t), " n%u", i);
        assert_non_null(p = strstr(p, t));
    }
    assert_non_null(strstr(p, " n120"));
    assert_non_null(p = strstr(w.log, "resumed"));
    assert_non_null(strstr(p + 1, "resumed"));
    assert_null(strstr(w.log, " n1 "));
    assert_null(strstr(w.log, " n101 "));
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.replayed_events), 14);
    /* The next live frame of each ends its guard. */
    assert_true(b.s.rguard);
    hub_frame_unref(publish_on(&fh, "c", 21));
    hub_frame_unref(publish_on(&fh, "d", 121));
    fake_hub_drain(&fh);
    assert_false(b.s.rguard);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_rframe_pair_bytes),
        cmocka_unit_test(test_resume_rframe_compressed_pair),
        cmocka_unit_test(test_resume_markers_on_resuming_sessions_only),
        cmocka_unit_test(test_resume_guard_paced_replay_then_held),
        cmocka_unit_test(test_resume_guard_floor_drops_then_ends),
        cmocka_unit_test(test_resume_guard_freed_on_unsubscribe_and_end),
        cmocka_unit_test(test_resume_guard_held_bound_closes_4100),
        cmocka_unit_test(test_resume_guard_compressed_replay),
        cmocka_unit_test(test_resume_guard_two_channels),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
