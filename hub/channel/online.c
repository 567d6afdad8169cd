/*
 * hub/channel/online.c - the registry of hub/channel/online.h: one (app, user id) table
 * (hub/base/chantab.h) under one mutex. A record exists while its user is
 * online, watches someone or is watched by someone; links go both ways
 * (watching[] on the watcher, watchers[] on the watched user).
 *
 * A signin that changes the watchlist first allocates everything it could
 * need (records for new ids, one more slot in each new watched user's
 * watchers[]), and only then relinks, so out of memory leaves the registry
 * as it was.
 *
 * Also the feature (hub/loop/feature.h) that gives each hub its registry.
 */
#include "hub/channel/online.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/chantab.h"
#include "hub/loop/loop.h"
#include "timer/list.h"

struct onode {
    struct hub_chan_node node;     /* key: app, id (points at id[]) */
    uint32_t conns;                /* signed-in connections, all loops */
    uint32_t n_watching;
    struct onode **watching;       /* owned array of borrowed records */
    struct onode **watchers;       /* owned array of borrowed records */
    uint32_t n_watchers, cap_watchers;
    char id[];
};

struct hub_online {
    pthread_mutex_t mu;
    struct hub_chantab t;
};

static struct onode *onode_of(struct hub_chan_node *n)
{
    return n ? hub_container_of(n, struct onode, node) : NULL;
}

struct hub_online *hub_online_create(void)
{
    struct hub_online *o = calloc(1, sizeof(*o));

    if (!o)
        return NULL;
    if (hub_chantab_init(&o->t, 64)) {
        free(o);
        return NULL;
    }
    pthread_mutex_init(&o->mu, NULL);
    return o;
}

static void onode_free(struct onode *x)
{
    free(x->watching);
    free(x->watchers);
    free(x);
}

void hub_online_destroy(struct hub_online *o)
{
    struct hub_chan_node *n, *next;

    if (!o)
        return;
    for (n = hub_chantab_next(&o->t, NULL); n; n = next) {
        next = hub_chantab_next(&o->t, n);
        hub_chantab_remove(&o->t, n);
        onode_free(onode_of(n));
    }
    hub_chantab_fini(&o->t);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

static struct onode *find(struct hub_online *o, unsigned app, const char *id)
{
    size_t len = strlen(id);

    return onode_of(hub_chantab_find(&o->t, app, id, len,
                                     hub_chan_hash(app, id, len)));
}

static struct onode *find_or_add(struct hub_online *o, unsigned app,
                                 const char *id)
{
    struct onode *x = find(o, app, id);
    size_t len = strlen(id);

    if (x)
        return x;
    if (len > UINT32_MAX)
        return NULL;
    x = calloc(1, sizeof(*x) + len + 1);
    if (!x)
        return NULL;
    memcpy(x->id, id, len + 1);
    x->node.app = app;
    x->node.name = x->id;
    x->node.name_len = (uint32_t)len;
    x->node.hash = hub_chan_hash(app, id, len);
    hub_chantab_insert(&o->t, &x->node);
    return x;
}

/* Drop x when nothing holds it any more. */
static void gc(struct hub_online *o, struct onode *x)
{
    if (x->conns || x->n_watchers || x->n_watching)
        return;
    hub_chantab_remove(&o->t, &x->node);
    onode_free(x);
}

static bool holds(struct onode *const *v, uint32_t n, const struct onode *x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* Room for one more watcher in x (0 or -ENOMEM). */
static int reserve_watcher(struct onode *x)
{
    struct onode **v;
    uint32_t cap;

    if (x->n_watchers < x->cap_watchers)
        return 0;
    cap = x->cap_watchers ? x->cap_watchers * 2 : 4;
    v = realloc(x->watchers, cap * sizeof(*v));
    if (!v)
        return -ENOMEM;
    x->watchers = v;
    x->cap_watchers = cap;
    return 0;
}

static void remove_watcher(struct onode *x, const struct onode *w)
{
    for (uint32_t i = 0; i < x->n_watchers; i++)
        if (x->watchers[i] == w) {
            x->watchers[i] = x->watchers[--x->n_watchers];
            return;
        }
}

/* u stops watching everyone. */
static void unwatch_all(struct hub_online *o, struct onode *u)
{
    struct onode **old = u->watching;
    uint32_t n = u->n_watching;

    u->watching = NULL;
    u->n_watching = 0;
    for (uint32_t i = 0; i < n; i++) {
        remove_watcher(old[i], u);
        gc(o, old[i]);
    }
    free(old);
}

/*
 * u's watchlist becomes w's ids: everything allocated first (then
 * -ENOMEM/-ENOSPC undo only records nothing holds), then relinked.
 */
static int replace_watchlist(struct hub_online *o, struct onode *u,
                             const struct hub_watchlist *w, size_t *over)
{
    struct onode **v = NULL;
    uint32_t k = 0;
    int rc = 0;

    if (w->n > UINT32_MAX)
        return -ENOSPC;
    if (w->n) {
        v = malloc(w->n * sizeof(*v));
        if (!v)
            return -ENOMEM;
    }
    for (size_t i = 0; i < w->n; i++) {
        struct onode *x;
        bool had;

        if (strcmp(w->ids[i], u->id) == 0)
            continue;
        x = find_or_add(o, u->node.app, w->ids[i]);
        if (!x) {
            rc = -ENOMEM;
            break;
        }
        if (holds(v, k, x))
            continue; /* a duplicate id: the caller should have merged it */
        v[k++] = x;
        had = holds(u->watching, u->n_watching, x);
        if (!had && w->max_watchers && x->n_watchers >= w->max_watchers) {
            if (over)
                *over = i;
            rc = -ENOSPC;
            break;
        }
        if (!had && reserve_watcher(x)) {
            rc = -ENOMEM;
            break;
        }
    }
    if (rc) {
        for (uint32_t i = 0; i < k; i++)
            gc(o, v[i]);
        free(v);
        return rc;
    }
    /* Commit: off the old lists, onto the new (a slot was reserved in
     * every new one; an old one got its slot back just before). */
    for (uint32_t i = 0; i < u->n_watching; i++)
        remove_watcher(u->watching[i], u);
    for (uint32_t i = 0; i < k; i++)
        v[i]->watchers[v[i]->n_watchers++] = u;
    for (uint32_t i = 0; i < u->n_watching; i++)
        gc(o, u->watching[i]);
    free(u->watching);
    u->watching = v;
    u->n_watching = k;
    return 0;
}

int hub_online_signin(struct hub_online *o, unsigned app, const char *user,
                      bool new_conn, const struct hub_watchlist *w,
                      const struct hub_online_cb *cb, size_t *over)
{
    struct onode *u;
    bool shared;
    int rc = 0;

    pthread_mutex_lock(&o->mu);
    u = find_or_add(o, app, user);
    if (!u) {
        pthread_mutex_unlock(&o->mu);
        return -ENOMEM;
    }
    if (w && w->replace)
        rc = replace_watchlist(o, u, w, over);
    if (rc) {
        gc(o, u);
        pthread_mutex_unlock(&o->mu);
        return rc;
    }
    shared = cb && cb->shared &&
             cb->shared(cb->ctx, app, u->id, true, new_conn && !u->conns,
                        w && w->replace ? w : NULL);
    if (new_conn && ++u->conns == 1 && cb && cb->edge && !shared)
        for (uint32_t i = 0; i < u->n_watchers; i++)
            cb->edge(cb->ctx, app, u->watchers[i]->id, u->id, true);
    if (cb && cb->initial && !shared)
        for (uint32_t i = 0; i < u->n_watching; i++)
            if (u->watching[i]->conns)
                cb->initial(cb->ctx, u->watching[i]->id);
    gc(o, u);
    pthread_mutex_unlock(&o->mu);
    return 0;
}

void hub_online_signout(struct hub_online *o, unsigned app, const char *user,
                        const struct hub_online_cb *cb)
{
    struct onode *u;

    pthread_mutex_lock(&o->mu);
    u = find(o, app, user);
    if (u && u->conns && --u->conns == 0) {
        bool shared = cb && cb->shared &&
                      cb->shared(cb->ctx, app, u->id, false, false, NULL);

        if (cb && cb->edge && !shared)
            for (uint32_t i = 0; i < u->n_watchers; i++)
                cb->edge(cb->ctx, app, u->watchers[i]->id, u->id, false);
        unwatch_all(o, u);
        gc(o, u);
    }
    pthread_mutex_unlock(&o->mu);
}

void hub_online_visit(struct hub_online *o, void (*begin)(void *bctx),
                      void *bctx,
                      void (*user)(void *ctx, unsigned app, const char *id,
                                   const char *const *ids, size_t n),
                      void *ctx)
{
    struct hub_chan_node *n;

    pthread_mutex_lock(&o->mu);
    if (begin)
        begin(bctx);
    for (n = hub_chantab_next(&o->t, NULL); n; n = hub_chantab_next(&o->t, n)) {
        struct onode *x = onode_of(n);
        const char **ids = NULL;

        if (!x->conns)
            continue;
        if (x->n_watching)
            ids = malloc(x->n_watching * sizeof(*ids));
        for (uint32_t i = 0; ids && i < x->n_watching; i++)
            ids[i] = x->watching[i]->id;
        user(ctx, x->node.app, x->id, ids, ids ? x->n_watching : 0);
        free(ids);
    }
    pthread_mutex_unlock(&o->mu);
}

uint32_t hub_online_conns(struct hub_online *o, unsigned app,
                          const char *user)
{
    struct onode *u;
    uint32_t n;

    pthread_mutex_lock(&o->mu);
    u = find(o, app, user);
    n = u ? u->conns : 0;
    pthread_mutex_unlock(&o->mu);
    return n;
}

size_t hub_online_records(struct hub_online *o)
{
    size_t n;

    pthread_mutex_lock(&o->mu);
    n = o->t.count;
    pthread_mutex_unlock(&o->mu);
    return n;
}

int hub_online_check(struct hub_online *o)
{
    struct hub_chan_node *n;
    int rc = 0;

    pthread_mutex_lock(&o->mu);
    if (hub_chantab_check(&o->t))
        rc = -EFAULT;
    for (n = hub_chantab_next(&o->t, NULL); n && !rc; n = hub_chantab_next(&o->t, n)) {
        struct onode *x = onode_of(n);

        if (!x->conns && !x->n_watchers && !x->n_watching)
            rc = -EFAULT;
        /* Only online users watch. */
        if (x->n_watching && !x->conns)
            rc = -EFAULT;
        for (uint32_t i = 0; i < x->n_watching && !rc; i++)
            if (!holds(x->watching[i]->watchers,
                       x->watching[i]->n_watchers, x) ||
                x->watching[i] == x)
                rc = -EFAULT;
        for (uint32_t i = 0; i < x->n_watchers && !rc; i++)
            if (!holds(x->watchers[i]->watching,
                       x->watchers[i]->n_watching, x))
                rc = -EFAULT;
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

/* The feature: one registry per hub. */

static int feature_hub_init(struct hub *h, void **state)
{
    (void)h;
    *state = hub_online_create();
    return *state ? 0 : -ENOMEM;
}

static void feature_hub_fini(struct hub *h, void *state)
{
    (void)h;
    hub_online_destroy(state);
}

const struct hub_feature hub_online_feature = {
    .name = "online",
    .hub_init = feature_hub_init,
    .hub_fini = feature_hub_fini,
};

struct hub_online *hub_online_of(const struct hub *h)
{
    return hub_feature_state(h, &hub_online_feature);
}
