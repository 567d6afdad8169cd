/*
 * hub/loop/inbox.h - a loop's multi-producer, single-consumer inbox.
 *
 * Producers (any thread) push intrusive nodes with a lock-free CAS; the push
 * that turns the inbox from empty to non-empty returns true, and only then
 * does the producer wake the loop (lws_cancel_service). Wakeups coalesce and
 * can be spurious, so the loop drains everything on every wakeup with
 * hub_inbox_take_all(), which returns the nodes oldest first. Each node
 * carries its own handlers (struct hub_inbox_ops), so the inbox and the
 * loop that drains it depend on no node type.
 *
 * Thread: push from any thread; take_all from the owning loop only.
 */
#ifndef HUB_INBOX_H
#define HUB_INBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

struct hub_inbox_node;
struct hub_loop;

/*
 * What a node does, supplied by whoever owns the node type (the drain in
 * hub/loop/loop.c, publications and terminate orders in the publication code):
 * the loop that drains the inbox calls run() without knowing what the node
 * is. Exactly one of the two is called for each pushed node.
 */
struct hub_inbox_ops {
    /* On l's thread, from hub_loop_drain_inbox(); n may be freed. */
    void (*run)(struct hub_inbox_node *n, struct hub_loop *l, uint64_t now_ms);
    /* l is being destroyed with n still queued: release what n holds
     * (references, memory) without acting on it. */
    void (*drop)(struct hub_inbox_node *n);
};

struct hub_inbox_node {
    struct hub_inbox_node *next;
    const struct hub_inbox_ops *ops;
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
