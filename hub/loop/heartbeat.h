/*
 * hub/loop/heartbeat.h - the loop's heartbeat: a guarded fixed-delay task
 * (timer/task.h) that walks the shard in slices of HUB_HEARTBEAT_SLICE
 * sessions and has a ping queued (hub_session_queue_ping) for every
 * session silent for ping_interval. Between slices the server services
 * I/O (hub_loop_set_heartbeat_yield). Each run starts with the features'
 * beat hooks (hub/loop/feature.h), their periodic upkeep.
 *
 * Thread: the loop's own.
 */
#ifndef HUB_HEARTBEAT_H
#define HUB_HEARTBEAT_H

#include <stdint.h>

struct hub_loop;

#define HUB_HEARTBEAT_SLICE 4096

/* Start l's heartbeat task (from hub_loop_create); 0 or a task error. */
int hub_heartbeat_start(struct hub_loop *l, uint64_t now_ms);

#endif
