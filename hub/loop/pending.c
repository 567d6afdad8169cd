/*
 * hub/loop/pending.c - the loop's list of sessions with new output.
 */
#include "hub/loop/pending.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hub_pending_grow(struct hub_pending *p)
{
    uint32_t cap = p->cap ? p->cap * 2 : 1024;
    struct hub_session **v = realloc(p->v, cap * sizeof(*v));

    if (!v)
        return -ENOMEM;
    p->v = v;
    p->cap = cap;
    return 0;
}

void hub_pending_forget(struct hub_pending *p, struct hub_session *s)
{
    for (uint32_t i = 0; i < p->n; i++)
        if (p->v[i] == s)
            p->v[i] = NULL;
}

void hub_pending_flush(struct hub_pending *p,
                       void (*write)(void *ctx, struct hub_session *s),
                       void *ctx)
{
    uint32_t count = p->n;

    p->armed = false;
    for (uint32_t i = 0; i < count; i++) {
        struct hub_session *s = p->v[i];

        if (s) {
            p->v[i] = NULL;
            write(ctx, s);
        }
    }
    /* Sessions listed while flushing stay for the next run. */
    if (p->n > count)
        memmove(p->v, p->v + count, (p->n - count) * sizeof(*p->v));
    p->n -= count;
}

void hub_pending_fini(struct hub_pending *p)
{
    free(p->v);
    memset(p, 0, sizeof(*p));
}
