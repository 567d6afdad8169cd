/*
 * tests/unit/test_pmd.c - permessage-deflate negotiation (hub/wire/pmd.c):
 * each rule of RFC 7692 sections 5 and 7 the hub applies, the offers
 * browsers and node's ws send, several offers in one value, and hostile
 * values (empty, commas only, huge numbers, NUL bytes, unterminated
 * quotes, a buffer too small, every prefix of a value, seeded random
 * bytes). Every value is copied into a heap block of exactly its length,
 * so that an ASan build catches a read past it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hub/wire/pmd.h"

#define BASE "permessage-deflate; server_no_context_takeover; " \
             "client_no_context_takeover"
#define SMWB "; server_max_window_bits=15"
#define CMWB(v) "; client_max_window_bits=" #v

/* hub_pmd_negotiate on an exact-size heap copy of hdr[0..len). */
static int nego_n(const char *hdr, size_t len, char *out, size_t cap)
{
    char *copy = len ? malloc(len) : NULL;
    int rc;

    if (len) {
        assert_non_null(copy);
        memcpy(copy, hdr, len);
    }
    rc = hub_pmd_negotiate(copy, len, out, cap);
    free(copy);
    if (rc == 0 && cap)
        assert_string_equal(out, "");
    return rc;
}

/* The answer to hdr, or NULL when it is declined. */
static const char *nego(const char *hdr)
{
    static char out[HUB_PMD_ANSWER_MAX];

    return nego_n(hdr, strlen(hdr), out, sizeof(out)) ? out : NULL;
}

#define ACCEPTS(hdr, want)                                                  \
    do {                                                                    \
        const char *got_ = nego(hdr);                                       \
        if (!got_)                                                          \
            fail_msg("declined: %s", hdr);                                  \
        assert_string_equal(got_, want);                                    \
    } while (0)

#define DECLINES(hdr)                                                       \
    do {                                                                    \
        const char *got_ = nego(hdr);                                       \
        if (got_)                                                           \
            fail_msg("accepted: %s -> %s", hdr, got_);                      \
    } while (0)

static void test_pmd_bare_offer_gets_no_context_takeover(void **state)
{
    (void)state;
    ACCEPTS("permessage-deflate", BASE);
}

static void test_pmd_browser_offers(void **state)
{
    (void)state;
    /* Chromium, node's ws (perMessageDeflate: true) and WebKit. */
    ACCEPTS("permessage-deflate; client_max_window_bits", BASE CMWB(15));
    /* Firefox. */
    ACCEPTS("permessage-deflate", BASE);
    /* Safari before 2014 offered only the draft extension. */
    DECLINES("x-webkit-deflate-frame");
    /* ws with serverNoContextTakeover and a client window. */
    ACCEPTS("permessage-deflate; server_no_context_takeover; "
            "client_max_window_bits=10", BASE CMWB(10));
    /* A client naming the full server window itself. */
    ACCEPTS("permessage-deflate; server_max_window_bits=15; "
            "client_max_window_bits", BASE SMWB CMWB(15));
}

static void test_pmd_no_context_takeover_takes_no_value(void **state)
{
    (void)state;
    ACCEPTS("permessage-deflate; server_no_context_takeover", BASE);
    ACCEPTS("permessage-deflate; client_no_context_takeover", BASE);
    ACCEPTS("permessage-deflate; client_no_context_takeover; "
            "server_no_context_takeover", BASE);
    DECLINES("permessage-deflate; server_no_context_takeover=1");
    DECLINES("permessage-deflate; client_no_context_takeover=true");
    DECLINES("permessage-deflate; client_no_context_takeover=\"x\"");
}

static void test_pmd_server_window_only_15(void **state)
{
    (void)state;
    ACCEPTS("permessage-deflate; server_max_window_bits=15", BASE SMWB);
    ACCEPTS("permessage-deflate; server_max_window_bits=\"15\"", BASE SMWB);
    ACCEPTS("permessage-deflate; server_max_window_bits=\"1\\5\"", BASE SMWB);
    DECLINES("permessage-deflate; server_max_window_bits");
    DECLINES("permessage-deflate; server_max_window_bits=14");
    DECLINES("permessage-deflate; server_max_window_bits=8");
    DECLINES("permessage-deflate; server_max_window_bits=16");
    DECLINES("permessage-deflate; server_max_window_bits=015");
    DECLINES("permessage-deflate; server_max_window_bits=+15");
    DECLINES("permessage-deflate; server_max_window_bits=15.0");
    DECLINES("permessage-deflate; server_max_window_bits=\"\"");
    DECLINES("permessage-deflate; server_max_window_bits=\" 15\"");
}

static void test_pmd_client_window_answered_as_offered(void **state)
{
    static const char *const want[] = {
        BASE CMWB(8), BASE CMWB(9), BASE CMWB(10), BASE CMWB(11),
        BASE CMWB(12), BASE CMWB(13), BASE CMWB(14), BASE CMWB(15),
    };
    char hdr[80];

    (void)state;
    for (unsigned v = 8; v <= 15; v++) {
        snprintf(hdr, sizeof(hdr),
                 "permessage-deflate; client_max_window_bits=%u", v);
        ACCEPTS(hdr, want[v - 8]);
        snprintf(hdr, sizeof(hdr),
                 "permessage-deflate; client_max_window_bits=\"%u\"", v);
        ACCEPTS(hdr, want[v - 8]);
    }
    ACCEPTS("permessage-deflate; client_max_window_bits", BASE CMWB(15));
    DECLINES("permessage-deflate; client_max_window_bits=7");
    DECLINES("permessage-deflate; client_max_window_bits=0");
    DECLINES("permessage-deflate; client_max_window_bits=16");
    DECLINES("permessage-deflate; client_max_window_bits=09");
    DECLINES("permessage-deflate; client_max_window_bits=-9");
    DECLINES("permessage-deflate; client_max_window_bits=x");
    DECLINES("permessage-deflate; client_max_window_bits=\"\"");
}

static void test_pmd_both_windows_in_one_answer(void **state)
{
    (void)state;
    ACCEPTS("permessage-deflate; client_max_window_bits=9; "
            "server_max_window_bits=15; server_no_context_takeover; "
            "client_no_context_takeover", BASE SMWB CMWB(9));
}

static void test_pmd_unknown_param_declines_offer(void **state)
{
    (void)state;
    DECLINES("permessage-deflate; foo");
    DECLINES("permessage-deflate; client_max_window_bits; foo=1");
    DECLINES("permessage-deflate; server_no_context_takeovers");
    DECLINES("permessage-deflate; client_max_window_bit");
    ACCEPTS("permessage-deflate; foo, permessage-deflate", BASE);
}

static void test_pmd_duplicate_param_declines_offer(void **state)
{
    (void)state;
    DECLINES("permessage-deflate; server_no_context_takeover; "
             "server_no_context_takeover");
    DECLINES("permessage-deflate; client_no_context_takeover; "
             "CLIENT_NO_CONTEXT_TAKEOVER");
    DECLINES("permessage-deflate; server_max_window_bits=15; "
             "server_max_window_bits=15");
    DECLINES("permessage-deflate; client_max_window_bits; "
             "client_max_window_bits=10");
    ACCEPTS("permessage-deflate; client_max_window_bits=9; "
            "client_max_window_bits=9, permessage-deflate; "
            "client_max_window_bits=10", BASE CMWB(10));
}

static void test_pmd_first_acceptable_offer_wins(void **state)
{
    (void)state;
    ACCEPTS("permessage-deflate; client_max_window_bits=9, "
            "permessage-deflate", BASE CMWB(9));
    ACCEPTS("permessage-deflate; server_max_window_bits=10, "
            "permessage-deflate; client_max_window_bits=12, "
            "permessage-deflate", BASE CMWB(12));
    ACCEPTS("permessage-deflate; server_max_window_bits=10, "
            "permessage-deflate", BASE);
    DECLINES("permessage-deflate; server_max_window_bits=10, "
             "permessage-deflate; server_max_window_bits=11");
}

static void test_pmd_other_extensions_skipped(void **state)
{
    (void)state;
    ACCEPTS("foo, permessage-deflate", BASE);
    ACCEPTS("x-webkit-deflate-frame; no_context_takeover, "
            "permessage-deflate; client_max_window_bits", BASE CMWB(15));
    ACCEPTS("foo; client_max_window_bits=99; bar=\"a\", permessage-deflate",
            BASE);
    DECLINES("foo; server_max_window_bits=15");
    DECLINES("permessage-deflatex");
    DECLINES("permessage-deflat");
    DECLINES("deflate-frame");
}

static void test_pmd_names_ignore_case(void **state)
{
    (void)state;
    ACCEPTS("PerMessage-Deflate", BASE);
    ACCEPTS("PERMESSAGE-DEFLATE; Client_Max_Window_Bits=11; "
            "SERVER_MAX_WINDOW_BITS=15; Server_No_Context_Takeover",
            BASE SMWB CMWB(11));
}

static void test_pmd_ows_around_separators(void **state)
{
    (void)state;
    ACCEPTS("  permessage-deflate  ", BASE);
    ACCEPTS("\tpermessage-deflate\t;\tclient_max_window_bits\t=\t10\t",
            BASE CMWB(10));
    ACCEPTS("foo ; a = b , permessage-deflate ; client_max_window_bits ,x",
            BASE CMWB(15));
    ACCEPTS("permessage-deflate;client_max_window_bits=10", BASE CMWB(10));
    ACCEPTS("foo,permessage-deflate", BASE);
    /* Two header lines, joined by the caller. */
    ACCEPTS("foo; a=1, permessage-deflate; client_max_window_bits",
            BASE CMWB(15));
    /* Not OWS: CR, LF, vertical tab. */
    DECLINES("permessage-deflate\r\n");
    DECLINES("permessage-deflate;\nclient_max_window_bits");
    DECLINES("permessage-deflate\v");
}

static void test_pmd_empty_list_elements_skipped(void **state)
{
    (void)state;
    ACCEPTS(", permessage-deflate", BASE);
    ACCEPTS(",,, ,\t, permessage-deflate ,,", BASE);
    ACCEPTS("foo,, ,permessage-deflate", BASE);
}

static void test_pmd_quoted_values(void **state)
{
    (void)state;
    ACCEPTS("permessage-deflate; client_max_window_bits=\"10\"",
            BASE CMWB(10));
    ACCEPTS("permessage-deflate; client_max_window_bits=\"\\1\\0\"",
            BASE CMWB(10));
    ACCEPTS("permessage-deflate; client_max_window_bits = \"9\" ",
            BASE CMWB(9));
    /* A comma in a quoted-string is not a list separator: the malformed
     * quoted value (not a token) costs only its own offer. */
    ACCEPTS("foo; x=\"a,b\", permessage-deflate", BASE);
    ACCEPTS("foo; x=\"a\\\",b\", permessage-deflate", BASE);
    DECLINES("foo; x=\"a, permessage-deflate\"");
    /* Unescaped, the value must be a token (RFC 6455 section 9.1). */
    DECLINES("permessage-deflate; client_max_window_bits=\"1 0\"");
    DECLINES("permessage-deflate; client_max_window_bits=\"10\"x");
    DECLINES("permessage-deflate; client_max_window_bits=\"10\"\"\"");
}

static void test_pmd_malformed_offer_declines_it(void **state)
{
    static const char *const bad[] = {
        "permessage-deflate;;",
        "permessage-deflate;",
        "permessage-deflate; ",
        "permessage-deflate; ;client_max_window_bits",
        "permessage-deflate; a=",
        "permessage-deflate; a= ;b",
        "permessage-deflate; =1",
        "permessage-deflate; client_max_window_bits==10",
        "permessage-deflate; client_max_window_bits=1 0",
        "permessage-deflate x",
        "permessage-deflate client_max_window_bits",
        "permessage-deflate; client_max_window_bits=10 x",
        "permessage-deflate; @",
        "permessage-deflate; client_max_window_bits=1@",
        "permessage-deflate(1)",
        "permessage-deflate; client_max_window_bits=\"10",
        "permessage-deflate; client_max_window_bits=\"10\\",
        "permessage-deflate; client_max_window_bits=\"10\\\"",
        "; permessage-deflate",
        "=permessage-deflate",
        "\"permessage-deflate\"",
    };
    char hdr[160];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        DECLINES(bad[i]);
        /* The next offer is still read, unless a quote left open
         * swallows it. */
        snprintf(hdr, sizeof(hdr), "%s, permessage-deflate", bad[i]);
        if (strchr(bad[i], '"') && bad[i][0] != '"')
            DECLINES(hdr);
        else
            ACCEPTS(hdr, BASE);
    }
    /* A closed quote after the junk lets the next offer through; an
     * offer inside the junk's quotes is not one. */
    ACCEPTS("\"permessage-deflate, x\", permessage-deflate", BASE);
    DECLINES("\"x, permessage-deflate, y\"");
    DECLINES("foo; a=b\"c, permessage-deflate, d\"");
}

static void test_pmd_nothing_offered(void **state)
{
    char out[HUB_PMD_ANSWER_MAX] = "junk";

    (void)state;
    assert_int_equal(hub_pmd_negotiate(NULL, 0, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(hub_pmd_negotiate(NULL, 10, out, sizeof(out)), 0);
    assert_int_equal(hub_pmd_negotiate("", 0, out, sizeof(out)), 0);
    DECLINES("");
    DECLINES(",");
    DECLINES(",,,,,,,,,,,,,,,,,,,,,,,,");
    DECLINES(" , \t, ");
    DECLINES(" ");
}

static void test_pmd_huge_numbers_decline(void **state)
{
    char hdr[4200];
    int n;

    (void)state;
    DECLINES("permessage-deflate; client_max_window_bits="
             "99999999999999999999999999999999999999");
    DECLINES("permessage-deflate; client_max_window_bits=4294967306");
    DECLINES("permessage-deflate; server_max_window_bits=4294967311");
    DECLINES("permessage-deflate; client_max_window_bits=111");
    n = snprintf(hdr, sizeof(hdr),
                 "permessage-deflate; client_max_window_bits=");
    memset(hdr + n, '1', 4096);
    hdr[n + 4096] = '\0';
    DECLINES(hdr);
    memset(hdr + n, '0', 4094);
    memcpy(hdr + n + 4094, "15", 3);
    DECLINES(hdr);
}

static void test_pmd_nul_bytes(void **state)
{
    static const char with_nul[] = "permessage-deflate\0";
    static const char nul_in_name[] = "permessage-\0deflate";
    static const char nul_in_value[] = "permessage-deflate; "
                                       "client_max_window_bits=1\0" "0";
    static const char nul_in_quote[] = "foo; a=\"\0,\", permessage-deflate";
    static const char nul_then_offer[] = "\0, permessage-deflate";
    char out[HUB_PMD_ANSWER_MAX];

    (void)state;
    assert_int_equal(nego_n(with_nul, sizeof(with_nul) - 1, out,
                            sizeof(out)), 0);
    assert_int_equal(nego_n(nul_in_name, sizeof(nul_in_name) - 1, out,
                            sizeof(out)), 0);
    assert_int_equal(nego_n(nul_in_value, sizeof(nul_in_value) - 1, out,
                            sizeof(out)), 0);
    /* The quote is skipped whole, so the comma in it is not a separator
     * and the offer after it is read. */
    assert_int_equal(nego_n(nul_in_quote, sizeof(nul_in_quote) - 1, out,
                            sizeof(out)), 1);
    assert_string_equal(out, BASE);
    assert_int_equal(nego_n(nul_then_offer, sizeof(nul_then_offer) - 1, out,
                            sizeof(out)), 1);
    assert_string_equal(out, BASE);
}

static void test_pmd_reads_only_len_bytes(void **state)
{
    static const char hdr[] = "permessage-deflate; client_max_window_bits=9";
    char out[HUB_PMD_ANSWER_MAX];

    (void)state;
    /* Cut after the name: the parameter is not seen. */
    assert_int_equal(nego_n(hdr, 18, out, sizeof(out)), 1);
    assert_string_equal(out, BASE);
    /* Cut after the '=': a parameter without its value. */
    assert_int_equal(nego_n(hdr, sizeof(hdr) - 2, out, sizeof(out)), 0);
    /* Every prefix, each in a block of its own length (ASan checks). */
    for (size_t n = 0; n <= sizeof(hdr) - 1; n++)
        (void)nego_n(hdr, n, out, sizeof(out));
}

static void test_pmd_cap_too_small_declines(void **state)
{
    static const char longest[] =
        "permessage-deflate; client_max_window_bits=10; "
        "server_max_window_bits=15";
    const char *want = BASE SMWB CMWB(10);
    size_t need = strlen(want) + 1;
    char out[HUB_PMD_ANSWER_MAX];

    (void)state;
    assert_true(need <= HUB_PMD_ANSWER_MAX);
    assert_int_equal(nego_n(longest, strlen(longest), NULL, 0), 0);
    assert_int_equal(nego_n(longest, strlen(longest), out, 1), 0);
    assert_int_equal(nego_n(longest, strlen(longest), out, need - 1), 0);
    assert_int_equal(nego_n(longest, strlen(longest), out, need), 1);
    assert_string_equal(out, want);
    assert_int_equal(nego_n("permessage-deflate", 18, out, sizeof(BASE) - 1),
                     0);
    assert_int_equal(nego_n("permessage-deflate", 18, out, sizeof(BASE)), 1);
}

/* The answer, read back as an offer, is accepted with the same answer. */
static void test_pmd_answer_is_its_own_offer(void **state)
{
    static const char *const offers[] = {
        "permessage-deflate",
        "permessage-deflate; client_max_window_bits",
        "permessage-deflate; client_max_window_bits=8; "
        "server_max_window_bits=15",
    };
    char first[HUB_PMD_ANSWER_MAX];

    (void)state;
    for (size_t i = 0; i < sizeof(offers) / sizeof(offers[0]); i++) {
        assert_int_equal(nego_n(offers[i], strlen(offers[i]), first,
                                sizeof(first)), 1);
        ACCEPTS(first, first);
    }
}

static void test_pmd_scan_walks_offers_and_params(void **state)
{
    static const char hdr[] = " a ; b ; c=1 ;d=\"x\\yz\", ,e;f=\"g\"";
    struct hub_pmd_scan s;
    struct hub_pmd_param p;
    const char *name;
    size_t nlen;
    char v[8];

    (void)state;
    hub_pmd_scan_init(&s, hdr, sizeof(hdr) - 1);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 1);
    assert_int_equal(nlen, 1);
    assert_memory_equal(name, "a", 1);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 1);
    assert_memory_equal(p.name, "b", 1);
    assert_null(p.value);
    assert_int_equal(hub_pmd_param_value(&p, v, sizeof(v)), -ENOENT);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 1);
    assert_memory_equal(p.name, "c", 1);
    assert_false(p.quoted);
    assert_int_equal(hub_pmd_param_value(&p, v, sizeof(v)), 1);
    assert_string_equal(v, "1");
    assert_int_equal(hub_pmd_scan_param(&s, &p), 1);
    assert_memory_equal(p.name, "d", 1);
    assert_true(p.quoted);
    assert_int_equal(p.value_len, 4);
    assert_int_equal(hub_pmd_param_value(&p, v, sizeof(v)), 3);
    assert_string_equal(v, "xyz");
    assert_int_equal(hub_pmd_param_value(&p, v, 3), -ENOSPC);
    assert_int_equal(hub_pmd_param_value(&p, v, 0), -ENOSPC);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 0);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 0);
    /* The empty element is skipped; e's parameter is left unread. */
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 1);
    assert_memory_equal(name, "e", 1);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 0);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 0);
}

static void test_pmd_scan_malformed_offer_is_einval(void **state)
{
    static const char hdr[] = "a;;, b c, d; e=, f";
    struct hub_pmd_scan s;
    struct hub_pmd_param p;
    const char *name;
    size_t nlen;

    (void)state;
    hub_pmd_scan_init(&s, hdr, sizeof(hdr) - 1);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 1);
    assert_int_equal(hub_pmd_scan_param(&s, &p), -EINVAL);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 0);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), -EINVAL);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 1);
    assert_memory_equal(name, "d", 1);
    assert_int_equal(hub_pmd_scan_param(&s, &p), -EINVAL);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 1);
    assert_memory_equal(name, "f", 1);
    assert_int_equal(hub_pmd_scan_param(&s, &p), 0);
    assert_int_equal(hub_pmd_scan_offer(&s, &name, &nlen), 0);
}

/*
 * Seeded random values over the bytes the grammar turns on, and over all
 * 256: whatever they are, the answer is "" or starts with the base, and
 * nothing is read past the block (ASan).
 */
static void test_pmd_random_bytes_are_safe(void **state)
{
    static const char *const parts[] = {
        "permessage-deflate", "client_max_window_bits", "server_max_window_bits",
        "server_no_context_takeover", "client_no_context_takeover", ";", ",",
        "=", "\"", "\\", " ", "\t", "15", "8", "x", "\0", "\xff",
    };
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char hdr[512], out[HUB_PMD_ANSWER_MAX];
    unsigned accepted = 0;

    (void)state;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = 0;
        int nparts;

        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        nparts = (int)(x % 12);
        for (int i = 0; i < nparts; i++) {
            const char *pt;
            size_t pl;

            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            pt = parts[x % (sizeof(parts) / sizeof(parts[0]))];
            pl = *pt ? strlen(pt) : 1;
            if ((iter & 7) == 7) { /* any byte at all */
                hdr[len] = (char)(x >> 24);
                pl = 1;
            } else {
                memcpy(hdr + len, pt, pl);
            }
            len += pl;
        }
        if (nego_n(hdr, len, out, sizeof(out))) {
            accepted++;
            assert_memory_equal(out, BASE, sizeof(BASE) - 1);
        }
    }
    /* The walk did reach the accepting paths. */
    assert_true(accepted > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pmd_bare_offer_gets_no_context_takeover),
        cmocka_unit_test(test_pmd_browser_offers),
        cmocka_unit_test(test_pmd_no_context_takeover_takes_no_value),
        cmocka_unit_test(test_pmd_server_window_only_15),
        cmocka_unit_test(test_pmd_client_window_answered_as_offered),
        cmocka_unit_test(test_pmd_both_windows_in_one_answer),
        cmocka_unit_test(test_pmd_unknown_param_declines_offer),
        cmocka_unit_test(test_pmd_duplicate_param_declines_offer),
        cmocka_unit_test(test_pmd_first_acceptable_offer_wins),
        cmocka_unit_test(test_pmd_other_extensions_skipped),
        cmocka_unit_test(test_pmd_names_ignore_case),
        cmocka_unit_test(test_pmd_ows_around_separators),
        cmocka_unit_test(test_pmd_empty_list_elements_skipped),
        cmocka_unit_test(test_pmd_quoted_values),
        cmocka_unit_test(test_pmd_malformed_offer_declines_it),
        cmocka_unit_test(test_pmd_nothing_offered),
        cmocka_unit_test(test_pmd_huge_numbers_decline),
        cmocka_unit_test(test_pmd_nul_bytes),
        cmocka_unit_test(test_pmd_reads_only_len_bytes),
        cmocka_unit_test(test_pmd_cap_too_small_declines),
        cmocka_unit_test(test_pmd_answer_is_its_own_offer),
        cmocka_unit_test(test_pmd_scan_walks_offers_and_params),
        cmocka_unit_test(test_pmd_scan_malformed_offer_is_einval),
        cmocka_unit_test(test_pmd_random_bytes_are_safe),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
