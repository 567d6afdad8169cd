/*
 * hub/cluster/cluster_online.c - online state and watchlists across nodes
 * (docs/SCALING.md, "Watchlists and online state"): while Redis is up each
 * change of the hub's online registry becomes an ONLINE op, pushed under
 * the registry's mutex (the caller holds it) so that ops leave in the
 * order the registry decided; the online REJOIN snapshot and its
 * generation; the resync op of one user for the backplane thread.
 *
 * Thread: the online op on loop threads, under the registry's mutex; the
 * rest on the backplane thread.
 */
#include <stdlib.h>
#include <string.h>

#include "hub/channel/online.h"
#include "hub/cluster/cluster_int.h"
#include "hub/loop/loop.h"

static struct hub_cluster_op *online_op(struct hub_cluster *c,
                                        const struct hub_online_change *ch)
{
    static const char pre[] = USER_PREFIX;
    size_t ulen = strlen(ch->user), nlen = sizeof(pre) - 1 + ulen;
    struct hub_cluster_onop *oop = calloc(1, sizeof(*oop));
    struct hub_cluster_op *op = NULL;
    char *name = malloc(nlen + 1);
    bool ok = oop && name;

    if (ok) {
        memcpy(name, pre, sizeof(pre) - 1);
        memcpy(name + sizeof(pre) - 1, ch->user, ulen + 1);
        oop->signin = ch->signin;
        oop->first = ch->first;
        oop->replace = ch->replace;
        oop->max_watchers = ch->max_watchers;
        oop->app_id = hub_cluster_app_id(c, ch->app);
        oop->uid = strdup(ch->user);
        ok = oop->app_id && oop->uid;
    }
    if (ok && ch->replace && ch->n) {
        oop->ids = calloc(ch->n, sizeof(*oop->ids));
        ok = oop->ids != NULL;
        for (size_t i = 0; ok && i < ch->n; i++) {
            oop->ids[i] = strdup(ch->ids[i]);
            ok = oop->ids[i] != NULL;
            oop->n = i + 1;
        }
    }
    if (ok)
        op = hub__cluster_op_new(c, HUB_COP_ONLINE, ch->app, name, nlen);
    free(name);
    if (!op) {
        hub_cluster_onop_free(oop);
        return NULL;
    }
    op->oop = oop;
    return op;
}

bool hub__cluster_dir_online(void *d, const struct hub_online_change *ch)
{
    struct hub_cluster *c = d;
    struct hub_cluster_op *op;
    bool e = false;

    if (!hub_cluster_dir_is_up(c))
        return false;
    op = online_op(c, ch);
    if (!op) {
        /* Out of memory: Redis is not told (the next REJOIN corrects the
         * share); the caller tells this node's watchers meanwhile. */
        HUB_STAT_ADD_SHARED(c->stats.lost, 1);
        return false;
    }
    pthread_mutex_lock(&c->mu);
    op->oop->gen = c->ogen;
    hub__cluster_push_locked(c, op, &e);
    hub__cluster_wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    HUB_STAT_ADD_SHARED(c->stats.dir_ops, 1);
    return true;
}

struct hub_cluster_op *hub_cluster_online_state_op(struct hub_cluster *c,
                                                   unsigned app,
                                                   const char *uid)
{
    const struct hub_online_change ch = { .app = app, .user = uid,
                                          .signin = true };
    struct hub_cluster_op *op = online_op(c, &ch);

    if (op) {
        op->oop->full = true;
        pthread_mutex_lock(&c->mu);
        op->oop->gen = c->ogen;
        pthread_mutex_unlock(&c->mu);
    }
    return op;
}

struct online_snap {
    struct hub_cluster *c;
};

static void online_begin(void *ctx)
{
    struct online_snap *sn = ctx;

    pthread_mutex_lock(&sn->c->mu);
    sn->c->ogen++;
    pthread_mutex_unlock(&sn->c->mu);
}

void hub_cluster_online_snapshot(
    struct hub_cluster *c,
    void (*user)(void *ctx, unsigned app, const char *id,
                 const char *const *ids, size_t n),
    void *ctx)
{
    struct online_snap sn = { c };
    struct hub_online *o = c->hub ? hub_online_of(c->hub) : NULL;

    if (!o)
        return;
    /* begin runs under the registry's mutex: every op pushed before it
     * (under that mutex) has the old generation and is in the visit. */
    hub_online_visit(o, online_begin, &sn, user, ctx);
}

bool hub_cluster_online_stale(struct hub_cluster *c,
                              const struct hub_cluster_onop *oop)
{
    return hub__cluster_gen_stale(c, oop->gen, &c->ogen);
}
