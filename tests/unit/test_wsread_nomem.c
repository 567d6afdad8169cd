/*
 * tests/unit/test_wsread_nomem.c - the read bypass's framing glue
 * (server/lws/wsread.c) under failing allocations: every allocation it makes
 * (the loop's parser, a session's state when a read ends inside a frame or
 * a message, or owes a pong) fails once; the feed says so, holds nothing
 * half made, and leaks nothing. wslay's own context comes from libwslay,
 * which the wrapper does not see.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "server/lws/wsread.h"

static int pieces;

static void k_data(void *u, const void *p, size_t len, size_t remaining,
                   bool fin, bool binary)
{
    (void)u, (void)p, (void)len, (void)remaining, (void)fin, (void)binary;
    pieces++;
}
static void k_pong(void *u) { (void)u; }
static void k_want(void *u) { (void)u; }
static bool k_close(void *u, const unsigned char *p, size_t len)
{
    (void)u, (void)p, (void)len;
    return true;
}
static void k_fail(void *u, unsigned code, const char *why)
{
    (void)u, (void)code, (void)why;
}

static const struct srv_wsread_sink sink = {
    .data = k_data, .pong = k_pong, .want_write = k_want,
    .close = k_close, .fail = k_fail,
};

/* A masked text frame "hello" (key 0), a ping "p", half a text frame. */
static const unsigned char bytes[] = {
    0x81, 0x85, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o',
    0x89, 0x81, 0, 0, 0, 0, 'p',
    0x81, 0x85, 0, 0, 0, 0, 'w', 'o',
};

static enum srv_wsread_rc run(struct srv_wsread_loop **L,
                              struct srv_wsread **st)
{
    *L = srv_wsread_loop_new();
    if (!*L)
        return SRV_WSREAD_NOMEM;
    return srv_wsread_feed(*L, st, bytes, sizeof(bytes), &sink, NULL);
}

static void test_wsread_nomem_every_allocation_fails_once(void **state)
{
    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            struct srv_wsread_loop *L = NULL;
            struct srv_wsread *st = NULL;
            enum srv_wsread_rc rc;

            pieces = 0;
            rc = run(&L, &st);
            if (fail_alloc_hits())
                assert_int_equal(rc, SRV_WSREAD_NOMEM);
            if (rc == SRV_WSREAD_NOMEM) {
                /* Nothing half made: no state was handed out. */
                assert_null(st);
            } else {
                assert_int_equal(rc, SRV_WSREAD_MORE);
                assert_int_equal(pieces, 2); /* "hello", then "wo" */
                assert_non_null(st); /* mid-frame, and a pong owed */
            }
            srv_wsread_free(&st);
            srv_wsread_loop_free(L);
        },
        { assert_int_equal(fail_alloc_live(), fa_live_before); });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wsread_nomem_every_allocation_fails_once),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
