/*
 * server/base/memtrim.h - giving freed heap back to the kernel after a burst
 * of handshakes.
 *
 * lws holds a --max-http-header-data buffer (32 KiB, SRV_HEADER_BYTES)
 * per handshake in flight; thousands of clients connecting at once leave
 * hundreds of them freed between the sessions' own allocations, and
 * glibc keeps those pages (docs/BENCHMARKS.md, "S1 idle memory"). Once
 * the burst is over, one malloc_trim() returns the whole free pages.
 *
 * The main thread asks once a second (it never runs on a loop thread: a
 * trim takes each arena's lock in turn). The decision is a pure function
 * of a handshake count and the time, so it is unit-tested.
 */
#ifndef SRV_MEMTRIM_H
#define SRV_MEMTRIM_H

#include <stdbool.h>
#include <stdint.h>

/* Handshakes since the last trim that make a trim worth it. */
#define SRV_MEMTRIM_MIN_HANDSHAKES 256u
/* How long the count must stand still: the burst is over. */
#define SRV_MEMTRIM_QUIET_MS 1000u

struct srv_memtrim {
    uint64_t seen;       /* handshake count at the last look */
    uint64_t trimmed;    /* handshake count at the last trim */
    uint64_t changed_ms; /* when seen last moved */
};

/* Start from the count and time now (no trim for what came before). */
void srv_memtrim_init(struct srv_memtrim *t, uint64_t count, uint64_t now_ms);

/*
 * True when a trim is due: at least SRV_MEMTRIM_MIN_HANDSHAKES since the
 * last one and none for SRV_MEMTRIM_QUIET_MS. A true answer counts as the
 * trim (the next one needs a new burst). Under steady churn the count
 * never stands still and no trim runs: the freed buffers are reused.
 */
bool srv_memtrim_due(struct srv_memtrim *t, uint64_t count, uint64_t now_ms);

/* Trim the heap; returns how much the resident set shrank, in KiB
 * (0 where malloc_trim is not glibc's). */
uint64_t srv_memtrim_run(void);

#endif
