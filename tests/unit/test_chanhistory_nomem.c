/*
 * tests/unit/test_chanhistory_nomem.c - GET channels/{name}/events
 * (hub/rest/chanhistory.h) under a failing allocator (fail_alloc.h) on the
 * fake hub: allocation 0, 1, ... of the read fails in turn (the store's
 * copy of the entries, each item's parse and text, the answer's text).
 * At every step the answer is the clean run's (time_ms aside: the wall
 * clock moves under the fake loop clock) or a 500 "out of memory", and no
 * step leaves a block behind (the allocator counts them); a frame
 * reference left behind would keep its frame past the store's end, which
 * the ASan build's leak check reports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "fake_hub.h"
#include "hub/base/query.h"
#include "hub/channel/history.h"
#include "hub/rest/rest.h"

#define NOW_S 1700000000ull

/* The signed query of a request of the first app (q: HUB_QUERY_MAX_BYTES). */
static void sign(struct fake_hub *fh, enum hub_http_method m,
                 const char *path, const char *extra, const char *body,
                 char *q)
{
    assert_int_equal(hub_auth_sign_rest(&fh->apps[0],
                                        hub_http_method_name(m), path, extra,
                                        body, body ? strlen(body) : 0, NOW_S,
                                        q, HUB_QUERY_MAX_BYTES),
                     0);
}

static void request(struct fake_hub *fh, enum hub_http_method m,
                    const char *path, const char *extra, const char *body,
                    struct hub_rest_response *r)
{
    char q[HUB_QUERY_MAX_BYTES];

    sign(fh, m, path, extra, body, q);
    hub_rest_handle(fh->loops[0], m, path, q, body, body ? strlen(body) : 0,
                    NOW_S, r);
}

/* An answer's text without its events' time_ms (owned). */
static char *without_times(const char *text)
{
    json_t *o = json_loads(text, 0, NULL), *e;
    size_t i;
    char *s;

    assert_non_null(o);
    json_array_foreach(json_object_get(o, "events"), i, e)
        json_object_del(e, "time_ms");
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    assert_non_null(s);
    return s;
}

static void test_chanhistory_nomem_read_whole_or_500(void **state)
{
    static const char *queries[] = { NULL, "limit=3", "since=0" };
    struct fake_hub fh;
    struct hub_rest_response r;
    const char *path = "/apps/app-id/channels/news/events";

    (void)state;
    fake_hub_init(&fh, 2);
    fh.apps[0].history = true;
    fh.apps[0].history_ttl_ms = 120000;
    fh.apps[0].history_size = 5;
    assert_int_equal(fake_hub_start(&fh), 0);
    for (int i = 1; i <= 7; i++) {
        char body[128];

        snprintf(body, sizeof(body),
                 "{\"name\":\"e%d\",\"channel\":\"news\",\"data\":"
                 "\"d\\u00e9 \\\"%d\\\"\"}", i, i);
        request(&fh, HUB_HTTP_POST, "/apps/app-id/events", NULL, body, &r);
        assert_int_equal(r.status, 200);
        free(r.body);
    }
    fake_hub_drain(&fh);
    for (size_t k = 0; k < sizeof(queries) / sizeof(queries[0]); k++) {
        char q[HUB_QUERY_MAX_BYTES];
        char *clean;
        long runs = 0;
        long fails = 0;

        /* The clean answer (and the loop's keyed HMAC context, made once). */
        request(&fh, HUB_HTTP_GET, path, queries[k], NULL, &r);
        assert_int_equal(r.status, 200);
        clean = without_times(r.body);
        free(r.body);
        sign(&fh, HUB_HTTP_GET, path, queries[k], NULL, q);
        FAIL_ALLOC_COUNTDOWN(
            {
                hub_rest_handle(fh.loops[0], HUB_HTTP_GET, path, q, NULL, 0,
                                NOW_S, &r);
                runs++;
            },
            {
                assert_non_null(r.body);
                assert_int_equal(strlen(r.body), r.len);
                if (r.status == 200) {
                    char *got = without_times(r.body);

                    if (strcmp(got, clean))
                        fail_msg("allocation %ld failed: 200 with %s, not %s",
                                 fa_step, got, clean);
                    free(got);
                } else {
                    assert_int_equal(r.status, 500);
                    assert_non_null(strstr(r.body, "out of memory"));
                    assert_true(fa_failed);
                    fails++;
                }
                free(r.body);
                assert_int_equal(fail_alloc_live(), fa_live_before);
            });
        /* The read allocates, and some of its failures show as a 500. */
        assert_true(runs > 5);
        assert_true(fails > 0);
        free(clean);
    }
    assert_int_equal(hub_history_check(hub_history_of(fh.hub)), 0);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chanhistory_nomem_read_whole_or_500),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
