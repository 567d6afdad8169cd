/*
 * tests/fuzz/fuzz_wsread_alloc.h - forced into server/lws/wsread.c when it is
 * compiled for fuzz_wsread (-include, tests/fuzz/CMakeLists.txt), so the
 * harness can fail any allocation the framing glue makes: its own malloc
 * and calloc, and the wslay context it asks libwslay for, which a link-time
 * wrapper would not see. The system headers come first so their
 * declarations are untouched; only wsread.c's calls are renamed.
 */
#ifndef LUBDUB_FUZZ_WSREAD_ALLOC_H
#define LUBDUB_FUZZ_WSREAD_ALLOC_H

#include <stdlib.h>
#include <wslay/wslay.h>

void *fuzz_wsread_malloc(size_t n);
void *fuzz_wsread_calloc(size_t n, size_t size);
int fuzz_wsread_context_init(wslay_frame_context_ptr *ctx,
                             const struct wslay_frame_callbacks *cbs,
                             void *user);

/* The harness itself (fuzz_wsread.c) wants only the prototypes. */
#ifndef FUZZ_WSREAD_HARNESS
#define malloc(n) fuzz_wsread_malloc(n)
#define calloc(n, size) fuzz_wsread_calloc(n, size)
#define wslay_frame_context_init(ctx, cbs, user)                              \
    fuzz_wsread_context_init(ctx, cbs, user)
#endif

#endif
