/*
 * timer/wheel.h - the per-loop hashed timing wheel.
 *
 * Every session deadline of a loop (pong, idle, close) lives here, and so
 * does the heartbeat task. The owner calls hub_wheel_advance() at least
 * once a tick (the server does it from one timer per loop).
 *
 * One array of 2^slots_log2 slots (default 4096), each tick_ms wide
 * (default 100 ms), so one turn spans 409.6 s by default. An entry due n
 * ticks ahead sits in slot (due_tick & mask) with a count of whole turns
 * still to wait; a slot visit fires the entries whose due tick has come and
 * leaves the ones of later turns. (wheel.c's header records the
 * measurement behind "rounds, not levels".)
 *
 * Contract:
 * - The wheel reads no clock; callers pass now_ms (monotonic milliseconds).
 * - Entries are embedded in their owners: start/stop allocate nothing and
 *   are O(1). Stop unlinks at once.
 * - An entry never fires before its deadline. It fires in the first
 *   hub_wheel_advance() whose now_ms has reached the deadline rounded up to
 *   the next tick boundary, so if advance runs at least once a tick, an
 *   entry fires less than one tick after its deadline.
 * - hub_wheel_advance() first collects every due entry, then runs the
 *   callbacks in deadline order (ties: arming order). A callback may start,
 *   re-start or stop any entry, itself included; an entry stopped by an
 *   earlier callback of the same advance does not fire.
 * - Delays are 0 .. HUB_WHEEL_MAX_DELAY_MS; anything else is -EINVAL and
 *   leaves the entry as it was. A deadline already past fires at the next
 *   advance.
 *
 * Thread: single-threaded. Only the owning loop touches a wheel and its
 * entries (stats may be read elsewhere only through the loop's snapshot).
 */
#ifndef HUB_WHEEL_H
#define HUB_WHEEL_H

#include <stdbool.h>
#include <stdint.h>

#include "timer/clock.h"

/* Ten years: far beyond any deadline the hub arms, far below overflow. */
#define HUB_WHEEL_MAX_DELAY_MS (10ull * 366 * 24 * 3600 * 1000)

struct hub_wheel;
struct hub_timer;

/* Runs on the loop thread from hub_wheel_advance(); now_ms is that advance's. */
typedef void hub_timer_fn(struct hub_timer *t, uint64_t now_ms);

/* Embedded in its owner; fields are private to timer/. */
struct hub_timer {
    struct hub_timer *hub__next;
    struct hub_timer **hub__pprev; /* NULL while not armed */
    uint64_t hub__deadline_ms;
    hub_timer_fn *hub__cb;
};

struct hub_wheel_stats {
    uint64_t pending;           /* entries armed now */
    uint64_t fired;             /* callbacks run, total */
    uint64_t cancelled;         /* stops of an armed entry, total */
    uint64_t advances;          /* calls to hub_wheel_advance */
    uint64_t last_advance_ns;   /* 0 unless a clock was set */
    uint64_t max_advance_ns;
    uint64_t max_lateness_ms;   /* now - deadline at fire, worst seen */
    /* Lateness histogram: [0,tick/4), [tick/4,tick/2), [tick/2,tick),
     * [tick,2 tick), [2 tick, inf). */
    uint64_t late_hist[5];
    uint64_t lateness_sum_ms;   /* sum of now - deadline over every fire */
};

/* Call once before start. The entry is idle (not armed). */
void hub_timer_init(struct hub_timer *t, hub_timer_fn *cb);
bool hub_timer_is_armed(const struct hub_timer *t);
/* The absolute deadline of an armed entry (undefined when idle). */
uint64_t hub_timer_deadline_ms(const struct hub_timer *t);

/*
 * Owned by the caller; NULL on allocation failure or bad arguments.
 * slots_log2 in 4..24 (0 picks 12), tick_ms >= 1 (0 picks 100); now_ms is
 * the wheel's start time.
 */
struct hub_wheel *hub_wheel_create(unsigned slots_log2, uint64_t tick_ms,
                                   uint64_t now_ms);
/* Disarms every pending entry (without firing it), then frees the wheel. */
void hub_wheel_destroy(struct hub_wheel *w);

/* Optional: a clock used only to measure advance durations for stats. */
void hub_wheel_set_clock(struct hub_wheel *w, const struct hub_clock *clock);

/*
 * Arm t to fire at now_ms + delay_ms (re-arming it if armed). Returns 0, or
 * -EINVAL for delay_ms < 0 or > HUB_WHEEL_MAX_DELAY_MS (t unchanged).
 */
int hub_wheel_start(struct hub_wheel *w, struct hub_timer *t, uint64_t now_ms,
                    int64_t delay_ms);
/* Arm t for an absolute deadline; -EINVAL when it is absurdly far. */
int hub_wheel_start_at(struct hub_wheel *w, struct hub_timer *t,
                       uint64_t deadline_ms);
/* Disarm t if armed (counted as cancelled); harmless when idle. */
void hub_wheel_stop(struct hub_wheel *w, struct hub_timer *t);

/* Collect every entry due at now_ms, then run them. Returns how many ran. */
unsigned hub_wheel_advance(struct hub_wheel *w, uint64_t now_ms);

/*
 * Milliseconds from now_ms until the next tick boundary at which something
 * may be due, or UINT64_MAX when nothing is pending. Lets a driver sleep
 * instead of ticking an empty wheel.
 */
uint64_t hub_wheel_next_due_ms(const struct hub_wheel *w, uint64_t now_ms);

uint64_t hub_wheel_tick_ms(const struct hub_wheel *w);
uint64_t hub_wheel_pending(const struct hub_wheel *w);
void hub_wheel_get_stats(const struct hub_wheel *w, struct hub_wheel_stats *out);

/* Verify every invariant (links, slots, counts); 0 or -EFAULT. For tests. */
int hub_wheel_check(const struct hub_wheel *w);

#endif
