/*
 * hub/cluster/cluster_dir.c - the cluster's directory (hub/loop/backplane.h
 * dir ops): the in-process directory (hub/loop/directory.c), wrapped. It is
 * the truth for this node's own sessions and the answer while Redis is
 * down. The wrapper keeps a node-wide refcount per (app, channel), so that
 * the first local subscription of a channel queues a SUB (for presence
 * also one of its member-event channel) and the last one leaving queues
 * the UNSUBs: the node listens to exactly the broker channels it has
 * subscribers for. While Redis is up every join, leave and REST read is
 * also a JOIN, LEAVE or QUERY op for the backplane thread, whose replies
 * come back through hub/cluster/cluster_answer.c. This file also holds
 * whether the directory is up, the REJOIN snapshot and generation, and the
 * subscription counts refreshed after a rejoin.
 *
 * Thread: the dir ops on loop threads; the snapshot, the refresh and the
 * staleness checks on the backplane thread. The table and the generation
 * under c->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/channel/subcount.h"
#include "hub/cluster/cluster_int.h"
#include "hub/loop/loop.h"
#include "hub/wire/protocol.h"

static bool is_hash_chan(const char *name, size_t len, const void *j)
{
    return len && name[0] == '#' && !j;
}

void hub_cluster_dir_set_up(struct hub_cluster *c, bool up)
{
    atomic_store(&c->dir_up, up);
}

bool hub_cluster_dir_is_up(struct hub_cluster *c)
{
    return atomic_load(&c->dir_up);
}

uint64_t hub_cluster_dir_snapshot(
    struct hub_cluster *c,
    void (*chan)(void *ctx, unsigned app, const char *name, size_t len,
                 uint32_t subs),
    void (*member)(void *ctx, unsigned app, const char *name, size_t len,
                   const char *uid, const char *info, uint32_t conns),
    void *ctx)
{
    uint64_t gen;

    pthread_mutex_lock(&c->mu);
    /* Up in the same step as the generation moves. A join or leave (which
     * reads the flag and changes the local directory under mu) then comes
     * either before: its edges went to the local engine, and the snapshot
     * counts it; or after: it is sent with the new generation and its
     * script decides its edges. With the flag up first, one in between
     * was neither: its op stale (the REJOIN counted it, queuing no edge)
     * and its local edge withheld (up), so its webhooks were lost
     * (docs/RELIABILITY.md, "Loaded runs": webhooks lost at start-up). */
    atomic_store(&c->dir_up, true);
    gen = ++c->gen;
    hub_directory_foreach(c->dir, chan, member, ctx);
    pthread_mutex_unlock(&c->mu);
    return gen;
}

/* The counting channels of the node's own directory, collected under
 * c->mu and refreshed after it (a chain of copies). */
struct count_ch {
    struct count_ch *next;
    unsigned app;
    size_t len;
    char name[];
};

struct count_walk {
    struct hub_cluster *c;
    struct count_ch *head;
};

static void count_one(void *ctx, unsigned app, const char *name, size_t len,
                      uint32_t subs)
{
    struct count_walk *w = ctx;
    enum hub_channel_kind k = hub_channel_classify(name, len);
    struct count_ch *ch;

    if (!subs || app >= w->c->n_apps || !w->c->apps[app].subscription_count ||
        k == HUB_CHANNEL_PRESENCE || k == HUB_CHANNEL_USER)
        return;
    ch = malloc(sizeof(*ch) + len + 1);
    if (!ch)
        return;                    /* that channel waits for its next change */
    ch->app = app;
    ch->len = len;
    memcpy(ch->name, name, len);
    ch->name[len] = '\0';
    ch->next = w->head;
    w->head = ch;
}

void hub_cluster_counts_refresh(struct hub_cluster *c)
{
    struct count_walk w = { c, NULL };
    struct count_ch *ch, *next;

    pthread_mutex_lock(&c->mu);
    hub_directory_foreach(c->dir, count_one, NULL, &w);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->deliver_mu);
    for (ch = w.head; ch; ch = next) {
        next = ch->next;
        if (c->hub && !c->closed)
            hub_subcount_refresh(c->hub, ch->app, ch->name, ch->len);
        free(ch);
    }
    pthread_mutex_unlock(&c->deliver_mu);
}

bool hub__cluster_gen_stale(struct hub_cluster *c, uint64_t gen,
                            const uint64_t *cur)
{
    bool stale;

    pthread_mutex_lock(&c->mu);
    stale = gen != *cur;
    pthread_mutex_unlock(&c->mu);
    return stale;
}

bool hub_cluster_dir_stale(struct hub_cluster *c,
                           const struct hub_cluster_dirop *dop)
{
    return hub__cluster_gen_stale(c, dop->gen, &c->gen);
}

static struct hub_cluster_dirop *dirop_new(struct hub_cluster *c, int kind,
                                           unsigned app, const char *name,
                                           size_t len)
{
    struct hub_cluster_dirop *dop = calloc(1, sizeof(*dop));

    if (!dop)
        return NULL;
    dop->kind = kind;
    dop->c = c;
    dop->app = app;
    dop->app_id = hub_cluster_app_id(c, app);
    dop->len = len;
    dop->name = strndup(name, len);
    if (!dop->app_id || !dop->name) {
        hub_cluster_dirop_free(dop);
        return NULL;
    }
    return dop;
}

/* The op carrying dop: its rchan is the broker channel a JOIN waits on
 * (the member channel for presence: SUBSCRIBEd after the channel's own,
 * so its confirmation means both are). */
static struct hub_cluster_op *dir_op(struct hub_cluster *c,
                                     struct hub_cluster_dirop *dop)
{
    struct hub_cluster_op *op =
        hub__cluster_op_new_mid(c, (enum hub_cluster_op_kind)dop->kind,
                                dop->app, dop->name, dop->len,
                                dop->presence ? "m:" : "");

    if (op)
        op->dop = dop;
    return op;
}

/* Under c->mu: the refcount of a counted join, queuing SUB ops on the
 * first; -ENOMEM (nothing changed) when the record cannot be made. */
static int refs_prepare(struct hub_cluster *c, unsigned app, const char *name,
                        size_t len, bool presence, struct crec **out_new,
                        struct hub_cluster_op **ops /* [4] */)
{
    uint64_t hash = hub_chan_hash(app, name, len);
    struct hub_chan_node *n = hub_chantab_find(&c->chans, app, name, len,
                                               hash);
    struct crec *r;

    *out_new = NULL;
    memset(ops, 0, 4 * sizeof(*ops));
    if (n)
        return 0;
    r = malloc(sizeof(*r) + len + 1);
    ops[0] = hub__cluster_op_new(c, HUB_COP_SUB, app, name, len);
    ops[1] = hub__cluster_op_new(c, HUB_COP_UNSUB, app, name, len);
    if (presence) {
        ops[2] = hub__cluster_op_new_mid(c, HUB_COP_SUB, app, name, len,
                                         "m:");
        ops[3] = hub__cluster_op_new_mid(c, HUB_COP_UNSUB, app, name, len,
                                         "m:");
    }
    if (!r || !ops[0] || !ops[1] || (presence && (!ops[2] || !ops[3]))) {
        free(r);
        for (int i = 0; i < 4; i++)
            hub_cluster_op_free(ops[i]);
        return -ENOMEM;
    }
    if (presence)
        ops[2]->member = ops[3]->member = true;
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    r->node.app = app;
    r->node.name = r->name;
    r->node.name_len = (uint32_t)len;
    r->node.hash = hash;
    r->refs = 0;
    r->unsub = ops[1];
    r->munsub = ops[3];
    *out_new = r;
    return 0;
}

static void refs_abort(struct crec *r, struct hub_cluster_op **ops)
{
    if (!r)
        return;
    free(r);
    for (int i = 0; i < 4; i++)
        hub_cluster_op_free(ops[i]);
}

/* Under c->mu, after the local join counted. */
static void refs_commit(struct hub_cluster *c, unsigned app, const char *name,
                        size_t len, struct crec *r,
                        struct hub_cluster_op **ops, bool *edge_out)
{
    bool e = false;

    if (!r) {
        struct hub_chan_node *n = hub_chantab_find(
            &c->chans, app, name, len, hub_chan_hash(app, name, len));

        hub_container_of(n, struct crec, node)->refs++;
        return;
    }
    r->refs = 1;
    hub_chantab_insert(&c->chans, &r->node);
    hub__cluster_push_locked(c, ops[0], &e);
    *edge_out = *edge_out || e;
    if (ops[2]) {
        hub__cluster_push_locked(c, ops[2], &e);
        *edge_out = *edge_out || e;
    }
}

/* Under c->mu: one reference less, queuing the UNSUBs on the last. */
static void refs_drop(struct hub_cluster *c, unsigned app, const char *name,
                      size_t len, bool *edge_out)
{
    struct hub_chan_node *n = hub_chantab_find(&c->chans, app, name, len,
                                               hub_chan_hash(app, name, len));
    bool e = false;

    if (!n)
        return;
    struct crec *r = hub_container_of(n, struct crec, node);

    if (--r->refs)
        return;
    hub_chantab_remove(&c->chans, n);
    if (r->munsub) {
        hub__cluster_push_locked(c, r->munsub, &e);
        *edge_out = *edge_out || e;
    }
    hub__cluster_push_locked(c, r->unsub, &e);
    *edge_out = *edge_out || e;
    free(r);
}

void hub__cluster_undo_local(struct hub_cluster *c,
                             struct hub_cluster_dirop *dop)
{
    bool e = false, last;

    pthread_mutex_lock(&c->mu);
    hub_directory_leave_seq(c->dir, dop->app, dop->name, dop->len,
                            dop->presence ? dop->uid : NULL, &last, NULL);
    refs_drop(c, dop->app, dop->name, dop->len, &e);
    hub__cluster_wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
}

/* The JOIN op of a join (NULL out of memory). */
static struct hub_cluster_op *join_op(struct hub_cluster *c, unsigned app,
                                      const char *name, size_t len,
                                      const struct hub_presence_join *j)
{
    struct hub_cluster_dirop *dop = dirop_new(c, HUB_COP_JOIN, app, name,
                                              len);
    struct hub_cluster_op *op;

    if (dop && j) {
        dop->presence = true;
        dop->uid = strdup(j->user_id);
        dop->info = strdup(j->user_info ? j->user_info : "");
        dop->max_members = j->max_members;
        if (!dop->uid || !dop->info) {
            hub_cluster_dirop_free(dop);
            dop = NULL;
        }
    }
    op = dop ? dir_op(c, dop) : NULL;
    if (!op)
        hub_cluster_dirop_free(dop);
    return op;
}

/* The join of both entry points. req NULL: synchronous (answer from the
 * local directory; Redis told in the background). Returns < 0, 0 or
 * HUB_DIR_PENDING. */
static int cdir_join_req(struct hub_cluster *c, unsigned app,
                         const char *name, size_t len,
                         struct hub_presence_join *j,
                         struct hub_dir_join_req *req)
{
    struct crec *r;
    struct hub_cluster_op *ops[4], *op = NULL;
    struct hub_cluster_dirop *dop = NULL;
    bool presence = j != NULL, e = false;
    int rc;

    if (j)
        j->dir_events = false;
    /* Up or down is read under mu: a REJOIN snapshot (under mu, after the
     * flag went up) then either holds this join or this join is sent. */
    pthread_mutex_lock(&c->mu);
    if (hub_cluster_dir_is_up(c) && !is_hash_chan(name, len, j)) {
        op = join_op(c, app, name, len, j);
        if (!op) {
            pthread_mutex_unlock(&c->mu);
            return -ENOMEM;
        }
        dop = op->dop;
    }
    rc = refs_prepare(c, app, name, len, presence, &r, ops);
    if (!rc)
        rc = hub_directory_join(c->dir, app, name, len, j);
    if (rc) {
        pthread_mutex_unlock(&c->mu);
        refs_abort(r, ops);
        hub_cluster_op_free(op);
        return rc;
    }
    refs_commit(c, app, name, len, r, ops, &e);
    if (op) {
        bool e2 = false;

        dop->gen = c->gen;
        dop->local_first = j && j->first;
        dop->req = req;
        if (req) {
            /* The answer comes from Redis; from the push on, j is the
             * backplane thread's to fill. */
            if (j) {
                free(j->members_json);
                j->members_json = NULL;
            }
            HUB_STAT_ADD_SHARED(c->stats.dir_pending, 1);
        }
        hub__cluster_push_locked(c, op, &e2);
        e = e || e2;
    }
    hub__cluster_wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    HUB_STAT_ADD_SHARED(c->stats.dir_ops, op ? 1 : 0);
    if (!op) {
        if (presence)
            hub__cluster_view_join_down(c, app, name, len, j);
        return 0;
    }
    if (req)
        return HUB_DIR_PENDING;
    if (j) {
        /* A synchronous presence join while Redis is up (a subscribe
         * again, for the list): the view delivers member events. */
        j->first = false;
        j->dir_events = true;
    }
    return 0;
}

static int cdir_join(void *d, unsigned app, const char *name, size_t len,
                     struct hub_presence_join *j)
{
    return cdir_join_req(d, app, name, len, j, NULL);
}

static int cdir_join_async(void *d, struct hub_dir_join_req *req)
{
    return cdir_join_req(d, req->app, req->name, req->len, req->j, req);
}

static void cdir_leave(void *d, unsigned app, const char *name, size_t len,
                       const char *uid, bool *last, uint64_t *seq)
{
    struct hub_cluster *c = d;
    struct hub_cluster_dirop *dop = NULL;
    struct hub_cluster_op *op = NULL;
    bool e = false, llast = false;
    uint64_t lseq = 0;

    pthread_mutex_lock(&c->mu);
    if (hub_cluster_dir_is_up(c) && !is_hash_chan(name, len, uid)) {
        dop = dirop_new(c, HUB_COP_LEAVE, app, name, len);
        if (dop && uid) {
            dop->presence = true;
            if (!(dop->uid = strdup(uid))) {
                hub_cluster_dirop_free(dop);
                dop = NULL;
            }
        }
        op = dop ? dir_op(c, dop) : NULL;
        if (!op) {
            /* Redis is not told: the next REJOIN corrects the share. */
            hub_cluster_dirop_free(dop);
            dop = NULL;
            HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        }
    }
    hub_directory_leave_seq(c->dir, app, name, len, uid, &llast, &lseq);
    if (op) {
        dop->gen = c->gen;
        dop->local_last = llast;
        hub__cluster_push_locked(c, op, &e);
    }
    refs_drop(c, app, name, len, &e);
    hub__cluster_wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    if (op) {
        HUB_STAT_ADD_SHARED(c->stats.dir_ops, 1);
        /* The member event comes back from Redis through the view. */
        if (last)
            *last = false;
        if (seq)
            *seq = 0;
        return;
    }
    if (uid && llast)
        hub__cluster_view_leave(c, app, name, len, uid, false);
    if (last)
        *last = llast;
    if (seq)
        *seq = lseq;
}

static int cdir_query_async(void *d, struct hub_dir_query *q)
{
    struct hub_cluster *c = d;
    struct hub_cluster_dirop *dop;
    struct hub_cluster_op *op;
    bool e = false;

    if (!hub_cluster_dir_is_up(c)) {
        switch (q->kind) {
        case HUB_DIR_Q_INFO:
            hub_directory_info(c->dir, q->app, q->name, q->len, &q->info);
            return 0;
        case HUB_DIR_Q_LIST:
            q->json = hub_directory_list(c->dir, q->app, q->prefix,
                                         q->user_count);
            return 0;
        case HUB_DIR_Q_USERS:
            q->json = hub_directory_users(c->dir, q->app, q->name, q->len);
            return 0;
        default:
            return -EINVAL;
        }
    }
    if (q->kind != HUB_DIR_Q_INFO && q->kind != HUB_DIR_Q_LIST &&
        q->kind != HUB_DIR_Q_USERS)
        return -EINVAL;
    dop = dirop_new(c, HUB_COP_QUERY, q->app,
                    q->kind == HUB_DIR_Q_LIST ? "" : q->name,
                    q->kind == HUB_DIR_Q_LIST ? 0 : q->len);
    if (!dop)
        return -ENOMEM;
    dop->q = q;
    op = hub__cluster_op_new(c, HUB_COP_QUERY, q->app, dop->name, dop->len);
    if (!op) {
        hub_cluster_dirop_free(dop);
        return -ENOMEM;
    }
    op->dop = dop;
    pthread_mutex_lock(&c->mu);
    dop->gen = c->gen;
    HUB_STAT_ADD_SHARED(c->stats.dir_pending, 1);
    hub__cluster_push_locked(c, op, &e);
    hub__cluster_wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    HUB_STAT_ADD_SHARED(c->stats.dir_ops, 1);
    return HUB_DIR_PENDING;
}

static void cdir_info(void *d, unsigned app, const char *name, size_t len,
                      struct hub_channel_info *out)
{
    hub_directory_info(((struct hub_cluster *)d)->dir, app, name, len, out);
}

static json_t *cdir_list(void *d, unsigned app, const char *prefix,
                         bool user_count)
{
    return hub_directory_list(((struct hub_cluster *)d)->dir, app, prefix,
                              user_count);
}

static json_t *cdir_users(void *d, unsigned app, const char *name, size_t len)
{
    return hub_directory_users(((struct hub_cluster *)d)->dir, app, name, len);
}

const struct hub_directory_ops hub__cluster_dir_ops = {
    .join = cdir_join,
    .leave = cdir_leave,
    .info = cdir_info,
    .list = cdir_list,
    .users = cdir_users,
    .set_edge_hook = hub__cluster_set_edge_hook,
    .destroy = NULL, /* the bus's destroy frees the whole cluster */
    .join_async = cdir_join_async,
    .query_async = cdir_query_async,
    .online = hub__cluster_dir_online,
};
