/*
 * tests/unit/test_hdrpool.c - the pool for lws's header buffers
 * (server/lws/hdrpool.c): slots lent newest-freed first, the heap past the
 * last slot, only slot-sized requests pooled, lws's realloc contract
 * (size 0 frees, a resize keeps the bytes), the release of all but the
 * newest free slots' pages, lws's header tables from their own pool
 * by name, and threads sharing it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/lws/hdrpool.h"

#define SLOT 8192u
#define SLOTS 8u

static int setup(void **state)
{
    static bool done;

    (void)state;
    /* One pool per process: map it once for every test. */
    if (!done && (srv_hdrpool_init(SLOT, SLOTS) != 0 ||
                  srv_hdrpool_tab_init(4096, SLOTS) != 0))
        return -1;
    done = true;
    return 0;
}

static void test_hdrpool_lend_and_return(void **state)
{
    struct srv_hdrpool_stats st;
    void *p[SLOTS], *extra;

    (void)state;
    for (unsigned i = 0; i < SLOTS; i++) {
        p[i] = srv_hdrpool_get();
        assert_non_null(p[i]);
        memset(p[i], 0xab, SLOT); /* the whole slot is writable */
        for (unsigned j = 0; j < i; j++)
            assert_ptr_not_equal(p[i], p[j]);
    }
    srv_hdrpool_stats(&st);
    assert_int_equal(st.in_use, SLOTS);
    /* Full: NULL, counted. */
    extra = srv_hdrpool_get();
    assert_null(extra);
    srv_hdrpool_stats(&st);
    assert_true(st.fallbacks >= 1);
    /* Newest freed first. */
    assert_true(srv_hdrpool_put(p[3]));
    assert_true(srv_hdrpool_put(p[5]));
    assert_ptr_equal(srv_hdrpool_get(), p[5]);
    assert_ptr_equal(srv_hdrpool_get(), p[3]);
    /* Not ours. */
    int local;
    assert_false(srv_hdrpool_put(&local));
    for (unsigned i = 0; i < SLOTS; i++)
        assert_true(srv_hdrpool_put(p[i]));
    srv_hdrpool_stats(&st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.free, SLOTS);
}

static void test_hdrpool_release_keeps_the_newest(void **state)
{
    struct srv_hdrpool_stats st;
    void *p[SLOTS];

    (void)state;
    for (unsigned i = 0; i < SLOTS; i++)
        p[i] = srv_hdrpool_get();
    for (unsigned i = 0; i < SLOTS; i++) {
        memset(p[i], i + 1, 64);
        srv_hdrpool_put(p[i]);
    }
    srv_hdrpool_stats(&st);
    assert_int_equal(st.resident, SLOTS);
    assert_int_equal(srv_hdrpool_release(2), SLOTS - 2);
    srv_hdrpool_stats(&st);
    assert_int_equal(st.resident, 2);
    assert_int_equal(st.free, SLOTS);
    /* Nothing more to give back. */
    assert_int_equal(srv_hdrpool_release(2), 0);
    /* The two newest come out first, their bytes still there... */
    void *a = srv_hdrpool_get(), *b = srv_hdrpool_get();
    assert_ptr_equal(a, p[SLOTS - 1]);
    assert_ptr_equal(b, p[SLOTS - 2]);
    assert_int_equal(((unsigned char *)a)[0], SLOTS);
    /* ...then the given-back ones, zeroed by the kernel. */
    void *c = srv_hdrpool_get();
    assert_non_null(c);
    assert_int_equal(((unsigned char *)c)[0], 0);
    srv_hdrpool_put(a);
    srv_hdrpool_put(b);
    srv_hdrpool_put(c);
    srv_hdrpool_stats(&st);
    assert_int_equal(st.free, SLOTS);
}

static void test_hdrpool_lws_contract(void **state)
{
    unsigned char *h, *s, *g;

    (void)state;
    /* Slot-sized: from the pool; anything else: the heap. */
    h = srv_hdrpool_lws_realloc(NULL, SLOT, "ah data");
    s = srv_hdrpool_lws_realloc(NULL, 100, "wsi");
    assert_non_null(h);
    assert_non_null(s);
    assert_false(srv_hdrpool_put(s));
    /* Heap blocks resize as realloc does. */
    memset(s, 7, 100);
    s = srv_hdrpool_lws_realloc(s, 5000, "grow");
    assert_non_null(s);
    assert_int_equal(s[99], 7);
    /* A pooled buffer asked to shrink stays; to grow, moves with its bytes. */
    memset(h, 9, SLOT);
    assert_ptr_equal(srv_hdrpool_lws_realloc(h, 10, "shrink"), h);
    g = srv_hdrpool_lws_realloc(h, SLOT * 2, "grow");
    assert_non_null(g);
    assert_int_equal(g[SLOT - 1], 9);
    assert_false(srv_hdrpool_put(g)); /* on the heap now */
    /* Size 0 frees both kinds; NULL with 0 is nothing. */
    assert_null(srv_hdrpool_lws_realloc(g, 0, "lws_free"));
    assert_null(srv_hdrpool_lws_realloc(s, 0, "lws_free"));
    assert_null(srv_hdrpool_lws_realloc(NULL, 0, "lws_free"));
    struct srv_hdrpool_stats st;
    srv_hdrpool_stats(&st);
    assert_int_equal(st.in_use, 0);
}

/* lws's header table, by its name, from the second pool; the same size
 * under another name from the heap. */
static void test_hdrpool_header_tables(void **state)
{
    struct srv_hdrpool_stats st;
    unsigned char *t, *u, *g;

    (void)state;
    t = srv_hdrpool_lws_realloc(NULL, 976, SRV_HDRPOOL_TAB_REASON);
    u = srv_hdrpool_lws_realloc(NULL, 976, "new server wsi");
    assert_non_null(t);
    assert_non_null(u);
    srv_hdrpool_tab_stats(&st);
    assert_int_equal(st.in_use, 1);
    memset(t, 5, 976);
    /* Not the header buffers' pool's: a put there refuses it. */
    assert_false(srv_hdrpool_put(t));
    /* Too big for a slot: the heap. */
    assert_null(srv_hdrpool_lws_realloc(
        srv_hdrpool_lws_realloc(NULL, 8192, SRV_HDRPOOL_TAB_REASON), 0,
        "lws_free"));
    srv_hdrpool_tab_stats(&st);
    assert_int_equal(st.in_use, 1);
    /* A resize within the slot stays; past it, moves with the bytes. */
    assert_ptr_equal(srv_hdrpool_lws_realloc(t, 2000, "grow"), t);
    g = srv_hdrpool_lws_realloc(t, 5000, "grow");
    assert_non_null(g);
    assert_int_equal(g[975], 5);
    srv_hdrpool_tab_stats(&st);
    assert_int_equal(st.in_use, 0);
    assert_null(srv_hdrpool_lws_realloc(g, 0, "lws_free"));
    /* Freed to the pool it came from; released like the buffers. */
    t = srv_hdrpool_lws_realloc(NULL, 976, SRV_HDRPOOL_TAB_REASON);
    assert_null(srv_hdrpool_lws_realloc(t, 0, "lws_free"));
    assert_null(srv_hdrpool_lws_realloc(u, 0, "lws_free"));
    srv_hdrpool_tab_stats(&st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.resident, 1);
    assert_int_equal(srv_hdrpool_tab_release(0), 1);
    srv_hdrpool_tab_stats(&st);
    assert_int_equal(st.resident, 0);
    assert_int_equal(st.free, SLOTS);
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        void *a = srv_hdrpool_lws_realloc(NULL, SLOT, "ah data");
        void *b = srv_hdrpool_lws_realloc(NULL, SLOT, "ah data");

        if (!a || !b)
            abort();
        ((volatile char *)a)[0] = 1;
        srv_hdrpool_lws_realloc(b, 0, "lws_free");
        srv_hdrpool_lws_realloc(a, 0, "lws_free");
        if (i % 5000 == 0)
            srv_hdrpool_release(1);
    }
    return NULL;
}

static void test_hdrpool_threads(void **state)
{
    pthread_t t[3];
    struct srv_hdrpool_stats st;

    (void)state;
    /* Six buffers at most in flight (of 8 slots): none ever comes from
     * the heap and all come back. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, NULL), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    srv_hdrpool_stats(&st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.free, SLOTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hdrpool_lend_and_return),
        cmocka_unit_test(test_hdrpool_release_keeps_the_newest),
        cmocka_unit_test(test_hdrpool_lws_contract),
        cmocka_unit_test(test_hdrpool_header_tables),
        cmocka_unit_test(test_hdrpool_threads),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
