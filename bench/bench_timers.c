/*
 * bench/bench_timers.c - the timing wheel against a binary min-heap.
 *
 * For 10k, 100k and 1M outstanding timers it measures, in ns per operation:
 * arm (idle -> armed), re-arm (armed -> new deadline), cancel and expiry
 * (advancing 100 ms ticks until everything fired, per fired timer). Each
 * phase touches the timers in its own random order, so neither structure
 * gets sequential, cache-friendly access it would not get from real
 * sessions. Deadlines are uniform in 1..60 s, the span of the hub's ping,
 * pong and idle deadlines. Time is this thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), and each figure is the median of RUNS runs, so
 * a noisy shared machine skews it less.
 *
 * The last line is machine-readable, with the 1M figures:
 *   timers: arm_ns=A cancel_ns=C rearm_ns=R rearm_vs_heap=X cancel_vs_heap=Y
 * where *_vs_heap is heap ns / wheel ns.
 *
 * Thread: single-threaded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heap.h"
#include "timer/list.h"
#include "timer/wheel.h"

enum { RUNS = 7, NOPS = 4 };
enum { OP_ARM, OP_REARM, OP_CANCEL, OP_EXPIRE };

static const char *const op_names[NOPS] = { "arm", "re-arm", "cancel",
                                            "expiry" };
static const size_t sizes[] = { 10000, 100000, 1000000 };

#define NOW0 1000000000ull /* a loop some eleven days into its life */
#define TICK_MS 100u

/* Pre-drawn inputs, shared by both structures within one size. */
struct input {
    size_t n;
    uint64_t *delay1, *delay2;
    uint32_t *perm[NOPS];
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
static volatile uint64_t sink;

static uint64_t next_rand(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void shuffle(uint32_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = next_rand() % (i + 1);
        uint32_t t = p[i];

        p[i] = p[j];
        p[j] = t;
    }
}

static int input_init(struct input *in, size_t n)
{
    memset(in, 0, sizeof(*in));
    in->n = n;
    in->delay1 = malloc(n * sizeof(*in->delay1));
    in->delay2 = malloc(n * sizeof(*in->delay2));
    if (!in->delay1 || !in->delay2)
        return -ENOMEM;
    for (int k = 0; k < NOPS; k++) {
        in->perm[k] = malloc(n * sizeof(*in->perm[k]));
        if (!in->perm[k])
            return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        in->delay1[i] = 1000 + next_rand() % 59001;
        in->delay2[i] = 1000 + next_rand() % 59001;
    }
    return 0;
}

static void input_shuffle(struct input *in)
{
    for (int k = 0; k < NOPS; k++)
        shuffle(in->perm[k], in->n);
}

static void input_fini(struct input *in)
{
    free(in->delay1);
    free(in->delay2);
    for (int k = 0; k < NOPS; k++)
        free(in->perm[k]);
}

static void on_fire(struct hub_timer *t, uint64_t now_ms)
{
    (void)t;
    sink += now_ms;
}

static void on_heap_fire(struct bench_heap_node *x, uint64_t now_ms)
{
    (void)x;
    sink += now_ms;
}

/* One run of every phase on a fresh wheel; ns/op into out. 0 or -errno. */
static int run_wheel(const struct input *in, double out[NOPS])
{
    size_t n = in->n;
    struct hub_timer *e = malloc(n * sizeof(*e));
    struct hub_wheel *w = hub_wheel_create(12, TICK_MS, NOW0);
    struct hub_wheel_stats st;
    uint64_t t0, fired = 0;

    if (!e || !w) {
        free(e);
        hub_wheel_destroy(w);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        hub_timer_init(&e[i], on_fire);

    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++) {
        uint32_t k = in->perm[OP_ARM][i];

        hub_wheel_start(w, &e[k], NOW0, (int64_t)in->delay1[k]);
    }
    out[OP_ARM] = (double)(cpu_ns() - t0) / (double)n;

    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++) {
        uint32_t k = in->perm[OP_REARM][i];

        hub_wheel_start(w, &e[k], NOW0, (int64_t)in->delay2[k]);
    }
    out[OP_REARM] = (double)(cpu_ns() - t0) / (double)n;

    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++)
        hub_wheel_stop(w, &e[in->perm[OP_CANCEL][i]]);
    out[OP_CANCEL] = (double)(cpu_ns() - t0) / (double)n;

    for (size_t i = 0; i < n; i++) {
        uint32_t k = in->perm[OP_EXPIRE][i];

        hub_wheel_start(w, &e[k], NOW0, (int64_t)in->delay1[k]);
    }
    t0 = cpu_ns();
    for (uint64_t now = NOW0 + TICK_MS; hub_wheel_pending(w); now += TICK_MS)
        fired += hub_wheel_advance(w, now);
    out[OP_EXPIRE] = (double)(cpu_ns() - t0) / (double)n;

    hub_wheel_get_stats(w, &st);
    hub_wheel_destroy(w);
    free(e);
    if (fired != n || st.fired != n || st.cancelled != n)
        return -EFAULT;
    return 0;
}

static int run_heap(const struct input *in, double out[NOPS])
{
    size_t n = in->n;
    struct bench_heap_node *e = malloc(n * sizeof(*e));
    struct bench_heap h;
    uint64_t t0, fired = 0;

    if (!e || bench_heap_init(&h, n) < 0) {
        free(e);
        return -ENOMEM;
    }
    /* Fault the array in now, as the wheel's slots were at create. */
    memset(h.a, 0, n * sizeof(*h.a));
    for (size_t i = 0; i < n; i++)
        bench_heap_node_init(&e[i], on_heap_fire);

    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++) {
        uint32_t k = in->perm[OP_ARM][i];

        bench_heap_start(&h, &e[k], NOW0 + in->delay1[k]);
    }
    out[OP_ARM] = (double)(cpu_ns() - t0) / (double)n;

    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++) {
        uint32_t k = in->perm[OP_REARM][i];

        bench_heap_start(&h, &e[k], NOW0 + in->delay2[k]);
    }
    out[OP_REARM] = (double)(cpu_ns() - t0) / (double)n;

    t0 = cpu_ns();
    for (size_t i = 0; i < n; i++)
        bench_heap_stop(&h, &e[in->perm[OP_CANCEL][i]]);
    out[OP_CANCEL] = (double)(cpu_ns() - t0) / (double)n;

    for (size_t i = 0; i < n; i++) {
        uint32_t k = in->perm[OP_EXPIRE][i];

        bench_heap_start(&h, &e[k], NOW0 + in->delay1[k]);
    }
    if (bench_heap_check(&h) < 0)
        return -EFAULT;
    t0 = cpu_ns();
    for (uint64_t now = NOW0 + TICK_MS; h.n; now += TICK_MS) {
        struct bench_heap_node *x;

        while ((x = bench_heap_pop_due(&h, now)) != NULL) {
            x->cb(x, now);
            fired++;
        }
    }
    out[OP_EXPIRE] = (double)(cpu_ns() - t0) / (double)n;

    bench_heap_fini(&h);
    free(e);
    return fired == n ? 0 : -EFAULT;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

int main(void)
{
    double wheel[RUNS][NOPS], heap[RUNS][NOPS];
    double med_w[NOPS], med_h[NOPS];

    printf("timers: wheel (4096 slots x %u ms) vs binary min-heap; "
           "deadlines uniform 1..60 s;\n"
           "        random order per phase; ns/op, median of %d runs, "
           "thread CPU time\n",
           TICK_MS, RUNS);
    printf("%9s  %-7s %9s %9s %11s\n", "n", "op", "wheel", "heap",
           "heap/wheel");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        struct input in;

        if (input_init(&in, sizes[s]) < 0) {
            fprintf(stderr, "bench_timers: out of memory\n");
            return 1;
        }
        for (int r = 0; r < RUNS; r++) {
            input_shuffle(&in);
            /* Alternate which goes first so neither always gets a warm
             * allocator or a cold cache. */
            if (r % 2 == 0) {
                if (run_wheel(&in, wheel[r]) < 0 ||
                    run_heap(&in, heap[r]) < 0)
                    goto fail;
            } else {
                if (run_heap(&in, heap[r]) < 0 ||
                    run_wheel(&in, wheel[r]) < 0)
                    goto fail;
            }
        }
        for (int op = 0; op < NOPS; op++) {
            double vw[RUNS], vh[RUNS];

            for (int r = 0; r < RUNS; r++) {
                vw[r] = wheel[r][op];
                vh[r] = heap[r][op];
            }
            med_w[op] = median(vw, RUNS);
            med_h[op] = median(vh, RUNS);
            printf("%9zu  %-7s %9.1f %9.1f %10.2fx\n", sizes[s],
                   op_names[op], med_w[op], med_h[op],
                   med_h[op] / med_w[op]);
        }
        input_fini(&in);
        continue;
fail:
        fprintf(stderr, "bench_timers: a run failed its self-check\n");
        input_fini(&in);
        return 1;
    }
    /* med_* now hold the largest size, 1M. */
    printf("timers: arm_ns=%.1f cancel_ns=%.1f rearm_ns=%.1f "
           "rearm_vs_heap=%.2f cancel_vs_heap=%.2f\n",
           med_w[OP_ARM], med_w[OP_CANCEL], med_w[OP_REARM],
           med_h[OP_REARM] / med_w[OP_REARM],
           med_h[OP_CANCEL] / med_w[OP_CANCEL]);
    return 0;
}
