/*
 * server/webhook/webhook_view.c - the sender's own copy of the apps
 * (server/webhook/webhook_int.h): a view made from the configuration at
 * start and from each reload, freed, and applied on the sender thread:
 * one endpoint per webhook of the view, an endpoint of the same app id
 * and URL as before kept, the others made, and the old ones no longer
 * configured retired (their pending batches dead-lettered, logged).
 *
 * Thread: srv__wh_view_new / srv__wh_view_free on the main thread;
 * srv__wh_view_apply on the sender thread (or the main thread before it
 * starts).
 */
#include "server/webhook/webhook_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "server/config/config.h"
#include "server/lws/srv.h"

void srv__wh_view_free(struct srv_wh_view *v)
{
    if (!v)
        return;
    for (unsigned i = 0; i < v->n; i++) {
        free(v->apps[i].id);
        free(v->apps[i].key);
        free(v->apps[i].secret);
        hub_wh_app_free(&v->apps[i]);
    }
    free(v->apps);
    free(v);
}

/* The sender's copy of apps[0..n) in a view of n_index app indices:
 * apps[j] goes to idx[j]->index (j when idx is NULL). Only what the
 * sender reads: id, key, secret (the first key/secret pair, which signs
 * webhooks; key rotation leaves the others out), enabled and the webhooks
 * (none for a disabled app: its webhooks stop with it). NULL when out of memory. */
struct srv_wh_view *srv__wh_view_new(const struct hub_app *apps,
                                     struct hub_app *const *idx, unsigned n,
                                     unsigned n_index)
{
    struct srv_wh_view *v = calloc(1, sizeof(*v));

    if (!v)
        return NULL;
    v->apps = calloc(n_index ? n_index : 1, sizeof(*v->apps));
    if (!v->apps) {
        free(v);
        return NULL;
    }
    v->n = n_index;
    for (unsigned i = 0; i < n_index; i++)
        v->apps[i].index = i;
    for (unsigned j = 0; j < n; j++) {
        unsigned i = idx ? idx[j]->index : j;
        struct hub_app *d = &v->apps[i];

        if (i >= n_index)
            continue;
        d->enabled = apps[j].enabled;
        d->id = strdup(apps[j].id);
        d->key = strdup(apps[j].key);
        d->secret = strdup(apps[j].secret);
        if (!d->id || !d->key || !d->secret ||
            (d->enabled && hub_wh_app_copy(d, &apps[j]))) {
            srv__wh_view_free(v);
            return NULL;
        }
    }
    return v;
}


/* Retire ep, which a reload removed; its pending batches become dead
 * letters (logged). Returns how many it held. */
static unsigned retire_removed(struct srv_wh *wh, struct srv_wh_ep *ep)
{
    if (!ep->head)
        return srv__wh_ep_retire(wh, ep, NULL);
    srv_log_event(HUB_LOG_WARN, 0,
                  HUB_LOG_F(.event = "webhook_removed", .app = ep->app->id,
                            .url = ep->shown),
                  "webhook %s (app %s): removed by a reload "
                  "with %" PRIu64 " pending batches: %s",
                  ep->shown, ep->app->id, (uint64_t)atomic_load(&ep->depth),
                  wh->store ? "moved to the dead letters"
                  : "dropped (without --state-dir there are no "
                  "dead letters)");
    return srv__wh_ep_retire(wh, ep, "webhook removed by a reload");
}

/*
 * Sender thread: make v (taken) the apps the sender works for. One
 * endpoint per webhook of v; an endpoint of the same app id and URL as
 * before is kept (its FIFO, order, retry state, connection and counters:
 * only its app and webhook settings change); the others are new, and an
 * old endpoint that no longer exists is retired (srv__wh_ep_retire: its
 * pending batches become dead letters, logged). The engine flushes its open
 * batches under the old apps first. start: the first view, no log line.
 * 0, or -1 when out of memory (nothing changed, v freed).
 */
int srv__wh_view_apply(struct srv_wh *wh, struct srv_wh_view *v, bool start)
{
    struct srv_wh_ep **eps = NULL, **old_eps;
    unsigned *base = NULL, *old_base, n = 0, k = 0, old_n, added = 0;
    unsigned removed = 0, lost = 0;
    bool *taken = calloc(wh->n_eps ? wh->n_eps : 1, sizeof(*taken));
    bool *fresh = NULL;
    struct srv_wh_view *old = wh->view;

    for (unsigned i = 0; i < v->n; i++)
        n += v->apps[i].n_webhooks;
    eps = calloc(n ? n : 1, sizeof(*eps));
    base = calloc(v->n ? v->n : 1, sizeof(*base));
    fresh = calloc(n ? n : 1, sizeof(*fresh));
    if (!taken || !eps || !base || !fresh)
        goto oom;
    for (unsigned i = 0; i < v->n; i++) {
        base[i] = k;
        for (unsigned j = 0; j < v->apps[i].n_webhooks; j++, k++) {
            const struct hub_wh_conf *c = &v->apps[i].webhooks[j];

            for (unsigned o = 0; o < wh->n_eps && !eps[k]; o++)
                if (!taken[o] && !strcmp(wh->eps[o]->app->id, v->apps[i].id) &&
                    !strcmp(wh->eps[o]->conf->url, c->url)) {
                    taken[o] = true;
                    eps[k] = wh->eps[o];
                }
            if (!eps[k]) {
                if (!(eps[k] = srv__wh_ep_new(wh, &v->apps[i], c)))
                    goto oom;
                fresh[k] = true;
                added++;
            }
        }
    }
    /* Open batches go to the old endpoints, made under the old apps. */
    if (hub_wh_engine_set_apps(wh->eng, v->apps, v->n, srv__wh_wall_ms()))
        goto oom;
    pthread_mutex_lock(&wh->mu);
    k = 0;
    for (unsigned i = 0; i < v->n; i++)
        for (unsigned j = 0; j < v->apps[i].n_webhooks; j++, k++) {
            eps[k]->app = &v->apps[i];
            eps[k]->conf = &v->apps[i].webhooks[j];
        }
    old_eps = wh->eps;
    old_n = wh->n_eps;
    old_base = wh->ep_base;
    wh->eps = eps;
    wh->n_eps = n;
    wh->ep_base = base;
    wh->view = v;
    pthread_mutex_unlock(&wh->mu);
    for (unsigned o = 0; o < old_n; o++)
        if (!taken[o]) {
            removed++;
            lost += retire_removed(wh, old_eps[o]);
        }
    if (!start)
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "webhooks"),
                      "webhooks: reloaded: %u endpoints (%u new, "
                      "%u removed, %u pending batches of removed "
                      "ones %s)",
                      n, added, removed, lost,
                      wh->store ? "dead-lettered" : "dropped");
    srv__wh_view_free(old);
    free(old_eps);
    free(old_base);
    free(taken);
    free(fresh);
    return 0;
oom:
    for (unsigned i = 0; eps && fresh && i < n; i++)
        if (fresh[i])
            srv__wh_ep_retire(wh, eps[i], NULL);
    free(eps);
    free(base);
    free(taken);
    free(fresh);
    srv__wh_view_free(v);
    srv_log_event(HUB_LOG_ERR, 0,
                  HUB_LOG_F(.event = "out_of_memory"),
                  "webhooks: %s (out of memory)",
                  start ? "cannot start" : "reload not applied, the endpoints "
                  "stay as they were");
    return -1;
}
