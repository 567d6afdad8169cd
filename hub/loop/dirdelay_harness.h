/*
 * hub/loop/dirdelay_harness.h - a test harness compiled into the product:
 * the delayed directory. The in-process directory behind the asynchronous
 * ops of hub/loop/backplane.h, answering every pusher:subscribe join and
 * every REST read delay_ms late (a timer on the calling loop's wheel, so
 * done runs on that loop as the contract says).
 *
 * Why it is in the binary: the hub's pending subscriptions and deferred
 * HTTP answers exist only behind an asynchronous directory, which in
 * production is Redis (hub/cluster). This harness lets the integration
 * tests drive those paths against the real server, with its real lws
 * callbacks, without Redis (LUBDUB_TEST_DIR_DELAY_MS, server/main.c;
 * tests/integration/dir_async.test.js); a unit test cannot reach the
 * transport's half. It costs nothing unless that variable is set, and is
 * never for production: it only adds latency.
 *
 * Thread: as the backplane contract (ops from any loop, each job on its
 * loop); destroy after every loop is gone.
 */
#ifndef HUB_DIRDELAY_HARNESS_H
#define HUB_DIRDELAY_HARNESS_H

#include "hub/loop/backplane.h"

/* Fill bp with the delayed directory and the local bus. 0 or -ENOMEM. */
int hub_dirdelay_harness_backplane(struct hub_backplane *bp, unsigned delay_ms);

#endif
