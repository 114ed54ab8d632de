/*
 * fma_peak.c — the machine's f32 FMA peak, measured: each thread runs independent chains
 * acc = acc * m + c in the widest vectors the CPU and OS allow, with more chains than FMA
 * latency x FMA ports, so the loop is bound by FMA throughput alone.
 *
 * The vector bodies carry target attributes and are chosen by cpuid at run time, so this
 * file builds with any flags on any x86-64 (and falls back to plain C elsewhere).
 * Assumes: the loop is compiled with optimization and without sanitizers (cmake/bench.cmake
 * forces -O2 -fno-sanitize=all for this file, so a Debug or ASan build still measures the
 * hardware, not the compiler).
 */
#include "bench.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BENCH_X86 1
#include <immintrin.h>
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* m < 1 with c > 0 makes every chain converge to c / (1 - m): no overflow, no denormals. */
#define FMA_M 0.9999999f
#define FMA_C 1e-7f

#ifdef BENCH_X86
enum { CHAINS_512 = 16, CHAINS_256 = 12 }; /* 32 zmm / 16 ymm registers, minus constants */

__attribute__((target("avx512f"))) static double loop_avx512(uint64_t iters)
{
    __m512 acc[CHAINS_512];
    const __m512 m = _mm512_set1_ps(FMA_M), c = _mm512_set1_ps(FMA_C);
#pragma GCC unroll 16
    for (int j = 0; j < CHAINS_512; j++) acc[j] = _mm512_set1_ps((float)j);
    for (uint64_t i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < CHAINS_512; j++) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
    }
#pragma GCC unroll 16
    for (int j = 1; j < CHAINS_512; j++) acc[0] = _mm512_add_ps(acc[0], acc[j]);
    /* The volatile sink keeps the chains alive: their result is otherwise unused. */
    volatile float sink = _mm512_reduce_add_ps(acc[0]);
    (void)sink;
    return (double)iters * CHAINS_512 * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double loop_avx2(uint64_t iters)
{
    __m256 acc[CHAINS_256];
    const __m256 m = _mm256_set1_ps(FMA_M), c = _mm256_set1_ps(FMA_C);
#pragma GCC unroll 12
    for (int j = 0; j < CHAINS_256; j++) acc[j] = _mm256_set1_ps((float)j);
    for (uint64_t i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < CHAINS_256; j++) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
    }
#pragma GCC unroll 12
    for (int j = 1; j < CHAINS_256; j++) acc[0] = _mm256_add_ps(acc[0], acc[j]);
    float out[8];
    _mm256_storeu_ps(out, acc[0]);
    volatile float sink = out[0];
    (void)sink;
    return (double)iters * CHAINS_256 * 8 * 2;
}
#endif

static double loop_scalar(uint64_t iters)
{
    float acc[8];
    for (int j = 0; j < 8; j++) acc[j] = (float)j;
    for (uint64_t i = 0; i < iters; i++)
        for (int j = 0; j < 8; j++) acc[j] = acc[j] * FMA_M + FMA_C;
    volatile float sink = acc[0] + acc[7];
    (void)sink;
    return (double)iters * 8 * 2;
}

typedef double (*loop_fn)(uint64_t iters);

static loop_fn pick(const char **isa)
{
#ifdef BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *isa = "avx512f";
        return loop_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *isa = "avx2+fma";
        return loop_avx2;
    }
#endif
    *isa = "scalar";
    return loop_scalar;
}

typedef struct job {
    loop_fn  fn;
    uint64_t iters;
    double   flops;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    j->flops = j->fn(j->iters);
    return NULL;
}

/* All threads run `iters` iterations at once; returns GFLOP/s over the wall time. */
static double run_threads(loop_fn fn, int threads, uint64_t iters)
{
    job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!jobs || !tids) {
        free(jobs);
        free(tids);
        return 0;
    }
    double t0 = now_s(), flops = 0;
    int started = 0;
    for (int t = 1; t < threads; t++) {
        jobs[t] = (job){fn, iters, 0};
        if (pthread_create(&tids[t], NULL, job_main, &jobs[t]) != 0) break;
        started = t;
    }
    jobs[0] = (job){fn, iters, 0};
    job_main(&jobs[0]);
    for (int t = 1; t <= started; t++) pthread_join(tids[t], NULL);
    double dt = now_s() - t0;
    for (int t = 0; t <= started; t++) flops += jobs[t].flops;
    free(jobs);
    free(tids);
    return dt > 0 ? flops / dt * 1e-9 : 0;
}

double bench_fma_peak(int threads, double seconds, const char **isa)
{
    const char *name;
    loop_fn fn = pick(&name);
    if (isa) *isa = name;
    if (threads < 1) threads = 1;

    /* Size the loop from a short single-thread run, then keep the best of several short
     * trials: other work (in a VM, other guests too) can only slow a trial down, and short
     * trials spread over the time given are likelier to find a quiet moment than one long
     * one. */
    enum { TRIALS = 12 };
    uint64_t probe = 1u << 16;
    double t0 = now_s();
    fn(probe);
    double dt = now_s() - t0;
    uint64_t iters = probe;
    if (dt > 0) {
        double want = (double)probe * (seconds / TRIALS) / dt;
        iters = want < (double)probe ? probe : (uint64_t)want;
    }
    double best = 0;
    for (int r = 0; r < TRIALS; r++) {
        double g = run_threads(fn, threads, iters);
        if (g > best) best = g;
    }
    return best;
}
