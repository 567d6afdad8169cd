/*
 * hub/loop/heartbeat.h - the loop's heartbeat: a guarded fixed-delay task
 * (timer/task.h) that walks the shard in slices of HUB_HEARTBEAT_SLICE
 * sessions and has a ping queued (hub_session_queue_ping) for every
 * session silent for ping_interval. Between slices the server services
 * I/O (hub_loop_set_heartbeat_yield).
 *
 * Thread: the loop's own.
 */
#ifndef HUB_HEARTBEAT_H
#define HUB_HEARTBEAT_H

#include <stdint.h>

struct hub_config;
struct hub_loop;

#define HUB_HEARTBEAT_SLICE 4096

/* The heartbeat's period: heartbeat_interval, or a fifth of the ping
 * interval up to 1 s; never under a tick. A feature's once-a-beat work
 * runs on its own timer at this period. */
uint64_t hub_heartbeat_period(const struct hub_config *cfg);

/* Start l's heartbeat task (from hub_loop_create); 0 or a task error. */
int hub_heartbeat_start(struct hub_loop *l, uint64_t now_ms);

#endif
