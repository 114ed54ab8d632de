/*
 * cuda_bench.c — `xconv bench --device cuda`: xconv's plan API on CUDA tensors against cuDNN
 * (peer_cudnn.c) in the same process, on the suite's "gpu" list.
 *
 * Per entry and dtype:
 *   data     random x and w made on the host (floats uniform in [-1, 1) rounded to the
 *            dtype; signed integers in [-128, 127], unsigned x in [0, 255] and w in [0, 127])
 *            directly in the bench's layout, copied to the device once. x is shared: xconv
 *            and cuDNN read the same bytes. w is moved to each side's weight layout.
 *   xconv    one plan (xconv_plan_create on a context with the bench's CUDA stream), its
 *            workspace cudaMalloc'ed once, no bias; xconv_plan_execute runs asynchronously.
 *   cuDNN    see peer_cudnn.c; same stream.
 *   rotation when x + y of one run fit twice in the L2 cache, each side cycles through
 *            several copies of x and y (enough that 2 x L2 bytes lie between two uses of the
 *            same copy, at most 16), so a timed run does not find its input in L2 from the
 *            run before it, as a layer of a real network would not. Weights stay put (a
 *            network reads its weights once per layer, too). --no-rotate turns it off.
 *   check    after one warm-up run of each side, xconv's y against cuDNN's, element for
 *            element in the common layout: relative L2 error |a - b| / |b| against the
 *            dtype's tolerance (bench_tolerance: bf16 1.6e-2, f16 2e-3, f32 1e-4, f64
 *            1e-10); beyond it a MISMATCH line, and the exit status is 1. A NaN in xconv's y
 *            (its buffer starts as all-ones bytes, a NaN in every float format) fails too.
 *   timing   each side: one more run timed alone with CUDA events gives the runs per batch
 *            (enough for --min-time, default 20 ms); then --reps batches per side,
 *            interleaved (xconv batch, cuDNN batch, xconv batch, ...), each batch CUDA-event
 *            timed on the stream from its first launch to its last completion; the figure is
 *            the median batch's time per run. Reps are cut (down to 3) when a round would
 *            exceed --budget seconds.
 *   ceilings before the table: the bf16 matrix rate (cublasGemmEx 8192^3, bf16 in and out,
 *            f32 compute, random data; cuBLAS loaded with dlopen like cuDNN) and the
 *            device-to-device copy rate (cudaMemcpyAsync of 1 GiB, bytes read + written).
 *            Without cuBLAS the matrix rate is the constant 675 TFLOP/s measured on this
 *            project's H200 before (GPU.md), and the header says so.
 *   figures  TFLOP/s = DESIGN.md §6 FLOPs / median time; %mm = xconv over the bf16 matrix
 *            rate (for every dtype); for depthwise entries (groups == cin) TB/s over the
 *            fewest bytes a run moves (x, w, y once each) and %bw of the copy rate;
 *            ratio = xconv / cuDNN (TFLOP/s).
 */
#include "bench_cuda.h"
#include "args.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef XCONV_HAVE_CUDA

#include <cjson/cJSON.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#if defined(__has_include)
#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define HAVE_CUBLAS_HEADER 1
#endif
#endif

enum { MAX_REPS = 101, MAX_BUF = 16 };

static const double DOCUMENTED_MATMUL_TFLOPS = 675.0; /* GPU.md: torch bf16 8192^3 on H200 */

int bench_cuda_check(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "no usable CUDA device (cudaGetDeviceCount: %s)",
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    if (n < 1) {
        snprintf(why, whylen, "no CUDA device (cudaGetDeviceCount found none)");
        return -1;
    }
    return 0;
}

/* ---- random data in the bench's layout --------------------------------------------------- */


/* Element i of a float buffer as a double (the dtypes cuDNN is compared in). */
static double get_f(xconv_dtype dt, const void *buf, int64_t i)
{
    const uint8_t *p = (const uint8_t *)buf + (size_t)i * xconv_dtype_size(dt);
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case XCONV_DTYPE_BF16: memcpy(&h, p, 2); return xconv_bf16_to_f32(h);
    case XCONV_DTYPE_F16: memcpy(&h, p, 2); return xconv_f16_to_f32(h);
    case XCONV_DTYPE_F32: memcpy(&f, p, 4); return f;
    case XCONV_DTYPE_F64: memcpy(&d, p, 8); return d;
    default: return NAN;
    }
}

/* |a - b| / |b| over count elements (INFINITY on a NaN). */
static double rel_l2(xconv_dtype dt, const void *a, const void *b, int64_t count)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < count; i++) {
        double x = get_f(dt, a, i), y = get_f(dt, b, i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    if (isnan(num)) return INFINITY;
    if (num == 0) return 0;
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* ---- library lookup (cuBLAS for the matrix rate) ------------------------------------------ */

/* The folder of Python's `nvidia` namespace package (PyTorch's CUDA wheels), or "". */
static void python_nvidia_root(char *dir, size_t len)
{
    dir[0] = '\0';
    FILE *f = popen("python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null",
                    "r");
    if (!f) return;
    if (!fgets(dir, (int)len, f)) dir[0] = '\0';
    pclose(f);
    dir[strcspn(dir, "\n")] = '\0';
}

static void *open_cublas(void)
{
    const char *env = getenv("XCONV_CUBLAS_LIB");
    void *h = env && env[0] ? dlopen(env, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!h) h = dlopen("libcublas.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!h) h = dlopen("libcublas.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        char root[1024], path[1100];
        python_nvidia_root(root, sizeof root);
        if (root[0]) {
            snprintf(path, sizeof path, "%s/cu13/lib/libcublas.so.13", root);
            h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            if (!h) {
                snprintf(path, sizeof path, "%s/cublas/lib/libcublas.so.13", root);
                h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            }
        }
    }
    return h;
}

/* ---- timing -------------------------------------------------------------------------------- */

typedef struct side {
    const char *name;
    int       (*run)(void *state, char *why, size_t whylen);
    void       *state;
    int64_t     per_batch;
    double      seconds;      /* median seconds per run */
    double      times[MAX_REPS];
    bool        ok;
    char        why[256];
} side;

static cudaStream_t stream;
static cudaEvent_t  ev0, ev1;

/* Seconds per run of `runs` runs of side s, CUDA-event timed on the stream. */
static double time_batch(side *s, int64_t runs)
{
    cudaEventRecord(ev0, stream);
    for (int64_t i = 0; i < runs && s->ok; i++)
        if (s->run(s->state, s->why, sizeof s->why) != 0) s->ok = false;
    cudaEventRecord(ev1, stream);
    cudaError_t e = cudaEventSynchronize(ev1);
    if (e != cudaSuccess) {
        snprintf(s->why, sizeof s->why, "%s", cudaGetErrorString(e));
        s->ok = false;
        return 0;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, ev0, ev1);
    return (double)ms * 1e-3 / (double)runs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int time_sides(const bench_cuda_options *o, side *sides, int nsides)
{
    double round_s = 0;
    for (int i = 0; i < nsides; i++) {
        side *s = &sides[i];
        if (!s->ok) continue;
        double t = time_batch(s, 1);
        if (t < 1e-4 && s->ok) t = time_batch(s, 10); /* launch-bound: a steadier estimate */
        s->per_batch = t >= o->min_time || t <= 0 ? 1 : (int64_t)ceil(o->min_time / t);
        if (s->per_batch > 10000) s->per_batch = 10000;
        round_s += t * (double)s->per_batch;
    }
    const int reps = bench_fit_reps(o->reps, round_s, o->budget);
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nsides; i++)
            if (sides[i].ok) sides[i].times[r] = time_batch(&sides[i], sides[i].per_batch);
    for (int i = 0; i < nsides; i++) {
        side *s = &sides[i];
        if (!s->ok) continue;
        if (o->verbose) {
            fprintf(stderr, "  %-6s %6lld runs/batch, ms/run:", s->name,
                    (long long)s->per_batch);
            for (int r = 0; r < reps; r++) fprintf(stderr, " %.4g", s->times[r] * 1e3);
            fprintf(stderr, "\n");
        }
        double t[MAX_REPS];
        memcpy(t, s->times, sizeof(double) * (size_t)reps);
        qsort(t, (size_t)reps, sizeof(double), cmp_double);
        s->seconds = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    }
    return reps;
}

/* ---- the machine's ceilings --------------------------------------------------------------- */

typedef struct ceilings {
    char   gpu[256];
    int    sms;
    size_t l2_bytes;
    double matmul_tflops;   /* measured, or the documented constant */
    bool   matmul_measured;
    char   matmul_how[320];
    double copy_tbs;
} ceilings;

static double median_of(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double measure_matmul(char *how, size_t howlen)
{
#ifdef HAVE_CUBLAS_HEADER
    void *h = open_cublas();
    if (!h) {
        snprintf(how, howlen, "cuBLAS not found (XCONV_CUBLAS_LIB)");
        return 0;
    }
    __typeof__(cublasCreate_v2) *create = (__typeof__(cublasCreate_v2) *)dlsym(h, "cublasCreate_v2");
    __typeof__(cublasSetStream_v2) *set_stream =
        (__typeof__(cublasSetStream_v2) *)dlsym(h, "cublasSetStream_v2");
    __typeof__(cublasGemmEx) *gemm = (__typeof__(cublasGemmEx) *)dlsym(h, "cublasGemmEx");
    __typeof__(cublasDestroy_v2) *destroy =
        (__typeof__(cublasDestroy_v2) *)dlsym(h, "cublasDestroy_v2");
    if (!create || !set_stream || !gemm || !destroy) {
        snprintf(how, howlen, "cuBLAS lacks cublasGemmEx");
        return 0;
    }
    cublasHandle_t handle;
    if (create(&handle) != CUBLAS_STATUS_SUCCESS) {
        snprintf(how, howlen, "cublasCreate failed");
        return 0;
    }
    set_stream(handle, stream);
    const int n = 8192;
    size_t bytes = (size_t)n * n * 2;
    void *a = NULL, *b = NULL, *c = NULL;
    void *host = malloc(bytes);
    double rate = 0;
    if (host && cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
        cudaMalloc(&c, bytes) == cudaSuccess) {
        bench_fill(XCONV_DTYPE_BF16, host, (int64_t)n * n, 7, false);
        cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice);
        bench_fill(XCONV_DTYPE_BF16, host, (int64_t)n * n, 8, false);
        cudaMemcpy(b, host, bytes, cudaMemcpyHostToDevice);
        float one = 1, zero = 0;
        bool ok = true;
        for (int i = 0; i < 3 && ok; i++)
            ok = gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
                      CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
        double t[5];
        for (int r = 0; r < 5 && ok; r++) {
            cudaEventRecord(ev0, stream);
            for (int i = 0; i < 10; i++)
                gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
                     CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
            cudaEventRecord(ev1, stream);
            cudaEventSynchronize(ev1);
            float ms = 0;
            cudaEventElapsedTime(&ms, ev0, ev1);
            t[r] = ms * 1e-3 / 10;
        }
        if (ok) {
            rate = 2.0 * n * (double)n * n / median_of(t, 5) * 1e-12;
            snprintf(how, howlen, "cublasGemmEx bf16 8192^3, median of 5 x 10");
        } else {
            snprintf(how, howlen, "cublasGemmEx failed");
        }
    } else {
        snprintf(how, howlen, "out of memory for the matrix product");
    }
    (void)cudaGetLastError();
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    free(host);
    destroy(handle);
    return rate;
#else
    snprintf(how, howlen, "built without cuBLAS's header");
    return 0;
#endif
}

static double measure_copy(void)
{
    size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    double rate = 0;
    if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess) {
        cudaMemsetAsync(a, 0x5a, bytes, stream);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
        double t[5];
        for (int r = 0; r < 5; r++) {
            cudaEventRecord(ev0, stream);
            for (int i = 0; i < 5; i++) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
            cudaEventRecord(ev1, stream);
            cudaEventSynchronize(ev1);
            float ms = 0;
            cudaEventElapsedTime(&ms, ev0, ev1);
            t[r] = ms * 1e-3 / 5;
        }
        rate = 2.0 * (double)bytes / median_of(t, 5) * 1e-12;
    }
    (void)cudaGetLastError();
    cudaFree(a);
    cudaFree(b);
    return rate;
}

static void measure_ceilings(ceilings *c)
{
    memset(c, 0, sizeof *c);
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
        snprintf(c->gpu, sizeof c->gpu, "%s", prop.name);
        c->sms = prop.multiProcessorCount;
        c->l2_bytes = (size_t)prop.l2CacheSize;
    } else {
        snprintf(c->gpu, sizeof c->gpu, "unknown GPU");
        c->l2_bytes = (size_t)50 << 20;
    }
    c->copy_tbs = measure_copy();
    char how[128];
    c->matmul_tflops = measure_matmul(how, sizeof how);
    c->matmul_measured = c->matmul_tflops > 0;
    if (c->matmul_measured) {
        snprintf(c->matmul_how, sizeof c->matmul_how, "%s", how);
    } else {
        c->matmul_tflops = DOCUMENTED_MATMUL_TFLOPS;
        snprintf(c->matmul_how, sizeof c->matmul_how,
                 "NOT MEASURED (%s): the documented %.0f TFLOP/s of GPU.md", how,
                 DOCUMENTED_MATMUL_TFLOPS);
    }
}

/* ---- xconv as a side ----------------------------------------------------------------------- */

typedef struct xconv_side {
    xconv_plan *plan;
    const char *x;            /* nbuf copies, x_bytes apart (shared with cuDNN) */
    void       *w, *y, *ws;   /* y: nbuf copies, y_bytes apart */
    size_t      x_bytes, y_bytes, ws_bytes;
    int         nbuf, next;
    xconv_error err;
} xconv_side;

static int xconv_run_buf(xconv_side *s, int b, char *why, size_t whylen)
{
    if (xconv_plan_execute(s->plan, s->x + (size_t)b * s->x_bytes, s->w, NULL,
                           (char *)s->y + (size_t)b * s->y_bytes, s->ws, s->ws_bytes,
                           &s->err) != XCONV_STATUS_OK) {
        snprintf(why, whylen, "%s: %s", xconv_status_name(s->err.status), s->err.description);
        return -1;
    }
    return 0;
}

static int xconv_run(void *state, char *why, size_t whylen)
{
    xconv_side *s = state;
    int b = s->next;
    s->next = (s->next + 1) % s->nbuf;
    return xconv_run_buf(s, b, why, whylen);
}

static int cudnn_run(void *state, char *why, size_t whylen)
{
    return bench_cudnn_run(state, why, whylen);
}

/* ---- one entry and dtype ------------------------------------------------------------------- */

typedef struct result {
    char   engine[64], describe[160], impl[160], unsupported[320], error[320];
    double xconv_s, cudnn_s;    /* median seconds per run; cudnn_s 0: not timed */
    int64_t xconv_batch, cudnn_batch;
    double min_bytes;
    int    reps, nbuf;
    bool   checked, mismatch;
    double err, tolerance;
} result;

static bool is_depthwise(const bench_problem *p)
{
    return p->op == XCONV_OP_CONV && p->groups == p->cin && p->groups > 1;
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static void bench_one(xconv_context *ctx, const bench_cuda_options *o, const ceilings *c,
                      const bench_problem *p, xconv_dtype xt, xconv_dtype yt, result *r)
{
    memset(r, 0, sizeof *r);
    bool last = o->layout == XCONV_LAYOUT_CHANNELS_LAST;
    int rank = p->rank + 2;
    size_t es = xconv_dtype_size(xt), ys = xconv_dtype_size(yt);
    int64_t xn = bench_x_elems(p), wn = bench_w_elems(p), yn = bench_y_elems(p);
    r->min_bytes = (double)xn * es + (double)wn * es + (double)yn * ys;
    size_t xb = (size_t)round_up((int64_t)((size_t)xn * es), 256);
    size_t yb = (size_t)round_up((int64_t)((size_t)yn * ys), 256);
    int nbuf = 1;
    if (o->rotate && xb + yb > 0) {
        double want = 2.0 * (double)c->l2_bytes / (double)(xb + yb);
        nbuf = want > 1 ? (int)ceil(want) : 1;
        if (nbuf > MAX_BUF) nbuf = MAX_BUF;
    }
    r->nbuf = nbuf;

    /* Shapes in the layout. */
    int64_t x_shape[XCONV_MAX_RANK], w_shape[XCONV_MAX_RANK], y_shape[XCONV_MAX_RANK];
    xconv_params params;
    bench_layout_problem(p, o->layout, x_shape, w_shape, &params);

    xconv_side xs = {0};
    bench_cudnn *cd = NULL;
    void *xh = malloc((size_t)xn * es + 1), *wpt = malloc((size_t)wn * es + 1);
    void *wx = malloc((size_t)wn * es + 1);
    void *ya = NULL, *yc = NULL;
    void *xd = NULL;
    if (!xh || !wpt || !wx) {
        snprintf(r->error, sizeof r->error, "out of memory");
        goto done;
    }
    if (xconv_output_shape(&params, x_shape, w_shape, y_shape, &xs.err) != XCONV_STATUS_OK) {
        snprintf(r->error, sizeof r->error, "%s", xs.err.description);
        goto done;
    }
    bench_fill(xt, xh, xn, 1, false);
    bench_fill(xt, wpt, wn, 2, true);
    if (last) bench_weight_to_okc(p, wpt, wx, es);
    else memcpy(wx, wpt, (size_t)wn * es);

    cudaError_t ce = cudaMalloc(&xd, xb * (size_t)nbuf + 1);
    for (int b = 0; b < nbuf && ce == cudaSuccess; b++)
        ce = cudaMemcpy((char *)xd + (size_t)b * xb, xh, (size_t)xn * es, cudaMemcpyHostToDevice);
    if (ce == cudaSuccess) ce = cudaMalloc(&xs.w, (size_t)wn * es + 1);
    if (ce == cudaSuccess) ce = cudaMemcpy(xs.w, wx, (size_t)wn * es, cudaMemcpyHostToDevice);
    if (ce == cudaSuccess) ce = cudaMalloc(&xs.y, yb * (size_t)nbuf + 1);
    /* All-ones bytes: NaN in every float format, so an unwritten y cannot pass the check. */
    if (ce == cudaSuccess) ce = cudaMemset(xs.y, 0xff, yb * (size_t)nbuf);
    if (ce != cudaSuccess) {
        snprintf(r->error, sizeof r->error, "device buffers: %s", cudaGetErrorString(ce));
        (void)cudaGetLastError();
        goto done;
    }
    xs.x = xd;
    xs.x_bytes = xb;
    xs.y_bytes = yb;
    xs.nbuf = nbuf;

    xconv_tensor x = xconv_tensor_contiguous(xt, rank, x_shape, xd);
    xconv_tensor w = xconv_tensor_contiguous(xt, rank, w_shape, xs.w);
    xconv_tensor y = xconv_tensor_contiguous(yt, rank, y_shape, xs.y);
    x.device = w.device = y.device = XCONV_DEVICE_CUDA;
    /* cuDNN's weights sit in its filter layout before timing; xconv's plans may likewise
     * prepare theirs once (constant_weights) unless --pack-each-run. */
    xconv_plan_options popts = {.engine = o->engine, .allow_tf32 = o->allow_tf32,
                                .constant_weights = !o->pack_each_run,
                                .allow_fp8_fast_accum = o->fp8_fast};
    if (xconv_plan_create(ctx, &params, &x, &w, NULL, &y, &popts, &xs.plan, &xs.err) !=
        XCONV_STATUS_OK) {
        snprintf(r->error, sizeof r->error, "%s: %s", xconv_status_name(xs.err.status),
                 xs.err.description);
        xs.plan = NULL;
        goto done;
    }
    snprintf(r->engine, sizeof r->engine, "%s", xconv_plan_engine(xs.plan));
    snprintf(r->describe, sizeof r->describe, "%s", xconv_plan_describe(xs.plan));
    xs.ws_bytes = xconv_plan_workspace_size(xs.plan);
    if (xs.ws_bytes && cudaMalloc(&xs.ws, xs.ws_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(r->error, sizeof r->error, "cannot allocate the %zu-byte workspace", xs.ws_bytes);
        goto done;
    }

    if (o->cudnn) {
        int rc = bench_cudnn_create(p, xt, yt, o->layout, stream, xd, xb, nbuf, wpt, &cd,
                                    r->impl, sizeof r->impl, r->unsupported,
                                    sizeof r->unsupported);
        if (rc < 0)
            fprintf(stderr, "xconv bench: %s %s: cuDNN failed: %s\n", p->name,
                    xconv_dtype_name(xt), r->unsupported);
    } else {
        snprintf(r->unsupported, sizeof r->unsupported, "not selected (--peers)");
    }

    /* Warm-up, and the check. */
    side sides[2] = {{.name = "xconv", .run = xconv_run, .state = &xs, .ok = true}};
    int nsides = 1;
    if (xconv_run_buf(&xs, 0, r->error, sizeof r->error) != 0) goto done;
    ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess) {
        snprintf(r->error, sizeof r->error, "xconv run: %s", cudaGetErrorString(ce));
        goto done;
    }
    if (cd) {
        char why[256];
        const void *ycd = bench_cudnn_run_first(cd, why, sizeof why);
        if (ycd && (ce = cudaStreamSynchronize(stream)) != cudaSuccess)
            snprintf(why, sizeof why, "%s", cudaGetErrorString(ce)), ycd = NULL;
        if (!ycd) {
            snprintf(r->unsupported, sizeof r->unsupported, "run failed: %s", why);
            fprintf(stderr, "xconv bench: %s %s: cuDNN run failed: %s\n", p->name,
                    xconv_dtype_name(xt), why);
            bench_cudnn_destroy(cd);
            cd = NULL;
        } else {
            ya = malloc((size_t)yn * ys + 1);
            yc = malloc((size_t)yn * ys + 1);
            if (ya && yc && cudaMemcpy(ya, xs.y, (size_t)yn * ys, cudaMemcpyDeviceToHost) ==
                                cudaSuccess &&
                cudaMemcpy(yc, ycd, (size_t)yn * ys, cudaMemcpyDeviceToHost) == cudaSuccess) {
                r->checked = true;
                r->tolerance = bench_tolerance(yt);
                r->err = rel_l2(yt, ya, yc, yn);
                if (!(r->err <= r->tolerance)) {
                    r->mismatch = true;
                    fprintf(stderr,
                            "xconv bench: MISMATCH %s %s: xconv (%s) and cuDNN differ by "
                            "relative L2 error %.3g (tolerance %.3g)\n",
                            p->name, xconv_dtype_name(xt), r->engine, r->err, r->tolerance);
                }
            } else {
                fprintf(stderr, "xconv bench: %s %s: cannot read the outputs, not checked\n",
                        p->name, xconv_dtype_name(xt));
            }
            free(ya);
            free(yc);
            ya = yc = NULL;
            sides[nsides++] = (side){.name = "cudnn", .run = cudnn_run, .state = cd, .ok = true};
        }
    }

    r->reps = time_sides(o, sides, nsides);
    if (!sides[0].ok) {
        snprintf(r->error, sizeof r->error, "%s", sides[0].why);
        goto done;
    }
    r->xconv_s = sides[0].seconds;
    r->xconv_batch = sides[0].per_batch;
    if (nsides > 1) {
        if (sides[1].ok) {
            r->cudnn_s = sides[1].seconds;
            r->cudnn_batch = sides[1].per_batch;
        } else {
            snprintf(r->unsupported, sizeof r->unsupported, "failed while timing: %s",
                     sides[1].why);
        }
    }
done:
    (void)cudaStreamSynchronize(stream);
    (void)cudaGetLastError();
    bench_cudnn_destroy(cd);
    xconv_plan_destroy(xs.plan);
    cudaFree(xs.ws);
    cudaFree(xs.w);
    cudaFree(xs.y);
    cudaFree(xd);
    free(xh);
    free(wpt);
    free(wx);
}

/* ---- output -------------------------------------------------------------------------------- */

static double round2(double v) { return round(v * 100) / 100; }

static void dtype_label(xconv_dtype x, xconv_dtype y, char *buf, size_t len)
{
    if (x == y) snprintf(buf, len, "%s", xconv_dtype_name(x));
    else snprintf(buf, len, "%s:%s", xconv_dtype_name(x), xconv_dtype_name(y));
}

static cJSON *result_json(const bench_cuda_options *o, const ceilings *c, const bench_problem *p,
                          xconv_dtype xt, xconv_dtype yt, const result *r)
{
    char label[32];
    dtype_label(xt, yt, label, sizeof label);
    double flops = bench_flops(p);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", p->name);
    cJSON_AddStringToObject(j, "op", p->op_name);
    cJSON_AddStringToObject(j, "dtype", label);
    cJSON_AddNumberToObject(j, "threads", 0);
    if (r->error[0]) {
        cJSON_AddNullToObject(j, "xconv_gflops");
        cJSON_AddStringToObject(j, "error", r->error);
    } else {
        cJSON_AddNumberToObject(j, "xconv_gflops", round2(flops / r->xconv_s * 1e-9));
    }
    if (r->engine[0]) cJSON_AddStringToObject(j, "engine", r->engine);
    else cJSON_AddNullToObject(j, "engine");
    cJSON *peers = cJSON_AddObjectToObject(j, "peers");
    cJSON *impl = cJSON_CreateObject(), *unsup = cJSON_CreateObject();
    bool timed = !r->error[0] && r->cudnn_s > 0;
    if (timed) {
        cJSON_AddNumberToObject(peers, "cudnn", round2(flops / r->cudnn_s * 1e-9));
        cJSON_AddStringToObject(impl, "cudnn", r->impl);
        cJSON_AddStringToObject(j, "best_peer", "cudnn");
        cJSON_AddNumberToObject(j, "ratio", round(r->cudnn_s / r->xconv_s * 1000) / 1000);
    } else {
        if (r->unsupported[0]) cJSON_AddStringToObject(unsup, "cudnn", r->unsupported);
        cJSON_AddNullToObject(j, "best_peer");
        cJSON_AddNullToObject(j, "ratio");
    }
    cJSON_AddItemToObject(j, "peer_impl", impl);
    cJSON_AddItemToObject(j, "unsupported", unsup);
    cJSON_AddStringToObject(j, "device", "cuda");
    cJSON_AddStringToObject(j, "gpu", c->gpu);
    cJSON_AddStringToObject(j, "layout", o->layout == XCONV_LAYOUT_CHANNELS_LAST
                                             ? "channels_last" : "channels_first");
    cJSON_AddStringToObject(j, "problem", r->describe);
    cJSON_AddNumberToObject(j, "gflop", flops * 1e-9);
    cJSON_AddNumberToObject(j, "min_bytes", r->min_bytes);
    cJSON_AddNumberToObject(j, "reps", r->reps);
    cJSON_AddNumberToObject(j, "rotate_buffers", r->nbuf);
    cJSON_AddNumberToObject(j, "matmul_tflops", round2(c->matmul_tflops));
    cJSON_AddBoolToObject(j, "matmul_measured", c->matmul_measured);
    cJSON_AddNumberToObject(j, "copy_tbs", round(c->copy_tbs * 1000) / 1000);
    if (!r->error[0]) {
        double tf = flops / r->xconv_s * 1e-12, tbs = r->min_bytes / r->xconv_s * 1e-12;
        cJSON_AddNumberToObject(j, "xconv_ms", r->xconv_s * 1e3);
        cJSON_AddNumberToObject(j, "xconv_runs_per_batch", (double)r->xconv_batch);
        cJSON_AddNumberToObject(j, "xconv_tbs", round(tbs * 1000) / 1000);
        cJSON_AddNumberToObject(j, "pct_matmul", round2(100 * tf / c->matmul_tflops));
        if (is_depthwise(p) && c->copy_tbs > 0)
            cJSON_AddNumberToObject(j, "pct_copy", round2(100 * tbs / c->copy_tbs));
    }
    if (timed) {
        cJSON_AddNumberToObject(j, "cudnn_ms", r->cudnn_s * 1e3);
        cJSON_AddNumberToObject(j, "cudnn_runs_per_batch", (double)r->cudnn_batch);
        cJSON_AddNumberToObject(j, "cudnn_tbs", round(r->min_bytes / r->cudnn_s * 1e-9) / 1000);
    }
    if (r->checked) {
        cJSON *k = cJSON_AddObjectToObject(j, "check");
        cJSON_AddStringToObject(k, "against", "cudnn");
        cJSON_AddNumberToObject(k, "rel_l2_err", r->err);
        cJSON_AddNumberToObject(k, "tolerance", r->tolerance);
        cJSON_AddBoolToObject(k, "ok", !r->mismatch);
    } else {
        cJSON_AddNullToObject(j, "check");
    }
    return j;
}

static void table_header(const bench_cuda_options *o, const ceilings *c, size_t cudnn_version,
                         const char *cudnn_why)
{
    char cudnn[320];
    if (cudnn_version)
        snprintf(cudnn, sizeof cudnn, "cuDNN %zu.%zu.%zu", cudnn_version / 10000,
                 cudnn_version / 100 % 100, cudnn_version % 100);
    else
        snprintf(cudnn, sizeof cudnn, "no cuDNN (%s)", cudnn_why);
    printf("xconv %s bench --device cuda: %s (%d SMs, %.0f MB L2), %s\n", xconv_version(), c->gpu,
           c->sms, (double)c->l2_bytes / 1e6, cudnn);
    printf("bf16 matrix rate %.1f TFLOP/s (%s); device copy %.2f TB/s (read + write)\n",
           c->matmul_tflops, c->matmul_how, c->copy_tbs);
    printf("xconv layout %s (cuDNN in the same layout); inputs %s\n",
           o->layout == XCONV_LAYOUT_CHANNELS_LAST ? "channels_last" : "channels_first",
           o->rotate ? "rotated through copies beyond 2 x L2" : "not rotated");
    printf("TFLOP/s = median of interleaved CUDA-event-timed batches; %%mm = %% of the bf16 "
           "matrix rate; TB/s over x + w + y once, %%bw = %% of the copy rate (depthwise); "
           "ratio = xconv / cuDNN; check = relative L2 error of xconv against cuDNN\n\n");
    printf("%-14s %-8s %8s %5s %6s %5s %-18s %8s %6s  %-14s %s\n", "name", "dtype", "xconv",
           "%mm", "TB/s", "%bw", "engine", "cudnn", "ratio", "check", "cudnn algorithm");
}

static void table_row(const ceilings *c, const bench_problem *p, xconv_dtype xt, xconv_dtype yt,
                      const result *r)
{
    char label[32];
    dtype_label(xt, yt, label, sizeof label);
    if (r->error[0]) {
        printf("%-14s %-8s xconv FAILED: %s\n", p->name, label, r->error);
        fflush(stdout);
        return;
    }
    double flops = bench_flops(p);
    double tf = flops / r->xconv_s * 1e-12, tbs = r->min_bytes / r->xconv_s * 1e-12;
    char bw[16] = "-", peer[16] = "-", ratio[16] = "-", check[40] = "-";
    if (is_depthwise(p) && c->copy_tbs > 0) snprintf(bw, sizeof bw, "%.1f", 100 * tbs / c->copy_tbs);
    if (r->cudnn_s > 0) {
        double ptf = flops / r->cudnn_s * 1e-12;
        snprintf(peer, sizeof peer, ptf >= 10 ? "%.1f" : "%.3f", ptf);
        snprintf(ratio, sizeof ratio, "%.3f", r->cudnn_s / r->xconv_s);
    }
    if (r->checked)
        snprintf(check, sizeof check, "%s %.1e", r->mismatch ? "MISMATCH" : "ok", r->err);
    char num[16];
    snprintf(num, sizeof num, tf >= 10 ? "%.1f" : "%.3f", tf);
    printf("%-14s %-8s %8s %5.1f %6.2f %5s %-18s %8s %6s  %-14s %s\n", p->name, label, num,
           100 * tf / c->matmul_tflops, tbs, bw, r->engine, peer, ratio, check,
           r->cudnn_s > 0 ? r->impl : r->unsupported);
    fflush(stdout);
}

int bench_cuda_run(const bench_cuda_options *o, const bench_problem *probs, int nprobs)
{
    char why[320];
    if (bench_cuda_check(why, sizeof why) != 0)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--device cuda: %s", why);
    cudaError_t ce = cudaSetDevice(0);
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaEventCreate(&ev0);
    if (ce == cudaSuccess) ce = cudaEventCreate(&ev1);
    if (ce != cudaSuccess)
        return xconv_cli_fail(XCONV_EXIT_FAILURE, "bench", "--device cuda: %s",
                              cudaGetErrorString(ce));
    xconv_context *ctx = NULL;
    xconv_error err;
    xconv_context_options copts = {.threads = 1, .cuda_device = 0, .cuda_stream = stream};
    if (xconv_context_create(&copts, &ctx, &err) != XCONV_STATUS_OK)
        return xconv_cli_fail_lib(&err);

    size_t cudnn_version = 0;
    char cudnn_why[256] = "";
    bench_cuda_options opts = *o;
    if (opts.cudnn && bench_cudnn_load(cudnn_why, sizeof cudnn_why, &cudnn_version) != 0) {
        fprintf(stderr, "xconv bench: cuDNN: %s; timing xconv alone\n", cudnn_why);
        opts.cudnn = false;
    } else if (!opts.cudnn) {
        snprintf(cudnn_why, sizeof cudnn_why, "--peers none");
    }
    ceilings c;
    measure_ceilings(&c);
    if (!c.matmul_measured)
        fprintf(stderr, "xconv bench: bf16 matrix rate %s\n", c.matmul_how);
    if (!opts.json) table_header(&opts, &c, cudnn_version, cudnn_why);

    cJSON *all = cJSON_CreateArray();
    bool failed = false;
    static result r;
    for (int dt = 0; dt < opts.ndtypes; dt++) {
        double log_sum = 0, lo = INFINITY, hi = 0;
        int nratio = 0;
        xconv_dtype xt = opts.x_dtypes[dt], yt = opts.y_dtypes[dt];
        for (int i = 0; i < nprobs; i++) {
            const bench_problem *p = &probs[i];
            if (opts.filter && !strstr(p->name, opts.filter)) continue;
            if (opts.verbose) fprintf(stderr, "%s %s:\n", p->name, xconv_dtype_name(xt));
            bench_one(ctx, &opts, &c, p, xt, yt, &r);
            if (r.error[0] || r.mismatch) failed = true;
            if (!r.error[0] && r.cudnn_s > 0) {
                double q = r.cudnn_s / r.xconv_s;
                log_sum += log(q);
                nratio++;
                if (q < lo) lo = q;
                if (q > hi) hi = q;
            }
            if (opts.json)
                cJSON_AddItemToArray(all, result_json(&opts, &c, p, xt, yt, &r));
            else
                table_row(&c, p, xt, yt, &r);
        }
        char label[32];
        dtype_label(xt, yt, label, sizeof label);
        FILE *out = opts.json ? stderr : stdout;
        if (nratio)
            fprintf(out, "%sgeometric mean of xconv / cuDNN, %s %s: %.3f over %d entries "
                    "(lowest %.3f, highest %.3f)\n%s",
                    opts.json ? "xconv bench: " : "\n", label,
                    opts.layout == XCONV_LAYOUT_CHANNELS_LAST ? "channels_last" : "channels_first",
                    exp(log_sum / nratio), nratio, lo, hi, opts.json ? "" : "\n");
        else if (!opts.json)
            printf("\n");
    }
    if (opts.json) {
        char *text = cJSON_Print(all);
        if (text) puts(text);
        free(text);
    }
    cJSON_Delete(all);
    xconv_context_destroy(ctx);
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    cudaStreamDestroy(stream);
    if (failed) fprintf(stderr, "xconv bench: some entries failed or mismatched (see above)\n");
    return failed ? XCONV_EXIT_FAILURE : XCONV_EXIT_OK;
}

#else /* !XCONV_HAVE_CUDA */

int bench_cuda_check(char *why, size_t whylen)
{
    snprintf(why, whylen, "this build of xconv has no CUDA backend (configured without nvcc or "
                          "with -DXCONV_CUDA=OFF)");
    return -1;
}

int bench_cuda_run(const bench_cuda_options *o, const bench_problem *probs, int nprobs)
{
    (void)o;
    (void)probs;
    (void)nprobs;
    char why[160];
    bench_cuda_check(why, sizeof why);
    return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--device cuda: %s", why);
}

#endif
