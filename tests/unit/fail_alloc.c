/*
 * tests/unit/fail_alloc.c - the allocator wrappers behind fail_alloc.h.
 *
 * The linker sends the wrapped objects' calls to __wrap_<fn>; __real_<fn>
 * is the C library's (or the sanitizer's) function. A pointer set records
 * which blocks came from here, so free() of a block some shared library
 * allocated (asprintf's result, say) leaves the live count alone. The set
 * itself lives in __real_ memory and is never counted.
 */
#include "fail_alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t m, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t m, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long countdown = -1; /* < 0: disarmed */
static long hits;
static long live;

/* Chained pointer set; buckets grow by doubling at load 2. */
struct entry {
    struct entry *next;
    void *p;
};
static struct entry **buckets;
static size_t nbuckets, nentries;

static size_t slot(const void *p, size_t n)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

    return (size_t)(h >> 32) & (n - 1);
}

static void set_grow(void)
{
    size_t n = nbuckets ? nbuckets * 2 : 1024;
    struct entry **b = __real_calloc(n, sizeof(*b));

    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < nbuckets; i++)
        while (buckets[i]) {
            struct entry *e = buckets[i];

            buckets[i] = e->next;
            e->next = b[slot(e->p, n)];
            b[slot(e->p, n)] = e;
        }
    __real_free(buckets);
    buckets = b;
    nbuckets = n;
}

/* Record p (mu held). A block the set cannot record is simply not
 * counted. */
static void set_add(void *p)
{
    struct entry *e;

    if (nentries >= 2 * nbuckets)
        set_grow();
    if (!nbuckets || !(e = __real_malloc(sizeof(*e))))
        return;
    e->p = p;
    e->next = buckets[slot(p, nbuckets)];
    buckets[slot(p, nbuckets)] = e;
    nentries++;
    live++;
}

/* Forget p if it is ours (mu held). */
static void set_del(void *p)
{
    struct entry **pe;

    if (!nbuckets)
        return;
    for (pe = &buckets[slot(p, nbuckets)]; *pe; pe = &(*pe)->next)
        if ((*pe)->p == p) {
            struct entry *e = *pe;

            *pe = e->next;
            __real_free(e);
            nentries--;
            live--;
            return;
        }
}

/* One allocation is about to happen (mu held): false = fail it. */
static bool may_allocate(void)
{
    if (countdown < 0)
        return true;
    if (countdown-- > 0)
        return true;
    hits++;
    return false;
}

void fail_alloc_after(long n)
{
    pthread_mutex_lock(&mu);
    countdown = n < 0 ? 0 : n;
    hits = 0;
    pthread_mutex_unlock(&mu);
}

void fail_alloc_off(void)
{
    pthread_mutex_lock(&mu);
    countdown = -1;
    pthread_mutex_unlock(&mu);
}

long fail_alloc_hits(void)
{
    long v;

    pthread_mutex_lock(&mu);
    v = hits;
    pthread_mutex_unlock(&mu);
    return v;
}

long fail_alloc_live(void)
{
    long v;

    pthread_mutex_lock(&mu);
    v = live;
    pthread_mutex_unlock(&mu);
    return v;
}

void *__wrap_malloc(size_t n)
{
    void *p = NULL;

    pthread_mutex_lock(&mu);
    if (may_allocate() && (p = __real_malloc(n)))
        set_add(p);
    pthread_mutex_unlock(&mu);
    if (!p)
        errno = ENOMEM;
    return p;
}

void *__wrap_calloc(size_t m, size_t n)
{
    void *p = NULL;

    pthread_mutex_lock(&mu);
    if (may_allocate() && (p = __real_calloc(m, n)))
        set_add(p);
    pthread_mutex_unlock(&mu);
    if (!p)
        errno = ENOMEM;
    return p;
}

void *__wrap_realloc(void *old, size_t n)
{
    void *p;

    if (old && n == 0) { /* glibc: frees old, returns NULL */
        __wrap_free(old);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    if (!may_allocate()) {
        pthread_mutex_unlock(&mu);
        errno = ENOMEM;
        return NULL; /* old stays valid and counted */
    }
    p = __real_realloc(old, n);
    if (p) {
        if (old)
            set_del(old);
        set_add(p);
    }
    pthread_mutex_unlock(&mu);
    if (!p)
        errno = ENOMEM;
    return p;
}

void __wrap_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&mu);
    set_del(p);
    pthread_mutex_unlock(&mu);
    __real_free(p);
}

char *__wrap_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = __wrap_malloc(len + 1);

    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

char *__wrap_strdup(const char *s)
{
    return __wrap_strndup(s, SIZE_MAX);
}

/* jansson allocates through these from before main on. */
static void *json_alloc(size_t n)
{
    return __wrap_malloc(n);
}

static void json_release(void *p)
{
    __wrap_free(p);
}

__attribute__((constructor)) static void fail_alloc_init(void)
{
    json_set_alloc_funcs(json_alloc, json_release);
}
