/*
 * server/lws/hdrpool.h - a pool for lws's request-header buffers.
 *
 * lws allocates one --max-http-header-data buffer (SRV_HEADER_BYTES,
 * 32 KiB) per handshake or HTTP request in flight and frees it at the
 * upgrade or the end of the request. From the heap, a burst of handshakes
 * leaves those freed 32 KiB holes between the sessions' small allocations,
 * and glibc keeps their pages (docs/BENCHMARKS.md, "S1 idle memory").
 * Here they come from slots of one reserved mapping instead: reused
 * most-recently-freed first, so steady churn costs no system call, and
 * after a burst the main thread gives the pages of all but a few free
 * slots back (madvise), as it trims the heap (server/base/memtrim.h).
 *
 * Beside each buffer lws keeps a table of where each header lies (its
 * "ah struct", 976 B in 4.1.6), also for the handshake only. From the
 * heap, a burst leaves those freed between the sessions' allocations too;
 * the sessions' later allocations fill them only in part, and the
 * 32-272 B remainders stay resident for as long as their neighbours live
 * (about 150 B a session at 19,800: docs/BENCHMARKS.md, "Where an idle
 * session's bytes go"). So the tables get a second pool of the same
 * kind, one page a slot: a page is the least madvise can give back.
 *
 * lws reaches both through lws_set_allocator(): srv_hdrpool_lws_realloc()
 * serves allocations of exactly the header slot size from the first,
 * lws's header table (by the name lws gives the allocation) from the
 * second, and every other one from the C heap. One of each per process
 * (the lws allocator is process-wide), thread-safe: a mutex held for a
 * few instructions.
 */
#ifndef SRV_HDRPOOL_H
#define SRV_HDRPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Slots of the mapping (virtual space: slots x slot size, reserved, only
 * touched pages resident). Past it lws's buffers come from the heap. */
#define SRV_HDRPOOL_SLOTS 4096u
/* The header-table pool's slot, and the name lws 4.1.6 allocates the
 * table under (lws_realloc's reason). */
#define SRV_HDRPOOL_TAB_BYTES 4096u
#define SRV_HDRPOOL_TAB_REASON "ah struct"
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
/* The same for the header-table pool. */
int srv_hdrpool_tab_init(size_t slot_bytes, unsigned slots);

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
/* The same for the header-table pool. */
unsigned srv_hdrpool_tab_release(unsigned keep);

/* The header buffers' pool; the header tables' pool. */
void srv_hdrpool_stats(struct srv_hdrpool_stats *out);
void srv_hdrpool_tab_stats(struct srv_hdrpool_stats *out);

/* The lws allocator (lws_set_allocator's contract: size 0 frees). */
void *srv_hdrpool_lws_realloc(void *ptr, size_t size, const char *reason);

/* Map the pools (SRV_HEADER_BYTES buffers, their tables) and route lws's allocations
 * through it. Before the first lws context exists. */
void srv_hdrpool_install(void);

#endif
