/*
 * hub/loop/stats.h - per-loop counters.
 *
 * Each loop writes only its own struct (single writer, HUB_STAT_ADD); any
 * thread may read with HUB_STAT_GET (relaxed atomics). /stats and /metrics
 * sum them. A leaf: hub/loop/stats.c defines the histogram and the reason names.
 */
#ifndef HUB_STATS_H
#define HUB_STATS_H

#include <stdint.h>

#include "hub/loop/stats_table.h"

#define HUB_STAT_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define HUB_STAT_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define HUB_STAT_ADD(x, n)                                                     \
    __atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (n),      \
                     __ATOMIC_RELAXED)
/* A counter that more than one thread writes (the backplane's lost: the
 * Redis thread and any loop whose hand-off queue is full): an atomic
 * add, where HUB_STAT_ADD's load and store would lose one of two
 * concurrent increments. */
#define HUB_STAT_ADD_SHARED(x, n)                                              \
    __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define HUB_STAT_SUB_SHARED(x, n)                                              \
    __atomic_fetch_sub(&(x), (n), __ATOMIC_RELAXED)
#define HUB_STAT_MAX(x, v)                                                     \
    do {                                                                       \
        if ((v) > HUB_STAT_GET(x))                                             \
            HUB_STAT_SET(x, (v));                                              \
    } while (0)

/* Why a session closed; index into closed[]. */
enum hub_close_reason {
    HUB_CLOSE_PONG_TIMEOUT,  /* 4201 */
    HUB_CLOSE_IDLE,          /* 4202 */
    HUB_CLOSE_SLOW,          /* 4100 slow consumer */
    HUB_CLOSE_TOO_BIG,       /* 1009 */
    HUB_CLOSE_PEER,          /* the peer closed or vanished */
    HUB_CLOSE_DRAIN,         /* 4200 */
    HUB_CLOSE_APP,           /* 4001/4003/4004/4009: refused by app rules */
    HUB_CLOSE_ERROR,         /* protocol or internal error */
    HUB_CLOSE_WRITE_TIMEOUT, /* 4100: queued bytes, no write progress */
    HUB_CLOSE_QUEUE_BUDGET,  /* 4100: furthest behind when the hub-wide
                              * queue budget ran out */
    HUB_CLOSE_N
};

/* The label /stats and /metrics use for a close reason ("4201", "peer");
 * "?" out of range. */
const char *hub_close_reason_name(enum hub_close_reason why);

/* Pong round-trip and duration histograms: bucket i holds values < bound. */
#define HUB_HIST_N 12
extern const uint64_t hub_hist_bounds_us[HUB_HIST_N]; /* last is UINT64_MAX */

struct hub_hist {
    uint64_t count[HUB_HIST_N];
    uint64_t sum_us;
};

void hub_hist_add(struct hub_hist *h, uint64_t us);

/* Storage of one table row by its fmt (hub/loop/stats_table.h). */
#define HUB_STAT_DECL_U64(f) uint64_t f;
#define HUB_STAT_DECL_NS_MS(f) uint64_t f;
#define HUB_STAT_DECL_MS_S(f) uint64_t f;
#define HUB_STAT_DECL_BY_REASON(f) uint64_t f[HUB_CLOSE_N];
#define HUB_STAT_DECL_LATE(f) uint64_t f[HUB_LATE_N];
#define HUB_STAT_DECL_RATIO(f) /* derived, no storage */

/* One loop's counters: the rows of HUB_LOOP_STATS, then the histograms of
 * HUB_LOOP_HISTS. What each one counts: the help column there. */
struct hub_loop_stats {
#define HUB_STAT_X(field, type, fmt, total, group, key, metric, help)          \
    HUB_STAT_DECL_##fmt(field)
    HUB_LOOP_STATS(HUB_STAT_X)
#undef HUB_STAT_X
#define HUB_STAT_X(field, metric, help) struct hub_hist field;
    HUB_LOOP_HISTS(HUB_STAT_X)
#undef HUB_STAT_X
};

/* The scale-out backplane's counters (HUB_BACKPLANE_STATS) and its Redis
 * round-trip histogram. */
struct hub_backplane_stats {
#define HUB_STAT_X(field, type, key, metric, help) uint64_t field;
    HUB_BACKPLANE_STATS(HUB_STAT_X)
#undef HUB_STAT_X
    struct hub_hist rtt;
};

#endif
