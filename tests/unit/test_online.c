/*
 * tests/unit/test_online.c - the online registry (hub/channel/online.h): edges on
 * a user's first and last connection only, the initial state, watchlist
 * replacement, the max_watchers refusal leaving everything as it was,
 * every allocation failing in turn (nothing changed, nothing reported,
 * nothing leaked), and two threads racing one user's connections.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "hub/channel/online.h"

/* What the callbacks saw, as text: "w<x+" for "w hears x online", "w<x-"
 * offline, "=x" for an initial one. */
struct seen {
    char log[64][48];
    int n;
};

static void rec(struct seen *s, const char *text)
{
    if (s->n < 64)
        snprintf(s->log[s->n++], sizeof(s->log[0]), "%s", text);
}

static void on_edge(void *ctx, unsigned app, const char *watcher,
                    const char *user, bool online)
{
    char b[48];

    assert_int_equal(app, 3);
    snprintf(b, sizeof(b), "%s<%s%c", watcher, user, online ? '+' : '-');
    rec(ctx, b);
}

static void on_initial(void *ctx, const char *user)
{
    char b[48];

    snprintf(b, sizeof(b), "=%s", user);
    rec(ctx, b);
}

static bool saw(const struct seen *s, const char *text)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->log[i], text) == 0)
            return true;
    return false;
}

#define CB(seen) { on_edge, on_initial, (seen), NULL }

static int signin(struct hub_online *o, const char *user, bool new_conn,
                  const char *const *ids, size_t n, uint32_t maxw,
                  struct seen *seen, size_t *over)
{
    struct hub_watchlist w = { ids, n, ids != NULL, maxw };
    struct hub_online_cb cb = CB(seen);

    return hub_online_signin(o, 3, user, new_conn, &w, &cb, over);
}

static void signout(struct hub_online *o, const char *user,
                    struct seen *seen)
{
    struct hub_online_cb cb = CB(seen);

    hub_online_signout(o, 3, user, &cb);
}

/* A shared registry (the cluster's): every change reported, in order;
 * while it takes them no edge or initial state is reported locally. */
struct shared_seen {
    struct seen s;
    bool take;
};

static bool on_shared(void *ctx, unsigned app, const char *user, bool in,
                      bool first, const struct hub_watchlist *w)
{
    struct shared_seen *x = ctx;
    char b[48];

    assert_int_equal(app, 3);
    snprintf(b, sizeof(b), "%c%s%s%s%zu", in ? 'I' : 'O', user,
             first ? "!" : "", w ? "w" : "", w ? w->n : (size_t)0);
    rec(&x->s, b);
    return x->take;
}

static void on_edge_shared(void *ctx, unsigned app, const char *watcher,
                           const char *user, bool online)
{
    on_edge(&((struct shared_seen *)ctx)->s, app, watcher, user, online);
}

static void on_initial_shared(void *ctx, const char *user)
{
    on_initial(&((struct shared_seen *)ctx)->s, user);
}

static void visit_begin(void *ctx)
{
    (*(int *)ctx)++;
}

static void visit_user(void *ctx, unsigned app, const char *id,
                       const char *const *ids, size_t n)
{
    struct seen *s = ctx;
    char b[48];
    int k;

    k = snprintf(b, sizeof(b), "%u:%s:", app, id);
    for (size_t i = 0; i < n && k > 0 && (size_t)k < sizeof(b); i++)
        k += snprintf(b + k, sizeof(b) - (size_t)k, "%s,", ids[i]);
    rec(s, b);
}

static void test_online_shared(void **state)
{
    struct hub_online *o = hub_online_create();
    static const char *const wl[] = { "x", "y" };
    struct shared_seen x = { .take = true };
    const struct hub_online_cb cb = { on_edge_shared, on_initial_shared, &x,
                                      on_shared };
    struct hub_watchlist w = { wl, 2, true, 0 }, none = { 0 };
    struct seen v = { 0 };
    int begun = 0;

    (void)state;
    assert_non_null(o);
    /* Taken: the registry still counts and links, reports nothing. */
    assert_int_equal(hub_online_signin(o, 3, "x", true, &none, &cb, NULL), 0);
    assert_int_equal(hub_online_signin(o, 3, "w", true, &w, &cb, NULL), 0);
    assert_int_equal(hub_online_signin(o, 3, "w", true, &none, &cb, NULL), 0);
    assert_int_equal(hub_online_signin(o, 3, "w", false, &none, &cb, NULL), 0);
    assert_int_equal(x.s.n, 4);
    assert_string_equal(x.s.log[0], "Ix!0");
    assert_string_equal(x.s.log[1], "Iw!w2");
    assert_string_equal(x.s.log[2], "Iw0");   /* a second connection */
    assert_string_equal(x.s.log[3], "Iw0");   /* a signin again */
    assert_int_equal(hub_online_conns(o, 3, "w"), 2);
    assert_int_equal(hub_online_check(o), 0);
    /* The visit: online users with their lists, begin once first. */
    hub_online_visit(o, visit_begin, &begun, visit_user, &v);
    assert_int_equal(begun, 1);
    assert_int_equal(v.n, 2);
    assert_true(saw(&v, "3:w:x,") || saw(&v, "3:w:x,y,"));
    assert_true(saw(&v, "3:x:"));
    /* Only the last local signout is a change. */
    hub_online_signout(o, 3, "w", &cb);
    assert_int_equal(x.s.n, 4);
    hub_online_signout(o, 3, "w", &cb);
    assert_int_equal(x.s.n, 5);
    assert_string_equal(x.s.log[4], "Ow0");
    /* Not taken (the broker is away): reported locally as before. */
    x.take = false;
    assert_int_equal(hub_online_signin(o, 3, "w", true, &w, &cb, NULL), 0);
    assert_true(saw(&x.s, "=x"));
    hub_online_signout(o, 3, "x", &cb);
    assert_true(saw(&x.s, "w<x-"));
    hub_online_signout(o, 3, "w", &cb);
    assert_int_equal(hub_online_records(o), 0);
    hub_online_destroy(o);
}

static void test_online_edges(void **state)
{
    struct hub_online *o = hub_online_create();
    static const char *const wl[] = { "x", "y", "nobody" };
    struct seen s = { 0 };

    (void)state;
    assert_non_null(o);
    assert_int_equal(signin(o, "y", true, NULL, 0, 0, &s, NULL), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(signin(o, "w", true, wl, 3, 0, &s, NULL), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.log[0], "=y");
    s.n = 0;
    /* x: the first connection is the edge, the second is not. */
    assert_int_equal(signin(o, "x", true, NULL, 0, 0, &s, NULL), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.log[0], "w<x+");
    assert_int_equal(signin(o, "x", true, NULL, 0, 0, &s, NULL), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(hub_online_conns(o, 3, "x"), 2);
    assert_int_equal(hub_online_conns(o, 4, "x"), 0); /* another app */
    signout(o, "x", &s);
    assert_int_equal(s.n, 1);
    signout(o, "x", &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.log[1], "w<x-");
    /* A signout with nothing counted is ignored. */
    signout(o, "x", &s);
    signout(o, "never", &s);
    assert_int_equal(s.n, 2);
    assert_int_equal(hub_online_check(o), 0);
    /* w (the watcher) leaves: its list goes; y no longer has a watcher. */
    signout(o, "w", &s);
    s.n = 0;
    signout(o, "y", &s);
    assert_int_equal(s.n, 0);
    assert_int_equal(hub_online_records(o), 0);
    hub_online_destroy(o);
}

static void test_online_replace_and_keep(void **state)
{
    struct hub_online *o = hub_online_create();
    static const char *const a[] = { "x", "w" }; /* its own id: skipped */
    static const char *const b[] = { "y" };
    struct seen s = { 0 };

    (void)state;
    assert_int_equal(signin(o, "w", true, a, 2, 0, &s, NULL), 0);
    assert_int_equal(signin(o, "x", true, NULL, 0, 0, &s, NULL), 0);
    assert_true(saw(&s, "w<x+"));
    assert_false(saw(&s, "w<w+"));
    /* A second connection without a watchlist keeps the list... */
    s.n = 0;
    assert_int_equal(signin(o, "w", true, NULL, 0, 0, &s, NULL), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.log[0], "=x");
    /* ...one with a list replaces it. */
    s.n = 0;
    assert_int_equal(signin(o, "w", false, b, 1, 0, &s, NULL), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(hub_online_conns(o, 3, "w"), 2);
    signout(o, "x", &s);
    assert_int_equal(s.n, 0); /* no longer watched */
    assert_int_equal(signin(o, "y", true, NULL, 0, 0, &s, NULL), 0);
    assert_true(saw(&s, "w<y+"));
    assert_int_equal(hub_online_check(o), 0);
    signout(o, "w", &s);
    signout(o, "w", &s);
    signout(o, "y", &s);
    assert_int_equal(hub_online_records(o), 0);
    hub_online_destroy(o);
}

static void test_online_max_watchers(void **state)
{
    struct hub_online *o = hub_online_create();
    static const char *const wl[] = { "p", "x" };
    static const char *const old[] = { "q" };
    struct seen s = { 0 };
    size_t over = 99, before;

    (void)state;
    assert_int_equal(signin(o, "a", true, wl, 2, 1, &s, NULL), 0);
    assert_int_equal(signin(o, "b", true, old, 1, 1, &s, NULL), 0);
    before = hub_online_records(o);
    /* b may not watch x as well: refused, b keeps watching q. */
    assert_int_equal(signin(o, "b", false, wl, 2, 1, &s, &over), -ENOSPC);
    assert_int_equal(over, 0); /* "p" is the first id over */
    assert_int_equal(hub_online_records(o), before);
    assert_int_equal(hub_online_check(o), 0);
    /* a watching the same list again is no new watch. */
    assert_int_equal(signin(o, "a", false, wl, 2, 1, &s, NULL), 0);
    s.n = 0;
    assert_int_equal(signin(o, "q", true, NULL, 0, 0, &s, NULL), 0);
    assert_true(saw(&s, "b<q+"));
    /* A new user refused comes and goes without a trace. */
    assert_int_equal(signin(o, "c", true, wl, 2, 1, &s, &over), -ENOSPC);
    assert_int_equal(hub_online_conns(o, 3, "c"), 0);
    signout(o, "a", &s);
    signout(o, "b", &s);
    signout(o, "q", &s);
    assert_int_equal(hub_online_records(o), 0);
    hub_online_destroy(o);
}

/* Every allocation of a signin with a watchlist fails in turn. */
static void test_online_nomem(void **state)
{
    static const char *const wl[] = { "x", "y", "z", "v", "u" };
    long base = fail_alloc_live();
    struct hub_online *o = hub_online_create();
    struct seen s = { 0 };
    size_t records;
    int rc = 0;

    (void)state;
    /* Some records exist already: x online, y watched by someone. */
    assert_int_equal(signin(o, "x", true, NULL, 0, 0, &s, NULL), 0);
    assert_int_equal(signin(o, "k", true, wl + 1, 1, 0, &s, NULL), 0);
    assert_int_equal(signin(o, "w", true, wl + 4, 1, 0, &s, NULL), 0);
    records = hub_online_records(o);
    FAIL_ALLOC_COUNTDOWN(
        {
            s.n = 0;
            rc = signin(o, "w", false, wl, 5, 0, &s, NULL);
        },
        {
            assert_int_equal(hub_online_check(o), 0);
            if (fa_failed) {
                assert_int_equal(rc, -ENOMEM);
                assert_int_equal(s.n, 0);
                assert_int_equal(hub_online_records(o), records);
                /* A watchers[] slot reserved before the failure may stay
                 * (capacity, freed with its record): leaks show below. */
                assert_true(fail_alloc_live() <= fa_live_before + 1);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(s.n, 1);
                assert_string_equal(s.log[0], "=x");
            }
        });
    /* A new user's own record failing. */
    FAIL_ALLOC_COUNTDOWN(
        {
            s.n = 0;
            rc = signin(o, "n", true, wl, 2, 0, &s, NULL);
        },
        {
            if (fa_failed) {
                assert_int_equal(rc, -ENOMEM);
                assert_int_equal(hub_online_conns(o, 3, "n"), 0);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(hub_online_conns(o, 3, "n"), 1);
            }
            assert_int_equal(hub_online_check(o), 0);
        });
    signout(o, "n", &s);
    signout(o, "w", &s);
    signout(o, "k", &s);
    signout(o, "x", &s);
    assert_int_equal(hub_online_records(o), 0);
    hub_online_destroy(o);
    assert_int_equal(fail_alloc_live(), base);
}

struct racer {
    struct hub_online *o;
    long online, offline;
};

static void race_edge(void *ctx, unsigned app, const char *watcher,
                      const char *user, bool online)
{
    struct racer *r = ctx;

    (void)app;
    (void)watcher;
    (void)user;
    /* Under the registry's mutex: plain counters are safe. */
    if (online)
        r->online++;
    else
        r->offline++;
    /* Edges alternate: online first, never two of a kind. */
    assert_true(r->online - r->offline == 0 || r->online - r->offline == 1);
}

static void *race(void *arg)
{
    struct racer *r = arg;
    struct hub_online_cb cb = { race_edge, NULL, r, NULL };

    for (int i = 0; i < 2000; i++) {
        assert_int_equal(hub_online_signin(r->o, 3, "x", true, NULL, &cb,
                                           NULL), 0);
        hub_online_signout(r->o, 3, "x", &cb);
    }
    return NULL;
}

static void test_online_two_threads(void **state)
{
    static const char *const wl[] = { "x" };
    struct racer r = { hub_online_create(), 0, 0 };
    struct seen s = { 0 };
    pthread_t a, b;

    (void)state;
    assert_int_equal(signin(r.o, "w", true, wl, 1, 0, &s, NULL), 0);
    assert_int_equal(pthread_create(&a, NULL, race, &r), 0);
    assert_int_equal(pthread_create(&b, NULL, race, &r), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(r.online, r.offline);
    assert_true(r.online >= 1);
    assert_int_equal(hub_online_conns(r.o, 3, "x"), 0);
    signout(r.o, "w", &s);
    assert_int_equal(hub_online_records(r.o), 0);
    hub_online_destroy(r.o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_online_edges),
        cmocka_unit_test(test_online_shared),
        cmocka_unit_test(test_online_replace_and_keep),
        cmocka_unit_test(test_online_max_watchers),
        cmocka_unit_test(test_online_nomem),
        cmocka_unit_test(test_online_two_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
