/*
 * A pool for lws's request-header buffers.
 *
 * lws allocates one --max-http-header-data buffer (SRV_HEADER_BYTES,
 * 32 KiB) per handshake or HTTP request in flight and frees it at the
 * upgrade or the end of the request. From the heap, a burst of handshakes
 * leaves those freed 32 KiB holes between the sessions' small allocations,
 * and glibc keeps their pages (docs/BENCHMARKS.md, "S1 idle memory").
 * Here they come from slots of one reserved mapping instead: reused
 * most-recently-freed first, so steady churn costs no system call, and
 * after a burst the main thread gives the pages of all but a few free
 * slots back (madvise), as it trims the heap (server/memtrim.h).
 *
 * lws reaches it through lws_set_allocator(): srv_hdrpool_lws_realloc()
 * serves allocations of exactly the slot size from the pool and every
 * other one from the C heap. One pool per process (the lws allocator is
 * process-wide), thread-safe: a mutex held for a few instructions.
 */
#ifndef SRV_HDRPOOL_H
#define SRV_HDRPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Slots of the mapping (virtual space: slots x slot size, reserved, only
 * touched pages resident). Past it lws's buffers come from the heap. */
#define SRV_HDRPOOL_SLOTS 4096u
/* Free slots whose pages stay resident after a release: steady churn
 * with up to this many handshakes in flight never faults a page in. */
#define SRV_HDRPOOL_KEEP 32u

struct srv_hdrpool_stats {
    unsigned in_use;     /* slots lent out */
    unsigned free;       /* slots free */
    unsigned resident;   /* free slots whose pages were not given back */
    uint64_t fallbacks;  /* slot-sized requests served by the heap: full */
};

/* Map slots x slot_bytes (slot_bytes a multiple of the page size). Once;
 * -1 when the mapping fails (then every request goes to the heap). */
int srv_hdrpool_init(size_t slot_bytes, unsigned slots);

/* A free slot (the most recently freed), or NULL when none is free. */
void *srv_hdrpool_get(void);
/* Give a slot back; false when p is not one of the pool's. */
bool srv_hdrpool_put(void *p);

/*
 * Give back the pages of the free slots beyond the `keep` most recently
 * freed; returns how many slots were given back. For the main thread
 * after a burst (any thread may call it; releases run one at a time):
 * the madvise calls run outside the pool's mutex, on slots taken off the
 * free list meanwhile, so lending never waits for them.
 */
unsigned srv_hdrpool_release(unsigned keep);

void srv_hdrpool_stats(struct srv_hdrpool_stats *out);

/* The lws allocator (lws_set_allocator's contract: size 0 frees). */
void *srv_hdrpool_lws_realloc(void *ptr, size_t size, const char *reason);

/* Map the pool for SRV_HEADER_BYTES buffers and route lws's allocations
 * through it. Before the first lws context exists. */
void srv_hdrpool_install(void);

#endif
