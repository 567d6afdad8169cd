/*
 * tests/unit/test_shard.c - the session shard (hub/loop/shard.h) against a
 * model: seeded random add / remove / touch / scan-slice / new-run steps
 * over up to 5,000 sessions, with hub_shard_check() and the model compared
 * after every mutation. The scan is driven as the heartbeat drives it
 * (visit slots cursor..end, then cursor = end; cursor = 0 starts a run),
 * and the model checks the invariant shard.h promises: slots below the
 * cursor were visited this run, slots from it on were not, so a run
 * visits every session linked for the whole run exactly once.
 *
 * LUBDUB_TEST_SEED=<n> runs one seed instead of the fixed ones; a failure
 * names its seed and step.
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

#include "hub/loop/session.h"
#include "hub/loop/shard.h"

#define MAX_SESSIONS 5000

struct model {
    struct hub_shard sh;
    struct hub_session *s;      /* MAX_SESSIONS */
    bool *linked;
    uint64_t *last_rx;
    unsigned *visits;           /* visits in the current run */
    bool *whole_run;            /* linked since the run began */
    uint32_t count, max_count;
    uint64_t seed, rng, step, now;
    uint64_t runs_done, whole_checked;
};

static uint64_t next(struct model *m)
{
    /* xorshift64* */
    m->rng ^= m->rng >> 12;
    m->rng ^= m->rng << 25;
    m->rng ^= m->rng >> 27;
    return m->rng * 0x2545f4914f6cdd1dull;
}

static uint32_t below(struct model *m, uint32_t n)
{
    return (uint32_t)(next(m) % n);
}

#define CHECK(m, cond, ...)                                                    \
    do {                                                                       \
        if (!(cond))                                                           \
            fail_msg("seed %llu step %llu: %s", (unsigned long long)(m)->seed, \
                     (unsigned long long)(m)->step, #cond);                    \
    } while (0)

static void model_init(struct model *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->seed = seed;
    m->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    m->s = calloc(MAX_SESSIONS, sizeof(*m->s));
    m->linked = calloc(MAX_SESSIONS, sizeof(*m->linked));
    m->last_rx = calloc(MAX_SESSIONS, sizeof(*m->last_rx));
    m->visits = calloc(MAX_SESSIONS, sizeof(*m->visits));
    m->whole_run = calloc(MAX_SESSIONS, sizeof(*m->whole_run));
    assert_non_null(m->s);
    assert_non_null(m->linked);
    assert_non_null(m->last_rx);
    assert_non_null(m->visits);
    assert_non_null(m->whole_run);
    for (unsigned i = 0; i < MAX_SESSIONS; i++)
        m->s[i].shard_idx = UINT32_MAX;
    hub_shard_init(&m->sh);
}

static void model_fini(struct model *m)
{
    hub_shard_fini(&m->sh);
    free(m->s);
    free(m->linked);
    free(m->last_rx);
    free(m->visits);
    free(m->whole_run);
}

/* The shard against the model, after every mutation. */
static void verify(struct model *m)
{
    const struct hub_shard *sh = &m->sh;

    CHECK(m, hub_shard_check(sh) == 0);
    CHECK(m, sh->count == m->count);
    CHECK(m, sh->cursor <= sh->count);
    /* The slots hold distinct sessions (check: each one's index is its
     * slot), all linked in the model, as many as the model has: the same
     * set. Each has the model's last_rx; it was scanned this run below the
     * cursor, not yet from the cursor on. */
    for (uint32_t i = 0; i < sh->count; i++) {
        uint32_t k = (uint32_t)(sh->slots[i].s - m->s);

        CHECK(m, k < MAX_SESSIONS && m->linked[k]);
        CHECK(m, sh->slots[i].last_rx_ms == m->last_rx[k]);
        CHECK(m, m->visits[k] == (i < sh->cursor ? 1u : 0u));
    }
}

static void op_add(struct model *m)
{
    uint32_t k = below(m, MAX_SESSIONS);

    for (uint32_t tries = 0; m->linked[k] && tries < MAX_SESSIONS; tries++)
        k = (k + 1) % MAX_SESSIONS;
    if (m->linked[k])
        return;
    CHECK(m, hub_shard_add(&m->sh, &m->s[k], m->now) == 0);
    m->linked[k] = true;
    m->last_rx[k] = m->now;
    m->visits[k] = 0;
    m->whole_run[k] = false; /* joined mid-run */
    m->count++;
    if (m->count > m->max_count)
        m->max_count = m->count;
}

static struct hub_session *random_linked(struct model *m, uint32_t *k)
{
    if (!m->count)
        return NULL;
    /* A random slot, then its session: uniform over linked sessions. */
    struct hub_session *s = m->sh.slots[below(m, m->count)].s;

    *k = (uint32_t)(s - m->s);
    return s;
}

static void op_remove(struct model *m)
{
    uint32_t k;
    struct hub_session *s = random_linked(m, &k);

    if (!s)
        return;
    hub_shard_remove(&m->sh, s);
    CHECK(m, s->shard_idx == UINT32_MAX);
    m->linked[k] = false;
    m->whole_run[k] = false;
    m->visits[k] = 0;
    m->count--;
    /* Removing it again is a no-op. */
    hub_shard_remove(&m->sh, s);
}

/* hub_session_stamp_rx's write: the slot's last_rx_ms only. */
static void op_touch(struct model *m)
{
    uint32_t k;
    struct hub_session *s = random_linked(m, &k);

    if (!s)
        return;
    m->sh.slots[s->shard_idx].last_rx_ms = m->now;
    m->last_rx[k] = m->now;
}

/* Every session linked for the whole run was visited exactly once. */
static void end_run(struct model *m)
{
    for (uint32_t k = 0; k < MAX_SESSIONS; k++)
        if (m->whole_run[k]) {
            CHECK(m, m->linked[k] && m->visits[k] == 1);
            m->whole_checked++;
        }
    m->runs_done++;
}

static void begin_run(struct model *m)
{
    for (uint32_t k = 0; k < MAX_SESSIONS; k++) {
        m->visits[k] = 0;
        m->whole_run[k] = m->linked[k];
    }
    m->sh.cursor = 0;
}

/* One heartbeat slice: visit [cursor, end), cursor = end. */
static void op_slice(struct model *m)
{
    struct hub_shard *sh = &m->sh;
    uint32_t n = 1 + below(m, 600), end;

    end = sh->cursor + n < sh->count ? sh->cursor + n : sh->count;
    for (uint32_t i = sh->cursor; i < end; i++) {
        uint32_t k = (uint32_t)(sh->slots[i].s - m->s);

        m->visits[k]++;
    }
    sh->cursor = end;
    if (end == sh->count) {
        end_run(m);
        begin_run(m);
    }
}

static void run_seed(uint64_t seed, uint64_t steps)
{
    struct model m;

    model_init(&m, seed);
    begin_run(&m);
    for (m.step = 0; m.step < steps; m.step++) {
        uint32_t r = below(&m, 100);
        /* Grow towards the cap early, then churn around it. */
        uint32_t add_pct = m.count < MAX_SESSIONS - 200 ? 47 : 25;

        m.now += below(&m, 50);
        if (r < add_pct)
            op_add(&m);
        else if (r < 50)
            op_remove(&m);
        else if (r < 75)
            op_touch(&m);
        else if (r < 98)
            op_slice(&m);
        else {
            /* A run cut short (a new one starts at 0): only its slots
             * below the cursor were visited; start the model over. */
            begin_run(&m);
        }
        verify(&m);
    }
    /* The runs ended often enough to mean something. */
    CHECK(&m, m.runs_done > 5 && m.whole_checked > 1000);
    CHECK(&m, m.max_count > MAX_SESSIONS * 9 / 10);
    model_fini(&m);
}

static void test_shard_random_against_model(void **state)
{
    const char *env = getenv("LUBDUB_TEST_SEED");

    (void)state;
    if (env && *env) {
        run_seed(strtoull(env, NULL, 10), 16000);
        return;
    }
    for (uint64_t seed = 1; seed <= 3; seed++)
        run_seed(seed, 16000);
}

/* The removal cases one by one: below the cursor (the hole is filled from
 * the scanned part, the cursor steps back), at the last scanned slot, at
 * the cursor, and the last slot. */
static void test_shard_remove_around_cursor(void **state)
{
    struct hub_session s[6];
    struct hub_shard sh;

    (void)state;
    memset(s, 0, sizeof(s));
    hub_shard_init(&sh);
    for (int i = 0; i < 6; i++) {
        s[i].shard_idx = UINT32_MAX;
        assert_int_equal(hub_shard_add(&sh, &s[i], (uint64_t)i), 0);
    }
    sh.cursor = 3; /* s0 s1 s2 | s3 s4 s5 */
    hub_shard_remove(&sh, &s[0]); /* s2 s1 | s5 s3 s4 */
    assert_int_equal(hub_shard_check(&sh), 0);
    assert_int_equal(sh.cursor, 2);
    assert_ptr_equal(sh.slots[0].s, &s[2]);
    assert_ptr_equal(sh.slots[1].s, &s[1]);
    assert_ptr_equal(sh.slots[2].s, &s[5]);
    assert_int_equal(sh.slots[2].last_rx_ms, 5);
    hub_shard_remove(&sh, &s[1]); /* s2 | s4 s5 s3 */
    assert_int_equal(hub_shard_check(&sh), 0);
    assert_int_equal(sh.cursor, 1);
    assert_ptr_equal(sh.slots[0].s, &s[2]);
    assert_ptr_equal(sh.slots[1].s, &s[4]);
    hub_shard_remove(&sh, &s[4]); /* at the cursor: s2 | s3 s5 */
    assert_int_equal(hub_shard_check(&sh), 0);
    assert_int_equal(sh.cursor, 1);
    assert_int_equal(sh.count, 3);
    assert_ptr_equal(sh.slots[1].s, &s[3]);
    hub_shard_remove(&sh, &s[5]); /* the last: s2 | s3 */
    assert_int_equal(sh.count, 2);
    hub_shard_remove(&sh, &s[2]); /* the only scanned one: | s3 */
    assert_int_equal(hub_shard_check(&sh), 0);
    assert_int_equal(sh.cursor, 0);
    assert_ptr_equal(sh.slots[0].s, &s[3]);
    hub_shard_remove(&sh, &s[3]);
    assert_int_equal(sh.count, 0);
    assert_int_equal(hub_shard_check(&sh), 0);
    hub_shard_fini(&sh);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_shard_random_against_model),
        T(test_shard_remove_around_cursor),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
