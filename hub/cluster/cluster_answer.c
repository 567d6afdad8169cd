/*
 * hub/cluster/cluster_answer.c - the backplane thread's replies to the
 * directory's JOIN, LEAVE and QUERY ops (hub/cluster/cluster.h): the edges
 * a script decided, the view a presence reply brings, and the answer
 * posted to the waiting caller's loop (done, in its inbox); or, when Redis
 * did not answer, the same from the local directory. An answer nobody can
 * take any more (the loops going away) is kept until destroy, which calls
 * its done with -ECANCELED.
 *
 * Thread: the backplane thread (dir_cancel: any thread); the answer runs
 * on the caller's loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/cluster/cluster_int.h"
#include "hub/loop/loop.h"

static void done_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct hub_cluster_dirop *dop =
        hub_container_of(n, struct hub_cluster_dirop, inbox);

    (void)l;
    (void)now_ms;
    if (dop->req)
        dop->req->done(dop->req, dop->rc);
    else if (dop->q)
        dop->q->done(dop->q, dop->rc);
    hub_cluster_dirop_free(dop);
}

/* An answer its loop never ran (the loop went first, or the cluster was
 * closed): kept for destroy, which calls done with -ECANCELED. */
static void dir_drop(struct hub_cluster *c, struct hub_cluster_dirop *dop)
{
    if (!dop->req && !dop->q) {
        hub_cluster_dirop_free(dop);
        return;
    }
    if (dop->q && dop->rc == 0) {
        json_decref(dop->q->json);
        dop->q->json = NULL;
    }
    pthread_mutex_lock(&c->deliver_mu);
    dop->inbox.next = (struct hub_inbox_node *)(void *)c->dropped;
    c->dropped = dop;
    pthread_mutex_unlock(&c->deliver_mu);
}

static void done_drop(struct hub_inbox_node *n)
{
    struct hub_cluster_dirop *dop =
        hub_container_of(n, struct hub_cluster_dirop, inbox);

    dir_drop(dop->c, dop);
}

void hub_cluster_dir_cancel(struct hub_cluster *c,
                            struct hub_cluster_dirop *dop)
{
    if (!dop)
        return;
    if (dop->req || dop->q)
        HUB_STAT_SUB_SHARED(c->stats.dir_pending, 1);
    dir_drop(c, dop);
}

static const struct hub_inbox_ops done_ops = { done_run, done_drop };

/* Post dop's answer to its caller's loop (or free it when nobody waits or
 * the loops are gone). After the view changes it follows: the same
 * thread posts both, in order. */
static void answer(struct hub_cluster *c, struct hub_cluster_dirop *dop,
                   int rc)
{
    struct hub_loop *l = dop->req ? dop->req->loop
                         : dop->q ? dop->q->loop
                                  : NULL;

    dop->rc = rc;
    if (dop->req || dop->q)
        HUB_STAT_SUB_SHARED(c->stats.dir_pending, 1);
    if (!l) {
        hub_cluster_dirop_free(dop);
        return;
    }
    pthread_mutex_lock(&c->deliver_mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->deliver_mu);
        dir_drop(c, dop);
        return;
    }
    dop->inbox.ops = &done_ops;
    hub_loop_post(l, &dop->inbox);
    pthread_mutex_unlock(&c->deliver_mu);
}

void hub_cluster_dir_joined(struct hub_cluster *c,
                            struct hub_cluster_dirop *dop, int rc,
                            bool chan_first, bool member_first,
                            uint64_t cseq,
                            const struct hub_cluster_member *m, size_t n)
{
    if (rc) {
        hub__cluster_undo_local(c, dop);
        answer(c, dop, rc);
        return;
    }
    if (chan_first)
        hub__cluster_script_edge(c, HUB_DIR_CHANNEL_FIRST, dop->app,
                                 dop->name, dop->len, NULL);
    if (member_first)
        hub__cluster_script_edge(c, HUB_DIR_MEMBER_FIRST, dop->app,
                                 dop->name, dop->len, dop->uid);
    if (dop->presence &&
        !hub__cluster_view_joined(c, dop, member_first, cseq, m, n)) {
        /* Out of memory for the list: the join is refused, as a local
         * one would be. */
        hub__cluster_undo_local(c, dop);
        answer(c, dop, -ENOMEM);
        return;
    }
    answer(c, dop, 0);
}

void hub_cluster_dir_left(struct hub_cluster *c,
                          struct hub_cluster_dirop *dop, bool chan_last,
                          bool member_last)
{
    if (member_last)
        hub__cluster_script_edge(c, HUB_DIR_MEMBER_LAST, dop->app,
                                 dop->name, dop->len, dop->uid);
    if (chan_last)
        hub__cluster_script_edge(c, HUB_DIR_CHANNEL_LAST, dop->app,
                                 dop->name, dop->len, NULL);
    hub_cluster_dirop_free(dop);
}

void hub_cluster_dir_local(struct hub_cluster *c,
                           struct hub_cluster_dirop *dop)
{
    HUB_STAT_ADD_SHARED(c->stats.dir_local, 1);
    if (dop->kind == HUB_COP_QUERY) {
        struct hub_dir_query *q = dop->q;

        switch (q->kind) {
        case HUB_DIR_Q_INFO:
            hub_directory_info(c->dir, q->app, q->name, q->len, &q->info);
            break;
        case HUB_DIR_Q_LIST:
            q->json = hub_directory_list(c->dir, q->app, q->prefix,
                                         q->user_count);
            break;
        default:
            q->json = hub_directory_users(c->dir, q->app, q->name, q->len);
            break;
        }
        answer(c, dop, 0);
        return;
    }
    if (dop->kind == HUB_COP_LEAVE) {
        /* The hub was told "not last" (the directory delivers): with
         * Redis gone, the view delivers the local edge itself. */
        if (dop->presence && dop->local_last)
            hub__cluster_view_leave(c, dop->app, dop->name, dop->len,
                                    dop->uid, true);
        hub_cluster_dirop_free(dop);
        return;
    }
    /* JOIN: the local answer; refused when its list cannot be made. */
    if (dop->req && dop->presence && !hub__cluster_view_join_local(c, dop)) {
        hub__cluster_undo_local(c, dop);
        answer(c, dop, -ENOMEM);
        return;
    }
    answer(c, dop, 0);
}

void hub_cluster_dir_queried(struct hub_cluster *c,
                             struct hub_cluster_dirop *dop,
                             const struct hub_channel_info *info,
                             json_t *json)
{
    if (info)
        dop->q->info = *info;
    dop->q->json = json;
    answer(c, dop, 0);
}
