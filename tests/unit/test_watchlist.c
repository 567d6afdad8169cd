/*
 * tests/unit/test_watchlist.c - watchlists and authorized connections on a
 * two-loop fake hub (hub/pusher/watchlist.c, the signin deadline of
 * hub/loop/session.c), with the failing allocator:
 *  - the signin deadline: closed 4009 at connected + timeout, not a tick
 *    before; a session signed in in time is left alone (and, with no other
 *    deadline, its deadline entry is stopped); a session gone before its
 *    deadline leaves nothing armed;
 *  - a watcher's signin with a watchlist, every allocation failing in
 *    turn: as the clean run, or the signin stands with the watchlist
 *    refused (pusher:error) or its initial event counted as dropped, or
 *    the session closed 4009; never a half-registered user;
 *  - the watched user's end under the same countdown: the watcher hears
 *    offline, or the loss is counted; the registry is empty after.
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

#include "fail_alloc.h"
#include "fake_hub.h"
#include "hub/channel/online.h"

static uint64_t stat_sum(struct fake_hub *fh, size_t off)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < fh->n_loops; i++)
        n += *(uint64_t *)((char *)&fh->loops[i]->stats + off);
    return n;
}

#define STAT(fh, field) stat_sum((fh), offsetof(struct hub_loop_stats, field))

static void test_watchlist_signin_deadline(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, c, d, e;

    (void)state;
    fake_hub_init(&fh, 2);
    fh.apps[0].enable_user_authentication = true;
    fh.apps[0].user_auth_timeout_ms = 1000;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &b, 1, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &c, 1, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &d, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &e, 0, &fh.apps[0]), 0);
    /* Pusher's rule: a private (or presence) subscription authorizes as
     * well as a signin; a public one does not. */
    fake_subscribe(&fh, &d.s, "private-p", NULL);
    assert_true(d.s.authorized);
    assert_false(hub_timer_is_armed(&d.s.deadline_timer));
    fake_subscribe(&fh, &e.s, "news", NULL);
    assert_false(e.s.authorized);
    /* Another app's session: no deadline at all (idle_timeout is 0). */
    {
        struct fake_session o;

        assert_int_equal(fake_session_open(&fh, &o, 0, &fh.apps[1]), 0);
        assert_false(hub_timer_is_armed(&o.s.deadline_timer));
        hub_session_fini(&o.s, HUB_CLOSE_PEER);
    }
    assert_true(hub_timer_is_armed(&a.s.deadline_timer));
    fake_flush(&a.s);
    fake_flush(&b.s);
    /* b signs in: its entry has nothing left to wait for. */
    fake_signin(&fh, &b.s, "{\"id\":\"u\"}");
    assert_non_null(b.s.user_id);
    assert_false(hub_timer_is_armed(&b.s.deadline_timer));
    /* c goes before its deadline. */
    hub_session_fini(&c.s, HUB_CLOSE_PEER);
    fake_hub_advance(&fh, 990);
    assert_int_equal(a.s.state, HUB_SESSION_OPEN);
    fake_hub_advance(&fh, 30);
    assert_int_equal(a.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(a.s.close_code, 4009);
    assert_true(fake_find(&a.s, "not authorized within timeout") >= 0);
    assert_int_equal(b.s.state, HUB_SESSION_OPEN);
    assert_int_equal(d.s.state, HUB_SESSION_OPEN);
    assert_int_equal(e.s.close_code, 4009);
    assert_int_equal(STAT(&fh, unauthorized_closes), 2);
    fake_hub_advance(&fh, 5000);
    assert_int_equal(b.s.state, HUB_SESSION_OPEN);
    assert_int_equal(d.s.state, HUB_SESSION_OPEN);
    assert_int_equal(STAT(&fh, unauthorized_closes), 2);
    hub_session_fini(&d.s, HUB_CLOSE_PEER);
    hub_session_fini(&e.s, HUB_CLOSE_APP);
    hub_session_fini(&a.s, HUB_CLOSE_APP);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    assert_int_equal(hub_online_records(hub_online_of(fh.hub)), 0);
    fake_hub_stop(&fh);
}

/* With idle_timeout on, the entry keeps the earlier of both deadlines. */
static void test_watchlist_signin_deadline_with_idle(void **state)
{
    struct fake_hub fh;
    struct fake_session a;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.cfg.idle_timeout_ms = 5000;
    fh.apps[0].enable_user_authentication = true;
    fh.apps[0].user_auth_timeout_ms = 2000;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(hub_timer_deadline_ms(&a.s.deadline_timer),
                     a.s.connected_ms + 2000);
    fake_hub_advance(&fh, 2100);
    assert_int_equal(a.s.close_code, 4009);
    hub_session_fini(&a.s, HUB_CLOSE_APP);
    fake_hub_stop(&fh);
}

#define WATCHER_UD "{\"id\":\"w\",\"watchlist\":[\"x\",\"y\"]}"

struct world {
    struct fake_hub fh;
    struct fake_session a, b;  /* a: watcher w on loop 0; b: x on loop 1 */
};

static void world_start(struct world *w)
{
    fake_hub_init(&w->fh, 2);
    assert_int_equal(fake_hub_start(&w->fh), 0);
    assert_int_equal(fake_session_open(&w->fh, &w->a, 0, &w->fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&w->fh, &w->b, 1, &w->fh.apps[0]), 0);
    fake_signin(&w->fh, &w->b.s, "{\"id\":\"x\"}");
    fake_hub_drain(&w->fh);
    fake_flush(&w->a.s);
    fake_flush(&w->b.s);
}

/* The text of a signin of s as ud (allocates: build it before arming). */
static char *signin_text(const struct hub_session *s, const char *ud)
{
    char *text = fake_signin_text(s, ud);

    assert_non_null(text);
    return text;
}

static void world_stop(struct world *w)
{
    hub_session_fini(&w->a.s, HUB_CLOSE_PEER);
    hub_session_fini(&w->b.s, HUB_CLOSE_PEER);
    fake_hub_drain(&w->fh);
    assert_int_equal(hub_online_records(hub_online_of(w->fh.hub)), 0);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(hub_chanmap_count(w->fh.loops[i]->chans), 0);
    fake_hub_stop(&w->fh);
}

static void test_watchlist_watcher_signin_nomem(void **state)
{
    struct world w;
    long live = fail_alloc_live(), clean = 0, refused = 0, dropped = 0;
    long closed = 0;
    char *text = NULL;

    (void)state;
    /* The clean run. */
    world_start(&w);
    fake_signin(&w.fh, &w.a.s, WATCHER_UD);
    assert_int_equal(w.a.s.q.count, 2);
    assert_true(fake_find(&w.a.s, "signin_success") == 0);
    assert_true(fake_find(&w.a.s, "watchlist_events") == 1);
    assert_true(fake_find(&w.a.s, "\\\"user_ids\\\":[\\\"x\\\"]") == 1);
    assert_int_equal(hub_online_check(hub_online_of(w.fh.hub)), 0);
    world_stop(&w);
    assert_int_equal(fail_alloc_live(), live);

    FAIL_ALLOC_COUNTDOWN(
        {
            fail_alloc_off();
            world_start(&w);
            text = signin_text(&w.a.s, WATCHER_UD);
            fail_alloc_after(fa_step);
            fake_recv(&w.fh, &w.a.s, text);
            fake_hub_drain(&w.fh);
        },
        {
            struct hub_online *o = hub_online_of(w.fh.hub);
            bool open = w.a.s.state == HUB_SESSION_OPEN;
            bool ok = fake_find(&w.a.s, "signin_success") >= 0;
            bool ev = fake_find(&w.a.s, "watchlist_events") >= 0;
            bool err = fake_find(&w.a.s, "Watchlist ignored") >= 0;

            assert_int_equal(hub_online_check(o), 0);
            if (open && ok && ev && !err) {
                clean++;
            } else if (!fa_failed) {
                fail_msg("the run without a failure differs");
            } else if (!open) {
                /* 4009: the signin failed; 1011: no memory for an error. */
                assert_true(w.a.s.close_code == 4009 ||
                            w.a.s.close_code == 1011);
                assert_int_equal(hub_online_conns(o, 0, "w"), 0);
                closed++;
            } else if (ok && err) {
                /* Signed in and online, watching nothing. */
                assert_int_equal(hub_online_conns(o, 0, "w"), 1);
                assert_false(ev);
                refused++;
            } else if (ok) {
                assert_int_equal(STAT(&w.fh, watchlist_events_dropped), 1);
                dropped++;
            } else {
                /* Refused before the signin took (a parse or signature
                 * allocation): nothing registered. */
                assert_int_equal(hub_online_conns(o, 0, "w"), 0);
                refused++;
            }
            assert_int_equal(w.b.s.q.count, 0); /* w is watched by none */
            free(text);
            world_stop(&w);
            if (fail_alloc_live() != live)
                fail_msg("allocation %ld failed: %ld blocks left", fa_step,
                         fail_alloc_live() - live);
        });
    print_message("watcher signin: %ld clean, %ld refused, %ld dropped, "
                  "%ld closed\n", clean, refused, dropped, closed);
    assert_true(refused + dropped + closed >= 1);
}

/* x's session ends, every allocation of its fini failing in turn: w hears
 * offline, or the loss is counted; x is offline either way. */
static void test_watchlist_watched_fini_nomem(void **state)
{
    struct world w;
    long live = fail_alloc_live(), heard = 0, lost = 0;

    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            fail_alloc_off();
            world_start(&w);
            fake_signin(&w.fh, &w.a.s, WATCHER_UD);
            fake_flush(&w.a.s);
            fail_alloc_after(fa_step);
            hub_session_fini(&w.b.s, HUB_CLOSE_PEER);
            fake_hub_drain(&w.fh);
        },
        {
            struct hub_online *o = hub_online_of(w.fh.hub);

            assert_int_equal(hub_online_conns(o, 0, "x"), 0);
            assert_int_equal(hub_online_check(o), 0);
            if (fake_find(&w.a.s, "\\\"offline\\\"") >= 0) {
                heard++;
            } else {
                if (!fa_failed)
                    fail_msg("the run without a failure differs");
                assert_int_equal(STAT(&w.fh, watchlist_events_dropped), 1);
                lost++;
            }
            world_stop(&w);
            if (fail_alloc_live() != live)
                fail_msg("allocation %ld failed: %ld blocks left", fa_step,
                         fail_alloc_live() - live);
        });
    print_message("watched fini: %ld heard, %ld lost\n", heard, lost);
    assert_true(lost >= 1);
}

/* watchlist_events off: the watchlist is ignored silently, nobody is
 * tracked. */
static void test_watchlist_events_off(void **state)
{
    struct fake_hub fh;
    struct fake_session a;

    (void)state;
    fake_hub_init(&fh, 1);
    fh.apps[0].watchlist_events = false;
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    fake_flush(&a.s);
    fake_signin(&fh, &a.s, "{\"id\":\"w\",\"watchlist\":7}");
    assert_int_equal(a.s.q.count, 1);
    assert_true(fake_find(&a.s, "signin_success") == 0);
    assert_int_equal(hub_online_records(hub_online_of(fh.hub)), 0);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watchlist_signin_deadline),
        cmocka_unit_test(test_watchlist_signin_deadline_with_idle),
        cmocka_unit_test(test_watchlist_watcher_signin_nomem),
        cmocka_unit_test(test_watchlist_watched_fini_nomem),
        cmocka_unit_test(test_watchlist_events_off),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
