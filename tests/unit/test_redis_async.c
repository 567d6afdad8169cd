/*
 * tests/unit/test_redis_async.c - lubdub's asynchronous connection to
 * Redis (server/redis/redis_async.h) on a libev loop, against a fake
 * Redis thread on a loopback port (tests/unit/fake_resp.h) that writes
 * canned RESP bytes, often in pieces: replies in command order (pipelined,
 * split across reads, larger than a read, behind a megabyte of output),
 * pushes on a subscriber, and every way a connection ends (closed by the
 * caller with commands pending or from inside a callback, by the peer, by
 * -READONLY, by garbage, by a refused connect) calling each callback once.
 *
 * Thread: the test's runs the loop; each fake serves on its own thread.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_resp.h"
#include "server/redis/redis_async.h"

#define WAIT_S 20.0 /* a bound, never reached when the code works */

/* What the callbacks of one connection saw. */
struct rec {
    struct srv_redis_async *c;
    int got, nulls, bad, closed, after_closed;
    int want;         /* done when got reaches it */
    char why[256];
    atomic_bool done; /* want reached, or closed */
    int close_at;     /* the callback of this index closes c (-1: none) */
};

static struct rec *rec_of(void **state)
{
    static struct rec r;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.close_at = -1;
    return &r;
}

static void on_closed(struct srv_redis_async *c, void *data, const char *why)
{
    struct rec *r = data;

    assert_ptr_equal(c, r->c);
    r->closed++;
    snprintf(r->why, sizeof(r->why), "%s", why);
    atomic_store(&r->done, true);
}

/* priv: the command's index; a reply is its index as a string (or
 * anything, when expect_index is off: see count_cb). */
static void index_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct rec *r = srv_redis_async_data(c);
    const redisReply *rep = reply;
    char want[24];

    if (r->closed)
        r->after_closed++;
    snprintf(want, sizeof(want), "%d", (int)(intptr_t)priv);
    if (!rep)
        r->nulls++;
    else if (rep->type != REDIS_REPLY_STRING || strcmp(rep->str, want) ||
             (int)(intptr_t)priv != r->got)
        r->bad++;
    r->got++;
    if (r->got == r->want)
        atomic_store(&r->done, true);
}

/* Counts replies and NULLs; closes c at r->close_at. */
static void count_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct rec *r = srv_redis_async_data(c);

    (void)priv;
    if (r->closed)
        r->after_closed++;
    if (!reply)
        r->nulls++;
    r->got++;
    if (r->got - 1 == r->close_at) {
        srv_redis_async_close(c);
        /* Ended, not yet freed: a command is refused, a close is a no-op. */
        assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), -1);
        srv_redis_async_close(c);
    }
    if (r->got == r->want)
        atomic_store(&r->done, true);
}

struct rig {
    struct ev_loop *loop;
    struct fake_resp f;
    struct rec *r;
};

static struct srv_redis_async *open_to(struct rig *g, int port)
{
    char why[200] = "";
    struct srv_redis_async *c =
        srv_redis_async_open(g->loop, "127.0.0.1", port, NULL, NULL, why,
                             sizeof(why));

    assert_non_null(c);
    srv_redis_async_on(c, on_closed, NULL, g->r);
    g->r->c = c;
    return c;
}

static void rig_start(struct rig *g, fake_resp_serve_fn *serve, void *arg)
{
    memset(g, 0, sizeof(*g));
    g->loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(g->loop);
    g->r = rec_of(NULL);
    fake_resp_start(&g->f, serve, arg);
}

static void rig_stop(struct rig *g)
{
    fake_resp_stop(&g->f);
    ev_loop_destroy(g->loop);
}

/* ------------------------------------------------------- replies in order */

#define PIPELINED 2000

/* ECHO i for every command, answered once all are read, in pieces. */
static void serve_echo_all(struct fake_conn *fc, void *arg)
{
    size_t cap = PIPELINED * 32, len = 0;
    char *out = malloc(cap);

    (void)arg;
    assert_non_null(out);
    for (int i = 0; i < PIPELINED; i++) {
        if (fake_resp_read(fc) != 2 || !fake_resp_is(fc, 0, "ECHO"))
            break;
        len += (size_t)snprintf(out + len, cap - len, "$%zu\r\n%s\r\n",
                                fc->arglen[1], fc->arg[1]);
    }
    /* The first replies a few bytes at a time, the rest in pieces that
     * cut replies anywhere. */
    fake_resp_split(fc, out, 64, 3);
    fake_resp_split(fc, out + 64, len - 64, 4093);
    free(out);
    fake_resp_drain(fc);
}

static void test_redis_async_pipelined_replies_reach_callbacks_in_order(
    void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_echo_all, NULL);
    c = open_to(&g, g.f.port);
    g.r->want = PIPELINED;
    for (int i = 0; i < PIPELINED; i++) {
        char n[24];
        const char *av[2] = {"ECHO", n};
        size_t lens[2] = {4, 0};

        lens[1] = (size_t)snprintf(n, sizeof(n), "%d", i);
        assert_int_equal(srv_redis_async_argv(c, index_cb, (void *)(intptr_t)i,
                                              2, av, lens),
                         0);
    }
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_int_equal(g.r->got, PIPELINED);
    assert_int_equal(g.r->bad, 0);
    assert_int_equal(g.r->nulls, 0);
    assert_int_equal(g.r->closed, 0);
    srv_redis_async_close(c);
    rig_stop(&g);
}

#define BIG (100 * 1000)

/* GET big: a 100 kB bulk in 10 kB pieces; then PING: +PONG. */
static void serve_big(struct fake_conn *fc, void *arg)
{
    char *out = malloc(BIG + 64);
    int n;

    (void)arg;
    assert_non_null(out);
    if (fake_resp_read(fc) == 2 && fake_resp_read(fc) == 1) {
        n = snprintf(out, 64, "$%d\r\n", BIG);
        for (int i = 0; i < BIG; i++)
            out[n + i] = (char)('a' + i % 26);
        memcpy(out + n + BIG, "\r\n+PONG\r\n", 9);
        fake_resp_split(fc, out, (size_t)n + BIG + 9, 10000);
    }
    free(out);
    fake_resp_drain(fc);
}

static int big_ok;

static void big_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    const redisReply *rep = reply;
    struct rec *r = srv_redis_async_data(c);

    (void)priv;
    big_ok = rep && rep->type == REDIS_REPLY_STRING && rep->len == BIG &&
             r->got == 0;
    for (size_t i = 0; big_ok && i < BIG; i++)
        big_ok = rep->str[i] == (char)('a' + i % 26);
    r->got++;
}

static void pong_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    const redisReply *rep = reply;
    struct rec *r = srv_redis_async_data(c);

    (void)priv;
    if (!rep || rep->type != REDIS_REPLY_STATUS || strcmp(rep->str, "PONG") ||
        r->got != 1)
        r->bad++;
    r->got++;
    atomic_store(&r->done, true);
}

static void test_redis_async_reply_larger_than_a_read_arrives_whole(
    void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_big, NULL);
    c = open_to(&g, g.f.port);
    big_ok = 0;
    assert_int_equal(srv_redis_async_cmd(c, big_cb, NULL, "GET %s", "big"), 0);
    assert_int_equal(srv_redis_async_cmd(c, pong_cb, NULL, "PING"), 0);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_true(big_ok);
    assert_int_equal(g.r->got, 2);
    assert_int_equal(g.r->bad, 0);
    srv_redis_async_close(c);
    rig_stop(&g);
}

#define SETS 256
#define VAL 4096

struct sets_seen {
    int n, bad;
};

/* SET k v for each: v checked against its pattern, +OK. */
static void serve_sets(struct fake_conn *fc, void *arg)
{
    struct sets_seen *s = arg;

    while (fake_resp_read(fc) == 3) {
        bool ok = fc->arglen[2] == VAL;

        for (size_t i = 0; ok && i < VAL; i++)
            ok = fc->arg[2][i] == (char)('a' + s->n % 26);
        s->bad += !ok;
        s->n++;
        fake_resp_write(fc, "+OK\r\n", 0);
    }
}

static void ok_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct rec *r = srv_redis_async_data(c);
    const redisReply *rep = reply;

    if (!rep || rep->type != REDIS_REPLY_STATUS || strcmp(rep->str, "OK") ||
        (intptr_t)priv != r->got)
        r->bad++;
    r->got++;
    if (r->got == r->want)
        atomic_store(&r->done, true);
}

static void test_redis_async_megabyte_of_output_goes_out_in_order(void **state)
{
    struct sets_seen seen = {0};
    struct rig g;
    struct srv_redis_async *c;
    char *v = malloc(VAL);

    (void)state;
    assert_non_null(v);
    rig_start(&g, serve_sets, &seen);
    c = open_to(&g, g.f.port);
    g.r->want = SETS;
    for (int i = 0; i < SETS; i++) {
        memset(v, 'a' + i % 26, VAL);
        assert_int_equal(srv_redis_async_cmd(c, ok_cb, (void *)(intptr_t)i,
                                             "SET k%d %b", i, v, (size_t)VAL),
                         0);
    }
    assert_true(srv_redis_async_unsent(c) > (size_t)SETS * VAL);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_int_equal(g.r->got, SETS);
    assert_int_equal(g.r->bad, 0);
    assert_int_equal(srv_redis_async_unsent(c), 0);
    srv_redis_async_close(c);
    rig_stop(&g);
    assert_int_equal(seen.n, SETS);
    assert_int_equal(seen.bad, 0);
    free(v);
}

/* ------------------------------------------------------------ subscriber */

/* SUBSCRIBE a b, then PING: two confirmations, a message, PING's reply in
 * subscriber form, another message. */
static void serve_subscriber(struct fake_conn *fc, void *arg)
{
    (void)arg;
    if (fake_resp_read(fc) == 3 && fake_resp_is(fc, 0, "SUBSCRIBE") &&
        fake_resp_read(fc) == 1 && fake_resp_is(fc, 0, "PING")) {
        static const char out[] =
            "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
            "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"
            "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n"
            "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
            "*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$3\r\nbye\r\n";

        fake_resp_split(fc, out, sizeof(out) - 1, 11);
    }
    fake_resp_drain(fc);
}

static char sub_log[256];

static void sub_push(struct srv_redis_async *c, void *reply, void *priv)
{
    const redisReply *r = reply;
    struct rec *rec = srv_redis_async_data(c);
    size_t n = strlen(sub_log);

    assert_ptr_equal(priv, rec);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    snprintf(sub_log + n, sizeof(sub_log) - n, "%s:%s ", r->element[0]->str,
             r->element[1]->str);
    if (++rec->got == 5)
        atomic_store(&rec->done, true);
}

static void sub_ping(struct srv_redis_async *c, void *reply, void *priv)
{
    const redisReply *r = reply;
    struct rec *rec = srv_redis_async_data(c);
    size_t n = strlen(sub_log);

    (void)priv;
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    snprintf(sub_log + n, sizeof(sub_log) - n, "PING=%s ", r->element[0]->str);
    if (++rec->got == 5)
        atomic_store(&rec->done, true);
}

static void test_redis_async_subscriber_pushes_and_ping_reply_routed(
    void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_subscriber, NULL);
    c = open_to(&g, g.f.port);
    srv_redis_async_on(c, on_closed, sub_push, g.r);
    sub_log[0] = '\0';
    assert_int_equal(srv_redis_async_send_push(c, "SUBSCRIBE %s %s", "a", "b"),
                     0);
    assert_int_equal(srv_redis_async_cmd(c, sub_ping, NULL, "PING"), 0);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_string_equal(sub_log, "subscribe:a subscribe:b message:a PING=pong "
                                 "message:b ");
    assert_int_equal(g.r->closed, 0);
    srv_redis_async_close(c);
    rig_stop(&g);
}

/* --------------------------------------------------------- how it ends */

struct silent {
    int want;
    atomic_bool read_all;
};

/* Reads want commands, answers none, waits for the close. */
static void serve_silent(struct fake_conn *fc, void *arg)
{
    struct silent *s = arg;

    for (int i = 0; i < s->want; i++)
        if (fake_resp_read(fc) < 0)
            return;
    atomic_store(&s->read_all, true);
    fake_resp_drain(fc);
}

static void test_redis_async_close_with_pending_calls_each_once_with_null(
    void **state)
{
    struct silent s = {.want = 5};
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_silent, &s);
    c = open_to(&g, g.f.port);
    for (int i = 0; i < 5; i++)
        assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_true(fake_resp_run(g.loop, &s.read_all, WAIT_S));
    assert_int_equal(g.r->got, 0);
    srv_redis_async_close(c);
    assert_int_equal(g.r->got, 5);
    assert_int_equal(g.r->nulls, 5);
    assert_int_equal(g.r->closed, 0);
    srv_redis_async_close(NULL);
    rig_stop(&g);
}

static void test_redis_async_close_before_connect_calls_back_with_null(
    void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_silent, &(struct silent){.want = 1});
    c = open_to(&g, g.f.port);
    assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_int_equal(srv_redis_async_cmd(c, NULL, NULL, "PING"), 0);
    srv_redis_async_close(c);
    assert_int_equal(g.r->nulls, 1);
    assert_int_equal(g.r->closed, 0);
    rig_stop(&g);
}

/* Reads 3 commands, answers the first, closes. */
static void serve_one_then_close(struct fake_conn *fc, void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        if (fake_resp_read(fc) < 0)
            return;
    fake_resp_write(fc, "+PONG\r\n", 0);
}

static void test_redis_async_peer_close_nulls_pending_then_closed_once(
    void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_one_then_close, NULL);
    c = open_to(&g, g.f.port);
    for (int i = 0; i < 3; i++)
        assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_int_equal(g.r->got, 3);
    assert_int_equal(g.r->nulls, 2);
    assert_int_equal(g.r->after_closed, 0);
    assert_int_equal(g.r->closed, 1);
    assert_string_equal(g.r->why, "connection closed");
    rig_stop(&g);
}

/* Three PINGs answered at once. */
static void serve_three_pongs(struct fake_conn *fc, void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        if (fake_resp_read(fc) < 0)
            return;
    fake_resp_write(fc, "+PONG\r\n+PONG\r\n+PONG\r\n", 0);
    fake_resp_drain(fc);
}

static void test_redis_async_callback_closing_its_connection_is_safe(
    void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_three_pongs, NULL);
    c = open_to(&g, g.f.port);
    g.r->want = 3;
    g.r->close_at = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    /* The first had its reply and closed: the others had NULL, once. */
    assert_int_equal(g.r->got, 3);
    assert_int_equal(g.r->nulls, 2);
    assert_int_equal(g.r->closed, 0);
    /* The loop goes on without the connection (freed, its io stopped). */
    ev_run(g.loop, EVRUN_NOWAIT);
    assert_int_equal(g.r->got, 3);
    rig_stop(&g);
}

/* Reads 2 commands; -READONLY to the first, +OK to the second. */
static void serve_readonly(struct fake_conn *fc, void *arg)
{
    (void)arg;
    if (fake_resp_read(fc) < 0 || fake_resp_read(fc) < 0)
        return;
    fake_resp_write(fc,
                    "-READONLY You can't write against a read only "
                    "replica.\r\n+OK\r\n",
                    0);
    fake_resp_drain(fc);
}

static int ro_first;

static void ro_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    const redisReply *r = reply;

    (void)c;
    (void)priv;
    ro_first = r && r->type == REDIS_REPLY_ERROR &&
               !strncmp(r->str, "READONLY", 8);
}

static void test_redis_async_readonly_reply_ends_connection(void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_readonly, NULL);
    c = open_to(&g, g.f.port);
    ro_first = 0;
    assert_int_equal(srv_redis_async_cmd(c, ro_cb, NULL, "SET k v"), 0);
    assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "SET k w"), 0);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_true(ro_first);
    assert_int_equal(g.r->got, 1);
    assert_int_equal(g.r->nulls, 1);
    assert_int_equal(g.r->closed, 1);
    assert_non_null(strstr(g.r->why, "READONLY"));
    rig_stop(&g);
}

static void serve_garbage(struct fake_conn *fc, void *arg)
{
    (void)arg;
    if (fake_resp_read(fc) < 0)
        return;
    fake_resp_split(fc, "+OK\r\n?garbage\r\n", 0, 6);
    fake_resp_drain(fc);
}

static void test_redis_async_protocol_error_ends_connection(void **state)
{
    struct rig g;
    struct srv_redis_async *c;

    (void)state;
    rig_start(&g, serve_garbage, NULL);
    c = open_to(&g, g.f.port);
    assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_true(fake_resp_run(g.loop, &g.r->done, WAIT_S));
    assert_int_equal(g.r->got, 2);
    assert_int_equal(g.r->nulls, 1);
    assert_int_equal(g.r->closed, 1);
    assert_non_null(strstr(g.r->why, "protocol error"));
    rig_stop(&g);
}

static void test_redis_async_connect_refused_calls_closed_with_errno_text(
    void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct rec *r = rec_of(state);
    char why[200] = "";
    struct srv_redis_async *c =
        srv_redis_async_open(loop, "127.0.0.1", fake_resp_closed_port(), NULL,
                             NULL, why, sizeof(why));

    assert_non_null(c);
    srv_redis_async_on(c, on_closed, NULL, r);
    r->c = c;
    assert_int_equal(srv_redis_async_cmd(c, count_cb, NULL, "PING"), 0);
    assert_true(fake_resp_run(loop, &r->done, WAIT_S));
    assert_int_equal(r->nulls, 1);
    assert_int_equal(r->after_closed, 0);
    assert_int_equal(r->closed, 1);
    assert_string_equal(r->why, strerror(ECONNREFUSED));
    ev_loop_destroy(loop);
}

static void test_redis_async_unresolvable_host_open_fails_with_why(
    void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char why[200] = "";

    (void)state;
    assert_null(srv_redis_async_open(loop, "no-such-host.invalid", 6379, NULL,
                                     NULL, why, sizeof(why)));
    assert_non_null(strstr(why, "cannot resolve no-such-host.invalid"));
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_redis_async_pipelined_replies_reach_callbacks_in_order),
        cmocka_unit_test(
            test_redis_async_reply_larger_than_a_read_arrives_whole),
        cmocka_unit_test(
            test_redis_async_megabyte_of_output_goes_out_in_order),
        cmocka_unit_test(
            test_redis_async_subscriber_pushes_and_ping_reply_routed),
        cmocka_unit_test(
            test_redis_async_close_with_pending_calls_each_once_with_null),
        cmocka_unit_test(
            test_redis_async_close_before_connect_calls_back_with_null),
        cmocka_unit_test(
            test_redis_async_peer_close_nulls_pending_then_closed_once),
        cmocka_unit_test(
            test_redis_async_callback_closing_its_connection_is_safe),
        cmocka_unit_test(test_redis_async_readonly_reply_ends_connection),
        cmocka_unit_test(test_redis_async_protocol_error_ends_connection),
        cmocka_unit_test(
            test_redis_async_connect_refused_calls_closed_with_errno_text),
        cmocka_unit_test(
            test_redis_async_unresolvable_host_open_fails_with_why),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
