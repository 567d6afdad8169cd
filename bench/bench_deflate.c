/*
 * bench/bench_deflate.c - zlib against libdeflate on the compression
 * corpus (bench/corpus/), the way the hub compresses a publication: one
 * whole message, no context kept (RFC 7692 server_no_context_takeover).
 * zlib: deflateReset + deflate(Z_SYNC_FLUSH), the 4-byte tail stripped
 * (RFC 7692 section 7.2.1). libdeflate: one libdeflate_deflate_compress.
 * Prints, per library, level and file: bytes out / in and ns per message
 * (the best of 5 rounds of N messages). Run by make bench-compression.
 */
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b;

    if (!f)
        return NULL;
    b = malloc(1 << 20);
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static size_t z_one(z_stream *z, const unsigned char *in, size_t n,
                    unsigned char *out, size_t cap)
{
    deflateReset(z);
    z->next_in = (unsigned char *)in;
    z->avail_in = (unsigned)n;
    z->next_out = out;
    z->avail_out = (unsigned)cap;
    deflate(z, Z_SYNC_FLUSH);
    return cap - z->avail_out - 4;
}

int main(int argc, char **argv)
{
    int iters = 20000;

    for (int a = 1; a < argc; a++) {
        size_t n, zn = 0;
        unsigned char *in = slurp(argv[a], &n), out[1 << 16];
        const char *name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1
                                                 : argv[a];

        if (!in) {
            perror(argv[a]);
            return 1;
        }
        for (int lvl = 1; lvl <= 9; lvl += (lvl == 1 ? 5 : 3)) {
            for (int mem = 8; mem >= 4; mem -= 4) {
                z_stream z;
                double best = 1e18;

                memset(&z, 0, sizeof(z));
                deflateInit2(&z, lvl, Z_DEFLATED, -15, mem, Z_DEFAULT_STRATEGY);
                for (int r = 0; r < 5; r++) {
                    double t0 = now_ns();
                    for (int i = 0; i < iters; i++)
                        zn = z_one(&z, in, n, out, sizeof(out));
                    double t = (now_ns() - t0) / iters;
                    if (t < best)
                        best = t;
                }
                deflateEnd(&z);
                printf("%-12s zlib       level %d memlevel %d  %5zu -> %5zu "
                       "(%.3f)  %7.0f ns/msg\n", name, lvl, mem, n, zn,
                       (double)zn / n, best);
            }
            {
                struct libdeflate_compressor *c =
                    libdeflate_alloc_compressor(lvl);
                double best = 1e18;

                for (int r = 0; r < 5; r++) {
                    double t0 = now_ns();
                    for (int i = 0; i < iters; i++)
                        zn = libdeflate_deflate_compress(c, in, n, out,
                                                         sizeof(out));
                    double t = (now_ns() - t0) / iters;
                    if (t < best)
                        best = t;
                }
                libdeflate_free_compressor(c);
                printf("%-12s libdeflate level %d             %5zu -> %5zu "
                       "(%.3f)  %7.0f ns/msg\n", name, lvl, n, zn,
                       (double)zn / n, best);
            }
        }
        free(in);
    }
    return 0;
}
