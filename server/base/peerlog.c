/*
 * server/base/peerlog.c - per-address token buckets for peer-caused log lines
 * in an LRU table of bounded size (server/base/peerlog.h).
 *
 * Entries live in one array allocated at create; they are found through
 * a chained hash table of twice as many heads and kept in a doubly linked
 * LRU list of array indexes, most recently seen first. Until the array is
 * full a new address takes the next unused entry; after that it takes the
 * least recently seen one's. Buckets hold thousandths of a line so that
 * integer refills stay exact at any rate.
 *
 * Thread: the caller serialises (server/lws/log.c's mutex).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/peerlog.h"

#define NONE UINT32_MAX
#define MILLI 1000u

struct srv_peerlog {
    struct srv_peerlog_params p;
    uint64_t seed;
    uint32_t cap, used;            /* entries; in use */
    uint32_t head, tail;           /* LRU: most and least recent */
    uint32_t hmask;                /* heads - 1 */
    uint32_t *heads;
    struct srv_peerlog_entry *e;
    uint64_t all_tokens;           /* the shared bucket, thousandths */
    uint64_t all_refill_ms;
    uint64_t gone_lines;           /* pending counts of evicted entries */
    uint32_t gone_addrs;
    uint64_t gone_since_ms;
    uint64_t last_sweep_ms;
};

static uint32_t hash_of(const struct srv_peerlog *pl,
                        const struct srv_peeraddr *a)
{
    /* FNV-1a over the seed and the address, then a final mix. */
    uint64_t h = 0xcbf29ce484222325ull ^ pl->seed;

    for (size_t i = 0; i < sizeof(a->b); i++) {
        h ^= a->b[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (uint32_t)h & pl->hmask;
}

struct srv_peerlog *srv_peerlog_create(unsigned entries,
                                       const struct srv_peerlog_params *p,
                                       uint64_t seed, uint64_t now_ms)
{
    struct srv_peerlog *pl;
    uint32_t heads = 1;

    if (!entries || entries >= (1u << 30))
        return NULL;
    while (heads < 2 * entries)
        heads <<= 1;
    pl = calloc(1, sizeof(*pl));
    if (!pl)
        return NULL;
    pl->heads = malloc(heads * sizeof(*pl->heads));
    pl->e = calloc(entries, sizeof(*pl->e));
    if (!pl->heads || !pl->e) {
        srv_peerlog_destroy(pl);
        return NULL;
    }
    memset(pl->heads, 0xff, heads * sizeof(*pl->heads));
    pl->p = *p;
    pl->seed = seed;
    pl->cap = entries;
    pl->hmask = heads - 1;
    pl->head = pl->tail = NONE;
    pl->all_tokens = (uint64_t)p->all_burst * MILLI;
    pl->all_refill_ms = now_ms;
    pl->last_sweep_ms = now_ms;
    return pl;
}

void srv_peerlog_destroy(struct srv_peerlog *pl)
{
    if (!pl)
        return;
    free(pl->heads);
    free(pl->e);
    free(pl);
}

unsigned srv_peerlog_count(const struct srv_peerlog *pl)
{
    return pl->used;
}

static void lru_unlink(struct srv_peerlog *pl, uint32_t i)
{
    struct srv_peerlog_entry *e = &pl->e[i];

    if (e->prev != NONE)
        pl->e[e->prev].next = e->next;
    else
        pl->head = e->next;
    if (e->next != NONE)
        pl->e[e->next].prev = e->prev;
    else
        pl->tail = e->prev;
    e->prev = e->next = NONE;
}

static void lru_push_front(struct srv_peerlog *pl, uint32_t i)
{
    struct srv_peerlog_entry *e = &pl->e[i];

    e->prev = NONE;
    e->next = pl->head;
    if (pl->head != NONE)
        pl->e[pl->head].prev = i;
    pl->head = i;
    if (pl->tail == NONE)
        pl->tail = i;
}

static void hash_unlink(struct srv_peerlog *pl, uint32_t i)
{
    uint32_t *link = &pl->heads[hash_of(pl, &pl->e[i].addr)];

    while (*link != i)
        link = &pl->e[*link].hnext;
    *link = pl->e[i].hnext;
}

/* The entry of a, made (and made most recent) if need be. */
static struct srv_peerlog_entry *touch(struct srv_peerlog *pl,
                                       const struct srv_peeraddr *a,
                                       uint64_t now_ms)
{
    uint32_t h = hash_of(pl, a), i;
    struct srv_peerlog_entry *e;

    for (i = pl->heads[h]; i != NONE; i = pl->e[i].hnext)
        if (srv_peeraddr_equal(&pl->e[i].addr, a))
            break;
    if (i != NONE) {
        if (pl->head != i) {
            lru_unlink(pl, i);
            lru_push_front(pl, i);
        }
        return &pl->e[i];
    }
    if (pl->used < pl->cap) {
        i = pl->used++;
    } else {
        /* Full: the least recently seen address gives its entry up. */
        i = pl->tail;
        e = &pl->e[i];
        if (e->suppressed) {
            if (!pl->gone_lines || e->since_ms < pl->gone_since_ms)
                pl->gone_since_ms = e->since_ms;
            pl->gone_lines += e->suppressed;
            pl->gone_addrs++;
        }
        lru_unlink(pl, i);
        hash_unlink(pl, i);
    }
    e = &pl->e[i];
    memset(e, 0, sizeof(*e));
    e->addr = *a;
    e->tokens = pl->p.addr_burst * MILLI;
    e->refill_ms = now_ms;
    e->hnext = pl->heads[h];
    pl->heads[h] = i;
    lru_push_front(pl, i);
    return e;
}

/* Add what elapsed since *at at per_s lines a second, up to burst. */
static uint64_t refill(uint64_t tokens, uint64_t *at, uint64_t now_ms,
                       uint32_t per_s, uint32_t burst)
{
    uint64_t cap = (uint64_t)burst * MILLI;

    if (now_ms > *at) {
        uint64_t dt = now_ms - *at;

        /* One thousandth of a line per ms at 1 a second: exact. */
        tokens = dt >= cap ? cap : tokens + dt * per_s;
        *at = now_ms;
    }
    return tokens < cap ? tokens : cap;
}

bool srv_peerlog_admit(struct srv_peerlog *pl, const struct srv_peeraddr *a,
                       uint64_t now_ms, struct srv_peerlog_note *note)
{
    struct srv_peerlog_entry *e = touch(pl, a, now_ms);

    e->tokens = (uint32_t)refill(e->tokens, &e->refill_ms, now_ms,
                                 pl->p.addr_per_s, pl->p.addr_burst);
    pl->all_tokens = refill(pl->all_tokens, &pl->all_refill_ms, now_ms,
                            pl->p.all_per_s, pl->p.all_burst);
    note->suppressed = 0;
    note->since_ms = 0;
    if (e->tokens < MILLI || pl->all_tokens < MILLI) {
        if (!e->suppressed)
            e->since_ms = now_ms;
        if (e->suppressed != UINT32_MAX)
            e->suppressed++;
        return false;
    }
    e->tokens -= MILLI;
    pl->all_tokens -= MILLI;
    note->suppressed = e->suppressed;
    note->since_ms = e->since_ms;
    e->suppressed = 0;
    return true;
}

static void top_add(struct srv_peerlog_report *r,
                    const struct srv_peerlog_entry *e)
{
    unsigned i = r->n_top < SRV_PEERLOG_TOP ? r->n_top++ : SRV_PEERLOG_TOP;

    /* Insertion into the sorted few; the smallest falls off the end. */
    while (i > 0 && r->top[i - 1].lines < e->suppressed) {
        if (i < SRV_PEERLOG_TOP)
            r->top[i] = r->top[i - 1];
        i--;
    }
    if (i < SRV_PEERLOG_TOP) {
        r->top[i].addr = e->addr;
        r->top[i].lines = e->suppressed;
    }
}

bool srv_peerlog_sweep(struct srv_peerlog *pl, uint64_t now_ms,
                       struct srv_peerlog_report *r)
{
    memset(r, 0, sizeof(*r));
    if (now_ms - pl->last_sweep_ms < SRV_PEERLOG_REPORT_MS)
        return false;
    pl->last_sweep_ms = now_ms;
    r->since_ms = now_ms;
    for (uint32_t i = 0; i < pl->used; i++) {
        struct srv_peerlog_entry *e = &pl->e[i];

        if (!e->suppressed)
            continue;
        r->lines += e->suppressed;
        r->addrs++;
        if (e->since_ms < r->since_ms)
            r->since_ms = e->since_ms;
        top_add(r, e);
        e->suppressed = 0;
    }
    if (pl->gone_lines) {
        r->gone_lines = pl->gone_lines;
        r->gone_addrs = pl->gone_addrs;
        r->lines += pl->gone_lines;
        if (pl->gone_since_ms < r->since_ms)
            r->since_ms = pl->gone_since_ms;
        pl->gone_lines = 0;
        pl->gone_addrs = 0;
    }
    return r->lines > 0;
}

int srv_peerlog_check(const struct srv_peerlog *pl)
{
    uint32_t n = 0, prev = NONE, chained = 0;

    if (pl->used > pl->cap ||
        pl->all_tokens > (uint64_t)pl->p.all_burst * MILLI)
        return -EFAULT;
    for (uint32_t i = pl->head; i != NONE; i = pl->e[i].next) {
        const struct srv_peerlog_entry *e = &pl->e[i];
        uint32_t j;

        if (i >= pl->used || e->prev != prev || ++n > pl->used ||
            e->tokens > pl->p.addr_burst * MILLI)
            return -EFAULT;
        /* Found through its own hash chain. */
        for (j = pl->heads[hash_of(pl, &e->addr)]; j != NONE && j != i;
             j = pl->e[j].hnext)
            ;
        if (j != i)
            return -EFAULT;
        prev = i;
    }
    if (n != pl->used || pl->tail != prev)
        return -EFAULT;
    for (uint32_t h = 0; h <= pl->hmask; h++)
        for (uint32_t i = pl->heads[h]; i != NONE; i = pl->e[i].hnext)
            if (i >= pl->used || hash_of(pl, &pl->e[i].addr) != h ||
                ++chained > pl->used)
                return -EFAULT;
    return chained == pl->used ? 0 : -EFAULT;
}
