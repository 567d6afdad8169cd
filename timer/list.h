/*
 * timer/list.h - the one intrusive list type of lubdub.
 *
 * A circular doubly-linked list with a sentinel head. Nodes are embedded in
 * their owners; linking and unlinking allocate nothing. Unlinking
 * re-initialises the node, so unlinking twice is harmless and
 * hub_list_is_linked() tells whether a node is on a list.
 *
 * It lives in timer/, the lowest layer, so every layer can use it.
 * Not thread-safe: a list belongs to one thread (its loop).
 */
#ifndef HUB_LIST_H
#define HUB_LIST_H

#include <stddef.h>
#include <stdbool.h>

struct hub_list {
    struct hub_list *prev, *next;
};

#define hub_container_of(ptr, type, member)                                    \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define HUB_LIST_INIT(name) { &(name), &(name) }

static inline void hub_list_init(struct hub_list *l)
{
    l->prev = l;
    l->next = l;
}

static inline bool hub_list_is_empty(const struct hub_list *head)
{
    return head->next == head;
}

/* A node that was initialised and is not on a list points at itself. */
static inline bool hub_list_is_linked(const struct hub_list *n)
{
    return n->next != n && n->next != NULL;
}

static inline void hub_list_link_tail(struct hub_list *head, struct hub_list *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

static inline void hub_list_link_head(struct hub_list *head, struct hub_list *n)
{
    n->next = head->next;
    n->prev = head;
    head->next->prev = n;
    head->next = n;
}

static inline void hub_list_unlink(struct hub_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n;
    n->next = n;
}

/* Iterate; the _safe form allows unlinking the current node. */
#define hub_list_for_each(pos, head)                                           \
    for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)
#define hub_list_for_each_safe(pos, tmp, head)                                 \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);           \
         (pos) = (tmp), (tmp) = (pos)->next)

#endif
