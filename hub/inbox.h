/*
 * hub/inbox.h - a loop's multi-producer, single-consumer inbox.
 *
 * Producers (any thread) push intrusive nodes with a lock-free CAS; the push
 * that turns the inbox from empty to non-empty returns true, and only then
 * does the producer wake the loop (lws_cancel_service). Wakeups coalesce and
 * can be spurious, so the loop drains everything on every wakeup with
 * hub_inbox_take_all(), which returns the nodes oldest first.
 *
 * Thread: push from any thread; take_all from the owning loop only.
 */
#ifndef HUB_INBOX_H
#define HUB_INBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>

enum hub_inbox_kind {
    HUB_INBOX_PUBLISH,     /* a struct hub_pub for this loop */
    HUB_INBOX_DRAIN,       /* start the graceful drain */
    HUB_INBOX_STOP,        /* leave the service loop */
};

struct hub_inbox_node {
    struct hub_inbox_node *next;
    enum hub_inbox_kind kind;
};

struct hub_inbox {
    _Atomic(struct hub_inbox_node *) head;
};

static inline void hub_inbox_init(struct hub_inbox *ib)
{
    atomic_init(&ib->head, NULL);
}

/* Returns true when the inbox was empty (the caller must wake the loop). */
static inline bool hub_inbox_push(struct hub_inbox *ib,
                                  struct hub_inbox_node *n)
{
    struct hub_inbox_node *old =
        atomic_load_explicit(&ib->head, memory_order_relaxed);

    do {
        n->next = old;
    } while (!atomic_compare_exchange_weak_explicit(
        &ib->head, &old, n, memory_order_release, memory_order_relaxed));
    return old == NULL;
}

/* Owned list of every pushed node, oldest first (NULL when empty). */
static inline struct hub_inbox_node *hub_inbox_take_all(struct hub_inbox *ib)
{
    struct hub_inbox_node *n, *rev = NULL, *next;

    n = atomic_exchange_explicit(&ib->head, NULL, memory_order_acquire);
    for (; n; n = next) {
        next = n->next;
        n->next = rev;
        rev = n;
    }
    return rev;
}

#endif
