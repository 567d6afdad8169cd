/*
 * tests/unit/test_peeraddr.c - server/base/peeraddr.c: client addresses (IPv4,
 * IPv6, IPv4-mapped), --trusted-proxies CIDR lists, and the
 * X-Forwarded-For walk: the right-most untrusted entry, spoofed left-most
 * entries ignored, many hops, malformed headers, an untrusted peer's
 * header ignored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cmocka.h>

#include "server/base/peeraddr.h"

static struct srv_peeraddr A(const char *s)
{
    struct srv_peeraddr a;

    memset(&a, 0, sizeof(a));
    assert_int_equal(srv_peeraddr_parse(&a, s, strlen(s)), 0);
    return a;
}

static const char *fmt(const struct srv_peeraddr *a)
{
    static char buf[4][SRV_PEERADDR_STRLEN];
    static unsigned i;

    return srv_peeraddr_format(a, buf[i++ % 4]);
}

static void test_peeraddr_parse_forms(void **state)
{
    struct srv_peeraddr a;

    (void)state;
    a = A("192.0.2.1");
    assert_string_equal(fmt(&a), "192.0.2.1");
    /* X-Forwarded-For entries may carry a port, IPv6 in brackets. */
    a = A("192.0.2.1:8080");
    assert_string_equal(fmt(&a), "192.0.2.1");
    a = A("2001:db8::1");
    assert_string_equal(fmt(&a), "2001:db8::1");
    a = A("[2001:db8::1]");
    assert_string_equal(fmt(&a), "2001:db8::1");
    a = A("[2001:DB8::1]:443");
    assert_string_equal(fmt(&a), "2001:db8::1");
    /* IPv4-mapped IPv6 is the IPv4 address: one key for both. */
    a = A("::ffff:192.0.2.1");
    assert_string_equal(fmt(&a), "192.0.2.1");
    assert_true(srv_peeraddr_equal(&a, &(struct srv_peeraddr){ 0 }) == false);
    struct srv_peeraddr b = A("192.0.2.1");
    assert_true(srv_peeraddr_equal(&a, &b));
    /* Only len bytes are read. */
    assert_int_equal(srv_peeraddr_parse(&a, "10.0.0.1,junk", 8), 0);
    assert_string_equal(fmt(&a), "10.0.0.1");
}

static void test_peeraddr_parse_rejects_malformed(void **state)
{
    static const char *const bad[] = {
        "", "unknown", "_hidden", "1.2.3", "1.2.3.4.5", "256.1.1.1",
        "1.2.3.4:", "1.2.3.4:http", "1.2.3.4:123456", "[2001:db8::1",
        "[2001:db8::1]x", "[2001:db8::1]:", "[1.2.3.4]", "2001:db8::g",
        "fe80::1%eth0", " 1.2.3.4", "1.2.3.4 ", "1.2.3.4/8", "::1]",
        "0x7f.1", "[]",
        "1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa:bbbb:cccc:dddd",
    };
    struct srv_peeraddr a, before;

    (void)state;
    memset(&before, 0xab, sizeof(before));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        a = before;
        if (srv_peeraddr_parse(&a, bad[i], strlen(bad[i])) != -EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_memory_equal(&a, &before, sizeof(a));
    }
}

static void test_peeraddr_format_unknown_and_sockaddr(void **state)
{
    struct srv_peeraddr a = { 0 }, b;
    struct sockaddr_in sin = { 0 };
    struct sockaddr_in6 sin6 = { 0 };
    struct sockaddr_un sun = { 0 };

    (void)state;
    assert_false(srv_peeraddr_is_set(&a));
    assert_string_equal(fmt(&a), "-");
    sin.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.2", &sin.sin_addr);
    assert_int_equal(srv_peeraddr_from_sockaddr(&a, (struct sockaddr *)&sin,
                                                sizeof(sin)), 0);
    assert_string_equal(fmt(&a), "127.0.0.2");
    /* A dual-stack listener's IPv4 peer is the same key. */
    sin6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &sin6.sin6_addr);
    assert_int_equal(srv_peeraddr_from_sockaddr(&b, (struct sockaddr *)&sin6,
                                                sizeof(sin6)), 0);
    assert_true(srv_peeraddr_equal(&a, &b));
    inet_pton(AF_INET6, "::1", &sin6.sin6_addr);
    assert_int_equal(srv_peeraddr_from_sockaddr(&b, (struct sockaddr *)&sin6,
                                                sizeof(sin6)), 0);
    assert_string_equal(fmt(&b), "::1");
    sun.sun_family = AF_UNIX;
    assert_int_equal(srv_peeraddr_from_sockaddr(&b, (struct sockaddr *)&sun,
                                                sizeof(sun)), -EAFNOSUPPORT);
    /* Too short for its family. */
    assert_int_equal(srv_peeraddr_from_sockaddr(&b, (struct sockaddr *)&sin,
                                                4), -EAFNOSUPPORT);
}

static bool in(const struct srv_peeraddr_cidrs *set, const char *s)
{
    struct srv_peeraddr a = A(s);

    return srv_peeraddr_cidrs_match(set, &a);
}

static void test_peeraddr_cidrs_match(void **state)
{
    struct srv_peeraddr_cidrs set;
    char err[160];

    (void)state;
    assert_int_equal(srv_peeraddr_cidrs_parse(
                         &set, "10.0.0.0/8, 2001:db8::/32,192.0.2.7 ,"
                               "\t172.16.0.0/12,fd00::/8",
                         err, sizeof(err)),
                     0);
    assert_int_equal(set.n, 5);
    assert_true(in(&set, "10.0.0.0"));
    assert_true(in(&set, "10.255.255.255"));
    assert_false(in(&set, "11.0.0.0"));
    assert_false(in(&set, "9.255.255.255"));
    assert_true(in(&set, "2001:db8:1::5"));
    assert_false(in(&set, "2001:db9::"));
    assert_true(in(&set, "192.0.2.7"));
    assert_false(in(&set, "192.0.2.8"));
    /* /12: 172.16.0.0 - 172.31.255.255. */
    assert_true(in(&set, "172.31.255.255"));
    assert_false(in(&set, "172.32.0.0"));
    assert_false(in(&set, "172.15.255.255"));
    assert_true(in(&set, "fdff::1"));
    assert_false(in(&set, "fe00::1"));
    /* An IPv4 range never matches IPv6 outside the mapped space. */
    assert_false(in(&set, "::a00:1"));
    assert_true(in(&set, "::ffff:10.1.2.3"));

    /* Host bits are cleared; /0 of a family covers that family only. */
    assert_int_equal(srv_peeraddr_cidrs_parse(&set, "10.1.2.3/8,0.0.0.0/0",
                                              err, sizeof(err)), 0);
    assert_true(in(&set, "10.9.9.9"));
    assert_true(in(&set, "203.0.113.1"));
    assert_false(in(&set, "2001:db8::1"));
    assert_int_equal(srv_peeraddr_cidrs_parse(&set, "::/0", err, sizeof(err)),
                     0);
    assert_true(in(&set, "2001:db8::1"));
    assert_true(in(&set, "203.0.113.1"));
    /* Odd prefixes: /31 and /127 hold two addresses. */
    assert_int_equal(srv_peeraddr_cidrs_parse(&set, "198.51.100.6/31, "
                                                    "2001:db8::6/127",
                                              err, sizeof(err)), 0);
    assert_true(in(&set, "198.51.100.6"));
    assert_true(in(&set, "198.51.100.7"));
    assert_false(in(&set, "198.51.100.8"));
    assert_true(in(&set, "2001:db8::7"));
    assert_false(in(&set, "2001:db8::8"));
    /* No set, no match. */
    assert_false(srv_peeraddr_cidrs_match(NULL, &(struct srv_peeraddr){ 0 }));
}

static void test_peeraddr_cidrs_parse_errors(void **state)
{
    static const char *const bad[] = {
        "", " ", "10.0.0.0/8,", ",10.0.0.0/8", "10.0.0.0/8,,::1",
        "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "10.0.0.0/-1",
        "10.0.0.0/8a", "10.0.0.0/0008", "a", "[::1]", "1.2.3.4:80",
        "10.0.0.0 /8", "localhost",
    };
    struct srv_peeraddr_cidrs set;
    char err[160], many[64 * 16 + 32];
    size_t n = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (srv_peeraddr_cidrs_parse(&set, bad[i], err, sizeof(err)) !=
            -EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_true(err[0] != '\0');
    }
    assert_int_equal(srv_peeraddr_cidrs_parse(&set, "10.0.0.0/33", err,
                                              sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "\"10.0.0.0/33\" is not an address or CIDR"));
    /* At most SRV_PEERADDR_CIDRS_MAX entries. */
    for (int i = 0; i < SRV_PEERADDR_CIDRS_MAX; i++)
        n += (size_t)snprintf(many + n, sizeof(many) - n, "%s10.0.%d.0/24",
                              i ? "," : "", i);
    assert_int_equal(srv_peeraddr_cidrs_parse(&set, many, err, sizeof(err)),
                     0);
    assert_int_equal(set.n, SRV_PEERADDR_CIDRS_MAX);
    snprintf(many + n, sizeof(many) - n, ",10.1.0.0/16");
    assert_int_equal(srv_peeraddr_cidrs_parse(&set, many, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "more than 64 entries"));
}

/* The client of peer with this X-Forwarded-For; rc is the call's. */
static const char *client(const struct srv_peeraddr_cidrs *t,
                          const char *peer, const char *xff, int *rc)
{
    struct srv_peeraddr p = A(peer), c;

    memset(&c, 0xcd, sizeof(c));
    *rc = srv_peeraddr_forwarded(t, &p, xff, strlen(xff), &c);
    return fmt(&c);
}

static void test_peeraddr_forwarded(void **state)
{
    struct srv_peeraddr_cidrs t;
    char err[160];
    int rc;

    (void)state;
    assert_int_equal(srv_peeraddr_cidrs_parse(&t, "10.0.0.0/8, fd00::/8",
                                              err, sizeof(err)), 0);
    /* A peer that is not a trusted proxy: its header is anyone's. */
    assert_string_equal(client(&t, "203.0.113.50", "198.51.100.1", &rc),
                        "203.0.113.50");
    assert_int_equal(rc, 0);
    /* A trusted proxy without the header: the proxy. */
    assert_string_equal(client(&t, "10.0.0.1", "", &rc), "10.0.0.1");
    /* One hop. */
    assert_string_equal(client(&t, "10.0.0.1", "203.0.113.9", &rc),
                        "203.0.113.9");
    assert_int_equal(rc, 0);
    /* Many hops: the right-most entry that is not a trusted proxy;
     * what the client wrote left of it is ignored. */
    assert_string_equal(client(&t, "10.0.0.1",
                               "198.51.100.1, 203.0.113.9, 10.0.0.2,10.0.0.3",
                               &rc),
                        "203.0.113.9");
    assert_string_equal(client(&t, "10.0.0.1",
                               "1.1.1.1, 2.2.2.2, 10.0.0.7, 203.0.113.9",
                               &rc),
                        "203.0.113.9");
    /* Spoofed left-most entries that look trusted do not help either:
     * the walk stops at the first untrusted entry from the right. */
    assert_string_equal(client(&t, "10.0.0.1", "10.9.9.9, 203.0.113.9", &rc),
                        "203.0.113.9");
    /* Every entry trusted: the left-most one. */
    assert_string_equal(client(&t, "10.0.0.1", "10.0.0.5, 10.0.0.6", &rc),
                        "10.0.0.5");
    assert_int_equal(rc, 0);
    /* Empty elements and spaces (several header lines joined). */
    assert_string_equal(client(&t, "10.0.0.1", " 203.0.113.9 ,, ,\t", &rc),
                        "203.0.113.9");
    assert_int_equal(rc, 0);
    assert_string_equal(client(&t, "10.0.0.1", ",,,", &rc), "10.0.0.1");
    /* IPv6, ports and brackets. */
    assert_string_equal(client(&t, "fd00::1", "[2001:db8::7]:5555, fd00::2",
                               &rc),
                        "2001:db8::7");
    assert_string_equal(client(&t, "10.0.0.1", "203.0.113.9:41234", &rc),
                        "203.0.113.9");
    assert_string_equal(client(&t, "::ffff:10.0.0.1", "2001:db8::8", &rc),
                        "2001:db8::8");
    /* Not an address: the nearest hop known good, the last trusted one. */
    assert_string_equal(client(&t, "10.0.0.1", "203.0.113.9, unknown", &rc),
                        "10.0.0.1");
    assert_int_equal(rc, -EINVAL);
    assert_string_equal(client(&t, "10.0.0.1",
                               "203.0.113.9, _obf, 10.0.0.3", &rc),
                        "10.0.0.3");
    assert_int_equal(rc, -EINVAL);
    assert_string_equal(client(&t, "10.0.0.1", "203.0.113.9\x01", &rc),
                        "10.0.0.1");
    /* An untrusted entry right of garbage wins before garbage is seen. */
    assert_string_equal(client(&t, "10.0.0.1", "garbage, 203.0.113.9", &rc),
                        "203.0.113.9");
    assert_int_equal(rc, 0);
    /* No trusted set: nothing is trusted. */
    assert_string_equal(client(NULL, "10.0.0.1", "203.0.113.9", &rc),
                        "10.0.0.1");
}

/* Thousands of hops, then the client: the walk is linear and bounded by
 * the header, whatever the client put left of it. */
static void test_peeraddr_forwarded_many_hops(void **state)
{
    static char xff[16384];
    struct srv_peeraddr_cidrs t;
    char err[160];
    size_t n = 0;
    int rc;

    (void)state;
    assert_int_equal(srv_peeraddr_cidrs_parse(&t, "10.0.0.0/8", err,
                                              sizeof(err)), 0);
    for (int i = 0; i < 500; i++)
        n += (size_t)snprintf(xff + n, sizeof(xff) - n, "198.51.100.%d, ",
                              i % 250);
    n += (size_t)snprintf(xff + n, sizeof(xff) - n, "203.0.113.9");
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(xff + n, sizeof(xff) - n, ", 10.0.%d.%d",
                              i / 250, i % 250 + 1);
    assert_true(n < sizeof(xff) - 1);
    assert_string_equal(client(&t, "10.0.0.1", xff, &rc), "203.0.113.9");
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peeraddr_parse_forms),
        cmocka_unit_test(test_peeraddr_parse_rejects_malformed),
        cmocka_unit_test(test_peeraddr_format_unknown_and_sockaddr),
        cmocka_unit_test(test_peeraddr_cidrs_match),
        cmocka_unit_test(test_peeraddr_cidrs_parse_errors),
        cmocka_unit_test(test_peeraddr_forwarded),
        cmocka_unit_test(test_peeraddr_forwarded_many_hops),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
