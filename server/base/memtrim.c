/*
 * server/base/memtrim.c - giving freed heap back after a burst of
 * handshakes: when the main thread trims (server/base/memtrim.h).
 */
#include "server/base/memtrim.h"

#include <stdio.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

void srv_memtrim_init(struct srv_memtrim *t, uint64_t count, uint64_t now_ms)
{
    t->seen = count;
    t->trimmed = count;
    t->changed_ms = now_ms;
}

bool srv_memtrim_due(struct srv_memtrim *t, uint64_t count, uint64_t now_ms)
{
    if (count != t->seen) {
        t->seen = count;
        t->changed_ms = now_ms;
        return false;
    }
    if (count - t->trimmed < SRV_MEMTRIM_MIN_HANDSHAKES ||
        now_ms - t->changed_ms < SRV_MEMTRIM_QUIET_MS)
        return false;
    t->trimmed = count;
    return true;
}

static uint64_t rss_kib(void)
{
    unsigned long long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * 4;
}

uint64_t srv_memtrim_run(void)
{
#if defined(__GLIBC__)
    uint64_t before = rss_kib(), after;

    malloc_trim(0);
    after = rss_kib();
    return before > after ? before - after : 0;
#else
    return 0;
#endif
}
