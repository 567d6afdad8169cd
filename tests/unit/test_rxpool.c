/*
 * tests/unit/test_rxpool.c - lws's WebSocket receive buffers from a pool
 * (server/lws/rxpool.c): only "rx_ubuf" requests of the pool's size pooled,
 * the thread's last buffer taken once, a released slot lent again while
 * lws still owes its free, and a model of holders that release and free
 * in random order: no slot is ever lent while a holder that was not
 * released still has it, and every slot comes back. Through lws's
 * allocator (server/lws/hdrpool.c), as lws reaches it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/lws/hdrpool.h"
#include "server/lws/rxpool.h"

#define BYTES 148u /* --ws-rx-buffer 128 + LWS_PRE 16 + 4 */
#define SLOTS 8u

static void *lws_alloc(size_t n, const char *why)
{
    return srv_hdrpool_lws_realloc(NULL, n, why);
}

static void lws_free_(void *p)
{
    (void)srv_hdrpool_lws_realloc(p, 0, "lws_free");
}

static int setup(void **state)
{
    static bool done;

    (void)state;
    /* One pool per process: map it once for every test. */
    if (!done && srv_rxpool_init(BYTES, SLOTS) != 0)
        return -1;
    done = true;
    return 0;
}

static void assert_all_back(void)
{
    struct srv_rxpool_stats st;

    srv_rxpool_stats(&st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.owed, 0);
}

static void test_rxpool_only_receive_buffers(void **state)
{
    struct srv_rxpool_stats st;
    void *a, *b, *c;

    (void)state;
    assert_int_equal(srv_rxpool_init(BYTES, SLOTS), -1); /* once */
    assert_int_equal(srv_rxpool_slot_bytes(), 160);
    /* Another name, or another size: the heap, and the size miss forgets
     * the thread's last buffer. */
    a = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_true(srv_rxpool_owns(a));
    b = lws_alloc(BYTES, "ws struct");
    assert_false(srv_rxpool_owns(b));
    assert_ptr_equal(srv_rxpool_take_last(), a);
    assert_null(srv_rxpool_take_last()); /* taken once */
    c = lws_alloc(BYTES + 16, SRV_RXPOOL_REASON);
    assert_non_null(c);
    assert_false(srv_rxpool_owns(c));
    assert_null(srv_rxpool_take_last());
    memset(a, 0x5a, BYTES); /* usable */
    lws_free_(a);
    lws_free_(b);
    lws_free_(c);
    srv_rxpool_stats(&st);
    assert_int_equal(st.fallbacks, 0);
    assert_all_back();
}

static void test_rxpool_release_then_lend_again(void **state)
{
    struct srv_rxpool_stats st;
    void *a, *b, *c;

    (void)state;
    a = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    srv_rxpool_release(a);
    srv_rxpool_stats(&st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.owed, 1);
    /* The next session gets the same slot while lws still points at it
     * from the first. */
    b = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_ptr_equal(b, a);
    /* The first session ends: its free is the one owed, ignored; the
     * slot stays with the second. */
    lws_free_(a);
    srv_rxpool_stats(&st);
    assert_int_equal(st.in_use, 1);
    assert_int_equal(st.owed, 0);
    c = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_ptr_not_equal(c, b);
    lws_free_(c);
    /* The second ends: now the slot is free. */
    lws_free_(b);
    assert_all_back();
    /* The holder that was not released may free first: then the slot
     * comes back with the last free owed. */
    a = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    srv_rxpool_release(a);
    b = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_ptr_equal(b, a);
    lws_free_(b); /* the second session's free, taken as the owed one */
    c = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_ptr_not_equal(c, a); /* not free yet: a free is still to come */
    lws_free_(c);
    lws_free_(a);
    assert_all_back();
}

static void test_rxpool_full_pool_falls_back(void **state)
{
    struct srv_rxpool_stats st;
    void *p[SLOTS + 1];

    (void)state;
    for (unsigned i = 0; i < SLOTS; i++) {
        p[i] = lws_alloc(BYTES, SRV_RXPOOL_REASON);
        assert_true(srv_rxpool_owns(p[i]));
    }
    p[SLOTS] = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_non_null(p[SLOTS]);
    assert_false(srv_rxpool_owns(p[SLOTS]));
    /* A heap buffer is never "the last": nothing to release. */
    assert_null(srv_rxpool_take_last());
    srv_rxpool_stats(&st);
    assert_int_equal(st.fallbacks, 1);
    for (unsigned i = 0; i <= SLOTS; i++)
        lws_free_(p[i]);
    assert_all_back();
}

static void test_rxpool_grow_leaves_the_pool(void **state)
{
    unsigned char *a, *g;

    (void)state;
    a = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    assert_true(srv_rxpool_owns(a));
    (void)srv_rxpool_take_last();
    for (unsigned i = 0; i < BYTES; i++)
        a[i] = (unsigned char)i;
    /* Within the slot it stays put; past it, the heap with the bytes,
     * and the slot is free again. */
    assert_ptr_equal(srv_hdrpool_lws_realloc(a, srv_rxpool_slot_bytes(),
                                             "grow"),
                     a);
    g = srv_hdrpool_lws_realloc(a, 4 * BYTES, "grow");
    assert_non_null(g);
    assert_false(srv_rxpool_owns(g));
    for (unsigned i = 0; i < BYTES; i++)
        assert_int_equal(g[i], (unsigned char)i);
    assert_all_back();
    lws_free_(g);
    assert_all_back();
}

/* Holders of a slot in the model: the sessions lws has not freed yet. */
struct holder {
    unsigned char *p;
    bool released;
};

static void test_rxpool_model_random_order(void **state)
{
    enum { HOLDERS = 64, STEPS = 200000 };
    struct holder h[HOLDERS];
    unsigned n = 0;
    unsigned seed = 12345;

    (void)state;
    for (int step = 0; step < STEPS; step++) {
        unsigned r = (unsigned)rand_r(&seed);
        unsigned op = r % 3, k;

        if (op == 0 && n < HOLDERS) {
            unsigned char *p = lws_alloc(BYTES, SRV_RXPOOL_REASON);

            assert_non_null(p);
            if (srv_rxpool_owns(p))
                /* Never a slot a holder that was not released still
                 * has: that holder would see its bytes change. */
                for (unsigned i = 0; i < n; i++)
                    assert_false(h[i].p == p && !h[i].released);
            memset(p, (int)(step & 0xff), BYTES);
            h[n].p = p;
            h[n++].released = false;
            continue;
        }
        if (!n)
            continue;
        k = (r / 3) % n;
        if (op == 1 && !h[k].released && srv_rxpool_owns(h[k].p)) {
            srv_rxpool_release(h[k].p);
            h[k].released = true;
        } else if (op == 2) {
            /* An unreleased holder's bytes are its own until it goes. */
            if (!h[k].released) {
                unsigned char *p = h[k].p;

                for (unsigned i = 1; i < BYTES; i++)
                    assert_int_equal(p[i], p[0]);
            }
            lws_free_(h[k].p);
            h[k] = h[--n];
        }
    }
    while (n)
        lws_free_(h[--n].p);
    assert_all_back();
    /* Every slot can be lent again, each once. */
    {
        void *p[SLOTS];

        for (unsigned i = 0; i < SLOTS; i++) {
            p[i] = lws_alloc(BYTES, SRV_RXPOOL_REASON);
            assert_true(srv_rxpool_owns(p[i]));
            for (unsigned j = 0; j < i; j++)
                assert_ptr_not_equal(p[i], p[j]);
        }
        for (unsigned i = 0; i < SLOTS; i++)
            lws_free_(p[i]);
    }
    assert_all_back();
}

static void *worker(void *arg)
{
    void **mine = arg;

    /* Each thread's last buffer is its own. */
    *mine = lws_alloc(BYTES, SRV_RXPOOL_REASON);
    if (srv_rxpool_take_last() != *mine)
        abort();
    for (int i = 0; i < 20000; i++) {
        void *a = lws_alloc(BYTES, SRV_RXPOOL_REASON);

        if (!a || srv_rxpool_take_last() != a)
            abort();
        srv_rxpool_release(a);
        lws_free_(a);
    }
    return NULL;
}

static void test_rxpool_threads(void **state)
{
    pthread_t t[3];
    void *held[3];

    (void)state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, &held[i]), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++)
        lws_free_(held[i]);
    assert_all_back();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rxpool_only_receive_buffers),
        cmocka_unit_test(test_rxpool_release_then_lend_again),
        cmocka_unit_test(test_rxpool_full_pool_falls_back),
        cmocka_unit_test(test_rxpool_grow_leaves_the_pool),
        cmocka_unit_test(test_rxpool_model_random_order),
        cmocka_unit_test(test_rxpool_threads),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
