/*
 * test_units.c — the shared work ranges of threads.c (xconv__units_init, xconv__take_unit,
 * xconv__take_units): every unit is handed out exactly once, in runs of consecutive units no
 * longer than asked for, whatever the threads' interleaving; a thread alone first takes its
 * own range from the front, then the other ranges from the back.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/internal.h"
#include "harness.h"

enum { MAX_THREADS = 4, MAX_UNITS = 5000 };

typedef struct share {
    _Alignas(64) _Atomic uint64_t left[MAX_THREADS * XCONV_UNITS_STRIDE];
    _Atomic int taken[MAX_UNITS];
    _Atomic int bad_runs;  /* runs longer than asked, empty, or outside [0, units) */
    int nthreads, most;
    int64_t units;
} share;

typedef struct worker {
    share *s;
    int self;
} worker;

static void *take_all(void *arg)
{
    const worker *w = arg;
    share *s = w->s;
    int64_t first, count, unit;
    for (;;) {
        if (s->most == 1 ? !xconv__take_unit(s->left, s->nthreads, w->self, &unit)
                         : !xconv__take_units(s->left, s->nthreads, w->self, s->most, &first, &count))
            break;
        if (s->most == 1) first = unit, count = 1;
        if (count < 1 || count > s->most || first < 0 || first + count > s->units) {
            atomic_fetch_add(&s->bad_runs, 1);
            continue;
        }
        for (int64_t i = first; i < first + count; i++) atomic_fetch_add(&s->taken[i], 1);
    }
    return NULL;
}

/* nthreads threads take every unit concurrently. */
static void check_concurrent(int nthreads, int64_t units, int most)
{
    share *s = calloc(1, sizeof *s);
    s->nthreads = nthreads, s->most = most, s->units = units;
    xconv__units_init(s->left, nthreads, units);
    pthread_t tid[MAX_THREADS];
    worker w[MAX_THREADS];
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){s, i};
        pthread_create(&tid[i], NULL, take_all, &w[i]);
    }
    for (int i = 0; i < nthreads; i++) pthread_join(tid[i], NULL);
    int wrong = 0;
    for (int64_t i = 0; i < units; i++) wrong += s->taken[i] != 1;
    XT_CHECK(wrong == 0 && s->bad_runs == 0, "%d threads, %lld units, %d at once: %d units not taken once, %d bad runs",
             nthreads, (long long)units, most, wrong, (int)s->bad_runs);
    free(s);
}

/* Thread 1 of three takes everything alone: its own range [4, 8) from the front in runs of
 * 3, then thread 2's [8, 12) and thread 0's [0, 4), each from the back. */
static void check_order(void)
{
    share *s = calloc(1, sizeof *s);
    xconv__units_init(s->left, 3, 12); /* thread 0: [0, 4), 1: [4, 8), 2: [8, 12) */
    const int64_t want[][2] = {{4, 3}, {7, 1}, {9, 3}, {8, 1}, {1, 3}, {0, 1}};
    int64_t first, count;
    for (int i = 0; i < 6; i++) {
        const bool got = xconv__take_units(s->left, 3, 1, 3, &first, &count);
        XT_CHECK(got && first == want[i][0] && count == want[i][1],
                 "run %d: got %d [%lld, +%lld), want [%lld, +%lld)", i, got, (long long)first, (long long)count,
                 (long long)want[i][0], (long long)want[i][1]);
    }
    XT_CHECK(!xconv__take_units(s->left, 3, 1, 3, &first, &count), "a unit left after all were taken");
    free(s);
}

int main(void)
{
    check_order();
    const int64_t sizes[] = {0, 1, 2, 7, 64, 1001, MAX_UNITS};
    for (int t = 1; t <= MAX_THREADS; t++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (int most = 1; most <= 5; most++)
                for (int rep = 0; rep < 4; rep++) check_concurrent(t, sizes[i], most);
    return xt_finish("test_units");
}
