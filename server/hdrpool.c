/* A pool for lws's request-header buffers (server/hdrpool.h). */
#include "hdrpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <libwebsockets.h>

#include "server/srv.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static struct {
    pthread_mutex_t mu;
    unsigned char *base;   /* NULL: no pool, the heap serves everything */
    size_t slot;
    unsigned slots;
    unsigned nfree;        /* free[0..nfree): the top is the newest */
    unsigned resident;     /* free slots with pages in memory */
    uint64_t fallbacks;
    uint32_t free[SRV_HDRPOOL_SLOTS];
    bool clean[SRV_HDRPOOL_SLOTS]; /* free and its pages given back */
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER };

int srv_hdrpool_init(size_t slot_bytes, unsigned slots)
{
    void *m;

    if (pool.base || !slot_bytes || slots > SRV_HDRPOOL_SLOTS)
        return -1;
    m = mmap(NULL, slot_bytes * slots, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    pthread_mutex_lock(&pool.mu);
    pool.slot = slot_bytes;
    pool.slots = slots;
    /* Slot 0 on top: the first handshakes use the lowest addresses. */
    for (unsigned i = 0; i < slots; i++) {
        pool.free[i] = slots - 1 - i;
        pool.clean[i] = true;
    }
    pool.nfree = slots;
    pool.resident = 0;
    pool.base = m;
    pthread_mutex_unlock(&pool.mu);
    POISON(m, slot_bytes * slots);
    return 0;
}

static bool owns(const void *p)
{
    const unsigned char *c = p;

    return pool.base && c >= pool.base &&
           c < pool.base + pool.slot * pool.slots;
}

void *srv_hdrpool_get(void)
{
    unsigned char *p = NULL;

    if (!pool.base)
        return NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.nfree) {
        uint32_t i = pool.free[--pool.nfree];

        if (!pool.clean[i])
            pool.resident--;
        pool.clean[i] = false;
        p = pool.base + (size_t)i * pool.slot;
    } else {
        pool.fallbacks++;
    }
    pthread_mutex_unlock(&pool.mu);
    if (p)
        UNPOISON(p, pool.slot);
    return p;
}

bool srv_hdrpool_put(void *p)
{
    uint32_t i;

    if (!owns(p))
        return false;
    i = (uint32_t)(((unsigned char *)p - pool.base) / pool.slot);
    POISON(pool.base + (size_t)i * pool.slot, pool.slot);
    pthread_mutex_lock(&pool.mu);
    pool.clean[i] = false;
    pool.free[pool.nfree++] = i;
    pool.resident++;
    pthread_mutex_unlock(&pool.mu);
    return true;
}

unsigned srv_hdrpool_release(unsigned keep)
{
    /* One release at a time: take[] is shared scratch (16 KiB, too big
     * for a loop's stack), and two releases interleaving over it would
     * put one slot on the free list twice, lending it to two users.
     * Lock order: release_mu, then pool.mu. */
    static pthread_mutex_t release_mu = PTHREAD_MUTEX_INITIALIZER;
    static uint32_t take[SRV_HDRPOOL_SLOTS];
    unsigned n = 0, kept;

    if (!pool.base)
        return 0;
    pthread_mutex_lock(&release_mu);
    /* Take the oldest free slots that still hold pages off the list. */
    pthread_mutex_lock(&pool.mu);
    if (pool.nfree > keep) {
        unsigned bottom = pool.nfree - keep, w = 0;

        for (unsigned r = 0; r < bottom; r++) {
            uint32_t i = pool.free[r];

            if (pool.clean[i])
                pool.free[w++] = i;
            else
                take[n++] = i;
        }
        memmove(&pool.free[w], &pool.free[bottom],
                (pool.nfree - bottom) * sizeof(pool.free[0]));
        pool.nfree = w + (pool.nfree - bottom);
        pool.resident -= n;
    }
    pthread_mutex_unlock(&pool.mu);
    /* The system calls, with nothing held. */
    for (unsigned k = 0; k < n; k++)
        madvise(pool.base + (size_t)take[k] * pool.slot, pool.slot,
                MADV_DONTNEED);
    /* Back on the list, under the newer ones: clean slots go last. */
    pthread_mutex_lock(&pool.mu);
    kept = pool.nfree;
    memmove(&pool.free[n], &pool.free[0], kept * sizeof(pool.free[0]));
    for (unsigned k = 0; k < n; k++) {
        pool.free[k] = take[k];
        pool.clean[take[k]] = true;
    }
    pool.nfree = kept + n;
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&release_mu);
    return n;
}

void srv_hdrpool_stats(struct srv_hdrpool_stats *out)
{
    pthread_mutex_lock(&pool.mu);
    out->free = pool.nfree;
    out->in_use = pool.slots - pool.nfree;
    out->resident = pool.resident;
    out->fallbacks = pool.fallbacks;
    pthread_mutex_unlock(&pool.mu);
}

void *srv_hdrpool_lws_realloc(void *ptr, size_t size, const char *reason)
{
    void *n;

    (void)reason;
    if (!size) {
        if (ptr && !srv_hdrpool_put(ptr))
            free(ptr);
        return NULL;
    }
    if (!ptr) {
        if (size == pool.slot && (n = srv_hdrpool_get()))
            return n;
        return malloc(size);
    }
    if (!owns(ptr))
        return realloc(ptr, size);
    /* lws does not resize its header buffers; be correct if it did. */
    if (size <= pool.slot)
        return ptr;
    n = malloc(size);
    if (!n)
        return NULL;
    memcpy(n, ptr, pool.slot);
    srv_hdrpool_put(ptr);
    return n;
}

void srv_hdrpool_install(void)
{
    /* Without the mapping every request goes to the heap, as before. */
    (void)srv_hdrpool_init(SRV_HEADER_BYTES, SRV_HDRPOOL_SLOTS);
    lws_set_allocator(srv_hdrpool_lws_realloc);
}
