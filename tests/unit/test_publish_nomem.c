/*
 * tests/unit/test_publish_nomem.c - hub_publish() to 3 loops under a
 * failing allocator (fail_alloc.h): allocation 0, 1, ... of a publish
 * fails in turn, from a loop (local delivery plus two inboxes) and from
 * outside every loop (three inboxes). A publish that returns -ENOMEM
 * reached no loop and left no block and no frame reference behind; one
 * that returns 0 reached every subscriber once. The same for
 * hub_terminate_user() to a user signed in on all 3 loops: -ENOMEM closed
 * no session; 0 closed every one of them with 4009.
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

#define LOOPS 3

static void publish_countdown(bool from_loop)
{
    static const char text[] =
        "{\"event\":\"e\",\"channel\":\"news\",\"data\":\"1\"}";
    struct fake_hub fh;
    struct fake_session fs[LOOPS];
    struct hub_frame *f;
    unsigned runs = 0, refused = 0;
    int rc = 0;

    fake_hub_init(&fh, LOOPS);
    assert_int_equal(fake_hub_start(&fh), 0);
    for (unsigned i = 0; i < LOOPS; i++) {
        assert_int_equal(fake_session_open(&fh, &fs[i], i, &fh.apps[0]), 0);
        fake_subscribe(&fh, &fs[i].s, "news", NULL);
        assert_int_equal(fake_count(&fs[i].s, "subscription_succeeded"), 1);
        fake_flush(&fs[i].s);
    }
    f = hub_frame_create_text(text, strlen(text));
    assert_non_null(f);
    FAIL_ALLOC_COUNTDOWN(
        {
            rc = hub_publish(fh.hub, from_loop ? fh.loops[0] : NULL, 0,
                             "news", 4, f, NULL);
            fake_hub_drain(&fh);
            runs++;
        },
        {
            if (rc) {
                assert_int_equal(rc, -ENOMEM);
                assert_true(fa_failed);
                refused++;
            }
            for (unsigned i = 0; i < LOOPS; i++) {
                assert_int_equal(fs[i].s.q.count, rc ? 0 : 1);
                assert_int_equal(fs[i].s.state, HUB_SESSION_OPEN);
                fake_flush(&fs[i].s);
            }
            /* Only the caller's reference is left, and nothing else. */
            assert_int_equal(atomic_load(&f->refs), 1);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    /* The fan-out allocates (the inbox nodes): that failure was seen. */
    assert_true(refused >= 1);
    assert_int_equal(refused, runs - 1);
    hub_frame_unref(f);
    for (unsigned i = 0; i < LOOPS; i++)
        hub_session_fini(&fs[i].s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_publish_nomem_from_a_loop(void **state)
{
    (void)state;
    publish_countdown(true);
}

static void test_publish_nomem_from_outside(void **state)
{
    (void)state;
    publish_countdown(false);
}

/* A user signed in on every loop (allocator disarmed). */
static void signed_in_hub(struct fake_hub *fh, struct fake_session *fs)
{
    fake_hub_init(fh, LOOPS);
    assert_int_equal(fake_hub_start(fh), 0);
    for (unsigned i = 0; i < LOOPS; i++) {
        assert_int_equal(fake_session_open(fh, &fs[i], i, &fh->apps[0]), 0);
        fake_signin(fh, &fs[i].s, "{\"id\":\"42\"}");
        assert_int_equal(fake_count(&fs[i].s, "pusher:signin_success"), 1);
        fake_flush(&fs[i].s);
    }
}

static void terminate_countdown(bool from_loop)
{
    struct fake_hub fh;
    struct fake_session fs[LOOPS];
    unsigned refused = 0;
    long live = fail_alloc_live();
    int rc = 0;

    /* Each run on a fresh hub: a run that closes the sessions uses them
     * up. Only the terminate itself runs with the allocator armed. */
    FAIL_ALLOC_COUNTDOWN(
        {
            fail_alloc_off();
            signed_in_hub(&fh, fs);
            fail_alloc_after(fa_step);
            rc = hub_terminate_user(fh.hub, from_loop ? fh.loops[0] : NULL,
                                    0, "42");
            fake_hub_drain(&fh);
        },
        {
            if (rc) {
                assert_int_equal(rc, -ENOMEM);
                assert_true(fa_failed);
                refused++;
            }
            /* -ENOMEM: nobody closed. 0: everyone closed with 4009, even
             * when a later allocation (the error frame) failed. */
            for (unsigned i = 0; i < LOOPS; i++) {
                if (fs[i].s.state !=
                    (rc ? HUB_SESSION_OPEN : HUB_SESSION_CLOSING))
                    fail_msg("allocation %ld failed: rc %d, loop %u in "
                             "state %d", fa_step, rc, i, fs[i].s.state);
                if (!rc)
                    assert_int_equal(fs[i].s.close_code, 4009);
                hub_session_fini(&fs[i].s, HUB_CLOSE_PEER);
            }
            fake_hub_stop(&fh);
            assert_int_equal(fail_alloc_live(), live);
        });
    assert_true(refused >= 1);
}

static void test_publish_nomem_terminate_from_a_loop(void **state)
{
    (void)state;
    terminate_countdown(true);
}

static void test_publish_nomem_terminate_from_outside(void **state)
{
    (void)state;
    terminate_countdown(false);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_publish_nomem_from_a_loop),
        T(test_publish_nomem_from_outside),
        T(test_publish_nomem_terminate_from_a_loop),
        T(test_publish_nomem_terminate_from_outside),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
