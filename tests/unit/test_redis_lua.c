/*
 * tests/unit/test_redis_lua.c - each Lua script of server/redis/redis_lua.h
 * (the files of server/redis/lua/: the backplane's and the webhook
 * stream's) run against fixture keys in a test redis-server, and its
 * documented effect checked: the counts it moves, the keys it renames,
 * drops, adds or lets expire, what it PUBLISHes and its reply.
 *
 * The test starts its own redis-server (Debian's, or $REDIS_SERVER) on a
 * unix socket in a temporary directory, without persistence, and stops
 * it by its PID; without a redis-server it exits 77, which ctest reports
 * as skipped (make test installs one). Every case starts from FLUSHALL.
 * Keys use the prefix "t" and node "n1"; US is the byte 0x1f. A PUBLISH
 * is read on a second, subscribed connection; its absence is checked with
 * a marker published after it.
 *
 * Thread: the test's only thread.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "server/redis/redis_lua.h"

#define US "\x1f"

static char dir[64], sock[128];
static pid_t server_pid;
static redisContext *c;            /* commands */
static redisContext *sc;           /* subscribed, or NULL */

/* Starting and stopping the server. */

static const char *server_path(void)
{
    const char *p = getenv("REDIS_SERVER");

    return p && p[0] ? p : "/usr/bin/redis-server";
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int start_server(void **state)
{
    uint64_t deadline = now_ms() + 20000;
    int status;

    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/lubdub-lua-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(sock, sizeof(sock), "%s/redis.sock", dir);
    server_pid = fork();
    if (server_pid < 0)
        return -1;
    if (server_pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execl(server_path(), "redis-server", "--port", "0", "--unixsocket",
              sock, "--unixsocketperm", "700", "--save", "", "--appendonly",
              "no", "--dir", dir, "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    /* Until it answers PING (a loaded machine may take a while). */
    while (now_ms() < deadline) {
        redisReply *r;

        if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
            fprintf(stderr, "redis-server exited (%d)\n", status);
            server_pid = 0;
            return -1;
        }
        c = redisConnectUnix(sock);
        r = c && !c->err ? redisCommand(c, "PING") : NULL;
        if (r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG")) {
            freeReplyObject(r);
            return 0;
        }
        freeReplyObject(r);
        redisFree(c);
        c = NULL;
        usleep(20000);
    }
    fprintf(stderr, "redis-server did not answer on %s\n", sock);
    return -1;
}

static int stop_server(void **state)
{
    (void)state;
    redisFree(sc);
    sc = NULL;
    redisFree(c);
    c = NULL;
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    unlink(sock);
    rmdir(dir);
    return 0;
}

static int flush(void **state)
{
    redisReply *r;

    (void)state;
    redisFree(sc);
    sc = NULL;
    r = redisCommand(c, "FLUSHALL");
    assert_non_null(r);
    freeReplyObject(r);
    return 0;
}

/* Commands and replies. */

static redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    return r;
}

static void ok(const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* EVAL script with nkeys, then the keys and arguments (NULL-ended in
 * ap, at most 60); a script error fails the case. */
static redisReply *eval_v(const char *script, int nkeys, va_list ap)
{
    const char *av[64];
    size_t al[64];
    char nk[8];
    int n = 0;
    const char *s;
    redisReply *r;

    snprintf(nk, sizeof(nk), "%d", nkeys);
    av[n++] = "EVAL";
    av[n++] = script;
    av[n++] = nk;
    while ((s = va_arg(ap, const char *))) {
        assert_true(n < 64);
        av[n++] = s;
    }
    for (int i = 0; i < n; i++)
        al[i] = strlen(av[i]);
    r = redisCommandArgv(c, n, av, al);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("script error: %s", r->str);
    return r;
}

/* A script whose reply is an array. */
static redisReply *eval(const char *script, int nkeys, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, nkeys);
    r = eval_v(script, nkeys, ap);
    va_end(ap);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    return r;
}

/* A script whose reply is an integer: its value. */
static long long eval_int(const char *script, int nkeys, ...)
{
    va_list ap;
    redisReply *r;
    long long v;

    va_start(ap, nkeys);
    r = eval_v(script, nkeys, ap);
    va_end(ap);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long el_int(const redisReply *r, size_t i)
{
    assert_true(i < r->elements);
    assert_int_equal(r->element[i]->type, REDIS_REPLY_INTEGER);
    return r->element[i]->integer;
}

static void el_str(const redisReply *r, size_t i, const char *want)
{
    assert_true(i < r->elements);
    assert_int_equal(r->element[i]->type, REDIS_REPLY_STRING);
    assert_string_equal(r->element[i]->str, want);
}

/* An integer reply's value, or a string reply's as a number; -1: nil. */
static long long num(const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long v = -1;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    return v;
}

/* A string reply equal to want (NULL: nil). */
static void str_is(const char *want, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    if (!want) {
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    } else {
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, want);
    }
    freeReplyObject(r);
}

/* Publications. */

static void sub_open(const char *ch)
{
    struct timeval tv = { 10, 0 };
    redisReply *r;

    redisFree(sc);
    sc = redisConnectUnix(sock);
    assert_non_null(sc);
    assert_int_equal(sc->err, 0);
    redisSetTimeout(sc, tv);
    r = redisCommand(sc, "SUBSCRIBE %s", ch);
    assert_non_null(r);
    freeReplyObject(r);
}

/* The next message on the subscribed connection: len bytes of want. */
static void expect_msg_n(const char *want, size_t len)
{
    redisReply *r = NULL;

    assert_int_equal(redisGetReply(sc, (void **)&r), REDIS_OK);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_int_equal(r->element[2]->len, len);
    assert_memory_equal(r->element[2]->str, want, len);
    freeReplyObject(r);
}

static void expect_msg(const char *want)
{
    expect_msg_n(want, strlen(want));
}

/* Nothing more was published on ch: the next message is a marker. */
static void expect_none(const char *ch)
{
    ok("PUBLISH %s marker", ch);
    expect_msg("marker");
}

/* The directory: JOIN, LEAVE, INFO, LIST, MEMBERS. */

#define KEYS7(ch)                                                          \
    "t:ns:n1", "t:nm:n1", "t:ni:n1", "t:gs:a", "t:gm:a:" ch, "t:gi:a:" ch, \
        "t:gq:a"
#define KEYS10(ch) KEYS7(ch), "t:wh:a", "t:whd:a", "t:whn:a"

static void test_redis_lua_dir_join_counts_a_subscription(void **state)
{
    redisReply *r;

    (void)state;
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("ch"), "a" US "ch", "ch", "0",
             (char *)NULL);
    assert_int_equal(r->elements, 3);
    assert_int_equal(el_int(r, 0), 1); /* the channel's first */
    assert_int_equal(el_int(r, 1), 0);
    freeReplyObject(r);
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("ch"), "a" US "ch", "ch", "0",
             (char *)NULL);
    assert_int_equal(el_int(r, 0), 0);
    freeReplyObject(r);
    assert_int_equal(num("HGET t:gs:a ch"), 2);
    assert_int_equal(num("HGET t:ns:n1 %s", "a" US "ch"), 2);
}

static void test_redis_lua_dir_join_adds_a_member_and_publishes(void **state)
{
    const char *info = "{\"n\":1}";
    redisReply *r;

    (void)state;
    sub_open("t:m:a:presence-x");
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "0", "alice", info,
             "a" US "presence-x" US "alice", "t:m:a:presence-x", "S",
             (char *)NULL);
    assert_int_equal(r->elements, 5);
    assert_int_equal(el_int(r, 0), 1);
    assert_int_equal(el_int(r, 1), 1); /* the member's first */
    assert_int_equal(el_int(r, 2), 1); /* cseq */
    el_str(r, 3, "alice");
    el_str(r, 4, info);
    freeReplyObject(r);
    expect_msg("S1\n+5\nalice{\"n\":1}");
    assert_int_equal(num("HGET t:gm:a:presence-x alice"), 1);
    str_is(info, "HGET t:gi:a:presence-x alice");
    str_is(info, "HGET t:ni:n1 %s", "a" US "presence-x" US "alice");
    assert_int_equal(num("HGET t:gq:a presence-x"), 1);

    /* A second connection of alice: counted, no event, the list. */
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "0", "alice", info,
             "a" US "presence-x" US "alice", "t:m:a:presence-x", "S",
             (char *)NULL);
    assert_int_equal(el_int(r, 1), 0);
    assert_int_equal(el_int(r, 2), 1);
    el_str(r, 3, "alice");
    freeReplyObject(r);
    assert_int_equal(num("HGET t:gm:a:presence-x alice"), 2);
    expect_none("t:m:a:presence-x");

    /* Full at max 1: bob is refused, nothing moves. */
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "1", "bob", "",
             "a" US "presence-x" US "bob", "t:m:a:presence-x", "",
             (char *)NULL);
    assert_int_equal(el_int(r, 0), -1);
    freeReplyObject(r);
    assert_int_equal(num("HEXISTS t:gm:a:presence-x bob"), 0);
    assert_int_equal(num("HGET t:gs:a presence-x"), 2);
}

static void test_redis_lua_dir_join_queues_webhook_edges(void **state)
{
    redisReply *r;

    (void)state;
    /* channel_occupied and member_added go to the stream. */
    r = eval(srv_redis_lua_dir_join, 10, KEYS10("presence-x"),
             "a" US "presence-x", "presence-x", "0", "u", "",
             "a" US "presence-x" US "u", "t:m:a:presence-x", "", "0", "100",
             (char *)NULL);
    freeReplyObject(r);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    assert_int_equal(num("HGET t:whn:a queued"), 2);
    /* An opening edge whose closing one still waits cancels it. */
    ok("ZADD t:whd:a 1 %s", "v" US "ch");
    r = eval(srv_redis_lua_dir_join, 10, KEYS10("ch"), "a" US "ch", "ch", "0",
             "0", "100", (char *)NULL);
    freeReplyObject(r);
    assert_int_equal(num("ZCARD t:whd:a"), 0);
    assert_int_equal(num("HGET t:whn:a cancelled"), 1);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    /* A full stream drops the edge and counts it. */
    r = eval(srv_redis_lua_dir_join, 10, KEYS10("ch2"), "a" US "ch2", "ch2",
             "0", "0", "2", (char *)NULL);
    freeReplyObject(r);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    assert_int_equal(num("HGET t:whn:a dropped"), 1);
}

static void test_redis_lua_dir_leave_counts_down_and_publishes(void **state)
{
    redisReply *r;

    (void)state;
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "0", "alice", "i",
             "a" US "presence-x" US "alice", "t:m:a:presence-x", "",
             (char *)NULL);
    freeReplyObject(r);
    sub_open("t:m:a:presence-x");
    r = eval(srv_redis_lua_dir_leave, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "alice",
             "a" US "presence-x" US "alice", "t:m:a:presence-x", (char *)NULL);
    assert_int_equal(r->elements, 3);
    assert_int_equal(el_int(r, 0), 1); /* the channel's last */
    assert_int_equal(el_int(r, 1), 1); /* the member's last */
    assert_int_equal(el_int(r, 2), 2);
    freeReplyObject(r);
    expect_msg("2\n-5\nalice");
    /* Every count at 0 is gone, the channel's sequence too (its last
     * number kept as the app's "#"). */
    assert_int_equal(num("HEXISTS t:gs:a presence-x"), 0);
    assert_int_equal(num("EXISTS t:gm:a:presence-x t:gi:a:presence-x"), 0);
    assert_int_equal(num("EXISTS t:ns:n1 t:nm:n1 t:ni:n1"), 0);
    assert_int_equal(num("HEXISTS t:gq:a presence-x"), 0);
    assert_int_equal(num("HGET t:gq:a #"), 2);

    /* A count this node does not hold is not taken from the totals. */
    ok("HSET t:gs:a ch 5");
    r = eval(srv_redis_lua_dir_leave, 7, KEYS7("ch"), "a" US "ch", "ch",
             (char *)NULL);
    assert_int_equal(el_int(r, 0), 0);
    freeReplyObject(r);
    assert_int_equal(num("HGET t:gs:a ch"), 5);
    assert_int_equal(num("EXISTS t:ns:n1"), 0);
}

/* A presence channel's next life numbers on above the last one's: a view
 * that outlived the channel on some node takes its lists. */
static void test_redis_lua_dir_leave_next_life_numbers_on(void **state)
{
    redisReply *r;

    (void)state;
    ok("HSET t:gq:a # 7 presence-y 3");
    ok("HSET t:gm:a:presence-y u 1");
    sub_open("t:m:a:presence-x");
    r = eval(srv_redis_lua_dir_join, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "0", "bob", "",
             "a" US "presence-x" US "bob", "t:m:a:presence-x", "",
             (char *)NULL);
    assert_int_equal(el_int(r, 2), 8);
    freeReplyObject(r);
    expect_msg("8\n+3\nbob");
    r = eval(srv_redis_lua_dir_leave, 7, KEYS7("presence-x"),
             "a" US "presence-x", "presence-x", "bob",
             "a" US "presence-x" US "bob", "t:m:a:presence-x", (char *)NULL);
    assert_int_equal(el_int(r, 2), 9);
    freeReplyObject(r);
    expect_msg("9\n-3\nbob");
    assert_int_equal(num("HEXISTS t:gq:a presence-x"), 0);
    assert_int_equal(num("HGET t:gq:a #"), 9);
    /* A channel that still has members keeps its own sequence, and "#"
     * never goes down. */
    assert_int_equal(num("HGET t:gq:a presence-y"), 3);
    ok("HSET t:gq:a presence-z 4");
    ok("HSET t:gm:a:presence-z v 1");
    ok("HSET t:nm:n1 %s 1", "a" US "presence-z" US "v");
    r = eval(srv_redis_lua_dir_leave, 7, KEYS7("presence-z"),
             "a" US "presence-z", "presence-z", "v",
             "a" US "presence-z" US "v", "t:m:a:presence-z", (char *)NULL);
    assert_int_equal(el_int(r, 2), 5);
    freeReplyObject(r);
    assert_int_equal(num("HEXISTS t:gq:a presence-z"), 0);
    assert_int_equal(num("HGET t:gq:a #"), 9);
}

static void test_redis_lua_dir_leave_delays_closing_edges(void **state)
{
    redisReply *r;

    (void)state;
    r = eval(srv_redis_lua_dir_join, 10, KEYS10("presence-x"),
             "a" US "presence-x", "presence-x", "0", "u", "",
             "a" US "presence-x" US "u", "t:m:a:presence-x", "", "0", "100",
             (char *)NULL);
    freeReplyObject(r);
    /* With a delay, both closing edges wait in the ZSET. */
    r = eval(srv_redis_lua_dir_leave, 10, KEYS10("presence-x"),
             "a" US "presence-x", "presence-x", "u", "a" US "presence-x" US "u",
             "t:m:a:presence-x", "60000", "100", (char *)NULL);
    freeReplyObject(r);
    assert_int_equal(num("ZCARD t:whd:a"), 2);
    assert_true(num("ZSCORE t:whd:a %s", "r" US "presence-x" US "u") > 0);
    assert_true(num("ZSCORE t:whd:a %s", "v" US "presence-x") > 0);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    /* Without one, channel_vacated goes to the stream at once. */
    r = eval(srv_redis_lua_dir_join, 10, KEYS10("ch"), "a" US "ch", "ch", "0",
             "0", "100", (char *)NULL);
    freeReplyObject(r);
    r = eval(srv_redis_lua_dir_leave, 10, KEYS10("ch"), "a" US "ch", "ch", "0",
             "100", (char *)NULL);
    freeReplyObject(r);
    assert_int_equal(num("XLEN t:wh:a"), 4);
    r = cmd("XREVRANGE t:wh:a + - COUNT 1");
    assert_int_equal(r->elements, 1);
    el_str(r->element[0]->element[1], 1, "channel_vacated");
    freeReplyObject(r);
}

static void test_redis_lua_dir_info_list_and_members(void **state)
{
    redisReply *r;

    (void)state;
    ok("HSET t:gs:a ch 2 presence-z 1");
    ok("HSET t:gm:a:presence-z u1 1 u2 3");
    ok("HSET t:gi:a:presence-z u1 i1");
    ok("HSET t:gq:a presence-z 7");
    r = eval(srv_redis_lua_dir_info, 2, "t:gs:a", "t:gm:a:ch", "ch",
             (char *)NULL);
    assert_int_equal(el_int(r, 0), 2);
    assert_int_equal(el_int(r, 1), 0);
    freeReplyObject(r);
    r = eval(srv_redis_lua_dir_info, 2, "t:gs:a", "t:gm:a:presence-z",
             "presence-z", (char *)NULL);
    assert_int_equal(el_int(r, 0), 1);
    assert_int_equal(el_int(r, 1), 2);
    freeReplyObject(r);
    /* LIST by prefix, with user counts. */
    r = eval(srv_redis_lua_dir_list, 1, "t:gs:a", "t:gm:a:", "presence-", "1",
             (char *)NULL);
    assert_int_equal(r->elements, 2);
    el_str(r, 0, "presence-z");
    assert_int_equal(el_int(r, 1), 2);
    freeReplyObject(r);
    r = eval(srv_redis_lua_dir_list, 1, "t:gs:a", "t:gm:a:", "", "0",
             (char *)NULL);
    assert_int_equal(r->elements, 4);
    assert_int_equal(el_int(r, 1), 0);
    assert_int_equal(el_int(r, 3), 0);
    freeReplyObject(r);
    r = eval(srv_redis_lua_dir_members, 2, "t:gq:a", "t:gi:a:presence-z",
             "presence-z", (char *)NULL);
    assert_int_equal(r->elements, 3);
    assert_int_equal(el_int(r, 0), 7);
    el_str(r, 1, "u1");
    el_str(r, 2, "i1");
    freeReplyObject(r);
}

/* REJOIN and its sweep. */

static void test_redis_lua_dir_rejoin_replaces_the_share(void **state)
{
    redisReply *r;
    char tok[64];

    (void)state;
    /* The old share: ch1 x2, ch2 x1 and member old; another node holds
     * one more of ch2. */
    ok("HSET t:ns:n1 %s 2 %s 1", "a" US "ch1", "a" US "ch2");
    ok("HSET t:gs:a ch1 2 ch2 2 presence-p 1");
    ok("HSET t:nm:n1 %s 1", "a" US "presence-p" US "old");
    ok("HSET t:gm:a:presence-p old 1");
    ok("HSET t:gi:a:presence-p old io");
    sub_open("t:m:a:presence-p");
    /* What the node really has: ch1 x1, ch3 x4, presence-p x1 with new. */
    r = eval(srv_redis_lua_dir_rejoin, 0, "t", "n1", "1", "3", "a" US "ch1",
             "1", "a" US "ch3", "4", "a" US "presence-p", "1", "1",
             "a" US "presence-p" US "new", "1", "in", "S", (char *)NULL);
    assert_int_equal(r->elements, 6);
    assert_int_equal(el_int(r, 0), 6); /* subscriptions */
    assert_int_equal(el_int(r, 1), 3); /* channels */
    assert_int_equal(el_int(r, 2), 1); /* members */
    assert_int_equal(el_int(r, 3), 1); /* new appeared */
    assert_int_equal(el_int(r, 4), 0);
    assert_int_equal(r->element[5]->type, REDIS_REPLY_STRING);
    snprintf(tok, sizeof(tok), "%s", r->element[5]->str);
    freeReplyObject(r);
    assert_string_equal(tok, "n1:1");
    expect_msg("S1\n+3\nnewin");
    assert_int_equal(num("HGET t:gs:a ch1"), 1);
    assert_int_equal(num("HGET t:gs:a ch3"), 4);
    assert_int_equal(num("HGET t:gs:a ch2"), 2); /* the sweep's */
    assert_int_equal(num("HGET t:ns:n1 %s", "a" US "ch3"), 4);
    str_is("in", "HGET t:ni:n1 %s", "a" US "presence-p" US "new");
    str_is("in", "HGET t:gi:a:presence-p new");
    /* The old share's rest waits under the token, locked for n1. */
    assert_int_equal(num("HGET t:rp:n1:1:ns %s", "a" US "ch2"), 1);
    assert_int_equal(num("HGET t:rp:n1:1:nm %s", "a" US "presence-p" US "old"),
                     1);
    str_is(tok, "GET t:rjtok:n1");
    str_is("n1", "GET t:reap:n1:1");
    assert_int_equal(num("SISMEMBER t:reaping n1:1"), 1);

    /* The sweep takes the rest out of the totals and ends the token. */
    r = eval(srv_redis_lua_dir_rejoin_sweep, 0, "t", "n1", tok, "1000",
             (char *)NULL);
    el_str(r, 0, "done");
    assert_int_equal(el_int(r, 1), 1); /* old, gone cluster-wide */
    freeReplyObject(r);
    expect_msg("2\n-3\nold");
    assert_int_equal(num("HGET t:gs:a ch2"), 1);
    assert_int_equal(num("HEXISTS t:gm:a:presence-p old"), 0);
    assert_int_equal(num("HEXISTS t:gi:a:presence-p old"), 0);
    assert_int_equal(num("EXISTS t:rp:n1:1:ns t:rp:n1:1:nm t:rjtok:n1 "
                         "t:reap:n1:1"), 0);
    assert_int_equal(num("SISMEMBER t:reaping n1:1"), 0);
}

static void test_redis_lua_dir_rejoin_sweep_steps_and_loses(void **state)
{
    redisReply *r;

    (void)state;
    ok("SET t:reap:n1:5 n1");
    ok("HSET t:rp:n1:5:ns %s 1 %s 1", "a" US "c1", "a" US "c2");
    ok("HSET t:gs:a c1 1 c2 1");
    /* At most max fields a step. */
    r = eval(srv_redis_lua_dir_rejoin_sweep, 0, "t", "n1", "n1:5", "1",
             (char *)NULL);
    el_str(r, 0, "more");
    freeReplyObject(r);
    assert_int_equal(num("HLEN t:rp:n1:5:ns"), 1);
    assert_int_equal(num("HLEN t:gs:a"), 1);
    /* Another node's reaper took the token: nothing more is done. */
    ok("SET t:reap:n1:5 n2");
    r = eval(srv_redis_lua_dir_rejoin_sweep, 0, "t", "n1", "n1:5", "1",
             (char *)NULL);
    el_str(r, 0, "lost");
    freeReplyObject(r);
    assert_int_equal(num("HLEN t:rp:n1:5:ns"), 1);
}

/* Online state and watchlists. */

/* An envelope of kind 5 to watcher w's channel saying name about uid. */
static void expect_watch_event(const char *name, const char *uid)
{
    redisReply *r = NULL;
    char want[128];

    assert_int_equal(redisGetReply(sc, (void **)&r), REDIS_OK);
    assert_non_null(r);
    assert_int_equal(r->elements, 3);
    assert_true(r->element[2]->len > 6);
    assert_memory_equal(r->element[2]->str, "LDB1\x05", 5);
    snprintf(want, sizeof(want),
             "{\\\"name\\\":\\\"%s\\\",\\\"user_ids\\\":[\\\"%s\\\"]}", name,
             uid);
    assert_non_null(memmem(r->element[2]->str, r->element[2]->len, want,
                           strlen(want)));
    assert_non_null(memmem(r->element[2]->str, r->element[2]->len,
                           "pusher_internal:watchlist_events", 32));
    freeReplyObject(r);
}

static void test_redis_lua_online_signin_edges_and_watchlists(void **state)
{
    redisReply *r;

    (void)state;
    ok("SADD t:ww:a:u w"); /* w watches u */
    sub_open("t:a:#server-to-user-w");
    /* u's first connection anywhere, with the list {x, u}: its own id is
     * skipped. */
    r = eval(srv_redis_lua_online_signin, 0, "t", "n1", "a", "u", "1", "1", "0",
             "0", "2", "x", "u", (char *)NULL);
    assert_int_equal(el_int(r, 0), 1); /* the online edge */
    assert_int_equal(el_int(r, 1), 0); /* x is offline */
    assert_int_equal(el_int(r, 2), 0);
    freeReplyObject(r);
    expect_watch_event("online", "u");
    assert_int_equal(num("HGET t:go:a u"), 1);
    assert_int_equal(num("HGET t:no:n1 %s", "a" US "u"), 1);
    assert_int_equal(num("SCARD t:wl:a:u"), 1);
    assert_int_equal(num("SISMEMBER t:wl:a:u x"), 1);
    assert_int_equal(num("SISMEMBER t:ww:a:x u"), 1);
    assert_int_equal(num("HGET t:wq:a:w n"), 1);
    /* On a second node: no edge. */
    r = eval(srv_redis_lua_online_signin, 0, "t", "n2", "a", "u", "1", "0", "0",
             "0", "0", (char *)NULL);
    assert_int_equal(el_int(r, 0), 0);
    freeReplyObject(r);
    assert_int_equal(num("HGET t:go:a u"), 2);
    expect_none("t:a:#server-to-user-w");
    /* max_watchers 1: x has a watcher (u), so v may not watch it. */
    r = eval(srv_redis_lua_online_signin, 0, "t", "n1", "a", "v", "1", "1", "1",
             "0", "1", "x", (char *)NULL);
    assert_int_equal(el_int(r, 2), 1);
    freeReplyObject(r);
    assert_int_equal(num("EXISTS t:wl:a:v"), 0);

    /* Signouts: the last one anywhere is the offline edge, and u's list
     * goes. */
    r = eval(srv_redis_lua_online_signout, 0, "t", "n1", "a", "u",
             (char *)NULL);
    assert_int_equal(el_int(r, 0), 0);
    freeReplyObject(r);
    assert_int_equal(num("HGET t:go:a u"), 1);
    r = eval(srv_redis_lua_online_signout, 0, "t", "n2", "a", "u",
             (char *)NULL);
    assert_int_equal(el_int(r, 0), 1);
    freeReplyObject(r);
    expect_watch_event("offline", "u");
    assert_int_equal(num("HEXISTS t:go:a u"), 0);
    assert_int_equal(num("EXISTS t:wl:a:u"), 0);
    assert_int_equal(num("SISMEMBER t:ww:a:x u"), 0);
}

static void test_redis_lua_online_rejoin_moves_users_over(void **state)
{
    redisReply *r;

    (void)state;
    /* A REJOIN's first chunk moved u's old field aside under n1:1. */
    ok("SET t:rjtok:n1 n1:1");
    ok("HSET t:rp:n1:1:no %s 1", "a" US "u");
    ok("HSET t:go:a u 1");
    r = eval(srv_redis_lua_online_rejoin, 0, "t", "n1", "2", "a", "u", "0", "a",
             "v", "1", "u", (char *)NULL);
    assert_int_equal(el_int(r, 0), 2);
    assert_int_equal(el_int(r, 1), 1); /* v appeared, u was there */
    freeReplyObject(r);
    assert_int_equal(num("HGET t:go:a u"), 1);
    assert_int_equal(num("HGET t:go:a v"), 1);
    assert_int_equal(num("HLEN t:no:n1"), 2);
    assert_int_equal(num("HLEN t:rp:n1:1:no"), 0);
    assert_int_equal(num("SISMEMBER t:wl:a:v u"), 1);
    assert_int_equal(num("SISMEMBER t:ww:a:u v"), 1);
}

/* The lease and the reaper. */

static void test_redis_lua_lease_tick_registers_and_claims(void **state)
{
    redisReply *r;

    (void)state;
    /* dead: registered once, no lease key any more. */
    ok("SADD t:nodes dead");
    ok("HSET t:ns:dead %s 1", "a" US "ch");
    ok("HSET t:nc:a dead 3 n2 2");
    r = eval(srv_redis_lua_lease_tick, 0, "t", "n1", "ep1", "3000", "0", "1",
             "a", "5", (char *)NULL);
    assert_int_equal(r->elements, 4);
    el_str(r, 0, "ok");
    assert_int_equal(el_int(r, 1), 1);          /* live: n1 */
    assert_int_equal(el_int(r->element[2], 0), 5); /* others: 3 + 2 */
    assert_int_equal(r->element[3]->elements, 2);
    el_str(r->element[3], 0, "dead");
    el_str(r->element[3], 1, "dead:1");
    freeReplyObject(r);
    str_is("ep1", "GET t:node:n1");
    assert_in_range(num("PTTL t:node:n1"), 1, 3000);
    assert_int_equal(num("SISMEMBER t:nodes n1"), 1);
    assert_int_equal(num("SISMEMBER t:nodes dead"), 0);
    assert_int_equal(num("HGET t:nc:a n1"), 5);
    assert_int_equal(num("HEXISTS t:nc:a dead"), 0);
    assert_int_equal(num("EXISTS t:ns:dead t:reap:dead"), 0);
    assert_int_equal(num("HGET t:rp:dead:1:ns %s", "a" US "ch"), 1);
    str_is("n1", "GET t:reap:dead:1");
    assert_int_equal(num("SISMEMBER t:reaping dead:1"), 1);

    /* Registered and still a member: ok. Removed while away: reaped, and
     * registered again. */
    r = eval(srv_redis_lua_lease_tick, 0, "t", "n1", "ep1", "3000", "1", "0",
             (char *)NULL);
    el_str(r, 0, "ok");
    freeReplyObject(r);
    ok("SREM t:nodes n1");
    r = eval(srv_redis_lua_lease_tick, 0, "t", "n1", "ep1", "3000", "1", "0",
             (char *)NULL);
    el_str(r, 0, "reaped");
    freeReplyObject(r);
    assert_int_equal(num("SISMEMBER t:nodes n1"), 1);
}

/* Just reconnected (may-reap 0): a node without a lease key is left for
 * one lease, since it may be coming back from the same outage. */
static void test_redis_lua_lease_tick_spares_the_dead_after_a_reconnect(
    void **state)
{
    redisReply *r;

    (void)state;
    ok("SADD t:nodes away");
    ok("HSET t:ns:away %s 1", "a" US "ch");
    r = eval(srv_redis_lua_lease_tick, 0, "t", "n1", "ep1", "3000", "1", "1",
             "a", "5", "0", (char *)NULL);
    el_str(r, 0, "reaped");
    assert_int_equal(r->element[3]->elements, 0);
    freeReplyObject(r);
    assert_int_equal(num("SISMEMBER t:nodes away"), 1);
    assert_int_equal(num("EXISTS t:ns:away"), 1);
    /* A lease later (may-reap 1) it is claimed. */
    r = eval(srv_redis_lua_lease_tick, 0, "t", "n1", "ep1", "3000", "1", "1",
             "a", "5", "1", (char *)NULL);
    assert_int_equal(r->element[3]->elements, 2);
    el_str(r->element[3], 0, "away");
    freeReplyObject(r);
    assert_int_equal(num("SISMEMBER t:nodes away"), 0);
}

static void test_redis_lua_lease_leave_claims_its_own_share(void **state)
{
    redisReply *r;

    (void)state;
    ok("SET t:node:n1 ep1");
    ok("SADD t:nodes n1");
    ok("HSET t:ns:n1 %s 2", "a" US "ch");
    ok("HSET t:nc:a n1 2");
    r = cmd("EVAL %s 0 t n1 1 a", srv_redis_lua_lease_leave);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "n1:1");
    freeReplyObject(r);
    assert_int_equal(num("EXISTS t:node:n1 t:ns:n1"), 0);
    assert_int_equal(num("SISMEMBER t:nodes n1"), 0);
    assert_int_equal(num("HEXISTS t:nc:a n1"), 0);
    assert_int_equal(num("HGET t:rp:n1:1:ns %s", "a" US "ch"), 2);
    str_is("n1", "GET t:reap:n1:1");
    assert_int_equal(num("SISMEMBER t:reaping n1:1"), 1);
}

static void test_redis_lua_lease_reap_removes_a_share(void **state)
{
    redisReply *r;
    const redisReply *e;

    (void)state;
    ok("SET t:reap:dead:1 n1");
    ok("SADD t:reaping dead:1");
    ok("HSET t:rp:dead:1:nm %s 1", "a" US "presence-p" US "u");
    ok("HSET t:rp:dead:1:ns %s 1 %s 2", "a" US "presence-p", "a" US "ch");
    ok("HSET t:gs:a presence-p 1 ch 3");
    ok("HSET t:gm:a:presence-p u 1");
    ok("HSET t:gi:a:presence-p u i");
    sub_open("t:m:a:presence-p");
    /* Webhooks of app a through Redis, no delay. */
    r = eval(srv_redis_lua_lease_reap, 0, "t", "n1", "dead:1", "1000", "0",
             "100", "a", (char *)NULL);
    el_str(r, 0, "done");
    assert_int_equal(el_int(r, 1), 3); /* subscriptions */
    assert_int_equal(el_int(r, 2), 1); /* memberships */
    e = r->element[3];
    assert_int_equal(e->elements, 8);
    el_str(e, 0, "r");
    el_str(e, 2, "presence-p");
    el_str(e, 3, "u");
    el_str(e, 4, "v");
    el_str(e, 6, "presence-p");
    el_str(e, 7, "");
    freeReplyObject(r);
    expect_msg("1\n-1\nu");
    /* The channel's last member went: its sequence with it. */
    assert_int_equal(num("HEXISTS t:gq:a presence-p"), 0);
    assert_int_equal(num("HGET t:gq:a #"), 1);
    assert_int_equal(num("HEXISTS t:gs:a presence-p"), 0);
    assert_int_equal(num("HGET t:gs:a ch"), 1);
    assert_int_equal(num("EXISTS t:gm:a:presence-p t:gi:a:presence-p"), 0);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    assert_int_equal(num("HGET t:whn:a queued"), 2);
    assert_int_equal(num("EXISTS t:rp:dead:1:nm t:rp:dead:1:ns "
                         "t:reap:dead:1"), 0);
    assert_int_equal(num("SISMEMBER t:reaping dead:1"), 0);

    /* A token another node took over: lost, nothing done. */
    ok("SET t:reap:dead:2 n2");
    ok("HSET t:rp:dead:2:ns %s 1", "a" US "ch");
    r = eval(srv_redis_lua_lease_reap, 0, "t", "n1", "dead:2", "1000", "0",
             "100", (char *)NULL);
    el_str(r, 0, "lost");
    freeReplyObject(r);
    assert_int_equal(num("HGET t:gs:a ch"), 1);
}

/* The cache entries. */

static void test_redis_lua_cache_scan_reads_live_entries(void **state)
{
    char cur[32] = "0";
    int found = 0, steps = 0;

    (void)state;
    ok("SET t:c:1 v1 PX 60000");
    ok("SET t:c:2 v2");                 /* no expiry: not an entry */
    ok("HSET t:c:3 f v");               /* not a string */
    ok("PEXPIRE t:c:3 60000");
    ok("SET t:other x PX 60000");       /* not matched */
    do {
        redisReply *r =
            eval(srv_redis_lua_cache_scan, 0, cur, "t:c:*", (char *)NULL);

        assert_true(r->elements >= 1 && (r->elements - 1) % 3 == 0);
        assert_int_equal(r->element[0]->type, REDIS_REPLY_STRING);
        snprintf(cur, sizeof(cur), "%s", r->element[0]->str);
        for (size_t i = 1; i + 2 < r->elements; i += 3) {
            el_str(r, i, "t:c:1");
            el_str(r, i + 1, "v1");
            assert_in_range(el_int(r, i + 2), 1, 60000);
            found++;
        }
        freeReplyObject(r);
        assert_true(++steps < 1000);
    } while (strcmp(cur, "0"));
    assert_int_equal(found, 1);
}

/* Recovery's read of a channel's stream (server/redis/redis_hist.c): the
 * entries (or none), the last ids, the newest trimmed id, Redis's clock. */
static void test_redis_lua_history_read_answers_what_a_resume_needs(void **state)
{
    redisReply *r;

    (void)state;
    /* No stream yet: nothing, '0-0'. */
    r = eval(srv_redis_lua_history_read, 2, "t:h:a:c", "t:hl:a:c", "1",
             (char *)NULL);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 6);
    assert_int_equal(r->element[0]->elements, 0);
    assert_int_equal(r->element[1]->elements, 0);
    el_str(r, 2, "0-0");
    assert_int_equal(r->element[3]->elements, 2);
    el_str(r, 4, "0-0"); /* no first entry */
    freeReplyObject(r);
    for (int i = 1; i <= 5; i++) {
        ok("XADD t:h:a:c MAXLEN 3 * o b1 s %d t 5 x %s d payload%d", i, "-",
           i);
        ok("HSET t:hl:a:c b1 %d", i);
    }
    r = eval(srv_redis_lua_history_read, 2, "t:h:a:c", "t:hl:a:c", "1",
             (char *)NULL);
    /* Trimmed to 3: s 3, 4, 5 left; the newest trimmed id is set. */
    assert_int_equal(r->element[0]->elements, 3);
    el_str(r->element[0]->element[0]->element[1], 3, "3");
    el_str(r->element[1], 1, "5");
    assert_string_not_equal(r->element[2]->str, "0-0");
    freeReplyObject(r);
    /* A fresh start's read: the last ids only. */
    r = eval(srv_redis_lua_history_read, 2, "t:h:a:c", "t:hl:a:c", "0",
             (char *)NULL);
    assert_int_equal(r->element[0]->elements, 0);
    el_str(r->element[1], 0, "b1");
    freeReplyObject(r);
}

/* The webhook sender's stream (server/webhook/webhook_stream*.c): app a's
 * lease, stream, delayed edges and counters. */

#define WHKEYS "t:whl:a", "t:wh:a", "t:whd:a", "t:whn:a"
#define RETIRE_MS 3600000          /* RETIRE_TTL_S of webhook_stream_lease.c */

/* The stream, the delayed edges and the counters, each with an expiry of
 * ms (as a retiring holder leaves them). */
static void wh_keys_expiring(const char *ms)
{
    ok("XADD t:wh:a * name client_event");
    ok("ZADD t:whd:a 1 %s", "v" US "ch");
    ok("HSET t:whn:a queued 1");
    ok("PEXPIRE t:wh:a %s", ms);
    ok("PEXPIRE t:whd:a %s", ms);
    ok("PEXPIRE t:whn:a %s", ms);
}

static void test_redis_lua_wh_stream_lease_takes_renews_and_refuses(
    void **state)
{
    (void)state;
    /* Free: taken for ms, and the keys a retiring holder let expire are
     * kept. */
    wh_keys_expiring("600000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_lease, 4, WHKEYS, "n1",
                              "3000", (char *)NULL),
                     2);
    str_is("n1", "GET t:whl:a");
    assert_in_range(num("PTTL t:whl:a"), 1, 3000);
    assert_int_equal(num("PTTL t:wh:a"), -1);
    assert_int_equal(num("PTTL t:whd:a"), -1);
    assert_int_equal(num("PTTL t:whn:a"), -1);

    /* Ours: renewed to the new ms (above the 1000 left), the keys
     * untouched. */
    ok("PEXPIRE t:whl:a 1000");
    ok("PEXPIRE t:wh:a 600000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_lease, 4, WHKEYS, "n1",
                              "600000", (char *)NULL),
                     1);
    str_is("n1", "GET t:whl:a");
    assert_in_range(num("PTTL t:whl:a"), 1001, 600000);
    assert_in_range(num("PTTL t:wh:a"), 1, 600000);

    /* Another node's: refused, its lease and expiry left as they were. */
    ok("SET t:whl:a n2 PX 5000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_lease, 4, WHKEYS, "n1",
                              "600000", (char *)NULL),
                     0);
    str_is("n2", "GET t:whl:a");
    assert_in_range(num("PTTL t:whl:a"), 1, 5000);
    assert_in_range(num("PTTL t:wh:a"), 1, 600000);
}

static void test_redis_lua_wh_stream_retire_lets_the_keys_expire(
    void **state)
{
    char ttl[16];

    (void)state;
    snprintf(ttl, sizeof(ttl), "%d", RETIRE_MS);
    wh_keys_expiring("600000");
    ok("PERSIST t:wh:a");
    ok("PERSIST t:whd:a");
    ok("PERSIST t:whn:a");
    /* Another node holds the lease: nothing is done. */
    ok("SET t:whl:a n2 PX 5000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_retire, 4, WHKEYS, "n1",
                              ttl, (char *)NULL),
                     0);
    str_is("n2", "GET t:whl:a");
    assert_int_equal(num("PTTL t:wh:a"), -1);
    assert_int_equal(num("PTTL t:whd:a"), -1);
    assert_int_equal(num("PTTL t:whn:a"), -1);

    /* Ours: dropped, and the three keys expire in ttl ms. */
    ok("SET t:whl:a n1 PX 5000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_retire, 4, WHKEYS, "n1",
                              ttl, (char *)NULL),
                     1);
    assert_int_equal(num("EXISTS t:whl:a"), 0);
    assert_in_range(num("PTTL t:wh:a"), RETIRE_MS - 600000, RETIRE_MS);
    assert_in_range(num("PTTL t:whd:a"), RETIRE_MS - 600000, RETIRE_MS);
    assert_in_range(num("PTTL t:whn:a"), RETIRE_MS - 600000, RETIRE_MS);

    /* Nobody's (it lapsed): the expiry is set all the same. */
    ok("PERSIST t:wh:a");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_retire, 4, WHKEYS, "n1",
                              ttl, (char *)NULL),
                     1);
    assert_in_range(num("PTTL t:wh:a"), RETIRE_MS - 600000, RETIRE_MS);
}

/* Entry i (from the oldest) of the stream t:wh:a: its fields and values
 * equal want, NULL-ended. */
static void expect_entry(size_t i, ...)
{
    redisReply *r = cmd("XRANGE t:wh:a - +");
    const redisReply *f;
    va_list ap;
    const char *w;
    size_t n = 0;

    assert_true(i < r->elements);
    f = r->element[i]->element[1];
    va_start(ap, i);
    while ((w = va_arg(ap, const char *)))
        el_str(f, n++, w);
    va_end(ap);
    assert_int_equal(f->elements, n);
    freeReplyObject(r);
}

static void test_redis_lua_wh_stream_pump_moves_due_edges(void **state)
{
    (void)state;
    /* Two due (score 1 and 2 ms of Redis's clock), one far ahead. */
    ok("ZADD t:whd:a 2 %s 1 %s 99999999999999 %s", "v" US "ch",
       "r" US "presence-x" US "u", "v" US "later");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_pump, 3, "t:whd:a",
                              "t:wh:a", "t:whn:a", "100", "200", (char *)NULL),
                     2);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    expect_entry(0, "name", "member_removed", "channel", "presence-x",
                 "user_id", "u", (char *)NULL);
    expect_entry(1, "name", "channel_vacated", "channel", "ch",
                 (char *)NULL);
    assert_int_equal(num("HGET t:whn:a queued"), 2);
    assert_int_equal(num("HEXISTS t:whn:a dropped"), 0);
    assert_int_equal(num("ZCARD t:whd:a"), 1);
    assert_int_equal(num("ZSCORE t:whd:a %s", "v" US "later"),
                     99999999999999LL);
}

static void test_redis_lua_wh_stream_pump_honours_limit_and_bound(
    void **state)
{
    (void)state;
    ok("ZADD t:whd:a 1 %s 2 %s 3 %s", "v" US "c1", "v" US "c2",
       "v" US "c3");
    /* At most limit edges a run, the oldest first. */
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_pump, 3, "t:whd:a",
                              "t:wh:a", "t:whn:a", "100", "1", (char *)NULL),
                     1);
    expect_entry(0, "name", "channel_vacated", "channel", "c1",
                 (char *)NULL);
    assert_int_equal(num("ZCARD t:whd:a"), 2);
    /* At the bound (1 entry): the due edges leave the ZSET, dropped and
     * counted, none queued. */
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_pump, 3, "t:whd:a",
                              "t:wh:a", "t:whn:a", "1", "200", (char *)NULL),
                     0);
    assert_int_equal(num("XLEN t:wh:a"), 1);
    assert_int_equal(num("ZCARD t:whd:a"), 0);
    assert_int_equal(num("HGET t:whn:a dropped"), 2);
    assert_int_equal(num("HGET t:whn:a queued"), 1);
}

static void test_redis_lua_wh_stream_add_appends_or_refuses_at_the_bound(
    void **state)
{
    (void)state;
    /* Bound 2: two appended with their fields, the third refused. */
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_add, 2, "t:wh:a",
                              "t:whn:a", "2", "name", "client_event", "channel",
                              "private-c", "event", "client-x", "data", "{}",
                              "user_id", "u", (char *)NULL),
                     1);
    expect_entry(0, "name", "client_event", "channel", "private-c",
                 "event", "client-x", "data", "{}", "user_id", "u",
                 (char *)NULL);
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_add, 2, "t:wh:a",
                              "t:whn:a", "2", "name", "cache_miss", "channel",
                              "cache-c", (char *)NULL),
                     1);
    expect_entry(1, "name", "cache_miss", "channel", "cache-c",
                 (char *)NULL);
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_add, 2, "t:wh:a",
                              "t:whn:a", "2", "name", "cache_miss", "channel",
                              "cache-d", (char *)NULL),
                     0);
    assert_int_equal(num("XLEN t:wh:a"), 2);
    assert_int_equal(num("HGET t:whn:a queued"), 2);
    assert_int_equal(num("HGET t:whn:a dropped"), 1);
}

static void test_redis_lua_wh_stream_release_frees_only_its_own(
    void **state)
{
    (void)state;
    /* Another node's lease stays. */
    ok("SET t:whl:a n2 PX 5000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_release, 1, "t:whl:a",
                              "n1", (char *)NULL),
                     0);
    str_is("n2", "GET t:whl:a");
    /* Ours goes. */
    ok("SET t:whl:a n1 PX 5000");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_release, 1, "t:whl:a",
                              "n1", (char *)NULL),
                     0);
    assert_int_equal(num("EXISTS t:whl:a"), 0);
    /* None: nothing to do. */
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_release, 1, "t:whl:a",
                              "n1", (char *)NULL),
                     0);
    assert_int_equal(num("EXISTS t:whl:a"), 0);
}

static long long consumers(void)
{
    redisReply *r = cmd("XINFO CONSUMERS t:wh:a g");
    long long n;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

static void test_redis_lua_wh_stream_consumers_drops_idle_ones(void **state)
{
    redisReply *r;

    (void)state;
    ok("XGROUP CREATE t:wh:a g 0 MKSTREAM");
    ok("XADD t:wh:a 1-1 name e");
    ok("XGROUP CREATECONSUMER t:wh:a g n1");
    ok("XGROUP CREATECONSUMER t:wh:a g n3");
    ok("XGROUP CREATECONSUMER t:wh:a g n4");
    r = cmd("XREADGROUP GROUP g n2 COUNT 1 STREAMS t:wh:a >");
    freeReplyObject(r);
    assert_int_equal(consumers(), 4);
    /* At most max a call; never this node's own, never one that holds
     * entries (n2). */
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_consumers, 1, "t:wh:a",
                              "g", "n1", "1", (char *)NULL),
                     1);
    assert_int_equal(consumers(), 3);
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_consumers, 1, "t:wh:a",
                              "g", "n1", "16", (char *)NULL),
                     1);
    assert_int_equal(consumers(), 2);
    /* Once n2's entry is acknowledged it goes too. */
    ok("XACK t:wh:a g 1-1");
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_consumers, 1, "t:wh:a",
                              "g", "n1", "16", (char *)NULL),
                     1);
    assert_int_equal(consumers(), 1);
    assert_int_equal(eval_int(srv_redis_lua_wh_stream_consumers, 1, "t:wh:a",
                              "g", "n1", "16", (char *)NULL),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(
            test_redis_lua_dir_join_counts_a_subscription, flush),
        cmocka_unit_test_setup(
            test_redis_lua_dir_join_adds_a_member_and_publishes, flush),
        cmocka_unit_test_setup(
            test_redis_lua_dir_join_queues_webhook_edges, flush),
        cmocka_unit_test_setup(
            test_redis_lua_dir_leave_counts_down_and_publishes, flush),
        cmocka_unit_test_setup(
            test_redis_lua_dir_leave_next_life_numbers_on, flush),
        cmocka_unit_test_setup(
            test_redis_lua_dir_leave_delays_closing_edges, flush),
        cmocka_unit_test_setup(test_redis_lua_dir_info_list_and_members,
                               flush),
        cmocka_unit_test_setup(test_redis_lua_dir_rejoin_replaces_the_share,
                               flush),
        cmocka_unit_test_setup(
            test_redis_lua_dir_rejoin_sweep_steps_and_loses, flush),
        cmocka_unit_test_setup(
            test_redis_lua_online_signin_edges_and_watchlists, flush),
        cmocka_unit_test_setup(
            test_redis_lua_online_rejoin_moves_users_over, flush),
        cmocka_unit_test_setup(
            test_redis_lua_lease_tick_registers_and_claims, flush),
        cmocka_unit_test_setup(
            test_redis_lua_lease_tick_spares_the_dead_after_a_reconnect,
            flush),
        cmocka_unit_test_setup(
            test_redis_lua_lease_leave_claims_its_own_share, flush),
        cmocka_unit_test_setup(test_redis_lua_lease_reap_removes_a_share,
                               flush),
        cmocka_unit_test_setup(test_redis_lua_cache_scan_reads_live_entries,
                               flush),
        cmocka_unit_test_setup(
            test_redis_lua_history_read_answers_what_a_resume_needs, flush),
        cmocka_unit_test_setup(
            test_redis_lua_wh_stream_lease_takes_renews_and_refuses, flush),
        cmocka_unit_test_setup(
            test_redis_lua_wh_stream_retire_lets_the_keys_expire, flush),
        cmocka_unit_test_setup(test_redis_lua_wh_stream_pump_moves_due_edges,
                               flush),
        cmocka_unit_test_setup(
            test_redis_lua_wh_stream_pump_honours_limit_and_bound, flush),
        cmocka_unit_test_setup(
            test_redis_lua_wh_stream_add_appends_or_refuses_at_the_bound,
            flush),
        cmocka_unit_test_setup(
            test_redis_lua_wh_stream_release_frees_only_its_own, flush),
        cmocka_unit_test_setup(
            test_redis_lua_wh_stream_consumers_drops_idle_ones, flush),
    };

    if (access(server_path(), X_OK)) {
        printf("test_redis_lua: skipped: no redis-server at %s (set "
               "REDIS_SERVER; make test installs Debian's)\n",
               server_path());
        return 77;
    }
    return cmocka_run_group_tests(tests, start_server, stop_server);
}
