/*
 * hub/loop/stats_table.h - the one list of lubdub's counters.
 *
 * Every per-loop counter and gauge is one row of HUB_LOOP_STATS; every
 * per-loop histogram one row of HUB_LOOP_HISTS; the hub-wide /metrics
 * series one row of HUB_HUB_METRICS. From these rows come struct
 * hub_loop_stats (hub/loop/stats.h), /stats and /metrics (server/ops/stats.c), and
 * tests/unit/test_stats.c, which holds docs/OPERATIONS.md to the same
 * names and types. A new counter is a new row here and nothing else
 * (plus its HUB_STAT_ADD where it happens, and its docs row).
 *
 * X(field, type, fmt, total, group, key, metric, help)
 *   field   member of struct hub_loop_stats (HUB_STAT_ADD(l->stats.field))
 *   type    the Prometheus type: counter, gauge or histogram
 *   fmt     storage and rendering:
 *           U64        one uint64_t; /stats integer, /metrics integer
 *           NS_MS      nanoseconds; /stats milliseconds (real)
 *           MS_S       milliseconds; /stats integer ms, /metrics seconds
 *           BY_REASON  uint64_t[HUB_CLOSE_N]; /stats object by reason
 *                      (hub_close_reason_name), /metrics label reason
 *           LATE       uint64_t[HUB_LATE_N], the wheel's lateness buckets;
 *                      /stats array of {lt_ms, count}, /metrics a
 *                      histogram whose _sum is wheel_late_sum_ms
 *           RATIO      no storage: msgs_out / writes (0 with no writes)
 *   total   position in /stats "totals" (1, 2, ...: the sum over loops,
 *           in that order), 0 for per-loop only
 *   group   the /stats per-loop object the key sits in: LOOP (the loop's
 *           own object), HEARTBEAT ("heartbeat"), WHEEL ("wheel")
 *   key     the /stats key
 *   metric  the /metrics name after "lubdub_", "" for none
 *   help    the /metrics HELP text (for rows without a metric: what the
 *           value is)
 *
 * Row order is /stats order inside each group (jansson keeps insertion
 * order), and /metrics order; rows of one group stay together.
 */
#ifndef HUB_STATS_TABLE_H
#define HUB_STATS_TABLE_H

/* Fires by lateness (now - deadline), in the wheel's buckets: < tick/4,
 * < tick/2, < tick, < 2 ticks, more. */
#define HUB_LATE_N 5

#define HUB_LOOP_STATS(X)                                                      \
    X(sessions, gauge, U64, 1, LOOP, "sessions", "sessions",                   \
      "Live WebSocket sessions.")                                              \
    X(accepted, counter, U64, 2, LOOP, "accepted", "sessions_accepted_total",  \
      "Sessions established.")                                                 \
    X(closed, counter, BY_REASON, 3, LOOP, "closed",                           \
      "sessions_closed_total", "Sessions closed, by reason.")                  \
    X(close_timeouts, counter, U64, 0, LOOP, "close_timeouts",                 \
      "close_timeouts_total", "Closes the peer never completed (killed).")     \
    X(rejected_http, counter, U64, 0, LOOP, "rejected_http",                   \
      "http_rejected_total",                                                   \
      "Requests refused before the handshake (400/403/426/431/503).")          \
    X(pings_sent, counter, U64, 8, LOOP, "pings_sent", "pings_sent_total",     \
      "WebSocket pings sent by the heartbeat.")                                \
    X(pongs, counter, U64, 9, LOOP, "pongs", "pongs_total",                    \
      "WebSocket pongs received.")                                             \
    X(pusher_pings, counter, U64, 0, LOOP, "pusher_pings",                     \
      "pusher_pings_total", "pusher:ping messages answered.")                  \
    X(msgs_in, counter, U64, 4, LOOP, "msgs_in", "messages_in_total",          \
      "Inbound WebSocket messages.")                                           \
    X(bytes_in, counter, U64, 6, LOOP, "bytes_in", "bytes_in_total",           \
      "Inbound message bytes.")                                                \
    X(msgs_out, counter, U64, 5, LOOP, "msgs_out", "messages_out_total",       \
      "Outbound WebSocket messages (deliveries).")                             \
    X(bytes_out, counter, U64, 7, LOOP, "bytes_out", "bytes_out_total",        \
      "Outbound bytes written.")                                               \
    X(writes, counter, U64, 11, LOOP, "writes", "writes_total",                \
      "Corked writes (deliveries per write = messages_out / writes).")         \
    X(deliveries_per_write, gauge, RATIO, 0, LOOP, "deliveries_per_write", "", \
      "msgs_out / writes: deliveries per corked write.")                       \
    X(bad_messages, counter, U64, 0, LOOP, "bad_messages",                     \
      "bad_messages_total", "Inbound messages rejected as invalid.")           \
    X(client_events, counter, U64, 0, LOOP, "client_events",                   \
      "client_events_total", "Client events relayed.")                         \
    X(client_events_dropped, counter, U64, 0, LOOP, "client_events_dropped",   \
      "client_events_dropped_total",                                           \
      "Client events refused (rate limit, not allowed).")                      \
    X(subscriptions, gauge, U64, 10, LOOP, "subscriptions", "subscriptions",   \
      "Live channel subscriptions.")                                           \
    X(publishes, counter, U64, 0, LOOP, "publishes", "publishes_total",        \
      "Published frames delivered to this loop for fan-out.")                  \
    X(inbox_depth, gauge, U64, 0, LOOP, "inbox_depth", "",                     \
      "Inbox items drained in the last wakeup.")                               \
    X(inbox_max, gauge, U64, 0, LOOP, "inbox_max", "inbox_max_depth",          \
      "Most inbox items drained in one wakeup.")                               \
    X(accept_paused, counter, U64, 0, LOOP, "accept_paused",                   \
      "accept_pauses_total", "Accept pauses for lack of file descriptors.")    \
    X(ws_direct_sessions, counter, U64, 0, LOOP, "ws_direct_sessions",         \
      "ws_direct_sessions_total",                                              \
      "WebSocket sessions read by lubdub itself (--ws-direct-read).")          \
    X(ws_direct_rx_released, counter, U64, 0, LOOP, "ws_direct_rx_released",   \
      "ws_direct_rx_released_total",                                           \
      "Bypassed sessions that gave lws's receive buffer back at the handover.") \
    X(ws_direct_declined, counter, U64, 0, LOOP, "ws_direct_declined",         \
      "ws_direct_declined_total",                                              \
      "Plain-TCP sessions left on lws's read path (lws held their bytes).")   \
    X(ws_direct_reads, counter, U64, 0, LOOP, "ws_direct_reads",               \
      "ws_direct_reads_total",                                                 \
      "recv() calls of the read bypass that returned data.")                   \
    X(ws_direct_proto_errors, counter, U64, 0, LOOP, "ws_direct_proto_errors", \
      "ws_direct_proto_errors_total",                                          \
      "Bypassed sessions failed for an RFC 6455 framing error (1002).")        \
    X(compression_sessions, counter, U64, 0, LOOP, "compression_sessions",     \
      "compression_sessions_total",                                            \
      "Sessions that negotiated permessage-deflate.")                          \
    X(compressed_frames, counter, U64, 0, LOOP, "compressed_frames",           \
      "compressed_frames_total",                                               \
      "Compressed variants of frames made (one per publication a "            \
      "compressing subscriber got).")                                          \
    X(compressed_bytes_in, counter, U64, 0, LOOP, "compressed_bytes_in",       \
      "compressed_bytes_in_total",                                             \
      "Wire bytes of the frames compressed, before.")                          \
    X(compressed_bytes_out, counter, U64, 0, LOOP, "compressed_bytes_out",     \
      "compressed_bytes_out_total",                                            \
      "Wire bytes of their compressed variants, after.")                       \
    X(inflated_messages, counter, U64, 0, LOOP, "inflated_messages",           \
      "inflated_messages_total",                                               \
      "Compressed messages received and inflated.")                            \
    X(resume_sessions, gauge, U64, 22, LOOP, "resume_sessions",               \
      "resume_sessions",                                                       \
      "Sessions that asked to resume (lubdub:resume): they get markers.")       \
    X(resumes, counter, U64, 23, LOOP, "resumes", "resumes_total",             \
      "Resumed subscriptions whose missed events were replayed.")              \
    X(resumes_failed, counter, U64, 24, LOOP, "resumes_failed",                \
      "resumes_failed_total",                                                  \
      "Resumed subscriptions told lubdub:resume_failed (history did not "     \
      "reach back).")                                                          \
    X(replayed_events, counter, U64, 25, LOOP, "replayed_events",              \
      "replayed_events_total",                                                 \
      "Events replayed to resumed subscriptions.")                             \
    X(rx_paused, counter, U64, 20, LOOP, "rx_paused", "rx_paused_total",       \
      "Times a session stopped being read: its send queue passed half of "      \
      "max_queue (input backpressure).")                                        \
    X(subscribe_rate_refused, counter, U64, 21, LOOP,                          \
      "subscribe_rate_refused", "subscribe_rate_refused_total",                \
      "Subscribe, unsubscribe and signin requests refused by "                 \
      "subscribe_rate.")                                                        \
    X(queued_bytes, gauge, U64, 12, LOOP, "queued_bytes", "queued_bytes",      \
      "Outbound bytes waiting in send queues.")                                \
    X(queue_budget_drops, counter, U64, 13, LOOP, "queue_budget_drops",        \
      "queue_budget_drops_total",                                              \
      "Deliveries refused by the queue budget (the reader is closed).")        \
    X(subscriptions_refused, counter, U64, 14, LOOP, "subscriptions_refused",  \
      "subscriptions_refused_total",                                           \
      "Subscriptions refused over max_subscriptions.")                         \
    X(unauthorized_closes, counter, U64, 0, LOOP, "unauthorized_closes",       \
      "unauthorized_closes_total",                                             \
      "Sessions closed 4009 for not being authorized in time.")                \
    X(watchlist_events, counter, U64, 0, LOOP, "watchlist_events",             \
      "watchlist_events_total",                                                \
      "pusher_internal:watchlist_events published (per watcher).")             \
    X(watchlist_events_dropped, counter, U64, 0, LOOP,                         \
      "watchlist_events_dropped", "watchlist_events_dropped_total",            \
      "Watchlist events lost for lack of memory.")                             \
    X(cache_hits, counter, U64, 15, LOOP, "cache_hits", "cache_hits_total",    \
      "Cache channel subscribers sent the cached event.")                      \
    X(cache_misses, counter, U64, 16, LOOP, "cache_misses",                    \
      "cache_misses_total",                                                    \
      "Cache channel subscribers sent pusher:cache_miss.")                     \
    X(cache_stores, counter, U64, 17, LOOP, "cache_stores",                    \
      "cache_stores_total", "Events kept as a cache channel's last event.")    \
    X(cache_evictions, counter, U64, 18, LOOP, "cache_evictions",              \
      "cache_evictions_total",                                                 \
      "Cached events evicted to keep an app under cache_max_bytes.")           \
    X(cache_oversize, counter, U64, 0, LOOP, "cache_oversize",                 \
      "cache_oversize_total",                                                  \
      "Events not cached: bigger than the app's cache_max_bytes.")             \
    X(cache_nomem, counter, U64, 0, LOOP, "cache_nomem", "cache_nomem_total",  \
      "Events not cached for lack of memory (delivered all the same).")       \
    X(subscription_count_events, counter, U64, 19, LOOP,                       \
      "subscription_count_events", "subscription_count_events_total",          \
      "pusher_internal:subscription_count events published (coalesced).")     \
    X(subscription_count_dropped, counter, U64, 0, LOOP,                       \
      "subscription_count_dropped", "subscription_count_dropped_total",        \
      "Subscription count updates lost to out of memory.")                     \
    X(http_post_closes, counter, U64, 0, LOOP, "http_post_closes",             \
      "http_post_closes_total",                                                \
      "POST answers that closed keep-alive: input behind the body.")          \
    X(rest_waiting, gauge, U64, 0, LOOP, "rest_waiting", "rest_waiting",       \
      "REST requests waiting for a late directory answer.")                   \
    X(rest_answers_dropped, counter, U64, 0, LOOP, "rest_answers_dropped",     \
      "rest_answers_dropped_total",                                            \
      "REST answers dropped: the connection went before the directory's.")    \
    X(hb_runs, counter, U64, 0, HEARTBEAT, "runs", "heartbeat_runs_total",     \
      "Completed heartbeat scans.")                                            \
    X(hb_failures, counter, U64, 0, HEARTBEAT, "failures",                     \
      "heartbeat_failures_total", "Heartbeat scans with a failure.")           \
    X(hb_last_scan_ns, gauge, NS_MS, 0, HEARTBEAT, "last_scan_ms", "",         \
      "Duration of the last heartbeat scan.")                                  \
    X(hb_max_scan_ns, gauge, NS_MS, 0, HEARTBEAT, "max_scan_ms", "",           \
      "Longest heartbeat scan.")                                               \
    X(hb_last_slice_ns, gauge, NS_MS, 0, HEARTBEAT, "last_slice_ms", "",       \
      "Duration of the last heartbeat slice.")                                 \
    X(hb_max_slice_ns, gauge, NS_MS, 0, HEARTBEAT, "max_slice_ms", "",         \
      "Longest heartbeat slice.")                                              \
    X(wheel_pending, gauge, U64, 0, WHEEL, "pending", "wheel_pending",         \
      "Timers armed in the wheel.")                                            \
    X(pong_armed, gauge, U64, 0, WHEEL, "pong_armed", "wheel_pong_armed",      \
      "Pong deadlines in the wheel (sessions pinged within pong_timeout).")    \
    X(wheel_fired, counter, U64, 0, WHEEL, "fired", "wheel_fired_total",       \
      "Timers fired.")                                                         \
    X(wheel_cancelled, counter, U64, 0, WHEEL, "cancelled",                    \
      "wheel_cancelled_total", "Timers cancelled.")                            \
    X(wheel_last_advance_ns, gauge, NS_MS, 0, WHEEL, "last_advance_ms", "",    \
      "Duration of the last wheel advance.")                                   \
    X(wheel_max_advance_ns, gauge, NS_MS, 0, WHEEL, "max_advance_ms", "",      \
      "Longest wheel advance.")                                                \
    X(wheel_max_late_ms, gauge, MS_S, 0, WHEEL, "max_lateness_ms",             \
      "wheel_max_lateness_seconds",                                            \
      "Latest a timer has fired after its deadline.")                          \
    X(wheel_late, histogram, LATE, 0, WHEEL, "lateness",                       \
      "wheel_lateness_seconds",                                                \
      "How late timers fired after their deadline (a stalled loop shows in "   \
      "the top bucket and the sum).")                                          \
    X(wheel_late_sum_ms, counter, U64, 0, WHEEL, "lateness_sum_ms", "",        \
      "Summed lateness of every fire (the lateness histogram's sum).")         \
    X(stalls, counter, U64, 0, WHEEL, "stalls", "loop_stalls_total",           \
      "Times the loop's wheel driver came more than two ticks late (the "      \
      "loop did not run); each holds timers for one read pass.")               \
    X(max_stall_ms, gauge, MS_S, 0, WHEEL, "max_stall_ms",                     \
      "loop_max_stall_seconds", "Longest gap between two wheel advances.")

/* X(field, metric, help): struct hub_hist members, in microseconds, shown
 * in /metrics only (seconds). */
#define HUB_LOOP_HISTS(X)                                                      \
    X(pong_rtt, "pong_rtt_seconds", "WebSocket ping to pong round-trip time.") \
    X(hb_scan, "heartbeat_scan_seconds",                                       \
      "Duration of one heartbeat scan (all slices).")                          \
    X(wheel_advance, "wheel_advance_seconds",                                  \
      "Duration of one timing-wheel advance.")

/* X(id, type, metric, help): the hub-wide /metrics series, no loop label;
 * server/ops/stats.c writes each id's value. */
#define HUB_HUB_METRICS(X)                                                     \
    X(UPTIME, gauge, "uptime_seconds", "Seconds since start.")                 \
    X(DRAINING, gauge, "draining", "1 while the hub drains.")                  \
    X(BUILD_INFO, gauge, "build_info", "Version and commit of the running "    \
      "hub.")                                                                  \
    X(APP_SESSIONS, gauge, "app_sessions", "Live sessions per app (all "       \
      "loops).")                                                               \
    X(QUEUE_BUDGET, gauge, "queue_budget_bytes",                               \
      "The hub-wide send queue budget (max_queued_total).")                    \
    X(CACHE_ENTRIES, gauge, "cache_entries", "Cached events per app (cache "   \
      "channels).")                                                            \
    X(CACHE_BYTES, gauge, "cache_bytes", "Bytes charged to cached events per " \
      "app (against cache_max_bytes).")                                        \
    /* Recovery's history (hub/channel/history.h): per app, then hub-wide. */  \
    X(HISTORY_EVENTS, gauge, "history_events", "Events history holds per "     \
      "app (recovery).")                                                       \
    X(HISTORY_BYTES, gauge, "history_bytes", "Bytes charged to history per "   \
      "app (against its history max_bytes).")                                  \
    X(HISTORY_CHANNELS, gauge, "history_channels", "Channels whose history "   \
      "holds at least one event (all apps).")                                  \
    X(HISTORY_MAX_BYTES, gauge, "history_max_bytes",                           \
      "The hub-wide bound of what history holds (--history-max-bytes).")       \
    X(HISTORY_EVICTED, counter, "history_evicted_total",                       \
      "History events evicted before their ttl, oldest first, to hold a "      \
      "channel's size, an app's max_bytes or --history-max-bytes.")            \
    X(HISTORY_EXPIRED, counter, "history_expired_total",                       \
      "History events dropped at the end of their app's ttl.")                 \
    /* The process against its limits (server/base/procstat.h), for the   \
     * alerts "fd or memory near its limit"; absent when unreadable. */      \
    X(OPEN_FDS, gauge, "open_fds", "File descriptors the process has open.")  \
    X(MAX_FDS, gauge, "max_fds", "The process's file-descriptor limit "       \
      "(soft RLIMIT_NOFILE, as --fd-limit set it).")                          \
    X(RESIDENT_MEMORY, gauge, "resident_memory_bytes",                        \
      "Resident memory of the process.")                                      \
    X(MEMORY_LIMIT, gauge, "memory_limit_bytes", "The memory limit of the "   \
      "process's cgroup; absent when there is none.")                         \
    X(APP_REST_LIMITED, counter, "app_rest_rate_limited_total",                \
      "REST units refused with 429 per app: kind=\"events\" counts events "   \
      "(a batch counts each), kind=\"reads\" read requests.")

/* X(field, type, key, metric, help): the scale-out backplane's hub-wide
 * counters (struct hub_backplane_stats, hub/loop/stats.h), written by the
 * backplane thread (and, for lost, by loops whose hand-off queue is full).
 * /stats shows them under "backplane" when --redis is set; /metrics
 * always declares them and writes their series only with --redis. */
#define HUB_BACKPLANE_STATS(X)                                                 \
    X(up, gauge, "up", "backplane_up",                                        \
      "1 while the Redis backplane is connected, 0 while it is down.")        \
    X(reconnects, counter, "reconnects", "backplane_reconnects_total",        \
      "Times the backplane came back up after being down.")                   \
    /* Readiness (/readyz; docs/SCALING.md, "Readiness"). */                 \
    X(joined, gauge, "joined", "backplane_joined",                            \
      "1 while this node is joined: Redis up and its share of the "          \
      "directory in sync (its REJOIN done); 0 otherwise.")                    \
    X(connect_attempts, gauge, "connect_attempts",                            \
      "backplane_connect_attempts",                                          \
      "Connects to Redis that failed since the backplane was last up (0 "    \
      "while up).")                                                           \
    X(connect_failures, counter, "connect_failures",                          \
      "backplane_connect_failures_total",                                    \
      "Connects to Redis that failed: refused, timed out, or AUTH, SELECT "  \
      "or PING answered with an error.")                                      \
    X(published, counter, "published", "backplane_published_total",          \
      "Envelopes published to Redis (events and terminate orders).")          \
    X(received, counter, "received", "backplane_received_total",             \
      "Envelopes from other nodes received and handed to the loops.")         \
    X(own_ignored, counter, "own_ignored", "backplane_own_ignored_total",     \
      "Envelopes from this node itself, ignored on receipt.")                 \
    X(lost, counter, "lost", "backplane_lost_total",                          \
      "Cross-node envelopes not sent: Redis down, or the hand-off queue "     \
      "full.")                                                                \
    X(gaps, counter, "gaps", "backplane_gaps_total",                          \
      "Envelopes missing in another node's per-channel sequence (or in "    \
      "Redis's per-user sequence of watchlist events).")                     \
    X(gaps_filled, counter, "gaps_filled", "backplane_gaps_filled_total",   \
      "Recovery: missing publications on channels with history delivered "  \
      "from the channel's stream instead (in order, before what followed).") \
    X(bad, counter, "bad", "backplane_bad_total",                             \
      "Messages from Redis that were not a valid envelope (dropped).")        \
    X(auth_dropped, counter, "auth_dropped", "backplane_auth_dropped_total",  \
      "Messages from Redis dropped because they do not verify with the "     \
      "cluster key (forged, unsigned, or another key).")                     \
    X(replays, counter, "replays", "backplane_replays_total",                 \
      "Messages from Redis that verify but were dropped as replays (a "      \
      "counter already seen from that node, or older than --node-lease).")   \
    X(channels, gauge, "channels", "backplane_channels",                      \
      "Redis channels this node is subscribed to (channels with local "       \
      "subscribers).")                                                        \
    X(queue, gauge, "queue", "backplane_queue",                               \
      "Items waiting in the loops-to-backplane hand-off queue.")              \
    X(cache_received, counter, "cache_received",                             \
      "backplane_cache_received_total",                                      \
      "Cache-channel events other nodes published, kept in this node's "     \
      "cache replica (every node receives them).")                           \
    X(cache_loaded, counter, "cache_loaded", "backplane_cache_loaded_total",  \
      "Cache entries read from Redis when the backplane came up.")           \
    X(cache_write_failed, counter, "cache_write_failed",                     \
      "backplane_cache_write_failed_total",                                  \
      "Cache entries this node could not write to Redis.")                   \
    X(history_write_failed, counter, "history_write_failed",                 \
      "backplane_history_write_failed_total",                                \
      "Recovery: writes of kept publications to their channel's stream "    \
      "that Redis refused or that could not go out.")                        \
    X(history_read_failed, counter, "history_read_failed",                   \
      "backplane_history_read_failed_total",                                 \
      "Recovery: reads of a channel's stream that got no answer (Redis "     \
      "away, a bad reply); the client is told resume_failed.")               \
    X(dir_ops, counter, "dir_ops", "backplane_dir_ops_total",                \
      "Directory operations (joins, leaves, reads) sent to Redis.")          \
    X(dir_pending, gauge, "dir_pending", "backplane_dir_pending",            \
      "Joins and reads waiting for Redis's answer.")                         \
    X(dir_parked, gauge, "dir_parked", "backplane_dir_parked",              \
      "Joins, leaves and signins held until Redis confirms the SUBSCRIBE "   \
      "of their channel (or the node unsubscribes it).")                     \
    X(dir_local, counter, "dir_local", "backplane_dir_local_total",          \
      "Directory operations answered from this node's own state because "    \
      "Redis was down.")                                                     \
    X(member_events, counter, "member_events",                               \
      "backplane_member_events_total",                                       \
      "Presence member events received from Redis.")                         \
    X(member_gaps, counter, "member_gaps", "backplane_member_gaps_total",    \
      "Presence member events missing in a channel's cluster sequence.")     \
    X(rejoins, counter, "rejoins", "backplane_rejoins_total",                \
      "Times this node re-registered its whole share in Redis (REJOIN).")    \
    /* Watchlists across nodes (server/redis/lua/watchlist.lua). */           \
    X(online_edges, counter, "online_edges", "backplane_online_edges_total", \
      "Online/offline edges (first or last connection anywhere) decided by " \
      "this node's signin and signout scripts.")                             \
    X(watch_skipped, counter, "watch_skipped",                               \
      "backplane_watch_skipped_total",                                       \
      "Watchlist ids a signin's script left out: the watched user had "      \
      "max_watchers watchers cluster-wide.")                                 \
    /* Node lease and reaper (server/redis/redis_lease.h). */                       \
    X(nodes, gauge, "nodes", "backplane_nodes",                               \
      "Nodes with a live lease, as this node's last lease tick saw them.")    \
    X(reaped, counter, "reaped", "backplane_reaped_total",                    \
      "Dead nodes this node reaped (their subscriptions and members "         \
      "removed).")                                                            \
    X(lease_failures, counter, "lease_failures",                              \
      "backplane_lease_failures_total",                                       \
      "Lease renewals that failed or were still unanswered at the next "      \
      "tick.")                                                                \
    X(lease_lost, counter, "lease_lost", "backplane_lease_lost_total",        \
      "Times this node found it had been reaped while away and "              \
      "re-registered.")

/* The backplane's Redis PING round-trip histogram (microseconds, shown in
 * seconds), /metrics only. */
#define HUB_BACKPLANE_RTT_METRIC "backplane_rtt_seconds"
#define HUB_BACKPLANE_RTT_HELP "Redis PING round-trip time (once a second)."

#endif
