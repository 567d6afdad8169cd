/*
 * tests/unit/fail_alloc.h - a failing allocator for unit tests.
 *
 * A test built with hub_unit_test_wrapped() (tests/unit/CMakeLists.txt) is
 * linked with -Wl,--wrap=malloc,calloc,realloc,free,strdup,strndup: every
 * call of those functions from the test and from the static hub, server
 * and timer libraries goes through fail_alloc.c, and so does jansson
 * (fail_alloc.c installs itself with json_set_alloc_funcs before main).
 * Allocations inside other shared libraries (libc's own asprintf, getline,
 * getaddrinfo; libwebsockets; OpenSSL) are not seen.
 *
 * Countdown: after fail_alloc_after(n), the next n allocations succeed and
 * the one after them fails (returns NULL, errno ENOMEM); later ones
 * succeed again. One injected failure per arming, so the code under test
 * runs its error path and then its cleanup with a working allocator.
 * malloc, calloc, realloc (not a shrink to 0), strdup, strndup and
 * jansson's allocations each count as one allocation.
 *
 * The API below is stable: other tests build on it. Include it after
 * <cmocka.h> (FAIL_ALLOC_COUNTDOWN reports through fail_msg).
 *
 * Thread: the wrappers are safe to call from any thread (a mutex guards
 * the bookkeeping), but the countdown is process-wide: arm it only while
 * one thread allocates.
 */
#ifndef TESTS_FAIL_ALLOC_H
#define TESTS_FAIL_ALLOC_H

#include <stdbool.h>

/* Let n allocations succeed, fail the next one. Resets fail_alloc_hits(). */
void fail_alloc_after(long n);
/* Disarm: every allocation succeeds. Keeps fail_alloc_hits(). */
void fail_alloc_off(void);
/* Failures injected since the last fail_alloc_after() (0 or 1). */
long fail_alloc_hits(void);
/* Blocks allocated through the wrappers and not yet freed. Compare the
 * value before and after a step to find a leak; blocks allocated by a
 * shared library and freed by wrapped code are not counted either way. */
long fail_alloc_live(void);

/* Upper bound on the runs of one FAIL_ALLOC_COUNTDOWN (a safety net for a
 * body that never stops allocating). */
#define FAIL_ALLOC_MAX_STEPS 100000

/*
 * FAIL_ALLOC_COUNTDOWN(body, check): run body with the allocation number
 * n = 0, 1, 2, ... failing, then check with the allocator disarmed, until
 * a run of body made no allocation fail (it got through whole). Inside
 * body and check:
 *   fa_step        n, the allocation that fails this run (long)
 *   fa_failed      whether this run's body hit the failure (bool; in check)
 *   fa_live_before fail_alloc_live() before body ran (long)
 * so a check is typically
 *   assert_int_equal(fail_alloc_live(), fa_live_before);   (no leak)
 *   if (fa_failed) { ...the error was reported, nothing half done... }
 *   else           { ...the full result... }
 * A body may use `continue` or `break` to skip to its check. fa_failed is
 * false on the last run only: every allocation the body makes failed once
 * before. body and check are macro arguments: a comma outside parentheses
 * (two declarators in one declaration) splits them, so declare one name
 * per declaration, or move the body into a function.
 */
#define FAIL_ALLOC_COUNTDOWN(body, check)                                      \
    do {                                                                       \
        for (long fa_step = 0;; fa_step++) {                                   \
            long fa_live_before = fail_alloc_live();                           \
            bool fa_failed;                                                    \
                                                                               \
            if (fa_step > FAIL_ALLOC_MAX_STEPS)                                \
                fail_msg("FAIL_ALLOC_COUNTDOWN: no end after %ld steps",       \
                         fa_step);                                             \
            fail_alloc_after(fa_step);                                         \
            do {                                                               \
                body;                                                          \
            } while (0);                                                       \
            fa_failed = fail_alloc_hits() > 0;                                 \
            fail_alloc_off();                                                  \
            (void)fa_live_before;                                              \
            do {                                                               \
                check;                                                         \
            } while (0);                                                       \
            if (!fa_failed)                                                    \
                break;                                                         \
        }                                                                      \
    } while (0)

#endif
