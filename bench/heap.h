/*
 * bench/heap.h - a binary min-heap of timers, the baseline bench_timers
 * measures the wheel against.
 *
 * Index-tracking: every node knows its slot in the array, so cancel and
 * re-arm are O(log n) instead of a search. The array holds (deadline, node)
 * pairs so that sifting compares keys without touching the nodes; a node is
 * written only to update its index. The array is sized at init, so push
 * never allocates.
 *
 * Thread: single-threaded. Benchmark code only, not part of the hub.
 */
#ifndef HUB_BENCH_HEAP_H
#define HUB_BENCH_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_HEAP_NONE SIZE_MAX

struct bench_heap_node;

/* Called by the owner on expiry; the heap itself never calls it. */
typedef void bench_heap_fn(struct bench_heap_node *x, uint64_t now_ms);

/* Like struct hub_timer, a node knows its callback, for a fair footprint. */
struct bench_heap_node {
    size_t index; /* BENCH_HEAP_NONE while not in a heap */
    uint64_t deadline_ms;
    bench_heap_fn *cb;
};

struct bench_heap_slot {
    uint64_t deadline_ms;
    struct bench_heap_node *node;
};

struct bench_heap {
    struct bench_heap_slot *a;
    size_t n, cap;
};

/* 0 or -ENOMEM. Room for cap nodes. */
int bench_heap_init(struct bench_heap *h, size_t cap);
void bench_heap_fini(struct bench_heap *h);

void bench_heap_node_init(struct bench_heap_node *x, bench_heap_fn *cb);
/* Arm (or re-arm) x for deadline_ms; the heap must have room. */
void bench_heap_start(struct bench_heap *h, struct bench_heap_node *x,
                      uint64_t deadline_ms);
/* Harmless when x is not in the heap. */
void bench_heap_stop(struct bench_heap *h, struct bench_heap_node *x);
/* Remove and return the earliest node if due at now_ms, else NULL. */
struct bench_heap_node *bench_heap_pop_due(struct bench_heap *h,
                                           uint64_t now_ms);
/* 0 or -EFAULT: heap order and indices. */
int bench_heap_check(const struct bench_heap *h);

#endif
