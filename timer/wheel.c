/*
 * timer/wheel.c - the hashed timing wheel behind timer/wheel.h.
 *
 * Layout. One array of 2^slots_log2 slot heads. Each slot is a singly-linked
 * list whose entries keep a pointer to the pointer that points at them
 * (pprev), so stop unlinks in O(1) without knowing the slot. An entry with
 * deadline d is due at tick ceil(d / tick_ms) (its "due tick") and sits in
 * slot (due tick & mask). Two more lists of the same shape exist:
 * - ready: entries armed for a due tick the wheel has already visited (a
 *   deadline already past). They fire at the next advance, never in the
 *   advance that is running, so a callback re-arming itself in the past
 *   cannot loop forever.
 * - expired: the batch one advance collected, sorted by deadline, while its
 *   callbacks run. An entry stays armed (and pending) there until its
 *   callback is called, so a callback may stop a later entry of the batch.
 *
 * Invariants (hub_wheel_check() verifies all of them):
 * - w->tick is the last tick visited: every entry due at or before it has
 *   been collected. Slot entries are due after w->tick; ready entries at or
 *   before it.
 * - Every armed entry is on exactly one of the lists, *pprev == entry, and
 *   w->pending counts them all.
 * - The expired list is sorted by deadline.
 *
 * Advancing. advance(now) moves w->tick to floor(now / tick_ms) and visits
 * the slots of the ticks in between, each at most once: after a stall longer
 * than one turn it visits every slot once rather than once per missed tick.
 * A visit takes the entries due by the new tick and leaves the ones of later
 * turns. The batch (plus the ready list) is then sorted by deadline with a
 * stable merge sort; slots are walked so that within a slot arming order is
 * kept, which makes ties fire in arming order.
 *
 * Why rounds and not levels. A hierarchical wheel (levels) saves the
 * later-turn entries from being looked at on every turn, at the price of
 * cascading every long entry down a level, which touches it again, and of a
 * second array and its bookkeeping on every arm. The hub's deadlines are
 * short compared with one turn (409.6 s with the defaults): pong and close
 * timeouts are seconds, ping intervals tens of seconds, the idle timeout
 * minutes at most. With rounds, an entry of a later turn costs one pointer
 * chase and one compare per turn it waits; almost no hub entry waits a turn.
 * A second level would only add work to the common path.
 *
 * What we measured (bench/bench_timers, docs/BENCHMARKS.md; uniform 1..60 s
 * deadlines, 100 ms tick, 4096 slots, so no entry even waits a turn): at 1M
 * timers arm 27 ns, cancel 23 ns, re-arm 40 ns, expiry 177 ns per fired
 * entry. The first three are the cache misses on the entry and its list
 * neighbours; expiry is the pointer chase along each slot's list (about
 * three quarters of advance() in perf) plus the deadline sort. Levels would
 * not remove any of those misses and would add a cascade pass that touches
 * every long entry again. We did not build a two-level variant to time it:
 * the argument above is reasoning, not a measurement. If deadlines of many
 * turns ever become common (webhook retries over hours), measure one before
 * switching.
 *
 * Thread: single-threaded; only the owning loop touches a wheel.
 */
#include "timer/wheel.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

struct hub_wheel {
    struct hub_timer **slots;
    uint64_t mask;
    uint64_t tick_ms;
    /* The last tick visited; every entry due at or before it is collected. */
    uint64_t tick;
    /* The latest now_ms seen, for start_at's range check. */
    uint64_t now_ms;
    /* A lower bound on the due tick of every slot entry. */
    uint64_t hint_tick;
    struct hub_timer *ready;
    struct hub_timer *expired;
    const struct hub_clock *clock;
    bool advancing;
    struct hub_wheel_stats stats;
};

static uint64_t due_tick(const struct hub_wheel *w, uint64_t deadline_ms)
{
    uint64_t q = deadline_ms / w->tick_ms;

    return q + (q * w->tick_ms != deadline_ms);
}

static void link_head(struct hub_timer **head, struct hub_timer *t)
{
    t->hub__next = *head;
    if (*head)
        (*head)->hub__pprev = &t->hub__next;
    *head = t;
    t->hub__pprev = head;
}

static void unlink_entry(struct hub_timer *t)
{
    *t->hub__pprev = t->hub__next;
    if (t->hub__next)
        t->hub__next->hub__pprev = t->hub__pprev;
    t->hub__next = NULL;
    t->hub__pprev = NULL;
}

void hub_timer_init(struct hub_timer *t, hub_timer_fn *cb)
{
    t->hub__next = NULL;
    t->hub__pprev = NULL;
    t->hub__deadline_ms = 0;
    t->hub__cb = cb;
}

bool hub_timer_is_armed(const struct hub_timer *t)
{
    return t->hub__pprev != NULL;
}

uint64_t hub_timer_deadline_ms(const struct hub_timer *t)
{
    return t->hub__deadline_ms;
}

struct hub_wheel *hub_wheel_create(unsigned slots_log2, uint64_t tick_ms,
                                   uint64_t now_ms)
{
    struct hub_wheel *w;

    if (slots_log2 == 0)
        slots_log2 = 12;
    if (tick_ms == 0)
        tick_ms = 100;
    if (slots_log2 < 4 || slots_log2 > 24)
        return NULL;
    w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->slots = calloc((size_t)1 << slots_log2, sizeof(*w->slots));
    if (!w->slots) {
        free(w);
        return NULL;
    }
    w->mask = ((uint64_t)1 << slots_log2) - 1;
    w->tick_ms = tick_ms;
    w->tick = now_ms / tick_ms;
    w->now_ms = now_ms;
    w->hint_tick = w->tick + 1;
    return w;
}

static void disarm_list(struct hub_timer **head)
{
    struct hub_timer *t = *head;

    while (t) {
        struct hub_timer *next = t->hub__next;

        t->hub__next = NULL;
        t->hub__pprev = NULL;
        t = next;
    }
    *head = NULL;
}

void hub_wheel_destroy(struct hub_wheel *w)
{
    if (!w)
        return;
    assert(!w->advancing);
    for (uint64_t i = 0; i <= w->mask; i++)
        disarm_list(&w->slots[i]);
    disarm_list(&w->ready);
    disarm_list(&w->expired);
    free(w->slots);
    free(w);
}

void hub_wheel_set_clock(struct hub_wheel *w, const struct hub_clock *clock)
{
    w->clock = clock;
}

/* Link an entry whose deadline is already set; the caller counts it. */
static void link_entry(struct hub_wheel *w, struct hub_timer *t)
{
    uint64_t due = due_tick(w, t->hub__deadline_ms);

    if (due <= w->tick) {
        link_head(&w->ready, t);
        return;
    }
    link_head(&w->slots[due & w->mask], t);
    if (due < w->hint_tick)
        w->hint_tick = due;
}

int hub_wheel_start_at(struct hub_wheel *w, struct hub_timer *t,
                       uint64_t deadline_ms)
{
    if (deadline_ms > w->now_ms &&
        deadline_ms - w->now_ms > HUB_WHEEL_MAX_DELAY_MS)
        return -EINVAL;
    if (t->hub__pprev)
        unlink_entry(t);
    else
        w->stats.pending++;
    t->hub__deadline_ms = deadline_ms;
    link_entry(w, t);
    return 0;
}

int hub_wheel_start(struct hub_wheel *w, struct hub_timer *t, uint64_t now_ms,
                    int64_t delay_ms)
{
    if (delay_ms < 0 || (uint64_t)delay_ms > HUB_WHEEL_MAX_DELAY_MS ||
        now_ms > UINT64_MAX - (uint64_t)delay_ms)
        return -EINVAL;
    if (t->hub__pprev)
        unlink_entry(t);
    else
        w->stats.pending++;
    t->hub__deadline_ms = now_ms + (uint64_t)delay_ms;
    link_entry(w, t);
    return 0;
}

void hub_wheel_stop(struct hub_wheel *w, struct hub_timer *t)
{
    if (!t->hub__pprev)
        return;
    unlink_entry(t);
    w->stats.pending--;
    w->stats.cancelled++;
}

/*
 * Move the entries of one slot due by upto_ms onto the front of *batch.
 * Walking the slot from its head (newest first) and pushing each taken entry
 * on the batch's front leaves them in arming order there.
 */
static void collect_slot(struct hub_timer **slot, uint64_t upto_ms,
                         struct hub_timer **batch)
{
    struct hub_timer **pp = slot;
    struct hub_timer *t;

    while ((t = *pp) != NULL) {
        if (t->hub__deadline_ms <= upto_ms) {
            *pp = t->hub__next;
            if (t->hub__next)
                t->hub__next->hub__pprev = pp;
            t->hub__next = *batch;
            *batch = t;
        } else {
            pp = &t->hub__next;
        }
    }
}

/* Merge two deadline-sorted chains; ties take from a first (stable). */
static struct hub_timer *merge(struct hub_timer *a, struct hub_timer *b)
{
    struct hub_timer *head = NULL;
    struct hub_timer **tail = &head;

    while (a && b) {
        if (b->hub__deadline_ms < a->hub__deadline_ms) {
            *tail = b;
            b = b->hub__next;
        } else {
            *tail = a;
            a = a->hub__next;
        }
        tail = &(*tail)->hub__next;
    }
    *tail = a ? a : b;
    return head;
}

/*
 * A stable bottom-up merge sort of a chain by deadline, O(n log n) with no
 * allocation: bins[i] holds a sorted run of 2^i chunks. Batches are usually
 * already sorted runs per slot, so the common case is a handful of merges.
 */
static struct hub_timer *sort_chain(struct hub_timer *list)
{
    struct hub_timer *bins[64] = { NULL };
    unsigned top = 0;

    while (list) {
        struct hub_timer *run = list;
        unsigned i;

        /* Take the longest non-decreasing prefix as one run. */
        while (list->hub__next &&
               list->hub__next->hub__deadline_ms >= list->hub__deadline_ms)
            list = list->hub__next;
        {
            struct hub_timer *rest = list->hub__next;

            list->hub__next = NULL;
            list = rest;
        }
        for (i = 0; i < top && bins[i]; i++) {
            run = merge(bins[i], run);
            bins[i] = NULL;
        }
        if (i == top && top < 63)
            top++;
        bins[i] = run;
    }
    {
        struct hub_timer *out = NULL;

        for (unsigned i = 0; i < top; i++)
            if (bins[i])
                out = out ? merge(bins[i], out) : bins[i];
        return out;
    }
}

static void note_lateness(struct hub_wheel *w, uint64_t now_ms,
                          uint64_t deadline_ms)
{
    uint64_t late = now_ms > deadline_ms ? now_ms - deadline_ms : 0;
    uint64_t tick = w->tick_ms;
    unsigned b;

    if (late > w->stats.max_lateness_ms)
        w->stats.max_lateness_ms = late;
    w->stats.lateness_sum_ms += late;
    if (late * 4 < tick)
        b = 0;
    else if (late * 2 < tick)
        b = 1;
    else if (late < tick)
        b = 2;
    else if (late < 2 * tick)
        b = 3;
    else
        b = 4;
    w->stats.late_hist[b]++;
}

unsigned hub_wheel_advance(struct hub_wheel *w, uint64_t now_ms)
{
    uint64_t start_ns = w->clock ? hub_clock_now_ns(w->clock) : 0;
    uint64_t target = now_ms / w->tick_ms;
    struct hub_timer *batch = NULL;
    unsigned ran = 0;

    assert(!w->advancing);
    w->stats.advances++;
    if (now_ms > w->now_ms)
        w->now_ms = now_ms;

    /* Entries armed in the past since the last advance come first. */
    batch = w->ready;
    w->ready = NULL;
    {
        struct hub_timer *rev = NULL;

        /* The ready list is newest first; reverse it into arming order. */
        while (batch) {
            struct hub_timer *next = batch->hub__next;

            batch->hub__next = rev;
            rev = batch;
            batch = next;
        }
        batch = rev;
    }

    if (target > w->tick) {
        uint64_t upto_ms = target * w->tick_ms;
        uint64_t first = w->tick + 1;
        uint64_t n = target - w->tick;
        struct hub_timer *got = NULL;

        /* Nothing can be due before hint_tick: skip the slots before it. */
        if (first < w->hint_tick) {
            uint64_t skip = w->hint_tick - first;

            if (skip >= n)
                n = 0;
            else {
                first += skip;
                n -= skip;
            }
        }
        if (n > w->mask + 1)
            n = w->mask + 1;
        for (uint64_t i = 0; i < n; i++) {
            struct hub_timer **slot = &w->slots[(first + i) & w->mask];

            if (*slot)
                collect_slot(slot, upto_ms, &got);
        }
        w->tick = target;
        if (w->hint_tick <= target)
            w->hint_tick = target + 1;
        /* got is newest slot first; the sort below orders it anyway. */
        if (got) {
            struct hub_timer **tail = &batch;

            while (*tail)
                tail = &(*tail)->hub__next;
            *tail = got;
        }
    }

    if (!batch)
        goto out;
    batch = sort_chain(batch);
    /* Publish the batch as the expired list; entries stay armed there. */
    w->expired = batch;
    batch->hub__pprev = &w->expired;
    for (struct hub_timer *t = batch; t->hub__next; t = t->hub__next)
        t->hub__next->hub__pprev = &t->hub__next;

    w->advancing = true;
    while (w->expired) {
        struct hub_timer *t = w->expired;

        unlink_entry(t);
        w->stats.pending--;
        w->stats.fired++;
        note_lateness(w, now_ms, t->hub__deadline_ms);
        ran++;
        t->hub__cb(t, now_ms);
    }
    w->advancing = false;

out:
    if (w->clock) {
        uint64_t d = hub_clock_now_ns(w->clock) - start_ns;

        w->stats.last_advance_ns = d;
        if (d > w->stats.max_advance_ns)
            w->stats.max_advance_ns = d;
    }
    return ran;
}

uint64_t hub_wheel_next_due_ms(const struct hub_wheel *w, uint64_t now_ms)
{
    uint64_t first, boundary;

    if (w->stats.pending == 0)
        return UINT64_MAX;
    if (w->ready || w->expired)
        return 0;
    /*
     * The first non-empty slot at or after hint_tick bounds the earliest due
     * tick from below: an entry due later than one turn ahead also sits in
     * one of the slots scanned, at an earlier tick. The scan reads at most
     * one turn of slot heads.
     */
    first = w->hint_tick > w->tick ? w->hint_tick : w->tick + 1;
    for (uint64_t i = 0; i <= w->mask; i++) {
        if (w->slots[(first + i) & w->mask]) {
            first += i;
            break;
        }
    }
    boundary = first * w->tick_ms;
    return boundary > now_ms ? boundary - now_ms : 0;
}

uint64_t hub_wheel_tick_ms(const struct hub_wheel *w)
{
    return w->tick_ms;
}

uint64_t hub_wheel_pending(const struct hub_wheel *w)
{
    return w->stats.pending;
}

void hub_wheel_get_stats(const struct hub_wheel *w, struct hub_wheel_stats *out)
{
    *out = w->stats;
}

/* Check one list's links; count its entries into *n. 0 or -EFAULT. */
static int check_list(struct hub_timer *const *head, uint64_t *n)
{
    struct hub_timer *const *pp = head;
    const struct hub_timer *t;

    while ((t = *pp) != NULL) {
        if (t->hub__pprev != (struct hub_timer **)pp)
            return -EFAULT;
        if (++*n == 0)
            return -EFAULT;
        pp = &t->hub__next;
    }
    return 0;
}

int hub_wheel_check(const struct hub_wheel *w)
{
    uint64_t n = 0;

    if (!w->slots || w->tick_ms == 0 || ((w->mask + 1) & w->mask) != 0)
        return -EFAULT;
    for (uint64_t i = 0; i <= w->mask; i++) {
        if (check_list(&w->slots[i], &n))
            return -EFAULT;
        for (const struct hub_timer *t = w->slots[i]; t; t = t->hub__next) {
            uint64_t due = due_tick(w, t->hub__deadline_ms);

            if ((due & w->mask) != i || due <= w->tick ||
                due < w->hint_tick)
                return -EFAULT;
        }
    }
    if (check_list(&w->ready, &n))
        return -EFAULT;
    for (const struct hub_timer *t = w->ready; t; t = t->hub__next)
        if (due_tick(w, t->hub__deadline_ms) > w->tick)
            return -EFAULT;
    if (check_list(&w->expired, &n))
        return -EFAULT;
    for (const struct hub_timer *t = w->expired; t && t->hub__next;
         t = t->hub__next)
        if (t->hub__next->hub__deadline_ms < t->hub__deadline_ms)
            return -EFAULT;
    if (w->expired && !w->advancing)
        return -EFAULT;
    return n == w->stats.pending ? 0 : -EFAULT;
}
