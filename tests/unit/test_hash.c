/*
 * tests/unit/test_hash.c - the keyed hash of hub/base/hash.h and what it does
 * for the tables: SipHash-2-4's reference vector (so libsodium is called
 * as SipHash-2-4 under our key), the key changing every value, apps kept
 * apart, and the hash-flooding case: 4,096 channel names built to agree
 * in the low 16 bits of the old unkeyed FNV-1a, which all fell in one
 * bucket, spread over a hub_chantab like random names under the zero key,
 * a fixed key and a fresh random one. The app table's lookups under a
 * random key close it.
 *
 * Thread: the test's only thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hub/app/app.h"
#include "hub/app/apptab.h"
#include "hub/base/chantab.h"
#include "hub/base/hash.h"

#include "fnv_flood.h"

static const unsigned char zero_key[HUB_HASH_KEY_BYTES];

/* Names in one bucket of the old FNV-1a (tests/unit/fnv_flood.h). */
enum { STAGES = 12, NAMES = 1 << STAGES,
       NAME_LEN = FNV_FLOOD_NAME_LEN(STAGES) };

struct name {
    struct hub_chan_node node;
    char s[NAME_LEN + 1];
};

static void build_names(struct name *out)
{
    char pick[STAGES][2][FNV_FLOOD_BLOCK];

    assert_true(fnv_flood_picks(pick, STAGES));
    for (unsigned n = 0; n < NAMES; n++) {
        fnv_flood_name(out[n].s, pick, STAGES, n);
        out[n].s[NAME_LEN] = '\0';
    }
}

static void test_hash_siphash24_reference_vector(void **state)
{
    /* SipHash paper, appendix A: key 00..0f, message 00..0e. */
    static const unsigned char want[8] = { 0xe5, 0x45, 0xbe, 0x49,
                                           0x61, 0xca, 0x29, 0xa1 };
    unsigned char key[HUB_HASH_KEY_BYTES], msg[15];
    uint64_t h;

    (void)state;
    for (unsigned i = 0; i < sizeof(key); i++)
        key[i] = (unsigned char)i;
    for (unsigned i = 0; i < sizeof(msg); i++)
        msg[i] = (unsigned char)i;
    hub_hash_set_key(key);
    h = hub_hash(msg, sizeof(msg));
    assert_memory_equal(&h, want, sizeof(h));
    hub_hash_set_key(zero_key);
}

static void test_hash_key_and_app_change_the_value(void **state)
{
    unsigned char key[HUB_HASH_KEY_BYTES] = { 1 };
    uint64_t z, k, r1, r2;

    (void)state;
    hub_hash_set_key(zero_key);
    z = hub_chan_hash(0, "presence-room", 13);
    assert_int_equal(z, hub_chan_hash(0, "presence-room", 13));
    /* The same name in another app is another key of the tables. */
    assert_int_not_equal(z, hub_chan_hash(1, "presence-room", 13));
    hub_hash_set_key(key);
    k = hub_chan_hash(0, "presence-room", 13);
    assert_int_not_equal(z, k);
    /* Two processes draw two keys (a false failure: 2^-64). */
    assert_int_equal(hub_hash_init(), 0);
    r1 = hub_chan_hash(0, "presence-room", 13);
    assert_int_equal(hub_hash_init(), 0);
    r2 = hub_chan_hash(0, "presence-room", 13);
    assert_int_not_equal(r1, r2);
    assert_int_not_equal(r1, z);
    assert_int_not_equal(r1, k);
    hub_hash_set_key(zero_key);
}

/* The longest chain of t. */
static uint32_t max_chain(const struct hub_chantab *t)
{
    uint32_t worst = 0;

    for (uint32_t i = 0; i <= t->mask; i++) {
        uint32_t n = 0;

        for (const struct hub_chan_node *c = t->b[i]; c; c = c->hnext)
            n++;
        if (n > worst)
            worst = n;
    }
    return worst;
}

/* Insert every name under the current key; the longest chain. */
static uint32_t spread(struct name *v)
{
    struct hub_chantab t;
    uint32_t worst;

    assert_int_equal(hub_chantab_init(&t, 64), 0);
    for (unsigned i = 0; i < NAMES; i++) {
        v[i].node.app = 0;
        v[i].node.name = v[i].s;
        v[i].node.name_len = NAME_LEN;
        v[i].node.hash = hub_chan_hash(0, v[i].s, NAME_LEN);
        assert_null(hub_chantab_find(&t, 0, v[i].s, NAME_LEN,
                                     v[i].node.hash));
        hub_chantab_insert(&t, &v[i].node);
    }
    assert_int_equal(hub_chantab_check(&t), 0);
    assert_int_equal(t.count, NAMES);
    /* Load at most 1, which the bound below assumes. */
    assert_true((uint64_t)t.mask + 1 >= t.count);
    for (unsigned i = 0; i < NAMES; i++)
        assert_ptr_equal(hub_chantab_find(&t, 0, v[i].s, NAME_LEN,
                                          v[i].node.hash),
                         &v[i].node);
    worst = max_chain(&t);
    for (unsigned i = 0; i < NAMES; i++)
        hub_chantab_remove(&t, &v[i].node);
    hub_chantab_fini(&t);
    return worst;
}

static void test_hash_fnv_multicollision_spreads(void **state)
{
    static struct name v[NAMES];
    unsigned char fixed[HUB_HASH_KEY_BYTES];
    uint64_t low = 0;

    (void)state;
    build_names(v);
    /* Under the old hash: NAMES distinct names, one low-16-bit value, so
     * one bucket of any table of up to 65,536 (this one ends at 8,192). */
    for (unsigned i = 0; i < NAMES; i++) {
        uint64_t h = fnv_flood_old_hash(0, v[i].s, NAME_LEN);

        if (i == 0)
            low = h & 0xffff;
        assert_int_equal(h & 0xffff, low);
        if (i)
            assert_int_not_equal(strcmp(v[i].s, v[i - 1].s), 0);
    }
    /*
     * Keyed, they fall like random names. For n keys over m >= n buckets
     * (load <= 1) at random, P(some chain >= k) <= m * C(n, k) / m^k
     * <= n * (e / k)^k: for n = 4,096 and k = 16 that is 2e-9, so 16 holds
     * for any key but a negligible few. The old hash made it 4,096.
     */
    hub_hash_set_key(zero_key);
    assert_true(spread(v) < 16);
    for (unsigned i = 0; i < sizeof(fixed); i++)
        fixed[i] = (unsigned char)(0xa5 ^ (i * 37));
    hub_hash_set_key(fixed);
    assert_true(spread(v) < 16);
    assert_int_equal(hub_hash_init(), 0);
    assert_true(spread(v) < 16);
    hub_hash_set_key(zero_key);
}

static void test_hash_apptab_lookups_under_a_random_key(void **state)
{
    enum { N = 300 };
    struct hub_app *apps = calloc(N, sizeof(*apps));
    char (*ids)[16] = calloc(N, 16), (*keys)[24] = calloc(N, 24);
    struct hub_apptab *t;

    (void)state;
    assert_non_null(apps);
    assert_non_null(ids);
    assert_non_null(keys);
    assert_int_equal(hub_hash_init(), 0);
    for (unsigned i = 0; i < N; i++) {
        hub_app_defaults(&apps[i]);
        snprintf(ids[i], 16, "%u", i);
        snprintf(keys[i], 24, "key-%u", i);
        apps[i].id = ids[i];
        apps[i].key = keys[i];
        apps[i].secret = "s";
        apps[i].index = i;
    }
    t = hub_apptab_borrow(apps, N);
    assert_non_null(t);
    for (unsigned i = 0; i < N; i++) {
        assert_ptr_equal(hub_apptab_by_key(t, keys[i], strlen(keys[i])),
                         &apps[i]);
        assert_ptr_equal(hub_apptab_by_id(t, ids[i], strlen(ids[i])),
                         &apps[i]);
    }
    assert_null(hub_apptab_by_key(t, "key-300", 7));
    assert_null(hub_apptab_by_id(t, "key-1", 5));
    hub_apptab_free(t, true);
    free(apps);
    free(ids);
    free(keys);
    hub_hash_set_key(zero_key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_siphash24_reference_vector),
        cmocka_unit_test(test_hash_key_and_app_change_the_value),
        cmocka_unit_test(test_hash_fnv_multicollision_spreads),
        cmocka_unit_test(test_hash_apptab_lookups_under_a_random_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
