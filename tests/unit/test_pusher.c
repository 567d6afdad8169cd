/*
 * tests/unit/test_pusher.c - the Pusher session protocol over the fake hub
 * (fake_hub.h): publication with exclusion within and across loops,
 * presence member events, client events, the per-app connection quota,
 * sign-in and terminate, the queue budget and the subscription cap.
 * The cases that once lived in test_channel.c come first; the
 * test_pusher_subscribe_* cases walk each step of a subscribe.
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

/* Publication through the fake transport. */

static struct hub_frame *text_frame(const char *text)
{
    return hub_frame_create_text(text, strlen(text));
}

static void test_pusher_publish_excludes_socket_across_loops(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, c;
    struct hub_frame *f;
    struct hub_skip ex;

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &b, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &c, 1, &fh.apps[0]), 0);
    fake_subscribe(&fh, &a.s, "news", NULL);
    fake_subscribe(&fh, &b.s, "news", NULL);
    fake_subscribe(&fh, &c.s, "news", NULL);
    assert_int_equal(fake_count(&c.s, "subscription_succeeded"), 1);
    fake_flush(&a.s);
    fake_flush(&b.s);
    fake_flush(&c.s);

    f = text_frame("{\"event\":\"e\",\"channel\":\"news\",\"data\":\"1\"}");
    assert_int_equal(hub_skip_parse(&ex, HUB_SID(&b.s)), 0);
    assert_int_equal(hub_publish(fh.hub, fh.loops[0], 0, "news", 4, f, &ex),
                     0);
    /* The calling loop delivers at once; the other loop on its wakeup. */
    assert_int_equal(a.s.q.count, 1);
    assert_int_equal(b.s.q.count, 0);
    assert_int_equal(c.s.q.count, 0);
    assert_true(fh.wakes >= 1);
    fake_hub_drain(&fh);
    assert_int_equal(c.s.q.count, 1);
    /* Every recipient shares the one frame. */
    assert_ptr_equal(a.s.q.ring[a.s.q.head], f);
    assert_ptr_equal(c.s.q.ring[c.s.q.head], f);
    assert_int_equal(hub_session_check(&a.s), 0);

    /* Excluding a socket of the other loop. */
    assert_int_equal(hub_skip_parse(&ex, HUB_SID(&c.s)), 0);
    hub_publish(fh.hub, NULL, 0, "news", 4, f, &ex);
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 2);
    assert_int_equal(b.s.q.count, 1);
    assert_int_equal(c.s.q.count, 1);
    /* Another app's channel of the same name gets nothing. */
    hub_publish(fh.hub, NULL, 1, "news", 4, f, NULL);
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 2);
    hub_frame_unref(f);

    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    hub_session_fini(&c.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_pusher_publish_to_stopping_hub_is_dropped(void **state)
{
    struct fake_hub fh;
    struct fake_session a;
    struct hub_frame *f;

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &a, 1, &fh.apps[0]);
    fake_subscribe(&fh, &a.s, "x", NULL);
    fake_flush(&a.s);
    f = text_frame("{}");
    /* Queued for loop 1 but never drained: destroy releases it. */
    hub_publish(fh.hub, fh.loops[0], 0, "x", 1, f, NULL);
    hub_frame_unref(f);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* Presence through the Pusher handlers: member events per user. */

static void test_pusher_presence_member_events_per_user(void **state)
{
    struct fake_hub fh;
    struct fake_session w, u1, u2;
    const char *cd = "{\"user_id\":\"alice\",\"user_info\":{\"n\":1}}";

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &w, 0, &fh.apps[0]);
    fake_session_open(&fh, &u1, 1, &fh.apps[0]);
    fake_session_open(&fh, &u2, 0, &fh.apps[0]);
    fake_subscribe(&fh, &w.s, "presence-r", "{\"user_id\":\"w\"}");
    /* w's own member_added reaches loop 1 now, before u1 subscribes. */
    fake_hub_drain(&fh);
    fake_flush(&w.s);

    fake_subscribe(&fh, &u1.s, "presence-r", cd);
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&w.s, "pusher_internal:member_added"), 1);
    assert_true(fake_find(&w.s, "{\\\"user_id\\\":\\\"alice\\\","
                                "\\\"user_info\\\":{\\\"n\\\":1}}") >= 0);
    assert_int_equal(fake_count(&u1.s, "member_added"), 0);
    assert_true(fake_find(&u1.s, "\\\"count\\\":2") >= 0);

    /* Second connection of alice: no member_added anywhere. */
    fake_subscribe(&fh, &u2.s, "presence-r", cd);
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&w.s, "member_added"), 1);
    assert_int_equal(fake_count(&u1.s, "member_added"), 0);
    assert_true(fake_find(&u2.s, "\\\"count\\\":2") >= 0);

    /* First alice leaves by disconnecting: nothing. */
    hub_session_fini(&u1.s, HUB_CLOSE_PEER);
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&w.s, "member_removed"), 0);
    /* Last alice unsubscribes: one member_removed. */
    fake_recv(&fh, &u2.s,
              "{\"event\":\"pusher:unsubscribe\","
              "\"data\":{\"channel\":\"presence-r\"}}");
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&w.s, "pusher_internal:member_removed"), 1);
    assert_true(fake_find(&w.s, "{\\\"user_id\\\":\\\"alice\\\"}") >= 0);
    assert_int_equal(fake_count(&u2.s, "member_removed"), 0);

    hub_session_fini(&w.s, HUB_CLOSE_PEER);
    hub_session_fini(&u2.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_pusher_presence_stale_member_events_skipped(void **state)
{
    struct fake_hub fh;
    struct fake_session w, v, x, y;

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &w, 0, &fh.apps[0]);
    fake_session_open(&fh, &v, 0, &fh.apps[0]);
    fake_session_open(&fh, &x, 1, &fh.apps[0]);
    fake_session_open(&fh, &y, 1, &fh.apps[0]);
    fake_subscribe(&fh, &v.s, "presence-s", "{\"user_id\":\"v\"}");
    fake_hub_drain(&fh);
    /*
     * w joins and v leaves on loop 0; their member events are still in
     * loop 1's inbox when x joins there. x's member list already says
     * "w in, v out", so neither event may reach x.
     */
    fake_subscribe(&fh, &w.s, "presence-s", "{\"user_id\":\"w\"}");
    hub_session_fini(&v.s, HUB_CLOSE_PEER);
    fake_subscribe(&fh, &x.s, "presence-s", "{\"user_id\":\"x\"}");
    assert_true(fake_find(&x.s, "\\\"ids\\\":[\\\"w\\\",\\\"x\\\"]") >= 0 ||
                fake_find(&x.s, "\\\"ids\\\":[\\\"x\\\",\\\"w\\\"]") >= 0);
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&x.s, "member_added"), 0);
    assert_int_equal(fake_count(&x.s, "member_removed"), 0);
    /* Changes after x joined do reach it, from either loop. */
    fake_subscribe(&fh, &y.s, "presence-s", "{\"user_id\":\"y\"}");
    hub_session_fini(&w.s, HUB_CLOSE_PEER);
    fake_hub_drain(&fh);
    assert_int_equal(fake_count(&x.s, "member_added"), 1);
    assert_true(fake_find(&x.s, "{\\\"user_id\\\":\\\"y\\\"}") >= 0);
    assert_int_equal(fake_count(&x.s, "member_removed"), 1);
    assert_true(fake_find(&x.s, "{\\\"user_id\\\":\\\"w\\\"}") >= 0);
    hub_session_fini(&x.s, HUB_CLOSE_PEER);
    hub_session_fini(&y.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_pusher_client_event_not_echoed_user_id_added(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;

    (void)state;
    fake_hub_init(&fh, 1);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 0, &fh.apps[0]);
    fake_subscribe(&fh, &a.s, "presence-c", "{\"user_id\":\"a\"}");
    fake_subscribe(&fh, &b.s, "presence-c", "{\"user_id\":\"b\"}");
    fake_subscribe(&fh, &a.s, "private-c", NULL);
    fake_subscribe(&fh, &b.s, "private-c", NULL);
    fake_flush(&a.s);
    fake_flush(&b.s);
    fake_recv(&fh, &a.s,
              "{\"event\":\"client-x\",\"channel\":\"presence-c\","
              "\"data\":{\"k\":1}}");
    fake_recv(&fh, &a.s,
              "{\"event\":\"client-y\",\"channel\":\"private-c\","
              "\"data\":[1]}");
    assert_int_equal(a.s.q.count, 0);
    assert_int_equal(b.s.q.count, 2);
    assert_string_equal(fake_frame_text(&b.s, 0),
                        "{\"event\":\"client-x\",\"channel\":\"presence-c\","
                        "\"data\":{\"k\":1},\"user_id\":\"a\"}");
    assert_string_equal(fake_frame_text(&b.s, 1),
                        "{\"event\":\"client-y\",\"channel\":\"private-c\","
                        "\"data\":[1]}");
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_pusher_client_event_rate_limit(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    const char *ev = "{\"event\":\"client-x\",\"channel\":\"private-r\","
                     "\"data\":{}}";

    (void)state;
    fake_hub_init(&fh, 1);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 0, &fh.apps[0]);
    fake_subscribe(&fh, &a.s, "private-r", NULL);
    fake_subscribe(&fh, &b.s, "private-r", NULL);
    fake_flush(&a.s);
    fake_flush(&b.s);
    /* A full bucket of 10, then refusals with 4301 (not a close). */
    for (int i = 0; i < 15; i++)
        fake_recv(&fh, &a.s, ev);
    assert_int_equal(b.s.q.count, 10);
    assert_int_equal(fake_count(&a.s, "\"code\":4301"), 5);
    assert_int_equal(a.s.state, HUB_SESSION_OPEN);
    /* 10 per second: after 300 ms, three more pass. */
    fake_flush(&a.s);
    fh.now_ns += 300 * 1000000ull;
    for (int i = 0; i < 5; i++)
        fake_recv(&fh, &a.s, ev);
    assert_int_equal(b.s.q.count, 13);
    assert_int_equal(fake_count(&a.s, "\"code\":4301"), 2);
    /* After a long pause the bucket is full again, not overfull. */
    fake_flush(&a.s);
    fake_flush(&b.s);
    fh.now_ns += 60ull * 1000 * 1000000ull;
    for (int i = 0; i < 12; i++)
        fake_recv(&fh, &a.s, ev);
    assert_int_equal(b.s.q.count, 10);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_pusher_app_max_connections_4004(void **state)
{
    struct fake_hub fh;
    struct fake_session s[4];

    (void)state;
    fake_hub_init(&fh, 2);
    fh.apps[0].max_connections = 2;
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &s[0], 0, &fh.apps[0]);
    fake_session_open(&fh, &s[1], 1, &fh.apps[0]);
    fake_session_open(&fh, &s[2], 0, &fh.apps[0]);
    /* The other app has no quota. */
    fake_session_open(&fh, &s[3], 1, &fh.apps[1]);
    assert_true(fake_find(&s[1].s, "connection_established") >= 0);
    assert_int_equal(s[2].s.state, HUB_SESSION_CLOSING);
    assert_int_equal(s[2].s.close_code, 4004);
    assert_true(fake_find(&s[2].s, "\"code\":4004") >= 0);
    assert_int_equal(fake_find(&s[2].s, "connection_established"), -1);
    assert_int_equal(s[3].s.state, HUB_SESSION_OPEN);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 2);
    /* A refused session gives back nothing it did not take. */
    hub_session_fini(&s[2].s, HUB_CLOSE_APP);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 2);
    hub_session_fini(&s[0].s, HUB_CLOSE_PEER);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 1);
    fake_session_open(&fh, &s[2], 0, &fh.apps[0]);
    assert_int_equal(s[2].s.state, HUB_SESSION_OPEN);
    for (int i = 1; i < 4; i++)
        hub_session_fini(&s[i].s, HUB_CLOSE_PEER);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 0);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 1)->sessions), 0);
    fake_hub_stop(&fh);
}

static void test_pusher_signin_user_channel_and_terminate(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, c, x;
    struct hub_frame *f;
    const char *uid = "#server-to-user-42";

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 1, &fh.apps[0]);
    fake_session_open(&fh, &c, 1, &fh.apps[0]);
    fake_session_open(&fh, &x, 0, &fh.apps[0]);
    /* Before signin the user channel is refused. */
    fake_subscribe(&fh, &a.s, uid, NULL);
    assert_true(fake_find(&a.s, "\"status\":403") >= 0);
    fake_signin(&fh, &a.s, "{\"id\":\"42\",\"user_info\":{}}");
    fake_signin(&fh, &b.s, "{\"id\":\"42\"}");
    fake_signin(&fh, &c.s, "{\"id\":\"7\"}");
    assert_int_equal(fake_count(&a.s, "pusher:signin_success"), 1);
    {
        /* data is a JSON string holding {"user_data": <as sent>}. */
        int i = fake_find(&a.s, "pusher:signin_success");
        json_t *msg = json_loads(fake_frame_text(&a.s, (uint32_t)i), 0, NULL);
        json_t *data = json_loads(
            json_string_value(json_object_get(msg, "data")), 0, NULL);

        assert_non_null(data);
        assert_null(json_object_get(msg, "channel"));
        assert_string_equal(
            json_string_value(json_object_get(data, "user_data")),
            "{\"id\":\"42\",\"user_info\":{}}");
        json_decref(data);
        json_decref(msg);
    }
    assert_string_equal(a.s.user_id, "42");
    /* pusher-js then subscribes to its channel: confirmed, not doubled. */
    fake_subscribe(&fh, &a.s, uid, NULL);
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 1);
    fake_flush(&a.s);
    fake_flush(&b.s);
    fake_flush(&c.s);
    /* A REST event to the user reaches both of its sockets, once each. */
    f = hub_frame_create_text("{\"event\":\"u\"}", 13);
    hub_publish(fh.hub, fh.loops[0], 0, uid, strlen(uid), f, NULL);
    hub_frame_unref(f);
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 1);
    assert_int_equal(b.s.q.count, 1);
    assert_int_equal(c.s.q.count, 0);
    /* Terminate closes the user's sockets on every loop with 4009. */
    assert_int_equal(hub_terminate_user(fh.hub, fh.loops[1], 0, "42"), 0);
    assert_int_equal(b.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(a.s.state, HUB_SESSION_OPEN);
    fake_hub_drain(&fh);
    assert_int_equal(a.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(a.s.close_code, 4009);
    assert_true(fake_find(&a.s, "You got disconnected by the app.") >= 0);
    assert_int_equal(c.s.state, HUB_SESSION_OPEN);
    /* Bad signature and a missing id close with 4009. */
    fake_recv(&fh, &x.s,
              "{\"event\":\"pusher:signin\",\"data\":{\"auth\":"
              "\"app-key:00\",\"user_data\":\"{\\\"id\\\":\\\"1\\\"}\"}}");
    assert_int_equal(x.s.close_code, 4009);
    hub_session_fini(&x.s, HUB_CLOSE_APP);
    fake_session_open(&fh, &x, 0, &fh.apps[0]);
    fake_signin(&fh, &x.s, "{\"id\":5}");
    assert_int_equal(x.s.close_code, 4009);
    assert_null(x.s.user_id);
    hub_session_fini(&a.s, HUB_CLOSE_APP);
    hub_session_fini(&b.s, HUB_CLOSE_APP);
    hub_session_fini(&c.s, HUB_CLOSE_PEER);
    hub_session_fini(&x.s, HUB_CLOSE_APP);
    assert_int_equal(hub_chanmap_count(fh.loops[0]->chans), 0);
    assert_int_equal(hub_chanmap_count(fh.loops[1]->chans), 0);
    fake_hub_stop(&fh);
}

/* A sealed frame of 1004 wire bytes on channel c. */
static struct hub_frame *kib_frame(void)
{
    struct hub_frame *f = hub_frame_create(1000);

    assert_non_null(f);
    memset(hub_frame_payload(f), 'q', 1000);
    hub_frame_seal(f, 1000);
    assert_int_equal(f->len, 1004);
    return f;
}

/* Queued bytes on every loop. */
static uint64_t hub_queued(const struct fake_hub *fh)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < fh->n_loops; i++)
        sum += HUB_STAT_GET(fh->loops[i]->stats.queued_bytes);
    return sum;
}

static void test_pusher_queue_budget_closes_furthest_behind(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, h;
    struct hub_loop *l;
    struct hub_frame *f;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.cfg.max_queue = 8000;
    fh.cfg.max_queued_total = 10000; /* high mark 8750, low 7500 */
    assert_int_equal(fake_hub_start(&fh), 0);
    l = fh.loops[0];
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 0, &fh.apps[0]);
    fake_session_open(&fh, &h, 0, &fh.apps[0]);
    fake_subscribe(&fh, &a.s, "c", NULL);
    fake_subscribe(&fh, &a.s, "x", NULL);
    fake_subscribe(&fh, &b.s, "c", NULL);
    fake_subscribe(&fh, &h.s, "c", NULL);
    fake_flush(&a.s);
    fake_flush(&b.s);
    fake_flush(&h.s);
    assert_int_equal(hub_queued(&fh), 0);
    assert_int_equal(HUB_STAT_GET(l->stats.queued_bytes), 0);
    f = kib_frame();
    /* a falls behind on x as well: 3 frames ahead of b. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(hub_deliver_local(l, 0, "x", 1, f, NULL), 1);
    assert_int_equal(hub_queued(&fh), 3 * 1004);
    /* Accounted once for all recipients. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(hub_deliver_local(l, 0, "c", 1, f, NULL), 3);
        fake_flush(&h.s);
    }
    assert_int_equal(hub_queued(&fh), 7 * 1004);
    assert_int_equal(HUB_STAT_GET(l->stats.queued_bytes), 7 * 1004);
    /* The next publish does not fit: a (5 frames behind) goes first, and
     * b and h still get it. */
    fake_hub_advance(&fh, 20);
    assert_int_equal(hub_deliver_local(l, 0, "c", 1, f, NULL), 2);
    assert_int_equal(a.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(a.s.close_code, 4100);
    assert_int_equal(a.s.close_reason_id, HUB_CLOSE_QUEUE_BUDGET);
    assert_int_equal(b.s.state, HUB_SESSION_OPEN);
    assert_int_equal(b.s.q.bytes, 3 * 1004);
    fake_flush(&h.s);
    /* Keep publishing: b is next, h (keeping up) never. */
    for (int i = 0; i < 10 && b.s.state == HUB_SESSION_OPEN; i++) {
        fake_hub_advance(&fh, 20);
        hub_deliver_local(l, 0, "c", 1, f, NULL);
        fake_flush(&h.s);
        assert_true(hub_queued(&fh) <= fh.cfg.max_queued_total);
        assert_int_equal(HUB_STAT_GET(l->stats.queued_bytes),
                         a.s.q.bytes + b.s.q.bytes + h.s.q.bytes);
    }
    assert_int_equal(b.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(b.s.close_reason_id, HUB_CLOSE_QUEUE_BUDGET);
    assert_int_equal(h.s.state, HUB_SESSION_OPEN);
    hub_frame_unref(f);
    hub_session_fini(&a.s, HUB_CLOSE_QUEUE_BUDGET);
    hub_session_fini(&b.s, HUB_CLOSE_QUEUE_BUDGET);
    assert_int_equal(
        HUB_STAT_GET(l->stats.closed[HUB_CLOSE_QUEUE_BUDGET]), 2);
    fake_flush(&h.s);
    hub_session_fini(&h.s, HUB_CLOSE_PEER);
    assert_int_equal(hub_queued(&fh), 0);
    assert_int_equal(HUB_STAT_GET(l->stats.queued_bytes), 0);
    fake_hub_stop(&fh);
}

/*
 * A recipient's admission evicts one that already got this publish: the
 * evicted queue must release only a reference it holds. Before the fix the
 * walk added the references after it, so the eviction freed the frame
 * while the walk and (across loops) other loops still used it.
 */
static void test_pusher_queue_budget_evicts_earlier_recipient(void **state)
{
    struct fake_hub fh;
    struct fake_session e, w;
    struct hub_loop *l;
    struct hub_frame *g, *f;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.cfg.max_queue = 100000;
    fh.cfg.max_queued_total = 10000; /* share 5000 each, low mark 7500 */
    assert_int_equal(fake_hub_start(&fh), 0);
    l = fh.loops[0];
    fake_session_open(&fh, &e, 0, &fh.apps[0]);
    fake_session_open(&fh, &w, 0, &fh.apps[0]);
    fake_subscribe(&fh, &e.s, "c", NULL); /* e comes first in the walk */
    fake_subscribe(&fh, &w.s, "c", NULL);
    fake_flush(&e.s);
    fake_flush(&w.s);
    g = kib_frame();
    for (int i = 0; i < 4; i++)
        assert_int_equal(hub_deliver_local(l, 0, "c", 1, g, NULL), 2);
    hub_frame_unref(g); /* the queues hold it now */
    assert_int_equal(hub_queued(&fh), 8 * 1004);
    f = kib_frame();
    fake_hub_advance(&fh, 20);
    /* 8032 + 2 x 1004 passes the budget: e (4016, within its share) gets
     * f and so passes its share; w's admission then does not fit, the
     * forced eviction closes e with its queue, and w gets f. */
    assert_int_equal(hub_deliver_local(l, 0, "c", 1, f, NULL), 2);
    assert_int_equal(e.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(e.s.close_reason_id, HUB_CLOSE_QUEUE_BUDGET);
    assert_int_equal(e.s.q.count, 1); /* only the 4100 error */
    assert_int_equal(w.s.state, HUB_SESSION_OPEN);
    assert_int_equal(w.s.q.count, 5);
    /* Ours and w's queue: exactly two references. */
    assert_int_equal(atomic_load(&f->refs), 2);
    assert_int_equal(HUB_STAT_GET(l->stats.queued_bytes),
                     e.s.q.bytes + w.s.q.bytes);
    hub_frame_unref(f);
    fake_flush(&w.s);
    hub_session_fini(&e.s, HUB_CLOSE_QUEUE_BUDGET);
    hub_session_fini(&w.s, HUB_CLOSE_PEER);
    assert_int_equal(hub_queued(&fh), 0);
    fake_hub_stop(&fh);
}

static void test_pusher_queue_budget_across_loops(void **state)
{
    struct fake_hub fh;
    struct fake_session far, h;
    struct hub_frame *f;
    int i;

    (void)state;
    fake_hub_init(&fh, 2);
    fh.cfg.max_queue = 10000; /* the budget, not max_queue, must act */
    fh.cfg.max_queued_total = 10000; /* 5000 per loop */
    assert_int_equal(fake_hub_start(&fh), 0);
    fake_session_open(&fh, &h, 0, &fh.apps[0]);
    fake_session_open(&fh, &far, 1, &fh.apps[0]);
    fake_subscribe(&fh, &h.s, "c", NULL);
    fake_subscribe(&fh, &far.s, "c", NULL);
    fake_flush(&h.s);
    fake_flush(&far.s);
    f = kib_frame();
    /* Publishes from loop 0; far (loop 1) never reads, h always does. */
    for (i = 0; i < 20 && far.s.state == HUB_SESSION_OPEN; i++) {
        assert_int_equal(hub_publish(fh.hub, fh.loops[0], 0, "c", 1, f, NULL),
                         0);
        fake_hub_advance(&fh, 20); /* deliveries, then any eviction order */
        fake_hub_drain(&fh);
        fake_flush(&h.s);
        assert_true(HUB_STAT_GET(fh.loops[1]->stats.queued_bytes) <= 5000);
        assert_true(hub_queued(&fh) <= fh.cfg.max_queued_total);
        assert_int_equal(h.s.state, HUB_SESSION_OPEN);
    }
    /* Loop 1 closed its own session at its share of the budget; loop 0's
     * reader never paid for it. */
    assert_int_equal(far.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(far.s.close_reason_id, HUB_CLOSE_QUEUE_BUDGET);
    assert_int_equal(i, 5); /* 4 frames fit 5000 bytes; the 5th closed it */
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.queue_budget_drops), 1);
    hub_frame_unref(f);
    hub_session_fini(&far.s, HUB_CLOSE_QUEUE_BUDGET);
    hub_session_fini(&h.s, HUB_CLOSE_PEER);
    assert_int_equal(hub_queued(&fh), 0);
    fake_hub_stop(&fh);
}

static void test_pusher_max_subscriptions_refused(void **state)
{
    struct fake_hub fh;
    struct fake_session a;
    struct hub_loop *l;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.cfg.max_subscriptions = 3;
    assert_int_equal(fake_hub_start(&fh), 0);
    l = fh.loops[0];
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_signin(&fh, &a.s, "{\"id\":\"u1\"}"); /* its channel is free */
    fake_subscribe(&fh, &a.s, "one", NULL);
    fake_subscribe(&fh, &a.s, "private-two", NULL);
    fake_subscribe(&fh, &a.s, "three", NULL);
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 3);
    fake_flush(&a.s);
    fake_subscribe(&fh, &a.s, "four", NULL);
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 0);
    assert_int_equal(fake_find(&a.s, "\"pusher:subscription_error\","
                                     "\"channel\":\"four\""),
                     0);
    assert_non_null(strstr(fake_frame_text(&a.s, 0),
                           "\"type\":\"LimitReached\""));
    assert_non_null(strstr(fake_frame_text(&a.s, 0), "the limit is 3"));
    assert_int_equal(HUB_STAT_GET(l->stats.subscriptions_refused), 1);
    assert_int_equal(a.s.state, HUB_SESSION_OPEN);
    fake_flush(&a.s);
    /* Subscribing again to one it holds is not a new subscription. */
    fake_subscribe(&fh, &a.s, "three", NULL);
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 1);
    fake_flush(&a.s);
    /* Unsubscribing makes room. */
    fake_recv(&fh, &a.s, "{\"event\":\"pusher:unsubscribe\",\"data\":"
                         "{\"channel\":\"one\"}}");
    fake_subscribe(&fh, &a.s, "four", NULL);
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 1);
    assert_int_equal(HUB_STAT_GET(l->stats.subscriptions_refused), 1);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* Each step of hub_pusher_subscribe(), one refusal or answer at a time. */

/* The last queued frame of s (borrowed, as fake_frame_text). */
static const char *last_frame(const struct hub_session *s)
{
    assert_true(s->q.count > 0);
    return fake_frame_text(s, s->q.count - 1);
}

/* Directory figures of (app 0, name). */
static struct hub_channel_info dir_info(struct fake_hub *fh, const char *name)
{
    struct hub_channel_info ci;

    hub_dir_info(fh->hub, 0, name, strlen(name), &ci);
    return ci;
}

static void test_pusher_subscribe_refusals(void **state)
{
    struct fake_hub fh;
    struct fake_session a;
    char big[64];

    (void)state;
    fake_hub_init(&fh, 1);
    fh.apps[0].max_user_info_bytes = 16;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    fake_flush(&a.s);

    /* Name: 4009, before anything else is looked at. */
    fake_recv(&fh, &a.s,
              "{\"event\":\"pusher:subscribe\",\"data\":"
              "{\"channel\":\"a b\"}}");
    assert_non_null(strstr(last_frame(&a.s), "\"type\":\"InvalidChannel\""));
    assert_non_null(strstr(last_frame(&a.s), "\"status\":4009"));
    /* Private without auth, and with a wrong signature: 401. */
    fake_recv(&fh, &a.s,
              "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":"
              "\"private-x\"}}");
    assert_non_null(strstr(last_frame(&a.s), "Missing or malformed auth"));
    assert_non_null(strstr(last_frame(&a.s), "\"status\":401"));
    fake_recv(&fh, &a.s,
              "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":"
              "\"private-x\",\"auth\":\"app-key:00\"}}");
    assert_non_null(strstr(last_frame(&a.s), "Invalid signature"));
    /* Presence without channel_data: 401. */
    fake_recv(&fh, &a.s,
              "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":"
              "\"presence-x\",\"auth\":\"app-key:00\"}}");
    assert_non_null(strstr(last_frame(&a.s),
                           "Presence channels need channel_data"));
    /* Signed channel_data that is unusable: 400; user_info too big: 4301. */
    fake_subscribe(&fh, &a.s, "presence-x", "[1]");
    assert_non_null(strstr(last_frame(&a.s),
                           "channel_data must be a JSON object"));
    assert_non_null(strstr(last_frame(&a.s), "\"status\":400"));
    fake_subscribe(&fh, &a.s, "presence-x", "{\"user_id\":true}");
    assert_non_null(strstr(last_frame(&a.s),
                           "channel_data.user_id must be a string or an "
                           "integer"));
    fake_subscribe(&fh, &a.s, "presence-x", "{\"user_id\":\"\"}");
    assert_non_null(strstr(last_frame(&a.s),
                           "channel_data.user_id is empty or too long"));
    snprintf(big, sizeof(big),
             "{\"user_id\":\"u\",\"user_info\":\"%s\"}", "0123456789abcdef");
    fake_subscribe(&fh, &a.s, "presence-x", big);
    assert_non_null(strstr(last_frame(&a.s), "\"type\":\"LimitReached\""));
    assert_non_null(strstr(last_frame(&a.s), "\"status\":4301"));
    /* None of it subscribed anything or touched the directory. */
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 0);
    assert_true(hub_list_is_empty(&a.s.subs));
    assert_int_equal(hub_chanmap_count(fh.loops[0]->chans), 0);
    assert_false(dir_info(&fh, "presence-x").occupied);
    assert_false(dir_info(&fh, "private-x").occupied);
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.subscriptions), 0);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_pusher_subscribe_again(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_channel_info ci;

    (void)state;
    fake_hub_init(&fh, 2);
    fh.apps[0].max_presence_members = 2;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &b, 1, &fh.apps[0]), 0);

    /* Public and private: confirmed again, nothing changes. */
    fake_subscribe(&fh, &a.s, "news", NULL);
    fake_subscribe(&fh, &a.s, "news", NULL);
    fake_subscribe(&fh, &a.s, "private-p", NULL);
    fake_subscribe(&fh, &a.s, "private-p", NULL);
    assert_int_equal(fake_count(&a.s, "subscription_succeeded"), 4);
    assert_int_equal(dir_info(&fh, "news").subscription_count, 1);
    assert_int_equal(dir_info(&fh, "private-p").subscription_count, 1);
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.subscriptions), 2);
    fake_flush(&a.s);

    /* Presence: the same user again gets the member list again. */
    fake_subscribe(&fh, &a.s, "presence-r", "{\"user_id\":\"u1\"}");
    fake_subscribe(&fh, &b.s, "presence-r", "{\"user_id\":\"u2\"}");
    fake_hub_drain(&fh);
    fake_flush(&a.s);
    fake_flush(&b.s);
    fake_subscribe(&fh, &a.s, "presence-r", "{\"user_id\":\"u1\"}");
    fake_hub_drain(&fh);
    assert_int_equal(a.s.q.count, 1);
    assert_non_null(strstr(last_frame(&a.s), "subscription_succeeded"));
    assert_non_null(strstr(last_frame(&a.s), "u2"));
    /* No member event for it, and the counts are where they were. */
    assert_int_equal(b.s.q.count, 0);
    ci = dir_info(&fh, "presence-r");
    assert_int_equal(ci.user_count, 2);
    assert_int_equal(ci.subscription_count, 2);
    /* Another user on the same socket and channel: 409. */
    fake_subscribe(&fh, &a.s, "presence-r", "{\"user_id\":\"u3\"}");
    assert_non_null(strstr(last_frame(&a.s),
                           "Already subscribed as another user"));
    assert_non_null(strstr(last_frame(&a.s), "\"status\":409"));
    /* A third user when the channel holds two: full, 4100. */
    {
        struct fake_session c;

        assert_int_equal(fake_session_open(&fh, &c, 0, &fh.apps[0]), 0);
        fake_subscribe(&fh, &c.s, "presence-r", "{\"user_id\":\"u3\"}");
        assert_non_null(strstr(last_frame(&c.s), "Presence channel is full"));
        assert_non_null(strstr(last_frame(&c.s), "\"status\":4100"));
        assert_true(hub_list_is_empty(&c.s.subs));
        /* A second socket of a member still fits. */
        fake_subscribe(&fh, &c.s, "presence-r", "{\"user_id\":\"u2\"}");
        assert_non_null(strstr(last_frame(&c.s), "subscription_succeeded"));
        ci = dir_info(&fh, "presence-r");
        assert_int_equal(ci.user_count, 2);
        assert_int_equal(ci.subscription_count, 3);
        hub_session_fini(&c.s, HUB_CLOSE_PEER);
    }
    ci = dir_info(&fh, "presence-r");
    assert_int_equal(ci.user_count, 2);
    assert_int_equal(ci.subscription_count, 2);
    /* Unsubscribing a channel one is not in changes nothing. */
    fake_recv(&fh, &a.s,
              "{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":"
              "\"elsewhere\"}}");
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.subscriptions), 3);
    fake_recv(&fh, &a.s,
              "{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":"
              "\"news\"}}");
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.subscriptions), 2);
    assert_false(dir_info(&fh, "news").occupied);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_drain(&fh);
    assert_int_equal(hub_chanmap_count(fh.loops[0]->chans), 0);
    assert_int_equal(hub_chanmap_count(fh.loops[1]->chans), 0);
    assert_false(dir_info(&fh, "presence-r").occupied);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pusher_publish_excludes_socket_across_loops),
        cmocka_unit_test(test_pusher_publish_to_stopping_hub_is_dropped),
        cmocka_unit_test(test_pusher_presence_member_events_per_user),
        cmocka_unit_test(test_pusher_presence_stale_member_events_skipped),
        cmocka_unit_test(test_pusher_client_event_not_echoed_user_id_added),
        cmocka_unit_test(test_pusher_client_event_rate_limit),
        cmocka_unit_test(test_pusher_app_max_connections_4004),
        cmocka_unit_test(test_pusher_signin_user_channel_and_terminate),
        cmocka_unit_test(test_pusher_queue_budget_closes_furthest_behind),
        cmocka_unit_test(test_pusher_queue_budget_evicts_earlier_recipient),
        cmocka_unit_test(test_pusher_queue_budget_across_loops),
        cmocka_unit_test(test_pusher_max_subscriptions_refused),
        cmocka_unit_test(test_pusher_subscribe_refusals),
        cmocka_unit_test(test_pusher_subscribe_again),
    };

    json_object_seed(1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
