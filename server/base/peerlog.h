/*
 * server/base/peerlog.h - the rate limit of peer-caused log lines: a token
 * bucket per client address, in an LRU table of bounded size, under one
 * bucket for all of them.
 *
 * A line passes when both its address's bucket and the shared one hold a
 * token; otherwise it is counted against its address. So one noisy client
 * spends only its own bucket, and another address's line (an auth
 * failure) still gets through; a spray from many addresses is held by the
 * shared bucket. The next line of an address that passes carries the
 * count suppressed from it and since when (srv_peerlog_admit's note);
 * counts that no line carried out are collected by srv_peerlog_sweep()
 * for a periodic summary line. Lines with no known address (the all-zero
 * address) share one entry like any address.
 *
 * Memory: entries are allocated once at create. The table holds the
 * `entries` most recently seen addresses; a new address past that evicts
 * the least recently seen one (its pending count moves to the "no longer
 * tracked" total, and it starts with a full bucket if it comes back).
 * Each entry is sizeof(struct srv_peerlog_entry) (56 bytes on LP64), plus
 * 8 bytes of hash heads: about 64 KiB at SRV_PEERLOG_ENTRIES. A lookup
 * walks one hash chain of a table seeded at create (an address sprayer
 * cannot pick colliding keys without the seed), at most `entries` long.
 *
 * Time comes from the caller (ms, monotonic); nothing reads a clock.
 * Thread: not thread-safe; server/lws/log.c calls it under its mutex.
 */
#ifndef SRV_PEERLOG_H
#define SRV_PEERLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "server/base/peeraddr.h"

/* The server's table: addresses tracked at once. */
#define SRV_PEERLOG_ENTRIES 1024
/* Per address: a burst of 20 lines, then 2 a second. */
#define SRV_PEERLOG_ADDR_BURST 20
#define SRV_PEERLOG_ADDR_PER_S 2
/* All peer-caused lines together: a burst of 100, then 50 a second. */
#define SRV_PEERLOG_ALL_BURST 100
#define SRV_PEERLOG_ALL_PER_S 50
/* How often the summary of unreported suppressions may come. */
#define SRV_PEERLOG_REPORT_MS 10000
/* Addresses named in a summary, the largest counts first. */
#define SRV_PEERLOG_TOP 5

struct srv_peerlog;

struct srv_peerlog_params {
    uint32_t addr_burst, addr_per_s;   /* lines; lines a second */
    uint32_t all_burst, all_per_s;
};

/* An entry (private; its size is the memory bound above). */
struct srv_peerlog_entry {
    struct srv_peeraddr addr;
    uint32_t tokens;               /* thousandths of a line */
    uint32_t suppressed;           /* since the last report; saturates */
    uint64_t refill_ms;
    uint64_t since_ms;             /* first suppression since the report */
    uint32_t prev, next;           /* LRU, most recent first */
    uint32_t hnext;                /* hash chain */
};

/* What a line that passes must say about its address: suppressed lines
 * from it since since_ms; suppressed == 0 when none. */
struct srv_peerlog_note {
    uint32_t suppressed;
    uint64_t since_ms;
};

struct srv_peerlog_top {
    struct srv_peeraddr addr;
    uint32_t lines;
};

/* The suppressions no passing line reported, since the last sweep. */
struct srv_peerlog_report {
    uint64_t lines;                /* in all, the untracked ones too */
    uint32_t addrs;                /* tracked addresses they came from */
    unsigned n_top;
    struct srv_peerlog_top top[SRV_PEERLOG_TOP];
    uint64_t gone_lines;           /* from addresses evicted meanwhile */
    uint32_t gone_addrs;
    uint64_t since_ms;             /* the earliest of them */
};

/* Owned; NULL when out of memory or entries is 0. seed keys the hash. */
struct srv_peerlog *srv_peerlog_create(unsigned entries,
                                       const struct srv_peerlog_params *p,
                                       uint64_t seed, uint64_t now_ms);
void srv_peerlog_destroy(struct srv_peerlog *pl);

/*
 * May a line from a (borrowed) be written at now_ms? true: yes, and
 * *note says what was suppressed from a before it (now reported, so
 * reset). false: suppressed and counted.
 */
bool srv_peerlog_admit(struct srv_peerlog *pl, const struct srv_peeraddr *a,
                       uint64_t now_ms, struct srv_peerlog_note *note);

/*
 * Collect every count not yet reported into *r and reset them, if
 * SRV_PEERLOG_REPORT_MS passed since the last sweep. true when there is
 * something to say.
 */
bool srv_peerlog_sweep(struct srv_peerlog *pl, uint64_t now_ms,
                       struct srv_peerlog_report *r);

/* Addresses tracked now. */
unsigned srv_peerlog_count(const struct srv_peerlog *pl);

/* Verify the hash chains, the LRU list and the buckets; 0 or -EFAULT.
 * For tests. */
int srv_peerlog_check(const struct srv_peerlog *pl);

#endif
