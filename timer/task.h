/*
 * timer/task.h - the fixed-delay, guarded periodic task (a loop's heartbeat).
 *
 * A task runs its function, then schedules the next run for
 * (end of this run + delay): fixed delay, never fixed rate, so after a stall
 * of ten intervals it runs once, not ten times.
 *
 * A run may be split into slices so one run never stalls the loop: the
 * function returns HUB_TASK_MORE to be called again soon (the run goes on),
 * HUB_TASK_DONE (0) when the run is complete, or a negative errno when the
 * run failed. A failure is counted and ends that run; it never stops the
 * schedule. Between slices the task asks its yield hook (if set) to call
 * hub_task_resume() after the loop has serviced I/O; without a hook the next
 * slice runs at the wheel's next advance.
 *
 * hub_task_stop() may be called from anywhere on the loop thread, including
 * from inside the task's own function: the run ends and nothing is
 * scheduled. Stop then start again is allowed.
 *
 * Thread: the owning loop only. Uses the wheel it was given for its timer.
 */
#ifndef HUB_TASK_H
#define HUB_TASK_H

#include <stdbool.h>
#include <stdint.h>

#include "timer/clock.h"
#include "timer/wheel.h"

#define HUB_TASK_DONE 0
#define HUB_TASK_MORE 1

struct hub_task;

/* One slice of a run. slice is 0 for the first slice of each run. */
typedef int hub_task_fn(struct hub_task *t, uint64_t now_ms, unsigned slice,
                        void *arg);
/* Ask the driver to call hub_task_resume(t, now) soon, after I/O. */
typedef void hub_task_yield_fn(struct hub_task *t, void *arg);

struct hub_task_stats {
    uint64_t runs;          /* completed runs (done or failed) */
    uint64_t failures;      /* runs that returned a negative errno */
    uint64_t slices;        /* calls to the function */
    uint64_t last_run_ns;   /* first slice start .. last slice end */
    uint64_t max_run_ns;
    uint64_t last_slice_ns;
    uint64_t max_slice_ns;
    int last_error;         /* last negative errno, 0 if none */
};

/* Embedded in its owner; fields are private to timer/. */
struct hub_task {
    struct hub_timer hub__timer;
    struct hub_wheel *hub__wheel;
    const struct hub_clock *hub__clock;
    hub_task_fn *hub__fn;
    hub_task_yield_fn *hub__yield;
    void *hub__arg;
    uint64_t hub__delay_ms;
    uint64_t hub__run_start_ns;
    unsigned hub__slice;
    bool hub__started;     /* between start and stop */
    bool hub__in_slice;    /* inside the function */
    bool hub__yielded;     /* a resume is owed */
    struct hub_task_stats hub__stats;
};

/* Borrowed: wheel and clock must outlive the task. */
void hub_task_init(struct hub_task *t, struct hub_wheel *w,
                   const struct hub_clock *clock, hub_task_fn *fn, void *arg);
/* Optional; call before start. */
void hub_task_set_yield(struct hub_task *t, hub_task_yield_fn *yield);

/* First run at now_ms + first_delay_ms, then every delay_ms after each
 * run's end. 0 or -EINVAL (bad delays; delay_ms must be >= 1). */
int hub_task_start(struct hub_task *t, uint64_t now_ms,
                   uint64_t first_delay_ms, uint64_t delay_ms);
void hub_task_stop(struct hub_task *t);
bool hub_task_is_started(const struct hub_task *t);

/* Run the next slice of a run that yielded; harmless if none is owed. */
void hub_task_resume(struct hub_task *t, uint64_t now_ms);

void hub_task_get_stats(const struct hub_task *t, struct hub_task_stats *out);

#endif
