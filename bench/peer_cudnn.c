/*
 * peer_cudnn.c — cuDNN as the peer of `xconv bench --device cuda`, through its C API:
 * cudnnConvolutionForward for conv, cudnnConvolutionBackwardData for conv_transpose (the
 * adjoint of the forward conv whose filter is PyTorch's conv_transpose weight [Cin, Cout/g,
 * K..]), without bias.
 *
 *   tensors   Nd descriptors (cudnnSetTensorNdDescriptorEx) in NHWC/NDHWC for channels-last,
 *             NCHW/NCDHW for channels-first; 1-D problems as 2-D with H = 1. x is the very
 *             buffer xconv reads. Filters: NHWC [K, R, S, C] or NCHW [K, C, R, S]
 *             (cudnnSetFilterNdDescriptor). Groups: cudnnSetConvolutionGroupCount.
 *   dtypes    bf16 and f16 (f32 accumulation: cuDNN's PSEUDO_BFLOAT16 / PSEUDO_HALF
 *             configurations; math type CUDNN_TENSOR_OP_MATH: tensor cores allowed, no
 *             down-conversion), f32 with CUDNN_FMA_MATH (no TF32), f64. y must have x's
 *             dtype. Integer and fp8 convolutions are not reachable through this API with
 *             xconv's semantics (cuDNN's int8 configurations saturate or return floats):
 *             such rows show '-'.
 *   algorithm two candidates, the faster wins (both timed on the bench's buffers, outside the
 *             bench's timing):
 *             - legacy API: cudnnFindConvolution{Forward,BackwardData}AlgorithmEx (it times
 *               every algorithm once), the fastest that succeeded (for f32/f64 the fastest
 *               that does not use tensor-op math);
 *             - graph (backend) API, bf16/f16 only: the same convolution as a one-operation
 *               graph, the engine configurations of heuristics mode A (at most 12; when it
 *               offers none, those of the fallback mode: not yet run on a GPU), minus
 *               those that reduce in reduced precision or down-convert inputs, each
 *               finalized into an execution plan and timed (3 runs), the fastest kept. This
 *               is how PyTorch reaches cuDNN (cudnn-frontend), and on Hopper it reaches
 *               kernels the legacy API does not (up to 20x faster on small-batch layers);
 *             workspaces come from one scratch buffer allocated once, outside timing.
 *   loading   dlopen at run time (no link dependency), so a binary built against one
 *             cuDNN 9 runs where cuDNN ships inside PyTorch's Python environment:
 *             $XCONV_CUDNN_LIB (the library or its folder), then "libcudnn.so.9" and
 *             "libcudnn.so" on the loader's path, then the lib folder of the Python package
 *             nvidia.cudnn (python3 is asked where it is). Built only when cuDNN's header is
 *             found at configure time (cmake/bench.cmake, option XCONV_BENCH_CUDNN).
 */
#include "bench_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(XCONV_HAVE_CUDA) && defined(XCONV_HAVE_CUDNN)

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>

/* The functions used, looked up once with dlsym; p_<name> has <name>'s exact type. */
#define CUDNN_FUNCS(X)                                                                         \
    X(cudnnGetVersion)                                                                         \
    X(cudnnGetErrorString)                                                                     \
    X(cudnnCreate)                                                                             \
    X(cudnnSetStream)                                                                          \
    X(cudnnCreateTensorDescriptor)                                                             \
    X(cudnnSetTensorNdDescriptorEx)                                                            \
    X(cudnnDestroyTensorDescriptor)                                                            \
    X(cudnnCreateFilterDescriptor)                                                             \
    X(cudnnSetFilterNdDescriptor)                                                              \
    X(cudnnDestroyFilterDescriptor)                                                            \
    X(cudnnCreateConvolutionDescriptor)                                                        \
    X(cudnnSetConvolutionNdDescriptor)                                                         \
    X(cudnnSetConvolutionGroupCount)                                                           \
    X(cudnnSetConvolutionMathType)                                                             \
    X(cudnnDestroyConvolutionDescriptor)                                                       \
    X(cudnnGetConvolutionNdForwardOutputDim)                                                   \
    X(cudnnGetConvolutionForwardAlgorithmMaxCount)                                             \
    X(cudnnFindConvolutionForwardAlgorithmEx)                                                  \
    X(cudnnConvolutionForward)                                                                 \
    X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)                                        \
    X(cudnnFindConvolutionBackwardDataAlgorithmEx)                                             \
    X(cudnnConvolutionBackwardData)                                                            \
    X(cudnnBackendCreateDescriptor)                                                            \
    X(cudnnBackendDestroyDescriptor)                                                           \
    X(cudnnBackendFinalize)                                                                    \
    X(cudnnBackendSetAttribute)                                                                \
    X(cudnnBackendGetAttribute)                                                                \
    X(cudnnBackendExecute)

#define DECLARE(f) static __typeof__(f) *p_##f;
CUDNN_FUNCS(DECLARE)
#undef DECLARE

static void         *lib;
static cudnnHandle_t handle;
static void         *handle_stream;
static bool          load_tried;
static char          load_error[256];
static void         *scratch;        /* Find's and the chosen algorithm's workspace */
static size_t        scratch_bytes;

/* Opens cuDNN's shim library by path; its sub-libraries are found through its RUNPATH
 * ($ORIGIN). */
static void *open_lib(const char *path)
{
    return dlopen(path, RTLD_NOW | RTLD_GLOBAL);
}

/* The folder of Python package nvidia.cudnn + "/lib", as PyTorch's wheels install cuDNN. */
static void *open_from_python(void)
{
    FILE *f = popen("python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' "
                    "2>/dev/null", "r");
    if (!f) return NULL;
    char dir[1024] = "";
    char *got = fgets(dir, sizeof dir, f);
    pclose(f);
    if (!got) return NULL;
    dir[strcspn(dir, "\n")] = '\0';
    if (!dir[0]) return NULL;
    char path[1100];
    snprintf(path, sizeof path, "%s/lib/libcudnn.so.9", dir);
    return open_lib(path);
}

static int load(void)
{
    const char *env = getenv("XCONV_CUDNN_LIB");
    if (env && env[0]) {
        char path[1100];
        snprintf(path, sizeof path, "%s", env);
        lib = open_lib(path);
        if (!lib) {
            snprintf(path, sizeof path, "%s/libcudnn.so.9", env);
            lib = open_lib(path);
        }
    }
    if (!lib) lib = open_lib("libcudnn.so.9");
    if (!lib) lib = open_lib("libcudnn.so");
    if (!lib) lib = open_from_python();
    if (!lib) {
        snprintf(load_error, sizeof load_error,
                 "cuDNN not found (set XCONV_CUDNN_LIB to libcudnn.so.9 or its folder)");
        return -1;
    }
#define LOOKUP(f)                                                                              \
    p_##f = (__typeof__(f) *)dlsym(lib, #f);                                                   \
    if (!p_##f) {                                                                              \
        snprintf(load_error, sizeof load_error, "cuDNN lacks %s", #f);                         \
        return -1;                                                                             \
    }
    CUDNN_FUNCS(LOOKUP)
#undef LOOKUP
    if (p_cudnnGetVersion() / 10000 != CUDNN_MAJOR) {
        snprintf(load_error, sizeof load_error, "cuDNN %zu found, the bench was built for %d.x",
                 p_cudnnGetVersion(), CUDNN_MAJOR);
        return -1;
    }
    cudnnStatus_t st = p_cudnnCreate(&handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(load_error, sizeof load_error, "cudnnCreate: %s", p_cudnnGetErrorString(st));
        handle = NULL;
        return -1;
    }
    return 0;
}

int bench_cudnn_load(char *why, size_t whylen, size_t *version)
{
    if (!load_tried) {
        load_tried = true;
        if (load() != 0 && !load_error[0]) snprintf(load_error, sizeof load_error, "failed");
    }
    if (!handle) {
        snprintf(why, whylen, "%s", load_error);
        return -1;
    }
    if (version) *version = p_cudnnGetVersion();
    return 0;
}

/* ---- one problem ------------------------------------------------------------------------ */

struct bench_cudnn {
    cudnnTensorDescriptor_t      xd, yd;
    cudnnFilterDescriptor_t      wd;
    cudnnConvolutionDescriptor_t cd;
    bool                         transpose, dbl;
    int                          fwd_algo, bwd_algo;
    size_t                       ws_bytes;
    const char                  *x;            /* nbuf copies, x_bytes apart (the bench's) */
    size_t                       x_bytes, y_bytes;
    void                        *w, *y;        /* y: nbuf copies, y_bytes apart */
    int                          nbuf, next;
    /* graph API: set when its plan won */
    cudnnBackendDescriptor_t     gdesc[6];     /* x, w, y tensors, conv, op, graph */
    cudnnBackendDescriptor_t     plan;
    cudnnBackendDescriptor_t     packs[16];    /* one variant pack per buffer */
};

static bool dtype_of(xconv_dtype dt, cudnnDataType_t *out, cudnnDataType_t *compute)
{
    switch (dt) {
    case XCONV_DTYPE_BF16: *out = CUDNN_DATA_BFLOAT16; *compute = CUDNN_DATA_FLOAT; return true;
    case XCONV_DTYPE_F16: *out = CUDNN_DATA_HALF; *compute = CUDNN_DATA_FLOAT; return true;
    case XCONV_DTYPE_F32: *out = CUDNN_DATA_FLOAT; *compute = CUDNN_DATA_FLOAT; return true;
    case XCONV_DTYPE_F64: *out = CUDNN_DATA_DOUBLE; *compute = CUDNN_DATA_DOUBLE; return true;
    default: return false;
    }
}

static const char *fwd_name(int a)
{
    static const char *const names[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm",
                                        "direct", "fft", "fft_tiling", "winograd",
                                        "winograd_nonfused"};
    return a >= 0 && a < (int)(sizeof names / sizeof names[0]) ? names[a] : "?";
}

static const char *bwd_name(int a)
{
    static const char *const names[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd",
                                        "winograd_nonfused"};
    return a >= 0 && a < (int)(sizeof names / sizeof names[0]) ? names[a] : "?";
}

static const char *math_name(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "default_math";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_conv";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
    }
}

void bench_cudnn_destroy(bench_cudnn *s)
{
    if (!s) return;
    if (s->xd) p_cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd) p_cudnnDestroyTensorDescriptor(s->yd);
    if (s->wd) p_cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd) p_cudnnDestroyConvolutionDescriptor(s->cd);
    for (int i = 0; i < 16; i++)
        if (s->packs[i]) p_cudnnBackendDestroyDescriptor(s->packs[i]);
    if (s->plan) p_cudnnBackendDestroyDescriptor(s->plan);
    for (int i = 5; i >= 0; i--)
        if (s->gdesc[i]) p_cudnnBackendDestroyDescriptor(s->gdesc[i]);
    cudaFree(s->w);
    cudaFree(s->y);
    free(s);
}

#define CK(call)                                                                               \
    do {                                                                                       \
        cudnnStatus_t st_ = (call);                                                            \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                     \
            snprintf(why, whylen, "%s: %s", #call, p_cudnnGetErrorString(st_));                \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

/* The scratch workspace: the larger of 1 GiB and a quarter of the free device memory, at
 * most 4 GiB; allocated at the first problem and kept. */
static int ensure_scratch(char *why, size_t whylen)
{
    if (scratch) return 0;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) free_b = (size_t)4 << 30;
    size_t want = free_b / 4;
    if (want > ((size_t)4 << 30)) want = (size_t)4 << 30;
    if (want < ((size_t)1 << 30)) want = (size_t)1 << 30;
    while (want >= ((size_t)64 << 20) && cudaMalloc(&scratch, want) != cudaSuccess) {
        (void)cudaGetLastError();
        scratch = NULL;
        want /= 2;
    }
    if (!scratch) {
        snprintf(why, whylen, "cannot allocate a workspace for cuDNN");
        return -1;
    }
    scratch_bytes = want;
    return 0;
}

/* ---- the graph (backend) API ------------------------------------------------------------ */

#define BK(call)                                                                               \
    do {                                                                                       \
        cudnnStatus_t st_ = (call);                                                            \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                     \
            snprintf(why, whylen, "%s: %s", #call, p_cudnnGetErrorString(st_));                \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
#define SET(d, name, type, n, v) BK(p_cudnnBackendSetAttribute(d, name, type, n, v))

enum { UID_X = 1, UID_W = 2, UID_Y = 3, MAX_CFGS = 12 };

/* A tensor of dims [N, C, spatial..] with packed NCHW or NHWC strides. */
static int g_tensor(cudnnBackendDescriptor_t *out, int64_t uid, cudnnDataType_t dt, int nd,
                    const int *dims, bool nhwc, char *why, size_t whylen)
{
    int64_t d[5], st[5], align = 16;
    for (int i = 0; i < nd; i++) d[i] = dims[i];
    int64_t acc = 1;
    if (nhwc) {
        acc = d[1];
        st[1] = 1;
        for (int i = nd - 1; i >= 2; i--) {
            st[i] = acc;
            acc *= d[i];
        }
        st[0] = acc;
    } else {
        for (int i = nd - 1; i >= 0; i--) {
            st[i] = acc;
            acc *= d[i];
        }
    }
    BK(p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
    SET(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    SET(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, d);
    SET(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, st);
    SET(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    BK(p_cudnnBackendFinalize(*out));
    return 0;
}

/* The one-operation graph of the problem in s->gdesc, and a variant pack per buffer. */
static int g_build(bench_cudnn *s, int nd, int ns, const int *xdim, const int *wdim,
                   const int *ydim, const int *pad, const int *stride, const int *dil,
                   cudnnDataType_t dt, cudnnDataType_t ct, bool nhwc, char *why, size_t whylen)
{
    if (g_tensor(&s->gdesc[0], UID_X, dt, nd, xdim, nhwc, why, whylen) != 0 ||
        g_tensor(&s->gdesc[1], UID_W, dt, nd, wdim, nhwc, why, whylen) != 0 ||
        g_tensor(&s->gdesc[2], UID_Y, dt, nd, ydim, nhwc, why, whylen) != 0)
        return -1;
    int64_t sd = ns, pa[3], sa[3], da[3];
    for (int i = 0; i < ns; i++) {
        pa[i] = pad[i];
        sa[i] = stride[i];
        da[i] = dil[i];
    }
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    BK(p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &s->gdesc[3]));
    cudnnBackendDescriptor_t c = s->gdesc[3];
    SET(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct);
    SET(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    SET(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd);
    SET(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, ns, da);
    SET(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, ns, sa);
    SET(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, ns, pa);
    SET(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, ns, pa);
    BK(p_cudnnBackendFinalize(c));
    float alpha = 1.0f, beta = 0.0f;
    cudnnBackendDescriptor_t op;
    if (!s->transpose) {
        BK(p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                          &s->gdesc[4]));
        op = s->gdesc[4];
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &s->gdesc[0]);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &s->gdesc[1]);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &s->gdesc[2]);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    } else { /* dy = the bench's x, dx = its y */
        BK(p_cudnnBackendCreateDescriptor(
            CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, &s->gdesc[4]));
        op = s->gdesc[4];
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &s->gdesc[0]);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &s->gdesc[1]);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &s->gdesc[2]);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    }
    BK(p_cudnnBackendFinalize(op));
    BK(p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &s->gdesc[5]));
    SET(s->gdesc[5], CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
    /* Deprecated in cuDNN 9 but still read by its versions seen here; not fatal. */
    (void)p_cudnnBackendSetAttribute(s->gdesc[5], CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
                                     CUDNN_TYPE_HANDLE, 1, &handle);
    BK(p_cudnnBackendFinalize(s->gdesc[5]));
    for (int b = 0; b < s->nbuf; b++) {
        void *ptrs[3] = {(void *)(s->x + (size_t)b * s->x_bytes), s->w,
                         (char *)s->y + (size_t)b * s->y_bytes};
        int64_t uids[3] = {UID_X, UID_W, UID_Y};
        BK(p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &s->packs[b]));
        SET(s->packs[b], CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
        SET(s->packs[b], CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
        SET(s->packs[b], CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &scratch);
        BK(p_cudnnBackendFinalize(s->packs[b]));
    }
    return 0;
}

static cudaEvent_t ev0, ev1;

static int run_on(bench_cudnn *s, int b, char *why, size_t whylen);

/* Seconds per run (the best of 3 single runs after one warm-up) of the legacy algorithm
 * (plan NULL) or of `plan`, on buffer 0; -1 when it fails. */
static double time_candidate(bench_cudnn *s, cudnnBackendDescriptor_t plan)
{
    char why[160];
    if (!ev0 && (cudaEventCreate(&ev0) != cudaSuccess || cudaEventCreate(&ev1) != cudaSuccess))
        return -1;
    cudnnBackendDescriptor_t saved = s->plan;
    s->plan = plan;
    double best = -1;
    for (int r = 0; r < 4; r++) {
        cudaEventRecord(ev0, (cudaStream_t)handle_stream);
        int rc = run_on(s, 0, why, sizeof why);
        cudaEventRecord(ev1, (cudaStream_t)handle_stream);
        if (rc != 0 || cudaEventSynchronize(ev1) != cudaSuccess) {
            (void)cudaGetLastError();
            best = -1;
            break;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, ev0, ev1);
        if (r > 0 && (best < 0 || ms * 1e-3 < best)) best = ms * 1e-3;
    }
    s->plan = saved;
    return best;
}

/* The fastest execution plan among heuristics mode A's engine configurations that keep
 * f32 reduction and full-precision inputs; NULL when none runs. *secs and `impl` describe
 * it. */
static cudnnBackendDescriptor_t g_choose(bench_cudnn *s, cudnnBackendHeurMode_t mode,
                                         double *secs, char *impl, size_t impllen, char *why,
                                         size_t whylen)
{
    cudnnBackendDescriptor_t heur = NULL, cfgs[MAX_CFGS] = {0}, best = NULL;
    const char *mode_name = mode == CUDNN_HEUR_MODE_A ? "A" : "fallback";
    int64_t n = 0;
    *secs = -1;
    if (p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) !=
            CUDNN_STATUS_SUCCESS ||
        p_cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &s->gdesc[5]) !=
            CUDNN_STATUS_SUCCESS ||
        p_cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                   &mode) != CUDNN_STATUS_SUCCESS ||
        p_cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) {
        snprintf(why, whylen, "graph API: heuristics failed");
        goto out;
    }
    for (int i = 0; i < MAX_CFGS; i++)
        if (p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]) !=
            CUDNN_STATUS_SUCCESS)
            goto out;
    if (p_cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CFGS, &n, cfgs) !=
        CUDNN_STATUS_SUCCESS) {
        snprintf(why, whylen, "graph API: no heuristics results");
        goto out;
    }
    if (n > MAX_CFGS) n = MAX_CFGS;
    for (int64_t i = 0; i < n; i++) {
        /* The engine's numerical notes. */
        cudnnBackendDescriptor_t eng = NULL;
        int64_t cnt = 0, nn = 0, gi = -1;
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        bool keep = p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) ==
                        CUDNN_STATUS_SUCCESS &&
                    p_cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &eng) ==
                        CUDNN_STATUS_SUCCESS;
        if (keep && p_cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                               CUDNN_TYPE_NUMERICAL_NOTE,
                                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nn, notes) ==
                        CUDNN_STATUS_SUCCESS)
            for (int64_t k = 0; k < nn && k < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; k++)
                if (notes[k] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
                    notes[k] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
                    keep = false;
        if (keep)
            (void)p_cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                             CUDNN_TYPE_INT64, 1, &cnt, &gi);
        if (eng) p_cudnnBackendDestroyDescriptor(eng);
        if (!keep) continue;
        /* Its plan, if it finalizes and its workspace fits the scratch buffer. */
        cudnnBackendDescriptor_t plan = NULL;
        int64_t ws = 0;
        if (p_cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) !=
            CUDNN_STATUS_SUCCESS)
            continue;
        bool ok = p_cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                             CUDNN_TYPE_HANDLE, 1, &handle) ==
                      CUDNN_STATUS_SUCCESS &&
                  p_cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]) ==
                      CUDNN_STATUS_SUCCESS &&
                  p_cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS &&
                  p_cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &cnt, &ws) ==
                      CUDNN_STATUS_SUCCESS &&
                  ws >= 0 && (size_t)ws <= scratch_bytes;
        double t = ok ? time_candidate(s, plan) : -1;
        if (t > 0 && (*secs < 0 || t < *secs)) {
            if (best) p_cudnnBackendDestroyDescriptor(best);
            best = plan;
            *secs = t;
            snprintf(impl, impllen, "graph engine %lld (heuristics %s #%lld) ws %.1f MB",
                     (long long)gi, mode_name, (long long)i, (double)ws / 1e6);
        } else {
            p_cudnnBackendDestroyDescriptor(plan);
        }
    }
    if (!best)
        snprintf(why, whylen, "graph API: none of %lld engine configurations (heuristics %s) ran",
                 (long long)n, mode_name);
out:
    for (int i = 0; i < MAX_CFGS; i++)
        if (cfgs[i]) p_cudnnBackendDestroyDescriptor(cfgs[i]);
    if (heur) p_cudnnBackendDestroyDescriptor(heur);
    return best;
}

int bench_cudnn_create(const bench_problem *p, xconv_dtype xt, xconv_dtype yt,
                       xconv_layout layout, void *stream, const void *x_dev, size_t x_bytes,
                       int nbuf, const void *w_pt_host, bench_cudnn **out, char *impl,
                       size_t impllen, char *why, size_t whylen)
{
    *out = NULL;
    impl[0] = '\0';
    if (bench_cudnn_load(why, whylen, NULL) != 0) return 1;
    cudnnDataType_t dt, ct;
    if (!dtype_of(xt, &dt, &ct)) {
        snprintf(why, whylen, "cuDNN has no %s convolution with xconv's semantics",
                 xconv_dtype_name(xt));
        return 1;
    }
    if (yt != xt) {
        snprintf(why, whylen, "cuDNN writes y in x's dtype");
        return 1;
    }
    for (int i = 0; i < p->rank; i++)
        if (p->pad_lo[i] != p->pad_hi[i]) {
            snprintf(why, whylen, "cuDNN pads symmetrically");
            return 1;
        }
    if (stream != handle_stream) {
        cudnnStatus_t st = p_cudnnSetStream(handle, (cudaStream_t)stream);
        if (st != CUDNN_STATUS_SUCCESS) {
            snprintf(why, whylen, "cudnnSetStream: %s", p_cudnnGetErrorString(st));
            return -1;
        }
        handle_stream = stream;
    }

    bench_cudnn *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    s->transpose = p->op == XCONV_OP_CONV_TRANSPOSE;
    s->dbl = dt == CUDNN_DATA_DOUBLE;
    s->x = x_dev;
    s->x_bytes = x_bytes;
    s->nbuf = nbuf;
    size_t es = xconv_dtype_size(xt);
    bool last = layout == XCONV_LAYOUT_CHANNELS_LAST;
    cudnnTensorFormat_t fmt = last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;

    /* Dims in cuDNN's order [N, C, spatial..]; 1-D as 2-D with a leading spatial dim 1. */
    int ns = p->rank < 2 ? 2 : p->rank, nd = ns + 2, off = ns - p->rank;
    int xdim[5], ydim[5], wdim[5], pad[3], stride[3], dil[3];
    for (int i = 0; i < ns; i++) {
        bool real = i >= off;
        int j = i - off;
        xdim[2 + i] = real ? (int)p->in[j] : 1;
        ydim[2 + i] = real ? (int)p->out[j] : 1;
        wdim[2 + i] = real ? (int)p->k[j] : 1;
        pad[i] = real ? (int)p->pad_lo[j] : 0;
        stride[i] = real ? (int)p->stride[j] : 1;
        dil[i] = real ? (int)p->dil[j] : 1;
    }
    xdim[0] = ydim[0] = (int)p->n;
    xdim[1] = (int)p->cin;
    ydim[1] = (int)p->cout;
    /* The forward conv's filter [K, C/g, ..]: conv K = Cout, C = Cin; conv_transpose is the
     * adjoint of the conv from y (Cout channels) to x (Cin channels). */
    wdim[0] = (int)(s->transpose ? p->cin : p->cout);
    wdim[1] = (int)((s->transpose ? p->cout : p->cin) / p->groups);

    CK(p_cudnnCreateTensorDescriptor(&s->xd));
    CK(p_cudnnCreateTensorDescriptor(&s->yd));
    CK(p_cudnnCreateFilterDescriptor(&s->wd));
    CK(p_cudnnCreateConvolutionDescriptor(&s->cd));
    CK(p_cudnnSetTensorNdDescriptorEx(s->xd, fmt, dt, nd, xdim));
    CK(p_cudnnSetTensorNdDescriptorEx(s->yd, fmt, dt, nd, ydim));
    CK(p_cudnnSetFilterNdDescriptor(s->wd, dt, fmt, nd, wdim));
    CK(p_cudnnSetConvolutionNdDescriptor(s->cd, ns, pad, stride, dil, CUDNN_CROSS_CORRELATION,
                                         ct));
    CK(p_cudnnSetConvolutionGroupCount(s->cd, (int)p->groups));
    CK(p_cudnnSetConvolutionMathType(s->cd, s->dbl || dt == CUDNN_DATA_FLOAT
                                                ? CUDNN_FMA_MATH
                                                : CUDNN_TENSOR_OP_MATH));
    /* The forward output of the conv's input must be the conv's output. */
    {
        int got[5];
        const int *want = s->transpose ? xdim : ydim;
        CK(p_cudnnGetConvolutionNdForwardOutputDim(s->cd, s->transpose ? s->yd : s->xd, s->wd,
                                                   nd, got));
        for (int i = 0; i < nd; i++)
            if (got[i] != want[i]) {
                snprintf(why, whylen, "cuDNN's shape rule disagrees (dim %d: %d, not %d)", i,
                         got[i], want[i]);
                bench_cudnn_destroy(s);
                return 1;
            }
    }

    /* Weights: PyTorch's [K, C/g, R..] is cuDNN's NCHW filter; NHWC wants [K, R.., C/g]. */
    int64_t wn = bench_w_elems(p), ks = bench_spatial(p->k, p->rank);
    void *wh = malloc((size_t)wn * es + 1);
    if (!wh) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    if (last) bench_to_channels_last(w_pt_host, wh, wdim[0], wdim[1], ks, es);
    else memcpy(wh, w_pt_host, (size_t)wn * es);
    s->y_bytes = ((size_t)bench_y_elems(p) * es + 255) & ~(size_t)255;
    cudaError_t ce = cudaMalloc(&s->w, (size_t)wn * es + 1);
    if (ce == cudaSuccess) ce = cudaMemcpy(s->w, wh, (size_t)wn * es, cudaMemcpyHostToDevice);
    free(wh);
    if (ce == cudaSuccess) ce = cudaMalloc(&s->y, s->y_bytes * (size_t)nbuf + 1);
    if (ce == cudaSuccess) ce = cudaMemset(s->y, 0, s->y_bytes * (size_t)nbuf);
    if (ce != cudaSuccess) {
        snprintf(why, whylen, "cuDNN buffers: %s", cudaGetErrorString(ce));
        (void)cudaGetLastError();
        goto fail;
    }
    if (ensure_scratch(why, whylen) != 0) goto fail;

    /* The fastest algorithm, measured by cuDNN on these buffers. */
    bool want_fma = s->dbl || dt == CUDNN_DATA_FLOAT;
    int found = -1, count = 0;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (!s->transpose) {
        int maxn = 0;
        CK(p_cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &maxn));
        cudnnConvolutionFwdAlgoPerf_t perf[16];
        if (maxn > 16) maxn = 16;
        CK(p_cudnnFindConvolutionForwardAlgorithmEx(handle, s->xd, s->x, s->wd, s->w, s->cd,
                                                    s->yd, s->y, maxn, &count, perf, scratch,
                                                    scratch_bytes));
        for (int i = 0; i < count && found < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS &&
                (!want_fma || perf[i].mathType == CUDNN_FMA_MATH ||
                 perf[i].mathType == CUDNN_DEFAULT_MATH)) {
                found = i;
                s->fwd_algo = (int)perf[i].algo;
                s->ws_bytes = perf[i].memory;
                math = perf[i].mathType;
                snprintf(impl, impllen, "%s %s ws %.1f MB", fwd_name(s->fwd_algo),
                         math_name(math), (double)s->ws_bytes / 1e6);
            }
    } else {
        int maxn = 0;
        CK(p_cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &maxn));
        cudnnConvolutionBwdDataAlgoPerf_t perf[16];
        if (maxn > 16) maxn = 16;
        CK(p_cudnnFindConvolutionBackwardDataAlgorithmEx(handle, s->wd, s->w, s->xd, s->x,
                                                         s->cd, s->yd, s->y, maxn, &count, perf,
                                                         scratch, scratch_bytes));
        for (int i = 0; i < count && found < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS &&
                (!want_fma || perf[i].mathType == CUDNN_FMA_MATH ||
                 perf[i].mathType == CUDNN_DEFAULT_MATH)) {
                found = i;
                s->bwd_algo = (int)perf[i].algo;
                s->ws_bytes = perf[i].memory;
                math = perf[i].mathType;
                snprintf(impl, impllen, "bwd_data %s %s ws %.1f MB", bwd_name(s->bwd_algo),
                         math_name(math), (double)s->ws_bytes / 1e6);
            }
    }
    if (found >= 0 && !want_fma) CK(p_cudnnSetConvolutionMathType(s->cd, math));
    double t_legacy = found >= 0 ? time_candidate(s, NULL) : -1;
    if (found >= 0 && t_legacy < 0) found = -1;
    /* The graph API's best plan, for the reduced float types; kept when it is faster. */
    if (!want_fma) {
        char gwhy[256] = "", gimpl[160] = "";
        double t_graph = -1;
        cudnnBackendDescriptor_t plan = NULL;
        if (g_build(s, nd, ns, xdim, wdim, ydim, pad, stride, dil, dt, ct, last, gwhy,
                    sizeof gwhy) == 0)
            plan = g_choose(s, CUDNN_HEUR_MODE_A, &t_graph, gimpl, sizeof gimpl, gwhy,
                            sizeof gwhy);
        /* Mode A offered nothing for some shapes (qwenvl_patch channels-last): then the
         * fallback list. */
        if (!plan && s->gdesc[5])
            plan = g_choose(s, CUDNN_HEUR_MODE_FALLBACK, &t_graph, gimpl, sizeof gimpl, gwhy,
                            sizeof gwhy);
        if (plan && (found < 0 || t_graph < t_legacy)) {
            s->plan = plan;
            char legacy[160];
            snprintf(legacy, sizeof legacy, "%s", impl);
            if (found >= 0)
                snprintf(impl, impllen, "%s; legacy %s: %.3gx slower", gimpl, legacy,
                         t_legacy / t_graph);
            else
                snprintf(impl, impllen, "%s", gimpl);
        } else {
            if (plan) p_cudnnBackendDestroyDescriptor(plan);
            if (found >= 0 && t_graph > 0) {
                size_t len = strlen(impl);
                snprintf(impl + len, impllen - len, "; graph API %.3gx slower",
                         t_graph / t_legacy);
            } else if (found >= 0 && gwhy[0]) {
                fprintf(stderr, "xconv bench: cuDNN %s\n", gwhy);
            }
        }
        if (found < 0 && !s->plan) {
            snprintf(why, whylen, "no cuDNN algorithm runs it (%d legacy tried; %s)", count,
                     gwhy);
            bench_cudnn_destroy(s);
            return 1;
        }
    } else if (found < 0) {
        snprintf(why, whylen, "no cuDNN algorithm runs it (%d tried)", count);
        bench_cudnn_destroy(s);
        return 1;
    }
    *out = s;
    return 0;

fail:
    bench_cudnn_destroy(s);
    return -1;
}

static int run_on(bench_cudnn *s, int b, char *why, size_t whylen)
{
    float af = 1.0f, bf = 0.0f;
    double ad = 1.0, bd = 0.0;
    const void *alpha = s->dbl ? (const void *)&ad : (const void *)&af;
    const void *beta = s->dbl ? (const void *)&bd : (const void *)&bf;
    const void *x = s->x + (size_t)b * s->x_bytes;
    void *y = (char *)s->y + (size_t)b * s->y_bytes;
    cudnnStatus_t st =
        s->plan ? p_cudnnBackendExecute(handle, s->plan, s->packs[b])
        : s->transpose
            ? p_cudnnConvolutionBackwardData(handle, alpha, s->wd, s->w, s->xd, x, s->cd,
                                             (cudnnConvolutionBwdDataAlgo_t)s->bwd_algo,
                                             scratch, s->ws_bytes, beta, s->yd, y)
            : p_cudnnConvolutionForward(handle, alpha, s->xd, x, s->wd, s->w, s->cd,
                                        (cudnnConvolutionFwdAlgo_t)s->fwd_algo, scratch,
                                        s->ws_bytes, beta, s->yd, y);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(why, whylen, "cuDNN: %s", p_cudnnGetErrorString(st));
        return -1;
    }
    return 0;
}

int bench_cudnn_run(bench_cudnn *s, char *why, size_t whylen)
{
    int b = s->next;
    s->next = (s->next + 1) % s->nbuf;
    return run_on(s, b, why, whylen);
}

const void *bench_cudnn_run_first(bench_cudnn *s, char *why, size_t whylen)
{
    return run_on(s, 0, why, whylen) == 0 ? s->y : NULL;
}

#else /* no CUDA backend or no cuDNN header at build time */

int bench_cudnn_load(char *why, size_t whylen, size_t *version)
{
    (void)version;
#ifdef XCONV_HAVE_CUDA
    snprintf(why, whylen, "not built in (cuDNN's header was not found at configure time)");
#else
    snprintf(why, whylen, "not built in (no CUDA backend)");
#endif
    return -1;
}

int bench_cudnn_create(const bench_problem *p, xconv_dtype xt, xconv_dtype yt,
                       xconv_layout layout, void *stream, const void *x_dev, size_t x_bytes,
                       int nbuf, const void *w_pt_host, bench_cudnn **out, char *impl,
                       size_t impllen, char *why, size_t whylen)
{
    (void)p;
    (void)xt;
    (void)yt;
    (void)layout;
    (void)stream;
    (void)x_dev;
    (void)x_bytes;
    (void)nbuf;
    (void)w_pt_host;
    (void)impllen;
    *out = NULL;
    impl[0] = '\0';
    bench_cudnn_load(why, whylen, NULL);
    return 1;
}

int bench_cudnn_run(bench_cudnn *s, char *why, size_t whylen)
{
    (void)s;
    snprintf(why, whylen, "cuDNN not built in");
    return -1;
}

const void *bench_cudnn_run_first(bench_cudnn *s, char *why, size_t whylen)
{
    (void)s;
    snprintf(why, whylen, "cuDNN not built in");
    return NULL;
}

void bench_cudnn_destroy(bench_cudnn *s) { (void)s; }

#endif
