/*
 * server/lws/rxpool.c - lws's WebSocket receive buffers from a pool, given
 * back at the read bypass's handover (server/lws/rxpool.h).
 */
#include "server/lws/rxpool.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "server/base/poison.h"

static struct {
    pthread_mutex_t mu;
    unsigned char *base;  /* NULL: no pool */
    size_t bytes;         /* lws's request the pool serves */
    size_t slot;          /* bytes, rounded up to 16 */
    uint32_t slots;
    uint32_t fresh;       /* slots [fresh, slots) were never lent */
    uint32_t nfree;       /* free[0..nfree): the top is the newest */
    uint32_t *free;       /* these two in the mapping too, after the slots: */
    uint32_t *owed;       /* only the pages of slots in use are resident */
    uint32_t in_use;      /* slots lent, not back on the free list */
    uint64_t owed_total;
    uint64_t released, fallbacks;
} rx = { .mu = PTHREAD_MUTEX_INITIALIZER };

static __thread void *last;

int srv_rxpool_init(size_t bytes, uint32_t slots)
{
    size_t slot = (bytes + 15) & ~(size_t)15, len;
    void *m;

    if (rx.base || !bytes || !slots)
        return -1;
    len = slot * slots + 2 * sizeof(uint32_t) * (size_t)slots;
    m = mmap(NULL, len, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    POISON(m, slot * slots);
    pthread_mutex_lock(&rx.mu);
    rx.bytes = bytes;
    rx.slot = slot;
    rx.slots = slots;
    rx.free = (uint32_t *)((unsigned char *)m + slot * slots);
    rx.owed = rx.free + slots;
    rx.base = m;
    pthread_mutex_unlock(&rx.mu);
    return 0;
}

bool srv_rxpool_owns(const void *p)
{
    const unsigned char *c = p;

    return rx.base && c >= rx.base && c < rx.base + rx.slot * rx.slots;
}

size_t srv_rxpool_slot_bytes(void)
{
    return rx.base ? rx.slot : 0;
}

static uint32_t index_of(const void *p)
{
    return (uint32_t)(((const unsigned char *)p - rx.base) / rx.slot);
}

void *srv_rxpool_alloc(size_t size, const char *reason)
{
    unsigned char *p = NULL;

    if (!reason || strcmp(reason, SRV_RXPOOL_REASON))
        return NULL;
    if (rx.base && size == rx.bytes) {
        pthread_mutex_lock(&rx.mu);
        if (rx.nfree)
            p = rx.base + (size_t)rx.free[--rx.nfree] * rx.slot;
        else if (rx.fresh < rx.slots)
            p = rx.base + (size_t)rx.fresh++ * rx.slot;
        else
            rx.fallbacks++;
        if (p)
            rx.in_use++;
        pthread_mutex_unlock(&rx.mu);
        if (p)
            UNPOISON(p, rx.slot);
    }
    /* Set even when the heap serves it: a later ESTABLISHED must never
     * take an earlier session's slot. */
    last = p;
    return p;
}

void *srv_rxpool_take_last(void)
{
    void *p = last;

    last = NULL;
    return p;
}

/* Under the mutex: slot i back on the free list. */
static void put_locked(uint32_t i)
{
    rx.free[rx.nfree++] = i;
}

bool srv_rxpool_free(void *p)
{
    uint32_t i;

    if (!srv_rxpool_owns(p))
        return false;
    i = index_of(p);
    pthread_mutex_lock(&rx.mu);
    if (rx.owed[i]) {
        /* An earlier holder's free: that holder was released. */
        rx.owed[i]--;
        rx.owed_total--;
    } else {
        rx.in_use--;
        POISON(rx.base + (size_t)i * rx.slot, rx.slot);
        put_locked(i);
    }
    pthread_mutex_unlock(&rx.mu);
    return true;
}

void srv_rxpool_release(void *p)
{
    uint32_t i;

    if (!srv_rxpool_owns(p))
        return;
    i = index_of(p);
    pthread_mutex_lock(&rx.mu);
    rx.owed[i]++;
    rx.owed_total++;
    rx.in_use--;
    rx.released++;
    POISON(rx.base + (size_t)i * rx.slot, rx.slot);
    put_locked(i);
    pthread_mutex_unlock(&rx.mu);
}

void srv_rxpool_stats(struct srv_rxpool_stats *out)
{
    pthread_mutex_lock(&rx.mu);
    out->in_use = rx.in_use;
    out->owed = (uint32_t)rx.owed_total;
    out->released = rx.released;
    out->fallbacks = rx.fallbacks;
    pthread_mutex_unlock(&rx.mu);
}
