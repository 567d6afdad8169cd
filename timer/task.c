/*
 * timer/task.c - the fixed-delay guarded task behind timer/task.h.
 *
 * A task is one wheel entry plus bookkeeping. A run starts when the entry
 * fires and is made of one or more slices. After the last slice, the clock
 * is read once more and the entry is armed for that moment plus the delay:
 * the schedule follows the end of each run, so a stall delays the next run
 * instead of piling up runs to catch up.
 *
 * Between slices, a task with a yield hook waits for hub_task_resume(); one
 * without re-arms its entry on the current tick boundary, which the wheel
 * treats as already due, so the next slice runs at the next advance.
 *
 * Invariants:
 * - hub__started is true between start and stop.
 * - While a run waits between slices, hub__slice > 0 and either hub__yielded
 *   is set or the entry is armed (never both).
 * - While the function runs (hub__in_slice), the entry is idle, so finding
 *   it armed after the function returns means the function stopped and
 *   restarted the task; that restart then owns the schedule.
 *
 * Thread: the owning loop only.
 */
#include "timer/task.h"

#include <errno.h>
#include <string.h>

#include "timer/list.h"

static void task_fire(struct hub_timer *tm, uint64_t now_ms);

void hub_task_init(struct hub_task *t, struct hub_wheel *w,
                   const struct hub_clock *clock, hub_task_fn *fn, void *arg)
{
    memset(t, 0, sizeof(*t));
    hub_timer_init(&t->hub__timer, task_fire);
    t->hub__wheel = w;
    t->hub__clock = clock;
    t->hub__fn = fn;
    t->hub__arg = arg;
}

void hub_task_set_yield(struct hub_task *t, hub_task_yield_fn *yield)
{
    t->hub__yield = yield;
}

int hub_task_start(struct hub_task *t, uint64_t now_ms,
                   uint64_t first_delay_ms, uint64_t delay_ms)
{
    int rc;

    if (delay_ms < 1 || delay_ms > HUB_WHEEL_MAX_DELAY_MS ||
        first_delay_ms > HUB_WHEEL_MAX_DELAY_MS)
        return -EINVAL;
    rc = hub_wheel_start(t->hub__wheel, &t->hub__timer, now_ms,
                         (int64_t)first_delay_ms);
    if (rc < 0)
        return rc;
    t->hub__delay_ms = delay_ms;
    t->hub__slice = 0;
    t->hub__yielded = false;
    t->hub__started = true;
    return 0;
}

void hub_task_stop(struct hub_task *t)
{
    hub_wheel_stop(t->hub__wheel, &t->hub__timer);
    t->hub__started = false;
    t->hub__yielded = false;
    t->hub__slice = 0;
}

bool hub_task_is_started(const struct hub_task *t)
{
    return t->hub__started;
}

static void end_run(struct hub_task *t, int rc, uint64_t end_ns)
{
    struct hub_task_stats *s = &t->hub__stats;

    s->runs++;
    if (rc < 0) {
        s->failures++;
        s->last_error = rc;
    }
    s->last_run_ns = end_ns - t->hub__run_start_ns;
    if (s->last_run_ns > s->max_run_ns)
        s->max_run_ns = s->last_run_ns;
}

static void run_slice(struct hub_task *t, uint64_t now_ms)
{
    struct hub_task_stats *s = &t->hub__stats;
    unsigned slice = t->hub__slice;
    uint64_t start_ns = hub_clock_now_ns(t->hub__clock);
    uint64_t end_ns;
    int rc;

    if (slice == 0)
        t->hub__run_start_ns = start_ns;
    t->hub__in_slice = true;
    rc = t->hub__fn(t, now_ms, slice, t->hub__arg);
    t->hub__in_slice = false;
    end_ns = hub_clock_now_ns(t->hub__clock);

    s->slices++;
    s->last_slice_ns = end_ns - start_ns;
    if (s->last_slice_ns > s->max_slice_ns)
        s->max_slice_ns = s->last_slice_ns;
    /* Anything but MORE, DONE or an errno is a bug in the function. */
    if (rc > HUB_TASK_MORE)
        rc = -EINVAL;

    if (!t->hub__started || hub_timer_is_armed(&t->hub__timer)) {
        /* Stopped (and perhaps restarted) from inside: account and leave. */
        if (rc != HUB_TASK_MORE)
            end_run(t, rc, end_ns);
        return;
    }
    if (rc == HUB_TASK_MORE) {
        t->hub__slice = slice + 1;
        if (t->hub__yield) {
            t->hub__yielded = true;
            t->hub__yield(t, t->hub__arg);
        } else {
            uint64_t tick = hub_wheel_tick_ms(t->hub__wheel);

            /* A deadline on a visited boundary fires at the next advance. */
            hub_wheel_start_at(t->hub__wheel, &t->hub__timer,
                               now_ms - now_ms % tick);
        }
        return;
    }
    end_run(t, rc, end_ns);
    t->hub__slice = 0;
    /* Fixed delay: from the end of this run, never from its start. */
    hub_wheel_start(t->hub__wheel, &t->hub__timer, end_ns / 1000000u,
                    (int64_t)t->hub__delay_ms);
}

static void task_fire(struct hub_timer *tm, uint64_t now_ms)
{
    struct hub_task *t = hub_container_of(tm, struct hub_task, hub__timer);

    run_slice(t, now_ms);
}

void hub_task_resume(struct hub_task *t, uint64_t now_ms)
{
    if (!t->hub__started || !t->hub__yielded || t->hub__in_slice)
        return;
    t->hub__yielded = false;
    run_slice(t, now_ms);
}

void hub_task_get_stats(const struct hub_task *t, struct hub_task_stats *out)
{
    *out = t->hub__stats;
}
