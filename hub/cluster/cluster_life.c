/*
 * hub/cluster/cluster_life.c - the cluster's life (hub/cluster/cluster.h):
 * create, the settings made before the threads start (hub, wake), the
 * backplane it fills (the directory of cluster_dir.c, the bus of
 * cluster_bus.c), close (nothing is delivered after it), and destroy, which
 * frees every part's state and calls the dropped answers' done.
 *
 * Thread: create, set_hub and destroy on the main thread, with no other
 * thread left at destroy; close and set_wake from any thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/cluster/cluster_key.h"
#include "hub/cluster/cluster_int.h"
#include "hub/loop/directory.h"

struct hub_cluster *hub_cluster_create(const struct hub_cluster_cfg *cfg)
{
    struct hub_cluster *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->node_id = strdup(cfg->node_id ? cfg->node_id : "");
    c->prefix = strdup(cfg->prefix ? cfg->prefix : "lubdub");
    c->dir = hub_directory_create();
    if (c->prefix) {
        size_t plen = strlen(c->prefix);

        c->cache_chan = malloc(plen + sizeof(":cache:*"));
        c->cache_pattern = malloc(plen + sizeof(":cache:*"));
        if (c->cache_chan && c->cache_pattern) {
            memcpy(c->cache_chan, c->prefix, plen);
            memcpy(c->cache_chan + plen, ":cache", sizeof(":cache"));
            memcpy(c->cache_pattern, c->prefix, plen);
            memcpy(c->cache_pattern + plen, ":cache:*", sizeof(":cache:*"));
            c->cache_chan_len = plen + sizeof(":cache") - 1;
        }
    }
    if (!c->node_id || !c->prefix || !c->dir || !c->cache_chan ||
        !c->cache_pattern || hub_chantab_init(&c->chans, 64) ||
        hub_chantab_init(&c->views, 64)) {
        hub_chantab_fini(&c->chans);
        free(c->node_id);
        free(c->prefix);
        free(c->cache_chan);
        free(c->cache_pattern);
        hub_directory_destroy(c->dir);
        free(c);
        return NULL;
    }
    c->node_len = strlen(c->node_id);
    c->apps = cfg->apps;
    c->n_apps = cfg->n_apps;
    pthread_mutex_init(&c->ids_mu, NULL);
    c->max_queue = cfg->max_queue ? cfg->max_queue : 65536;
    c->wake = cfg->wake;
    c->wake_ctx = cfg->wake_ctx;
    c->tail = &c->head;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->deliver_mu, NULL);
    pthread_mutex_init(&c->vmu, NULL);
    pthread_mutex_init(&c->edge_mu, NULL);
    atomic_init(&c->dir_up, false);
    /* The apps at start: index i is apps[i] (hub_config's rule). */
    for (unsigned i = 0; i < cfg->n_apps; i++) {
        if (hub_cluster_app_added(c, i, cfg->apps[i].id)) {
            hub_cluster_destroy(c);
            return NULL;
        }
    }
    return c;
}

void hub_cluster_set_hub(struct hub_cluster *c, struct hub *h)
{
    c->hub = h;
}

void hub_cluster_close(struct hub_cluster *c)
{
    pthread_mutex_lock(&c->deliver_mu);
    c->closed = true;
    pthread_mutex_unlock(&c->deliver_mu);
}

void hub_cluster_set_wake(struct hub_cluster *c, void (*fn)(void *ctx),
                          void *ctx)
{
    pthread_mutex_lock(&c->mu);
    c->wake = fn;
    c->wake_ctx = ctx;
    pthread_mutex_unlock(&c->mu);
}

struct hub_backplane_stats *hub_cluster_stats(struct hub_cluster *c)
{
    return &c->stats;
}

const char *hub_cluster_node_id(const struct hub_cluster *c)
{
    return c->node_id;
}

const char *hub_cluster_prefix(const struct hub_cluster *c)
{
    return c->prefix;
}

int hub_cluster_backplane(struct hub_cluster *c, struct hub_backplane *bp)
{
    *bp = (struct hub_backplane){
        .dir = &hub__cluster_dir_ops,
        .dir_impl = c,
        .bus = &hub__cluster_bus_ops,
        .bus_impl = c,
        .stats = &c->stats,
    };
    return 0;
}

void hub_cluster_destroy(struct hub_cluster *c)
{
    struct hub_cluster_op *op, *next;
    struct hub_chan_node *n, *nn;

    if (!c)
        return;
    hub_cluster_key_destroy(c->key);
    c->key = NULL;
    for (op = c->head; op; op = next) {
        next = op->next;
        if (op->dop) {
            hub_cluster_dir_cancel(c, op->dop);
            op->dop = NULL;
        }
        hub_cluster_op_free(op);
    }
    /* Every loop is gone: the callers of answers that never came free
     * what they kept (hub/loop/backplane.h, join_async). */
    while (c->dropped) {
        struct hub_cluster_dirop *dop = c->dropped;

        c->dropped = (struct hub_cluster_dirop *)(void *)dop->inbox.next;
        if (dop->req)
            dop->req->done(dop->req, -ECANCELED);
        else if (dop->q)
            dop->q->done(dop->q, -ECANCELED);
        hub_cluster_dirop_free(dop);
    }
    for (n = hub_chantab_next(&c->chans, NULL); n; n = nn) {
        struct crec *r = hub_container_of(n, struct crec, node);

        nn = hub_chantab_next(&c->chans, n);
        hub_chantab_remove(&c->chans, n);
        hub_cluster_op_free(r->unsub);
        hub_cluster_op_free(r->munsub);
        free(r);
    }
    hub_chantab_fini(&c->chans);
    hub__cluster_views_free(c);
    pthread_mutex_destroy(&c->vmu);
    pthread_mutex_destroy(&c->edge_mu);
    for (struct wh_set *w = atomic_load(&c->wh), *older; w; w = older) {
        older = w->older;
        free(w);
    }
    hub_directory_destroy(c->dir);
    for (unsigned i = 0; i < c->n_ids; i++)
        free(c->ids[i]);
    free(c->ids);
    for (unsigned i = 0; i < c->n_retired; i++)
        free(c->retired[i]);
    free(c->retired);
    pthread_mutex_destroy(&c->ids_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->deliver_mu);
    free(c->node_id);
    free(c->prefix);
    free(c->cache_chan);
    free(c->cache_pattern);
    free(c);
}

void hub__cluster_bus_destroy(void *b)
{
    hub_cluster_destroy(b);
}
