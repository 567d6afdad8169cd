/*
 * bench/bench_hash.c - what the table hash costs on the subscribe path,
 * and what a flood of colliding names costs.
 *
 * Built twice from this one file: bench_hash links the hub as it is
 * (keyed SipHash-2-4, hub/base/hash.h); bench_hash_fnv links the same hub
 * sources with bench/fnv_hash.c in place of hub/base/hash.c, the unkeyed
 * FNV-1a the tables had before. bench/run_hash.sh runs the two in turn
 * and prints their ratios (make bench-hash).
 *
 * Each run, on one hub loop with a do-nothing transport and a fake clock:
 *   hash       ns per hub_chan_hash of a 42-byte channel name (hash16:
 *              of a 16-byte one);
 *   subscribe  ns per pusher:subscribe through hub_pusher_on_message, the
 *              whole path (JSON, loop-local channel index, hub-wide
 *              directory, the reply queued): 512 sessions x 32 public
 *              channels, every name new, on a fresh hub each rep;
 *   lookup     ns per hub_chanmap_find of those channels (a publish's
 *              lookup on each loop);
 *   flood      ns per subscribe as above, the names being 16,384 that
 *              agree in FNV-1a's low 16 bits (a Joux multicollision, as
 *              tests/unit/test_hash.c builds them): under FNV-1a every
 *              subscribe walks one chain of all the earlier ones.
 * The fastest of REPS reps, in this thread's CPU time: on a shared
 * machine the other reps carry other processes' cache and core traffic,
 * which moves a subscribe by a third, far more than the hash does. Last
 * line:
 *   hash: variant=keyed|fnv hash_ns=… hash16_ns=… subscribe_ns=…
 *         lookup_ns=… flood_ns=…   (one line)
 *
 * Thread: single-threaded (the loop's thread is this one).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub/app/app.h"
#include "hub/loop/chanmap.h"
#include "hub/base/chantab.h"
#include "hub/hub.h"
#include "hub/loop/loop.h"

#include "../tests/unit/fnv_flood.h"
#include "hub/pusher/pusher.h"
#include "hub/loop/session.h"
#include "timer/clock.h"

#ifndef BENCH_HASH_VARIANT
#define BENCH_HASH_VARIANT "keyed"
#endif

enum { REPS = 5, SESSIONS = 512, PER = 32, SUBS = SESSIONS * PER,
       STAGES = 14, NAME_LEN = FNV_FLOOD_NAME_LEN(STAGES),
       HASHES = 1 << 20 };
_Static_assert(SUBS == 1 << STAGES, "one flood name per subscribe");


static char names[2][SUBS][NAME_LEN + 1]; /* [0] random, [1] flood */
static char *msgs[SUBS];

static void fake_want_writable(void *conn)
{
    (void)conn;
}

static void fake_kill(void *conn)
{
    (void)conn;
}

static void fake_flush_soon(void *ctx)
{
    (void)ctx;
}

static const struct hub_transport_ops fake_ops = {
    .want_writable = fake_want_writable,
    .flush_soon = fake_flush_soon,
    .kill = fake_kill,
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    /* This thread's CPU time: on a shared machine, time spent preempted
     * would swamp the few ns the hash changes. */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double fastest(const double *v)
{
    double m = v[0];

    for (int i = 1; i < REPS; i++)
        if (v[i] < m)
            m = v[i];
    return m;
}

/* [0]: random names; [1]: names in one bucket of the old FNV-1a
 * (tests/unit/fnv_flood.h). */
static void build_names(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char pick[STAGES][2][FNV_FLOOD_BLOCK];

    if (!fnv_flood_picks(pick, STAGES)) {
        fprintf(stderr, "bench_hash: no collision found\n");
        exit(1);
    }
    for (unsigned n = 0; n < SUBS; n++) {
        memcpy(names[0][n], "hf-", FNV_FLOOD_PREFIX);
        for (unsigned i = FNV_FLOOD_PREFIX; i < NAME_LEN; i++) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            names[0][n][i] =
                fnv_flood_charset[(x * 0x2545F4914F6CDD1Dull) >> 58];
        }
        fnv_flood_name(names[1][n], pick, STAGES, n);
    }
}

static double bench_hash_ns(size_t len)
{
    double v[REPS];
    volatile uint64_t sink = 0;

    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = now_ns(), acc = 0;

        for (unsigned i = 0; i < HASHES; i++)
            acc += hub_chan_hash(0, names[0][i % SUBS], len);
        sink += acc;
        v[r] = (double)(now_ns() - t0) / HASHES;
    }
    (void)sink;
    return fastest(v);
}

/* One rep: subscribe every name of set on a fresh hub; the ns per
 * subscribe, and (lookup_ns non-NULL) per chanmap lookup after. */
static double subscribe_rep(int set, double *lookup_ns)
{
    static struct hub_config cfg;
    static struct hub_app app;
    static uint64_t fake_ns = 1000ull * 1000000000ull;
    static struct hub_session sessions[SESSIONS];
    struct hub_clock clock = { hub_clock_fake_now_ns, &fake_ns };
    struct hub *h;
    struct hub_loop *l;
    uint64_t t0, t1;
    unsigned found = 0;

    memset(&cfg, 0, sizeof(cfg));
    cfg.tick_ms = 10;
    cfg.ping_interval_ms = 25000;
    cfg.pong_timeout_ms = 10000;
    cfg.close_timeout_ms = 2000;
    cfg.drain_timeout_ms = 1000;
    cfg.activity_timeout_s = 30;
    cfg.max_message = 65536;
    cfg.max_queue = 1 << 20;
    cfg.auth_window_s = 600;
    cfg.session_hooks = &hub_pusher_hooks;
    memset(&app, 0, sizeof(app));
    hub_app_defaults(&app);
    app.id = "app-id";
    app.key = "app-key";
    app.secret = "app-secret";
    cfg.apps = &app;
    cfg.n_apps = 1;
    h = hub_create(&cfg, &clock);
    l = h ? hub_loop_create(h, &fake_ops, NULL, NULL, fake_ns / 1000000u)
          : NULL;
    if (!l) {
        fprintf(stderr, "bench_hash: out of memory\n");
        exit(1);
    }
    memset(sessions, 0, sizeof(sessions));
    for (unsigned i = 0; i < SESSIONS; i++) {
        if (hub_session_init(&sessions[i], l, &sessions[i],
                             fake_ns / 1000000u)) {
            fprintf(stderr, "bench_hash: session init failed\n");
            exit(1);
        }
        hub_pusher_open(&sessions[i], &app);
    }
    for (unsigned i = 0; i < SUBS; i++) {
        char buf[128];
        int n = snprintf(buf, sizeof(buf),
                         "{\"event\":\"pusher:subscribe\",\"data\":"
                         "{\"channel\":\"%s\"}}", names[set][i]);

        free(msgs[i]);
        msgs[i] = strndup(buf, (size_t)n);
    }
    t0 = now_ns();
    for (unsigned i = 0; i < SUBS; i++)
        (void)hub_pusher_on_message(&sessions[i / PER], msgs[i],
                                    strlen(msgs[i]), fake_ns / 1000000u);
    t1 = now_ns();
    if (hub_chanmap_count(l->chans) != SUBS) {
        fprintf(stderr, "bench_hash: %u channels, not %u\n",
                hub_chanmap_count(l->chans), (unsigned)SUBS);
        exit(1);
    }
    if (lookup_ns) {
        uint64_t t2 = now_ns();

        for (unsigned i = 0; i < SUBS; i++)
            found += hub_chanmap_find(l->chans, 0, names[set][i],
                                      NAME_LEN) != NULL;
        *lookup_ns = (double)(now_ns() - t2) / SUBS;
        if (found != SUBS) {
            fprintf(stderr, "bench_hash: lookups found %u\n", found);
            exit(1);
        }
    }
    for (unsigned i = 0; i < SESSIONS; i++)
        hub_session_fini(&sessions[i], HUB_CLOSE_PEER);
    hub_loop_destroy(l);
    hub_destroy(h);
    return (double)(t1 - t0) / SUBS;
}

int main(void)
{
    double sub[REPS], look[REPS], flood[REPS], hash_ns, hash16_ns;

    build_names();
    hash_ns = bench_hash_ns(NAME_LEN);
    hash16_ns = bench_hash_ns(16);
    for (int r = 0; r < REPS; r++) {
        sub[r] = subscribe_rep(0, &look[r]);
        flood[r] = subscribe_rep(1, NULL);
    }
    printf("hash: variant=%s hash_ns=%.1f hash16_ns=%.1f subscribe_ns=%.1f "
           "lookup_ns=%.1f flood_ns=%.1f\n",
           BENCH_HASH_VARIANT, hash_ns, hash16_ns, fastest(sub),
           fastest(look), fastest(flood));
    for (unsigned i = 0; i < SUBS; i++)
        free(msgs[i]);
    return 0;
}
