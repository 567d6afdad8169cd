/*
 * bench/heap.c - the index-tracking binary min-heap of bench/heap.h.
 *
 * Sifting moves a hole rather than swapping, so each level costs one pair
 * copy and one index write. Thread: single-threaded.
 */
#include "heap.h"

#include <errno.h>
#include <stdlib.h>

int bench_heap_init(struct bench_heap *h, size_t cap)
{
    h->a = malloc((cap ? cap : 1) * sizeof(*h->a));
    if (!h->a)
        return -ENOMEM;
    h->n = 0;
    h->cap = cap;
    return 0;
}

void bench_heap_fini(struct bench_heap *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}

void bench_heap_node_init(struct bench_heap_node *x, bench_heap_fn *cb)
{
    x->index = BENCH_HEAP_NONE;
    x->deadline_ms = 0;
    x->cb = cb;
}

static void place(struct bench_heap *h, size_t i, struct bench_heap_slot s)
{
    h->a[i] = s;
    s.node->index = i;
}

static void sift_up(struct bench_heap *h, size_t i, struct bench_heap_slot s)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;

        if (h->a[parent].deadline_ms <= s.deadline_ms)
            break;
        place(h, i, h->a[parent]);
        i = parent;
    }
    place(h, i, s);
}

static void sift_down(struct bench_heap *h, size_t i, struct bench_heap_slot s)
{
    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->a[c + 1].deadline_ms < h->a[c].deadline_ms)
            c++;
        if (s.deadline_ms <= h->a[c].deadline_ms)
            break;
        place(h, i, h->a[c]);
        i = c;
    }
    place(h, i, s);
}

/* Put s at i (a hole) where the key may have moved either way. */
static void resettle(struct bench_heap *h, size_t i, struct bench_heap_slot s)
{
    if (i > 0 && s.deadline_ms < h->a[(i - 1) / 2].deadline_ms)
        sift_up(h, i, s);
    else
        sift_down(h, i, s);
}

void bench_heap_start(struct bench_heap *h, struct bench_heap_node *x,
                      uint64_t deadline_ms)
{
    struct bench_heap_slot s = { deadline_ms, x };

    x->deadline_ms = deadline_ms;
    if (x->index != BENCH_HEAP_NONE) {
        resettle(h, x->index, s);
        return;
    }
    h->n++;
    sift_up(h, h->n - 1, s);
}

void bench_heap_stop(struct bench_heap *h, struct bench_heap_node *x)
{
    size_t i = x->index;
    struct bench_heap_slot last;

    if (i == BENCH_HEAP_NONE)
        return;
    x->index = BENCH_HEAP_NONE;
    last = h->a[--h->n];
    if (i < h->n)
        resettle(h, i, last);
}

struct bench_heap_node *bench_heap_pop_due(struct bench_heap *h,
                                           uint64_t now_ms)
{
    struct bench_heap_node *x;

    if (h->n == 0 || h->a[0].deadline_ms > now_ms)
        return NULL;
    x = h->a[0].node;
    bench_heap_stop(h, x);
    return x;
}

int bench_heap_check(const struct bench_heap *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (h->a[i].node->index != i ||
            h->a[i].node->deadline_ms != h->a[i].deadline_ms)
            return -EFAULT;
        if (i > 0 && h->a[(i - 1) / 2].deadline_ms > h->a[i].deadline_ms)
            return -EFAULT;
    }
    return 0;
}
