/*
 * tests/unit/test_compress.c - hub/loop/compress.h on the fake hub: a
 * publication reaches compressing and plain members of one channel, the
 * compressing ones through one compressed variant shared by reference
 * (made once, even across loops), each queue and the loop's gauge charged
 * the bytes it holds; small frames and apps with "compression": false go
 * plain; a compressed client message is inflated, and a bomb, a corrupt
 * stream or bad UTF-8 close 1009, 1007, 1007.
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
#include <zlib.h>

#include "deflate_client.h"
#include "fake_hub.h"
#include "hub/loop/compress.h"

/* A publication's text of n bytes of data (compresses well). */
static struct hub_frame *big_frame(size_t n)
{
    char *t = malloc(n + 64);
    int h = snprintf(t, n + 64, "{\"event\":\"e\",\"channel\":\"c\",\"data\":\"");
    struct hub_frame *f;

    for (size_t i = 0; i < n; i++)
        t[h + i] = "abcdefgh"[i % 8];
    memcpy(t + h + n, "\"}", 2);
    f = hub_frame_create_text(t, h + n + 2);
    free(t);
    return f;
}

static const struct hub_frame *queued(const struct hub_session *s, uint32_t i)
{
    return s->q.ring[(s->q.head + i) & (s->q.cap - 1)];
}

static uint64_t sum_stat(struct fake_hub *fh, size_t off)
{
    uint64_t t = 0;

    for (unsigned i = 0; i < fh->n_loops; i++)
        t += *(uint64_t *)((char *)&fh->loops[i]->stats + off);
    return t;
}
#define STAT(fh, field) sum_stat((fh), offsetof(struct hub_loop_stats, field))

/* A started fake hub of n loops that compresses frames of min_size wire
 * bytes and more, for an app whose "compression" key is app_on. */
static void start(struct fake_hub *fh, unsigned n, uint32_t min_size,
                  bool app_on)
{
    fake_hub_init(fh, n);
    fh->cfg.compression = true;
    fh->cfg.compression_min_size = min_size;
    fh->apps[0].compression = app_on;
    assert_int_equal(fake_hub_start(fh), 0);
}

static void open_member(struct fake_hub *fh, struct fake_session *fs,
                        unsigned li, bool pmd)
{
    memset(fs, 0, sizeof(*fs));
    assert_int_equal(hub_session_init(&fs->s, fh->loops[li], &fs->conn,
                                      fake_now_ms(fh)), 0);
    if (pmd)
        hub_session_set_pmd(&fs->s);
    hub_pusher_open(&fs->s, &fh->apps[0]);
    fake_subscribe(fh, &fs->s, "c", NULL);
    fake_flush(&fs->s);
}

static void test_compress_mixed_members_share_one_variant(void **state)
{
    struct fake_hub fh;
    struct fake_session m[4];
    struct hub_frame *f, *z;
    struct hub_loop *l;

    (void)state;
    start(&fh, 1, 128, true);
    l = fh.loops[0];
    for (unsigned i = 0; i < 4; i++)
        open_member(&fh, &m[i], 0, i % 2 == 0);
    assert_int_equal(STAT(&fh, compression_sessions), 2);
    f = big_frame(1000);
    assert_int_equal(hub_deliver_local(l, 0, "c", 1, f, NULL), 4);
    z = atomic_load(&f->z);
    assert_non_null(z);
    assert_ptr_not_equal(z, HUB_FRAME_PLAIN);
    assert_true(z->len < f->len / 4);
    for (unsigned i = 0; i < 4; i++) {
        const struct hub_frame *g = queued(&m[i].s, 0);

        assert_int_equal(m[i].s.q.count, 1);
        assert_ptr_equal(g, i % 2 == 0 ? z : f);
        assert_int_equal(hub_frame_data(g)[0], i % 2 == 0 ? 0xC1 : 0x81);
        assert_int_equal(m[i].s.q.bytes, g->len);
    }
    /* Each queue holds its reference; f holds z's. */
    assert_int_equal(atomic_load(&f->refs), 1 + 2);
    assert_int_equal(atomic_load(&z->refs), 1 + 2);
    assert_int_equal(hub_loop_queued(l), 2 * (uint64_t)f->len + 2 * z->len);
    assert_int_equal(STAT(&fh, compressed_frames), 1);
    assert_int_equal(STAT(&fh, compressed_bytes_in), f->len);
    assert_int_equal(STAT(&fh, compressed_bytes_out), z->len);
    /* A second delivery of the same frame reuses the variant. */
    assert_int_equal(hub_deliver_local(l, 0, "c", 1, f, NULL), 4);
    assert_ptr_equal(atomic_load(&f->z), z);
    assert_int_equal(STAT(&fh, compressed_frames), 1);
    for (unsigned i = 0; i < 4; i++) {
        fake_flush(&m[i].s);
        hub_session_fini(&m[i].s, HUB_CLOSE_PEER);
    }
    assert_int_equal(hub_loop_queued(l), 0);
    hub_frame_unref(f);
    fake_hub_stop(&fh);
}

static void test_compress_across_loops_made_once(void **state)
{
    struct fake_hub fh;
    struct fake_session m[2];
    struct hub_frame *f;

    (void)state;
    start(&fh, 2, 128, true);
    open_member(&fh, &m[0], 0, true);
    open_member(&fh, &m[1], 1, true);
    f = big_frame(2000);
    assert_int_equal(hub_publish(fh.hub, NULL, 0, "c", 1, f, NULL), 0);
    fake_hub_drain(&fh);
    assert_int_equal(m[0].s.q.count, 1);
    assert_int_equal(m[1].s.q.count, 1);
    assert_ptr_equal(queued(&m[0].s, 0), queued(&m[1].s, 0));
    assert_ptr_equal(queued(&m[0].s, 0), atomic_load(&f->z));
    assert_int_equal(STAT(&fh, compressed_frames), 1);
    for (unsigned i = 0; i < 2; i++) {
        fake_flush(&m[i].s);
        hub_session_fini(&m[i].s, HUB_CLOSE_PEER);
    }
    hub_frame_unref(f);
    fake_hub_stop(&fh);
}

static void test_compress_small_frames_and_app_off_go_plain(void **state)
{
    struct fake_hub fh;
    struct fake_session m;
    struct hub_frame *f;

    (void)state;
    start(&fh, 1, 128, true);
    open_member(&fh, &m, 0, true);
    f = big_frame(40); /* under 128 wire bytes */
    assert_true(f->len < 128);
    assert_int_equal(hub_deliver_local(fh.loops[0], 0, "c", 1, f, NULL), 1);
    assert_ptr_equal(queued(&m.s, 0), f);
    assert_null(atomic_load(&f->z));
    hub_frame_unref(f);
    fake_flush(&m.s);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);

    /* The app says no: negotiated, but nothing goes compressed. */
    start(&fh, 1, 0, false);
    open_member(&fh, &m, 0, true);
    assert_true(hub_session_pmd(&m.s));
    f = big_frame(1000);
    assert_int_equal(hub_deliver_local(fh.loops[0], 0, "c", 1, f, NULL), 1);
    assert_ptr_equal(queued(&m.s, 0), f);
    assert_int_equal(STAT(&fh, compressed_frames), 0);
    hub_frame_unref(f);
    fake_flush(&m.s);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

/* Feed one compressed message to a fresh session, in two fragments;
 * returns the rx_append result of the last one. */
static int feed_z(struct fake_hub *fh, struct fake_session *m,
                  const unsigned char *c, size_t n, bool binary,
                  const char **msg, size_t *len)
{
    size_t half = n / 2;
    int rc;

    open_member(fh, m, 0, true);
    rc = hub_session_rx_append_deflated(&m->s, c, half, 0, false, binary,
                                        fake_now_ms(fh), msg, len);
    assert_int_equal(rc, 0);
    return hub_session_rx_append_deflated(&m->s, c + half, n - half, 0, true,
                                          binary, fake_now_ms(fh), msg, len);
}

static void test_compress_inflate_and_its_close_codes(void **state)
{
    static const char ping[] = "{\"event\":\"pusher:ping\",\"data\":{}}";
    struct fake_hub fh;
    struct fake_session m;
    size_t big = 1u << 20, n, len = 0;
    unsigned char *zeros = calloc(1, big), *c = malloc(64 * 1024);
    const char *msg = NULL;

    (void)state;
    start(&fh, 1, 0, true);

    n = client_deflate(ping, strlen(ping), c, 64 * 1024, false);
    assert_int_equal(feed_z(&fh, &m, c, n, false, &msg, &len), 1);
    assert_int_equal(len, strlen(ping));
    assert_memory_equal(msg, ping, len);
    assert_int_equal(STAT(&fh, inflated_messages), 1);
    hub_session_rx_done(&m.s);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);

    /* 1 MiB of zeros in about 1 KiB: past max_message (64 KiB). */
    n = client_deflate(zeros, big, c, 64 * 1024, false);
    assert_true(n < 4096);
    assert_int_equal(feed_z(&fh, &m, c, n, false, &msg, &len), -1);
    assert_int_equal(m.s.close_code, 1009);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);

    memcpy(c, "\xff\xfe\xfd\xfc", 4);
    assert_int_equal(feed_z(&fh, &m, c, 4, false, &msg, &len), -1);
    assert_int_equal(m.s.close_code, 1007);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);

    /* Valid deflate, invalid UTF-8 text: 1007; the same as binary passes. */
    n = client_deflate("\xc3\x28 not utf-8", 13, c, 64 * 1024, false);
    assert_int_equal(feed_z(&fh, &m, c, n, false, &msg, &len), -1);
    assert_int_equal(m.s.close_code, 1007);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);
    assert_int_equal(feed_z(&fh, &m, c, n, true, &msg, &len), 1);
    hub_session_rx_done(&m.s);
    hub_session_fini(&m.s, HUB_CLOSE_PEER);

    free(zeros);
    free(c);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compress_mixed_members_share_one_variant),
        cmocka_unit_test(test_compress_across_loops_made_once),
        cmocka_unit_test(test_compress_small_frames_and_app_off_go_plain),
        cmocka_unit_test(test_compress_inflate_and_its_close_codes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
