/*
 * tests/unit/test_cluster_key.c - the cluster key (hub/cluster/cluster_key.h): a MAC
 * verifies with the key it was made with and not with another, every covered
 * value counts, a rotation accepts either key, replays (a counter seen, a time
 * past the window) are refused unless the check is for stored state, and the
 * key file's rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hub/cluster/cluster_key.h"

static const char K1[] = "first-key-0123456789abcdef";
static const char K2[] = "second-key-0123456789abcdef";

static struct hub_cluster_key *mk(const char *a, const char *b,
                                  const char *node)
{
    struct hub_cluster_key *k = hub_cluster_key_create(
        a, strlen(a), b, b ? strlen(b) : 0, "lubdub", node, 3000);

    assert_non_null(k);
    return k;
}

struct signed_msg {
    uint64_t ctr, ms;
    unsigned char mac[HUB_CLUSTER_KEY_MAC_LEN];
};

static struct signed_msg sign(struct hub_cluster_key *k, const char *payload)
{
    struct hub_cluster_key_part p = { payload, strlen(payload) };
    struct signed_msg m;

    assert_int_equal(
        hub_cluster_key_sign(k, "env", &p, 1, &m.ctr, &m.ms, m.mac), 0);
    return m;
}

static enum hub_cluster_key_verdict
check(struct hub_cluster_key *k, const char *node, const char *domain,
      const char *payload, const struct signed_msg *m, bool fresh)
{
    struct hub_cluster_key_part p = { payload, strlen(payload) };

    return hub_cluster_key_verify(k, node, strlen(node), m->ctr, m->ms, domain,
                                  &p, 1, m->mac, fresh);
}

static void test_cluster_key_sign_verify(void **state)
{
    struct hub_cluster_key *n1 = mk(K1, NULL, "n1"), *n2 = mk(K1, NULL, "n2");
    struct hub_cluster_key *other = mk(K2, NULL, "n3");
    struct signed_msg m = sign(n1, "hello"), m2 = sign(n1, "again");
    struct signed_msg bad = m;

    (void)state;
    assert_true(m2.ctr > m.ctr);
    /* Another key, payload, node, domain, counter or time: forged. */
    assert_int_equal(check(other, "n1", "env", "hello", &m, true),
                     HUB_CLUSTER_KEY_FORGED);
    assert_int_equal(check(n2, "n1", "env", "hellO", &m, true),
                     HUB_CLUSTER_KEY_FORGED);
    assert_int_equal(check(n2, "n9", "env", "hello", &m, true),
                     HUB_CLUSTER_KEY_FORGED);
    assert_int_equal(check(n2, "n1", "mem", "hello", &m, true),
                     HUB_CLUSTER_KEY_FORGED);
    bad.ctr++;
    assert_int_equal(check(n2, "n1", "env", "hello", &bad, true),
                     HUB_CLUSTER_KEY_FORGED);
    bad = m;
    bad.ms++;
    assert_int_equal(check(n2, "n1", "env", "hello", &bad, true),
                     HUB_CLUSTER_KEY_FORGED);
    bad = m;
    bad.mac[15] ^= 1;
    assert_int_equal(check(n2, "n1", "env", "hello", &bad, true),
                     HUB_CLUSTER_KEY_FORGED);
    /* The genuine one, then its replay; the next one in order. */
    assert_int_equal(check(n2, "n1", "env", "hello", &m, true),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(n2, "n1", "env", "hello", &m, true),
                     HUB_CLUSTER_KEY_REPLAY);
    /* Stored state: the MAC only. */
    assert_int_equal(check(n2, "n1", "env", "hello", &m, false),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(n2, "n1", "env", "again", &m2, true),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(n2, "n1", "env", "hello", &m, true),
                     HUB_CLUSTER_KEY_REPLAY);
    hub_cluster_key_destroy(n1);
    hub_cluster_key_destroy(n2);
    hub_cluster_key_destroy(other);
}

/* Parts are length-prefixed: ("ab", "c") is not ("a", "bc"). */
static void test_cluster_key_parts_unambiguous(void **state)
{
    struct hub_cluster_key *k = mk(K1, NULL, "n1"), *r = mk(K1, NULL, "n2");
    struct hub_cluster_key_part p1[2] = { { "ab", 2 }, { "c", 1 } };
    struct hub_cluster_key_part p2[2] = { { "a", 1 }, { "bc", 2 } };
    unsigned char mac[HUB_CLUSTER_KEY_MAC_LEN];
    uint64_t ctr, ms;

    (void)state;
    assert_int_equal(hub_cluster_key_sign(k, "mem", p1, 2, &ctr, &ms, mac), 0);
    assert_int_equal(
        hub_cluster_key_verify(r, "n1", 2, ctr, ms, "mem", p2, 2, mac, true),
        HUB_CLUSTER_KEY_FORGED);
    assert_int_equal(
        hub_cluster_key_verify(r, "n1", 2, ctr, ms, "mem", p1, 2, mac, true),
        HUB_CLUSTER_KEY_OK);
    hub_cluster_key_destroy(k);
    hub_cluster_key_destroy(r);
}

static void test_cluster_key_rotation(void **state)
{
    struct hub_cluster_key *old = mk(K1, NULL, "a"), *mid = mk(K2, K1, "b");
    struct hub_cluster_key *mid2 = mk(K1, K2, "c"), *nw = mk(K2, NULL, "d");
    struct signed_msg mo = sign(old, "x"), mm = sign(mid, "x");
    struct signed_msg mn = sign(nw, "x");

    (void)state;
    /* Two keys accept either; one key only its own. */
    assert_int_equal(check(mid2, "a", "env", "x", &mo, false),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(mid2, "b", "env", "x", &mm, false),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(mid2, "d", "env", "x", &mn, false),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(old, "b", "env", "x", &mm, false),
                     HUB_CLUSTER_KEY_FORGED);
    assert_int_equal(check(nw, "b", "env", "x", &mm, false),
                     HUB_CLUSTER_KEY_OK);
    assert_int_equal(check(nw, "a", "env", "x", &mo, false),
                     HUB_CLUSTER_KEY_FORGED);
    hub_cluster_key_destroy(old);
    hub_cluster_key_destroy(mid);
    hub_cluster_key_destroy(mid2);
    hub_cluster_key_destroy(nw);
}

/* A time farther than the window from the receiver's clock is a replay
 * (here a window of 0 ms and a message 20 ms old); its MAC still holds
 * for stored state; a moved time is a forgery, never a stale message. */
static void test_cluster_key_window(void **state)
{
    struct hub_cluster_key *r =
        hub_cluster_key_create(K1, strlen(K1), NULL, 0, "lubdub", "r", 0);
    struct hub_cluster_key *s = mk(K1, NULL, "s");
    struct signed_msg m;

    (void)state;
    assert_non_null(r);
    m = sign(s, "x");
    usleep(20000);
    assert_int_equal(check(r, "s", "env", "x", &m, true),
                     HUB_CLUSTER_KEY_REPLAY);
    assert_int_equal(check(r, "s", "env", "x", &m, false), HUB_CLUSTER_KEY_OK);
    m.ms -= 10000;
    assert_int_equal(check(r, "s", "env", "x", &m, false),
                     HUB_CLUSTER_KEY_FORGED);
    hub_cluster_key_destroy(r);
    hub_cluster_key_destroy(s);
}

static char *tmpfile_with(const char *text)
{
    char *path = strdup("/tmp/lubdub-ckey-XXXXXX");
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_cluster_key_file(void **state)
{
    static const struct {
        const char *text;
        int rc;
        size_t l1, l2;
    } cases[] = {
        { "0123456789abcdef\n", 0, 16, 0 },
        { "0123456789abcdef  \r\n\n", 0, 16, 0 },
        { "0123456789abcdefX\n\n0123456789abcdef\n", 0, 17, 16 },
        { "short\n", -22, 0, 0 },
        { "\n\n", -22, 0, 0 },
        { "0123456789abcdef\n0123456789abcdef\n0123456789abcdef\n", -22, 0,
          0 },
    };
    char why[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *p = tmpfile_with(cases[i].text), *k1, *k2;
        size_t l1, l2;
        int rc =
            hub_cluster_key_read_file(p, &k1, &l1, &k2, &l2, why, sizeof(why));

        if (rc != cases[i].rc)
            fail_msg("case %zu: %d (%s)", i, rc, why);
        if (!rc) {
            assert_int_equal(l1, cases[i].l1);
            assert_int_equal(l2, cases[i].l2);
            free(k1);
            free(k2);
        }
        unlink(p);
        free(p);
    }
    assert_int_equal(hub_cluster_key_read_file(
                         "/nonexistent/key", &(char *){ 0 }, &(size_t){ 0 },
                         &(char *){ 0 }, &(size_t){ 0 }, why, sizeof(why)),
                     -2);
    assert_null(hub_cluster_key_create("short", 5, NULL, 0, "p", "n", 1000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_key_sign_verify),
        cmocka_unit_test(test_cluster_key_parts_unambiguous),
        cmocka_unit_test(test_cluster_key_rotation),
        cmocka_unit_test(test_cluster_key_window),
        cmocka_unit_test(test_cluster_key_file),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
