/*
 * tests/unit/test_redis_conn.c - the helpers of server/redis/redis_conn.h
 * that need no Redis: whether a ROLE reply says "master" (and why not,
 * when not), and the words a log line uses for where Redis is.
 *
 * Thread: the test's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "server/redis/redis_conn.h"

/* The reply hiredis parses from RESP bytes (freeReplyObject). */
static redisReply *reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;

    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    assert_non_null(r);
    redisReaderFree(rd);
    return r;
}

/* role_ok of resp: its answer, why in out. */
static bool role_of(const char *resp, char *why, size_t len)
{
    redisReply *r = reply_of(resp);
    bool ok;

    strcpy(why, "untouched");
    ok = srv_redis_conn_role_ok(r, why, len);
    freeReplyObject(r);
    return ok;
}

static void test_redis_conn_role_ok_on_master_slave_error_and_null(
    void **state)
{
    char why[200];

    (void)state;
    assert_true(role_of("*3\r\n$6\r\nmaster\r\n:3129\r\n*0\r\n", why,
                        sizeof(why)));
    assert_false(role_of("*5\r\n$5\r\nslave\r\n$8\r\n10.0.0.1\r\n:6379\r\n"
                         "$9\r\nconnected\r\n:3129\r\n",
                         why, sizeof(why)));
    assert_string_equal(why, "ROLE is slave, not master: the sentinels' "
                             "answer is stale");
    assert_false(role_of("*2\r\n$8\r\nsentinel\r\n*0\r\n", why, sizeof(why)));
    assert_non_null(strstr(why, "ROLE is sentinel, not master"));
    assert_false(role_of("-NOPERM this user has no permissions to run the "
                         "'role' command\r\n",
                         why, sizeof(why)));
    assert_string_equal(why, "ROLE: NOPERM this user has no permissions to "
                             "run the 'role' command");
    assert_false(role_of("+OK\r\n", why, sizeof(why)));
    assert_string_equal(why, "ROLE: no answer");
    assert_false(role_of("*0\r\n", why, sizeof(why)));
    assert_string_equal(why, "ROLE: no answer");
    assert_false(role_of("*1\r\n:1\r\n", why, sizeof(why)));
    assert_string_equal(why, "ROLE: no answer");
    assert_false(srv_redis_conn_role_ok(NULL, why, sizeof(why)));
    assert_string_equal(why, "ROLE: no answer");
}

static void test_redis_conn_describe_names_address_or_sentinels(void **state)
{
    struct srv_redis_url u = {.host = "10.0.0.1", .port = 6380};
    struct srv_redis_conn c;
    char out[300];

    (void)state;
    srv_redis_conn_init(&c, &u, NULL);
    assert_false(srv_redis_conn_checks_role(&c));
    srv_redis_conn_describe(&c, out, sizeof(out));
    assert_string_equal(out, "10.0.0.1:6380");
    c.tls = SSL_CTX_new(TLS_client_method());
    assert_non_null(c.tls);
    /* TLS or not is said apart (beside the db): tests and operators
     * grep "host:port unreachable". */
    srv_redis_conn_describe(&c, out, sizeof(out));
    assert_string_equal(out, "10.0.0.1:6380");
    c.sentinels.n = 1;
    strcpy(c.sentinels.master, "mymaster");
    assert_true(srv_redis_conn_checks_role(&c));
    srv_redis_conn_describe(&c, out, sizeof(out));
    assert_string_equal(out, "master mymaster via 1 sentinel");
    srv_redis_conn_fini(&c); /* frees the context */
    srv_redis_conn_init(&c, &u, NULL);
    c.sentinels.n = 3;
    strcpy(c.sentinels.master, "mymaster");
    srv_redis_conn_describe(&c, out, sizeof(out));
    assert_string_equal(out, "master mymaster via 3 sentinels");
    /* Cut to the room given, terminated. */
    srv_redis_conn_describe(&c, out, 8);
    assert_string_equal(out, "master ");
    srv_redis_conn_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_redis_conn_role_ok_on_master_slave_error_and_null),
        cmocka_unit_test(test_redis_conn_describe_names_address_or_sentinels),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
