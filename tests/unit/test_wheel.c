/*
 * tests/unit/test_wheel.c - the hashed timing wheel of timer/wheel.h.
 *
 * Time is driven by hand: advance() gets whatever now_ms a test chooses, and
 * the stats clock is a fake one. hub_wheel_check() runs after every
 * mutation. The last case is a randomized model test that checks the wheel
 * against an array of expected deadlines. Single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "timer/list.h"
#include "timer/wheel.h"

#define CHECK(w) assert_int_equal(hub_wheel_check(w), 0)

/* A test entry: the wheel entry plus what its callback saw. */
struct probe {
    struct hub_timer timer;
    int id;
    unsigned fired;
    uint64_t fired_at;
    uint64_t deadline_at_fire;
};

/* What the callbacks of the current test may do, and what they recorded. */
static struct {
    struct hub_wheel *w;
    int order[64];
    unsigned norder;
    /* Actions of probe_action_cb, keyed by the firing probe's id. */
    struct probe *stop_other;
    struct probe *arm_other;
    int64_t arm_delay;
    bool restart_self;
    int64_t self_delay;
    uint64_t *fake_ns;
} ctx;

static void probe_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct probe *p = hub_container_of(t, struct probe, timer);

    assert_false(hub_timer_is_armed(t));
    assert_true(now_ms >= hub_timer_deadline_ms(t));
    p->fired++;
    p->fired_at = now_ms;
    p->deadline_at_fire = hub_timer_deadline_ms(t);
    if (ctx.norder < 64)
        ctx.order[ctx.norder++] = p->id;
    if (ctx.fake_ns)
        *ctx.fake_ns += 1000;
}

static void probe_init(struct probe *p, int id)
{
    memset(p, 0, sizeof(*p));
    p->id = id;
    hub_timer_init(&p->timer, probe_cb);
}

static int setup(void **state)
{
    (void)state;
    memset(&ctx, 0, sizeof(ctx));
    return 0;
}

static void test_wheel_create_rejects_bad_args(void **state)
{
    struct hub_wheel *w;

    (void)state;
    assert_null(hub_wheel_create(3, 100, 0));
    assert_null(hub_wheel_create(25, 100, 0));
    w = hub_wheel_create(0, 0, 12345);
    assert_non_null(w);
    assert_int_equal(hub_wheel_tick_ms(w), 100);
    assert_int_equal(hub_wheel_pending(w), 0);
    CHECK(w);
    hub_wheel_destroy(w);
    w = hub_wheel_create(4, 7, 0);
    assert_non_null(w);
    assert_int_equal(hub_wheel_tick_ms(w), 7);
    CHECK(w);
    hub_wheel_destroy(w);
}

static void test_wheel_fires_at_deadline(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 1000);
    struct probe p;

    (void)state;
    probe_init(&p, 1);
    assert_int_equal(hub_wheel_start(w, &p.timer, 1000, 250), 0);
    CHECK(w);
    assert_true(hub_timer_is_armed(&p.timer));
    assert_int_equal(hub_timer_deadline_ms(&p.timer), 1250);
    /* Due at the boundary after the deadline: 1300. */
    assert_int_equal(hub_wheel_advance(w, 1200), 0);
    assert_int_equal(hub_wheel_advance(w, 1299), 0);
    CHECK(w);
    assert_int_equal(p.fired, 0);
    assert_int_equal(hub_wheel_advance(w, 1300), 1);
    CHECK(w);
    assert_int_equal(p.fired, 1);
    assert_int_equal(p.fired_at, 1300);
    assert_false(hub_timer_is_armed(&p.timer));
    assert_int_equal(hub_wheel_advance(w, 5000), 0);
    assert_int_equal(p.fired, 1);
    hub_wheel_destroy(w);
}

static void test_wheel_deadline_on_boundary_fires_there(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p;

    (void)state;
    probe_init(&p, 1);
    assert_int_equal(hub_wheel_start(w, &p.timer, 0, 300), 0);
    assert_int_equal(hub_wheel_advance(w, 299), 0);
    assert_int_equal(hub_wheel_advance(w, 300), 1);
    assert_int_equal(p.fired_at, 300);
    CHECK(w);
    hub_wheel_destroy(w);
}

/* Advance every millisecond: nothing fires early, nothing a tick late. */
static void test_wheel_never_fires_early(void **state)
{
    enum { N = 500 };
    struct hub_wheel *w = hub_wheel_create(6, 10, 3);
    struct probe *p = calloc(N, sizeof(*p));

    (void)state;
    assert_non_null(p);
    for (int i = 0; i < N; i++) {
        probe_init(&p[i], i);
        assert_int_equal(hub_wheel_start(w, &p[i].timer, 3, i * 7 % 1500),
                         0);
    }
    CHECK(w);
    for (uint64_t now = 3; now <= 1600; now++) {
        hub_wheel_advance(w, now);
        for (int i = 0; i < N; i++) {
            uint64_t dl = 3 + (uint64_t)(i * 7 % 1500);

            if (p[i].fired) {
                assert_true(p[i].fired_at >= dl);
                assert_true(p[i].fired_at - dl < 10);
            } else {
                /* Still pending means the deadline's boundary is ahead. */
                assert_true(dl > now - now % 10);
            }
        }
    }
    CHECK(w);
    for (int i = 0; i < N; i++)
        assert_int_equal(p[i].fired, 1);
    assert_int_equal(hub_wheel_pending(w), 0);
    hub_wheel_destroy(w);
    free(p);
}

/* Advance once per tick, at each boundary: lateness stays under a tick. */
static void test_wheel_lateness_bounded_by_one_tick(void **state)
{
    enum { N = 1000 };
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe *p = calloc(N, sizeof(*p));
    struct hub_wheel_stats st;
    uint64_t sum = 0;

    (void)state;
    assert_non_null(p);
    srand(7);
    for (int i = 0; i < N; i++) {
        probe_init(&p[i], i);
        assert_int_equal(hub_wheel_start(w, &p[i].timer, 0, rand() % 60000),
                         0);
    }
    CHECK(w);
    for (uint64_t now = 100; now <= 60100; now += 100)
        hub_wheel_advance(w, now);
    CHECK(w);
    for (int i = 0; i < N; i++) {
        assert_int_equal(p[i].fired, 1);
        assert_true(p[i].fired_at - p[i].deadline_at_fire < 100);
    }
    hub_wheel_get_stats(w, &st);
    assert_true(st.max_lateness_ms < 100);
    assert_int_equal(st.late_hist[3], 0);
    assert_int_equal(st.late_hist[4], 0);
    for (int b = 0; b < 5; b++)
        sum += st.late_hist[b];
    assert_int_equal(sum, N);
    assert_int_equal(st.fired, N);
    hub_wheel_destroy(w);
    free(p);
}

static void test_wheel_deadlines_many_turns_ahead(void **state)
{
    /* 16 slots of 10 ms: one turn is 160 ms. */
    struct hub_wheel *w = hub_wheel_create(4, 10, 0);
    struct probe p[4];
    uint64_t delay[4] = { 165, 160 * 5 + 3, 160 * 37, 160 * 1000 + 159 };

    (void)state;
    for (int i = 0; i < 4; i++) {
        probe_init(&p[i], i);
        assert_int_equal(hub_wheel_start(w, &p[i].timer, 0,
                                         (int64_t)delay[i]),
                         0);
    }
    CHECK(w);
    for (uint64_t now = 10; now <= 160 * 1001; now += 10) {
        hub_wheel_advance(w, now);
        for (int i = 0; i < 4; i++) {
            if (now < delay[i])
                assert_int_equal(p[i].fired, 0);
            else if (now - delay[i] < 10)
                assert_int_equal(p[i].fired, 1);
        }
    }
    CHECK(w);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(p[i].fired, 1);
        assert_true(p[i].fired_at - delay[i] < 10);
    }
    hub_wheel_destroy(w);
}

/* One advance that jumps hours fires everything due, once, and no more. */
static void test_wheel_long_stall_fires_due_once(void **state)
{
    enum { N = 2000 };
    struct hub_wheel *w = hub_wheel_create(8, 100, 0);
    struct probe *p = calloc(N, sizeof(*p));
    const uint64_t jump = 5ull * 3600 * 1000;
    uint64_t due = 0;
    struct probe edge[3];

    (void)state;
    assert_non_null(p);
    srand(11);
    for (int i = 0; i < N; i++) {
        /* Up to ten hours out: about half fall due in the jump. */
        int64_t d = (int64_t)((uint64_t)rand() * 7919u % (10 * jump / 5));

        probe_init(&p[i], i);
        assert_int_equal(hub_wheel_start(w, &p[i].timer, 0, d), 0);
        if ((uint64_t)d <= jump)
            due++;
    }
    CHECK(w);
    /* Edges: a deadline one past the jump's boundary must wait. */
    probe_init(&edge[0], N);
    probe_init(&edge[1], N + 1);
    probe_init(&edge[2], N + 2);
    hub_wheel_start_at(w, &edge[0].timer, jump - 1);
    hub_wheel_start_at(w, &edge[1].timer, jump);
    hub_wheel_start_at(w, &edge[2].timer, jump + 1);
    CHECK(w);
    assert_int_equal(hub_wheel_advance(w, jump + 99), due + 2);
    assert_int_equal(edge[0].fired + edge[1].fired, 2);
    assert_int_equal(edge[2].fired, 0);
    hub_wheel_stop(w, &edge[2].timer);
    CHECK(w);
    for (int i = 0; i < N; i++) {
        uint64_t dl = hub_timer_deadline_ms(&p[i].timer);

        assert_int_equal(p[i].fired, dl <= jump ? 1 : 0);
        assert_int_equal(hub_timer_is_armed(&p[i].timer), dl > jump);
    }
    assert_int_equal(hub_wheel_pending(w), N - due);
    /* The rest fire later, each once. */
    assert_int_equal(hub_wheel_advance(w, 3 * jump), N - due);
    for (int i = 0; i < N; i++)
        assert_int_equal(p[i].fired, 1);
    CHECK(w);
    hub_wheel_destroy(w);
    free(p);
}

static void test_wheel_fires_in_deadline_order(void **state)
{
    struct hub_wheel *w = hub_wheel_create(4, 100, 0);
    struct probe p[8];
    /* Deadlines out of arming order, across ticks and turns; 3 ties. */
    uint64_t dl[8] = { 950, 120, 3001, 199, 120, 1650, 101, 120 };
    int want[8] = { 6, 1, 4, 7, 3, 0, 5, 2 };

    (void)state;
    ctx.w = w;
    for (int i = 0; i < 8; i++) {
        probe_init(&p[i], i);
        assert_int_equal(hub_wheel_start_at(w, &p[i].timer, dl[i]), 0);
        CHECK(w);
    }
    assert_int_equal(hub_wheel_advance(w, 5000), 8);
    CHECK(w);
    assert_int_equal(ctx.norder, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(ctx.order[i], want[i]);
    hub_wheel_destroy(w);
}

static void action_cb(struct hub_timer *t, uint64_t now_ms)
{
    probe_cb(t, now_ms);
    if (ctx.stop_other) {
        hub_wheel_stop(ctx.w, &ctx.stop_other->timer);
        CHECK(ctx.w);
    }
    if (ctx.arm_other) {
        assert_int_equal(hub_wheel_start(ctx.w, &ctx.arm_other->timer, now_ms,
                                         ctx.arm_delay),
                         0);
        CHECK(ctx.w);
    }
    if (ctx.restart_self) {
        assert_int_equal(hub_wheel_start(ctx.w, t, now_ms, ctx.self_delay), 0);
        CHECK(ctx.w);
    }
}

static void test_wheel_stop_self_in_callback_is_harmless(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p;
    struct hub_wheel_stats st;

    (void)state;
    ctx.w = w;
    probe_init(&p, 0);
    p.timer.hub__cb = action_cb;
    ctx.stop_other = &p;
    hub_wheel_start(w, &p.timer, 0, 100);
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    CHECK(w);
    hub_wheel_get_stats(w, &st);
    /* It was no longer armed, so the stop counts as nothing. */
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.pending, 0);
    hub_wheel_destroy(w);
}

static void test_wheel_restart_self_in_callback(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p;

    (void)state;
    ctx.w = w;
    probe_init(&p, 0);
    p.timer.hub__cb = action_cb;
    ctx.restart_self = true;
    ctx.self_delay = 200;
    hub_wheel_start(w, &p.timer, 0, 100);
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    CHECK(w);
    assert_true(hub_timer_is_armed(&p.timer));
    assert_int_equal(hub_timer_deadline_ms(&p.timer), 300);
    assert_int_equal(hub_wheel_advance(w, 299), 0);
    assert_int_equal(hub_wheel_advance(w, 300), 1);
    assert_int_equal(p.fired, 2);
    ctx.restart_self = false;
    hub_wheel_stop(w, &p.timer);
    CHECK(w);
    hub_wheel_destroy(w);
}

/* Re-armed in the past from its own callback: next advance, not this one. */
static void test_wheel_rearm_in_past_fires_next_advance(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p;

    (void)state;
    ctx.w = w;
    probe_init(&p, 0);
    p.timer.hub__cb = action_cb;
    ctx.restart_self = true;
    ctx.self_delay = 0;
    hub_wheel_start(w, &p.timer, 0, 50);
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    CHECK(w);
    assert_true(hub_timer_is_armed(&p.timer));
    assert_int_equal(hub_wheel_next_due_ms(w, 100), 0);
    /* Same now: still fires, once per advance. */
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    assert_int_equal(p.fired, 3);
    ctx.restart_self = false;
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    assert_int_equal(hub_wheel_advance(w, 100), 0);
    assert_int_equal(p.fired, 4);
    CHECK(w);
    hub_wheel_destroy(w);
}

/* An earlier callback stops a later entry of the same batch: it never runs. */
static void test_wheel_stop_collected_entry_in_callback(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe a, b, c;
    struct hub_wheel_stats st;

    (void)state;
    ctx.w = w;
    probe_init(&a, 0);
    probe_init(&b, 1);
    probe_init(&c, 2);
    a.timer.hub__cb = action_cb;
    ctx.stop_other = &b;
    hub_wheel_start(w, &a.timer, 0, 10);
    hub_wheel_start(w, &b.timer, 0, 20);
    hub_wheel_start(w, &c.timer, 0, 30);
    CHECK(w);
    assert_int_equal(hub_wheel_advance(w, 100), 2);
    CHECK(w);
    assert_int_equal(a.fired, 1);
    assert_int_equal(b.fired, 0);
    assert_int_equal(c.fired, 1);
    assert_false(hub_timer_is_armed(&b.timer));
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.fired, 2);
    assert_int_equal(st.pending, 0);
    hub_wheel_destroy(w);
}

/* A callback re-arms a later entry of its batch for the future. */
static void test_wheel_rearm_collected_entry_in_callback(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe a, b;

    (void)state;
    ctx.w = w;
    probe_init(&a, 0);
    probe_init(&b, 1);
    a.timer.hub__cb = action_cb;
    ctx.arm_other = &b;
    ctx.arm_delay = 500;
    hub_wheel_start(w, &a.timer, 0, 10);
    hub_wheel_start(w, &b.timer, 0, 20);
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    CHECK(w);
    assert_int_equal(b.fired, 0);
    assert_int_equal(hub_timer_deadline_ms(&b.timer), 600);
    assert_int_equal(hub_wheel_advance(w, 600), 1);
    assert_int_equal(b.fired, 1);
    CHECK(w);
    hub_wheel_destroy(w);
}

/* A callback arms another idle entry already due: next advance. */
static void test_wheel_arm_other_due_in_callback_waits(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe a, b;

    (void)state;
    ctx.w = w;
    probe_init(&a, 0);
    probe_init(&b, 1);
    a.timer.hub__cb = action_cb;
    ctx.arm_other = &b;
    ctx.arm_delay = 0;
    hub_wheel_start(w, &a.timer, 0, 10);
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    CHECK(w);
    assert_int_equal(b.fired, 0);
    assert_true(hub_timer_is_armed(&b.timer));
    ctx.arm_other = NULL;
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    assert_int_equal(b.fired, 1);
    CHECK(w);
    hub_wheel_destroy(w);
}

static void test_wheel_stop_after_fire_is_harmless(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p;
    struct hub_wheel_stats st;

    (void)state;
    probe_init(&p, 0);
    hub_wheel_start(w, &p.timer, 0, 100);
    hub_wheel_advance(w, 100);
    hub_wheel_stop(w, &p.timer);
    CHECK(w);
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.fired, 1);
    assert_int_equal(st.pending, 0);
    hub_wheel_destroy(w);
}

static void test_wheel_double_stop_is_harmless(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p, q;
    struct hub_wheel_stats st;

    (void)state;
    probe_init(&p, 0);
    probe_init(&q, 1);
    hub_wheel_stop(w, &p.timer);
    CHECK(w);
    hub_wheel_start(w, &p.timer, 0, 100);
    hub_wheel_start(w, &q.timer, 0, 100);
    hub_wheel_stop(w, &p.timer);
    CHECK(w);
    hub_wheel_stop(w, &p.timer);
    CHECK(w);
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.pending, 1);
    assert_int_equal(hub_wheel_advance(w, 1000), 1);
    assert_int_equal(p.fired, 0);
    assert_int_equal(q.fired, 1);
    hub_wheel_destroy(w);
}

static void test_wheel_rejects_bad_delay_unchanged(void **state)
{
    struct hub_wheel *w = hub_wheel_create(0, 100, 1000);
    struct probe idle, armed;

    (void)state;
    probe_init(&idle, 0);
    probe_init(&armed, 1);
    hub_wheel_start(w, &armed.timer, 1000, 500);
    assert_int_equal(hub_wheel_start(w, &idle.timer, 1000, -1), -EINVAL);
    assert_int_equal(hub_wheel_start(w, &idle.timer, 1000, INT64_MIN),
                     -EINVAL);
    assert_int_equal(hub_wheel_start(w, &idle.timer, 1000,
                                     (int64_t)HUB_WHEEL_MAX_DELAY_MS + 1),
                     -EINVAL);
    assert_int_equal(hub_wheel_start(w, &idle.timer, 1000, INT64_MAX),
                     -EINVAL);
    assert_int_equal(hub_wheel_start(w, &idle.timer, UINT64_MAX - 5, 10),
                     -EINVAL);
    assert_false(hub_timer_is_armed(&idle.timer));
    assert_int_equal(hub_wheel_start(w, &armed.timer, 1000, -5), -EINVAL);
    assert_int_equal(hub_wheel_start(w, &armed.timer, 1000,
                                     (int64_t)HUB_WHEEL_MAX_DELAY_MS + 1),
                     -EINVAL);
    assert_int_equal(hub_wheel_start_at(w, &armed.timer, UINT64_MAX), -EINVAL);
    assert_int_equal(hub_wheel_start_at(w, &armed.timer,
                                        1000 + HUB_WHEEL_MAX_DELAY_MS + 1),
                     -EINVAL);
    assert_true(hub_timer_is_armed(&armed.timer));
    assert_int_equal(hub_timer_deadline_ms(&armed.timer), 1500);
    assert_int_equal(hub_wheel_pending(w), 1);
    CHECK(w);
    /* The largest delay is fine. */
    assert_int_equal(hub_wheel_start(w, &idle.timer, 1000,
                                     (int64_t)HUB_WHEEL_MAX_DELAY_MS),
                     0);
    assert_int_equal(hub_wheel_pending(w), 2);
    CHECK(w);
    assert_int_equal(hub_wheel_advance(w, 1500), 1);
    assert_int_equal(armed.fired, 1);
    hub_wheel_destroy(w);
    assert_false(hub_timer_is_armed(&idle.timer));
}

static void test_wheel_rearm_moves_entry(void **state)
{
    struct hub_wheel *w = hub_wheel_create(4, 100, 0);
    struct probe p;
    struct hub_wheel_stats st;

    (void)state;
    probe_init(&p, 0);
    hub_wheel_start(w, &p.timer, 0, 300);
    hub_wheel_start(w, &p.timer, 0, 5000);
    CHECK(w);
    assert_int_equal(hub_wheel_pending(w), 1);
    assert_int_equal(hub_wheel_advance(w, 4900), 0);
    assert_int_equal(hub_wheel_advance(w, 5000), 1);
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.fired, 1);
    hub_wheel_destroy(w);
}

static void test_wheel_counters(void **state)
{
    uint64_t fake_ns = 1000000;
    struct hub_clock clock = { hub_clock_fake_now_ns, &fake_ns };
    struct hub_wheel *w = hub_wheel_create(0, 100, 0);
    struct probe p[5];
    struct hub_wheel_stats st;

    (void)state;
    /* Each callback moves the fake clock by 1 us. */
    ctx.fake_ns = &fake_ns;
    for (int i = 0; i < 5; i++) {
        probe_init(&p[i], i);
        hub_wheel_start(w, &p[i].timer, 0, 100 * (i + 1));
        CHECK(w);
    }
    /* Without a clock, no durations. */
    assert_int_equal(hub_wheel_advance(w, 100), 1);
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.last_advance_ns, 0);
    assert_int_equal(st.max_advance_ns, 0);

    hub_wheel_set_clock(w, &clock);
    hub_wheel_stop(w, &p[4].timer);
    hub_wheel_stop(w, &p[4].timer);
    CHECK(w);
    assert_int_equal(hub_wheel_advance(w, 400), 3);
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.last_advance_ns, 3000);
    assert_int_equal(st.max_advance_ns, 3000);
    assert_int_equal(hub_wheel_advance(w, 450), 0);
    hub_wheel_get_stats(w, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.fired, 4);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.advances, 3);
    assert_int_equal(st.last_advance_ns, 0);
    assert_int_equal(st.max_advance_ns, 3000);
    /* Lateness was 0, 200, 100 and 0 ms. */
    assert_int_equal(st.max_lateness_ms, 200);
    assert_int_equal(st.late_hist[0], 2);
    assert_int_equal(st.late_hist[1], 0);
    assert_int_equal(st.late_hist[2], 0);
    assert_int_equal(st.late_hist[3], 1);
    assert_int_equal(st.late_hist[4], 1);
    assert_int_equal(st.lateness_sum_ms, 300);
    hub_wheel_destroy(w);
}

static void test_wheel_next_due(void **state)
{
    struct hub_wheel *w = hub_wheel_create(4, 100, 0);
    struct probe a, b;

    (void)state;
    probe_init(&a, 0);
    probe_init(&b, 1);
    assert_int_equal(hub_wheel_next_due_ms(w, 0), UINT64_MAX);
    hub_wheel_start(w, &a.timer, 0, 250);
    assert_int_equal(hub_wheel_next_due_ms(w, 0), 300);
    assert_int_equal(hub_wheel_next_due_ms(w, 120), 180);
    /* b sits in the slot of tick 2 a turn early: a conservative answer. */
    hub_wheel_start(w, &b.timer, 0, 5000);
    assert_true(hub_wheel_next_due_ms(w, 0) <= 300);
    assert_true(hub_wheel_next_due_ms(w, 0) >= 200);
    hub_wheel_stop(w, &a.timer);
    /* Never later than the true next due boundary. */
    assert_true(hub_wheel_next_due_ms(w, 0) <= 5000);
    hub_wheel_advance(w, 1000);
    assert_true(hub_wheel_next_due_ms(w, 1000) <= 4000);
    assert_true(hub_wheel_next_due_ms(w, 1000) > 0);
    hub_wheel_start_at(w, &a.timer, 10);
    assert_int_equal(hub_wheel_next_due_ms(w, 1000), 0);
    hub_wheel_advance(w, 1000);
    hub_wheel_stop(w, &b.timer);
    assert_int_equal(hub_wheel_next_due_ms(w, 1000), UINT64_MAX);
    CHECK(w);
    hub_wheel_destroy(w);
}

static void test_wheel_destroy_disarms_without_firing(void **state)
{
    struct hub_wheel *w = hub_wheel_create(4, 100, 0);
    struct probe p[3];

    (void)state;
    for (int i = 0; i < 3; i++)
        probe_init(&p[i], i);
    hub_wheel_start(w, &p[0].timer, 0, 100);
    hub_wheel_start(w, &p[1].timer, 0, 100000);
    hub_wheel_advance(w, 100);
    hub_wheel_start_at(w, &p[2].timer, 0);
    hub_wheel_destroy(w);
    for (int i = 0; i < 3; i++)
        assert_false(hub_timer_is_armed(&p[i].timer));
    assert_int_equal(p[0].fired, 1);
    assert_int_equal(p[1].fired + p[2].fired, 0);
}

/*
 * The randomized model test. Entries arm, re-arm and stop at random, time
 * moves by random amounts (sometimes many turns at once), and callbacks
 * stop, arm and re-arm entries too. The model is an array of deadlines.
 * Checked: a fire happens only for an armed entry, at or after its
 * deadline, and only if the deadline is at or before the last tick
 * boundary; after an advance nothing that was due is left, except entries
 * armed by the callbacks of that very advance; fires within one advance
 * come in deadline order; counters match.
 */
enum { M_N = 256, M_OPS = 1000000 };

static struct {
    struct hub_wheel *w;
    struct probe p[M_N];
    uint64_t deadline[M_N];
    bool armed[M_N];
    bool armed_in_cb[M_N];
    uint64_t now;
    uint64_t tick;
    uint64_t last_fire_deadline;
    uint64_t fired, cancelled;
    uint64_t rng;
} m;

static uint64_t m_rand(void)
{
    /* xorshift64*: deterministic, no libc state. */
    m.rng ^= m.rng >> 12;
    m.rng ^= m.rng << 25;
    m.rng ^= m.rng >> 27;
    return m.rng * 2685821657736338717ull;
}

static int64_t m_delay(void)
{
    uint64_t r = m_rand() % 100;

    if (r < 40)
        return (int64_t)(m_rand() % (3 * m.tick));
    if (r < 80)
        return (int64_t)(m_rand() % (64 * m.tick));
    if (r < 97)
        return (int64_t)(m_rand() % (16 * 64 * m.tick));
    return (int64_t)(m_rand() % (1000 * 64 * m.tick));
}

static void m_arm(int i, uint64_t now)
{
    int64_t d = m_delay();

    if (m_rand() % 50 == 0) {
        uint64_t back = m_rand() % (5 * m.tick);
        uint64_t dl = now > back ? now - back : 0;

        assert_int_equal(hub_wheel_start_at(m.w, &m.p[i].timer, dl), 0);
        m.deadline[i] = dl;
    } else {
        assert_int_equal(hub_wheel_start(m.w, &m.p[i].timer, now, d), 0);
        m.deadline[i] = now + (uint64_t)d;
    }
    m.armed[i] = true;
}

static void m_stop(int i)
{
    hub_wheel_stop(m.w, &m.p[i].timer);
    if (m.armed[i])
        m.cancelled++;
    m.armed[i] = false;
}

static void m_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct probe *p = hub_container_of(t, struct probe, timer);
    int i = p->id;
    uint64_t r;

    assert_true(m.armed[i]);
    assert_false(m.armed_in_cb[i]);
    assert_int_equal(m.deadline[i], hub_timer_deadline_ms(t));
    assert_true(m.deadline[i] <= now_ms - now_ms % m.tick);
    assert_true(m.deadline[i] >= m.last_fire_deadline);
    m.last_fire_deadline = m.deadline[i];
    m.armed[i] = false;
    m.fired++;

    r = m_rand() % 16;
    if (r == 0) {
        m_arm(i, now_ms);
        m.armed_in_cb[i] = true;
    } else if (r == 1) {
        int j = (int)(m_rand() % M_N);

        m_stop(j);
        m.armed_in_cb[j] = false;
    } else if (r == 2) {
        int j = (int)(m_rand() % M_N);

        m_arm(j, now_ms);
        m.armed_in_cb[j] = true;
    }
}

static void test_wheel_model_randomized(void **state)
{
    struct hub_wheel_stats st;

    (void)state;
    memset(&m, 0, sizeof(m));
    m.rng = 0x9e3779b97f4a7c15ull;
    m.tick = 10;
    m.now = 123456;
    m.w = hub_wheel_create(6, m.tick, m.now);
    assert_non_null(m.w);
    for (int i = 0; i < M_N; i++) {
        probe_init(&m.p[i], i);
        m.p[i].timer.hub__cb = m_cb;
    }
    for (long op = 0; op < M_OPS; op++) {
        uint64_t r = m_rand() % 100;
        int i = (int)(m_rand() % M_N);

        if (r < 45) {
            m_arm(i, m.now);
        } else if (r < 80) {
            m_stop(i);
        } else {
            uint64_t kind = m_rand() % 100;
            uint64_t step = kind < 2 ? m_rand() % (200 * 64 * m.tick)
                                     : m_rand() % (3 * m.tick);
            uint64_t boundary;
            int j = (int)(m_rand() % M_N);

            /* Sometimes jump to just around an armed entry's deadline. */
            if (kind >= 2 && kind < 4 && m.armed[j] && m.deadline[j] > m.now) {
                uint64_t to = m.deadline[j] + 1 - m_rand() % 3;

                step = to > m.now ? to - m.now : 0;
            }
            m.now += step;
            boundary = m.now - m.now % m.tick;
            memset(m.armed_in_cb, 0, sizeof(m.armed_in_cb));
            m.last_fire_deadline = 0;
            hub_wheel_advance(m.w, m.now);
            for (int k = 0; k < M_N; k++)
                if (m.armed[k] && !m.armed_in_cb[k])
                    assert_true(m.deadline[k] > boundary);
        }
        if (op % 1024 == 0)
            CHECK(m.w);
        {
            uint64_t n = 0;

            for (int k = 0; k < M_N; k += 32)
                n += m.armed[k] == hub_timer_is_armed(&m.p[k].timer);
            assert_int_equal(n, M_N / 32);
        }
    }
    CHECK(m.w);
    hub_wheel_get_stats(m.w, &st);
    {
        uint64_t n = 0;

        for (int k = 0; k < M_N; k++)
            n += m.armed[k];
        assert_int_equal(st.pending, n);
    }
    assert_int_equal(st.fired, m.fired);
    assert_int_equal(st.cancelled, m.cancelled);
    hub_wheel_destroy(m.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_wheel_create_rejects_bad_args, setup),
        cmocka_unit_test_setup(test_wheel_fires_at_deadline, setup),
        cmocka_unit_test_setup(test_wheel_deadline_on_boundary_fires_there,
                               setup),
        cmocka_unit_test_setup(test_wheel_never_fires_early, setup),
        cmocka_unit_test_setup(test_wheel_lateness_bounded_by_one_tick, setup),
        cmocka_unit_test_setup(test_wheel_deadlines_many_turns_ahead, setup),
        cmocka_unit_test_setup(test_wheel_long_stall_fires_due_once, setup),
        cmocka_unit_test_setup(test_wheel_fires_in_deadline_order, setup),
        cmocka_unit_test_setup(test_wheel_stop_self_in_callback_is_harmless,
                               setup),
        cmocka_unit_test_setup(test_wheel_restart_self_in_callback, setup),
        cmocka_unit_test_setup(test_wheel_rearm_in_past_fires_next_advance,
                               setup),
        cmocka_unit_test_setup(test_wheel_stop_collected_entry_in_callback,
                               setup),
        cmocka_unit_test_setup(test_wheel_rearm_collected_entry_in_callback,
                               setup),
        cmocka_unit_test_setup(test_wheel_arm_other_due_in_callback_waits,
                               setup),
        cmocka_unit_test_setup(test_wheel_stop_after_fire_is_harmless, setup),
        cmocka_unit_test_setup(test_wheel_double_stop_is_harmless, setup),
        cmocka_unit_test_setup(test_wheel_rejects_bad_delay_unchanged, setup),
        cmocka_unit_test_setup(test_wheel_rearm_moves_entry, setup),
        cmocka_unit_test_setup(test_wheel_counters, setup),
        cmocka_unit_test_setup(test_wheel_next_due, setup),
        cmocka_unit_test_setup(test_wheel_destroy_disarms_without_firing,
                               setup),
        cmocka_unit_test_setup(test_wheel_model_randomized, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
