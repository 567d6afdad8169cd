/*
 * bench/bench_ckey.c - what the cluster key (hub/cluster/cluster_key.h) costs
 * per envelope, in one run: for payloads of 100 B, 1 KiB and 16 KiB, the
 * sender's encode (hub_cluster_envelope_encode) without and with the MAC
 * (hub_cluster_key_sign over the encoded bytes), and the receiver's decode
 * without and with the check (hub_cluster_key_verify, fresh: the window and
 * the counter too). Each figure is the median of RUNS runs of N envelopes on
 * one thread; ns per envelope.
 *
 * Last line: ckey: sign_ns_1k=X verify_ns_1k=Y (the 1 KiB payload's
 * added cost on each side).
 *
 * Thread: single-threaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub/cluster/cluster_key.h"
#include "hub/cluster/cluster_envelope.h"

enum { RUNS = 7, N = 200000 };

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, RUNS, sizeof(*v), cmp_d);
    return v[RUNS / 2];
}

int main(void)
{
    static const size_t sizes[] = { 100, 1024, 16384 };
    static const char key[] = "bench-cluster-key-0123456789abcdef";
    struct hub_cluster_key *sender = hub_cluster_key_create(
        key, sizeof(key) - 1, NULL, 0, "lubdub", "n1", 3000);
    struct hub_cluster_key *receiver = hub_cluster_key_create(
        key, sizeof(key) - 1, NULL, 0, "lubdub", "n2", 3000);
    double sign_1k = 0, verify_1k = 0;
    volatile unsigned sink = 0;

    if (!sender || !receiver)
        return 1;
    printf("%-8s %12s %12s %12s %12s\n", "payload", "encode_ns",
           "+mac_ns", "decode_ns", "+verify_ns");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        unsigned char *data = malloc(n), *buf = malloc(n + 512);
        double enc[RUNS], enc_mac[RUNS], dec[RUNS], dec_ver[RUNS];
        struct hub_cluster_envelope e = {
            .kind = HUB_CLUSTER_ENV_EVENT,
            .origin = "n1",
            .origin_len = 2,
            .epoch = 7,
            .seq = 1,
            .app = "app-id",
            .app_len = 6,
            .channel = "private-bench",
            .channel_len = 13,
        };
        size_t len;

        if (!data || !buf)
            return 1;
        memset(data, 'x', n);
        e.data = data;
        e.data_len = n;
        len = hub_cluster_envelope_size(&e);
        for (int r = 0; r < RUNS; r++) {
            double t0 = now_ns();

            for (int i = 0; i < N; i++) {
                e.seq = (uint64_t)i + 1;
                sink +=
                    (unsigned)hub_cluster_envelope_encode(&e, buf, n + 512);
            }
            enc[r] = (now_ns() - t0) / N;
            t0 = now_ns();
            for (int i = 0; i < N; i++) {
                struct hub_cluster_key_part part = { buf, len };
                uint64_t ctr, ms;

                e.seq = (uint64_t)i + 1;
                sink +=
                    (unsigned)hub_cluster_envelope_encode(&e, buf, n + 512);
                hub_cluster_key_sign(sender, "env", &part, 1, &ctr, &ms,
                                     buf + len + 16);
                sink += (unsigned)ctr;
            }
            enc_mac[r] = (now_ns() - t0) / N;
            t0 = now_ns();
            for (int i = 0; i < N; i++) {
                struct hub_cluster_envelope d;

                sink += (unsigned)hub_cluster_envelope_decode(&d, buf, len);
            }
            dec[r] = (now_ns() - t0) / N;
            /* Fresh signatures to check (each counter above the last). */
            {
                unsigned char(*macs)[HUB_CLUSTER_KEY_MAC_LEN] =
                    malloc((size_t)N * HUB_CLUSTER_KEY_MAC_LEN);
                uint64_t *ctrs = malloc((size_t)N * sizeof(*ctrs));
                uint64_t *mss = malloc((size_t)N * sizeof(*mss));
                struct hub_cluster_key_part part = { buf, len };

                if (!macs || !ctrs || !mss)
                    return 1;
                for (int i = 0; i < N; i++)
                    hub_cluster_key_sign(sender, "env", &part, 1, &ctrs[i],
                                         &mss[i], macs[i]);
                t0 = now_ns();
                for (int i = 0; i < N; i++) {
                    struct hub_cluster_envelope d;

                    sink +=
                        (unsigned)hub_cluster_envelope_decode(&d, buf, len);
                    sink += (unsigned)hub_cluster_key_verify(
                        receiver, "n1", 2, ctrs[i], mss[i], "env", &part, 1,
                        macs[i], true);
                }
                dec_ver[r] = (now_ns() - t0) / N;
                free(macs);
                free(ctrs);
                free(mss);
            }
        }
        {
            double a = median(enc), b = median(enc_mac), c = median(dec),
                   d = median(dec_ver);

            printf("%-8zu %12.0f %12.0f %12.0f %12.0f\n", n, a, b - a, c,
                   d - c);
            if (n == 1024) {
                sign_1k = b - a;
                verify_1k = d - c;
            }
        }
        free(data);
        free(buf);
    }
    if (sink == 42)
        printf("\n");
    printf("ckey: sign_ns_1k=%.0f verify_ns_1k=%.0f\n", sign_1k, verify_1k);
    hub_cluster_key_destroy(sender);
    hub_cluster_key_destroy(receiver);
    return 0;
}
