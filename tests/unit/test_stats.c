/*
 * tests/unit/test_stats.c - the counter table (hub/loop/stats_table.h) against
 * what is made of it and what is written about it:
 *   - docs/OPERATIONS.md has one metrics row per generated /metrics name,
 *     with its type, and no row for a name the table lacks (as
 *     test_config_docs_match_options does for CONFIG.md);
 *   - srv_stats_json() on a fake srv of 2 loops holds every row's key in
 *     its group, with the field's value, and the totals in table order
 *     with the sums;
 *   - srv_metrics_text() declares every family with its type;
 *   - both return NULL or the whole answer under a failing allocator, and
 *     leak nothing.
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
#include <jansson.h>

#include "fail_alloc.h"
#include "hub/loop/stats_table.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook_metrics.h"

/* The table again, as the test sees it. */
enum fmt { U64, NS_MS, MS_S, BY_REASON, LATE, RATIO };
enum group { LOOP, HEARTBEAT, WHEEL };

struct trow {
    const char *field, *type, *key, *metric;
    enum fmt fmt;
    enum group group;
    unsigned total;
    size_t off;
};

#define OFF_U64(f) offsetof(struct hub_loop_stats, f)
#define OFF_NS_MS(f) offsetof(struct hub_loop_stats, f)
#define OFF_MS_S(f) offsetof(struct hub_loop_stats, f)
#define OFF_BY_REASON(f) offsetof(struct hub_loop_stats, f)
#define OFF_LATE(f) offsetof(struct hub_loop_stats, f)
#define OFF_RATIO(f) SIZE_MAX

static const struct trow trows[] = {
#define X(field, type, fmt, total, group, key, metric, help)                   \
    { #field, #type, key, metric, fmt, group, total, OFF_##fmt(field) },
    HUB_LOOP_STATS(X)
#undef X
};
#define N_TROWS (sizeof(trows) / sizeof(trows[0]))

/* Every /metrics family: name and type. */
struct family {
    const char *metric, *type;
    bool per_loop, by_reason;
};

static size_t families(struct family *out, size_t cap)
{
    size_t n = 0;

#define X(id, type, metric, help)                                              \
    if (n < cap)                                                               \
        out[n++] = (struct family){ metric, #type, false, false };
    HUB_HUB_METRICS(X)
#undef X
    for (size_t i = 0; i < N_TROWS; i++)
        if (trows[i].metric[0] && n < cap)
            out[n++] = (struct family){ trows[i].metric, trows[i].type, true,
                                        trows[i].fmt == BY_REASON };
#define X(field, metric, help)                                                 \
    if (n < cap)                                                               \
        out[n++] = (struct family){ metric, "histogram", true, false };
    HUB_LOOP_HISTS(X)
#undef X
    /* server/webhook/webhook_metrics.h: per app and endpoint, or one series
     * (EVENTS_DROPPED, STREAM), not per loop. */
#define X(metric, type, fmt, field, help)                                      \
    if (n < cap)                                                               \
        out[n++] = (struct family){ #metric, #type, false, false };
    SRV_WH_METRICS(X)
#undef X
#define X(field, type, key, metric, help)                                      \
    if (n < cap)                                                               \
        out[n++] = (struct family){ metric, #type, false, false };
    HUB_BACKPLANE_STATS(X)
#undef X
    if (n < cap)
        out[n++] = (struct family){ HUB_BACKPLANE_RTT_METRIC, "histogram",
                                    false, false };
    assert_true(n < cap);
    return n;
}

/* A srv with 2 loops whose every counter word holds a distinct value. */
struct fake {
    struct srv srv;
    struct hub hub;
    struct hub_loop hl[2];
    struct srv_loop sl[2];
    struct hub_app apps[2];
};

static void fake_free(struct fake *f)
{
    hub_apptab_free(atomic_load(&f->hub.apps), true);
    free(f);
}

static uint64_t word_value(unsigned loop, size_t word)
{
    return 1000003u * (loop + 1) + 17 * word;
}

static struct fake *fake_new(void)
{
    struct fake *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    for (unsigned i = 0; i < 2; i++) {
        uint64_t *w = (uint64_t *)(void *)&f->hl[i].stats;

        for (size_t k = 0; k < sizeof(f->hl[i].stats) / sizeof(*w); k++)
            w[k] = word_value(i, k);
        f->sl[i].hub = &f->hl[i];
        f->sl[i].id = i;
    }
    f->apps[0].id = "app-1";
    f->apps[1].id = "app-2";
    f->apps[1].index = 1;
    atomic_init(&f->hub.apps, hub_apptab_borrow(f->apps, 2));
    assert_non_null(atomic_load(&f->hub.apps));
    atomic_init(&atomic_load(&f->hub.apps)->live[0]->sessions, 3);
    atomic_init(&atomic_load(&f->hub.apps)->live[1]->sessions, 4);
    atomic_init(&f->hub.draining, false);
    f->hub.started_ms = srv_now_ms();
    f->srv.hub = &f->hub;
    f->srv.loops = f->sl;
    f->srv.n_loops = 2;
    f->srv.hcfg.tick_ms = 100;
    f->srv.hcfg.history_max_bytes = 1234567;
    f->srv.hcfg.apps = f->apps;
    f->srv.hcfg.n_apps = 2;
    return f;
}

static uint64_t field_value(unsigned loop, const struct trow *r, unsigned i)
{
    return word_value(loop, r->off / sizeof(uint64_t) + i);
}

static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    long len;
    char *buf;

    if (!fp)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    len = ftell(fp);
    assert_true(len >= 0);
    rewind(fp);
    buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
    buf[len] = '\0';
    fclose(fp);
    return buf;
}

static char *read_operations_md(void)
{
    const char *dir = getenv("LUBDUB_DOCS_DIR");
    char path[512];

    if (dir && *dir)
        snprintf(path, sizeof(path), "%s/OPERATIONS.md", dir);
    else
        snprintf(path, sizeof(path), "%s/docs/OPERATIONS.md",
                 LUBDUB_SOURCE_DIR);
    return read_text(path);
}

/* Cell k (0 = the first) of a "| a | b | c |" row, trimmed, into out. */
static void cell(const char *line, unsigned k, char *out, size_t cap)
{
    const char *p = line, *e;
    size_t n;

    for (unsigned i = 0; i <= k; i++) {
        p = strchr(p, '|');
        assert_non_null(p);
        p++;
    }
    e = strchr(p, '|');
    assert_non_null(e);
    while (p < e && *p == ' ')
        p++;
    while (e > p && e[-1] == ' ')
        e--;
    n = (size_t)(e - p) < cap - 1 ? (size_t)(e - p) : cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

/*
 * docs/OPERATIONS.md: each metrics row "| `lubdub_<name>` | <type> |
 * <labels> |" names a family the table makes, with its type; per-loop
 * families say `loop` in the labels (and `reason` for closes by reason),
 * hub-wide ones do not; every family has exactly one row.
 */
static void test_stats_docs_match_table(void **state)
{
    struct family fam[160];
    size_t n = families(fam, 160), rows = 0;
    unsigned seen[160] = { 0 };
    char *docs = read_operations_md(), *line, *save = NULL;

    (void)state;
    for (line = strtok_r(docs, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char name[128], type[32], labels[128];
        const struct family *f = NULL;
        size_t i;

        if (strncmp(line, "| `lubdub_", 10))
            continue;
        rows++;
        cell(line, 0, name, sizeof(name));
        cell(line, 1, type, sizeof(type));
        cell(line, 2, labels, sizeof(labels));
        assert_true(strlen(name) > 9 && name[strlen(name) - 1] == '`');
        name[strlen(name) - 1] = '\0';
        for (i = 0; i < n && !f; i++)
            if (!strcmp(fam[i].metric, name + 8))
                f = &fam[i];
        if (!f)
            fail_msg("docs/OPERATIONS.md: %s is not a metric of "
                     "hub/loop/stats_table.h",
                     name + 1);
        seen[f - fam]++;
        if (strcmp(type, f->type))
            fail_msg("docs/OPERATIONS.md: %s is a %s, the table says %s",
                     name + 1, type, f->type);
        if (f->per_loop != (strstr(labels, "`loop`") != NULL))
            fail_msg("docs/OPERATIONS.md: %s labels \"%s\": per loop is %s",
                     name + 1, labels, f->per_loop ? "yes" : "no");
        if (f->by_reason != (strstr(labels, "`reason`") != NULL))
            fail_msg("docs/OPERATIONS.md: %s labels \"%s\": by reason is %s",
                     name + 1, labels, f->by_reason ? "yes" : "no");
    }
    for (size_t i = 0; i < n; i++)
        if (seen[i] != 1)
            fail_msg("docs/OPERATIONS.md has %u rows for lubdub_%s (want 1)",
                     seen[i], fam[i].metric);
    assert_int_equal(rows, n);
    free(docs);
}

/* The table's own rules: what server/ops/stats.c can render. */
static void test_stats_table_is_well_formed(void **state)
{
    unsigned max_total = 0;
    struct family fam[160];
    size_t n = families(fam, 160);

    (void)state;
    for (size_t i = 0; i < N_TROWS; i++) {
        const struct trow *r = &trows[i];

        if (r->total > max_total)
            max_total = r->total;
        /* Only plain counters and the by-reason array are summed. */
        if (r->total)
            assert_true(r->fmt == U64 || r->fmt == BY_REASON);
        /* Nanoseconds and the ratio are /stats only. */
        if (r->fmt == NS_MS || r->fmt == RATIO)
            assert_string_equal(r->metric, "");
        /* Rows of one group stay together (one object each in /stats). */
        if (i && r->group != trows[i - 1].group)
            for (size_t k = 0; k < i; k++)
                assert_int_not_equal(trows[k].group, r->group);
        for (size_t k = 0; k < i; k++) {
            if (trows[k].group == r->group)
                assert_string_not_equal(trows[k].key, r->key);
            assert_string_not_equal(trows[k].field, r->field);
        }
        /* Prometheus: counters end in _total, others do not. */
        if (r->metric[0]) {
            size_t len = strlen(r->metric);
            bool total = len > 6 && !strcmp(r->metric + len - 6, "_total");

            assert_int_equal(total, !strcmp(r->type, "counter"));
        }
    }
    /* Totals positions are 1..max, each once. */
    for (unsigned pos = 1; pos <= max_total; pos++) {
        unsigned c = 0;

        for (size_t i = 0; i < N_TROWS; i++)
            c += trows[i].total == pos;
        assert_int_equal(c, 1);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(fam[i].metric, fam[k].metric);
}

static const char *const group_keys[] = { NULL, "heartbeat", "wheel" };

/* Recovery's history: hub-wide under "history" (the fake hub has no store:
 * all 0 but the bound, the configured one), per app in "apps". */
static void check_history_json(json_t *root)
{
    static const char *const keys[] = { "channels", "events", "bytes",
                                        "max_bytes", "evicted", "expired" };
    json_t *h = json_object_get(root, "history");

    assert_true(json_is_object(h));
    assert_int_equal(json_object_size(h), 6);
    for (unsigned i = 0; i < 6; i++) {
        json_t *v = json_object_get(h, keys[i]);

        if (!json_is_integer(v))
            fail_msg("/stats history.%s is not an integer", keys[i]);
        assert_int_equal(json_integer_value(v),
                         strcmp(keys[i], "max_bytes") ? 0 : 1234567);
    }
    for (unsigned a = 0; a < 2; a++) {
        json_t *app = json_object_get(json_object_get(root, "apps"),
                                      a ? "app-2" : "app-1");

        assert_true(json_is_integer(json_object_get(app, "history_events")));
        assert_true(json_is_integer(json_object_get(app, "history_bytes")));
    }
}

/* Every row's key in each loop's object with the field's value, and the
 * totals in table order with the sums over both loops. */
static void check_stats_json(const char *text)
{
    json_error_t err;
    json_t *root = json_loads(text, 0, &err), *loops, *totals;
    unsigned max_total = 0;
    void *it;

    if (!root)
        fail_msg("/stats is not JSON: %s: %.300s", err.text, text);
    loops = json_object_get(root, "per_loop");
    totals = json_object_get(root, "totals");
    assert_true(json_is_array(loops));
    assert_int_equal(json_array_size(loops), 2);
    assert_true(json_is_object(totals));
    for (unsigned l = 0; l < 2; l++) {
        json_t *lo = json_array_get(loops, l);

        assert_int_equal(json_integer_value(json_object_get(lo, "loop")), l);
        for (size_t i = 0; i < N_TROWS; i++) {
            const struct trow *r = &trows[i];
            json_t *g = r->group == LOOP
                            ? lo
                            : json_object_get(lo, group_keys[r->group]);
            json_t *v = json_object_get(g, r->key);

            if (!v)
                fail_msg("/stats per_loop[%u] lacks %s%s%s", l,
                         r->group == LOOP ? "" : group_keys[r->group],
                         r->group == LOOP ? "" : ".", r->key);
            switch (r->fmt) {
            case U64:
            case MS_S:
                assert_int_equal(json_integer_value(v), field_value(l, r, 0));
                break;
            case NS_MS:
                assert_true(json_real_value(v) ==
                            (double)field_value(l, r, 0) / 1e6);
                break;
            case BY_REASON:
                assert_int_equal(json_object_size(v), HUB_CLOSE_N);
                for (int k = 0; k < HUB_CLOSE_N; k++)
                    assert_int_equal(
                        json_integer_value(
                            json_object_get(v, hub_close_reason_name(k))),
                        field_value(l, r, (unsigned)k));
                break;
            case LATE:
                assert_int_equal(json_array_size(v), HUB_LATE_N);
                for (unsigned k = 0; k < HUB_LATE_N; k++)
                    assert_int_equal(json_integer_value(json_object_get(
                                         json_array_get(v, k), "count")),
                                     field_value(l, r, k));
                break;
            case RATIO:
                assert_true(json_is_real(v));
                break;
            }
        }
    }
    for (size_t i = 0; i < N_TROWS; i++)
        if (trows[i].total > max_total)
            max_total = trows[i].total;
    check_history_json(root);
    assert_int_equal(json_object_size(totals), max_total);
    it = json_object_iter(totals);
    for (unsigned pos = 1; pos <= max_total; pos++) {
        const struct trow *r = NULL;
        json_t *v;

        for (size_t i = 0; i < N_TROWS; i++)
            if (trows[i].total == pos)
                r = &trows[i];
        assert_non_null(r);
        assert_non_null(it);
        assert_string_equal(json_object_iter_key(it), r->key);
        v = json_object_iter_value(it);
        if (r->fmt == BY_REASON)
            for (int k = 0; k < HUB_CLOSE_N; k++)
                assert_int_equal(
                    json_integer_value(
                        json_object_get(v, hub_close_reason_name(k))),
                    field_value(0, r, (unsigned)k) +
                        field_value(1, r, (unsigned)k));
        else
            assert_int_equal(json_integer_value(v),
                             field_value(0, r, 0) + field_value(1, r, 0));
        it = json_object_iter_next(totals, it);
    }
    json_decref(root);
}

static void test_stats_json_has_every_row(void **state)
{
    struct fake *f = fake_new();
    size_t len = 0;
    char *text = srv_stats_json(&f->srv, &len);

    (void)state;
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    check_stats_json(text);
    free(text);
    fake_free(f);
}

static void check_metrics_text(const char *text)
{
    struct family fam[160];
    size_t n = families(fam, 160);
    char want[256];

    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "# TYPE lubdub_%s %s\n", fam[i].metric,
                 fam[i].type);
        if (!strstr(text, want))
            fail_msg("/metrics lacks \"%.*s\"", (int)strlen(want) - 1, want);
        if (fam[i].per_loop) {
            snprintf(want, sizeof(want), "\nlubdub_%s%s{loop=\"1\"",
                     fam[i].metric,
                     !strcmp(fam[i].type, "histogram") ? "_count" : "");
            if (!strstr(text, want))
                fail_msg("/metrics lacks loop 1 of lubdub_%s", fam[i].metric);
        }
    }
}

static void test_stats_metrics_has_every_family(void **state)
{
    struct fake *f = fake_new();
    size_t len = 0;
    char *text = srv_metrics_text(&f->srv, &len);

    (void)state;
    assert_non_null(text);
    assert_true(len > 0);
    text[len - 1] = '\0'; /* the last newline; keeps strstr in bounds */
    check_metrics_text(text);
    /* Hub-wide and per-app history series (no store: 0 but the bound). */
    assert_non_null(strstr(text, "\nlubdub_history_max_bytes 1234567\n"));
    assert_non_null(strstr(text, "\nlubdub_history_channels 0\n"));
    assert_non_null(strstr(text, "\nlubdub_history_evicted_total 0\n"));
    assert_non_null(strstr(text, "\nlubdub_history_events{app=\"app-2\"} 0\n"));
    assert_non_null(strstr(text, "\nlubdub_history_bytes{app=\"app-1\"} 0\n"));
    free(text);
    fake_free(f);
}

/* Out of memory anywhere: NULL, or the whole answer; never a leak. */
static void test_stats_out_of_memory(void **state)
{
    struct fake *f = fake_new();
    unsigned fails = 0;

    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            size_t len = 0;
            char *text = srv_stats_json(&f->srv, &len);

            fail_alloc_off();
            if (text)
                check_stats_json(text);
            else
                fails++;
            free(text);
        },
        {
            if (fail_alloc_live() != fa_live_before)
                fail_msg("/stats leaks %ld blocks when allocation %ld fails",
                         fail_alloc_live() - fa_live_before, fa_step);
        });
    assert_true(fails > 10);
    fails = 0;
    FAIL_ALLOC_COUNTDOWN(
        {
            size_t len = 0;
            char *text = srv_metrics_text(&f->srv, &len);

            fail_alloc_off();
            if (text) {
                text[len - 1] = '\0';
                check_metrics_text(text);
            } else {
                fails++;
            }
            free(text);
        },
        {
            if (fail_alloc_live() != fa_live_before)
                fail_msg("/metrics leaks %ld blocks when allocation %ld fails",
                         fail_alloc_live() - fa_live_before, fa_step);
        });
    assert_true(fails >= 1);
    fake_free(f);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_stats_docs_match_table),
        T(test_stats_table_is_well_formed),
        T(test_stats_json_has_every_row),
        T(test_stats_metrics_has_every_family),
        T(test_stats_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
