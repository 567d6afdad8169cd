/*
 * server/redis/redis_dir.c - the cluster-wide directory's network half
 * (server/redis/redis_dir.h; the design is docs/SCALING.md): its life on
 * the backplane thread. Its ops are server/redis/redis_dir_ops.c, its
 * REJOIN server/redis/redis_dir_rejoin.c, its script calls
 * server/redis/redis_call.c; the state they share is
 * server/redis/redis_dir_int.h.
 *
 * Thread: the backplane thread (create and free on the main thread before
 * start / after stop).
 */
#include "server/redis/redis_dir.h"

#include <stdlib.h>
#include <string.h>

#include "server/redis/redis_dir_int.h"
#include "server/redis/redis_dir_ops.h"
#include "server/redis/redis_dir_rejoin.h"

struct srv_redis_dir *srv_redis_dir_create(
    struct srv_redis *r, struct srv_redis_async *(*cmd)(struct srv_redis *r),
    bool (*confirmed)(struct srv_redis *r, const char *name, size_t len),
    struct hub_cluster *c, const char *node_id)
{
    struct srv_redis_dir *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    d->node = strdup(node_id);
    if (!d->node) {
        free(d);
        return NULL;
    }
    d->r = r;
    d->confirmed_fn = confirmed;
    d->c = c;
    d->st = hub_cluster_stats(c);
    d->parked_tail = &d->parked;
    d->calls = (struct srv_redis_call_ctx){
        .r = r, .cmd_fn = cmd, .c = c, .st = d->st, .node = d->node};
    return d;
}

void srv_redis_dir_free(struct srv_redis_dir *d)
{
    struct hub_cluster_op *op, *next;

    if (!d)
        return;
    /* Joins still waiting for a SUBSCRIBE: their callers get -ECANCELED
     * at the cluster's destroy, after the loops (hub/cluster/cluster.h). */
    for (op = d->parked; op; op = next) {
        next = op->next;
        hub_cluster_dir_cancel(d->c, op->dop);
        op->dop = NULL;
        hub_cluster_op_free(op);
    }
    srv_redis_dir_refresh_clear(d);
    free(d->rj.tok);
    free(d->node);
    free(d);
}

void srv_redis_dir_set_ready(struct srv_redis_dir *d,
                             struct srv_redis_ready *rd)
{
    if (d)
        d->ready = rd;
}

void srv_redis_dir_down(struct srv_redis_dir *d)
{
    srv_redis_dir_park_down(d);
    /* A REJOIN in progress ends here, silently: the next up rejoins. */
    d->rj.gen++;
    d->rj.sent_all = false;
    free(d->rj.tok);
    d->rj.tok = NULL;
    srv_redis_call_forget_all(&d->calls);
}

void srv_redis_dir_up(struct srv_redis_dir *d)
{
    if (!srv_redis_call_conn(&d->calls))
        return;
    srv_redis_call_load_all(&d->calls);
    /* The snapshot brings the directory up, under the same lock: from it
     * on joins are sent; made before it, they are in it and the local
     * engine told their edges (hub_cluster_dir_snapshot). Raising the flag
     * here, before the snapshot, lost the webhooks of a join made in
     * between. After: up even when the REJOIN could not start (out of
     * memory before its snapshot), as before. */
    srv_redis_dir_rejoin_now(d);
    hub_cluster_dir_set_up(d->c, true);
}
