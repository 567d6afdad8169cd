/*
 * server/webhook/webhook_metrics.h - what the webhook sender shows: the
 * /stats "webhooks" object and the webhook families of /metrics, one row
 * each of SRV_WH_METRICS. From these rows come the families /metrics
 * writes (server/webhook/webhook_metrics.c, in row order) and
 * tests/unit/test_stats.c, which holds docs/OPERATIONS.md to the same
 * names and types. A new webhook metric is a new row here (plus where it
 * is counted, and its docs row).
 *
 * X(metric, type, fmt, field, help)
 *   metric  the /metrics name after "lubdub_"
 *   type    the Prometheus type: counter, gauge or histogram
 *   fmt     where the value comes from and how it is shown:
 *           EP         one series per endpoint (labels app, url): the
 *                      atomic counter field of struct srv_wh_ep
 *           EP_AGE_S   per endpoint: field holds a wall-clock ms (0:
 *                      none); shown as the age in whole seconds
 *           EP_UP      per endpoint: the atomic_bool field, as 0 or 1
 *           EP_LATENCY per endpoint: the histogram of field[N_LAT + 1]
 *                      (srv__wh_lat_bounds_s), lat_sum_ms and lat_count
 *           EVENTS_DROPPED  one series while the sender runs: the events
 *                      the queue dropped plus those lost to out of memory
 *                      (field unused)
 *           STREAM     one series with --redis: the HUB_STAT field of
 *                      struct srv_whs (server/webhook/webhook_stream.h)
 *   field   the member named above
 *   help    the /metrics HELP text
 *
 * The families are declared even with no webhooks (no series then), so
 * /metrics always lists the same families.
 *
 * Thread: any (the sender's figures are read with relaxed atomics).
 */
#ifndef SRV_WEBHOOK_METRICS_H
#define SRV_WEBHOOK_METRICS_H

#include <jansson.h>

struct srv;

#define SRV_WH_METRICS(X)                                                      \
    X(webhook_sent_total, counter, EP, sent,                                   \
      "Webhook batches delivered (2xx)")                                       \
    X(webhook_failed_total, counter, EP, failed,                               \
      "Webhook attempts that failed")                                          \
    X(webhook_retried_total, counter, EP, retried,                             \
      "Webhook attempts that were retries")                                    \
    X(webhook_dead_lettered_total, counter, EP, dead,                          \
      "Webhook batches given up and kept as dead letters")                     \
    X(webhook_dropped_total, counter, EP, dropped,                             \
      "Webhook batches dropped because the pending store was full")            \
    X(webhook_queue_depth, gauge, EP, depth,                                   \
      "Webhook batches pending per endpoint")                                  \
    X(webhook_oldest_pending_age_seconds, gauge, EP_AGE_S, oldest_ms,          \
      "Age of the oldest pending webhook batch per endpoint")                  \
    X(webhook_endpoint_up, gauge, EP_UP, up,                                   \
      "1 when the endpoint's last attempt succeeded")                          \
    X(webhook_delivery_latency_seconds, histogram, EP_LATENCY, lat,            \
      "From a batch's creation to its delivery")                               \
    X(webhook_events_dropped_total, counter, EVENTS_DROPPED, -,                \
      "Webhook events dropped before batching (queue full, no memory)")       \
    X(webhook_stream_added_total, counter, STREAM, added,                      \
      "Client events and cache misses this node added to the redis stream")   \
    X(webhook_stream_read_total, counter, STREAM, read,                        \
      "Redis stream entries this node read as an app's consumer")             \
    X(webhook_stream_claimed_total, counter, STREAM, claimed,                  \
      "Pending redis stream entries claimed when taking an app's lease")      \
    X(webhook_stream_dropped_total, counter, STREAM, dropped,                  \
      "Webhook events refused by a full redis stream")                        \
    X(webhook_leases_held, gauge, STREAM, held,                                \
      "Apps whose webhook lease this node holds")

/* /stats: the "webhooks" object (new reference; NULL when no sender
 * runs). */
json_t *srv_wh_stats_json(struct srv *srv);
/* /metrics: append the webhook families, in row order (put appends text
 * to b). */
void srv_wh_metrics(struct srv *srv, void (*put)(void *b, const char *text),
                    void *b);

#endif
