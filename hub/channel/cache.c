/*
 * hub/channel/cache.c - the cache channels' store of hub/channel/cache.h: one (app, name)
 * table (hub/base/chantab.h) of entries under one mutex, and per app a list of
 * its entries in store order with its entry and byte counts. The per-app
 * accounts grow (under the mutex) when a reload adds apps: app indices
 * only grow (hub/app/apptab.h), and each account is its own allocation, so
 * growing moves no list head.
 *
 * Also the cache channels' feature (hub/loop/feature.h): the hub's store,
 * and its reclaim from loop 0's heartbeat beat hook.
 */
#include "hub/channel/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/chantab.h"
#include "hub/loop/loop.h"
#include "timer/list.h"

struct cache_entry {
    struct hub_chan_node node;     /* key: app, name (points at name[]) */
    struct hub_list link;          /* the app's list, oldest first */
    struct hub_frame *f;           /* one reference */
    uint64_t expires_ms;
    uint64_t bytes;                /* charged to the app */
    char name[];
};

struct cache_app {
    struct hub_list entries;
    uint64_t n, bytes;
};

struct hub_cache {
    pthread_mutex_t mu;
    struct hub_chantab t;
    unsigned n_apps;               /* accounts in apps[] (under mu) */
    struct cache_app **apps;
};

/* Under mu (or before the cache is shared): accounts for indices below
 * n; 0 or -ENOMEM (then nothing changed). */
static int grow(struct hub_cache *c, unsigned n)
{
    struct cache_app **apps;

    if (n <= c->n_apps)
        return 0;
    apps = realloc(c->apps, n * sizeof(*apps));
    if (!apps)
        return -ENOMEM;
    c->apps = apps;
    for (; c->n_apps < n; c->n_apps++) {
        struct cache_app *a = calloc(1, sizeof(*a));

        if (!a)
            return -ENOMEM;
        hub_list_init(&a->entries);
        c->apps[c->n_apps] = a;
    }
    return 0;
}

struct hub_cache *hub_cache_create(unsigned n_apps)
{
    struct hub_cache *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    if (hub_chantab_init(&c->t, 64)) {
        free(c);
        return NULL;
    }
    if (grow(c, n_apps ? n_apps : 1)) {
        for (unsigned i = 0; i < c->n_apps; i++)
            free(c->apps[i]);
        free(c->apps);
        hub_chantab_fini(&c->t);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

/* Under mu: unlink e from the table and its list, uncharge, free. */
static void drop(struct hub_cache *c, struct cache_entry *e)
{
    struct cache_app *a = c->apps[e->node.app];

    hub_chantab_remove(&c->t, &e->node);
    hub_list_unlink(&e->link);
    a->n--;
    a->bytes -= e->bytes;
    hub_frame_unref(e->f);
    free(e);
}

void hub_cache_destroy(struct hub_cache *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->n_apps; i++) {
        while (!hub_list_is_empty(&c->apps[i]->entries))
            drop(c, hub_container_of(c->apps[i]->entries.next,
                                     struct cache_entry, link));
        free(c->apps[i]);
    }
    free(c->apps);
    hub_chantab_fini(&c->t);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static struct cache_entry *find(struct hub_cache *c, unsigned app,
                                const char *name, size_t len, uint64_t hash)
{
    struct hub_chan_node *n = hub_chantab_find(&c->t, app, name, len, hash);

    return n ? hub_container_of(n, struct cache_entry, node) : NULL;
}

int hub_cache_store(struct hub_cache *c, unsigned app, const char *name,
                    size_t len, struct hub_frame *f, uint64_t now_ms,
                    uint64_t ttl_ms, uint64_t cap, struct hub_cache_put *out)
{
    uint64_t hash = hub_chan_hash(app, name, len);
    uint64_t need = hub_cache_entry_bytes(f->len, len);
    struct hub_cache_put put = { 0, false };
    struct cache_entry *e, *old;
    struct cache_app *a;
    int rc = 0;

    if (app >= UINT32_MAX / 2)
        return -EINVAL;
    /* Allocated before the lock; freed unused when the event is too big. */
    e = cap && need > cap ? NULL : malloc(sizeof(*e) + len + 1);
    pthread_mutex_lock(&c->mu);
    if (grow(c, app + 1)) {
        pthread_mutex_unlock(&c->mu);
        free(e);
        return -ENOMEM;
    }
    a = c->apps[app];
    old = find(c, app, name, len, hash);
    if (old)
        drop(c, old);
    if (cap && need > cap) {
        put.oversize = true;
    } else if (!e) {
        rc = -ENOMEM;
    } else {
        while (cap && a->bytes + need > cap && !hub_list_is_empty(&a->entries)) {
            drop(c, hub_container_of(a->entries.next, struct cache_entry,
                                     link));
            put.evicted++;
        }
        memcpy(e->name, name, len);
        e->name[len] = '\0';
        e->node.hash = hash;
        e->node.app = app;
        e->node.name = e->name;
        e->node.name_len = (uint32_t)len;
        e->f = hub_frame_ref(f);
        e->expires_ms = now_ms + ttl_ms;
        e->bytes = need;
        hub_chantab_insert(&c->t, &e->node);
        hub_list_link_tail(&a->entries, &e->link);
        a->n++;
        a->bytes += need;
        e = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(e);
    if (out)
        *out = put;
    return rc;
}

struct hub_frame *hub_cache_get(struct hub_cache *c, unsigned app,
                                const char *name, size_t len, uint64_t now_ms,
                                uint64_t *ttl_left_ms)
{
    uint64_t hash = hub_chan_hash(app, name, len);
    struct hub_frame *f = NULL;
    struct cache_entry *e;

    pthread_mutex_lock(&c->mu);
    e = app < c->n_apps ? find(c, app, name, len, hash) : NULL;
    if (e && now_ms >= e->expires_ms) {
        drop(c, e);
    } else if (e) {
        f = hub_frame_ref(e->f);
        if (ttl_left_ms)
            *ttl_left_ms = e->expires_ms - now_ms;
    }
    pthread_mutex_unlock(&c->mu);
    return f;
}

unsigned hub_cache_reclaim(struct hub_cache *c, uint64_t now_ms)
{
    unsigned n = 0;

    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->n_apps; i++) {
        struct hub_list *head = &c->apps[i]->entries;

        /* Store order is expiry order within an app (one TTL per app);
         * a TTL changed by a reload only delays an entry to the next
         * reclaim after the older ones, and a read still checks it. */
        while (!hub_list_is_empty(head)) {
            struct cache_entry *e = hub_container_of(head->next,
                                                     struct cache_entry, link);

            if (now_ms < e->expires_ms)
                break;
            drop(c, e);
            n++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

void hub_cache_app_usage(struct hub_cache *c, unsigned app,
                         struct hub_cache_usage *out)
{
    out->entries = out->bytes = 0;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    if (app < c->n_apps) {
        out->entries = c->apps[app]->n;
        out->bytes = c->apps[app]->bytes;
    }
    pthread_mutex_unlock(&c->mu);
}

int hub_cache_check(struct hub_cache *c)
{
    uint32_t total = 0;
    int rc = 0;

    pthread_mutex_lock(&c->mu);
    if (hub_chantab_check(&c->t))
        rc = -EFAULT;
    for (unsigned i = 0; i < c->n_apps && !rc; i++) {
        const struct cache_app *a = c->apps[i];
        const struct hub_list *pos;
        uint64_t n = 0, bytes = 0;

        hub_list_for_each(pos, &a->entries) {
            const struct cache_entry *e =
                hub_container_of(pos, struct cache_entry, link);

            if (e->node.app != i ||
                find(c, i, e->name, e->node.name_len, e->node.hash) != e ||
                e->bytes != hub_cache_entry_bytes(e->f->len,
                                                  e->node.name_len))
                rc = -EFAULT;
            n++;
            bytes += e->bytes;
        }
        if (n != a->n || bytes != a->bytes)
            rc = -EFAULT;
        total += (uint32_t)n;
    }
    if (!rc && total != c->t.count)
        rc = -EFAULT;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* The feature: the hub's store, reclaimed on loop 0. */

/* Once a heartbeat run (about a second), on one loop: the expired events'
 * memory goes back (a read checks expiry too; this frees what nobody
 * reads). */
static void feature_beat(struct hub_loop *l, uint64_t now_ms)
{
    if (l->id == 0)
        hub_cache_reclaim(hub_cache_of(l->hub), now_ms);
}

static int feature_hub_init(struct hub *h, void **state)
{
    *state = hub_cache_create(h->cfg->n_apps);
    return *state ? 0 : -ENOMEM;
}

static void feature_hub_fini(struct hub *h, void *state)
{
    (void)h;
    hub_cache_destroy(state);
}

const struct hub_feature hub_cache_feature = {
    .name = "cache",
    .hub_init = feature_hub_init,
    .hub_fini = feature_hub_fini,
    .beat = feature_beat,
};

struct hub_cache *hub_cache_of(const struct hub *h)
{
    return hub_feature_state(h, &hub_cache_feature);
}
