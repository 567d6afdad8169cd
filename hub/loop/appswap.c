/*
 * hub/loop/appswap.c - publishing a new app table and retiring the old one
 * through every loop's inbox (the rules are in hub/loop/appswap.h).
 */
#include "hub/loop/appswap.h"
#include "hub/loop/compress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/inbox.h"
#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"

struct swap;

struct swap_node {
    struct hub_inbox_node node;
    struct swap *swap;
};

/* One block: the retired table and a node per loop. */
struct swap {
    atomic_uint refs;              /* nodes not yet run or dropped */
    struct hub_apptab *old;        /* freed by the last node */
    const struct hub_apptab *next; /* the table published with it */
    struct swap_node nodes[];
};

static void swap_unref(struct swap *w)
{
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1) {
        hub_apptab_free(w->old, false);
        free(w);
    }
}

/* Bring one open session to w's table: nothing, move it to its app's
 * new settings, or close it. The connection stays only while the key it
 * opened with is still one of its app's pairs (key rotation: a reload that
 * removes a pair closes that key's connections with 4001, as a removed
 * app's, and leaves the other keys' alone); the pair's index may move.
 * Only a session on the retiring table's app is this swap's: with two
 * reloads published before the loop drains its inbox, a session that
 * connected on the newer table's app is already past this swap (judging it
 * by this swap's table would move it back, or close it for a key or an
 * enabling that only the newer table has); the newer swap's node, later in
 * the same inbox, sees it. */
static void session_reloaded(struct hub_session *s, const struct swap *w)
{
    const struct hub_app *old = s->app, *na;
    const char *key;
    int pair;

    if (!old || s->state != HUB_SESSION_OPEN)
        return;
    if (hub_apptab_get(w->old, old->index) != old)
        return;
    na = hub_apptab_get(w->next, old->index);
    if (na == old)
        return;
    key = hub_app_key_at(old, s->key_pair);
    pair = na && key ? hub_app_key_find(na, key, strlen(key)) : -1;
    if (pair < 0) {
        hub_session_send_error(s, 4001, "Application does not exist", true);
        return;
    }
    if (!na->enabled) {
        hub_session_send_error(s, 4003, "Application is disabled", true);
        return;
    }
    /* The pair's index and the app change together: a closing session
     * keeps both as they were. */
    s->key_pair = (unsigned)pair & 15;
    hub_app_ref(na);
    s->app = na;
    hub_app_unref(old);
    hub_session_compress_update(s);
    /* Authorized connections switched on: the deadline counts from the
     * connection's start, as for a new one (nothing when off or when the
     * session is authorized already). */
    hub_session_arm_signin_deadline(s);
}

static void swap_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct swap *w = ((struct swap_node *)n)->swap;
    struct hub_shard *sh = &l->shard;

    (void)now_ms;
    /* Downwards: a session that leaves the shard while being closed
     * takes the last slot's session, which was seen already. */
    for (uint32_t i = sh->count; i-- > 0;)
        if (i < sh->count)
            session_reloaded(sh->slots[i].s, w);
    swap_unref(w);
}

static void swap_drop(struct hub_inbox_node *n)
{
    swap_unref(((struct swap_node *)n)->swap);
}

static const struct hub_inbox_ops swap_ops = {
    .run = swap_run,
    .drop = swap_drop,
};

int hub_apps_publish(struct hub *h, struct hub_apptab *next)
{
    unsigned n = h->n_loops;
    struct swap *w = malloc(sizeof(*w) + (n ? n : 1) * sizeof(w->nodes[0]));

    if (!w) {
        hub_apptab_discard(next);
        return -ENOMEM;
    }
    atomic_init(&w->refs, n + 1);
    w->next = next;
    w->old = atomic_exchange_explicit(&h->apps, next, memory_order_acq_rel);
    for (unsigned i = 0; i < n; i++) {
        w->nodes[i].node.ops = &swap_ops;
        w->nodes[i].swap = w;
        hub_loop_post(h->loops[i], &w->nodes[i].node);
    }
    /* The publisher's own reference: with no loops the old table goes
     * now. */
    swap_unref(w);
    return 0;
}
