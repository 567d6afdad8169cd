/*
 * tests/unit/test_cluster.c - the node-to-node envelope (hub/cluster/cluster_envelope.h)
 * and the cluster backplane's node-local half (hub/cluster/cluster.h) without a
 * network: encode/decode round trips, every truncation and hostile bytes
 * refused without reading out of bounds, the directory wrapper queueing a
 * SUB on a channel's first local subscriber and an UNSUB on its last, and
 * the receiving side's own-origin, gap and epoch rules.
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

#include "fake_hub.h"
#include "hub/loop/backplane.h"
#include "hub/channel/cache.h"
#include "hub/cluster/cluster.h"
#include "hub/cluster/cluster_envelope.h"
#include "hub/wire/frame.h"

static const unsigned char payload[] = "{\"event\":\"ev\",\"data\":\"x\"}";

static struct hub_cluster_envelope sample(void)
{
    return (struct hub_cluster_envelope){
        .kind = HUB_CLUSTER_ENV_EVENT, .origin = "n1", .origin_len = 2,
        .epoch = 0x1122334455667788ull, .seq = 42, .app = "app-id",
        .app_len = 6, .channel = "private-a", .channel_len = 9,
        .excl_set = true, .excl_hi = 123456, .excl_lo = 789,
        .member_seq = 0, .data = payload, .data_len = sizeof(payload) - 1,
    };
}

static void test_cluster_envelope_round_trip(void **state)
{
    struct hub_cluster_envelope e = sample(), d;
    unsigned char buf[512];
    size_t n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));

    (void)state;
    assert_int_equal(n, hub_cluster_envelope_size(&e));
    assert_int_equal(hub_cluster_envelope_decode(&d, buf, n), 0);
    assert_int_equal(d.kind, HUB_CLUSTER_ENV_EVENT);
    assert_memory_equal(d.origin, "n1", 2);
    assert_int_equal(d.epoch, e.epoch);
    assert_int_equal(d.seq, 42);
    assert_memory_equal(d.app, "app-id", 6);
    assert_int_equal(d.channel_len, 9);
    assert_memory_equal(d.channel, "private-a", 9);
    assert_true(d.excl_set);
    assert_int_equal(d.excl_hi, 123456);
    assert_int_equal(d.excl_lo, 789);
    assert_int_equal(d.data_len, sizeof(payload) - 1);
    assert_memory_equal(d.data, payload, d.data_len);
    /* Too small a buffer: nothing written. */
    assert_int_equal(hub_cluster_envelope_encode(&e, buf, n - 1), 0);
}

/* Recovery's id rides after the payload (flags bit 1), and every byte of
 * it is checked: cut anywhere it fails, a seq of 0 or an origin too long
 * is refused, and only events and cache events carry one. */
static void test_cluster_envelope_history_id_round_trip(void **state)
{
    struct hub_cluster_envelope e = sample(), plain = sample(), d;
    unsigned char buf[512];
    size_t n;

    (void)state;
    e.hist_origin = "b0a1b2c3d";
    e.hist_origin_len = 9;
    e.hist_seq = 48121;
    e.hist_time_ms = 1796486563055ull;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_int_equal(n, hub_cluster_envelope_size(&plain) + 1 + 9 + 16);
    assert_int_equal(hub_cluster_envelope_decode(&d, buf, n), 0);
    assert_int_equal(d.hist_origin_len, 9);
    assert_memory_equal(d.hist_origin, "b0a1b2c3d", 9);
    assert_int_equal(d.hist_seq, 48121);
    assert_int_equal(d.hist_time_ms, 1796486563055ull);
    assert_memory_equal(d.data, payload, sizeof(payload) - 1);
    for (size_t cut = 1; cut <= 1 + 9 + 16; cut++)
        assert_int_equal(hub_cluster_envelope_decode(&d, buf, n - cut),
                         -EINVAL);
    /* Without the id: the same bytes as before, flags bit 1 clear. */
    e = sample();
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_int_equal(hub_cluster_envelope_decode(&d, buf, n), 0);
    assert_int_equal(d.hist_seq, 0);
    e.hist_origin = "x";
    e.hist_origin_len = HUB_CLUSTER_ENV_MAX_HIST_ORIGIN + 1;
    e.hist_seq = 1;
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
    e.hist_origin_len = 1;
    e.kind = HUB_CLUSTER_ENV_TERMINATE;
    e.data_len = 0;
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
}

static void test_cluster_envelope_refuses_out_of_bounds_input(void **state)
{
    struct hub_cluster_envelope e = sample();
    unsigned char buf[2048];

    (void)state;
    e.origin_len = 0;
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
    e = sample();
    e.channel_len = HUB_CLUSTER_ENV_MAX_CHANNEL + 1;
    assert_int_equal(hub_cluster_envelope_encode(&e, buf, sizeof(buf)), 0);
    e = sample();
    e.kind = 9;
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
    e = sample();
    e.kind = HUB_CLUSTER_ENV_TERMINATE; /* a terminate order carries no data */
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
}

/* Each decode gets its own exact-size heap copy, so that ASan sees any
 * read past the end. */
static int decode_copy(const unsigned char *p, size_t n)
{
    struct hub_cluster_envelope d;
    unsigned char *copy = malloc(n ? n : 1);
    int rc;

    assert_non_null(copy);
    memcpy(copy, p, n);
    rc = hub_cluster_envelope_decode(&d, copy, n);
    if (rc == 0) {
        assert_true(d.origin_len >= 1 && d.origin_len <= HUB_CLUSTER_ENV_MAX_ORIGIN);
        assert_true(d.channel_len >= 1 &&
                    d.channel_len <= HUB_CLUSTER_ENV_MAX_CHANNEL);
        assert_true((const unsigned char *)d.data + d.data_len <=
                    copy + n);
    }
    free(copy);
    return rc;
}

static void test_cluster_envelope_hostile_bytes(void **state)
{
    struct hub_cluster_envelope e = sample();
    unsigned char buf[512], m[512];
    size_t n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    uint64_t x = 0x9E3779B97F4A7C15ull;

    (void)state;
    assert_int_equal(hub_cluster_envelope_decode(&e, NULL, 0), -EINVAL);
    /* Every truncation, and one byte too many, are refused. */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(decode_copy(buf, k), -EINVAL);
    memcpy(m, buf, n);
    m[n] = 0;
    assert_int_equal(decode_copy(m, n + 1), -EINVAL);
    /* Wrong magic; unknown flag bits. */
    memcpy(m, buf, n);
    m[0] = 'X';
    assert_int_equal(decode_copy(m, n), -EINVAL);
    memcpy(m, buf, n);
    m[5] = 0x81;
    assert_int_equal(decode_copy(m, n), -EINVAL);
    /* A length field claiming more than there is. */
    memcpy(m, buf, n);
    m[6] = 0xff;
    m[7] = 0xff;
    assert_int_equal(decode_copy(m, n), -EINVAL);
    /* Random flips and random garbage: never a crash or a bad read. */
    for (int round = 0; round < 20000; round++) {
        size_t len;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(m, buf, n);
        len = round % 2 ? n : (size_t)(x % (n + 1));
        for (int f = 0; f < 1 + (int)(x % 4); f++)
            m[(x >> (8 * f)) % n] ^= (unsigned char)(x >> (8 * f + 3));
        (void)decode_copy(m, len);
        for (size_t k = 0; k < sizeof(m); k++)
            m[k] = (unsigned char)(x >> (k % 57));
        (void)decode_copy(m, (size_t)(x % sizeof(m)));
    }
}

/* Kind 4, a count notice: the event layout with no payload. */
static void test_cluster_envelope_count_kind(void **state)
{
    struct hub_cluster_envelope e = sample(), d;
    unsigned char buf[512], m[512];
    size_t n;

    (void)state;
    e.kind = HUB_CLUSTER_ENV_COUNT;
    assert_int_equal(hub_cluster_envelope_size(&e), 0); /* it carries no data */
    e.data = NULL;
    e.data_len = 0;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(hub_cluster_envelope_decode(&d, buf, n), 0);
    assert_int_equal(d.kind, HUB_CLUSTER_ENV_COUNT);
    assert_int_equal(d.data_len, 0);
    assert_int_equal(d.channel_len, e.channel_len);
    assert_memory_equal(d.channel, e.channel, e.channel_len);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(decode_copy(buf, k), -EINVAL);
    /* An event with a payload relabelled kind 4 is refused. */
    e = sample();
    n = hub_cluster_envelope_encode(&e, m, sizeof(m));
    m[4] = HUB_CLUSTER_ENV_COUNT;
    assert_int_equal(decode_copy(m, n), -EINVAL);
    /* A ttl belongs to kind 3 only. */
    e.kind = HUB_CLUSTER_ENV_COUNT;
    e.data = NULL;
    e.data_len = 0;
    e.ttl_ms = 5;
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
}

/* Kind 5, a script's event: the event layout, not numbered. */
static void test_cluster_envelope_script_kind(void **state)
{
    struct hub_cluster_envelope e = sample(), d;
    unsigned char buf[512];
    size_t n;

    (void)state;
    e.kind = HUB_CLUSTER_ENV_SCRIPT;
    e.epoch = e.seq = 0;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(hub_cluster_envelope_decode(&d, buf, n), 0);
    assert_int_equal(d.kind, HUB_CLUSTER_ENV_SCRIPT);
    assert_int_equal(d.data_len, e.data_len);
    assert_memory_equal(d.data, e.data, e.data_len);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(decode_copy(buf, k), -EINVAL);
    e.ttl_ms = 5; /* a ttl belongs to kind 3 only */
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
}

/* Kind 3, a cache event: the same layout plus its remaining life. */
static void test_cluster_envelope_cache_kind(void **state)
{
    struct hub_cluster_envelope e = sample(), d;
    unsigned char buf[512], m[512];
    size_t n;
    uint64_t x = 0xD1B54A32D192ED03ull;

    (void)state;
    e.kind = HUB_CLUSTER_ENV_CACHE;
    e.channel = "cache-a";
    e.channel_len = 7;
    assert_int_equal(hub_cluster_envelope_size(&e), 0); /* no ttl */
    e.ttl_ms = HUB_CLUSTER_ENV_MAX_TTL + 1;
    assert_int_equal(hub_cluster_envelope_size(&e), 0);
    e.ttl_ms = 1234;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    d = sample();
    assert_int_equal(n, hub_cluster_envelope_size(&d) - 2 + 4);
    assert_int_equal(hub_cluster_envelope_decode(&d, buf, n), 0);
    assert_int_equal(d.kind, HUB_CLUSTER_ENV_CACHE);
    assert_int_equal(d.ttl_ms, 1234);
    assert_int_equal(d.data_len, sizeof(payload) - 1);
    assert_memory_equal(d.data, payload, d.data_len);
    /* Only kind 3 carries a ttl. */
    d = sample();
    d.ttl_ms = 5;
    assert_int_equal(hub_cluster_envelope_size(&d), 0);
    /* A zero ttl on the wire, every truncation, one byte more. */
    memcpy(m, buf, n);
    memset(m + n - 4, 0, 4);
    assert_int_equal(decode_copy(m, n), -EINVAL);
    memset(m + n - 4, 0xff, 4);
    assert_int_equal(decode_copy(m, n), -EINVAL);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(decode_copy(buf, k), -EINVAL);
    memcpy(m, buf, n);
    m[n] = 1;
    assert_int_equal(decode_copy(m, n + 1), -EINVAL);
    /* An event envelope relabelled kind 3 lacks its ttl. */
    e = sample();
    n = hub_cluster_envelope_encode(&e, m, sizeof(m));
    m[4] = HUB_CLUSTER_ENV_CACHE;
    assert_int_equal(decode_copy(m, n), -EINVAL);
    /* Random flips: never a crash or a bad read. */
    n = hub_cluster_envelope_encode(&(struct hub_cluster_envelope){ .kind = HUB_CLUSTER_ENV_CACHE,
        .origin = "n1", .origin_len = 2, .app = "a", .app_len = 1,
        .channel = "cache-a", .channel_len = 7, .data = payload,
        .data_len = sizeof(payload) - 1, .ttl_ms = 9 }, buf, sizeof(buf));
    assert_true(n > 0);
    for (int round = 0; round < 20000; round++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(m, buf, n);
        for (int f = 0; f < 1 + (int)(x % 4); f++)
            m[(x >> (8 * f)) % n] ^= (unsigned char)(x >> (8 * f + 3));
        (void)decode_copy(m, round % 2 ? n : (size_t)(x % (n + 1)));
    }
}

/* The cluster, no hub: receiving counts but delivers nowhere. */

static int wakes;

static void count_wake(void *ctx)
{
    (void)ctx;
    wakes++;
}

static struct hub_app apps[1] = { { .id = "app-id", .key = "app-key",
                                    .index = 0 } };

static struct hub_cluster *cluster(const char *node)
{
    struct hub_cluster_cfg cfg = {
        .node_id = node, .prefix = "pfx", .apps = apps, .n_apps = 1,
        .max_queue = 4, .wake = count_wake,
    };
    struct hub_cluster *c = hub_cluster_create(&cfg);

    assert_non_null(c);
    return c;
}

static size_t take_all(struct hub_cluster *c, enum hub_cluster_op_kind *kinds,
                       char names[][64], size_t cap)
{
    struct hub_cluster_op *op, *next;
    size_t n = 0;

    for (op = hub_cluster_take(c); op; op = next) {
        next = op->next;
        if (n < cap) {
            kinds[n] = op->kind;
            snprintf(names[n], 64, "%s", op->rchan);
        }
        n++;
        hub_cluster_op_free(op);
    }
    return n;
}

static void test_cluster_subscribes_on_first_and_last(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane bp;
    enum hub_cluster_op_kind k[8];
    char names[8][64];
    bool last;
    uint64_t seq;
    struct hub_channel_info info;

    (void)state;
    hub_cluster_backplane(c, &bp);
    wakes = 0;
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "c1", 2, NULL), 0);
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "c1", 2, NULL), 0);
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "c2", 2, NULL), 0);
    /* The user channel: subscribed to, not counted by the directory. */
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "#server-to-user-u", 17,
                                  NULL), 0);
    assert_int_equal(wakes, 1); /* once, on the empty queue's edge */
    assert_int_equal(take_all(c, k, names, 8), 3);
    assert_int_equal(k[0], HUB_COP_SUB);
    assert_string_equal(names[0], "pfx:app-id:c1");
    assert_string_equal(names[1], "pfx:app-id:c2");
    assert_string_equal(names[2], "pfx:app-id:#server-to-user-u");
    bp.dir->info(bp.dir_impl, 0, "c1", 2, &info);
    assert_int_equal(info.subscription_count, 2);
    bp.dir->info(bp.dir_impl, 0, "#server-to-user-u", 17, &info);
    assert_int_equal(info.subscription_count, 0);
    bp.dir->leave(bp.dir_impl, 0, "c1", 2, NULL, &last, &seq);
    assert_int_equal(take_all(c, k, names, 8), 0);
    bp.dir->leave(bp.dir_impl, 0, "c1", 2, NULL, &last, &seq);
    bp.dir->leave(bp.dir_impl, 0, "#server-to-user-u", 17, NULL, &last,
                  &seq);
    assert_int_equal(take_all(c, k, names, 8), 2);
    assert_int_equal(k[0], HUB_COP_UNSUB);
    assert_string_equal(names[0], "pfx:app-id:c1");
    assert_string_equal(names[1], "pfx:app-id:#server-to-user-u");
    /* A leave of a channel never joined changes nothing. */
    bp.dir->leave(bp.dir_impl, 0, "zz", 2, NULL, &last, &seq);
    assert_int_equal(take_all(c, k, names, 8), 0);
    bp.dir->leave(bp.dir_impl, 0, "c2", 2, NULL, &last, &seq);
    hub_cluster_destroy(c); /* frees the queued UNSUB of c2 */
}

static size_t envelope(unsigned char *buf, size_t cap, const char *origin,
                       uint64_t epoch, uint64_t seq, const char *app)
{
    struct hub_cluster_envelope e = sample();

    e.origin = origin;
    e.origin_len = strlen(origin);
    e.epoch = epoch;
    e.seq = seq;
    e.app = app;
    e.app_len = strlen(app);
    return hub_cluster_envelope_encode(&e, buf, cap);
}

static void test_cluster_receive_rules(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane_stats *st = hub_cluster_stats(c);
    struct hub_cluster_rx rx = { 0 };
    unsigned char buf[512];
    size_t n;

    (void)state;
    n = envelope(buf, sizeof(buf), "n1", 1, 1, "app-id");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 1);
    assert_int_equal(st->own_ignored, 1);
    n = envelope(buf, sizeof(buf), "n2", 7, 5, "app-id");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    n = envelope(buf, sizeof(buf), "n2", 7, 6, "app-id");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    assert_int_equal(st->gaps, 0);
    /* 7 and 8 missing. */
    n = envelope(buf, sizeof(buf), "n2", 7, 9, "app-id");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    assert_int_equal(st->gaps, 2);
    /* A restarted origin (new epoch) starts over without a gap. */
    n = envelope(buf, sizeof(buf), "n2", 8, 1, "app-id");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    assert_int_equal(st->gaps, 2);
    /* A second origin is tracked apart. */
    n = envelope(buf, sizeof(buf), "n3", 1, 100, "app-id");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    assert_int_equal(rx.n, 2);
    assert_int_equal(st->received, 5);
    /* An unknown app, garbage. */
    n = envelope(buf, sizeof(buf), "n2", 8, 2, "other");
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), -EINVAL);
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, "junk", 4), -EINVAL);
    assert_int_equal(st->bad, 2);
    /* Not subscribed (rx NULL): received, not tracked. */
    n = envelope(buf, sizeof(buf), "n2", 8, 50, "app-id");
    assert_int_equal(hub_cluster_receive(c, NULL, NULL, 0, buf, n), 0);
    assert_int_equal(st->gaps, 2);
    hub_cluster_rx_fini(&rx);
    hub_cluster_destroy(c);
}

/* A script's event (kind 5) is delivered whoever ran the script, this
 * node included; unnumbered (an older node's script) it is not tracked. */
static void test_cluster_receive_script_kind(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane_stats *st = hub_cluster_stats(c);
    struct hub_cluster_rx rx = { 0 };
    struct hub_cluster_envelope e = sample();
    unsigned char buf[512];
    size_t n;

    (void)state;
    e.kind = HUB_CLUSTER_ENV_SCRIPT;
    e.origin = "n1";
    e.origin_len = 2;
    e.epoch = e.seq = 0;
    e.app = "app-id";
    e.app_len = 6;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
    assert_int_equal(st->own_ignored, 0);
    assert_int_equal(st->received, 2);
    assert_int_equal(st->gaps, 0);
    assert_int_equal(rx.n, 0);
    hub_cluster_rx_fini(&rx);
    hub_cluster_destroy(c);
}

/* Numbered by Redis per watcher, whichever node's script sent them: one
 * sequence over all origins, its holes counted, a new epoch (the count
 * expired and started over) a fresh start. */
static void test_cluster_receive_script_numbered(void **state)
{
    static const struct {
        const char *origin;
        uint64_t epoch, seq, gaps;
    } steps[] = {
        { "n1", 9, 5, 0 }, /* the first one seen: where it starts */
        { "n2", 9, 6, 0 }, /* another node's script, the same sequence */
        { "n3", 9, 9, 2 }, /* 7 and 8 lost */
        { "n2", 9, 8, 2 }, /* late or repeated: nothing counted */
        { "n1", 4, 1, 2 }, /* a new epoch starts over */
        { "n1", 4, 3, 3 },
        { "n2", 0, 0, 3 }, /* unnumbered: not tracked */
    };
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane_stats *st = hub_cluster_stats(c);
    struct hub_cluster_rx rx = { 0 };
    struct hub_cluster_envelope e = sample();
    unsigned char buf[512];

    (void)state;
    e.kind = HUB_CLUSTER_ENV_SCRIPT;
    e.app = "app-id";
    e.app_len = 6;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        size_t n;

        e.origin = steps[i].origin;
        e.origin_len = strlen(e.origin);
        e.epoch = steps[i].epoch;
        e.seq = steps[i].seq;
        n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
        assert_int_equal(hub_cluster_receive(c, &rx, NULL, 0, buf, n), 0);
        assert_int_equal(st->gaps, steps[i].gaps);
    }
    assert_int_equal(rx.n, 1);
    assert_int_equal(st->received, 7);
    assert_int_equal(st->own_ignored, 0);
    hub_cluster_rx_fini(&rx);
    hub_cluster_destroy(c);
}

/* Online changes: none while down (the caller tells its own watchers);
 * while up an ONLINE op on the user's channel with its own copies. */
static void test_cluster_online_ops(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane bp;
    static const char *const ids[] = { "a", "b" };
    struct hub_online_change ch = {
        .app = 0, .user = "u1", .signin = true, .first = true,
        .replace = true, .ids = ids, .n = 2, .max_watchers = 9,
    };
    struct hub_cluster_op *op;

    (void)state;
    hub_cluster_backplane(c, &bp);
    assert_false(bp.dir->online(bp.dir_impl, &ch));
    assert_null(hub_cluster_take(c));
    hub_cluster_dir_set_up(c, true);
    assert_true(bp.dir->online(bp.dir_impl, &ch));
    ch.signin = ch.first = ch.replace = false;
    ch.ids = NULL;
    ch.n = 0;
    assert_true(bp.dir->online(bp.dir_impl, &ch));
    op = hub_cluster_take(c);
    assert_non_null(op);
    assert_int_equal(op->kind, HUB_COP_ONLINE);
    assert_string_equal(op->rchan, "pfx:app-id:#server-to-user-u1");
    assert_true(op->oop->signin && op->oop->first && op->oop->replace);
    assert_int_equal(op->oop->n, 2);
    assert_string_equal(op->oop->ids[1], "b");
    assert_int_equal(op->oop->max_watchers, 9);
    assert_string_equal(op->oop->app_id, "app-id");
    assert_false(hub_cluster_online_stale(c, op->oop));
    assert_non_null(op->next);
    assert_false(op->next->oop->signin);
    assert_null(op->next->next);
    hub_cluster_op_free(op->next);
    hub_cluster_op_free(op);
    /* A resync: a signin with full, neither first nor replace. */
    op = hub_cluster_online_state_op(c, 0, "u2");
    assert_non_null(op);
    assert_true(op->oop->signin && op->oop->full);
    assert_false(op->oop->first || op->oop->replace);
    hub_cluster_op_free(op);
    /* An app index the cluster does not know: not taken. */
    ch.app = 7;
    assert_false(bp.dir->online(bp.dir_impl, &ch));
    hub_cluster_destroy(c);
}

static void test_cluster_encode_carries_the_frame(void **state)
{
    struct hub_cluster *c = cluster("node-a");
    struct hub_cluster_op *op;
    struct hub_cluster_envelope d;
    struct hub_backplane bp;
    unsigned char *env;
    size_t len = 0;

    (void)state;
    hub_cluster_backplane(c, &bp);
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "c1", 2, NULL), 0);
    op = hub_cluster_take(c);
    assert_non_null(op);
    assert_null(op->next);
    op->kind = HUB_COP_EVENT; /* reuse the SUB's channel name */
    op->f = hub_frame_create_text(payload, sizeof(payload) - 1);
    op->skip = (struct hub_skip){ .set = true, .hi = 5, .lo = 6 };
    env = hub_cluster_encode(c, op, 3, 4, &len);
    assert_non_null(env);
    assert_int_equal(hub_cluster_envelope_decode(&d, env, len), 0);
    assert_memory_equal(d.origin, "node-a", 6);
    assert_int_equal(d.seq, 4);
    assert_memory_equal(d.channel, "c1", 2);
    assert_int_equal(d.data_len, sizeof(payload) - 1);
    assert_memory_equal(d.data, payload, d.data_len);
    assert_true(d.excl_set && d.excl_hi == 5 && d.excl_lo == 6);
    free(env);
    hub_cluster_op_free(op);
    hub_cluster_destroy(c);
}

/* A hub of two loops on the cluster backplane, no network: what the loops
 * hand the backplane thread, and what it hands back. */

static size_t count_kind(struct hub_cluster_op **ops, size_t n,
                         enum hub_cluster_op_kind k)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += ops[i]->kind == k;
    return c;
}

static size_t take_ops(struct hub_cluster *c, struct hub_cluster_op **out,
                       size_t cap)
{
    size_t n = 0;

    for (struct hub_cluster_op *op = hub_cluster_take(c); op; op = op->next)
        if (n < cap)
            out[n++] = op;
    return n;
}

static void free_ops(struct hub_cluster_op **ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hub_cluster_op_free(ops[i]);
}

static void test_cluster_hub_publish_and_receive(void **state)
{
    struct fake_hub fh;
    struct fake_session a, b, d;
    struct hub_cluster_cfg cfg;
    struct hub_cluster *c;
    struct hub_backplane bp;
    struct hub_backplane_stats *st;
    struct hub_cluster_op *ops[16];
    struct hub_frame *f;
    struct hub_skip ex = { 0 };
    struct hub_cluster_envelope e;
    unsigned char buf[512];
    size_t n;

    (void)state;
    fake_hub_init(&fh, 2);
    fh.cfg.node_tag = 0x1234;
    cfg = (struct hub_cluster_cfg){ .node_id = "n1", .prefix = "lubdub",
                                    .apps = fh.apps, .n_apps = 2,
                                    .max_queue = 3 };
    c = hub_cluster_create(&cfg);
    assert_non_null(c);
    st = hub_cluster_stats(c);
    hub_cluster_backplane(c, &bp);
    fh.hub = hub_create_with(&fh.cfg, &fh.clock, &bp);
    assert_non_null(fh.hub);
    hub_cluster_set_hub(c, fh.hub);
    assert_int_equal(fake_hub_loops_start(&fh), 0);
    fake_session_open(&fh, &a, 0, &fh.apps[0]);
    fake_session_open(&fh, &b, 1, &fh.apps[0]);
    /* The node's tag is in every socket id, which stays \d+\.\d+. */
    assert_int_equal(a.s.sid_hi & 0xffff, 0x1234);
    assert_true(a.s.sid_hi != b.s.sid_hi);

    fake_subscribe(&fh, &a.s, "private-c", NULL);
    fake_subscribe(&fh, &b.s, "private-c", NULL);
    n = take_ops(c, ops, 16);
    assert_int_equal(n, 1); /* one SUB for two local subscribers */
    assert_int_equal(ops[0]->kind, HUB_COP_SUB);
    assert_string_equal(ops[0]->rchan, "lubdub:app-id:private-c");
    free_ops(ops, n);
    fake_flush(&a.s);
    fake_flush(&b.s);

    /* A publish: b gets it through its loop at once, the backplane gets
     * the same frame once. */
    f = hub_frame_create_text("{\"event\":\"ev\"}", 14);
    ex.set = true;
    ex.hi = a.s.sid_hi;
    ex.lo = a.s.sid_lo;
    assert_int_equal(hub_publish(fh.hub, fh.loops[1], 0, "private-c", 9, f,
                                 &ex), 0);
    assert_int_equal(b.s.q.count, 1);
    n = take_ops(c, ops, 16);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_EVENT);
    assert_ptr_equal(ops[0]->f, f);
    assert_true(ops[0]->skip.set && ops[0]->skip.hi == a.s.sid_hi);
    free_ops(ops, n);
    /* A member event stays on this node. */
    ex = (struct hub_skip){ .member_seq = 7 };
    hub_publish(fh.hub, fh.loops[1], 0, "private-c", 9, f, &ex);
    assert_null(hub_cluster_take(c));
    /* A full hand-off queue counts the rest lost. */
    for (int i = 0; i < 5; i++)
        hub_publish(fh.hub, fh.loops[1], 0, "private-c", 9, f, NULL);
    assert_int_equal(st->lost, 2);
    n = take_ops(c, ops, 16);
    assert_int_equal(n, 3);
    free_ops(ops, n);
    hub_frame_unref(f);
    fake_hub_drain(&fh);
    fake_flush(&a.s);
    fake_flush(&b.s);

    /* Signin subscribes the node to the user's channel; terminate goes to
     * the backplane too. */
    fake_signin(&fh, &a.s, "{\"id\":\"u9\"}");
    n = take_ops(c, ops, 16);
    assert_int_equal(count_kind(ops, n, HUB_COP_SUB), 1);
    assert_string_equal(ops[0]->rchan, "lubdub:app-id:#server-to-user-u9");
    free_ops(ops, n);
    assert_int_equal(hub_terminate_user(fh.hub, fh.loops[1], 0, "u9"), 0);
    n = take_ops(c, ops, 16);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_TERMINATE);
    free_ops(ops, n);
    fake_hub_drain(&fh);

    /* From another node: delivered on both loops, b excluded by id. */
    fake_session_open(&fh, &d, 0, &fh.apps[0]);
    fake_subscribe(&fh, &d.s, "private-c", NULL);
    assert_null(hub_cluster_take(c)); /* the node already listens */
    fake_flush(&d.s);
    fake_flush(&b.s);
    e = sample();
    e.origin = "n2";
    e.app = "app-id";
    e.channel = "private-c";
    e.channel_len = 9;
    e.excl_hi = b.s.sid_hi;
    e.excl_lo = b.s.sid_lo;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    /* Not the broker channel it names: refused. */
    assert_int_equal(hub_cluster_receive(c, NULL, "lubdub:app-id:other", 19,
                                         buf, n), -EINVAL);
    assert_int_equal(hub_cluster_receive(c, NULL, "x:app-id:private-c", 18,
                                         buf, n), -EINVAL);
    assert_int_equal(st->bad, 2);
    assert_int_equal(hub_cluster_receive(c, NULL, "lubdub:app-id:private-c",
                                         23, buf, n), 0);
    fake_hub_drain(&fh);
    assert_int_equal(b.s.q.count, 0);
    assert_int_equal(d.s.q.count, 1);
    assert_non_null(strstr(fake_frame_text(&d.s, 0), "\"event\":\"ev\""));
    assert_int_equal(st->received, 1);
    fake_flush(&d.s);
    /* After close, nothing more reaches the loops. */
    hub_cluster_close(c);
    assert_int_equal(hub_cluster_receive(c, NULL, NULL, 0, buf, n), 0);
    fake_hub_drain(&fh);
    assert_int_equal(d.s.q.count, 0);

    hub_session_fini(&d.s, HUB_CLOSE_APP);
    hub_session_fini(&a.s, HUB_CLOSE_APP);
    hub_session_fini(&b.s, HUB_CLOSE_APP);
    fake_hub_stop(&fh); /* frees the cluster with its queued UNSUBs */
}

/* A cache channel across nodes: one CACHE op per HTTP API event, its
 * envelope, what a replica keeps from the bus and from Redis. */
static void test_cluster_cache(void **state)
{
    struct fake_hub fh;
    struct fake_session d;
    struct hub_cluster_cfg cfg;
    struct hub_cluster *c;
    struct hub_backplane bp;
    struct hub_backplane_stats *st;
    struct hub_cluster_op *ops[8];
    struct hub_frame *f, *got;
    struct hub_cluster_envelope e;
    unsigned char *env, buf[512];
    size_t n, len = 0, clen;
    uint64_t left = 0;

    (void)state;
    fake_hub_init(&fh, 2);
    fh.cfg.cache_ttl_ms = 10000;
    cfg = (struct hub_cluster_cfg){ .node_id = "n1", .prefix = "lubdub",
                                    .apps = fh.apps, .n_apps = 2 };
    c = hub_cluster_create(&cfg);
    assert_non_null(c);
    st = hub_cluster_stats(c);
    assert_string_equal(hub_cluster_cache_channel(c, &clen), "lubdub:cache");
    assert_int_equal(clen, 12);
    assert_string_equal(hub_cluster_cache_pattern(c), "lubdub:cache:*");
    hub_cluster_backplane(c, &bp);
    fh.hub = hub_create_with(&fh.cfg, &fh.clock, &bp);
    assert_non_null(fh.hub);
    hub_cluster_set_hub(c, fh.hub);
    assert_int_equal(fake_hub_loops_start(&fh), 0);

    /* An HTTP API event on a cache channel: one CACHE op, nothing on the
     * channel's own broker channel. */
    f = hub_frame_create_text("{\"event\":\"ev\",\"data\":\"1\"}", 26);
    assert_int_equal(hub_publish_cache(fh.hub, fh.loops[0], 0, "cache-x", 7,
                                       f, NULL), 0);
    n = take_ops(c, ops, 8);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_CACHE);
    assert_string_equal(ops[0]->rchan, "lubdub:cache:app-id:cache-x");
    assert_int_equal(ops[0]->bus_len, 12);
    assert_string_equal(ops[0]->rchan + ops[0]->name_off, "cache-x");
    fake_hub_advance(&fh, 1000);
    assert_int_equal(hub_cluster_op_ttl(c, ops[0]), 9000);
    env = hub_cluster_encode(c, ops[0], 1, 1, &len);
    assert_non_null(env);
    assert_int_equal(hub_cluster_envelope_decode(&e, env, len), 0);
    assert_int_equal(e.kind, HUB_CLUSTER_ENV_CACHE);
    assert_int_equal(e.ttl_ms, 9000);
    assert_int_equal(e.data_len, 26);
    free(env);
    /* Expired in the queue: still news for remote subscribers (1 ms). */
    fake_hub_advance(&fh, 9000);
    assert_int_equal(hub_cluster_op_ttl(c, ops[0]), 0);
    env = hub_cluster_encode(c, ops[0], 1, 2, &len);
    assert_non_null(env);
    assert_int_equal(hub_cluster_envelope_decode(&e, env, len), 0);
    assert_int_equal(e.ttl_ms, 1);
    free(env);
    free_ops(ops, n);
    /* A plain channel through the same front is an ordinary EVENT. */
    hub_publish_cache(fh.hub, fh.loops[0], 0, "plain", 5, f, NULL);
    n = take_ops(c, ops, 8);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_EVENT);
    free_ops(ops, n);
    hub_frame_unref(f);
    fake_hub_drain(&fh);

    /* From another node, on the cache channel: delivered to this node's
     * subscriber, then kept with the envelope's ttl. */
    fake_session_open(&fh, &d, 1, &fh.apps[0]);
    fake_subscribe(&fh, &d.s, "cache-y", NULL);
    free_ops(ops, take_ops(c, ops, 8));
    fake_flush(&d.s);
    e = sample();
    e.kind = HUB_CLUSTER_ENV_CACHE;
    e.origin = "n2";
    e.app = "app-id";
    e.channel = "cache-y";
    e.channel_len = 7;
    e.excl_set = false;
    e.excl_hi = e.excl_lo = 0;
    e.ttl_ms = 500;
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_true(n > 0);
    /* Only on the cache channel. */
    assert_int_equal(hub_cluster_receive(c, NULL, "lubdub:app-id:cache-y", 21,
                                         buf, n), -EINVAL);
    assert_int_equal(st->bad, 1);
    assert_int_equal(hub_cluster_receive(c, NULL, "lubdub:cache", 12, buf, n),
                     0);
    assert_int_equal(st->cache_received, 1);
    fake_hub_drain(&fh);
    assert_int_equal(d.s.q.count, 1);
    got = hub_cache_get(hub_cache_of(fh.hub), 0, "cache-y", 7, fake_now_ms(&fh),
                        &left);
    assert_non_null(got);
    assert_int_equal(left, 500);
    assert_int_equal(got->payload_len, sizeof(payload) - 1);
    assert_memory_equal(hub_frame_payload(got), payload, got->payload_len);
    hub_frame_unref(got);
    /* This node's own: ignored. */
    e.origin = "n1";
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_int_equal(hub_cluster_receive(c, NULL, "lubdub:cache", 12, buf, n),
                     1);
    /* A cache envelope naming a channel that is not a cache channel. */
    e.origin = "n2";
    e.channel = "plain-y";
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    assert_int_equal(hub_cluster_receive(c, NULL, "lubdub:cache", 12, buf, n),
                     -EINVAL);
#define KEY "lubdub:cache:app-id:cache-y"
    assert_int_equal(hub_cluster_load(c, "lubdub:cache:app-id:plain-y", 27,
                                      buf, n, 100), -EINVAL);
    assert_int_equal(hub_cluster_load(c, KEY, sizeof(KEY) - 1, "junk", 4,
                                      100), -EINVAL);
    assert_int_equal(st->bad, 4);

    /* From Redis: kept unless the replica's entry lives longer. */
    e.channel = "cache-y";
    n = hub_cluster_envelope_encode(&e, buf, sizeof(buf));
    /* Under another key (another cluster's prefix, or moved): refused. */
    assert_int_equal(hub_cluster_load(c, "lubdub:cache:app-id:cache-z", 27,
                                      buf, n, 800), -EINVAL);
    assert_int_equal(hub_cluster_load(c, "lubdub:cache:x:cache:app-id:cache-y",
                                      35, buf, n, 800), -EINVAL);
    assert_int_equal(st->bad, 6);
    assert_int_equal(hub_cluster_load(c, KEY, sizeof(KEY) - 1, buf, n, 400),
                     0);
    assert_int_equal(st->cache_loaded, 0); /* the replica's is newer */
    assert_int_equal(hub_cluster_load(c, KEY, sizeof(KEY) - 1, buf, n, 800),
                     1);
    assert_int_equal(st->cache_loaded, 1);
    got = hub_cache_get(hub_cache_of(fh.hub), 0, "cache-y", 7, fake_now_ms(&fh),
                        &left);
    assert_non_null(got);
    assert_int_equal(left, 800);
    hub_frame_unref(got);
    /* A loaded entry expires on this node's clock. */
    fake_hub_advance(&fh, 801);
    assert_null(hub_cache_get(hub_cache_of(fh.hub), 0, "cache-y", 7,
                              fake_now_ms(&fh), NULL));
    assert_int_equal(d.s.q.count, 1); /* a load delivers nothing */

    hub_session_fini(&d.s, HUB_CLOSE_APP);
    fake_hub_stop(&fh);
}

/* The cluster-wide directory (docs/SCALING.md): ops, views, messages. */

static struct hub_cluster_op *take_list(struct hub_cluster *c,
                                        struct hub_cluster_op **ops,
                                        size_t cap, size_t *n)
{
    struct hub_cluster_op *op, *next;

    *n = 0;
    for (op = hub_cluster_take(c); op; op = next) {
        next = op->next;
        if (*n < cap)
            ops[(*n)++] = op;
        else
            hub_cluster_op_free(op);
    }
    return *n ? ops[0] : NULL;
}

static void no_done(struct hub_dir_join_req *req, int rc)
{
    (void)req;
    (void)rc;
    fail();
}

static void test_cluster_dir_ops_queue(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane bp;
    struct hub_cluster_op *ops[8];
    struct hub_presence_join j = { .user_id = "u1", .user_info = "{\"a\":1}" };
    struct hub_dir_join_req req = { .app = 0, .name = "presence-x", .len = 10,
                                    .j = &j, .done = no_done };
    struct hub_dir_join_req preq = { .app = 0, .name = "c1", .len = 2,
                                     .done = no_done };
    struct hub_dir_query q = { .kind = HUB_DIR_Q_INFO, .app = 0,
                               .name = "c1", .len = 2 };
    bool last = true;
    uint64_t seq = 1;
    size_t n;

    (void)state;
    hub_cluster_backplane(c, &bp);
    /* Down: answered at once from the local directory, no op for Redis. */
    assert_int_equal(bp.dir->join_async(bp.dir_impl, &preq), 0);
    take_list(c, ops, 8, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_SUB);
    hub_cluster_op_free(ops[0]);
    assert_int_equal(bp.dir->query_async(bp.dir_impl, &q), 0);
    assert_int_equal(q.info.subscription_count, 1);

    /* Up: a JOIN after the SUBs, for presence the member channel's SUB
     * after the channel's own and the JOIN waiting on it. */
    hub_cluster_dir_set_up(c, true);
    assert_int_equal(bp.dir->join_async(bp.dir_impl, &req), HUB_DIR_PENDING);
    assert_null(j.members_json); /* the answer comes later */
    take_list(c, ops, 8, &n);
    assert_int_equal(n, 3);
    assert_int_equal(ops[0]->kind, HUB_COP_SUB);
    assert_false(ops[0]->member);
    assert_string_equal(ops[0]->rchan, "pfx:app-id:presence-x");
    assert_int_equal(ops[1]->kind, HUB_COP_SUB);
    assert_true(ops[1]->member);
    assert_string_equal(ops[1]->rchan, "pfx:m:app-id:presence-x");
    assert_int_equal(ops[2]->kind, HUB_COP_JOIN);
    assert_string_equal(ops[2]->rchan, "pfx:m:app-id:presence-x");
    assert_non_null(ops[2]->dop);
    assert_true(ops[2]->dop->presence);
    assert_true(ops[2]->dop->local_first);
    assert_string_equal(ops[2]->dop->uid, "u1");
    assert_string_equal(ops[2]->dop->info, "{\"a\":1}");
    assert_ptr_equal(ops[2]->dop->req, &req);
    assert_false(hub_cluster_dir_stale(c, ops[2]->dop));
    /* A REJOIN snapshot sees the join: the queued op is stale. */
    assert_int_equal(hub_cluster_dir_snapshot(c, NULL, NULL, NULL), 1);
    assert_true(hub_cluster_dir_stale(c, ops[2]->dop));
    assert_int_equal(hub_cluster_stats(c)->dir_pending, 1);
    /* Answered with the list at cseq 4 (no loop: nothing posted). */
    {
        struct hub_cluster_dirop *dop = ops[2]->dop;
        const struct hub_cluster_member m[2] = {
            { "u1", "{\"a\":1}", 2, 7 }, { "r9", "", 2, 0 } };

        ops[2]->dop = NULL;
        hub_cluster_dir_joined(c, dop, 0, true, true, 4, m, 2);
    }
    assert_int_equal(hub_cluster_stats(c)->dir_pending, 0);
    assert_true(j.dir_events);
    assert_true(j.first);
    assert_non_null(j.members_json);
    assert_string_equal(j.members_json,
                        "{\"presence\":{\"ids\":[\"r9\",\"u1\"],\"hash\":"
                        "{\"r9\":{},\"u1\":{\"a\":1}},\"count\":2}}");
    free(j.members_json);
    for (size_t i = 0; i < n; i++)
        hub_cluster_op_free(ops[i]);

    /* Leave: a LEAVE op, and "not last" (the view delivers the event);
     * the last one also unsubscribes both channels, member first. */
    bp.dir->leave(bp.dir_impl, 0, "presence-x", 10, "u1", &last, &seq);
    assert_false(last);
    assert_int_equal(seq, 0);
    take_list(c, ops, 8, &n);
    assert_int_equal(n, 3);
    assert_int_equal(ops[0]->kind, HUB_COP_LEAVE);
    assert_true(ops[0]->dop->local_last);
    assert_int_equal(ops[1]->kind, HUB_COP_UNSUB);
    assert_true(ops[1]->member);
    assert_int_equal(ops[2]->kind, HUB_COP_UNSUB);
    assert_false(ops[2]->member);
    for (size_t i = 0; i < n; i++)
        hub_cluster_op_free(ops[i]);

    /* A read while up: a QUERY op. */
    q.info.subscription_count = 0;
    assert_int_equal(bp.dir->query_async(bp.dir_impl, &q), HUB_DIR_PENDING);
    take_list(c, ops, 8, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_QUERY);
    {
        struct hub_cluster_dirop *dop = ops[0]->dop;

        q.loop = NULL;
        ops[0]->dop = NULL;
        /* Redis went: the local answer. */
        hub_cluster_dir_local(c, dop);
    }
    assert_int_equal(q.info.subscription_count, 1);
    hub_cluster_op_free(ops[0]);
    hub_cluster_destroy(c);
}

/* The start-up race (docs/RELIABILITY.md, "Loaded runs": webhooks lost
 * at start-up): the directory goes up in the same step as the REJOIN
 * snapshot, so each join's edges are told once: before it by the local
 * engine (and the snapshot counts the join), after it by Redis (its op
 * has the snapshot's generation: not stale). server/redis/redis_dir.c used to
 * raise the flag first; a join between the two was told by neither (its
 * local edge withheld, its op stale). */
static unsigned local_edges;

static void count_edge(void *ctx, const struct hub_dir_edge *e)
{
    (void)ctx;
    if (e->kind == HUB_DIR_CHANNEL_FIRST)
        local_edges++;
}

static void count_chan(void *ctx, unsigned app, const char *name, size_t len,
                       uint32_t subs)
{
    (void)app;
    if (len == 2 && !memcmp(name, "c1", 2) && subs == 1)
        ++*(unsigned *)ctx;
}

static void test_cluster_dir_up_with_the_snapshot(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane bp;
    struct hub_cluster_op *ops[8], *join = NULL;
    unsigned counted = 0;
    size_t n;

    (void)state;
    local_edges = 0;
    hub_cluster_backplane(c, &bp);
    bp.dir->set_edge_hook(bp.dir_impl, count_edge, NULL);
    /* Connected, scripts loading, no snapshot yet: still down, so the
     * join's edge is told here and no JOIN goes to Redis. */
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "c1", 2, NULL), 0);
    assert_int_equal(local_edges, 1);
    take_list(c, ops, 8, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0]->kind, HUB_COP_SUB);
    hub_cluster_op_free(ops[0]);
    /* The snapshot counts c1 and raises the flag in the same step. */
    assert_false(hub_cluster_dir_is_up(c));
    assert_int_equal(hub_cluster_dir_snapshot(c, count_chan, NULL, &counted),
                     1);
    assert_int_equal(counted, 1);
    assert_true(hub_cluster_dir_is_up(c));
    /* After it: no local edge, a JOIN whose script decides the edge. */
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "c2", 2, NULL), 0);
    assert_int_equal(local_edges, 1);
    take_list(c, ops, 8, &n);
    for (size_t i = 0; i < n; i++)
        if (ops[i]->kind == HUB_COP_JOIN)
            join = ops[i];
    assert_non_null(join);
    assert_non_null(join->dop);
    assert_false(hub_cluster_dir_stale(c, join->dop));
    for (size_t i = 0; i < n; i++)
        hub_cluster_op_free(ops[i]);
    hub_cluster_destroy(c);
}

/* Shutdown with answers outstanding: every caller gets -ECANCELED at
 * destroy, once (hub/loop/backplane.h, join_async), whether its op was still
 * queued, answered after the cluster closed, or cancelled by the
 * backplane thread (a join parked on its SUBSCRIBE). */
static int cancel_calls, cancel_rc_ok;

static void cancel_join_done(struct hub_dir_join_req *req, int rc)
{
    cancel_calls++;
    if (rc == -ECANCELED)
        cancel_rc_ok++;
    if (req->j) {
        free(req->j->members_json); /* as subscribe.c's pending_free */
        req->j->members_json = NULL;
    }
}

static void cancel_query_done(struct hub_dir_query *q, int rc)
{
    cancel_calls++;
    if (rc == -ECANCELED && !q->json)
        cancel_rc_ok++;
}

static void test_cluster_dir_cancel_at_destroy(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane bp;
    struct hub_cluster_op *ops[8];
    char not_a_loop; /* never reached: the cluster is closed first */
    struct hub_loop *l = (struct hub_loop *)(void *)&not_a_loop;
    struct hub_presence_join j = { .user_id = "u1", .user_info = "{}" };
    struct hub_dir_join_req queued = { .app = 0, .name = "c1", .len = 2,
                                       .loop = l, .done = cancel_join_done };
    struct hub_dir_join_req late = { .app = 0, .name = "presence-y",
                                     .len = 10, .j = &j, .loop = l,
                                     .done = cancel_join_done };
    struct hub_dir_query q = { .kind = HUB_DIR_Q_LIST, .app = 0, .loop = l,
                               .done = cancel_query_done };
    struct hub_cluster_dirop *jd = NULL, *qd = NULL;
    size_t n;

    (void)state;
    cancel_calls = cancel_rc_ok = 0;
    hub_cluster_backplane(c, &bp);
    hub_cluster_dir_set_up(c, true);
    assert_int_equal(bp.dir->join_async(bp.dir_impl, &late), HUB_DIR_PENDING);
    assert_int_equal(bp.dir->query_async(bp.dir_impl, &q), HUB_DIR_PENDING);
    take_list(c, ops, 8, &n);
    for (size_t i = 0; i < n; i++) {
        if (ops[i]->kind == HUB_COP_JOIN)
            jd = ops[i]->dop;
        if (ops[i]->kind == HUB_COP_QUERY)
            qd = ops[i]->dop;
        ops[i]->dop = ops[i]->kind == HUB_COP_JOIN ||
                              ops[i]->kind == HUB_COP_QUERY
                          ? NULL
                          : ops[i]->dop;
        hub_cluster_op_free(ops[i]);
    }
    assert_non_null(jd);
    assert_non_null(qd);
    /* Queued, never taken by the backplane thread. */
    assert_int_equal(bp.dir->join_async(bp.dir_impl, &queued),
                     HUB_DIR_PENDING);
    assert_int_equal(hub_cluster_stats(c)->dir_pending, 3);
    /* The loops stop: the cluster is closed; Redis fails the join after
     * that (answered locally, but no loop takes the answer), and the read
     * is cancelled as srv_redis_dir_free() cancels a parked op. */
    hub_cluster_close(c);
    hub_cluster_dir_local(c, jd);
    hub_cluster_dir_cancel(c, qd);
    assert_int_equal(cancel_calls, 0); /* nothing runs before destroy */
    hub_cluster_destroy(c);
    assert_int_equal(cancel_calls, 3);
    assert_int_equal(cancel_rc_ok, 3);
    assert_null(j.members_json);
}

static char *vjson(struct hub_cluster *c, const char *ch, uint64_t *applied)
{
    return hub_cluster_view_json(c, 0, ch, strlen(ch), applied);
}

static int msg(struct hub_cluster *c, const char *ch, const char *text)
{
    char rchan[128];

    snprintf(rchan, sizeof(rchan), "pfx:m:app-id:%s", ch);
    return hub_cluster_member_msg(c, rchan, strlen(rchan), text,
                                  strlen(text));
}

#define IDS(s) "{\"presence\":{\"ids\":[" s

static void assert_view(struct hub_cluster *c, const char *ch,
                        const char *ids_prefix, uint64_t want_applied)
{
    uint64_t applied = 0;
    char *j = vjson(c, ch, &applied);

    assert_non_null(j);
    if (strncmp(j, ids_prefix, strlen(ids_prefix)) != 0)
        fail_msg("view %s, want %s...", j, ids_prefix);
    assert_int_equal(applied, want_applied);
    free(j);
}

static void test_cluster_views(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane_stats *st = hub_cluster_stats(c);
    const struct hub_cluster_member l1[3] = {
        { "b", "{}", 1, 2 }, { "a", "", 1, 0 }, { "b", "{}", 1, 2 } };
    const struct hub_cluster_member l2[2] = {
        { "c", "", 1, 0 }, { "a", "", 1, 0 } };
    const struct hub_cluster_member l3[1] = { { "x", "", 1, 0 } };

    (void)state;
    /* Before the first list, events wait; the list at cseq 2 then the
     * waiting event 3 (event 2 is in the list already). */
    assert_int_equal(msg(c, "presence-v", "2\n+1\nb{}"), 0);
    assert_int_equal(msg(c, "presence-v", "3\n+1\nd"), 0);
    hub_cluster_view_refresh(c, 0, "presence-v", 10, 2, l1, 3);
    assert_view(c, "presence-v", IDS("\"a\",\"b\",\"d\"]"), 3);
    /* Old events are ignored, a hole is counted. */
    assert_int_equal(msg(c, "presence-v", "3\n-1\nd"), 0);
    assert_view(c, "presence-v", IDS("\"a\",\"b\",\"d\"]"), 3);
    assert_int_equal(msg(c, "presence-v", "6\n-1\nd"), 0);
    assert_int_equal(st->member_gaps, 2);
    assert_view(c, "presence-v", IDS("\"a\",\"b\"]"), 6);
    /* A removal of someone absent and a second add change nothing. */
    assert_int_equal(msg(c, "presence-v", "7\n-2\nzz"), 0);
    assert_int_equal(msg(c, "presence-v", "8\n+1\na"), 0);
    assert_view(c, "presence-v", IDS("\"a\",\"b\"]"), 8);
    /* An older list is ignored; a newer one replaces the view. */
    hub_cluster_view_refresh(c, 0, "presence-v", 10, 5, l2, 2);
    assert_view(c, "presence-v", IDS("\"a\",\"b\"]"), 8);
    hub_cluster_view_refresh(c, 0, "presence-v", 10, 9, l2, 2);
    assert_view(c, "presence-v", IDS("\"a\",\"c\"]"), 9);
    /* After a reconnect (Redis may have restarted): the next list is
     * taken whatever its cseq; events wait for it. */
    hub_cluster_views_stale(c);
    assert_int_equal(msg(c, "presence-v", "2\n+1\nq"), 0);
    assert_view(c, "presence-v", IDS("\"a\",\"c\"]"), 9);
    hub_cluster_view_refresh(c, 0, "presence-v", 10, 1, l3, 1);
    assert_view(c, "presence-v", IDS("\"q\",\"x\"]"), 2);
    /* The member channel unsubscribed: the view goes. */
    hub_cluster_view_drop(c, 0, "presence-v", 10);
    assert_null(vjson(c, "presence-v", NULL));
    assert_int_equal(st->bad, 0);
    hub_cluster_destroy(c);
}

/* A presence channel joined while Redis was down has no view; a REJOIN
 * seeds one from the local directory (what its subscribers were told) so
 * that the refresh reaches it, and the view outlives the UNSUB of the
 * channel's previous life. */
static void test_cluster_views_seeded_after_down(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane bp;
    struct hub_cluster_op *ops[8];
    struct hub_presence_join j = { .user_id = "u1", .user_info = "{}" };
    const struct hub_cluster_member l1[2] = {
        { "u1", "{}", 2, 2 }, { "r2", "", 2, 0 } };
    size_t n;

    (void)state;
    hub_cluster_backplane(c, &bp);
    assert_int_equal(bp.dir->join(bp.dir_impl, 0, "presence-d", 10, &j), 0);
    assert_true(j.first);
    assert_false(j.dir_events);
    free(j.members_json);
    take_list(c, ops, 8, &n);
    for (size_t i = 0; i < n; i++)
        hub_cluster_op_free(ops[i]);
    assert_null(vjson(c, "presence-d", NULL));
    /* Up: REJOIN seeds it, then every view goes stale for its list. */
    hub_cluster_views_seed(c);
    hub_cluster_views_stale(c);
    assert_view(c, "presence-d", IDS("\"u1\"]"), 0);
    /* A member event waits for the list; the list brings the remote
     * member and the event after it. */
    assert_int_equal(msg(c, "presence-d", "5\n+2\nr3"), 0);
    assert_view(c, "presence-d", IDS("\"u1\"]"), 0);
    hub_cluster_view_refresh(c, 0, "presence-d", 10, 4, l1, 2);
    assert_view(c, "presence-d", IDS("\"r2\",\"r3\",\"u1\"]"), 5);
    /* The channel still has a local subscriber: a late UNSUB of an
     * earlier life leaves the view alone. */
    hub_cluster_view_drop(c, 0, "presence-d", 10);
    {
        char *t = vjson(c, "presence-d", NULL);

        assert_non_null(t);
        free(t);
    }
    hub_cluster_destroy(c);
}

static void test_cluster_member_msg_hostile(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane_stats *st = hub_cluster_stats(c);
    static const char *const bad[] = {
        "", "\n+1\nu", "0\n+1\nu", "1\n*1\nu", "1\n+0\n", "1\n+2\nu",
        "1\n-1\nuextra", "1\n+1\nu{bad", "1+1\nu", "x1\n+1\nu",
        "99999999999999999999999\n+1\nu", "1\n+1\nu\"unterminated",
        "1\n\n", "1", "1\n+\nu\n", "1\n-\nu\n", "1\n+1u",
        "1\n+99999999999999999999999\nu", "1\n+18446744073709551615\nu",
        "1\n-1\nu\n",
    };
    static const char *const bad_chan[] = {
        "pfx:x:app-id:c", "pfx:m:unknown:c", "pfx:m:app-id:", "pfx:m:",
        "other:m:app-id:c", "pfx:m::c", "pfx",
    };
    unsigned char buf[64];
    uint64_t bads;
    uint32_t x = 12345;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (msg(c, "presence-h", bad[i]) != -EINVAL)
            fail_msg("accepted %s", bad[i]);
    assert_int_equal(st->bad, sizeof(bad) / sizeof(bad[0]));
    /* A NUL inside the uid. */
    assert_int_equal(hub_cluster_member_msg(c, "pfx:m:app-id:c", 14,
                                            "1\n+3\nu\0v", 8), -EINVAL);
    for (size_t i = 0; i < sizeof(bad_chan) / sizeof(bad_chan[0]); i++)
        assert_int_equal(hub_cluster_member_msg(c, bad_chan[i],
                                                strlen(bad_chan[i]),
                                                "1\n+1\nu", 6), -EINVAL);
    assert_int_equal(hub_cluster_member_msg(c, NULL, 0, "1\n+1\nu", 6),
                     -EINVAL);
    bads = st->bad;
    /* Random bytes: refused or applied, never read out of bounds (ASan). */
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(i % (int)sizeof(buf));

        for (size_t k = 0; k < n; k++) {
            x = x * 1103515245u + 12345u;
            buf[k] = (unsigned char)(i & 1 ? (uint32_t)(unsigned char)"0123\n+-u{}\""[(x >> 16) % 11]
                                           : (x >> 16));
        }
        (void)hub_cluster_member_msg(c, "pfx:m:app-id:presence-r", 23,
                                     (const char *)buf, n);
    }
    assert_true(st->bad > bads);
    /* A good one still works. */
    assert_int_equal(msg(c, "presence-h", "1\n+1\nu{\"n\":1}"), 0);
    hub_cluster_destroy(c);
}

/* A uid is counted, not delimited: a '\n', 0x1f, ':' or a '+' line inside
 * it stays in it, and a uid that is a prefix of another is another
 * member. (docs/SCALING.md: peer strings never break an encoding.) */
static void test_cluster_member_msg_odd_uids(void **state)
{
    struct hub_cluster *c = cluster("n1");
    struct hub_backplane_stats *st = hub_cluster_stats(c);
    const struct hub_cluster_member l0[1] = { { "a", "", 1, 0 } };
    static const char m1[] = "1\n+8\na\n2\n+1\nb{\"x\":1}";
    static const char m2[] = "2\n+4\na\x1f:b";
    static const char m3[] = "3\n-8\na\n2\n+1\nb";
    char *j;

    (void)state;
    hub_cluster_view_refresh(c, 0, "presence-o", 10, 0, l0, 1);
    /* uid "a\n2\n+1\nb" (what the old format would have split into a
     * second event for "b"), info {"x":1}. */
    assert_int_equal(hub_cluster_member_msg(c, "pfx:m:app-id:presence-o", 23,
                                            m1, sizeof(m1) - 1), 0);
    assert_int_equal(hub_cluster_member_msg(c, "pfx:m:app-id:presence-o", 23,
                                            m2, sizeof(m2) - 1), 0);
    j = vjson(c, "presence-o", NULL);
    assert_non_null(j);
    assert_string_equal(j, "{\"presence\":{\"ids\":[\"a\",\"a\\n2\\n+1\\nb\","
                           "\"a\\u001F:b\"],\"hash\":{\"a\":{},"
                           "\"a\\n2\\n+1\\nb\":{\"x\":1},\"a\\u001F:b\":{}},"
                           "\"count\":3}}");
    free(j);
    assert_int_equal(hub_cluster_member_msg(c, "pfx:m:app-id:presence-o", 23,
                                            m3, sizeof(m3) - 1), 0);
    assert_view(c, "presence-o", IDS("\"a\",\"a\\u001F:b\"]"), 3);
    assert_int_equal(st->bad, 0);
    hub_cluster_destroy(c);
}

/* The id registry the lease's reaper names apps from: the apps at start,
 * then every app a reload adds (by index, gaps allowed); a removed app's
 * id stays. */
static void test_cluster_app_registry(void **state)
{
    struct hub_cluster *c = cluster("n1");

    (void)state;
    assert_int_equal(hub_cluster_app_span(c), 1);
    assert_int_equal(hub_cluster_app_index(c, "app-id", 6), 0);
    assert_int_equal(hub_cluster_app_index(c, "app-idx", 6), 0); /* by len */
    assert_int_equal(hub_cluster_app_index(c, "app-i", 5), -1);
    assert_int_equal(hub_cluster_app_index(c, "added", 5), -1);
    assert_int_equal(hub_cluster_app_added(c, 3, "added"), 0);
    assert_int_equal(hub_cluster_app_span(c), 4);
    assert_int_equal(hub_cluster_app_index(c, "added", 5), 3);
    assert_null(hub_cluster_app_id(c, 1));
    assert_string_equal(hub_cluster_app_id(c, 3), "added");
    assert_int_equal(hub_cluster_app_index(c, "app-id", 6), 0);
    hub_cluster_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_envelope_history_id_round_trip),
        cmocka_unit_test(test_cluster_envelope_round_trip),
        cmocka_unit_test(test_cluster_envelope_refuses_out_of_bounds_input),
        cmocka_unit_test(test_cluster_envelope_hostile_bytes),
        cmocka_unit_test(test_cluster_envelope_cache_kind),
        cmocka_unit_test(test_cluster_envelope_count_kind),
        cmocka_unit_test(test_cluster_envelope_script_kind),
        cmocka_unit_test(test_cluster_subscribes_on_first_and_last),
        cmocka_unit_test(test_cluster_receive_rules),
        cmocka_unit_test(test_cluster_encode_carries_the_frame),
        cmocka_unit_test(test_cluster_hub_publish_and_receive),
        cmocka_unit_test(test_cluster_cache),
        cmocka_unit_test(test_cluster_dir_ops_queue),
        cmocka_unit_test(test_cluster_dir_up_with_the_snapshot),
        cmocka_unit_test(test_cluster_receive_script_kind),
        cmocka_unit_test(test_cluster_receive_script_numbered),
        cmocka_unit_test(test_cluster_online_ops),
        cmocka_unit_test(test_cluster_dir_cancel_at_destroy),
        cmocka_unit_test(test_cluster_views),
        cmocka_unit_test(test_cluster_views_seeded_after_down),
        cmocka_unit_test(test_cluster_member_msg_hostile),
        cmocka_unit_test(test_cluster_member_msg_odd_uids),
        cmocka_unit_test(test_cluster_app_registry),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
