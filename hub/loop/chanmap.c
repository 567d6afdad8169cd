/*
 * hub/loop/chanmap.c - the loop-local channel index of hub/loop/chanmap.h, on the
 * shared table of hub/base/chantab.h.
 */
#include "hub/loop/chanmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct hub_chanmap {
    struct hub_chantab t;
};

static struct hub_lchan *lchan_of(struct hub_chan_node *n)
{
    return n ? hub_container_of(n, struct hub_lchan, node) : NULL;
}

struct hub_chanmap *hub_chanmap_create(void)
{
    struct hub_chanmap *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    if (hub_chantab_init(&m->t, 64)) {
        free(m);
        return NULL;
    }
    return m;
}

void hub_chanmap_destroy(struct hub_chanmap *m)
{
    struct hub_chan_node *n, *next;

    if (!m)
        return;
    for (n = hub_chantab_next(&m->t, NULL); n; n = next) {
        next = hub_chantab_next(&m->t, n);
        free(lchan_of(n));
    }
    hub_chantab_fini(&m->t);
    free(m);
}

uint32_t hub_chanmap_count(const struct hub_chanmap *m)
{
    return m->t.count;
}

struct hub_lchan *hub_chanmap_find(struct hub_chanmap *m, unsigned app,
                                   const char *name, size_t len)
{
    return lchan_of(hub_chantab_find(&m->t, app, name, len,
                                     hub_chan_hash(app, name, len)));
}

struct hub_lchan *hub_chanmap_get(struct hub_chanmap *m, unsigned app,
                                  const char *name, size_t len)
{
    uint64_t h = hub_chan_hash(app, name, len);
    struct hub_lchan *c = lchan_of(hub_chantab_find(&m->t, app, name, len, h));

    if (c)
        return c;
    c = malloc(sizeof(*c) + len + 1);
    if (!c)
        return NULL;
    c->app = app;
    c->kind = hub_channel_classify(name, len);
    hub_list_init(&c->members);
    c->n_members = 0;
    c->name_len = (uint32_t)len;
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    c->node.hash = h;
    c->node.app = app;
    c->node.name_len = (uint32_t)len;
    c->node.name = c->name;
    hub_chantab_insert(&m->t, &c->node);
    return c;
}

void hub_chanmap_put(struct hub_chanmap *m, struct hub_lchan *ch)
{
    if (ch->n_members)
        return;
    hub_chantab_remove(&m->t, &ch->node); /* asserts ch is in m */
    free(ch);
}

int hub_chanmap_check(const struct hub_chanmap *m)
{
    const struct hub_chan_node *n;

    if (hub_chantab_check(&m->t))
        return -EFAULT;
    for (n = hub_chantab_next(&m->t, NULL); n;
         n = hub_chantab_next(&m->t, n)) {
        const struct hub_lchan *c =
            hub_container_of(n, const struct hub_lchan, node);
        const struct hub_list *pos;
        uint32_t k = 0;

        if (c->app != n->app || c->name_len != n->name_len ||
            n->name != c->name)
            return -EFAULT;
        hub_list_for_each(pos, &c->members) {
            const struct hub_sub *sub =
                hub_container_of(pos, const struct hub_sub, chan_link);

            if (sub->ch != c)
                return -EFAULT;
            k++;
        }
        if (k != c->n_members)
            return -EFAULT;
    }
    return 0;
}
