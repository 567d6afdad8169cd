/*
 * hub/postbatch.c - implementation of hub/postbatch.h: per thread, one
 * chain per target loop, newest first (the inbox's own order), so a flush
 * is one CAS per loop.
 */
#include "hub/postbatch.h"

#include <pthread.h>
#include <string.h>

#include "hub/inbox.h"
#include "hub/loop.h"

struct held {
    struct hub_loop *loop;
    struct hub_inbox_node *newest;
    struct hub_inbox_node *oldest;
    unsigned nodes;
    size_t bytes;
};

struct batch {
    unsigned depth;             /* nested begins */
    unsigned n;                 /* slots in use */
    struct held slot[HUB_POST_BATCH_LOOPS];
    struct hub_post_batch_stats st;
};

static _Thread_local struct batch tl;

/* As hub_loop_post() without the batch (which routes here when held). */
static void push_one(struct hub_loop *l, struct hub_inbox_node *n)
{
    if (hub_inbox_push(&l->inbox, n) && l->wake)
        l->wake(l->wake_ctx);
}

static void drop_chain(struct hub_inbox_node *n)
{
    struct hub_inbox_node *next;

    for (; n; n = next) {
        next = n->next;
        n->ops->drop(n);
    }
}

static void push_held(struct held *h)
{
    struct hub_loop *l = h->loop;
    struct hub *hub = l->hub;

    if (!h->newest)
        return;
    tl.st.pushes++;
    pthread_mutex_lock(&hub->post_mu);
    if (hub->post_closed) {
        pthread_mutex_unlock(&hub->post_mu);
        h->oldest->next = NULL;
        drop_chain(h->newest);
    } else {
        if (hub_inbox_push_chain(&l->inbox, h->newest, h->oldest)) {
            tl.st.wakes++;
            if (l->wake)
                l->wake(l->wake_ctx);
        }
        pthread_mutex_unlock(&hub->post_mu);
    }
    h->newest = h->oldest = NULL;
    h->nodes = 0;
    h->bytes = 0;
}

void hub_post_batch_begin(void)
{
    if (!tl.depth++) {
        tl.n = 0;
        memset(&tl.st, 0, sizeof(tl.st));
    }
}

bool hub_post_batch_active(void)
{
    return tl.depth > 0;
}

void hub_post_batch_flush(void)
{
    for (unsigned i = 0; i < tl.n; i++)
        push_held(&tl.slot[i]);
    /* Slots are reused by whichever loops the next pass posts to. */
    tl.n = 0;
}

void hub_post_batch_end(void)
{
    if (!tl.depth)
        return;
    hub_post_batch_flush();
    tl.depth--;
}

void hub_post_batched(struct hub_loop *l, struct hub_inbox_node *n,
                      size_t bytes)
{
    struct held *h = NULL;

    if (!tl.depth) {
        push_one(l, n);
        return;
    }
    tl.st.posts++;
    for (unsigned i = 0; i < tl.n; i++) {
        if (tl.slot[i].loop == l) {
            h = &tl.slot[i];
            break;
        }
    }
    if (!h) {
        if (tl.n == HUB_POST_BATCH_LOOPS) {
            /* No slot: this loop has nothing held (a loop holding nodes
             * has a slot until the flush), so a direct post keeps order. */
            tl.st.pushes++;
            push_one(l, n);
            return;
        }
        h = &tl.slot[tl.n++];
        h->loop = l;
        h->newest = h->oldest = NULL;
        h->nodes = 0;
        h->bytes = 0;
    }
    n->next = h->newest;
    h->newest = n;
    if (!h->oldest)
        h->oldest = n;
    h->nodes++;
    h->bytes += bytes;
    if (h->nodes >= HUB_POST_BATCH_MAX_NODES ||
        h->bytes >= HUB_POST_BATCH_MAX_BYTES)
        push_held(h);
}

void hub_post_gate_close(struct hub *h)
{
    pthread_mutex_lock(&h->post_mu);
    h->post_closed = true;
    pthread_mutex_unlock(&h->post_mu);
}

void hub_post_batch_stats(struct hub_post_batch_stats *out)
{
    *out = tl.st;
}
