/*
 * tests/unit/test_feature.c - the table of feature hooks (hub/loop/feature.h)
 * as the core walks it: hub and loop init in the table's order, fini in the
 * reverse; a failed init undoes the ones that ran and fails the creation;
 * each feature finds its own state by its descriptor (NULL for one the hub
 * was not built with); the heartbeat runs each beat hook once a run on
 * every loop; every publication entering the loops reaches the published
 * hook; and the composition root (hub/hub.h) builds a hub with its
 * features.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/channel/cache.h"
#include "hub/channel/online.h"
#include "hub/loop/directory.h"

/* What the recording features saw, in order: "<event><feature>" items. */
static char trail[512];
static int fail_hub_init = -1;  /* feature index whose hub_init fails */
static int fail_loop_init = -1; /* feature index whose loop_init fails */
static unsigned beats[2][4];    /* [feature][loop id] */
static unsigned published[2];
static int hub_states[2], loop_states[2][4];

static void note(const char *what, int f, int loop)
{
    char item[16];

    if (loop >= 0)
        snprintf(item, sizeof(item), "%s%d.%d ", what, f, loop);
    else
        snprintf(item, sizeof(item), "%s%d ", what, f);
    strncat(trail, item, sizeof(trail) - strlen(trail) - 1);
}

#define RECORDER(N)                                                          \
    static int hub_init_##N(struct hub *h, void **state)                     \
    {                                                                        \
        (void)h;                                                             \
        note("hi", N, -1);                                                   \
        if (fail_hub_init == N)                                              \
            return -ENOMEM;                                                  \
        *state = &hub_states[N];                                             \
        return 0;                                                            \
    }                                                                        \
    static void hub_fini_##N(struct hub *h, void *state)                     \
    {                                                                        \
        (void)h;                                                             \
        assert_ptr_equal(state, &hub_states[N]);                             \
        note("hf", N, -1);                                                   \
    }                                                                        \
    static int loop_init_##N(struct hub_loop *l, void **state)               \
    {                                                                        \
        note("li", N, (int)l->id);                                           \
        if (fail_loop_init == N)                                             \
            return -ENOMEM;                                                  \
        *state = &loop_states[N][l->id];                                     \
        return 0;                                                            \
    }                                                                        \
    static void loop_fini_##N(struct hub_loop *l, void *state)               \
    {                                                                        \
        assert_ptr_equal(state, &loop_states[N][l->id]);                     \
        note("lf", N, (int)l->id);                                           \
    }                                                                        \
    static void beat_##N(struct hub_loop *l, uint64_t now_ms)                \
    {                                                                        \
        (void)now_ms;                                                        \
        beats[N][l->id]++;                                                   \
    }                                                                        \
    static void published_##N(struct hub *h, const struct hub_pub_req *r)   \
    {                                                                        \
        (void)h;                                                             \
        assert_int_equal(r->len, 4);                                         \
        published[N]++;                                                      \
    }                                                                        \
    static const struct hub_feature feature_##N = {                          \
        .name = "recorder" #N,                                               \
        .hub_init = hub_init_##N,                                            \
        .hub_fini = hub_fini_##N,                                            \
        .loop_init = loop_init_##N,                                          \
        .loop_fini = loop_fini_##N,                                          \
        .beat = beat_##N,                                                    \
        .published = published_##N,                                          \
    };

RECORDER(0)
RECORDER(1)

static const struct hub_feature unused = { .name = "unused" };

static const struct hub_feature *const table[] = { &feature_0, &feature_1 };

static void reset(void)
{
    trail[0] = '\0';
    fail_hub_init = fail_loop_init = -1;
    memset(beats, 0, sizeof(beats));
    memset(published, 0, sizeof(published));
}

/* A hub of the two recorders on the in-process backplane (NULL when the
 * creation failed; the backplane is then freed here). */
static struct hub *core_hub(struct fake_hub *fh)
{
    struct hub_backplane bp;
    struct hub *h;

    assert_int_equal(hub_backplane_local(&bp), 0);
    h = hub_create_core(&fh->cfg, &fh->clock, &bp, table, 2);
    if (!h)
        hub_directory_destroy(bp.dir_impl);
    return h;
}

static void test_feature_hooks_run_in_order_and_end_in_reverse(void **state)
{
    struct fake_hub fh;

    (void)state;
    reset();
    fake_hub_init(&fh, 2);
    fh.hub = core_hub(&fh);
    assert_non_null(fh.hub);
    assert_int_equal(fake_hub_loops_start(&fh), 0);
    assert_string_equal(trail, "hi0 hi1 li0.0 li1.0 li0.1 li1.1 ");
    trail[0] = '\0';
    fake_hub_stop(&fh);
    assert_string_equal(trail, "lf1.0 lf0.0 lf1.1 lf0.1 hf1 hf0 ");
}

static void test_feature_state_is_found_by_its_descriptor(void **state)
{
    struct fake_hub fh;

    (void)state;
    reset();
    fake_hub_init(&fh, 2);
    fh.hub = core_hub(&fh);
    assert_non_null(fh.hub);
    assert_int_equal(fake_hub_loops_start(&fh), 0);
    assert_ptr_equal(hub_feature_state(fh.hub, &feature_0), &hub_states[0]);
    assert_ptr_equal(hub_feature_state(fh.hub, &feature_1), &hub_states[1]);
    assert_null(hub_feature_state(fh.hub, &unused));
    assert_ptr_equal(hub_loop_feature_state(fh.loops[1], &feature_0),
                     &loop_states[0][1]);
    assert_null(hub_loop_feature_state(fh.loops[0], &unused));
    /* Built without the cache feature: no store, "off". */
    assert_null(hub_cache_of(fh.hub));
    fake_hub_stop(&fh);
}

static void test_feature_failed_hub_init_undoes_the_ones_before(void **state)
{
    struct fake_hub fh;

    (void)state;
    reset();
    fail_hub_init = 1;
    fake_hub_init(&fh, 1);
    assert_null(core_hub(&fh));
    assert_string_equal(trail, "hi0 hi1 hf0 ");
}

static void test_feature_failed_loop_init_fails_the_loop(void **state)
{
    struct fake_hub fh;

    (void)state;
    reset();
    fake_hub_init(&fh, 1);
    fh.hub = core_hub(&fh);
    assert_non_null(fh.hub);
    fail_loop_init = 1;
    assert_null(hub_loop_create(fh.hub, &fake_ops, fake_wake, &fh,
                                fake_now_ms(&fh)));
    assert_int_equal(fh.hub->n_loops, 0);
    assert_string_equal(trail, "hi0 hi1 li0.0 li1.0 lf0.0 ");
    fail_loop_init = -1;
    trail[0] = '\0';
    hub_destroy(fh.hub);
    assert_string_equal(trail, "hf1 hf0 ");
}

static void test_feature_beat_and_published_hooks_run(void **state)
{
    struct fake_hub fh;
    struct hub_frame *f;
    const struct hub_pub_req r = { 0, "room", 4, NULL, NULL, false, NULL };
    struct hub_pub_req rr = r;

    (void)state;
    reset();
    fake_hub_init(&fh, 2);
    fh.hub = core_hub(&fh);
    assert_non_null(fh.hub);
    assert_int_equal(fake_hub_loops_start(&fh), 0);
    /* The heartbeat runs every 1 s here (a fifth of 25 s, at most 1 s):
     * each run starts with every beat hook, on every loop. */
    fake_hub_advance(&fh, 1000);
    fake_hub_advance(&fh, 1000);
    for (unsigned n = 0; n < 2; n++)
        for (unsigned l = 0; l < 2; l++)
            assert_int_equal(beats[n][l], 2);
    f = hub_frame_create_text("{}", 2);
    assert_non_null(f);
    rr.f = f;
    assert_int_equal(hub_fanout_loops(fh.hub, fh.loops[0], &rr), 0);
    assert_int_equal(published[0], 1);
    assert_int_equal(published[1], 1);
    hub_frame_unref(f);
    fake_hub_drain(&fh);
    fake_hub_stop(&fh);
}

static void test_feature_composition_root_builds_the_features(void **state)
{
    struct fake_hub fh;

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_non_null(hub_cache_of(fh.hub));
    assert_non_null(hub_online_of(fh.hub));
    assert_null(hub_feature_state(fh.hub, &feature_0));
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_feature_hooks_run_in_order_and_end_in_reverse),
        cmocka_unit_test(test_feature_state_is_found_by_its_descriptor),
        cmocka_unit_test(test_feature_failed_hub_init_undoes_the_ones_before),
        cmocka_unit_test(test_feature_failed_loop_init_fails_the_loop),
        cmocka_unit_test(test_feature_beat_and_published_hooks_run),
        cmocka_unit_test(test_feature_composition_root_builds_the_features),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
