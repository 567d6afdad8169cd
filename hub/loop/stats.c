/*
 * hub/loop/stats.c - the leaf helpers of hub/loop/stats.h: the histogram buckets and
 * the close-reason labels. Below every other hub file; calls nothing.
 */
#include "hub/loop/stats.h"

const uint64_t hub_hist_bounds_us[HUB_HIST_N] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000,
    UINT64_MAX,
};

void hub_hist_add(struct hub_hist *h, uint64_t us)
{
    unsigned i = 0;

    while (us >= hub_hist_bounds_us[i])
        i++;
    HUB_STAT_ADD(h->count[i], 1);
    HUB_STAT_ADD(h->sum_us, us);
}

static const char *const reason_names[HUB_CLOSE_N] = {
    [HUB_CLOSE_PONG_TIMEOUT] = "4201",
    [HUB_CLOSE_IDLE] = "4202",
    [HUB_CLOSE_SLOW] = "4100",
    [HUB_CLOSE_TOO_BIG] = "1009",
    [HUB_CLOSE_PEER] = "peer",
    [HUB_CLOSE_DRAIN] = "drain",
    [HUB_CLOSE_APP] = "app",
    [HUB_CLOSE_ERROR] = "error",
    [HUB_CLOSE_WRITE_TIMEOUT] = "write_timeout",
    [HUB_CLOSE_QUEUE_BUDGET] = "queue_budget",
};

const char *hub_close_reason_name(enum hub_close_reason why)
{
    return (unsigned)why < HUB_CLOSE_N ? reason_names[why] : "?";
}
