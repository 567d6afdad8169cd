/*
 * hub/cluster/cluster_edge.c - the directory's edges (channel first and
 * last, member first and last) for the webhook engine: from the script
 * replies while Redis is up, from the wrapped directory while it is down,
 * from the reaper of a dead node; and which apps' edges the scripts queue
 * in Redis themselves (durable webhooks, docs/WEBHOOKS.md "In a cluster"),
 * whose edges are then not handed to the hook.
 *
 * Thread: the hook is called on the backplane thread (script and reaper
 * edges) and on loops (local edges while Redis is down), under edge_mu.
 * The webhook set is published whole by the main thread and read by the
 * backplane threads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/cluster/cluster_int.h"
#include "hub/webhook/wh_stream.h"

static void edge(struct hub_cluster *c, enum hub_dir_edge_kind kind,
                 unsigned app, const char *name, size_t len, const char *uid)
{
    const struct hub_dir_edge e = { kind, app, name, len, uid };

    pthread_mutex_lock(&c->edge_mu);
    if (c->edge)
        c->edge(c->edge_ctx, &e);
    pthread_mutex_unlock(&c->edge_mu);
}

int hub_cluster_set_wh(struct hub_cluster *c, const bool *in_redis,
                       unsigned n, uint64_t delay_ms, unsigned max_entries)
{
    struct wh_set *w = calloc(1, sizeof(*w) + (n ? n : 1) * sizeof(bool));

    if (!w)
        return -ENOMEM;
    w->n = n;
    w->delay_ms = delay_ms;
    w->max_entries = max_entries ? max_entries : HUB_WHS_MAX_ENTRIES;
    memcpy(w->in, in_redis, n * sizeof(bool));
    /* One writer (the main thread): no lost update. */
    w->older = atomic_load_explicit(&c->wh, memory_order_relaxed);
    atomic_store_explicit(&c->wh, w, memory_order_release);
    return 0;
}

unsigned hub_cluster_wh_max(const struct hub_cluster *c)
{
    const struct wh_set *w =
        c ? atomic_load_explicit(&((struct hub_cluster *)c)->wh,
                                 memory_order_acquire)
          : NULL;

    return w ? w->max_entries : HUB_WHS_MAX_ENTRIES;
}

bool hub_cluster_wh_redis(const struct hub_cluster *c, unsigned app,
                          uint64_t *delay_ms)
{
    const struct wh_set *w =
        c ? atomic_load_explicit(&((struct hub_cluster *)c)->wh,
                                 memory_order_acquire)
          : NULL;

    if (!w || app >= w->n || !w->in[app])
        return false;
    if (delay_ms)
        *delay_ms = w->delay_ms;
    return true;
}

void hub__cluster_script_edge(struct hub_cluster *c,
                              enum hub_dir_edge_kind kind, unsigned app,
                              const char *name, size_t len, const char *uid)
{
    if (!hub_cluster_wh_redis(c, app, NULL))
        edge(c, kind, app, name, len, uid);
}

static void local_edge(void *ctx, const struct hub_dir_edge *e)
{
    struct hub_cluster *c = ctx;

    if (!hub_cluster_dir_is_up(c))
        edge(c, e->kind, e->app, e->name, e->len, e->user_id);
}

void hub__cluster_set_edge_hook(void *d, hub_dir_edge_fn *fn, void *ctx)
{
    struct hub_cluster *c = d;

    pthread_mutex_lock(&c->edge_mu);
    c->edge = fn;
    c->edge_ctx = ctx;
    pthread_mutex_unlock(&c->edge_mu);
    hub_directory_set_edge_hook(c->dir, fn ? local_edge : NULL, c);
}

/* The reaper's edges (a dead node's channel_vacated / member_removed),
 * reported once, on the node that reaped. */
void hub_cluster_report_edge(struct hub_cluster *c,
                             const struct hub_dir_edge *e)
{
    if (c)
        hub__cluster_script_edge(c, e->kind, e->app, e->name, e->len,
                                 e->user_id);
}
