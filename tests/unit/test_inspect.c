/*
 * tests/unit/test_inspect.c - the console's socket inspector
 * (hub/ops/inspect.h) on a fake hub of two loops: its table of at most
 * HUB_INSPECT_QUERIES queries frees answers nobody polls, other nodes'
 * answers are taken only before the deadline and never crowd out this
 * node's own, a user id too long to keep never matches a search, and no
 * query starts once the loops are going.
 *
 * Thread: the test's only thread plays both loops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/ops/inspect.h"

static struct fake_hub *setup_hub(void)
{
    struct fake_hub *fh = calloc(1, sizeof(*fh));

    assert_non_null(fh);
    fake_hub_init(fh, 2);
    assert_int_equal(fake_hub_start(fh), 0);
    return fh;
}

static void teardown_hub(struct fake_hub *fh)
{
    fake_hub_stop(fh);
    free(fh);
}

static int64_t begin(struct fake_hub *fh, const char *id, bool by_user,
                     unsigned expect)
{
    struct hub_inspect_req rq = { .app = 0, .by_user = by_user };
    struct hub_inspect_start how = { 0 };

    snprintf(rq.id, sizeof(rq.id), "%s", id);
    how.expect = expect;
    how.deadline_ms = expect ? fake_now_ms(fh) + 2000 : 0;
    return hub_inspect_begin(fh->hub, &rq, &how);
}

/* Fill every slot with a query nobody polls; each is answered. */
static void fill(struct fake_hub *fh, unsigned expect)
{
    for (unsigned i = 0; i < HUB_INSPECT_QUERIES; i++)
        assert_true(begin(fh, "1.1", false, expect) > 0);
    fake_hub_drain(fh);
    assert_int_equal(begin(fh, "1.1", false, expect), -EBUSY);
}

/* A console tab closed before its poll must not hold a slot for ever:
 * sixteen such would refuse every inspection (and every other node's
 * question) until a restart. */
static void test_inspect_unpolled_answers_free_their_slots(void **state)
{
    struct fake_hub *fh = setup_hub();

    (void)state;
    fill(fh, 0);
    fake_hub_advance(fh, HUB_INSPECT_KEEP_MS - 1);
    assert_int_equal(begin(fh, "1.1", false, 0), -EBUSY);
    fake_hub_advance(fh, 1);
    assert_true(begin(fh, "1.1", false, 0) > 0);
    teardown_hub(fh);
}

/* Waiting for other nodes that never answer: complete at the deadline,
 * kept a minute from there, polled or not. */
static void test_inspect_unanswered_remote_wait_frees_after_deadline(void **state)
{
    struct fake_hub *fh = setup_hub();

    (void)state;
    fill(fh, 1);
    fake_hub_advance(fh, 2000 + HUB_INSPECT_KEEP_MS - 1);
    assert_int_equal(begin(fh, "1.1", false, 1), -EBUSY);
    fake_hub_advance(fh, 1);
    assert_true(begin(fh, "1.1", false, 1) > 0);
    teardown_hub(fh);
}

/* An answer polled after the minute is gone (404 for the console). */
static void test_inspect_result_expires_after_keep(void **state)
{
    struct fake_hub *fh = setup_hub();
    int64_t id;
    json_t *r = NULL;

    (void)state;
    id = begin(fh, "1.1", false, 0);
    assert_true(id > 0);
    fake_hub_drain(fh);
    assert_int_equal(hub_inspect_result(fh->hub, (uint64_t)id, &r), 0);
    json_decref(r);
    fake_hub_advance(fh, HUB_INSPECT_KEEP_MS);
    assert_int_equal(hub_inspect_result(fh->hub, (uint64_t)id, &r), -ENOENT);
    teardown_hub(fh);
}

static json_t *remote_records(unsigned n_socks)
{
    json_t *o = json_pack("{s:[], s:[]}", "sockets", "closes");
    json_t *socks = json_object_get(o, "sockets");

    /* Not an object: never taken. */
    json_array_append_new(socks, json_string("junk"));
    for (unsigned i = 0; i < n_socks; i++)
        json_array_append_new(socks, json_pack("{s:s, s:i}", "node", "n2",
                                               "loop", (int)i));
    return o;
}

/* Another node answering before this node's loops did leaves room for
 * this node's own records: each node has its own cap. */
static void test_inspect_remote_answer_keeps_room_for_local(void **state)
{
    struct fake_hub *fh = setup_hub();
    struct fake_session *fs = calloc(1, sizeof(*fs));
    int64_t id;
    json_t *r = NULL, *socks;
    size_t i;
    json_t *v;
    unsigned local = 0;

    (void)state;
    assert_non_null(fs);
    assert_int_equal(fake_session_open(fh, fs, 1, &fh->apps[0]), 0);
    id = begin(fh, HUB_SID(&fs->s), false, 1);
    assert_true(id > 0);
    hub_inspect_remote(fh->hub, (uint64_t)id, "n2",
                       remote_records(HUB_INSPECT_SOCKETS + 3));
    fake_hub_drain(fh);
    assert_int_equal(hub_inspect_result(fh->hub, (uint64_t)id, &r), 0);
    socks = json_object_get(r, "sockets");
    assert_int_equal(json_array_size(socks), HUB_INSPECT_SOCKETS + 1);
    json_array_foreach(socks, i, v) {
        assert_true(json_is_object(v));
        if (json_is_null(json_object_get(v, "node")))
            local++;
    }
    assert_int_equal(local, 1);
    json_decref(r);
    hub_session_fini(&fs->s, HUB_CLOSE_PEER);
    free(fs);
    teardown_hub(fh);
}

/* An answer after the deadline is not taken, even before the poll. */
static void test_inspect_late_remote_answer_ignored(void **state)
{
    struct fake_hub *fh = setup_hub();
    int64_t id;
    json_t *r = NULL;

    (void)state;
    id = begin(fh, "1.1", false, 1);
    assert_true(id > 0);
    fake_hub_drain(fh);
    fake_hub_advance(fh, 2001);
    hub_inspect_remote(fh->hub, (uint64_t)id, "n2", remote_records(1));
    assert_int_equal(hub_inspect_result(fh->hub, (uint64_t)id, &r), 0);
    assert_int_equal(json_array_size(json_object_get(r, "sockets")), 0);
    assert_int_equal(json_array_size(json_object_get(r, "nodes_answered")),
                     0);
    json_decref(r);
    teardown_hub(fh);
}

/* A session of user uid (as a sign-in sets it) opened on loop 0 and
 * gone: its close is in the ring. Its socket id into sid. */
static void closed_user(struct fake_hub *fh, const char *uid, char *sid)
{
    struct fake_session *fs = calloc(1, sizeof(*fs));

    assert_non_null(fs);
    assert_int_equal(fake_session_open(fh, fs, 0, &fh->apps[0]), 0);
    fs->s.user_id = strdup(uid);
    assert_non_null(fs->s.user_id);
    snprintf(sid, HUB_SOCKET_ID_MAX, "%s", HUB_SID(&fs->s));
    hub_session_fini(&fs->s, HUB_CLOSE_PEER);
    free(fs);
}

static size_t closes_of(struct fake_hub *fh, const char *id, bool by_user);

static json_t *answer_of(struct fake_hub *fh, const char *id, bool by_user)
{
    int64_t q = begin(fh, id, by_user, 0);
    json_t *r = NULL;

    assert_true(q > 0);
    fake_hub_drain(fh);
    assert_int_equal(hub_inspect_result(fh->hub, (uint64_t)q, &r), 0);
    return r;
}

static size_t closes_of(struct fake_hub *fh, const char *id, bool by_user)
{
    json_t *r = answer_of(fh, id, by_user);
    size_t n = json_array_size(json_object_get(r, "closes"));

    json_decref(r);
    return n;
}

/* A user id longer than the ring keeps is cut at a character's start
 * (the close still shows, as valid text) and never matches a search by
 * its first bytes; an empty id matches no anonymous close. */
static void test_inspect_cut_user_id_never_matches(void **state)
{
    struct fake_hub *fh = setup_hub();
    char uid[HUB_INSPECT_ID_MAX + 40], sid[HUB_SOCKET_ID_MAX];
    json_t *r, *c;

    (void)state;
    /* ASCII: cut at HUB_INSPECT_ID_MAX bytes. */
    memset(uid, 'a', sizeof(uid) - 1);
    uid[sizeof(uid) - 1] = '\0';
    closed_user(fh, uid, sid);
    assert_int_equal(closes_of(fh, sid, false), 1);
    uid[HUB_INSPECT_ID_MAX] = '\0';
    assert_int_equal(closes_of(fh, uid, true), 0);

    /* "é" (2 bytes) straddling the cut: cut before it. */
    memset(uid, 'u', sizeof(uid) - 1);
    uid[sizeof(uid) - 1] = '\0';
    memcpy(uid + HUB_INSPECT_ID_MAX - 1, "\xc3\xa9", 2);
    closed_user(fh, uid, sid);
    r = answer_of(fh, sid, false);
    assert_int_equal(json_array_size(json_object_get(r, "closes")), 1);
    c = json_array_get(json_object_get(r, "closes"), 0);
    assert_int_equal(strlen(json_string_value(json_object_get(c, "user_id"))),
                     HUB_INSPECT_ID_MAX - 1);
    json_decref(r);

    /* Two anonymous closes in the ring: an empty id names neither. */
    closed_user(fh, "", sid);
    assert_int_equal(closes_of(fh, "", true), 0);
    teardown_hub(fh);
}

/* Once a loop is going, no query posts to the loops (another node's
 * question may arrive while they are being joined). */
static void test_inspect_refused_once_loops_go(void **state)
{
    struct fake_hub *fh = setup_hub();

    (void)state;
    hub_loop_destroy(fh->loops[0]);
    fh->loops[0] = NULL;
    assert_int_equal(begin(fh, "1.1", false, 0), -ENOENT);
    teardown_hub(fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect_unpolled_answers_free_their_slots),
        cmocka_unit_test(test_inspect_unanswered_remote_wait_frees_after_deadline),
        cmocka_unit_test(test_inspect_result_expires_after_keep),
        cmocka_unit_test(test_inspect_remote_answer_keeps_room_for_local),
        cmocka_unit_test(test_inspect_late_remote_answer_ignored),
        cmocka_unit_test(test_inspect_cut_user_id_never_matches),
        cmocka_unit_test(test_inspect_refused_once_loops_go),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
