/* SPDX-License-Identifier: Apache-2.0
 *
 * Shared by the libFuzzer targets: an invariant check that aborts (which
 * libFuzzer records as a crash, with the input), and the "a refused decode
 * leaves its record zeroed" test.
 */
#ifndef LAZARET_TESTS_FUZZ_CHECK_H
#define LAZARET_TESTS_FUZZ_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s: invariant violated at %s:%d: %s\n", FUZZ_NAME, __FILE__,          \
                    __LINE__, #cond);                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline bool zeroed(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

#endif
