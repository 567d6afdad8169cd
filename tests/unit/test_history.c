/*
 * tests/unit/test_history.c - recovery's history store
 * (hub/channel/history.h) on a two-loop fake hub with a fake clock: ids in
 * order and the origin's form; the bounds per channel, per app and per hub
 * (each entry charged twice its frame plus the overhead, each record its
 * name plus its own), oldest first; an event bigger than the app's whole
 * bound counted evicted; expiry on read and by the reclaim; what a resume
 * gets (the frames, in order, without its own sockets' events) or why it
 * cannot (evicted, expired, unknown origin, too large, the record's birth
 * and forced drops against away_ms); the HTTP API's read; the id parser.
 * hub_history_check() after every step.
 */
#include <ctype.h>
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
#include "hub/wire/protocol.h"

#define TTL 120000
#define MARGIN 10000 /* history.c's AWAY_MARGIN_MS */

/* A fake hub whose app 0 keeps history (size, app max_bytes), the hub
 * bounded by hub_max (0: the default). */
static void start(struct fake_hub *fh, uint32_t size, uint64_t app_max,
                  uint64_t hub_max)
{
    fake_hub_init(fh, 2);
    fh->cfg.history_max_bytes = hub_max;
    fh->cfg.max_subscriptions = 100;
    for (unsigned i = 0; i < 2; i++) {
        fh->apps[i].history = true;
        fh->apps[i].history_ttl_ms = TTL;
        fh->apps[i].history_size = size;
    }
    fh->apps[0].history_max_bytes = app_max;
    assert_int_equal(fake_hub_start(fh), 0);
    assert_non_null(hub_history_of(fh->hub));
}

static struct hub_history *hist(struct fake_hub *fh)
{
    return hub_history_of(fh->hub);
}

/* A frame of an event on channel with data of n bytes. */
static struct hub_frame *event(const char *channel, size_t n)
{
    char data[4096];
    struct hub_frame *f;

    assert_true(n + 2 < sizeof(data));
    data[0] = '"';
    memset(data + 1, 'x', n);
    data[n + 1] = '"';
    f = hub_proto_event_frame("e", channel, data, n + 2, NULL);
    assert_non_null(f);
    return f;
}

/* Publish on app's channel from loop 0; returns the id's seq (0: none). */
static uint64_t publish_skip(struct fake_hub *fh, unsigned app,
                             const char *channel, size_t n,
                             const struct hub_skip *skip)
{
    struct hub_frame *f = event(channel, n);
    const struct hub_pub_req r = { app, channel, strlen(channel), f, skip,
                                   false, NULL };
    uint64_t seq;

    assert_int_equal(hub_history_publish(hist(fh), fh->loops[0],
                                         &fh->apps[app], &r, false),
                     0);
    seq = f->hseq;
    hub_frame_unref(f);
    /* Every loop gets it through its inbox; nobody listens here. */
    fake_hub_drain(fh);
    assert_int_equal(hub_history_check(hist(fh)), 0);
    return seq;
}

static uint64_t publish(struct fake_hub *fh, unsigned app,
                        const char *channel, size_t n)
{
    return publish_skip(fh, app, channel, n, NULL);
}

static uint64_t entry_bytes(const char *channel, size_t n)
{
    struct hub_frame *f = event(channel, n);
    uint64_t b = 2 * (uint64_t)f->len + HUB_HISTORY_ENTRY_OVERHEAD;

    hub_frame_unref(f);
    return b;
}

static uint64_t rec_bytes(const char *channel)
{
    return strlen(channel) + HUB_HISTORY_RECORD_OVERHEAD;
}

/* What a client that knows seq of this node's origin is told. */
static enum hub_history_gap resume(struct fake_hub *fh, const char *channel,
                                   uint64_t seq, uint64_t away_ms,
                                   uint64_t now_ms, size_t max_frames,
                                   const struct hub_history_sockets *socks,
                                   struct hub_history_replay *rp)
{
    struct hub_history_pos known = { .n = 1 };
    enum hub_history_gap g;

    snprintf(known.id[0].origin, sizeof(known.id[0].origin), "%s",
             hub_history_origin(hist(fh)));
    known.id[0].seq = seq;
    g = hub_history_resume(hist(fh), 0, channel, strlen(channel), &known,
                           socks, away_ms, now_ms, TTL, max_frames, rp);
    assert_int_equal(hub_history_check(hist(fh)), 0);
    if (g) {
        assert_int_equal(rp->n, 0);
        assert_null(rp->f);
        assert_int_equal(rp->upto.n, 0);
    }
    return g;
}

/* The replay's seqs, as "s1,s2,..." in buf. */
static const char *seqs(const struct hub_history_replay *rp)
{
    static char buf[512];
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < rp->n; i++)
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%llu",
                              i ? "," : "",
                              (unsigned long long)rp->f[i]->hseq);
    return buf;
}

static const char *read_seqs(const struct hub_history_events *ev)
{
    static char buf[512];
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < ev->n; i++) {
        assert_int_equal(ev->ev[i].id.seq, ev->ev[i].f->hseq);
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%llu",
                              i ? "," : "",
                              (unsigned long long)ev->ev[i].id.seq);
    }
    return buf;
}

static void test_history_publish_ids_in_order(void **state)
{
    struct fake_hub fh;
    struct fake_session a;
    struct hub_history_usage u;
    const char *origin;
    struct hub_frame *f;

    (void)state;
    start(&fh, 1000, 0, 0);
    origin = hub_history_origin(hist(&fh));
    /* "b" and 8 hex digits. */
    assert_int_equal(strlen(origin), 9);
    assert_int_equal(origin[0], 'b');
    for (int i = 1; i < 9; i++)
        assert_true(isxdigit((unsigned char)origin[i]));
    /* A subscriber on the other loop gets them in order, only once the
     * inbox runs: the entry loop delivers through it too. */
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    fake_subscribe(&fh, &a.s, "a", NULL);
    fake_flush(&a.s);
    for (unsigned i = 1; i <= 4; i++) {
        const char *ch = i % 2 ? "a" : "b";
        struct hub_pub_req r = { 0, ch, 1, NULL, NULL, false, NULL };

        f = event(ch, i);
        r.f = f;
        assert_int_equal(hub_history_publish(hist(&fh), fh.loops[0],
                                             &fh.apps[0], &r, false), 0);
        /* One counter for every channel of the node. */
        assert_int_equal(f->hseq, i);
        assert_ptr_equal(f->horigin, origin);
        assert_int_equal(a.s.q.count, 0);
        hub_frame_unref(f);
        assert_int_equal(hub_history_check(hist(&fh)), 0);
    }
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 2);
    assert_non_null(strstr(fake_frame_text(&a.s, 0), "\"x\""));
    assert_non_null(strstr(fake_frame_text(&a.s, 1), "\"xxx\""));
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.channels, 2);
    assert_int_equal(u.events, 4);
    assert_int_equal(u.evicted, 0);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_history_bounds_size_evicts_oldest(void **state)
{
    struct fake_hub fh;
    struct hub_history_replay rp;
    struct hub_history_usage u;
    uint64_t s[6];

    (void)state;
    start(&fh, 3, 0, 0);
    for (int i = 1; i <= 5; i++)
        s[i] = publish(&fh, 0, "a", 10);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.events, 3);
    assert_int_equal(u.evicted, 2);
    assert_int_equal(u.bytes, 3 * entry_bytes("a", 10) + rec_bytes("a"));
    hub_history_usage(hist(&fh), 0, &u);
    assert_int_equal(u.events, 3);
    assert_int_equal(u.bytes, 3 * entry_bytes("a", 10));
    /* Knowing s1, it missed s2, trimmed. */
    assert_int_equal(resume(&fh, "a", s[1], 0, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_EVICTED);
    /* Knowing s2, the rest is there. */
    assert_int_equal(resume(&fh, "a", s[2], 0, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_OK);
    assert_string_equal(seqs(&rp), "3,4,5");
    assert_int_equal(rp.upto.id[0].seq, s[5]);
    hub_history_replay_free(&rp);
    fake_hub_stop(&fh);
}

static void test_history_bounds_app_max_bytes(void **state)
{
    struct fake_hub fh;
    struct hub_history_usage u;
    struct hub_history_replay rp;
    uint64_t eb = entry_bytes("c0", 50);
    char ch[8];
    uint64_t first;

    (void)state;
    start(&fh, 1000, 3 * eb, 0);
    first = publish(&fh, 0, "c0", 50);
    for (int i = 1; i < 5; i++) {
        snprintf(ch, sizeof(ch), "c%d", i);
        publish(&fh, 0, ch, 50);
    }
    /* Three fit: c0 and c1 went, oldest first, with their records. */
    hub_history_usage(hist(&fh), 0, &u);
    assert_int_equal(u.events, 3);
    assert_int_equal(u.bytes, 3 * eb);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.channels, 3);
    assert_int_equal(u.evicted, 2);
    assert_int_equal(u.bytes, 3 * eb + 3 * rec_bytes("c0"));
    /* The other app's bytes are not the first app's. */
    publish(&fh, 1, "c0", 50);
    publish(&fh, 1, "c1", 50);
    publish(&fh, 1, "c2", 50);
    publish(&fh, 1, "c3", 50);
    hub_history_usage(hist(&fh), 1, &u);
    assert_int_equal(u.events, 4);
    hub_history_usage(hist(&fh), 0, &u);
    assert_int_equal(u.events, 3);
    /* c0's record was dropped for bytes: a client that knew it and was
     * away only briefly cannot be told it missed nothing. */
    assert_int_equal(resume(&fh, "c0", first, 1000, fake_now_ms(&fh), 100,
                            NULL, &rp),
                     HUB_HISTORY_EVICTED);
    fake_hub_stop(&fh);
}

static void test_history_bounds_hub_max_bytes(void **state)
{
    struct fake_hub fh;
    struct hub_history_usage u;
    uint64_t eb = entry_bytes("h0", 100);
    uint64_t max = 4 * eb + 2 * rec_bytes("h0");

    (void)state;
    start(&fh, 1000, 0, max);
    /* Two channels of two apps share the hub's bound. */
    for (int i = 0; i < 3; i++) {
        publish(&fh, 0, "h0", 100);
        publish(&fh, 1, "h1", 100);
    }
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_true(u.bytes <= max);
    assert_int_equal(u.events, 4);
    assert_int_equal(u.evicted, 2);
    assert_int_equal(u.bytes, 4 * eb + 2 * rec_bytes("h0"));
    hub_history_usage(hist(&fh), 0, &u);
    assert_int_equal(u.events, 2);
    hub_history_usage(hist(&fh), 1, &u);
    assert_int_equal(u.events, 2);
    /* Bigger than the hub's whole bound with its record: not kept, the
     * others stay, counted evicted. */
    assert_true(entry_bytes("h0", 2000) + rec_bytes("h0") > max);
    publish(&fh, 0, "h0", 2000);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.events, 4);
    assert_int_equal(u.evicted, 3);
    assert_int_equal(u.bytes, 4 * eb + 2 * rec_bytes("h0"));
    fake_hub_stop(&fh);
}

/* An event bigger than the app's whole bound is not kept (the older ones
 * stay) but counted evicted, so a resume that would need it fails. */
static void test_history_bounds_oversize_counted_evicted(void **state)
{
    struct fake_hub fh;
    struct hub_history_replay rp;
    struct hub_history_usage u;
    uint64_t eb = entry_bytes("o", 10);
    uint64_t s1, s2, s3, s4;

    (void)state;
    start(&fh, 1000, 4 * eb, 0);
    s1 = publish(&fh, 0, "o", 10);
    s2 = publish(&fh, 0, "o", 1000); /* > 4 * eb */
    assert_true(entry_bytes("o", 1000) > 4 * eb);
    assert_int_equal(s2, s1 + 1);
    s3 = publish(&fh, 0, "o", 10);
    hub_history_usage(hist(&fh), 0, &u);
    assert_int_equal(u.events, 2);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.evicted, 1);
    assert_int_equal(resume(&fh, "o", s1, 0, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_EVICTED);
    assert_int_equal(resume(&fh, "o", s2, 0, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_OK);
    assert_string_equal(seqs(&rp), "3");
    assert_int_equal(rp.f[0]->hseq, s3);
    hub_history_replay_free(&rp);
    /* On a channel with nothing else: no record is left, and a client
     * that knew the channel before it was away briefly is told. */
    s4 = publish(&fh, 0, "p", 1000);
    assert_true(s4 > s3);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.channels, 1);
    assert_int_equal(resume(&fh, "p", s3, 1000, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_EVICTED);
    fake_hub_stop(&fh);
}

static void test_history_expiry_on_read_and_reclaim(void **state)
{
    struct fake_hub fh;
    struct hub_history_usage u;
    struct hub_history_events ev;
    struct hub_history_replay rp;
    uint64_t t0, s1, s3;
    bool complete;

    (void)state;
    start(&fh, 1000, 0, 0);
    t0 = fake_now_ms(&fh);
    s1 = publish(&fh, 0, "x", 5);
    publish(&fh, 0, "y", 5);
    fh.now_ns += 1000 * 1000000ull;
    s3 = publish(&fh, 0, "x", 5);
    /* Not yet. */
    assert_int_equal(hub_history_reclaim(hist(&fh), t0 + TTL - 1), 0);
    /* On read: x's first entry is past the ttl. */
    assert_int_equal(hub_history_read(hist(&fh), 0, "x", 1, NULL, 0, 10,
                                      t0 + TTL, TTL, &ev, &complete),
                     0);
    assert_string_equal(read_seqs(&ev), "3");
    assert_false(complete);
    hub_history_events_free(&ev);
    assert_int_equal(hub_history_check(hist(&fh)), 0);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.expired, 1);
    assert_int_equal(u.events, 2);
    /* The resume past it is told expired, not evicted. */
    assert_int_equal(resume(&fh, "x", s1 - 1, 0, t0 + TTL, 100, NULL, &rp),
                     HUB_HISTORY_EXPIRED);
    assert_int_equal(resume(&fh, "x", s1, 0, t0 + TTL, 100, NULL, &rp),
                     HUB_HISTORY_OK);
    assert_int_equal(rp.n, 1);
    assert_int_equal(rp.f[0]->hseq, s3);
    hub_history_replay_free(&rp);
    /* The reclaim takes y (expired) and leaves x's newer entry. */
    assert_int_equal(hub_history_reclaim(hist(&fh), t0 + TTL + 999), 1);
    assert_int_equal(hub_history_check(hist(&fh)), 0);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.channels, 1);
    assert_int_equal(u.events, 1);
    assert_int_equal(hub_history_reclaim(hist(&fh), t0 + TTL + 1000), 1);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.channels, 0);
    assert_int_equal(u.events, 0);
    assert_int_equal(u.bytes, 0);
    assert_int_equal(u.expired, 3);
    assert_int_equal(hub_history_check(hist(&fh)), 0);
    /* And through loop 0's beat. */
    publish(&fh, 0, "z", 5);
    fake_hub_advance(&fh, TTL + 2000);
    fake_hub_advance(&fh, 2000);
    hub_history_usage(hist(&fh), UINT32_MAX, &u);
    assert_int_equal(u.events, 0);
    fake_hub_stop(&fh);
}

static void test_history_resume_replay_without_own_sockets(void **state)
{
    struct fake_hub fh;
    struct hub_history_replay rp;
    struct hub_skip mine = { .set = true, .hi = 11, .lo = 22 };
    struct hub_skip other = { .set = true, .hi = 11, .lo = 23 };
    struct hub_history_sockets socks = { .n = 2, .hi = { 5, 11 },
                                         .lo = { 6, 22 } };
    uint64_t s0, last = 0;

    (void)state;
    start(&fh, 1000, 0, 0);
    s0 = publish(&fh, 0, "r", 1);
    publish(&fh, 0, "other", 1);
    publish_skip(&fh, 0, "r", 2, &mine);
    publish(&fh, 0, "r", 3);
    publish_skip(&fh, 0, "r", 4, &other);
    last = publish(&fh, 0, "r", 5);
    assert_int_equal(resume(&fh, "r", s0, 0, fake_now_ms(&fh), 100, &socks,
                            &rp),
                     HUB_HISTORY_OK);
    /* In order; 3 was this client's own (never echoed to it). */
    assert_string_equal(seqs(&rp), "4,5,6");
    assert_int_equal(rp.upto.n, 1);
    assert_string_equal(rp.upto.id[0].origin, hub_history_origin(hist(&fh)));
    assert_int_equal(rp.upto.id[0].seq, last);
    hub_history_replay_free(&rp);
    /* Without its sockets, everything. */
    assert_int_equal(resume(&fh, "r", s0, 0, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_OK);
    assert_string_equal(seqs(&rp), "3,4,5,6");
    hub_history_replay_free(&rp);
    /* Up to date: nothing, and upto is what it knows. */
    assert_int_equal(resume(&fh, "r", last, 0, fake_now_ms(&fh), 100, NULL,
                            &rp),
                     HUB_HISTORY_OK);
    assert_int_equal(rp.n, 0);
    assert_int_equal(rp.upto.id[0].seq, last);
    /* Too many to replay. */
    assert_int_equal(resume(&fh, "r", s0, 0, fake_now_ms(&fh), 3, NULL, &rp),
                     HUB_HISTORY_TOO_LARGE);
    assert_int_equal(resume(&fh, "r", s0, 0, fake_now_ms(&fh), 4, NULL, &rp),
                     HUB_HISTORY_OK);
    hub_history_replay_free(&rp);
    fake_hub_stop(&fh);
}

static void test_history_resume_unknown_origin(void **state)
{
    struct fake_hub fh;
    struct hub_history_replay rp;
    struct hub_history_pos known = { .n = 1 };

    (void)state;
    start(&fh, 1000, 0, 0);
    publish(&fh, 0, "u", 1);
    /* Another run's origin. */
    snprintf(known.id[0].origin, sizeof(known.id[0].origin), "b00000000%s",
             "");
    if (!strcmp(known.id[0].origin, hub_history_origin(hist(&fh))))
        known.id[0].origin[1] = '1';
    known.id[0].seq = 0;
    assert_int_equal(hub_history_resume(hist(&fh), 0, "u", 1, &known, NULL, 0,
                                        fake_now_ms(&fh), TTL, 100, &rp),
                     HUB_HISTORY_UNKNOWN_ORIGIN);
    assert_int_equal(rp.n, 0);
    /* Nothing known at all. */
    known.n = 0;
    assert_int_equal(hub_history_resume(hist(&fh), 0, "u", 1, &known, NULL, 0,
                                        fake_now_ms(&fh), TTL, 100, &rp),
                     HUB_HISTORY_UNKNOWN_ORIGIN);
    assert_string_equal(hub_history_gap_name(HUB_HISTORY_UNKNOWN_ORIGIN),
                        "unknown_origin");
    assert_string_equal(hub_history_gap_name(HUB_HISTORY_TOO_LARGE),
                        "too_large");
    assert_int_equal(hub_history_check(hist(&fh)), 0);
    fake_hub_stop(&fh);
}

/* A position older than the channel's record: complete only when the
 * client was away less than the ttl less the margin, and no record was
 * dropped for bytes since (less the margin). */
static void test_history_resume_predates_record(void **state)
{
    struct fake_hub fh;
    struct hub_history_replay rp;
    uint64_t s1, s2, now;

    (void)state;
    start(&fh, 1000, 0, 0);
    /* No record at all: what it knows is everything, if it was not away
     * long. */
    now = fake_now_ms(&fh);
    assert_int_equal(resume(&fh, "q", 0, 0, now, 100, NULL, &rp),
                     HUB_HISTORY_OK);
    assert_int_equal(rp.n, 0);
    assert_int_equal(rp.upto.id[0].seq, 0);
    assert_int_equal(resume(&fh, "q", 0, TTL - MARGIN - 1, now, 100, NULL,
                            &rp),
                     HUB_HISTORY_OK);
    assert_int_equal(resume(&fh, "q", 0, TTL - MARGIN, now, 100, NULL, &rp),
                     HUB_HISTORY_EXPIRED);
    assert_int_equal(resume(&fh, "q", 0, UINT64_MAX, now, 100, NULL, &rp),
                     HUB_HISTORY_EXPIRED);
    /* A record born after the position (its first entry expired and went,
     * then a new one). */
    s1 = publish(&fh, 0, "q", 1);
    fh.now_ns += (uint64_t)(TTL + 1) * 1000000ull;
    now = fake_now_ms(&fh);
    assert_int_equal(hub_history_reclaim(hist(&fh), now), 1);
    s2 = publish(&fh, 0, "q", 1);
    assert_int_equal(resume(&fh, "q", s1 - 1, 5000, now, 100, NULL, &rp),
                     HUB_HISTORY_OK);
    assert_string_equal(seqs(&rp), "2");
    assert_int_equal(rp.upto.id[0].seq, s2);
    hub_history_replay_free(&rp);
    assert_int_equal(resume(&fh, "q", s1 - 1, TTL - MARGIN, now, 100, NULL,
                            &rp),
                     HUB_HISTORY_EXPIRED);
    fake_hub_stop(&fh);
}

static void test_history_resume_forced_drop(void **state)
{
    struct fake_hub fh;
    struct hub_history_replay rp;
    uint64_t eb = entry_bytes("f0", 10);
    uint64_t now, t_forced;

    (void)state;
    /* The app holds one entry: each new channel drops the previous
     * record for bytes. */
    start(&fh, 1000, eb, 0);
    publish(&fh, 0, "f0", 10);
    fh.now_ns += 1000 * 1000000ull;
    t_forced = fake_now_ms(&fh);
    publish(&fh, 0, "f1", 10);
    /* A client of a channel with no record, away 20 s: the record
     * dropped 20 s ago may have held what it missed. */
    fh.now_ns += 20000 * 1000000ull;
    now = fake_now_ms(&fh);
    assert_int_equal(resume(&fh, "g", 0, 20000, now, 100, NULL, &rp),
                     HUB_HISTORY_EVICTED);
    /* Away 10 s: the drop is within the absence plus the margin. */
    assert_int_equal(resume(&fh, "g", 0, now - t_forced - MARGIN, now, 100,
                            NULL, &rp),
                     HUB_HISTORY_EVICTED);
    /* Away 1 ms less: the drop came before the client left (less the
     * margin), so it had what the dropped record held. */
    assert_int_equal(resume(&fh, "g", 0, now - t_forced - MARGIN - 1, now,
                            100, NULL, &rp),
                     HUB_HISTORY_OK);
    fake_hub_stop(&fh);
}

static void test_history_read_after_since_limit(void **state)
{
    struct fake_hub fh;
    struct hub_history_events ev;
    struct hub_history_id after;
    char id[HUB_HISTORY_ID_MAX];
    uint64_t t0, s[6];
    bool complete;

    (void)state;
    start(&fh, 3, 0, 0);
    t0 = fake_now_ms(&fh);
    for (int i = 1; i <= 5; i++) {
        s[i] = publish(&fh, 0, "h", (size_t)i);
        fh.now_ns += 100 * 1000000ull;
    }
    /* Kept: s3..s5 at t0 + 200, 300, 400. */
    snprintf(id, sizeof(id), "%s:%llu", hub_history_origin(hist(&fh)),
             (unsigned long long)s[3]);
    assert_int_equal(hub_history_id_parse(id, strlen(id), &after), 0);
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, &after, 0, 10,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     0);
    assert_string_equal(read_seqs(&ev), "4,5");
    assert_true(complete);
    assert_false(ev.more);
    assert_int_equal(ev.ev[0].time_ms, t0 + 300);
    assert_non_null(memmem(hub_frame_data(ev.ev[0].f), ev.ev[0].f->len,
                           "\"xxxx\"", 6));
    hub_history_events_free(&ev);
    /* After s1: s2 was trimmed, so not complete. */
    after.seq = s[1];
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, &after, 0, 10,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     0);
    assert_string_equal(read_seqs(&ev), "3,4,5");
    assert_false(complete);
    hub_history_events_free(&ev);
    /* After s2 exactly: complete. Limit 1: more. */
    after.seq = s[2];
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, &after, 0, 1,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     0);
    assert_string_equal(read_seqs(&ev), "3");
    assert_true(ev.more);
    assert_true(complete);
    hub_history_events_free(&ev);
    /* Limit 0. */
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, &after, 0, 0,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     0);
    assert_int_equal(ev.n, 0);
    assert_true(ev.more);
    hub_history_events_free(&ev);
    /* Since a time: at or after it. */
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, NULL, t0 + 300,
                                      10, fake_now_ms(&fh), TTL, &ev,
                                      &complete),
                     0);
    assert_string_equal(read_seqs(&ev), "4,5");
    assert_true(complete);
    hub_history_events_free(&ev);
    /* Since before what was trimmed: incomplete. */
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, NULL, t0 + 50, 10,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     0);
    assert_string_equal(read_seqs(&ev), "3,4,5");
    assert_false(complete);
    hub_history_events_free(&ev);
    /* Another origin's id: everything, not complete. */
    snprintf(after.origin, sizeof(after.origin), "zz");
    assert_int_equal(hub_history_read(hist(&fh), 0, "h", 1, &after, 0, 10,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     0);
    assert_int_equal(ev.n, 3);
    assert_false(complete);
    hub_history_events_free(&ev);
    /* A channel with nothing, or another app's. */
    assert_int_equal(hub_history_read(hist(&fh), 0, "none", 4, NULL,
                                      fake_now_ms(&fh) - 1000, 10,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     -ENOENT);
    assert_int_equal(ev.n, 0);
    assert_true(complete);
    assert_int_equal(hub_history_read(hist(&fh), 1, "h", 1, NULL, 0, 10,
                                      fake_now_ms(&fh), TTL, &ev, &complete),
                     -ENOENT);
    assert_false(complete);
    assert_int_equal(hub_history_check(hist(&fh)), 0);
    fake_hub_stop(&fh);
}

static void test_history_id_parse_edges(void **state)
{
    struct hub_history_id id;
    char s[128];

    (void)state;
    assert_int_equal(hub_history_id_parse("b0a1b2c3d:42", 12, &id), 0);
    assert_string_equal(id.origin, "b0a1b2c3d");
    assert_int_equal(id.seq, 42);
    /* The length bounds the parse. */
    assert_int_equal(hub_history_id_parse("n:123", 4, &id), 0);
    assert_int_equal(id.seq, 12);
    assert_int_equal(hub_history_id_parse("n:0", 3, &id), 0);
    assert_int_equal(id.seq, 0);
    /* The first colon ends the origin. */
    assert_int_equal(hub_history_id_parse("a:b:1", 5, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("", 0, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("abc", 3, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse(":1", 2, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("a:", 2, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("a:-1", 4, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("a:+1", 4, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("a: 1", 4, &id), -EINVAL);
    assert_int_equal(hub_history_id_parse("a:1x", 4, &id), -EINVAL);
    /* Origins up to 64 bytes. */
    memset(s, 'o', 64);
    memcpy(s + 64, ":7", 3);
    assert_int_equal(hub_history_id_parse(s, 66, &id), 0);
    assert_int_equal(strlen(id.origin), 64);
    memset(s, 'o', 65);
    memcpy(s + 65, ":7", 3);
    assert_int_equal(hub_history_id_parse(s, 67, &id), -EINVAL);
    /* Seqs up to UINT64_MAX; one more overflows. */
    assert_int_equal(hub_history_id_parse("a:18446744073709551609", 22, &id),
                     0);
    assert_int_equal(id.seq, 18446744073709551609ull);
    assert_int_equal(hub_history_id_parse("a:18446744073709551616", 22, &id),
                     -EINVAL);
    assert_int_equal(hub_history_id_parse("a:99999999999999999999", 22, &id),
                     -EINVAL);
}

/* hub_history_id_parse refuses the largest seqs: "a:18446744073709551615"
 * (UINT64_MAX) and the five below it are valid u64 values but the overflow
 * guard (v > (UINT64_MAX - 9) / 10) rejects any value whose last digit
 * could overflow, whatever that digit is. */
static void test_history_id_parse_max_seq(void **state)
{
    struct hub_history_id id;

    (void)state;
    assert_int_equal(hub_history_id_parse("a:18446744073709551615", 22, &id),
                     0);
    assert_int_equal(id.seq, UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history_publish_ids_in_order),
        cmocka_unit_test(test_history_bounds_size_evicts_oldest),
        cmocka_unit_test(test_history_bounds_app_max_bytes),
        cmocka_unit_test(test_history_bounds_hub_max_bytes),
        cmocka_unit_test(test_history_bounds_oversize_counted_evicted),
        cmocka_unit_test(test_history_expiry_on_read_and_reclaim),
        cmocka_unit_test(test_history_resume_replay_without_own_sockets),
        cmocka_unit_test(test_history_resume_unknown_origin),
        cmocka_unit_test(test_history_resume_predates_record),
        cmocka_unit_test(test_history_resume_forced_drop),
        cmocka_unit_test(test_history_read_after_since_limit),
        cmocka_unit_test(test_history_id_parse_edges),
        cmocka_unit_test(test_history_id_parse_max_seq),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
