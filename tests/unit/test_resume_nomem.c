/*
 * tests/unit/test_resume_nomem.c - recovery under failing allocations
 * (fail_alloc.h): a resumed subscription with a replay, live frames held
 * behind it, the drain, the guard's end and the session's end, each
 * allocation failing in turn (the history store, the pair frames, the
 * resume table and guard, the protocol's state), leave nothing allocated
 * and every frame released once the hub is gone.
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
#include "hub/channel/history.h"
#include "hub/loop/compress.h"
#include "hub/loop/resume.h"
#include "hub/wire/protocol.h"

static void start(struct fake_hub *fh, bool compress)
{
    fake_hub_init(fh, 2);
    fh->cfg.max_queue = 4096;
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

/* Publish a 200-byte event on c from loop 0; its seq (0: none). */
static uint64_t publish(struct fake_hub *fh)
{
    char data[256];
    struct hub_frame *f;
    uint64_t seq = 0;

    memset(data, 'y', 202);
    data[0] = data[201] = '"';
    f = hub_proto_event_frame("e", "c", data, 202, NULL);
    if (f) {
        const struct hub_pub_req r = { 0, "c", 1, f, NULL, false, NULL };

        (void)hub_history_publish(hub_history_of(fh->hub), fh->loops[0],
                                  &fh->apps[0], &r, false);
        seq = f->hseq;
        hub_frame_unref(f);
    }
    fake_hub_drain(fh);
    return seq;
}

static void run(bool compress, long step)
{
    struct fake_hub fh;
    static struct fake_session b;
    char text[256];
    uint64_t s1;

    fail_alloc_off();
    start(&fh, compress);
    s1 = publish(&fh);
    for (int i = 0; i < 9; i++)
        publish(&fh);
    assert_int_equal(fake_session_open(&fh, &b, 1, &fh.apps[0]), 0);
    if (compress)
        hub_session_set_pmd(&b.s);
    fake_flush(&b.s);
    snprintf(text, sizeof(text),
             "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,\"away_ms\":0,"
             "\"channels\":{\"c\":{\"%s\":%llu}}}}",
             hub_history_origin(hub_history_of(fh.hub)),
             (unsigned long long)s1);
    fail_alloc_after(step);
    fake_recv(&fh, &b.s, text);
    /* Not fake_subscribe(): its own JSON would fail to allocate. */
    fake_recv(&fh, &b.s,
              "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"c\"}}");
    publish(&fh);
    publish(&fh);
    fake_flush(&b.s);
    publish(&fh);
    fake_flush(&b.s);
    if (!fail_alloc_hits()) {
        /* The whole run: 9 replayed, 2 held, then the guard's end. */
        assert_int_equal(HUB_STAT_GET(fh.loops[1]->stats.replayed_events), 9);
        assert_false(b.s.rguard);
        assert_true(b.s.resume);
    }
    fail_alloc_off();
    assert_int_equal(hub_history_check(hub_history_of(fh.hub)), 0);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_resume_nomem_no_leak(void **state)
{
    (void)state;
    FAIL_ALLOC_COUNTDOWN({ run(false, fa_step); },
                         { assert_int_equal(fail_alloc_live(),
                                            fa_live_before); });
}

static void test_resume_nomem_compressed_no_leak(void **state)
{
    (void)state;
    FAIL_ALLOC_COUNTDOWN({ run(true, fa_step); },
                         { assert_int_equal(fail_alloc_live(),
                                            fa_live_before); });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_nomem_no_leak),
        cmocka_unit_test(test_resume_nomem_compressed_no_leak),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
