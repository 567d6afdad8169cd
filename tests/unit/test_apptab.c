/*
 * tests/unit/test_apptab.c - the app table and its reload (hub/app/apptab.h,
 * hub/loop/appswap.h, hub/app/app.h's copy path): lookups by key and id over many
 * apps, stable indices and tombstones across generations, the diff a
 * reload logs, what a published table does to the sessions of each loop
 * (moved to a changed app, 4001 for a removed one, 4003 for a disabled
 * one, untouched when unchanged; with two tables published before a
 * drain, a session on the newest app is left to the newest swap), and,
 * with real threads, lookups and
 * sessions on two loops while the main thread publishes table after table
 * (the tsan label runs it under ThreadSanitizer; ASan checks that every
 * retired table and app is freed exactly once).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/loop/appswap.h"
#include "hub/app/apptab.h"

static struct hub_app *mk(const char *id, const char *key, const char *secret)
{
    struct hub_app a;
    struct hub_app *c;

    memset(&a, 0, sizeof(a));
    hub_app_defaults(&a);
    a.id = (char *)id;
    a.key = (char *)key;
    a.secret = (char *)secret;
    c = hub_app_dup(&a);
    assert_non_null(c);
    return c;
}

static void test_apptab_lookup_many(void **state)
{
    enum { N = 2000 };
    struct hub_app *apps = calloc(N, sizeof(*apps));
    char (*ids)[16] = calloc(N, 16), (*keys)[16] = calloc(N, 16);
    struct hub_apptab *t;

    (void)state;
    assert_non_null(apps);
    for (unsigned i = 0; i < N; i++) {
        hub_app_defaults(&apps[i]);
        snprintf(ids[i], 16, "%u", i);
        snprintf(keys[i], 16, "key-%u", i);
        apps[i].id = ids[i];
        apps[i].key = keys[i];
        apps[i].secret = "s";
        apps[i].index = i;
    }
    t = hub_apptab_borrow(apps, N);
    assert_non_null(t);
    assert_int_equal(t->n, N);
    assert_int_equal(t->count, N);
    for (unsigned i = 0; i < N; i++) {
        assert_ptr_equal(hub_apptab_by_key(t, keys[i], strlen(keys[i])),
                         &apps[i]);
        assert_ptr_equal(hub_apptab_by_id(t, ids[i], strlen(ids[i])),
                         &apps[i]);
        assert_ptr_equal(hub_apptab_get(t, i), &apps[i]);
    }
    /* Not NUL-terminated input, prefixes, longer names, ids as keys. */
    assert_ptr_equal(hub_apptab_by_key(t, "key-12xyz", 6), &apps[12]);
    assert_null(hub_apptab_by_key(t, "key-", 4));
    assert_null(hub_apptab_by_key(t, "key-20000", 9));
    assert_null(hub_apptab_by_key(t, "12", 2));
    assert_null(hub_apptab_by_id(t, "key-1", 5));
    assert_null(hub_apptab_by_id(t, NULL, 0));
    assert_null(hub_apptab_get(t, N));
    hub_apptab_free(t, true);
    free(apps);
    free(ids);
    free(keys);
}

static void test_apptab_app_copy_path(void **state)
{
    struct hub_app *a = mk("1", "k", "s"), *b;

    (void)state;
    a->allowed_origins = strdup("https://x");
    b = hub_app_dup(a);
    assert_non_null(b);
    assert_true(hub_app_equal(a, b));
    assert_ptr_not_equal(a->secret, b->secret);
    assert_int_equal(atomic_load(&b->refs), 1);
    free(b->secret);
    b->secret = strdup("s2");
    assert_false(hub_app_equal(a, b));
    free(b->secret);
    b->secret = strdup("s");
    b->max_read_requests_per_second = 3;
    assert_false(hub_app_equal(a, b));
    b->max_read_requests_per_second = 0;
    free(b->allowed_origins);
    b->allowed_origins = NULL;
    assert_false(hub_app_equal(a, b));
    /* References: the last unref frees (ASan checks it). */
    hub_app_ref(b);
    hub_app_unref(b);
    hub_app_unref(b);
    hub_app_unref(a);
    /* Borrowed apps (refs 0) are never freed by unref. */
    {
        struct hub_app s;

        memset(&s, 0, sizeof(s));
        hub_app_ref(&s);
        hub_app_unref(&s);
        assert_int_equal(atomic_load(&s.refs), 0);
    }
}

/* Generation 1: A B C; generation 2: B' (changed) C D; generation 3: A
 * again comes back under a new index. */
static void test_apptab_indices_and_diff(void **state)
{
    struct hub_app *g1[3] = {mk("A", "ka", "sa"), mk("B", "kb", "sb"),
                             mk("C", "kc", "sc")};
    struct hub_app *g2[3] = {mk("C", "kc", "sc"), mk("B", "kb", "sb2"),
                             mk("D", "kd", "sd")};
    struct hub_app *g3[2] = {mk("A", "ka", "sa"), mk("D", "kd", "sd")};
    struct hub_apptab *t1, *t2, *t3;
    struct hub_apptab_diff d;

    (void)state;
    t1 = hub_apptab_build(NULL, g1, 3);
    assert_non_null(t1);
    assert_int_equal(g1[0]->index, 0);
    assert_int_equal(g1[2]->index, 2);
    t2 = hub_apptab_build(t1, g2, 3);
    assert_non_null(t2);
    /* The same id keeps its index (whatever its position in the file);
     * new ones take the next; the removed one is a tombstone. */
    assert_int_equal(g2[0]->index, 2);
    assert_int_equal(g2[1]->index, 1);
    assert_int_equal(g2[2]->index, 3);
    assert_int_equal(t2->n, 4);
    assert_int_equal(t2->count, 3);
    assert_null(hub_apptab_get(t2, 0));
    assert_null(hub_apptab_by_key(t2, "ka", 2));
    assert_ptr_equal(hub_apptab_by_key(t2, "kb", 2), g2[1]);
    assert_ptr_equal(hub_apptab_by_id(t2, "D", 1), g2[2]);
    /* The live structs are shared by every generation. */
    for (unsigned i = 0; i < 3; i++)
        assert_ptr_equal(t2->live[i], t1->live[i]);
    hub_apptab_diff(t1, t2, &d);
    assert_int_equal(d.added, 1);
    assert_int_equal(d.removed, 1);
    assert_int_equal(d.changed, 1);
    assert_int_equal(d.unchanged, 1);
    assert_int_equal(hub_apptab_change(t1, t2, 0), HUB_APP_REMOVED);
    assert_int_equal(hub_apptab_change(t1, t2, 1), HUB_APP_CHANGED);
    assert_int_equal(hub_apptab_change(t1, t2, 2), HUB_APP_SAME);
    assert_int_equal(hub_apptab_change(t1, t2, 3), HUB_APP_ADDED);
    /* An id removed and added back is a new app: indices are never
     * reused (a channel keyed by the old index must not see it). */
    t3 = hub_apptab_build(t2, g3, 2);
    assert_non_null(t3);
    assert_int_equal(g3[0]->index, 4);
    assert_int_equal(g3[1]->index, 3);
    assert_null(hub_apptab_get(t3, 0));
    hub_apptab_diff(t2, t3, &d);
    assert_int_equal(d.added, 1);
    assert_int_equal(d.removed, 2);
    assert_int_equal(d.unchanged, 1);
    /* Each table holds its references; these are the builder's. */
    for (unsigned i = 0; i < 3; i++) {
        hub_app_unref(g1[i]);
        hub_app_unref(g2[i]);
    }
    for (unsigned i = 0; i < 2; i++)
        hub_app_unref(g3[i]);
    hub_apptab_free(t1, false);
    hub_apptab_free(t2, false);
    hub_apptab_free(t3, true);
}

/* A reload on a 2-loop fake hub: what each session of each app gets. */
static void test_apptab_publish_moves_and_closes(void **state)
{
    struct fake_hub fh;
    struct fake_session s[5];
    const struct hub_apptab *cur;
    struct hub_apptab *next;
    struct hub_app *v[3];
    const struct hub_app *keep, *a0_before;

    (void)state;
    fake_hub_init(&fh, 2);
    fh.apps[1].client_events = true;
    assert_int_equal(fake_hub_start(&fh), 0);
    cur = hub_apps(fh.hub);
    /* app 0 on both loops, app 1 on both loops, one more app 0. */
    assert_int_equal(fake_session_open(&fh, &s[0], 0, cur->apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &s[1], 1, cur->apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &s[2], 0, cur->apps[1]), 0);
    assert_int_equal(fake_session_open(&fh, &s[3], 1, cur->apps[1]), 0);
    assert_int_equal(atomic_load(&cur->live[0]->sessions), 2);
    a0_before = s[0].s.app;

    /* app-id gets a new secret; other-id is removed; a new app comes. */
    v[0] = hub_app_dup(&fh.apps[0]);
    free(v[0]->secret);
    v[0]->secret = strdup("new-secret");
    v[1] = mk("third", "third-key", "t");
    next = hub_apptab_build(cur, v, 2);
    assert_non_null(next);
    assert_int_equal(hub_apps_publish(fh.hub, next), 0);
    assert_ptr_equal(hub_apps(fh.hub), next);
    /* New lookups see the new table at once. */
    assert_ptr_equal(hub_apptab_by_key(hub_apps(fh.hub), "app-key", 7), v[0]);
    assert_null(hub_apptab_by_key(hub_apps(fh.hub), "other-key", 9));
    /* Sessions change only when their loop runs its inbox. */
    assert_ptr_equal(s[0].s.app, a0_before);
    fake_hub_drain(&fh);
    for (int i = 0; i < 2; i++) {
        assert_ptr_equal(s[i].s.app, v[0]);
        assert_string_equal(s[i].s.app->secret, "new-secret");
        assert_int_equal(s[i].s.state, HUB_SESSION_OPEN);
    }
    for (int i = 2; i < 4; i++) {
        assert_int_equal(s[i].s.state, HUB_SESSION_CLOSING);
        assert_int_equal(s[i].s.close_code, 4001);
        assert_true(fake_find(&s[i].s, "\"code\":4001") >= 0);
    }
    /* The quota count is per index and survives the reload. */
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 2);
    assert_int_equal(atomic_load(&v[0]->refs), 4); /* v, table, 2 sessions */

    /* Then app-id is disabled: 4003 for its open sessions; a session of
     * the new app is untouched. */
    assert_int_equal(fake_session_open(&fh, &s[4], 1, v[1]), 0);
    keep = s[4].s.app;
    v[2] = hub_app_dup(v[0]);
    v[2]->enabled = false;
    {
        struct hub_app *w[2] = {v[2], v[1]};

        next = hub_apptab_build(hub_apps(fh.hub), w, 2);
    }
    assert_non_null(next);
    assert_int_equal(hub_apps_publish(fh.hub, next), 0);
    fake_hub_drain(&fh);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s[i].s.close_code, 4003);
        assert_true(fake_find(&s[i].s, "\"code\":4003") >= 0);
        /* A closing session keeps the app it had. */
        assert_ptr_equal(s[i].s.app, v[0]);
    }
    assert_ptr_equal(s[4].s.app, keep);
    assert_int_equal(s[4].s.state, HUB_SESSION_OPEN);
    for (int i = 0; i < 3; i++)
        hub_app_unref(v[i]);
    for (int i = 0; i < 5; i++)
        hub_session_fini(&s[i].s, HUB_CLOSE_APP);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 0);
    fake_hub_stop(&fh);
}

/* A publish with inbox nodes still queued when the loops go away: the
 * drop path frees the retired table too (ASan). */
static void test_apptab_publish_then_destroy(void **state)
{
    struct fake_hub fh;
    struct hub_app *v[1];
    struct hub_apptab *next;

    (void)state;
    fake_hub_init(&fh, 3);
    assert_int_equal(fake_hub_start(&fh), 0);
    for (int round = 0; round < 3; round++) {
        v[0] = mk("x", "kx", round ? "s1" : "s0");
        next = hub_apptab_build(hub_apps(fh.hub), v, 1);
        assert_non_null(next);
        assert_int_equal(hub_apps_publish(fh.hub, next), 0);
        hub_app_unref(v[0]);
    }
    fake_hub_stop(&fh);
}

/*
 * Real threads: two loops, each on its own thread, connect and close
 * sessions by key and look apps up by id, draining their inbox between
 * rounds, while this thread publishes ROUNDS tables that add, change and
 * remove apps.
 */
enum { ROUNDS = 300, SESSIONS = 8 };

struct loop_thread {
    struct fake_hub *fh;
    unsigned li;
    atomic_bool *stop;
    atomic_uint rounds;            /* read by the main thread */
    unsigned opened, found;
};

static void *loop_main(void *arg)
{
    struct loop_thread *lt = arg;
    struct fake_session *fs = calloc(SESSIONS, sizeof(*fs));
    char uri[32];
    unsigned k = 0;

    assert_non_null(fs);
    while (!atomic_load(lt->stop)) {
        struct fake_session *f = &fs[k % SESSIONS];
        const struct hub_app *a;

        hub_loop_drain_inbox(lt->fh->loops[lt->li], fake_now_ms(lt->fh));
        if (f->s.loop)
            hub_session_fini(&f->s, HUB_CLOSE_PEER);
        memset(f, 0, sizeof(*f));
        assert_int_equal(hub_session_init(&f->s, lt->fh->loops[lt->li],
                                          &f->conn, fake_now_ms(lt->fh)),
                         0);
        snprintf(uri, sizeof(uri), "/app/k%u", k % 5);
        hub_pusher_connect(&f->s, uri, strlen(uri), 7);
        if (f->s.app && f->s.state == HUB_SESSION_OPEN) {
            /* Read the app as a session does. */
            lt->opened += f->s.app->secret[0] == 's';
        }
        a = hub_apptab_by_id(hub_apps(lt->fh->hub), "i1", 2);
        lt->found += a && a->max_event_bytes > 0;
        k++;
        atomic_fetch_add(&lt->rounds, 1);
    }
    hub_loop_drain_inbox(lt->fh->loops[lt->li], fake_now_ms(lt->fh));
    for (unsigned i = 0; i < SESSIONS; i++)
        if (fs[i].s.loop)
            hub_session_fini(&fs[i].s, HUB_CLOSE_PEER);
    free(fs);
    return NULL;
}

static void quiet_conn(void *conn)
{
    (void)conn;
}

/* The fake transport counts calls in shared fields; two loop threads
 * need one that touches nothing. */
static const struct hub_transport_ops quiet_ops = {
    .want_writable = quiet_conn,
    .flush_soon = quiet_conn,
    .kill = quiet_conn,
};

static void test_apptab_reload_threads(void **state)
{
    struct fake_hub fh;
    struct loop_thread lt[2];
    pthread_t th[2];
    atomic_bool stop;
    char ids[5][8], keys[5][8], secret[16];

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    /* No wakeups from this thread: the loops poll their inboxes. */
    fh.loops[0]->wake = fh.loops[1]->wake = NULL;
    fh.loops[0]->ops = fh.loops[1]->ops = &quiet_ops;
    atomic_init(&stop, false);
    for (unsigned i = 0; i < 5; i++) {
        snprintf(ids[i], sizeof(ids[i]), "i%u", i);
        snprintf(keys[i], sizeof(keys[i]), "k%u", i);
    }
    for (unsigned i = 0; i < 2; i++) {
        lt[i].fh = &fh;
        lt[i].li = i;
        lt[i].stop = &stop;
        atomic_init(&lt[i].rounds, 0);
        lt[i].opened = lt[i].found = 0;
        assert_int_equal(pthread_create(&th[i], NULL, loop_main, &lt[i]), 0);
    }
    for (unsigned r = 0; r < ROUNDS; r++) {
        unsigned seen[2] = {atomic_load(&lt[0].rounds),
                            atomic_load(&lt[1].rounds)};
        struct hub_app *v[5];
        unsigned n = 0;
        struct hub_apptab *next;

        /* App i is present in rounds where bit i of r is clear (i1 and i2
         * come and go), with a secret that changes every round. */
        for (unsigned i = 0; i < 5; i++) {
            if (i && i < 3 && ((r >> i) & 1))
                continue;
            snprintf(secret, sizeof(secret), "s%u", r);
            v[n++] = mk(ids[i], keys[i], secret);
        }
        next = hub_apptab_build(hub_apps(fh.hub), v, n);
        assert_non_null(next);
        assert_int_equal(hub_apps_publish(fh.hub, next), 0);
        for (unsigned i = 0; i < n; i++)
            hub_app_unref(v[i]);
        /* Every few publishes, let both loops go round (drain, connect,
         * look up) so that reloads and loop work overlap. */
        while (r % 8 == 0 && (atomic_load(&lt[0].rounds) < seen[0] + 2 ||
                              atomic_load(&lt[1].rounds) < seen[1] + 2))
            sched_yield();
    }
    atomic_store(&stop, true);
    for (unsigned i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_true(lt[0].opened + lt[1].opened > 0);
    fake_hub_stop(&fh);
}

/* The cluster-wide max_connections check (hub/app/apptab.h): this node's
 * sessions before the new one plus the other nodes' replica. */
static void test_apptab_quota_counts_other_nodes(void **state)
{
    (void)state;
    /* No quota: never full, whatever the counts. */
    assert_false(hub_app_quota_full(0, 0, 0));
    assert_false(hub_app_quota_full(0, 1000000, 1000000));
    /* A single node (remote 0): the 5th of max 4 is refused. */
    assert_false(hub_app_quota_full(4, 3, 0));
    assert_true(hub_app_quota_full(4, 4, 0));
    /* max 4 across 2 nodes: 2 here + 2 there = full; 1 + 2 is not. */
    assert_false(hub_app_quota_full(4, 1, 2));
    assert_true(hub_app_quota_full(4, 2, 2));
    assert_true(hub_app_quota_full(4, 0, 4));
    /* A replica above the quota (the others raced past it within one
     * tick) refuses every new one here, never wraps. */
    assert_true(hub_app_quota_full(4, 0, 9));
    assert_true(hub_app_quota_full(UINT32_MAX, UINT32_MAX, UINT32_MAX));
    assert_false(hub_app_quota_full(UINT32_MAX, UINT32_MAX - 2, 1));
}

/* An owned app of id with n key/secret pairs "<p>-<i>" / "s-<p>-<i>"
 * (key rotation, hub/app/app.h). */
static struct hub_app *mk_pairs(const char *id, const char *p, unsigned n)
{
    struct hub_app_pair pairs[HUB_APP_KEYS_MAX];
    char keys[HUB_APP_KEYS_MAX][32], secrets[HUB_APP_KEYS_MAX][32];
    struct hub_app a;

    assert_true(n >= 1 && n <= HUB_APP_KEYS_MAX);
    for (unsigned i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s-%u", p, i);
        snprintf(secrets[i], sizeof(secrets[i]), "s-%s-%u", p, i);
        pairs[i] = (struct hub_app_pair){ keys[i], secrets[i] };
    }
    memset(&a, 0, sizeof(a));
    hub_app_defaults(&a);
    a.id = (char *)id;
    a.key = keys[0];
    a.secret = secrets[0];
    a.more_keys = n > 1 ? &pairs[1] : NULL;
    a.n_more_keys = n - 1;
    return hub_app_dup(&a);
}

/* Every pair's key finds its app and tells the pair, over many apps of
 * up to HUB_APP_KEYS_MAX pairs (the index sized for the keys, not the
 * apps); misses stay misses. */
static void test_apptab_keys_lookup_every_pair(void **state)
{
    enum { N = 600 };
    struct hub_app *v[N];
    struct hub_apptab *t;
    char id[16], p[16], key[40], secret[48];
    unsigned pair = 99, total = 0;

    (void)state;
    for (unsigned i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "%u", i);
        snprintf(p, sizeof(p), "k%u", i);
        v[i] = mk_pairs(id, p, 1 + i % HUB_APP_KEYS_MAX);
        assert_non_null(v[i]);
    }
    t = hub_apptab_build(NULL, v, N);
    assert_non_null(t);
    /* Half full at most, counting every key. */
    for (unsigned i = 0; i < N; i++)
        total += hub_app_n_keys(v[i]);
    assert_true(total > 4 * N);
    assert_true(t->mask + 1 >= 2 * total);
    for (unsigned i = 0; i < N; i++) {
        for (unsigned k = 0; k < hub_app_n_keys(v[i]); k++) {
            snprintf(key, sizeof(key), "k%u-%u", i, k);
            pair = 99;
            assert_ptr_equal(hub_apptab_find_key(t, key, strlen(key), &pair),
                             v[i]);
            assert_int_equal(pair, k);
            assert_ptr_equal(hub_apptab_by_key(t, key, strlen(key)), v[i]);
            snprintf(secret, sizeof(secret), "s-%s", key);
            assert_string_equal(hub_app_secret_at(v[i], pair), secret);
        }
        /* One past the app's last pair is nobody's key. */
        snprintf(key, sizeof(key), "k%u-%u", i, hub_app_n_keys(v[i]));
        assert_null(hub_apptab_find_key(t, key, strlen(key), &pair));
    }
    assert_null(hub_apptab_find_key(t, "k1-", 3, &pair));
    assert_null(hub_apptab_find_key(t, NULL, 0, &pair));
    assert_ptr_equal(hub_apptab_by_id(t, "17", 2), v[17]);
    for (unsigned i = 0; i < N; i++)
        hub_app_unref(v[i]);
    hub_apptab_free(t, true);
}

/* A session connected by /app/<key> on the fake hub (loop li). */
static void connect_key(struct fake_hub *fh, struct fake_session *fs,
                        unsigned li, const char *key)
{
    char uri[64];

    memset(fs, 0, sizeof(*fs));
    assert_int_equal(hub_session_init(&fs->s, fh->loops[li], &fs->conn,
                                      fake_now_ms(fh)),
                     0);
    snprintf(uri, sizeof(uri), "/app/%s", key);
    hub_pusher_connect(&fs->s, uri, strlen(uri), 7);
}

/* Publish w[0..n) as the next table and run both loops' inboxes. */
static void publish_apps(struct fake_hub *fh, struct hub_app **w, unsigned n)
{
    struct hub_apptab *next = hub_apptab_build(hub_apps(fh->hub), w, n);

    assert_non_null(next);
    assert_int_equal(hub_apps_publish(fh->hub, next), 0);
    fake_hub_drain(fh);
}

/* Key rotation across reloads: connections open on any pair's key; a
 * reload that removes a pair closes that key's connections with 4001 and
 * no other; a pair added is found at once; a kept key's connection follows
 * its pair to a new position. */
static void test_apptab_keys_reload_closes_removed_pair(void **state)
{
    struct fake_hub fh;
    struct fake_session s[6];
    struct hub_app *v[4];
    static struct hub_app_pair two = { "app-key-2", "secret-2" };

    (void)state;
    fake_hub_init(&fh, 2);
    fh.apps[0].more_keys = &two;
    fh.apps[0].n_more_keys = 1;
    assert_int_equal(fake_hub_start(&fh), 0);
    connect_key(&fh, &s[0], 0, "app-key");
    connect_key(&fh, &s[1], 1, "app-key-2");
    connect_key(&fh, &s[2], 0, "app-key-2");
    connect_key(&fh, &s[3], 1, "other-key");
    for (int i = 0; i < 4; i++)
        assert_int_equal(s[i].s.state, HUB_SESSION_OPEN);
    assert_ptr_equal(s[1].s.app, &fh.apps[0]);
    assert_int_equal(s[0].s.key_pair, 0);
    assert_int_equal(s[1].s.key_pair, 1);
    assert_int_equal(s[2].s.key_pair, 1);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 3);

    /* Pair 2 removed: only its two connections close, with 4001. */
    v[0] = mk("app-id", "app-key", "app-secret");
    v[1] = hub_app_dup(&fh.apps[1]);
    publish_apps(&fh, v, 2);
    assert_int_equal(s[0].s.state, HUB_SESSION_OPEN);
    assert_ptr_equal(s[0].s.app, v[0]);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(s[i].s.state, HUB_SESSION_CLOSING);
        assert_int_equal(s[i].s.close_code, 4001);
        assert_true(fake_find(&s[i].s, "\"code\":4001") >= 0);
    }
    assert_int_equal(s[3].s.state, HUB_SESSION_OPEN);
    assert_null(hub_apptab_by_key(hub_apps(fh.hub), "app-key-2", 9));

    /* A new first pair in front of the kept one: found at once, and the
     * kept key's connection stays, now on pair 1. */
    {
        struct hub_app_pair kept = { "app-key", "app-secret" };
        struct hub_app a = *v[0];

        a.key = "app-key-3";
        a.secret = "secret-3";
        a.more_keys = &kept;
        a.n_more_keys = 1;
        v[2] = hub_app_dup(&a);
        assert_non_null(v[2]);
    }
    {
        struct hub_app *w[2] = { v[2], v[1] };

        publish_apps(&fh, w, 2);
    }
    assert_int_equal(s[0].s.state, HUB_SESSION_OPEN);
    assert_ptr_equal(s[0].s.app, v[2]);
    assert_int_equal(s[0].s.key_pair, 1);
    connect_key(&fh, &s[4], 1, "app-key-3");
    assert_int_equal(s[4].s.state, HUB_SESSION_OPEN);
    assert_int_equal(s[4].s.key_pair, 0);
    connect_key(&fh, &s[5], 0, "app-key-2");
    assert_int_equal(s[5].s.close_code, 4001); /* unknown key */

    /* The old key goes: its connection closes, the new key's stays. */
    v[3] = mk("app-id", "app-key-3", "secret-3");
    {
        struct hub_app *w[2] = { v[3], v[1] };

        publish_apps(&fh, w, 2);
    }
    assert_int_equal(s[0].s.close_code, 4001);
    assert_int_equal(s[4].s.state, HUB_SESSION_OPEN);
    assert_ptr_equal(s[4].s.app, v[3]);
    assert_int_equal(s[4].s.key_pair, 0);
    assert_int_equal(s[3].s.state, HUB_SESSION_OPEN);

    for (int i = 0; i < 4; i++)
        hub_app_unref(v[i]);
    for (int i = 0; i < 6; i++)
        hub_session_fini(&s[i].s, HUB_CLOSE_APP);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 0);
    fake_hub_stop(&fh);
}

/* Publish w[0..n) as the next table without running any loop's inbox. */
static void publish_only(struct fake_hub *fh, struct hub_app **w, unsigned n)
{
    struct hub_apptab *next = hub_apptab_build(hub_apps(fh->hub), w, n);

    assert_non_null(next);
    assert_int_equal(hub_apps_publish(fh->hub, next), 0);
}

/* Two reloads published before the loops drain: a session that connected
 * on the newest table's app (by a key only that table has, or to an app
 * the middle table disabled) is not judged by the middle table's swap: it
 * stays open on the newest app with its pair; a session from before both
 * reloads ends on the newest app too. */
static void test_apptab_keys_two_reloads_keep_newest_session(void **state)
{
    struct fake_hub fh;
    struct fake_session s[5];
    struct hub_app *v[5];

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    connect_key(&fh, &s[0], 0, "app-key");
    assert_int_equal(s[0].s.state, HUB_SESSION_OPEN);

    /* T2: a new secret; T3: a second pair added. */
    v[0] = hub_app_dup(&fh.apps[1]);
    v[1] = mk("app-id", "app-key", "secret-2");
    {
        struct hub_app *w[2] = { v[1], v[0] };

        publish_only(&fh, w, 2);
    }
    {
        struct hub_app_pair kept = { "app-key", "secret-2" };
        struct hub_app a = *v[1];

        a.key = "k-0"; /* keys k-0, app-key */
        a.secret = "s-k-0";
        a.more_keys = &kept;
        a.n_more_keys = 1;
        v[2] = hub_app_dup(&a);
        assert_non_null(v[2]);
    }
    {
        struct hub_app *w[2] = { v[2], v[0] };

        publish_only(&fh, w, 2);
    }
    connect_key(&fh, &s[1], 0, "k-0");
    connect_key(&fh, &s[2], 1, "k-0");
    connect_key(&fh, &s[3], 1, "app-key");
    for (int i = 1; i < 4; i++) {
        assert_int_equal(s[i].s.state, HUB_SESSION_OPEN);
        assert_ptr_equal(s[i].s.app, v[2]);
    }
    fake_hub_drain(&fh);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s[i].s.state, HUB_SESSION_OPEN);
        assert_ptr_equal(s[i].s.app, v[2]);
    }
    assert_int_equal(s[0].s.key_pair, 1);
    assert_int_equal(s[1].s.key_pair, 0);
    assert_int_equal(s[2].s.key_pair, 0);
    assert_int_equal(s[3].s.key_pair, 1);

    /* T4 disables the app, T5 enables it again: a session that connected
     * on T5's app stays open (no 4003 from T4's swap). */
    {
        struct hub_app_pair k0 = { "k-0", "s-k-0" };
        struct hub_app a = *v[2];

        a.key = "app-key"; /* the pairs swapped: app-key, k-0 */
        a.secret = "secret-2";
        a.more_keys = &k0;
        a.n_more_keys = 1;
        a.enabled = false;
        v[3] = hub_app_dup(&a);
        assert_non_null(v[3]);
    }
    {
        struct hub_app *w[2] = { v[3], v[0] };

        publish_only(&fh, w, 2);
    }
    v[4] = mk("app-id", "k-0", "s-k-0");
    {
        struct hub_app *w[2] = { v[4], v[0] };

        publish_only(&fh, w, 2);
    }
    connect_key(&fh, &s[4], 1, "k-0");
    assert_int_equal(s[4].s.state, HUB_SESSION_OPEN);
    fake_hub_drain(&fh);
    assert_int_equal(s[4].s.state, HUB_SESSION_OPEN);
    assert_ptr_equal(s[4].s.app, v[4]);
    assert_int_equal(s[4].s.key_pair, 0);
    /* The sessions from before T4 met the disabled app: 4003, and a
     * closing session keeps its app and its pair (not the disabled app's
     * index of its key). */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s[i].s.close_code, 4003);
        assert_ptr_equal(s[i].s.app, v[2]);
    }
    assert_int_equal(s[0].s.key_pair, 1);
    assert_int_equal(s[1].s.key_pair, 0);
    assert_int_equal(s[3].s.key_pair, 1);

    for (int i = 0; i < 5; i++)
        hub_app_unref(v[i]);
    for (int i = 0; i < 5; i++)
        hub_session_fini(&s[i].s, HUB_CLOSE_APP);
    assert_int_equal(atomic_load(&hub_app_live_of(fh.hub, 0)->sessions), 0);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apptab_keys_lookup_every_pair),
        cmocka_unit_test(test_apptab_keys_reload_closes_removed_pair),
        cmocka_unit_test(test_apptab_keys_two_reloads_keep_newest_session),
        cmocka_unit_test(test_apptab_lookup_many),
        cmocka_unit_test(test_apptab_quota_counts_other_nodes),
        cmocka_unit_test(test_apptab_app_copy_path),
        cmocka_unit_test(test_apptab_indices_and_diff),
        cmocka_unit_test(test_apptab_publish_moves_and_closes),
        cmocka_unit_test(test_apptab_publish_then_destroy),
        cmocka_unit_test(test_apptab_reload_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
