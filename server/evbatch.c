/*
 * server/evbatch.c - implementation of server/evbatch.h: an ev_prepare
 * watcher (run after every pass's callbacks, before the loop blocks)
 * flushes the thread's held posts.
 */
#include "server/evbatch.h"

#include <ev.h>

#include "hub/postbatch.h"

static void flush_cb(struct ev_loop *evl, ev_prepare *w, int revents)
{
    (void)evl;
    (void)w;
    (void)revents;
    hub_post_batch_flush();
}

void srv_ev_run_batched(struct ev_loop *evl)
{
    ev_prepare flush_w;

    hub_post_batch_begin();
    ev_prepare_init(&flush_w, flush_cb);
    ev_prepare_start(evl, &flush_w);
    /* The watcher alone must not keep ev_run going once the rest stopped. */
    ev_unref(evl);
    ev_run(evl, 0);
    ev_ref(evl);
    ev_prepare_stop(evl, &flush_w);
    hub_post_batch_end();
}
