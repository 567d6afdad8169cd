/*
 * hub/stats.h - per-loop counters.
 *
 * Each loop writes only its own struct (single writer, HUB_STAT_ADD); any
 * thread may read with HUB_STAT_GET (relaxed atomics). /stats and /metrics
 * sum them. A leaf: hub/stats.c defines the histogram and the reason names.
 */
#ifndef HUB_STATS_H
#define HUB_STATS_H

#include <stdint.h>

#define HUB_STAT_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define HUB_STAT_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define HUB_STAT_ADD(x, n)                                                     \
    __atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (n),      \
                     __ATOMIC_RELAXED)
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

struct hub_loop_stats {
    uint64_t sessions;          /* live now */
    uint64_t accepted;          /* sessions established, total */
    uint64_t closed[HUB_CLOSE_N];
    uint64_t rejected_http;     /* 400/403/426/431/503 before upgrade */
    uint64_t pings_sent;
    uint64_t pongs;             /* WebSocket pongs received */
    uint64_t pusher_pings;      /* pusher:ping answered */
    uint64_t msgs_in, bytes_in;
    uint64_t msgs_out, bytes_out;
    uint64_t writes;            /* corked writes (deliveries / writes) */
    uint64_t bad_messages;      /* invalid JSON or shape */
    uint64_t client_events;
    uint64_t client_events_dropped; /* rate limited or refused */
    uint64_t subscriptions;     /* live local memberships */
    uint64_t publishes;         /* frames delivered to this loop */
    uint64_t inbox_depth;       /* items drained in the last wakeup */
    uint64_t inbox_max;
    uint64_t accept_paused;     /* EMFILE pauses */
    uint64_t close_timeouts;    /* closes the peer never completed: killed */
    uint64_t queued_bytes;      /* gauge: outbound bytes queued on this loop */
    uint64_t queue_budget_drops; /* deliveries refused by the hub's budget */
    uint64_t subscriptions_refused; /* over max_subscriptions */
    uint64_t pong_armed;        /* sessions whose pong deadline is in the wheel */
    /* Heartbeat task. */
    uint64_t hb_runs, hb_failures, hb_last_scan_ns, hb_max_scan_ns;
    uint64_t hb_last_slice_ns, hb_max_slice_ns;
    /* Wheel. */
    uint64_t wheel_pending, wheel_fired, wheel_cancelled;
    uint64_t wheel_last_advance_ns, wheel_max_advance_ns, wheel_max_late_ms;
    /* Fires by lateness (now - deadline), in the wheel's buckets: < tick/4,
     * < tick/2, < tick, < 2 ticks, more; and their sum. */
    uint64_t wheel_late[5], wheel_late_sum_ms;
    /* Stalls: the wheel's driver came more than two ticks late (the loop's
     * thread did not run), and how long the worst gap was. */
    uint64_t stalls, max_stall_ms;
    struct hub_hist pong_rtt;
    struct hub_hist hb_scan;
    struct hub_hist wheel_advance;
};

#endif
