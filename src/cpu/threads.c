/*
 * threads.c — the context and its thread pool. parallel_for splits a range statically
 * (chunk t of T is always the same indices), so work that depends only on the index gives
 * bit-identical results for any thread count. The calling thread runs chunk 0; a nested
 * parallel_for (an engine calling a threaded helper) runs inline rather than deadlock.
 *
 * Hand-offs spin before they sleep: a worker polls for the next job, and the caller for the
 * workers' completion, for about XCONV_SPIN_US microseconds (default 1000; 0 = never spin)
 * before falling back to the condition variables. Waking a sleeping thread costs tens of
 * microseconds on a virtual machine, as much as a whole small convolution; OpenMP runtimes
 * spin the same way.
 */
#include "core/internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

struct xconv_context {
    int   threads;
    int   cuda_device;
    void *cuda_stream;

    pthread_t      *workers;     /* threads - 1 of them */
    pthread_mutex_t mu;
    pthread_cond_t  wake, done;
    _Atomic unsigned long generation; /* bumped per job, under mu */
    _Atomic int     pending;     /* workers still running the current job */
    bool            shutdown;
    xconv_slot_fn   fn;
    void           *arg;
    int64_t         count;
};

static _Thread_local bool in_pool_task;

static void chunk(int64_t count, int parts, int t, int64_t *b, int64_t *e)
{
    *b = count * t / parts;
    *e = count * (t + 1) / parts;
}

typedef struct worker_arg { xconv_context *ctx; int index; } worker_arg;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* How long hand-offs spin before sleeping, read once. */
static double spin_us(void)
{
    static _Atomic long cached = -1;
    long v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("XCONV_SPIN_US");
        v = e && *e ? atol(e) : 1000;
        if (v < 0) v = 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (double)v;
}

static bool job_posted(const xconv_context *ctx, unsigned long seen)
{
    return atomic_load_explicit(&ctx->generation, memory_order_acquire) != seen;
}

static bool job_done(const xconv_context *ctx, unsigned long unused)
{
    (void)unused;
    return atomic_load_explicit(&ctx->pending, memory_order_acquire) == 0;
}

/* Polls ready(ctx, arg) for up to spin_us(): true once it holds, false when the time runs
 * out (the caller then sleeps on a condition variable). */
static bool spin_until(bool (*ready)(const xconv_context *, unsigned long), const xconv_context *ctx,
                       unsigned long arg)
{
    const double limit = spin_us();
    const double t0 = limit > 0 ? now_us() : 0;
    for (unsigned i = 1; limit > 0; i++) {
        if (ready(ctx, arg)) return true;
        if (i < 64) cpu_relax();
        else sched_yield(); /* lets a thread we wait for run when the cores are shared */
        if (i % 16 == 0 && now_us() - t0 > limit) return false;
    }
    return false;
}

static void *worker_main(void *p)
{
    worker_arg wa = *(worker_arg *)p;
    free(p);
    xconv_context *ctx = wa.ctx;
    unsigned long seen = 0;
    in_pool_task = true;
    for (;;) {
        /* the job's fields are written under mu before the generation moves; taking mu after
         * seeing it move (spinning or woken) orders those reads */
        (void)spin_until(job_posted, ctx, seen);
        pthread_mutex_lock(&ctx->mu);
        while (!ctx->shutdown && atomic_load(&ctx->generation) == seen)
            pthread_cond_wait(&ctx->wake, &ctx->mu);
        if (ctx->shutdown) break;
        seen = atomic_load(&ctx->generation);
        xconv_slot_fn fn = ctx->fn;
        void *arg = ctx->arg;
        int64_t count = ctx->count, b, e;
        pthread_mutex_unlock(&ctx->mu);
        chunk(count, ctx->threads, wa.index, &b, &e);
        if (b < e) fn(arg, b, e, wa.index);
        if (atomic_fetch_sub_explicit(&ctx->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&ctx->mu); /* the caller may be asleep on done */
            pthread_cond_signal(&ctx->done);
            pthread_mutex_unlock(&ctx->mu);
        }
    }
    pthread_mutex_unlock(&ctx->mu);
    return NULL;
}

void xconv__parallel_for_slot(xconv_context *ctx, int64_t count, xconv_slot_fn fn, void *arg)
{
    if (count <= 0) return;
    if (!ctx || ctx->threads <= 1 || count == 1 || in_pool_task || !ctx->workers) {
        fn(arg, 0, count, 0);
        return;
    }
    pthread_mutex_lock(&ctx->mu);
    ctx->fn = fn;
    ctx->arg = arg;
    ctx->count = count;
    atomic_store(&ctx->pending, ctx->threads - 1);
    atomic_fetch_add_explicit(&ctx->generation, 1, memory_order_release);
    pthread_cond_broadcast(&ctx->wake);
    pthread_mutex_unlock(&ctx->mu);

    int64_t b, e;
    chunk(count, ctx->threads, 0, &b, &e);
    in_pool_task = true;
    if (b < e) fn(arg, b, e, 0);
    in_pool_task = false;
    if (spin_until(job_done, ctx, 0)) return;
    pthread_mutex_lock(&ctx->mu);
    while (atomic_load(&ctx->pending) > 0) pthread_cond_wait(&ctx->done, &ctx->mu);
    pthread_mutex_unlock(&ctx->mu);
}

typedef struct range_adapter { xconv_range_fn fn; void *arg; } range_adapter;

static void run_range(void *p, int64_t begin, int64_t end, int slot)
{
    (void)slot;
    const range_adapter *ra = p;
    ra->fn(ra->arg, begin, end);
}

void xconv__parallel_for(xconv_context *ctx, int64_t count, xconv_range_fn fn, void *arg)
{
    range_adapter ra = {fn, arg};
    xconv__parallel_for_slot(ctx, count, run_range, &ra);
}

static void stop_workers(xconv_context *ctx, int started)
{
    pthread_mutex_lock(&ctx->mu);
    ctx->shutdown = true;
    atomic_fetch_add(&ctx->generation, 1); /* ends the workers' spinning at once */
    pthread_cond_broadcast(&ctx->wake);
    pthread_mutex_unlock(&ctx->mu);
    for (int i = 0; i < started; i++) pthread_join(ctx->workers[i], NULL);
}

xconv_status xconv_context_create(const xconv_context_options *options, xconv_context **out,
                                  xconv_error *err)
{
    xconv__begin(err, "xconv_context_create");
    XCONV_CHECK(err, out != NULL, INVALID_ARGUMENT, "ctx", "ctx (the output pointer) is null");
    int threads = options ? options->threads : 0;
    XCONV_CHECK(err, threads >= 0 && threads <= 1024, INVALID_ARGUMENT, "threads",
                "threads %d is not in 0..1024", threads);
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n >= 1 ? (int)(n > 1024 ? 1024 : n) : 1;
    }
    xconv_context *ctx = calloc(1, sizeof *ctx);
    XCONV_CHECK(err, ctx != NULL, OUT_OF_MEMORY, NULL, "cannot allocate a context");
    ctx->threads = threads;
    ctx->cuda_device = options ? options->cuda_device : 0;
    ctx->cuda_stream = options ? options->cuda_stream : NULL;
    pthread_mutex_init(&ctx->mu, NULL);
    pthread_cond_init(&ctx->wake, NULL);
    pthread_cond_init(&ctx->done, NULL);
    if (threads > 1) {
        ctx->workers = calloc((size_t)threads - 1, sizeof *ctx->workers);
        int started = 0;
        for (; ctx->workers && started < threads - 1; started++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) break;
            wa->ctx = ctx;
            wa->index = started + 1;
            if (pthread_create(&ctx->workers[started], NULL, worker_main, wa) != 0) {
                free(wa);
                break;
            }
        }
        if (started < threads - 1) {
            if (ctx->workers) stop_workers(ctx, started);
            free(ctx->workers);
            pthread_mutex_destroy(&ctx->mu);
            pthread_cond_destroy(&ctx->wake);
            pthread_cond_destroy(&ctx->done);
            free(ctx);
            return xconv__fail(err, XCONV_STATUS_OUT_OF_MEMORY, "threads",
                               "cannot start %d threads", threads);
        }
    }
    *out = ctx;
    return XCONV_STATUS_OK;
}

void xconv_context_destroy(xconv_context *ctx)
{
    if (!ctx || ctx == xconv__default_context()) return;
    if (ctx->workers) stop_workers(ctx, ctx->threads - 1);
    free(ctx->workers);
    pthread_mutex_destroy(&ctx->mu);
    pthread_cond_destroy(&ctx->wake);
    pthread_cond_destroy(&ctx->done);
    free(ctx);
}

int xconv_context_threads(const xconv_context *ctx) { return ctx ? ctx->threads : 1; }

int xconv__context_cuda_device(const xconv_context *ctx) { return ctx ? ctx->cuda_device : 0; }

void *xconv__context_cuda_stream(const xconv_context *ctx) { return ctx ? ctx->cuda_stream : NULL; }

/* Single-threaded and without a pool, so concurrent callers that pass NULL share it safely. */
static xconv_context default_context = {.threads = 1};

xconv_context *xconv__default_context(void) { return &default_context; }

void xconv__units_init(void *left, int nthreads, int64_t units)
{
    _Atomic uint64_t *l = left;
    for (int i = 0; i < nthreads; i++)
        atomic_init(&l[i * XCONV_UNITS_STRIDE],
                    (uint64_t)(units * i / nthreads) | (uint64_t)(units * (i + 1) / nthreads) << 32);
}

bool xconv__take_units(void *left, int nthreads, int self, int64_t most, int64_t *first, int64_t *count)
{
    _Atomic uint64_t *l = left;
    for (int k = 0; k < nthreads; k++) {
        _Atomic uint64_t *r = &l[(self + k) % nthreads * XCONV_UNITS_STRIDE];
        uint64_t v = atomic_load_explicit(r, memory_order_relaxed);
        while ((uint32_t)v < (uint32_t)(v >> 32)) {
            const uint64_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
            const uint64_t c = hi - lo < (uint64_t)most ? hi - lo : (uint64_t)most;
            const uint64_t take = k == 0 ? v + c : v - (c << 32);
            if (atomic_compare_exchange_weak_explicit(r, &v, take, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *first = (int64_t)(k == 0 ? lo : hi - c);
                *count = (int64_t)c;
                return true;
            }
        }
    }
    return false;
}

bool xconv__take_unit(void *left, int nthreads, int self, int64_t *unit)
{
    int64_t count;
    return xconv__take_units(left, nthreads, self, 1, unit, &count);
}
