/*
 * tests/unit/test_ws.c - the RFC 6455 checks of hub/wire/ws.c: the incremental
 * UTF-8 validator at every boundary of RFC 3629 and split at every byte,
 * against a plain reference decoder over every 1-3 byte sequence; close
 * codes and close payloads; the handshake header checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hub/wire/ws.h"

struct seq {
    const char *name;
    const char *bytes;
    size_t len;
};

#define S(name, lit) { name, lit, sizeof(lit) - 1 }

static const struct seq valid[] = {
    S("U+0000", "\x00"),
    S("U+007F", "\x7f"),
    S("U+0080", "\xc2\x80"),
    S("U+07FF", "\xdf\xbf"),
    S("U+0800", "\xe0\xa0\x80"),
    S("U+D7FF", "\xed\x9f\xbf"),
    S("U+E000", "\xee\x80\x80"),
    S("U+FFFF", "\xef\xbf\xbf"),
    S("U+10000", "\xf0\x90\x80\x80"),
    S("U+10FFFF", "\xf4\x8f\xbf\xbf"),
    S("mixed", "{\"event\":\"client-x\",\"data\":\"caf\xc3\xa9 \xe2\x82\xac "
               "\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"}"),
};

/* bad: index of the first byte that makes the text impossible. */
struct bad_seq {
    const char *name;
    const char *bytes;
    size_t len;
    size_t bad;
};

#define B(name, lit, at) { name, lit, sizeof(lit) - 1, at }

static const struct bad_seq invalid[] = {
    B("stray continuation 80", "ab\x80", 2),
    B("stray continuation BF", "\xbf", 0),
    B("overlong C0 80", "\xc0\x80", 0),
    B("overlong C1 BF", "\xc1\xbf", 0),
    B("overlong E0 80 80", "\xe0\x80\x80", 1),
    B("overlong E0 9F BF (U+07FF)", "\xe0\x9f\xbf", 1),
    B("overlong F0 80 80 80", "\xf0\x80\x80\x80", 1),
    B("overlong F0 8F BF BF (U+FFFF)", "\xf0\x8f\xbf\xbf", 1),
    B("surrogate U+D800", "x\xed\xa0\x80", 2),
    B("surrogate U+DBFF", "\xed\xaf\xbf", 1),
    B("surrogate U+DC00", "\xed\xb0\x80", 1),
    B("surrogate U+DFFF", "\xed\xbf\xbf", 1),
    B("U+110000", "\xf4\x90\x80\x80", 1),
    B("F5 lead", "\xf5\x80\x80\x80", 0),
    B("FF byte", "ok\xff", 2),
    B("FE byte", "\xfe", 0),
    B("lead then ASCII", "\xe2\x82" "A", 2),
    B("4-byte lead then ASCII", "\xf0\x9f\x98" "A", 3),
    B("two leads", "\xc3\xc3\xa9", 1),
    B("invalid after valid text", "caf\xc3\xa9\xe9t\xe9", 6),
};

static void test_ws_utf8_valid_boundaries(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        uint8_t st = hub_utf8_feed(HUB_UTF8_ACCEPT, valid[i].bytes,
                                   valid[i].len);

        if (st != HUB_UTF8_ACCEPT)
            fail_msg("%s: state %u, want ACCEPT", valid[i].name, st);
        assert_true(hub_utf8_valid(valid[i].bytes, valid[i].len));
    }
    assert_true(hub_utf8_valid("", 0));
}

static void test_ws_utf8_invalid_rejected_at_the_bad_byte(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        const struct bad_seq *b = &invalid[i];
        uint8_t st = hub_utf8_feed(HUB_UTF8_ACCEPT, b->bytes, b->bad);

        /* Fail fast: the prefix could still be valid text... */
        if (st == HUB_UTF8_REJECT)
            fail_msg("%s: rejected before byte %zu", b->name, b->bad);
        /* ...and the bad byte ends it, whatever follows. */
        st = hub_utf8_feed(st, b->bytes + b->bad, 1);
        if (st != HUB_UTF8_REJECT)
            fail_msg("%s: byte %zu not rejected", b->name, b->bad);
        assert_int_equal(hub_utf8_feed(st, "abc", 3), HUB_UTF8_REJECT);
        assert_false(hub_utf8_valid(b->bytes, b->len));
    }
}

static void test_ws_utf8_truncated_is_pending_not_rejected(void **state)
{
    static const struct seq cut[] = {
        S("C3", "\xc3"), S("E2 82", "\xe2\x82"), S("E0", "\xe0"),
        S("ED", "\xed"), S("F0 9F 98", "\xf0\x9f\x98"), S("F4 8F", "\xf4\x8f"),
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        uint8_t st = hub_utf8_feed(HUB_UTF8_ACCEPT, cut[i].bytes, cut[i].len);

        if (st == HUB_UTF8_ACCEPT || st == HUB_UTF8_REJECT)
            fail_msg("%s: state %u, want pending", cut[i].name, st);
        /* A final fragment ending here makes the message invalid. */
        assert_false(hub_utf8_valid(cut[i].bytes, cut[i].len));
    }
}

/* Every split of the valid texts, in two pieces and byte by byte. */
static void test_ws_utf8_split_at_every_byte(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        const struct seq *v = &valid[i];
        uint8_t st = HUB_UTF8_ACCEPT;

        for (size_t cut = 0; cut <= v->len; cut++) {
            uint8_t a = hub_utf8_feed(HUB_UTF8_ACCEPT, v->bytes, cut);

            if (a == HUB_UTF8_REJECT)
                fail_msg("%s: prefix %zu rejected", v->name, cut);
            a = hub_utf8_feed(a, v->bytes + cut, v->len - cut);
            if (a != HUB_UTF8_ACCEPT)
                fail_msg("%s: split at %zu: state %u", v->name, cut, a);
        }
        for (size_t j = 0; j < v->len; j++) {
            st = hub_utf8_feed(st, v->bytes + j, 1);
            assert_int_not_equal(st, HUB_UTF8_REJECT);
        }
        assert_int_equal(st, HUB_UTF8_ACCEPT);
    }
    /* An invalid text split anywhere is still invalid. */
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        const struct bad_seq *b = &invalid[i];

        for (size_t cut = 0; cut <= b->len; cut++) {
            uint8_t a = hub_utf8_feed(HUB_UTF8_ACCEPT, b->bytes, cut);

            a = hub_utf8_feed(a, b->bytes + cut, b->len - cut);
            if (a != HUB_UTF8_REJECT)
                fail_msg("%s: split at %zu accepted", b->name, cut);
        }
    }
}

/* Reference: decode one character the long way; its length or 0. */
static size_t ref_char(const unsigned char *s, size_t len)
{
    size_t n;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0)
        n = 2, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0)
        n = 3, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
        (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
        cp > 0x10ffff)
        return 0;
    return n;
}

static bool ref_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        size_t n = ref_char(s + i, len - i);

        if (!n)
            return false;
        i += n;
    }
    return true;
}

/* Every sequence of one to three bytes, and four-byte ones around the
 * interesting second bytes, agree with the reference. */
static void test_ws_utf8_matches_reference(void **state)
{
    static const unsigned char tails[] = { 0x00, 0x41, 0x7f, 0x80, 0x8f,
                                           0x90, 0x9f, 0xa0, 0xbf, 0xc0,
                                           0xff };
    unsigned char b[4];

    (void)state;
    for (unsigned x = 0; x < 256; x++) {
        b[0] = (unsigned char)x;
        assert_int_equal(hub_utf8_valid(b, 1), ref_valid(b, 1));
        for (unsigned y = 0; y < 256; y++) {
            b[1] = (unsigned char)y;
            assert_int_equal(hub_utf8_valid(b, 2), ref_valid(b, 2));
            for (unsigned z = 0; z < 256; z++) {
                b[2] = (unsigned char)z;
                if (hub_utf8_valid(b, 3) != ref_valid(b, 3))
                    fail_msg("%02x %02x %02x", x, y, z);
            }
        }
    }
    for (unsigned x = 0xe0; x < 0x100; x++)
        for (unsigned y = 0; y < 256; y++)
            for (size_t i = 0; i < sizeof(tails); i++)
                for (size_t j = 0; j < sizeof(tails); j++) {
                    b[0] = (unsigned char)x;
                    b[1] = (unsigned char)y;
                    b[2] = tails[i];
                    b[3] = tails[j];
                    if (hub_utf8_valid(b, 4) != ref_valid(b, 4))
                        fail_msg("%02x %02x %02x %02x", x, y, b[2], b[3]);
                }
}

static void test_ws_close_codes(void **state)
{
    static const unsigned ok[] = { 1000, 1001, 1002, 1003, 1007, 1008, 1009,
                                   1010, 1011, 3000, 3999, 4000, 4999 };
    static const unsigned bad[] = { 0, 1, 999, 1004, 1005, 1006, 1012, 1013,
                                    1014, 1015, 1016, 1100, 2000, 2999,
                                    5000, 5001, 65535 };

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (!hub_ws_close_code_ok(ok[i]))
            fail_msg("%u refused", ok[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (hub_ws_close_code_ok(bad[i]))
            fail_msg("%u accepted", bad[i]);
}

static void test_ws_close_payloads(void **state)
{
    (void)state;
    assert_int_equal(hub_ws_close_payload_check("", 0), 0);
    assert_int_equal(hub_ws_close_payload_check("\x03", 1), 1002);
    assert_int_equal(hub_ws_close_payload_check("\x03\xe8", 2), 0);
    assert_int_equal(hub_ws_close_payload_check("\x03\xe8" "bye", 5), 0);
    assert_int_equal(hub_ws_close_payload_check("\x0f\xa0" "caf\xc3\xa9", 7),
                     0);
    assert_int_equal(hub_ws_close_payload_check("\x13\x88", 2), 1002); /* 5000 */
    assert_int_equal(hub_ws_close_payload_check("\xff\xff", 2), 1002);
    assert_int_equal(hub_ws_close_payload_check("\x03\xe7", 2), 1002); /* 999 */
    assert_int_equal(hub_ws_close_payload_check("\x03\xed", 2), 1002); /* 1005 */
    assert_int_equal(hub_ws_close_payload_check("\x03\xe8" "\xff", 3), 1007);
    assert_int_equal(hub_ws_close_payload_check("\x03\xe8" "ab\xc3", 5), 1007);
    assert_int_equal(hub_ws_close_payload_check("\x03\xe8" "\xed\xa0\x80", 5),
                     1007);
    /* A bad code wins over a bad reason. */
    assert_int_equal(hub_ws_close_payload_check("\x13\x88" "\xff", 3), 1002);
}

static void test_ws_handshake_version(void **state)
{
    (void)state;
    assert_true(hub_ws_version_ok("13", 2));
    assert_true(hub_ws_version_ok(" 13\t", 4));
    assert_false(hub_ws_version_ok("8", 1));
    assert_false(hub_ws_version_ok("0", 1));
    assert_false(hub_ws_version_ok("99", 2));
    assert_false(hub_ws_version_ok("abc", 3));
    assert_false(hub_ws_version_ok("130", 3));
    assert_false(hub_ws_version_ok("1 3", 3));
    assert_false(hub_ws_version_ok("13, 8", 5));
    assert_false(hub_ws_version_ok("", 0));
    assert_false(hub_ws_version_ok(NULL, 0));
}

static void test_ws_handshake_key(void **state)
{
    (void)state;
    /* RFC 6455 section 1.3's sample nonce. */
    assert_true(hub_ws_key_ok("dGhlIHNhbXBsZSBub25jZQ==", 24));
    assert_true(hub_ws_key_ok(" AAAAAAAAAAAAAAAAAAAA+/== ", 26));
    assert_false(hub_ws_key_ok("", 0));
    assert_false(hub_ws_key_ok(NULL, 0));
    assert_false(hub_ws_key_ok("dGhlIHNhbXBsZSBub25jZQ=", 23));
    assert_false(hub_ws_key_ok("dGhlIHNhbXBsZSBub25jZQ===", 25));
    assert_false(hub_ws_key_ok("dGhlIHNhbXBsZSBub25jZQAA", 24)); /* 18 B */
    assert_false(hub_ws_key_ok("dGhlIHNhbXBsZSBub25jZ===", 24)); /* 15 B */
    assert_false(hub_ws_key_ok("dGhlIHNhbXBsZSBub25jZ-==", 24)); /* url */
    assert_false(hub_ws_key_ok("dGhlIHNhbXBsZSBub25j*Q==", 24));
    assert_false(hub_ws_key_ok("not a key", 9));
}

static void test_ws_list_token(void **state)
{
    (void)state;
    assert_true(hub_ws_list_has_token("Upgrade", 7, "upgrade"));
    assert_true(hub_ws_list_has_token("keep-alive, Upgrade", 19, "upgrade"));
    assert_true(hub_ws_list_has_token(" upgrade ,x", 11, "upgrade"));
    assert_false(hub_ws_list_has_token("upgrade2", 8, "upgrade"));
    assert_false(hub_ws_list_has_token("keep-alive", 10, "upgrade"));
    assert_false(hub_ws_list_has_token("", 0, "upgrade"));
    assert_false(hub_ws_list_has_token(NULL, 0, "upgrade"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ws_utf8_valid_boundaries),
        cmocka_unit_test(test_ws_utf8_invalid_rejected_at_the_bad_byte),
        cmocka_unit_test(test_ws_utf8_truncated_is_pending_not_rejected),
        cmocka_unit_test(test_ws_utf8_split_at_every_byte),
        cmocka_unit_test(test_ws_utf8_matches_reference),
        cmocka_unit_test(test_ws_close_codes),
        cmocka_unit_test(test_ws_close_payloads),
        cmocka_unit_test(test_ws_handshake_version),
        cmocka_unit_test(test_ws_handshake_key),
        cmocka_unit_test(test_ws_list_token),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
