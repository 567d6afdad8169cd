/*
 * server/base/poison.h - ASan poisoning for memory lubdub lends from its own
 * pools (server/lws/hdrpool.c, server/lws/rxpool.c): a free slot is
 * poisoned, so a read or write through a stale pointer is reported; without
 * ASan, nothing.
 */
#ifndef SRV_POISON_H
#define SRV_POISON_H

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
