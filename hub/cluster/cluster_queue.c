/*
 * hub/cluster/cluster_queue.c - the ops for the backplane thread and their
 * queue (hub/cluster/cluster.h): making an op with its broker channel
 * name, pushing it, waking the backplane thread, taking the whole queue,
 * and freeing an op with its directory or online payload.
 *
 * Loops push under c->mu (no I/O under it) and call the wake function on
 * the empty -> non-empty edge; the backplane thread takes the whole list
 * at once. Events beyond max_queue waiting are dropped and counted lost;
 * SUB and UNSUB are never dropped (they are made with the channel's
 * record, before the subscription is counted).
 */
#include <stdlib.h>
#include <string.h>

#include "hub/cluster/cluster_int.h"
#include "hub/wire/frame.h"

void hub_cluster_dirop_free(struct hub_cluster_dirop *dop)
{
    if (!dop)
        return;
    free(dop->name);
    free(dop->uid);
    free(dop->info);
    free(dop);
}

void hub_cluster_onop_free(struct hub_cluster_onop *oop)
{
    if (!oop)
        return;
    for (size_t i = 0; i < oop->n; i++)
        free(oop->ids[i]);
    free(oop->ids);
    free(oop->uid);
    free(oop);
}

void hub_cluster_op_free(struct hub_cluster_op *op)
{
    if (!op)
        return;
    if (op->f)
        hub_frame_unref(op->f);
    hub_cluster_dirop_free(op->dop);
    hub_cluster_onop_free(op->oop);
    /* A read never run (the queue is going): its asker frees it. */
    if (op->hrd)
        op->hrd->node.ops->drop(&op->hrd->node);
    free(op);
}

struct hub_cluster_op *hub__cluster_op_new_mid(struct hub_cluster *c,
                                               enum hub_cluster_op_kind kind,
                                               unsigned app, const char *name,
                                               size_t len, const char *mid)
{
    const char *id;
    size_t mlen = strlen(mid), plen = strlen(c->prefix) + mlen, ilen, total;
    struct hub_cluster_op *op;

    id = hub_cluster_app_id(c, app);
    if (!id)
        return NULL;
    ilen = strlen(id);
    total = plen + 1 + ilen + 1 + len;
    op = malloc(sizeof(*op) + total + 1);
    if (!op)
        return NULL;
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->app = app;
    op->rchan = (char *)(op + 1);
    memcpy(op->rchan, c->prefix, plen - mlen);
    op->rchan[plen - mlen] = ':';
    memcpy(op->rchan + plen - mlen + 1, mid, mlen);
    memcpy(op->rchan + plen + 1, id, ilen);
    op->rchan[plen + 1 + ilen] = ':';
    memcpy(op->rchan + plen + 2 + ilen, name, len);
    op->rchan[total] = '\0';
    op->rchan_len = total;
    op->name_off = plen + 2 + ilen;
    return op;
}

struct hub_cluster_op *hub__cluster_op_new(struct hub_cluster *c,
                                           enum hub_cluster_op_kind kind,
                                           unsigned app, const char *name,
                                           size_t len)
{
    return hub__cluster_op_new_mid(c, kind, app, name, len, "");
}

void hub__cluster_push_locked(struct hub_cluster *c, struct hub_cluster_op *op,
                              bool *wake)
{
    *wake = !c->head;
    op->next = NULL;
    *c->tail = op;
    c->tail = &op->next;
    HUB_STAT_SET(c->stats.queue, HUB_STAT_GET(c->stats.queue) + 1);
}

/* Under c->mu (so that hub_cluster_set_wake() can take the function
 * away); the wake is a non-blocking eventfd write. */
void hub__cluster_wake_locked(struct hub_cluster *c, bool edge)
{
    if (edge && c->wake)
        c->wake(c->wake_ctx);
}

void hub__cluster_enqueue(struct hub_cluster *c, struct hub_cluster_op *op)
{
    bool edge = false;

    pthread_mutex_lock(&c->mu);
    if (c->queued >= c->max_queue) {
        pthread_mutex_unlock(&c->mu);
        HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        hub_cluster_op_free(op);
        return;
    }
    c->queued++;
    hub__cluster_push_locked(c, op, &edge);
    hub__cluster_wake_locked(c, edge);
    pthread_mutex_unlock(&c->mu);
}

struct hub_cluster_op *hub_cluster_take(struct hub_cluster *c)
{
    struct hub_cluster_op *all;

    pthread_mutex_lock(&c->mu);
    all = c->head;
    c->head = NULL;
    c->tail = &c->head;
    c->queued = 0;
    HUB_STAT_SET(c->stats.queue, 0);
    pthread_mutex_unlock(&c->mu);
    return all;
}
