/*
 * tests/unit/test_redis_sync.c - lubdub's synchronous connection to
 * Redis (server/redis/redis_sync.h) against a fake Redis thread on a
 * loopback port (tests/unit/fake_resp.h): a command and its reply,
 * pipelined commands' replies in order, and the ways it breaks (a
 * timeout, -READONLY, the peer gone, a refused connect), after which
 * every call fails at once.
 *
 * Thread: the test's blocks on the connection; the fake serves on its own.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fake_resp.h"
#include "server/redis/redis_sync.h"

static const struct timeval five_s = {5, 0};

static struct srv_redis_sync *open_to(int port, const struct timeval *tv)
{
    char why[200] = "";
    struct srv_redis_sync *s =
        srv_redis_sync_open("127.0.0.1", port, NULL, NULL, tv, why,
                            sizeof(why));

    if (!s)
        fail_msg("open: %s", why);
    assert_string_equal(srv_redis_sync_error(s), "");
    return s;
}

static redisReply *cmd1(struct srv_redis_sync *s, const char *a0,
                        const char *a1)
{
    const char *av[2] = {a0, a1};

    return srv_redis_sync_argv(s, a1 ? 2 : 1, av, NULL);
}

/* PING: +PONG; ECHO x: x, in pieces; INCR: :1, :2, ... */
static void serve_basic(struct fake_conn *fc, void *arg)
{
    long long n = 0;
    char out[64];

    (void)arg;
    while (fake_resp_read(fc) > 0) {
        if (fake_resp_is(fc, 0, "PING")) {
            fake_resp_split(fc, "+PONG\r\n", 0, 2);
        } else if (fake_resp_is(fc, 0, "ECHO")) {
            snprintf(out, sizeof(out), "$%zu\r\n%s\r\n", fc->arglen[1],
                     fc->arg[1]);
            fake_resp_split(fc, out, 0, 3);
        } else {
            snprintf(out, sizeof(out), ":%lld\r\n", ++n);
            fake_resp_write(fc, out, 0);
        }
    }
}

static void test_redis_sync_command_gets_its_reply(void **state)
{
    struct fake_resp f;
    struct srv_redis_sync *s;
    redisReply *r;

    (void)state;
    fake_resp_start(&f, serve_basic, NULL);
    s = open_to(f.port, &five_s);
    r = cmd1(s, "PING", NULL);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
    r = cmd1(s, "ECHO", "hello world");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "hello world");
    freeReplyObject(r);
    assert_string_equal(srv_redis_sync_error(s), "");
    srv_redis_sync_close(s);
    srv_redis_sync_close(NULL);
    fake_resp_stop(&f);
    assert_int_equal(f.conns, 1);
}

static void test_redis_sync_pipelined_replies_taken_in_order(void **state)
{
    static const char *const words[] = {"one", "two", "three", "four"};
    struct fake_resp f;
    struct srv_redis_sync *s;
    redisReply *r;

    (void)state;
    fake_resp_start(&f, serve_basic, NULL);
    s = open_to(f.port, &five_s);
    for (int i = 0; i < 4; i++) {
        const char *av[2] = {"ECHO", words[i]};
        size_t lens[2] = {4, strlen(words[i])};

        assert_int_equal(srv_redis_sync_append(s, 2, av, lens), 0);
    }
    assert_int_equal(srv_redis_sync_append(s, 1, (const char *[]){"INCR"},
                                           NULL),
                     0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(srv_redis_sync_take(s, &r), 0);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, words[i]);
        freeReplyObject(r);
    }
    assert_int_equal(srv_redis_sync_take(s, &r), 0);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    srv_redis_sync_close(s);
    fake_resp_stop(&f);
}

/* Reads and never answers. */
static void serve_mute(struct fake_conn *fc, void *arg)
{
    (void)arg;
    fake_resp_drain(fc);
}

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void test_redis_sync_timeout_breaks_and_later_calls_fail_at_once(
    void **state)
{
    const struct timeval tv = {0, 200 * 1000};
    struct fake_resp f;
    struct srv_redis_sync *s;
    redisReply *r = (redisReply *)1;
    double t0, took;

    (void)state;
    fake_resp_start(&f, serve_mute, NULL);
    s = open_to(f.port, &tv);
    t0 = now_s();
    assert_null(cmd1(s, "PING", NULL));
    took = now_s() - t0;
    /* The timeout was waited for (less a tick of the kernel's clock), and
     * not forever. */
    assert_true(took > 0.15);
    assert_true(took < 10.0);
    assert_string_equal(srv_redis_sync_error(s), "timed out");
    /* Broken: nothing more is sent or waited for. */
    assert_int_equal(srv_redis_sync_append(s, 1, (const char *[]){"PING"},
                                           NULL),
                     -1);
    assert_int_equal(srv_redis_sync_take(s, &r), -1);
    assert_null(r);
    assert_null(cmd1(s, "PING", NULL));
    assert_string_equal(srv_redis_sync_error(s), "timed out");
    srv_redis_sync_close(s);
    fake_resp_stop(&f);
}

/* -READONLY to the first command, then +OK to any. */
static void serve_readonly(struct fake_conn *fc, void *arg)
{
    (void)arg;
    if (fake_resp_read(fc) < 0)
        return;
    fake_resp_write(fc, "-READONLY You can't write against a read only "
                        "replica.\r\n",
                    0);
    while (fake_resp_read(fc) > 0)
        fake_resp_write(fc, "+OK\r\n", 0);
}

static void test_redis_sync_readonly_returns_reply_then_broken(void **state)
{
    struct fake_resp f;
    struct srv_redis_sync *s;
    redisReply *r;

    (void)state;
    fake_resp_start(&f, serve_readonly, NULL);
    s = open_to(f.port, &five_s);
    r = cmd1(s, "SET", "k");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_memory_equal(r->str, "READONLY", 8);
    freeReplyObject(r);
    assert_non_null(strstr(srv_redis_sync_error(s), "READONLY"));
    assert_null(cmd1(s, "PING", NULL));
    srv_redis_sync_close(s);
    fake_resp_stop(&f);
}

/* Reads one command and closes. */
static void serve_close(struct fake_conn *fc, void *arg)
{
    (void)arg;
    fake_resp_read(fc);
}

static void test_redis_sync_peer_close_breaks_connection(void **state)
{
    struct fake_resp f;
    struct srv_redis_sync *s;

    (void)state;
    fake_resp_start(&f, serve_close, NULL);
    s = open_to(f.port, &five_s);
    assert_null(cmd1(s, "PING", NULL));
    assert_string_equal(srv_redis_sync_error(s), "connection closed");
    assert_null(cmd1(s, "PING", NULL));
    srv_redis_sync_close(s);
    fake_resp_stop(&f);
}

/* A partial reply, then garbage. */
static void serve_garbage(struct fake_conn *fc, void *arg)
{
    (void)arg;
    if (fake_resp_read(fc) > 0)
        fake_resp_split(fc, "*2\r\n:1\r\n?what\r\n", 0, 5);
    fake_resp_drain(fc);
}

static void test_redis_sync_protocol_error_breaks_connection(void **state)
{
    struct fake_resp f;
    struct srv_redis_sync *s;

    (void)state;
    fake_resp_start(&f, serve_garbage, NULL);
    s = open_to(f.port, &five_s);
    assert_null(cmd1(s, "PING", NULL));
    assert_non_null(strstr(srv_redis_sync_error(s), "protocol error"));
    srv_redis_sync_close(s);
    fake_resp_stop(&f);
}

static void test_redis_sync_open_refused_or_unresolvable_says_why(void **state)
{
    char why[200] = "";

    (void)state;
    assert_null(srv_redis_sync_open("127.0.0.1", fake_resp_closed_port(), NULL,
                                    NULL, &five_s, why, sizeof(why)));
    assert_string_equal(why, strerror(ECONNREFUSED));
    assert_null(srv_redis_sync_open("no-such-host.invalid", 6379, NULL, NULL,
                                    &five_s, why, sizeof(why)));
    assert_non_null(strstr(why, "cannot resolve no-such-host.invalid"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_sync_command_gets_its_reply),
        cmocka_unit_test(test_redis_sync_pipelined_replies_taken_in_order),
        cmocka_unit_test(
            test_redis_sync_timeout_breaks_and_later_calls_fail_at_once),
        cmocka_unit_test(test_redis_sync_readonly_returns_reply_then_broken),
        cmocka_unit_test(test_redis_sync_peer_close_breaks_connection),
        cmocka_unit_test(test_redis_sync_protocol_error_breaks_connection),
        cmocka_unit_test(
            test_redis_sync_open_refused_or_unresolvable_says_why),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
