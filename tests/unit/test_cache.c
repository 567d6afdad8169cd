/*
 * tests/unit/test_cache.c - the cache channels' store (hub/channel/cache.h) with
 * explicit times, under a failing allocator (fail_alloc.h); and, on a
 * two-loop fake hub with a fake clock, what a subscriber to a cache
 * channel is sent (hub/channel/chanhooks.h) and the subscription_count coalescer
 * (hub/channel/subcount.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "fake_hub.h"
#include "hub/channel/cache.h"
#include "hub/channel/chanhooks.h"
#include "hub/channel/subcount.h"
#include "hub/pusher/subscribe.h"

static struct hub_frame *text_frame(const char *text)
{
    struct hub_frame *f = hub_frame_create_text(text, strlen(text));

    assert_non_null(f);
    return f;
}

static unsigned refs(struct hub_frame *f)
{
    return atomic_load(&f->refs);
}

static void test_cache_channel_names(void **state)
{
    static const char *yes[] = { "cache-a", "private-cache-a",
                                 "private-encrypted-cache-a",
                                 "presence-cache-a", "cache-" };
    static const char *no[] = { "cache", "caches-a", "private-a",
                                "presence-a", "private-encrypted-a",
                                "xcache-a", "#server-to-user-cache-",
                                "public-cache-a", "" };

    (void)state;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(hub_channel_is_cache(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(hub_channel_is_cache(no[i], strlen(no[i])));
    /* The length bounds the compare: a name is not NUL-terminated. */
    assert_false(hub_channel_is_cache("cache-a", 5));
}

static void test_cache_store_get_replace_expire(void **state)
{
    struct hub_cache *c = hub_cache_create(2);
    struct hub_frame *a = text_frame("{\"event\":\"a\"}");
    struct hub_frame *b = text_frame("{\"event\":\"b\"}");
    struct hub_cache_usage u;
    uint64_t left = 0;
    struct hub_frame *g;

    (void)state;
    assert_non_null(c);
    assert_null(hub_cache_get(c, 0, "cache-x", 7, 1000, NULL));
    assert_int_equal(hub_cache_store(c, 0, "cache-x", 7, a, 1000, 500, 0,
                                     NULL), 0);
    assert_int_equal(refs(a), 2);
    /* The same frame, by reference, and its remaining life. */
    g = hub_cache_get(c, 0, "cache-x", 7, 1200, &left);
    assert_ptr_equal(g, a);
    assert_int_equal(left, 300);
    hub_frame_unref(g);
    /* Apps are apart. */
    assert_null(hub_cache_get(c, 1, "cache-x", 7, 1200, NULL));
    /* A newer event replaces the older one and releases it. */
    assert_int_equal(hub_cache_store(c, 0, "cache-x", 7, b, 1300, 500, 0,
                                     NULL), 0);
    assert_int_equal(refs(a), 1);
    hub_cache_app_usage(c, 0, &u);
    assert_int_equal(u.entries, 1);
    assert_int_equal(u.bytes, hub_cache_entry_bytes(b->len, 7));
    assert_int_equal(hub_cache_check(c), 0);
    /* Expired on read: a miss, and freed. */
    assert_non_null(g = hub_cache_get(c, 0, "cache-x", 7, 1799, NULL));
    hub_frame_unref(g);
    assert_null(hub_cache_get(c, 0, "cache-x", 7, 1800, NULL));
    assert_int_equal(refs(b), 1);
    hub_cache_app_usage(c, 0, &u);
    assert_int_equal(u.entries, 0);
    assert_int_equal(u.bytes, 0);
    assert_int_equal(hub_cache_check(c), 0);
    hub_cache_destroy(c);
    hub_frame_unref(a);
    hub_frame_unref(b);
}

static void test_cache_reclaim_stops_at_first_live(void **state)
{
    struct hub_cache *c = hub_cache_create(1);
    struct hub_frame *f = text_frame("{}");
    char name[16];

    (void)state;
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "cache-%d", i);
        assert_int_equal(hub_cache_store(c, 0, name, strlen(name), f,
                                         (uint64_t)i * 100, 1000, 0, NULL),
                         0);
    }
    assert_int_equal(hub_cache_reclaim(c, 999), 0);
    assert_int_equal(hub_cache_reclaim(c, 1350), 4);
    assert_int_equal(hub_cache_check(c), 0);
    assert_int_equal(refs(f), 1 + 6);
    assert_int_equal(hub_cache_reclaim(c, 10000), 6);
    assert_int_equal(refs(f), 1);
    hub_cache_destroy(c);
    hub_frame_unref(f);
}

static void test_cache_cap_evicts_oldest_and_refuses_oversize(void **state)
{
    struct hub_frame *f = text_frame("0123456789012345678901234567890123456789");
    uint64_t one = hub_cache_entry_bytes(f->len, 7);
    struct hub_cache *c = hub_cache_create(2);
    struct hub_cache_put put;
    struct hub_cache_usage u;
    struct hub_frame *big, *g;
    char name[8];

    (void)state;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "cache-%d", i);
        assert_int_equal(hub_cache_store(c, 0, name, 7, f, 10 + i, 1000,
                                         3 * one, &put), 0);
        assert_int_equal(put.evicted, i < 3 ? 0 : 1);
        assert_false(put.oversize);
    }
    hub_cache_app_usage(c, 0, &u);
    assert_int_equal(u.entries, 3);
    assert_int_equal(u.bytes, 3 * one);
    assert_null(hub_cache_get(c, 0, "cache-0", 7, 20, NULL));
    assert_null(hub_cache_get(c, 0, "cache-1", 7, 20, NULL));
    assert_non_null(g = hub_cache_get(c, 0, "cache-4", 7, 20, NULL));
    hub_frame_unref(g);
    /* Re-storing moves an entry to the tail: cache-2 outlives cache-3. */
    assert_int_equal(hub_cache_store(c, 0, "cache-2", 7, f, 30, 1000,
                                     3 * one, &put), 0);
    assert_int_equal(hub_cache_store(c, 0, "cache-5", 7, f, 31, 1000,
                                     3 * one, &put), 0);
    assert_int_equal(put.evicted, 1);
    assert_null(hub_cache_get(c, 0, "cache-3", 7, 40, NULL));
    assert_non_null(g = hub_cache_get(c, 0, "cache-2", 7, 40, NULL));
    hub_frame_unref(g);
    /* Bigger than the cap: not cached, and the older event is gone. */
    big = hub_frame_create(4 * one);
    assert_non_null(big);
    memset(hub_frame_payload(big), 'x', 4 * one);
    hub_frame_seal(big, 4 * one);
    assert_int_equal(hub_cache_store(c, 0, "cache-2", 7, big, 41, 1000,
                                     3 * one, &put), 0);
    assert_true(put.oversize);
    assert_int_equal(put.evicted, 0);
    assert_int_equal(refs(big), 1);
    assert_null(hub_cache_get(c, 0, "cache-2", 7, 42, NULL));
    hub_cache_app_usage(c, 0, &u);
    assert_int_equal(u.entries, 2);
    /* The other app's cap is its own. */
    hub_cache_app_usage(c, 1, &u);
    assert_int_equal(u.entries, 0);
    assert_int_equal(hub_cache_check(c), 0);
    /* An index past the first accounts (an app a reload added) gets its
     * own account; one no table can hold is refused. */
    assert_null(hub_cache_get(c, 7, "cache-x", 7, 1, NULL));
    assert_int_equal(hub_cache_store(c, 7, "cache-x", 7, f, 1, 1000, 0, NULL),
                     0);
    hub_cache_app_usage(c, 7, &u);
    assert_int_equal(u.entries, 1);
    hub_frame_unref(hub_cache_get(c, 7, "cache-x", 7, 2, NULL));
    assert_int_equal(hub_cache_check(c), 0);
    assert_int_equal(hub_cache_store(c, UINT32_MAX, "cache-x", 7, f, 1, 1, 0,
                                     NULL),
                     -EINVAL);
    hub_cache_destroy(c);
    hub_frame_unref(big);
    hub_frame_unref(f);
}

static void test_cache_out_of_memory(void **state)
{
    struct hub_frame *old = text_frame("{\"old\":1}");
    struct hub_frame *neu = text_frame("{\"new\":1}");

    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            struct hub_cache *c = hub_cache_create(1);
            struct hub_frame *g;
            int rc;

            if (!c)
                break;
            fail_alloc_off();
            assert_int_equal(hub_cache_store(c, 0, "cache-x", 7, old, 1,
                                             100, 0, NULL), 0);
            fail_alloc_after(fa_step);
            rc = hub_cache_store(c, 0, "cache-x", 7, neu, 2, 100, 0, NULL);
            fail_alloc_off();
            g = hub_cache_get(c, 0, "cache-x", 7, 3, NULL);
            if (rc) {
                /* The older event is no longer the last one: gone. */
                assert_int_equal(rc, -ENOMEM);
                assert_null(g);
            } else {
                assert_ptr_equal(g, neu);
                hub_frame_unref(g);
            }
            assert_int_equal(hub_cache_check(c), 0);
            hub_cache_destroy(c);
        },
        {
            assert_int_equal(fail_alloc_live(), fa_live_before);
            assert_int_equal(refs(old), 1);
            assert_int_equal(refs(neu), 1);
        });
    hub_frame_unref(old);
    hub_frame_unref(neu);
}

/* On the fake hub: the app's cache and count switches in cfg/app. */
static void start(struct fake_hub *fh)
{
    fake_hub_init(fh, 2);
    fh->cfg.cache_ttl_ms = 60000;
    fh->cfg.cache_max_bytes = 1 << 20;
    fh->cfg.subscription_count_interval_ms = 1000;
    fh->cfg.max_subscriptions = 100;
    fh->apps[0].subscription_count = true;
    assert_int_equal(fake_hub_start(fh), 0);
}

static void test_cache_channel_first_event(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, c;
    struct hub_frame *f;

    (void)state;
    start(&fh);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &b, 1, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &c, 1, &fh.apps[1]), 0);
    fake_flush(&a.s);
    fake_flush(&b.s);
    fake_flush(&c.s);
    /* Nothing cached: pusher:cache_miss right after the confirmation. */
    fake_subscribe(&fh, &a.s, "cache-score", NULL);
    assert_int_equal(a.s.q.count, 2);
    assert_non_null(strstr(fake_frame_text(&a.s, 0), "subscription_succeeded"));
    assert_string_equal(fake_frame_text(&a.s, 1),
                        "{\"event\":\"pusher:cache_miss\",\"channel\":"
                        "\"cache-score\"}");
    fake_flush(&a.s);
    /* A published frame is kept by reference and sent as is. */
    f = hub_proto_event_frame("score", "cache-score", "\"1-0\"", 5, NULL);
    assert_non_null(f);
    hub_chanhooks_published(fh.loops[0], &fh.apps[0], "cache-score", 11, f);
    assert_int_equal(refs(f), 2);
    fake_subscribe(&fh, &b.s, "cache-score", NULL);
    assert_int_equal(b.s.q.count, 2);
    assert_ptr_equal(b.s.q.ring[(b.s.q.head + 1) & (b.s.q.cap - 1)], f);
    assert_int_equal(refs(f), 3);
    /* Another app's channel of the same name has nothing. */
    fake_subscribe(&fh, &c.s, "cache-score", NULL);
    assert_int_equal(fake_count(&c.s, "pusher:cache_miss"), 1);
    /* A non-cache channel is not kept. */
    hub_chanhooks_published(fh.loops[0], &fh.apps[0], "plain", 5, f);
    assert_int_equal(refs(f), 3);
    /* Expired: a miss again. */
    fake_flush(&b.s);
    fake_hub_advance(&fh, 60001);
    hub_pusher_unsubscribe(&b.s, "cache-score", 11);
    fake_subscribe(&fh, &b.s, "cache-score", NULL);
    assert_int_equal(fake_count(&b.s, "pusher:cache_miss"), 1);
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.cache_hits), 1);
    assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.cache_misses), 2);
    assert_int_equal(HUB_STAT_GET(fh.loops[0]->stats.cache_stores), 1);
    hub_frame_unref(f);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    hub_session_fini(&c.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_cache_subcount_coalesced(void **state)
{
    struct fake_hub fh;
    static struct fake_session s[20];
    unsigned counted = 0;

    (void)state;
    start(&fh);
    for (unsigned i = 0; i < 20; i++) {
        assert_int_equal(fake_session_open(&fh, &s[i], i % 2, &fh.apps[0]),
                         0);
        fake_subscribe(&fh, &s[i].s, "room", NULL);
        fake_subscribe(&fh, &s[i].s, "presence-x", "{\"user_id\":\"u\"}");
        fake_flush(&s[i].s);
    }
    /* Nothing before the interval. */
    fake_hub_advance(&fh, 999);
    for (unsigned i = 0; i < 20; i++)
        assert_int_equal(fake_count(&s[i].s, "subscription_count"), 0);
    /* One event for 20 subscriptions, with the hub-wide count, to each
     * subscriber on both loops; none on the presence channel. */
    fake_hub_advance(&fh, 20);
    fake_hub_drain(&fh);
    for (unsigned i = 0; i < 20; i++) {
        assert_int_equal(fake_count(&s[i].s, "subscription_count"), 1);
        assert_int_equal(fake_count(&s[i].s,
                                    "{\\\"subscription_count\\\":20}"), 1);
        fake_flush(&s[i].s);
    }
    for (unsigned i = 0; i < 2; i++)
        counted += HUB_STAT_GET(fh.loops[i]->stats.subscription_count_events);
    assert_int_equal(counted, 1);
    /* Leaves count too, coalesced the same way. */
    for (unsigned i = 10; i < 20; i++)
        hub_session_fini(&s[i].s, HUB_CLOSE_PEER);
    /* Changes from both loops, inside the interval after the last send:
     * nothing until that interval is over, then one event. */
    fake_hub_advance(&fh, 900);
    fake_hub_drain(&fh);
    for (unsigned i = 0; i < 10; i++)
        assert_int_equal(fake_count(&s[i].s, "subscription_count"), 0);
    fake_hub_advance(&fh, 110);
    fake_hub_drain(&fh);
    for (unsigned i = 0; i < 10; i++)
        assert_int_equal(fake_count(&s[i].s,
                                    "{\\\"subscription_count\\\":10}"), 1);
    /* The other app has it off. */
    {
        struct fake_session o;

        assert_int_equal(fake_session_open(&fh, &o, 0, &fh.apps[1]), 0);
        fake_subscribe(&fh, &o.s, "room", NULL);
        fake_flush(&o.s);
        fake_hub_advance(&fh, 2000);
        fake_hub_drain(&fh);
        assert_int_equal(fake_count(&o.s, "subscription_count"), 0);
        hub_session_fini(&o.s, HUB_CLOSE_PEER);
    }
    /* A change still pending when the loops go is freed with them. */
    hub_session_fini(&s[9].s, HUB_CLOSE_PEER);
    for (unsigned i = 0; i < 9; i++)
        hub_session_fini(&s[i].s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* A cache store that cannot allocate is counted; the loop's counters say
 * which way each run went. */
static void test_cache_published_out_of_memory(void **state)
{
    struct fake_hub fh;
    struct hub_frame *f;

    (void)state;
    start(&fh);
    f = hub_proto_event_frame("st", "cache-x", "\"v\"", 3, NULL);
    assert_non_null(f);
    FAIL_ALLOC_COUNTDOWN(
        {
            hub_chanhooks_published(fh.loops[0], &fh.apps[0], "cache-x", 7,
                                    f);
        },
        {
            struct hub_loop_stats *st = &fh.loops[0]->stats;

            assert_int_equal(HUB_STAT_GET(st->cache_nomem) +
                                 HUB_STAT_GET(st->cache_stores),
                             (uint64_t)fa_step + 1);
            assert_int_equal(HUB_STAT_GET(st->cache_nomem), fa_failed ? fa_step + 1 : fa_step);
            assert_int_equal(hub_cache_check(hub_cache_of(fh.hub)), 0);
        });
    hub_frame_unref(f);
    fake_hub_stop(&fh);
}

static void test_cache_subcount_frame(void **state)
{
    struct hub_frame *f = hub_subcount_frame("room", 42);
    char text[128];

    (void)state;
    assert_non_null(f);
    memcpy(text, hub_frame_payload(f), f->payload_len);
    text[f->payload_len] = '\0';
    assert_string_equal(text,
                        "{\"event\":\"pusher_internal:subscription_count\","
                        "\"channel\":\"room\",\"data\":"
                        "\"{\\\"subscription_count\\\":42}\"}");
    hub_frame_unref(f);
}

static void test_cache_subcount_out_of_memory(void **state)
{
    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            struct fake_hub fh;
            static struct fake_session a;

            fail_alloc_off();
            start(&fh);
            assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
            fail_alloc_after(fa_step);
            fake_recv(&fh, &a.s, "{\"event\":\"pusher:subscribe\","
                                 "\"data\":{\"channel\":\"room\"}}");
            fake_hub_advance(&fh, 1001);
            fail_alloc_off();
            hub_session_fini(&a.s, HUB_CLOSE_PEER);
            fake_hub_stop(&fh);
        },
        { assert_int_equal(fail_alloc_live(), fa_live_before); });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_channel_names),
        cmocka_unit_test(test_cache_store_get_replace_expire),
        cmocka_unit_test(test_cache_reclaim_stops_at_first_live),
        cmocka_unit_test(test_cache_cap_evicts_oldest_and_refuses_oversize),
        cmocka_unit_test(test_cache_out_of_memory),
        cmocka_unit_test(test_cache_channel_first_event),
        cmocka_unit_test(test_cache_subcount_coalesced),
        cmocka_unit_test(test_cache_published_out_of_memory),
        cmocka_unit_test(test_cache_subcount_frame),
        cmocka_unit_test(test_cache_subcount_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
