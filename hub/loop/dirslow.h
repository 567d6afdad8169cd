/*
 * hub/loop/dirslow.h - test only: the in-process directory behind the
 * asynchronous ops of hub/loop/backplane.h, answering every pusher:subscribe
 * join and every REST read delay_ms late (a timer on the calling loop's
 * wheel, so done runs on that loop as the contract says). It lets the
 * integration tests drive the hub's pending subscriptions and deferred
 * HTTP answers against the real server (LUBDUB_TEST_DIR_DELAY_MS,
 * server/main.c; tests/integration/dir_async.test.js) without Redis.
 * Never for production: it only adds latency.
 *
 * Thread: as the backplane contract (ops from any loop, each job on its
 * loop); destroy after every loop is gone.
 */
#ifndef HUB_DIRSLOW_H
#define HUB_DIRSLOW_H

#include "hub/loop/backplane.h"

/* Fill bp with the delayed directory and the local bus. 0 or -ENOMEM. */
int hub_dirslow_backplane(struct hub_backplane *bp, unsigned delay_ms);

#endif
