/*
 * hub/app/apptab.c - the immutable app table (hub/app/apptab.h): two open
 * addressing hash indexes (the keyed hub_hash of hub/base/hash.h, linear
 * probing, at most half full; the key index holds every key/secret pair's
 * key, each slot naming the app and the pair), the index assignment across
 * generations, and the diff a reload logs.
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

/* Arrays for n indices, count apps and keys keys (every pair of every
 * app); each hash at most half full. */
static struct hub_apptab *tab_alloc(unsigned n, unsigned count, size_t keys)
{
    struct hub_apptab *t;
    size_t want = 2 * (count > keys ? count : keys), slots = 8;

    /* A key's slot holds index * HUB_APP_KEYS_MAX + pair + 1 in 32 bits. */
    if (n > UINT32_MAX / HUB_APP_KEYS_MAX - 1 || want > UINT32_MAX / 2)
        return NULL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    while (slots < want)
        slots *= 2;
    t->n = n;
    t->mask = (unsigned)slots - 1;
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
                     uint32_t value)
{
    unsigned i = slot_of(s, strlen(s), mask);

    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = value + 1;
}

/* Every pair's key (key rotation: hub/app/app.h) into by_key, each slot
 * naming the app's index and the pair; the id into by_id. */
static void index_app(struct hub_apptab *t, unsigned index)
{
    const struct hub_app *a = t->apps[index];
    unsigned n = hub_app_n_keys(a);

    assert(n <= HUB_APP_KEYS_MAX);
    for (unsigned k = 0; k < n; k++)
        hash_put(t->by_key, t->mask, hub_app_key_at(a, k),
                 (uint32_t)index * HUB_APP_KEYS_MAX + k);
    if (a->id)
        hash_put(t->by_id, t->mask, a->id, index);
}

/* Keys of apps[0..n) (of the n pointers in v when apps is NULL). */
static size_t count_keys(const struct hub_app *apps,
                         struct hub_app *const *v, unsigned n)
{
    size_t k = 0;

    for (unsigned i = 0; i < n; i++)
        k += hub_app_n_keys(apps ? &apps[i] : v[i]);
    return k;
}

struct hub_apptab *hub_apptab_borrow(const struct hub_app *apps, unsigned n)
{
    struct hub_apptab *t = tab_alloc(n, n, count_keys(apps, NULL, n));

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
    t = tab_alloc(pn + fresh, n, count_keys(NULL, apps, n));
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

const struct hub_app *hub_apptab_find_key(const struct hub_apptab *t,
                                          const char *key, size_t len,
                                          unsigned *pair)
{
    unsigned i;

    if (!key)
        return NULL;
    for (i = slot_of(key, len, t->mask); t->by_key[i];
         i = (i + 1) & t->mask) {
        uint32_t v = t->by_key[i] - 1;
        const struct hub_app *a = t->apps[v / HUB_APP_KEYS_MAX];

        if (same(hub_app_key_at(a, v % HUB_APP_KEYS_MAX), key, len)) {
            if (pair)
                *pair = v % HUB_APP_KEYS_MAX;
            return a;
        }
    }
    return NULL;
}

const struct hub_app *hub_apptab_by_key(const struct hub_apptab *t,
                                        const char *key, size_t len)
{
    return hub_apptab_find_key(t, key, len, NULL);
}

const struct hub_app *hub_apptab_by_id(const struct hub_apptab *t,
                                       const char *id, size_t len)
{
    unsigned i;

    if (!id)
        return NULL;
    for (i = slot_of(id, len, t->mask); t->by_id[i]; i = (i + 1) & t->mask) {
        const struct hub_app *a = t->apps[t->by_id[i] - 1];

        if (same(a->id, id, len))
            return a;
    }
    return NULL;
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
