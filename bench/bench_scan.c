/*
 * bench/bench_scan.c - S2: the heartbeat scan over a synthetic shard.
 *
 * Builds one hub loop with a do-nothing transport and 100k or 1M sessions,
 * 5 % of them silent past the ping interval, then runs one heartbeat run
 * (all its slices, resumed back to back as the server would after each
 * I/O pass) and reads the task's own figures: the run's duration and the
 * longest slice. Every run starts from fresh last_rx stamps so the same
 * 5 % are due. Median of RUNS runs; wall time on an otherwise idle loop.
 *
 * Last line: scan: ms_per_100k=X max_slice_us=Y (the 1M shard's figures).
 *
 * Thread: single-threaded (the loop's thread is this one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub.h"
#include "hub/loop/heartbeat.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"
#include "timer/clock.h"

enum { RUNS = 7 };

static unsigned long writable_requests;

static void fake_want_writable(void *conn)
{
    (void)conn;
    writable_requests++;
}

static void fake_kill(void *conn)
{
    (void)conn;
}

/* Pings take the writable path: the pending list never fills here. */
static void fake_flush_soon(void *ctx)
{
    (void)ctx;
}

static const struct hub_transport_ops fake_ops = {
    .want_writable = fake_want_writable,
    .flush_soon = fake_flush_soon,
    .kill = fake_kill,
};

static int resume_pending;

static void yield_cb(struct hub_task *t, void *arg)
{
    (void)t;
    (void)arg;
    resume_pending = 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static void measure(size_t n, double *ms_per_100k, double *max_slice_us)
{
    static struct hub_config cfg;
    static struct hub_app app;
    const struct hub_clock *clock = hub_clock_monotonic();
    struct hub *h;
    struct hub_loop *l;
    struct hub_session *sessions;
    uint64_t runs_ns[RUNS], slices_ns[RUNS];

    memset(&cfg, 0, sizeof(cfg));
    cfg.tick_ms = 100;
    cfg.ping_interval_ms = 25000;
    cfg.pong_timeout_ms = 10000;
    cfg.close_timeout_ms = 2000;
    cfg.drain_timeout_ms = 10000;
    cfg.max_queue = 1 << 20;
    cfg.max_message = 1 << 16;
    cfg.heartbeat_interval_ms = 1000;
    app.id = "app-id";
    app.key = "app-key";
    app.secret = "app-secret";
    hub_app_defaults(&app);
    cfg.apps = &app;
    cfg.n_apps = 1;
    h = hub_create(&cfg, clock);
    l = h ? hub_loop_create(h, &fake_ops, NULL, NULL,
                            hub_clock_now_ms(clock))
          : NULL;
    sessions = calloc(n, sizeof(*sessions));
    if (!l || !sessions) {
        fprintf(stderr, "bench_scan: out of memory\n");
        exit(1);
    }
    hub_loop_set_heartbeat_yield(l, yield_cb);
    for (size_t i = 0; i < n; i++)
        hub_session_init(&sessions[i], l, &sessions[i],
                         hub_clock_now_ms(clock));
    for (int r = 0; r < RUNS; r++) {
        uint64_t now = hub_clock_now_ms(clock) + 60000 * (uint64_t)(r + 1);
        struct hub_task_stats ts;

        /* Fresh stamps: 5 % silent for longer than the ping interval. */
        for (size_t i = 0; i < n; i++) {
            struct hub_session *s = l->shard.slots[i].s;

            hub_wheel_stop(l->wheel, &s->pong_timer);
            s->ping_outstanding = false;
            s->ping_due = false;
            s->want_writable = false;
            l->shard.slots[i].last_rx_ms =
                (i % 20 == 0) ? now - 30000 : now - 1000;
        }
        hub_task_stop(&l->heartbeat);
        memset(&l->heartbeat.hub__stats, 0, sizeof(l->heartbeat.hub__stats));
        hub_task_start(&l->heartbeat, now, 0, 1000);
        resume_pending = 0;
        hub_loop_service(l, now + 100);
        while (resume_pending) {
            resume_pending = 0;
            hub_task_resume(&l->heartbeat, now + 100);
        }
        hub_task_get_stats(&l->heartbeat, &ts);
        runs_ns[r] = ts.last_run_ns;
        slices_ns[r] = ts.max_slice_ns;
    }
    qsort(runs_ns, RUNS, sizeof(runs_ns[0]), cmp_u64);
    qsort(slices_ns, RUNS, sizeof(slices_ns[0]), cmp_u64);
    *ms_per_100k = (double)runs_ns[RUNS / 2] / 1e6 * 100000.0 / (double)n;
    *max_slice_us = (double)slices_ns[RUNS - 1] / 1e3;
    printf("%9zu sessions: run %.3f ms (median of %d), %.3f ms per 100k, "
           "worst slice %.1f us, slice = %u sessions\n",
           n, (double)runs_ns[RUNS / 2] / 1e6, RUNS, *ms_per_100k,
           *max_slice_us, HUB_HEARTBEAT_SLICE);
    for (size_t i = 0; i < n; i++)
        hub_session_fini(&sessions[i], HUB_CLOSE_PEER);
    hub_loop_destroy(l);
    hub_destroy(h);
    free(sessions);
}

int main(void)
{
    double ms = 0, us = 0;

    measure(100000, &ms, &us);
    measure(1000000, &ms, &us);
    printf("scan: ms_per_100k=%.3f max_slice_us=%.1f\n", ms, us);
    return 0;
}
