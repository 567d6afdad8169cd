/*
 * tests/unit/test_recover.c - recovery's protocol on a Pusher session
 * (hub/pusher/recover.h) on a fake hub: a bad lubdub:resume is an error
 * and enables nothing; a resumed subscription that history cannot serve
 * is told lubdub:resume_failed with the reason (evicted, unknown_origin,
 * invalid, no_history), then lubdub:pos and its succeeded, and gets no
 * guard; a channel the client named is never started afresh silently.
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
#include "hub/loop/resume.h"
#include "hub/wire/protocol.h"

static void start(struct fake_hub *fh, uint32_t size, uint32_t max_subs)
{
    fake_hub_init(fh, 1);
    fh->cfg.max_subscriptions = max_subs;
    fh->apps[0].history = true;
    fh->apps[0].history_ttl_ms = 120000;
    fh->apps[0].history_size = size;
    assert_int_equal(fake_hub_start(fh), 0);
}

static const char *origin(struct fake_hub *fh)
{
    return hub_history_origin(hub_history_of(fh->hub));
}

static uint64_t publish(struct fake_hub *fh, const char *channel)
{
    struct hub_frame *f = hub_proto_event_frame("e", channel, "\"d\"", 3,
                                                NULL);
    const struct hub_pub_req r = { 0, channel, strlen(channel), f, NULL,
                                   false, NULL };
    uint64_t seq;

    assert_non_null(f);
    assert_int_equal(hub_history_publish(hub_history_of(fh->hub),
                                         fh->loops[0], &fh->apps[0], &r,
                                         false),
                     0);
    seq = f->hseq;
    hub_frame_unref(f);
    fake_hub_drain(fh);
    return seq;
}

/* The session's queue as event names, "ok" for succeeded. */
static const char *events(const struct hub_session *s)
{
    static char buf[2048];
    size_t o = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < s->q.count; i++) {
        const char *t = fake_frame_text(s, i);
        const char *tok = strstr(t, "subscription_succeeded") ? "ok"
                          : strstr(t, "lubdub:resume_failed") ? "failed"
                          : strstr(t, "lubdub:resumed")       ? "resumed"
                          : strstr(t, "lubdub:pos")           ? "pos"
                          : strstr(t, "pusher:error")         ? "err"
                                                              : "?";

        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? " " : "",
                              tok);
    }
    return buf;
}

static void resume_text(struct fake_hub *fh, struct hub_session *s,
                        const char *channels_json)
{
    static char text[16384];

    snprintf(text, sizeof(text),
             "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,\"away_ms\":0,"
             "\"channels\":%s}}",
             channels_json);
    fake_recv(fh, s, text);
}

static void test_recover_bad_resume_is_an_error(void **state)
{
    struct fake_hub fh;
    struct fake_session a;

    (void)state;
    start(&fh, 10, 100);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    fake_flush(&a.s);
    fake_recv(&fh, &a.s, "{\"event\":\"lubdub:resume\",\"data\":{\"v\":2}}");
    fake_recv(&fh, &a.s, "{\"event\":\"lubdub:resume\",\"data\":[1]}");
    assert_false(hub_resume_enabled(&a.s));
    assert_string_equal(events(&a.s), "err err");
    /* Data as a JSON string (how some clients send it) is understood. */
    fake_recv(&fh, &a.s,
              "{\"event\":\"lubdub:resume\",\"data\":\"{\\\"v\\\":1}\"}");
    assert_true(hub_resume_enabled(&a.s));
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* Resumed subscription, gap not servable: failed (with its reason), a
 * fresh start, the confirmation; no guard. */
static void expect_failed(struct fake_hub *fh, const char *ids_json,
                          const char *reason)
{
    struct fake_session a;
    char channels[512], want[128];

    assert_int_equal(fake_session_open(fh, &a, 0, &fh->apps[0]), 0);
    fake_flush(&a.s);
    snprintf(channels, sizeof(channels), "{\"c\":%s}", ids_json);
    resume_text(fh, &a.s, channels);
    fake_subscribe(fh, &a.s, "c", NULL);
    assert_string_equal(events(&a.s), "failed pos ok");
    snprintf(want, sizeof(want), "\"reason\":\"%s\"", reason);
    assert_non_null(strstr(fake_frame_text(&a.s, 0), want));
    assert_non_null(strstr(fake_frame_text(&a.s, 0), "\"channels\":[\"c\"]"));
    assert_false(a.s.rguard);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
}

static void test_recover_resume_failed_reasons(void **state)
{
    struct fake_hub fh;
    char ids[128];
    uint64_t s1;

    (void)state;
    start(&fh, 3, 100);
    s1 = publish(&fh, "c");
    for (int i = 0; i < 4; i++)
        publish(&fh, "c");
    snprintf(ids, sizeof(ids), "{\"%s\":%llu}", origin(&fh),
             (unsigned long long)s1);
    expect_failed(&fh, ids, "evicted");
    expect_failed(&fh, "{\"b00000000\":1}", "unknown_origin");
    snprintf(ids, sizeof(ids), "{\"%s\":-1}", origin(&fh));
    expect_failed(&fh, ids, "invalid");
    /* One more origin than a position may hold (HUB_HISTORY_ORIGINS). */
    expect_failed(&fh, "{\"o1\":1,\"o2\":1,\"o3\":1,\"o4\":1,\"o5\":1,"
                       "\"o6\":1,\"o7\":1,\"o8\":1,\"o9\":1,\"o10\":1,"
                       "\"o11\":1,\"o12\":1,\"o13\":1,\"o14\":1,"
                       "\"o15\":1,\"o16\":1,\"o17\":1}",
                  "invalid");
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.resumes_failed), 4);
    fake_hub_stop(&fh);
}

static void test_recover_no_history_failed_without_pos(void **state)
{
    struct fake_hub fh;
    struct fake_session a;

    (void)state;
    start(&fh, 3, 100);
    /* App 1 keeps no history. */
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[1]), 0);
    fake_flush(&a.s);
    resume_text(&fh, &a.s, "{\"c\":{\"b00000000\":1}}");
    fake_subscribe(&fh, &a.s, "c", NULL);
    assert_string_equal(events(&a.s), "failed ok");
    assert_non_null(strstr(fake_frame_text(&a.s, 0), "no_history"));
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/*
 * A client with more channels than the resume state holds (the
 * subscription cap, 100 when the hub has none: max_subscriptions 0 is
 * unlimited): the channels past it are "ignored" in take_channels(), so
 * their subscriptions start afresh (lubdub:pos) with no resume_failed,
 * and the helper takes the new position: the gap is lost silently. The
 * design (plan i35-common.md) says such channels are told resume_failed.
 */
static void test_recover_channels_past_cap_not_silent(void **state)
{
    struct fake_hub fh;
    struct fake_session a;
    char *channels;
    size_t o = 0;
    uint64_t s;

    (void)state;
    channels = malloc(8192);
    assert_non_null(channels);
    start(&fh, 10, 0);
    s = publish(&fh, "x");
    o += (size_t)snprintf(channels + o, 8192 - o, "{");
    for (int i = 0; i <= 100; i++)
        o += (size_t)snprintf(channels + o, 8192 - o, "%s\"c%d\":{\"%s\":%llu}",
                              i ? "," : "", i, origin(&fh),
                              (unsigned long long)s);
    snprintf(channels + o, 8192 - o, "}");
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    fake_flush(&a.s);
    resume_text(&fh, &a.s, channels);
    free(channels);
    fake_subscribe(&fh, &a.s, "c0", NULL);
    assert_string_equal(events(&a.s), "ok resumed");
    fake_flush(&a.s);
    fake_subscribe(&fh, &a.s, "c100", NULL);
    /* Either resumed or told it failed: never a silent fresh start. */
    assert_int_equal(fake_find(&a.s, "lubdub:pos") >= 0 &&
                         fake_find(&a.s, "lubdub:resume_failed") < 0,
                     0);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/*
 * A fresh subscription's lubdub:pos is the store's counter
 * (hub_history_start: hh->seq), but a publication assigned before the
 * subscribe and still in the loop's inbox reaches the new subscription
 * after it, with a seq at or under that position: the helper (plan
 * i35-common.md: "H[c][o] >= s -> duplicate: neutralize it") then drops
 * an event the app never saw, and a later resume never replays it. Every
 * event delivered after lubdub:pos should be above it (e.g. a position
 * from the loop's own last drained seq of the origin, which one lock
 * orders across all channels).
 */
static void test_recover_fresh_pos_below_inflight_event(void **state)
{
    struct fake_hub fh;
    struct fake_session a;
    struct hub_frame *f;
    const char *t;
    unsigned long long pos;

    (void)state;
    start(&fh, 10, 100);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    fake_flush(&a.s);
    resume_text(&fh, &a.s, "{}");
    /* Assigned and posted, not yet drained on the session's loop. */
    f = hub_proto_event_frame("e", "c", "\"d\"", 3, NULL);
    {
        const struct hub_pub_req r = { 0, "c", 1, f, NULL, false, NULL };

        assert_int_equal(hub_history_publish(hub_history_of(fh.hub),
                                             fh.loops[0], &fh.apps[0], &r,
                                             false),
                         0);
    }
    fake_subscribe(&fh, &a.s, "c", NULL);
    assert_string_equal(events(&a.s), "pos ok");
    t = strstr(fake_frame_text(&a.s, 0), origin(&fh));
    assert_non_null(t);
    pos = strtoull(t + strlen(origin(&fh)) + 2, NULL, 10);
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 3);
    /* The event arrives after the position: it must be newer. */
    assert_true(f->hseq > pos);
    hub_frame_unref(f);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recover_bad_resume_is_an_error),
        cmocka_unit_test(test_recover_resume_failed_reasons),
        cmocka_unit_test(test_recover_no_history_failed_without_pos),
        cmocka_unit_test(test_recover_channels_past_cap_not_silent),
        cmocka_unit_test(test_recover_fresh_pos_below_inflight_event),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
