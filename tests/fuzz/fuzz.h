/*
 * tests/fuzz/fuzz.h - what every libFuzzer target here shares: the entry
 * point's prototype and CHECK(), which traps (a crash the fuzzer reports
 * and minimises) when an invariant of the code under test does not hold.
 */
#ifndef LUBDUB_FUZZ_H
#define LUBDUB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            __builtin_trap();                                                 \
    } while (0)

#endif
