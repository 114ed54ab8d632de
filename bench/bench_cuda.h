/*
 * bench_cuda.h — `xconv bench --device cuda` (cuda_bench.c) and its peer, cuDNN
 * (peer_cudnn.c, loaded at run time with dlopen).
 *
 * Unlike the CPU bench, data never travels in the logical channels-first form: x, w and y
 * live on the device in the layout the bench runs (--layout), and xconv and cuDNN read the
 * same x bytes (cuDNN's NHWC/NDHWC in channels-last, NCHW/NCDHW in channels-first), so their
 * outputs are compared element for element in that layout.
 */
#ifndef XCONV_BENCH_BENCH_CUDA_H
#define XCONV_BENCH_BENCH_CUDA_H

#include "bench.h"

#include <stdbool.h>
#include <stddef.h>

/* What `xconv bench --device cuda` was asked (tools/cmd_bench.c parses it). */
typedef struct bench_cuda_options {
    const char        *filter, *engine;
    const xconv_dtype *x_dtypes, *y_dtypes;
    int                ndtypes;
    xconv_layout       layout;
    int                reps;
    double             min_time, budget;
    bool               json, verbose, cudnn, rotate, pack_each_run, allow_tf32;
    bool               fp8_fast; /* --allow-fp8-fast-accum: xconv_plan_options.allow_fp8_fast_accum */
} bench_cuda_options;

/*
 * 0 when this build has the CUDA backend and a CUDA device answers; otherwise -1 and why in
 * `why` ("this build of xconv has no CUDA backend ...", "no CUDA device: ...").
 */
int bench_cuda_check(char *why, size_t whylen);

/* Runs the problems (already filtered by the caller's suite loading; `filter` still
 * applies) and prints the table or JSON. Returns the command's exit code. */
int bench_cuda_run(const bench_cuda_options *o, const bench_problem *probs, int nprobs);

/* ---- cuDNN (peer_cudnn.c) ---------------------------------------------------------------- */

typedef struct bench_cudnn bench_cudnn;

/*
 * Loads cuDNN once (XCONV_CUDNN_LIB: the library file or its folder; then "libcudnn.so.9"
 * and "libcudnn.so" through the loader's search path; then the lib folder of the Python
 * package nvidia.cudnn, as PyTorch ships it) and creates a handle. Returns 0, or -1 with why
 * in `why`. *version receives cudnnGetVersion() (e.g. 91900).
 */
int bench_cudnn_load(char *why, size_t whylen, size_t *version);

/*
 * A cuDNN convolution (conv: cudnnConvolutionForward; conv_transpose:
 * cudnnConvolutionBackwardData) of the problem in dtype xt (y yt) and `layout`, on `stream`
 * (a cudaStream_t). `x_dev` points at `nbuf` device copies of x, each `x_bytes` apart, in the
 * layout; `w_pt_host` is PyTorch's weight layout on the host (the peer moves it to cuDNN's
 * filter layout on the device); y gets `nbuf` device buffers of its own. The algorithm is
 * chosen by cudnnFind*AlgorithmEx on these buffers, its workspace allocated here, outside
 * timing. Returns 0; or 1 when cuDNN cannot run it (why in `why`: shown as '-'); or -1 on a
 * failure (why in `why`). `impl` receives the algorithm and math type.
 */
int bench_cudnn_create(const bench_problem *p, xconv_dtype xt, xconv_dtype yt,
                       xconv_layout layout, void *stream, const void *x_dev, size_t x_bytes,
                       int nbuf, const void *w_pt_host, bench_cudnn **out, char *impl,
                       size_t impllen, char *why, size_t whylen);

/* One run on the next of the peer's buffers (asynchronous). 0, or -1 (why in `why`). */
int bench_cudnn_run(bench_cudnn *s, char *why, size_t whylen);

/* Runs on buffer 0 and returns that y's device pointer (for the check); NULL on failure. */
const void *bench_cudnn_run_first(bench_cudnn *s, char *why, size_t whylen);

void bench_cudnn_destroy(bench_cudnn *s);

#endif /* XCONV_BENCH_BENCH_CUDA_H */
