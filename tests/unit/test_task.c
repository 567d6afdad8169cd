/*
 * tests/unit/test_task.c - the fixed-delay guarded task of timer/task.h.
 *
 * A fake clock supplies time and the task's function moves it forward to
 * stand for the work of a run, so the tests can see that the next run is
 * scheduled from the end of a run. The wheel is advanced by hand.
 * Single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "timer/task.h"

#define MS 1000000ull

/* The fake world of one test: its clock, wheel, and what the task did. */
static struct {
    uint64_t now_ns;
    struct hub_clock clock;
    struct hub_wheel *w;
    struct hub_task task;
    /* Behaviour of task_fn. */
    uint64_t work_ms;        /* fake time each slice takes */
    unsigned more_slices;    /* slices that return MORE before DONE */
    int fail_on_run;         /* run number (1-based) that fails, 0 none */
    int stop_on_run;         /* run number that stops the task, 0 none */
    bool restart_on_stop;    /* ... and then starts it again */
    /* Records. */
    unsigned calls;
    unsigned runs_started;
    uint64_t run_at_ms[32];
    unsigned slice_seen[32];
    unsigned yields;
} f;

static int task_fn(struct hub_task *t, uint64_t now_ms, unsigned slice,
                   void *arg)
{
    assert_ptr_equal(arg, &f);
    assert_ptr_equal(t, &f.task);
    if (f.calls < 32)
        f.slice_seen[f.calls] = slice;
    f.calls++;
    if (slice == 0) {
        if (f.runs_started < 32)
            f.run_at_ms[f.runs_started] = now_ms;
        f.runs_started++;
    }
    f.now_ns += f.work_ms * MS;
    if (f.stop_on_run && (int)f.runs_started == f.stop_on_run) {
        hub_task_stop(t);
        if (f.restart_on_stop)
            assert_int_equal(hub_task_start(t, now_ms, 50, 1000), 0);
        return HUB_TASK_MORE;
    }
    if (slice < f.more_slices)
        return HUB_TASK_MORE;
    if (f.fail_on_run && (int)f.runs_started == f.fail_on_run)
        return -EIO;
    return HUB_TASK_DONE;
}

static void task_yield(struct hub_task *t, void *arg)
{
    assert_ptr_equal(t, &f.task);
    assert_ptr_equal(arg, &f);
    f.yields++;
}

static int setup(void **state)
{
    (void)state;
    memset(&f, 0, sizeof(f));
    f.clock.now_ns = hub_clock_fake_now_ns;
    f.clock.ctx = &f.now_ns;
    f.w = hub_wheel_create(0, 10, 0);
    assert_non_null(f.w);
    hub_task_init(&f.task, f.w, &f.clock, task_fn, &f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hub_task_stop(&f.task);
    assert_int_equal(hub_wheel_check(f.w), 0);
    assert_int_equal(hub_wheel_pending(f.w), 0);
    hub_wheel_destroy(f.w);
    return 0;
}

/* Move the clock to now_ms (never back) and advance the wheel there. */
static void step_to(uint64_t now_ms)
{
    if (f.now_ns < now_ms * MS)
        f.now_ns = now_ms * MS;
    hub_wheel_advance(f.w, now_ms);
    assert_int_equal(hub_wheel_check(f.w), 0);
}

/* Advance tick by tick (10 ms) from..to inclusive. */
static void drive(uint64_t from_ms, uint64_t to_ms)
{
    for (uint64_t now = from_ms; now <= to_ms; now += 10)
        step_to(now);
}

static void test_task_start_rejects_bad_delays(void **state)
{
    (void)state;
    assert_int_equal(hub_task_start(&f.task, 0, 10, 0), -EINVAL);
    assert_int_equal(hub_task_start(&f.task, 0, HUB_WHEEL_MAX_DELAY_MS + 1,
                                    10),
                     -EINVAL);
    assert_int_equal(hub_task_start(&f.task, 0, 10,
                                    HUB_WHEEL_MAX_DELAY_MS + 1),
                     -EINVAL);
    assert_false(hub_task_is_started(&f.task));
    assert_int_equal(hub_wheel_pending(f.w), 0);
    assert_int_equal(hub_task_start(&f.task, 0, 0, 1), 0);
    assert_true(hub_task_is_started(&f.task));
}

static void test_task_fixed_delay_from_run_end(void **state)
{
    struct hub_task_stats st;

    (void)state;
    f.work_ms = 35;
    assert_int_equal(hub_task_start(&f.task, 0, 100, 1000), 0);
    drive(0, 90);
    assert_int_equal(f.runs_started, 0);
    drive(100, 3300);
    /* 100 + 35 + 1000 = 1135 -> tick 1140; 1175 + 1000 -> 2180; 3220. */
    assert_int_equal(f.runs_started, 4);
    assert_int_equal(f.run_at_ms[0], 100);
    assert_int_equal(f.run_at_ms[1], 1140);
    assert_int_equal(f.run_at_ms[2], 2180);
    assert_int_equal(f.run_at_ms[3], 3220);
    hub_task_get_stats(&f.task, &st);
    assert_int_equal(st.runs, 4);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.slices, 4);
    assert_int_equal(st.last_run_ns, 35 * MS);
    assert_int_equal(st.max_run_ns, 35 * MS);
    assert_int_equal(st.last_slice_ns, 35 * MS);
    assert_int_equal(st.max_slice_ns, 35 * MS);
    assert_int_equal(st.last_error, 0);
}

static void test_task_failure_is_counted_and_keeps_schedule(void **state)
{
    struct hub_task_stats st;

    (void)state;
    f.fail_on_run = 2;
    assert_int_equal(hub_task_start(&f.task, 0, 100, 100), 0);
    drive(0, 500);
    assert_int_equal(f.runs_started, 5);
    assert_true(hub_task_is_started(&f.task));
    hub_task_get_stats(&f.task, &st);
    assert_int_equal(st.runs, 5);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.last_error, -EIO);
}

static void test_task_no_catch_up_after_stall(void **state)
{
    struct hub_task_stats st;

    (void)state;
    assert_int_equal(hub_task_start(&f.task, 0, 100, 100), 0);
    step_to(100);
    assert_int_equal(f.runs_started, 1);
    /* The loop stalls for ten intervals: one run, then the normal pace. */
    step_to(1100);
    assert_int_equal(f.runs_started, 2);
    step_to(1190);
    assert_int_equal(f.runs_started, 2);
    step_to(1200);
    assert_int_equal(f.runs_started, 3);
    hub_task_get_stats(&f.task, &st);
    assert_int_equal(st.runs, 3);
}

static void test_task_stop_inside_run(void **state)
{
    struct hub_task_stats st;

    (void)state;
    f.stop_on_run = 2;
    assert_int_equal(hub_task_start(&f.task, 0, 100, 100), 0);
    drive(0, 1000);
    assert_int_equal(f.runs_started, 2);
    assert_false(hub_task_is_started(&f.task));
    assert_int_equal(hub_wheel_pending(f.w), 0);
    /* A late resume is harmless. */
    hub_task_resume(&f.task, 1000);
    drive(1000, 2000);
    assert_int_equal(f.calls, 2);
    hub_task_get_stats(&f.task, &st);
    /* The stopped run asked for more, so it never completed. */
    assert_int_equal(st.runs, 1);
    assert_int_equal(st.slices, 2);
    /* Stop then start again is allowed. */
    f.stop_on_run = 0;
    assert_int_equal(hub_task_start(&f.task, 2000, 10, 100), 0);
    drive(2000, 2010);
    assert_int_equal(f.runs_started, 3);
}

static void test_task_restart_inside_run_owns_schedule(void **state)
{
    (void)state;
    f.stop_on_run = 1;
    f.restart_on_stop = true;
    assert_int_equal(hub_task_start(&f.task, 0, 100, 100), 0);
    step_to(100);
    assert_int_equal(f.runs_started, 1);
    assert_true(hub_task_is_started(&f.task));
    f.stop_on_run = 0;
    /* The restart asked for 50 ms; its MORE was dropped with the old run. */
    drive(110, 140);
    assert_int_equal(f.calls, 1);
    step_to(150);
    assert_int_equal(f.runs_started, 2);
    assert_int_equal(f.slice_seen[1], 0);
}

static void test_task_slices_via_yield_hook(void **state)
{
    struct hub_task_stats st;

    (void)state;
    f.work_ms = 5;
    f.more_slices = 2;
    hub_task_set_yield(&f.task, task_yield);
    assert_int_equal(hub_task_start(&f.task, 0, 100, 1000), 0);
    step_to(100);
    assert_int_equal(f.calls, 1);
    assert_int_equal(f.yields, 1);
    /* Nothing is armed while a resume is owed. */
    assert_int_equal(hub_wheel_pending(f.w), 0);
    f.now_ns += 2 * MS;
    hub_task_resume(&f.task, 107);
    assert_int_equal(f.calls, 2);
    assert_int_equal(f.yields, 2);
    f.now_ns += 2 * MS;
    hub_task_resume(&f.task, 114);
    assert_int_equal(f.calls, 3);
    assert_int_equal(f.yields, 2);
    /* Resuming with nothing owed does nothing. */
    hub_task_resume(&f.task, 114);
    assert_int_equal(f.calls, 3);
    assert_int_equal(f.slice_seen[0], 0);
    assert_int_equal(f.slice_seen[1], 1);
    assert_int_equal(f.slice_seen[2], 2);
    hub_task_get_stats(&f.task, &st);
    assert_int_equal(st.runs, 1);
    assert_int_equal(st.slices, 3);
    assert_int_equal(st.last_run_ns, 19 * MS);
    assert_int_equal(st.max_run_ns, 19 * MS);
    assert_int_equal(st.last_slice_ns, 5 * MS);
    assert_int_equal(st.max_slice_ns, 5 * MS);
    /* Next run: end of the last slice (119 ms) + 1000 -> tick 1120. */
    assert_int_equal(hub_timer_deadline_ms(&f.task.hub__timer), 1119);
    drive(120, 1110);
    assert_int_equal(f.runs_started, 1);
    step_to(1120);
    assert_int_equal(f.runs_started, 2);
}

static void test_task_slices_via_wheel_fallback(void **state)
{
    struct hub_task_stats st;

    (void)state;
    f.more_slices = 2;
    assert_int_equal(hub_task_start(&f.task, 0, 100, 1000), 0);
    step_to(105);
    assert_int_equal(f.calls, 1);
    assert_int_equal(hub_wheel_pending(f.w), 1);
    /* The next slice runs at the next advance, even at the same now. */
    step_to(105);
    assert_int_equal(f.calls, 2);
    step_to(106);
    assert_int_equal(f.calls, 3);
    step_to(107);
    assert_int_equal(f.calls, 3);
    assert_int_equal(f.slice_seen[2], 2);
    hub_task_get_stats(&f.task, &st);
    assert_int_equal(st.runs, 1);
    assert_int_equal(st.slices, 3);
    assert_int_equal(st.last_run_ns, 1 * MS);
    /* A resume without a hook is harmless. */
    hub_task_resume(&f.task, 107);
    assert_int_equal(f.calls, 3);
}

static void test_task_stop_while_yielded(void **state)
{
    (void)state;
    f.more_slices = 5;
    hub_task_set_yield(&f.task, task_yield);
    assert_int_equal(hub_task_start(&f.task, 0, 10, 10), 0);
    step_to(10);
    assert_int_equal(f.yields, 1);
    hub_task_stop(&f.task);
    hub_task_resume(&f.task, 11);
    drive(20, 200);
    assert_int_equal(f.calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_task_start_rejects_bad_delays,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_fixed_delay_from_run_end,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_task_failure_is_counted_and_keeps_schedule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_no_catch_up_after_stall,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_stop_inside_run, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_task_restart_inside_run_owns_schedule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_slices_via_yield_hook, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_task_slices_via_wheel_fallback,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_stop_while_yielded, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
