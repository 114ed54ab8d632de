/*
 * harness.h — the tiny test harness shared by the C tests. Each test program counts its
 * checks and ends with one line "<name>: N passed, N failed"; scripts/test.sh sums them.
 */
#ifndef XCONV_TEST_HARNESS_H
#define XCONV_TEST_HARNESS_H

#include <stdio.h>

static int xt_passed;
static int xt_failed;

/* Counts one check; on failure prints where and a printf-style message. */
#define XT_CHECK(cond, ...)                                                      \
    do {                                                                         \
        if (cond) {                                                              \
            xt_passed++;                                                         \
        } else {                                                                 \
            xt_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

/* Prints the closing line and returns the process exit code. */
static inline int xt_finish(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, xt_passed, xt_failed);
    return xt_failed ? 1 : 0;
}

#endif
