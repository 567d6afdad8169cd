/*
 * hub/app/apptab.c - the immutable app table (hub/app/apptab.h): two open
 * addressing hash indexes (the keyed hub_hash of hub/base/hash.h, linear
 * probing, at most half full), the index assignment across generations,
 * and the diff a reload logs.
 *
 * The keys in the indexes are the operator's, but a lookup's string is
 * the peer's (the URL's /app/{key}, the REST path's app id): keyed, a peer
 * cannot aim its misses at the longest run of taken slots.
 */
#include "hub/app/apptab.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/hash.h"

static unsigned slot_of(const char *s, size_t len, unsigned mask)
{
    return (unsigned)hub_hash(s, len) & mask;
}

static bool same(const char *field, const char *s, size_t len)
{
    return field && strlen(field) == len && memcmp(field, s, len) == 0;
}

static struct hub_app_live *live_new(void)
{
    struct hub_app_live *v = calloc(1, sizeof(*v));

    if (!v)
        return NULL;
    atomic_init(&v->sessions, 0);
    atomic_init(&v->events_limited, 0);
    atomic_init(&v->reads_limited, 0);
    hub_bucket_init(&v->events);
    hub_bucket_init(&v->reads);
    return v;
}

static void live_free(struct hub_app_live *v)
{
    if (!v)
        return;
    hub_bucket_fini(&v->events);
    hub_bucket_fini(&v->reads);
    free(v);
}

/* Arrays for n indices and count apps; the hash at most half full. */
static struct hub_apptab *tab_alloc(unsigned n, unsigned count)
{
    struct hub_apptab *t = calloc(1, sizeof(*t));
    unsigned slots = 8;

    if (!t)
        return NULL;
    while (slots < 2 * (count ? count : 1))
        slots *= 2;
    t->n = n;
    t->mask = slots - 1;
    t->apps = calloc(n ? n : 1, sizeof(*t->apps));
    t->live = calloc(n ? n : 1, sizeof(*t->live));
    t->by_key = calloc(slots, sizeof(*t->by_key));
    t->by_id = calloc(slots, sizeof(*t->by_id));
    if (!t->apps || !t->live || !t->by_key || !t->by_id) {
        free(t->apps);
        free(t->live);
        free(t->by_key);
        free(t->by_id);
        free(t);
        return NULL;
    }
    return t;
}

static void hash_put(uint32_t *slots, unsigned mask, const char *s,
                     unsigned index)
{
    unsigned i = slot_of(s, strlen(s), mask);

    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = index + 1;
}

static void index_app(struct hub_apptab *t, unsigned index)
{
    const struct hub_app *a = t->apps[index];

    if (a->key)
        hash_put(t->by_key, t->mask, a->key, index);
    if (a->id)
        hash_put(t->by_id, t->mask, a->id, index);
}

struct hub_apptab *hub_apptab_borrow(const struct hub_app *apps, unsigned n)
{
    struct hub_apptab *t = tab_alloc(n, n);

    if (!t)
        return NULL;
    for (unsigned i = 0; i < n; i++) {
        assert(apps[i].index == i);
        t->live[i] = live_new();
        if (!t->live[i]) {
            hub_apptab_discard(t);
            return NULL;
        }
        t->apps[i] = &apps[i];
        t->count++;
        index_app(t, i);
    }
    return t;
}

struct hub_apptab *hub_apptab_build(const struct hub_apptab *prev,
                                    struct hub_app *const *apps, unsigned n)
{
    unsigned fresh = 0, next, pn = prev ? prev->n : 0;
    const struct hub_app *old;
    struct hub_apptab *t;

    for (unsigned i = 0; i < n; i++)
        if (!prev || !hub_apptab_by_id(prev, apps[i]->id,
                                       strlen(apps[i]->id)))
            fresh++;
    t = tab_alloc(pn + fresh, n);
    if (!t)
        return NULL;
    t->live_owned_from = pn;
    for (unsigned i = 0; i < pn; i++)
        t->live[i] = prev->live[i];
    for (unsigned i = pn; i < t->n; i++) {
        t->live[i] = live_new();
        if (!t->live[i]) {
            hub_apptab_discard(t);
            return NULL;
        }
    }
    next = pn;
    for (unsigned i = 0; i < n; i++) {
        old = prev ? hub_apptab_by_id(prev, apps[i]->id, strlen(apps[i]->id))
                   : NULL;
        apps[i]->index = old ? old->index : next++;
        t->apps[apps[i]->index] = apps[i];
    }
    assert(next == t->n);
    for (unsigned i = 0; i < n; i++) {
        hub_app_ref(apps[i]);
        t->count++;
        index_app(t, apps[i]->index);
    }
    return t;
}

static void tab_free(struct hub_apptab *t, unsigned live_from)
{
    if (!t)
        return;
    for (unsigned i = 0; i < t->n; i++)
        hub_app_unref(t->apps[i]);
    for (unsigned i = live_from; i < t->n; i++)
        live_free(t->live[i]);
    free(t->apps);
    free(t->live);
    free(t->by_key);
    free(t->by_id);
    free(t);
}

void hub_apptab_free(struct hub_apptab *t, bool with_live)
{
    if (t)
        tab_free(t, with_live ? 0 : t->n);
}

void hub_apptab_discard(struct hub_apptab *t)
{
    if (t)
        tab_free(t, t->live_owned_from);
}

static const struct hub_app *lookup(const struct hub_apptab *t,
                                    const uint32_t *slots, bool by_key,
                                    const char *s, size_t len)
{
    unsigned i = slot_of(s, len, t->mask);

    for (; slots[i]; i = (i + 1) & t->mask) {
        const struct hub_app *a = t->apps[slots[i] - 1];

        if (same(by_key ? a->key : a->id, s, len))
            return a;
    }
    return NULL;
}

const struct hub_app *hub_apptab_by_key(const struct hub_apptab *t,
                                        const char *key, size_t len)
{
    return key ? lookup(t, t->by_key, true, key, len) : NULL;
}

const struct hub_app *hub_apptab_by_id(const struct hub_apptab *t,
                                       const char *id, size_t len)
{
    return id ? lookup(t, t->by_id, false, id, len) : NULL;
}

enum hub_app_change hub_apptab_change(const struct hub_apptab *prev,
                                      const struct hub_apptab *next,
                                      unsigned i)
{
    const struct hub_app *a = hub_apptab_get(prev, i);
    const struct hub_app *b = hub_apptab_get(next, i);

    if (!a && !b)
        return HUB_APP_SAME;
    if (!a)
        return HUB_APP_ADDED;
    if (!b)
        return HUB_APP_REMOVED;
    return a == b || hub_app_equal(a, b) ? HUB_APP_SAME : HUB_APP_CHANGED;
}

void hub_apptab_diff(const struct hub_apptab *prev,
                     const struct hub_apptab *next,
                     struct hub_apptab_diff *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < next->n; i++) {
        switch (hub_apptab_change(prev, next, i)) {
        case HUB_APP_ADDED:
            out->added++;
            break;
        case HUB_APP_REMOVED:
            out->removed++;
            break;
        case HUB_APP_CHANGED:
            out->changed++;
            break;
        case HUB_APP_SAME:
            if (hub_apptab_get(next, i))
                out->unchanged++;
            break;
        }
    }
}
