/*
 * hub/base/chantab.c - the (app, name) hash table of hub/base/chantab.h.
 */
#include "hub/base/chantab.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/hash.h"

uint64_t hub_chan_hash(unsigned app, const char *name, size_t len)
{
    return hub_hash_app(app, name, len);
}

int hub_chantab_init(struct hub_chantab *t, uint32_t buckets)
{
    assert(buckets && (buckets & (buckets - 1)) == 0);
    t->b = calloc(buckets, sizeof(*t->b));
    if (!t->b)
        return -ENOMEM;
    t->mask = buckets - 1;
    t->count = 0;
    return 0;
}

void hub_chantab_fini(struct hub_chantab *t)
{
    free(t->b);
    t->b = NULL;
    t->mask = 0;
    t->count = 0;
}

static int same_key(const struct hub_chan_node *n, unsigned app,
                    const char *name, size_t len, uint64_t hash)
{
    return n->hash == hash && n->app == app && n->name_len == len &&
           memcmp(n->name, name, len) == 0;
}

struct hub_chan_node *hub_chantab_find(const struct hub_chantab *t,
                                       unsigned app, const char *name,
                                       size_t len, uint64_t hash)
{
    struct hub_chan_node *n = t->b[hash & t->mask];

    for (; n; n = n->hnext)
        if (same_key(n, app, name, len, hash))
            return n;
    return NULL;
}

static void grow(struct hub_chantab *t)
{
    uint32_t nmask = t->mask * 2 + 1;
    struct hub_chan_node **nb = calloc((size_t)nmask + 1, sizeof(*nb));

    if (!nb)
        return; /* Longer chains, still correct. */
    for (uint32_t i = 0; i <= t->mask; i++) {
        struct hub_chan_node *n = t->b[i], *next;

        for (; n; n = next) {
            next = n->hnext;
            n->hnext = nb[n->hash & nmask];
            nb[n->hash & nmask] = n;
        }
    }
    free(t->b);
    t->b = nb;
    t->mask = nmask;
}

void hub_chantab_insert(struct hub_chantab *t, struct hub_chan_node *n)
{
    assert(n->hash == hub_chan_hash(n->app, n->name, n->name_len));
    assert(!hub_chantab_find(t, n->app, n->name, n->name_len, n->hash));
    if (t->count >= t->mask)
        grow(t);
    n->hnext = t->b[n->hash & t->mask];
    t->b[n->hash & t->mask] = n;
    t->count++;
}

void hub_chantab_remove(struct hub_chantab *t, struct hub_chan_node *n)
{
    struct hub_chan_node **pp = &t->b[n->hash & t->mask];

    for (; *pp; pp = &(*pp)->hnext) {
        if (*pp == n) {
            *pp = n->hnext;
            n->hnext = NULL;
            assert(t->count > 0);
            t->count--;
            return;
        }
    }
    assert(!"hub_chantab_remove: node not linked");
}

struct hub_chan_node *hub_chantab_next(const struct hub_chantab *t,
                                       const struct hub_chan_node *n)
{
    uint32_t i = 0;

    if (n) {
        if (n->hnext)
            return n->hnext;
        i = (uint32_t)(n->hash & t->mask) + 1;
        if (i == 0 || i > t->mask)
            return NULL;
    }
    for (; i <= t->mask; i++)
        if (t->b[i])
            return t->b[i];
    return NULL;
}

int hub_chantab_check(const struct hub_chantab *t)
{
    uint64_t seen = 0;

    if (!t->b || ((uint64_t)t->mask + 1) & t->mask)
        return -EFAULT;
    for (uint32_t i = 0; i <= t->mask; i++) {
        for (const struct hub_chan_node *n = t->b[i]; n; n = n->hnext) {
            if ((n->hash & t->mask) != i ||
                n->hash != hub_chan_hash(n->app, n->name, n->name_len))
                return -EFAULT;
            /* The key only once: any copy would be in this same chain. */
            for (const struct hub_chan_node *m = n->hnext; m; m = m->hnext)
                if (same_key(m, n->app, n->name, n->name_len, n->hash))
                    return -EFAULT;
            if (++seen > t->count)
                return -EFAULT;
        }
    }
    return seen == t->count ? 0 : -EFAULT;
}
