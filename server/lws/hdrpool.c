/*
 * server/lws/hdrpool.c - the pools for lws's request-header buffers and
 * header tables, behind lws_set_allocator() (server/lws/hdrpool.h).
 */
#include "server/lws/hdrpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <libwebsockets.h>

#include "server/base/poison.h"
#include "server/lws/rxpool.h"
#include "server/lws/srv.h"

struct pool {
    pthread_mutex_t mu;
    unsigned char *base;   /* NULL: no pool, the heap serves everything */
    size_t slot;
    unsigned slots;
    unsigned nfree;        /* free[0..nfree): the top is the newest */
    unsigned resident;     /* free slots with pages in memory */
    uint64_t fallbacks;
    uint32_t free[SRV_HDRPOOL_SLOTS];
    bool clean[SRV_HDRPOOL_SLOTS]; /* free and its pages given back */
};

/* hdr: the header buffers; tab: the tables lws keeps beside each one. */
static struct pool hdr = { .mu = PTHREAD_MUTEX_INITIALIZER };
static struct pool tab = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int pool_init(struct pool *pl, size_t slot_bytes, unsigned slots)
{
    void *m;

    if (pl->base || !slot_bytes || slots > SRV_HDRPOOL_SLOTS)
        return -1;
    m = mmap(NULL, slot_bytes * slots, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    pthread_mutex_lock(&pl->mu);
    pl->slot = slot_bytes;
    pl->slots = slots;
    /* Slot 0 on top: the first handshakes use the lowest addresses. */
    for (unsigned i = 0; i < slots; i++) {
        pl->free[i] = slots - 1 - i;
        pl->clean[i] = true;
    }
    pl->nfree = slots;
    pl->resident = 0;
    pl->base = m;
    pthread_mutex_unlock(&pl->mu);
    POISON(m, slot_bytes * slots);
    return 0;
}

int srv_hdrpool_init(size_t slot_bytes, unsigned slots)
{
    return pool_init(&hdr, slot_bytes, slots);
}

int srv_hdrpool_tab_init(size_t slot_bytes, unsigned slots)
{
    return pool_init(&tab, slot_bytes, slots);
}

static bool owns(const struct pool *pl, const void *p)
{
    const unsigned char *c = p;

    return pl->base && c >= pl->base && c < pl->base + pl->slot * pl->slots;
}

static void *pool_get(struct pool *pl)
{
    unsigned char *p = NULL;

    if (!pl->base)
        return NULL;
    pthread_mutex_lock(&pl->mu);
    if (pl->nfree) {
        uint32_t i = pl->free[--pl->nfree];

        if (!pl->clean[i])
            pl->resident--;
        pl->clean[i] = false;
        p = pl->base + (size_t)i * pl->slot;
    } else {
        pl->fallbacks++;
    }
    pthread_mutex_unlock(&pl->mu);
    if (p)
        UNPOISON(p, pl->slot);
    return p;
}

void *srv_hdrpool_get(void)
{
    return pool_get(&hdr);
}

static bool pool_put(struct pool *pl, void *p)
{
    uint32_t i;

    if (!owns(pl, p))
        return false;
    i = (uint32_t)(((unsigned char *)p - pl->base) / pl->slot);
    POISON(pl->base + (size_t)i * pl->slot, pl->slot);
    pthread_mutex_lock(&pl->mu);
    pl->clean[i] = false;
    pl->free[pl->nfree++] = i;
    pl->resident++;
    pthread_mutex_unlock(&pl->mu);
    return true;
}

bool srv_hdrpool_put(void *p)
{
    return pool_put(&hdr, p);
}

static unsigned pool_release(struct pool *pl, unsigned keep)
{
    /* One release at a time: take[] is shared scratch (16 KiB, too big
     * for a loop's stack), and two releases interleaving over it would
     * put one slot on the free list twice, lending it to two users.
     * Lock order: release_mu, then the pool's mu. */
    static pthread_mutex_t release_mu = PTHREAD_MUTEX_INITIALIZER;
    static uint32_t take[SRV_HDRPOOL_SLOTS];
    unsigned n = 0, kept;

    if (!pl->base)
        return 0;
    pthread_mutex_lock(&release_mu);
    /* Take the oldest free slots that still hold pages off the list. */
    pthread_mutex_lock(&pl->mu);
    if (pl->nfree > keep) {
        unsigned bottom = pl->nfree - keep, w = 0;

        for (unsigned r = 0; r < bottom; r++) {
            uint32_t i = pl->free[r];

            if (pl->clean[i])
                pl->free[w++] = i;
            else
                take[n++] = i;
        }
        memmove(&pl->free[w], &pl->free[bottom],
                (pl->nfree - bottom) * sizeof(pl->free[0]));
        pl->nfree = w + (pl->nfree - bottom);
        pl->resident -= n;
    }
    pthread_mutex_unlock(&pl->mu);
    /* The system calls, with nothing held. */
    for (unsigned k = 0; k < n; k++)
        madvise(pl->base + (size_t)take[k] * pl->slot, pl->slot,
                MADV_DONTNEED);
    /* Back on the list, under the newer ones: clean slots go last. */
    pthread_mutex_lock(&pl->mu);
    kept = pl->nfree;
    memmove(&pl->free[n], &pl->free[0], kept * sizeof(pl->free[0]));
    for (unsigned k = 0; k < n; k++) {
        pl->free[k] = take[k];
        pl->clean[take[k]] = true;
    }
    pl->nfree = kept + n;
    pthread_mutex_unlock(&pl->mu);
    pthread_mutex_unlock(&release_mu);
    return n;
}

unsigned srv_hdrpool_release(unsigned keep)
{
    return pool_release(&hdr, keep);
}

unsigned srv_hdrpool_tab_release(unsigned keep)
{
    return pool_release(&tab, keep);
}

static void pool_stats(struct pool *pl, struct srv_hdrpool_stats *out)
{
    pthread_mutex_lock(&pl->mu);
    out->free = pl->nfree;
    out->in_use = pl->slots - pl->nfree;
    out->resident = pl->resident;
    out->fallbacks = pl->fallbacks;
    pthread_mutex_unlock(&pl->mu);
}

void srv_hdrpool_stats(struct srv_hdrpool_stats *out)
{
    pool_stats(&hdr, out);
}

void srv_hdrpool_tab_stats(struct srv_hdrpool_stats *out)
{
    pool_stats(&tab, out);
}

/* A pooled buffer's new home when lws asks it to grow past its slot (lws
 * 4.1.6 resizes none of them; be correct if it did): the heap, with the
 * slot's bytes, and the slot given back through the free below. */
static void *grow_out(void *ptr, size_t slot, size_t size)
{
    void *n;

    if (size <= slot)
        return ptr;
    n = malloc(size);
    if (!n)
        return NULL;
    memcpy(n, ptr, slot);
    (void)srv_hdrpool_lws_realloc(ptr, 0, NULL);
    return n;
}

void *srv_hdrpool_lws_realloc(void *ptr, size_t size, const char *reason)
{
    void *n;

    if (!size) {
        if (ptr && !pool_put(&hdr, ptr) && !pool_put(&tab, ptr) &&
            !srv_rxpool_free(ptr))
            free(ptr);
        return NULL;
    }
    if (!ptr) {
        /* WebSocket receive buffers first (server/lws/rxpool.h: each request
         * sets the thread's last one); NULL for anything else. */
        if ((n = srv_rxpool_alloc(size, reason)))
            return n;
        if (size == hdr.slot && (n = pool_get(&hdr)))
            return n;
        /* lws 4.1.6 names its header table so; under another name the
         * table comes from the heap, as before. */
        if (size <= tab.slot && reason &&
            !strcmp(reason, SRV_HDRPOOL_TAB_REASON) && (n = pool_get(&tab)))
            return n;
        return malloc(size);
    }
    if (owns(&hdr, ptr))
        return grow_out(ptr, hdr.slot, size);
    if (owns(&tab, ptr))
        return grow_out(ptr, tab.slot, size);
    if (srv_rxpool_owns(ptr))
        return grow_out(ptr, srv_rxpool_slot_bytes(), size);
    return realloc(ptr, size);
}

void srv_hdrpool_install(void)
{
    /* Without a mapping its requests go to the heap, as before. */
    (void)srv_hdrpool_init(SRV_HEADER_BYTES, SRV_HDRPOOL_SLOTS);
    (void)srv_hdrpool_tab_init(SRV_HDRPOOL_TAB_BYTES, SRV_HDRPOOL_SLOTS);
    lws_set_allocator(srv_hdrpool_lws_realloc);
}
