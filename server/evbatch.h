/*
 * server/evbatch.h - run a libev loop whose thread holds its posts to the
 * hub's loops (hub/postbatch.h) and pushes them once per pass.
 *
 * Thread: the thread that owns evl.
 */
#ifndef SERVER_EVBATCH_H
#define SERVER_EVBATCH_H

struct ev_loop;

/* ev_run(evl, 0) with batching: everything a pass's callbacks post (all the
 * messages hiredis parsed from one read) goes to each loop as one chain
 * just before the thread blocks again; what is held when ev_run returns is
 * flushed then. */
void srv_ev_run_batched(struct ev_loop *evl);

#endif
