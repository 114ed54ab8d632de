/*
 * xconv.h — the one public header of xconv, a C library of convolution operators.
 *
 * This header is the specification: what is not declared here is not API.
 * The exact semantics (formulas, shapes, dtype rules) are those of DESIGN.md and are
 * summarized at each declaration.
 *
 * Conventions used throughout:
 *   - Every call that can fail returns xconv_status and takes `xconv_error *err` last.
 *     `err` may be NULL; when non-NULL it is always filled (status OK on success).
 *   - Strides, offsets and shapes are counted in elements, never bytes, except fields
 *     that end in `_bytes`.
 *   - Tensors are x (input), w (weight), bias and y (output) everywhere.
 *   - Thread safety: functions that take no context are thread-safe. A context may be
 *     used by one calling thread at a time. A plan is immutable after creation and may be
 *     executed concurrently from several threads only with distinct contexts' workspaces
 *     (i.e. each concurrent execute passes its own workspace).
 */
#ifndef XCONV_H
#define XCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(XCONV_BUILDING_SHARED)
#define XCONV_API __declspec(dllexport)
#elif defined(__GNUC__)
#define XCONV_API __attribute__((visibility("default")))
#else
#define XCONV_API
#endif

#define XCONV_VERSION_MAJOR 0
#define XCONV_VERSION_MINOR 1
#define XCONV_VERSION_PATCH 0

/* The largest tensor rank: batch + channels + 3 spatial dims. */
#define XCONV_MAX_RANK 5
/* The largest spatial rank. */
#define XCONV_MAX_SPATIAL 3

/* ---------------------------------------------------------------------------------------- */
/* Status and error record                                                                  */
/* ---------------------------------------------------------------------------------------- */

typedef enum xconv_status {
    XCONV_STATUS_OK = 0,
    XCONV_STATUS_INVALID_ARGUMENT,   /* the problem or a tensor is wrong; the record says which */
    XCONV_STATUS_UNSUPPORTED,        /* valid but not here: forced engine, backend not built */
    XCONV_STATUS_OUT_OF_MEMORY,
    XCONV_STATUS_WORKSPACE_TOO_SMALL,
    XCONV_STATUS_DEVICE_ERROR,       /* CUDA failed; the description carries its message */
    XCONV_STATUS_INTERNAL            /* a bug in xconv */
} xconv_status;

/*
 * The error record of one call. Caller-owned and fixed size (no allocation), so it can live
 * on the stack or be mapped by ctypes. Strings are always NUL-terminated.
 *   operation:   the call and problem kind, e.g. "xconv_plan_create(conv_transpose, 2-D)"
 *   parameter:   the thing to fix, e.g. "groups", "w.shape[1]"; empty when not applicable
 *   description: lower case, names values, e.g. "groups 3 does not divide input channels 8"
 */
typedef struct xconv_error {
    xconv_status status;
    char operation[64];
    char parameter[32];
    char description[256];
} xconv_error;

/* The stable upper-case name of a status, e.g. "INVALID_ARGUMENT". Never NULL. Thread-safe. */
XCONV_API const char *xconv_status_name(xconv_status status);

/* The library version as "MAJOR.MINOR.PATCH". Never NULL. Thread-safe. */
XCONV_API const char *xconv_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Dtypes                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/*
 * Element types. Integers compute in wrapping unsigned arithmetic at least as wide as y and
 * are exact modulo 2^bits(y). f8/f16/bf16 compute in f32 and round once (nearest even;
 * f8e4m3 saturates to +-448 per OCP "FN"). c64/c128 are interleaved (re, im) pairs of
 * f32/f64. Numbering is stable ABI.
 */
typedef enum xconv_dtype {
    XCONV_DTYPE_INVALID = 0,
    XCONV_DTYPE_U8,
    XCONV_DTYPE_I8,
    XCONV_DTYPE_U16,
    XCONV_DTYPE_I16,
    XCONV_DTYPE_U32,
    XCONV_DTYPE_I32,
    XCONV_DTYPE_U64,
    XCONV_DTYPE_I64,
    XCONV_DTYPE_F8E4M3,
    XCONV_DTYPE_F8E5M2,
    XCONV_DTYPE_F16,
    XCONV_DTYPE_BF16,
    XCONV_DTYPE_F32,
    XCONV_DTYPE_F64,
    XCONV_DTYPE_C64,
    XCONV_DTYPE_C128,
    XCONV_DTYPE_COUNT
} xconv_dtype;

/* Short name ("u8", "bf16", "f8e4m3", "c64", ...), or "invalid". Never NULL. Thread-safe. */
XCONV_API const char *xconv_dtype_name(xconv_dtype dtype);

/* The dtype named by `name` (as xconv_dtype_name spells it), or XCONV_DTYPE_INVALID. */
XCONV_API xconv_dtype xconv_dtype_from_name(const char *name);

/* Bytes per element, or 0 for an invalid dtype. Thread-safe. */
XCONV_API size_t xconv_dtype_size(xconv_dtype dtype);

/*
 * Whether y (or bias) may have dtype `out` when x and w have dtype `in` (DESIGN.md §2):
 * the same dtype, or a wider one of the same family: an integer with more bits (signed
 * if `in` is signed), f8/f16/bf16 -> f32/f64, f32 -> f64, c64 -> c128. Thread-safe.
 */
XCONV_API bool xconv_dtype_can_widen(xconv_dtype in, xconv_dtype out);

/*
 * Scalar conversions between the reduced float formats and f32, as xconv uses them
 * (round to nearest even; f8e4m3 saturates finite overflow and infinities to +-448, NaN
 * stays NaN). Exposed so that callers and tests convert exactly as the library does.
 */
XCONV_API float    xconv_f16_to_f32(uint16_t h);
XCONV_API uint16_t xconv_f32_to_f16(float f);
XCONV_API float    xconv_bf16_to_f32(uint16_t h);
XCONV_API uint16_t xconv_f32_to_bf16(float f);
XCONV_API float    xconv_f8e4m3_to_f32(uint8_t v);
XCONV_API uint8_t  xconv_f32_to_f8e4m3(float f);
XCONV_API float    xconv_f8e5m2_to_f32(uint8_t v);
XCONV_API uint8_t  xconv_f32_to_f8e5m2(float f);

/* ---------------------------------------------------------------------------------------- */
/* Tensors                                                                                  */
/* ---------------------------------------------------------------------------------------- */

typedef enum xconv_device {
    XCONV_DEVICE_CPU = 0,
    XCONV_DEVICE_CUDA = 1
} xconv_device;

/*
 * A tensor view: a descriptor only, xconv never owns or frees `data`.
 *
 *   data          the start of the buffer behind the view (not necessarily element 0).
 *                 May be NULL only when the view has no elements.
 *   buffer_bytes  the byte size of that buffer. Every element the op touches must lie in
 *                 [data, data + buffer_bytes); xconv checks it. 0 means "exactly the bytes
 *                 a contiguous view needs", allowed only when `strided` is false.
 *   offset        element index (from `data`) of element [0, 0, ...]; used when strided.
 *   strided       false: row-major contiguous, `strides` and `offset` are ignored.
 *                 true: `strides[i]` is the element step of dim i, any sign; zero strides
 *                 (broadcast) are allowed for x, w and bias but not y.
 *   device        where `data` lives; device_index selects the CUDA device.
 *
 * Zero-initialize and fill with designated initializers; fields are only ever appended.
 */
typedef struct xconv_tensor {
    xconv_dtype  dtype;
    int          rank;
    int64_t      shape[XCONV_MAX_RANK];
    int64_t      strides[XCONV_MAX_RANK];
    int64_t      offset;
    bool         strided;
    void        *data;
    size_t       buffer_bytes;
    xconv_device device;
    int          device_index;
} xconv_tensor;

/*
 * A contiguous CPU tensor over `data` (shape copied, buffer_bytes = 0 meaning "exact").
 * rank must be 1..XCONV_MAX_RANK; larger ranks are clamped to produce an invalid tensor
 * that validation will reject. Thread-safe.
 */
XCONV_API xconv_tensor xconv_tensor_contiguous(xconv_dtype dtype, int rank,
                                               const int64_t *shape, void *data);

/* ---------------------------------------------------------------------------------------- */
/* Problems                                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef enum xconv_op {
    XCONV_OP_CONV = 0,           /* cross-correlation, PyTorch's convNd */
    XCONV_OP_CONV_TRANSPOSE = 1  /* its adjoint, PyTorch's conv_transposeNd */
} xconv_op;

/*
 * Tensor layouts, with d spatial dims X1..Xd (outermost first):
 *   CHANNELS_FIRST (PyTorch, candle): x [N, Cin, X..], y [N, Cout, Y..],
 *       conv weight [Cout, Cin/g, K..], conv_transpose weight [Cin, Cout/g, K..].
 *   CHANNELS_LAST (MLX): x [N, X.., Cin], y [N, Y.., Cout],
 *       weight of both ops [Cout, K.., Cin/g] (MLX's conv_transpose convention).
 */
typedef enum xconv_layout {
    XCONV_LAYOUT_CHANNELS_FIRST = 0,
    XCONV_LAYOUT_CHANNELS_LAST = 1
} xconv_layout;

/*
 * The problem, without tensors. Per spatial dim i (outermost first, only the first
 * spatial_rank entries are read): stride >= 1, dilation >= 1 (1 is dense), pad_lo/pad_hi
 * >= 0, output_padding >= 0 and < max(stride, dilation) (conv_transpose only; must be 0
 * for conv). groups >= 1 divides Cin and Cout.
 *
 *   conv:           Y = floor((X + lo + hi - dil*(K-1) - 1) / stride) + 1
 *   conv_transpose: Y = (X - 1)*stride - lo - hi + dil*(K-1) + output_padding + 1
 *
 * Use xconv_params_init for defaults, then set what differs.
 */
typedef struct xconv_params {
    xconv_op     op;
    int          spatial_rank;
    xconv_layout layout;
    int64_t      stride[XCONV_MAX_SPATIAL];
    int64_t      dilation[XCONV_MAX_SPATIAL];
    int64_t      pad_lo[XCONV_MAX_SPATIAL];
    int64_t      pad_hi[XCONV_MAX_SPATIAL];
    int64_t      output_padding[XCONV_MAX_SPATIAL];
    int64_t      groups;
} xconv_params;

/* Params with stride 1, dilation 1, no padding, groups 1. Thread-safe. */
XCONV_API xconv_params xconv_params_init(xconv_op op, int spatial_rank, xconv_layout layout);

/*
 * The output shape of the problem for input shape x_shape and weight shape w_shape (both of
 * rank spatial_rank + 2, in the params' layout) into y_shape (XCONV_MAX_RANK entries, the
 * first spatial_rank + 2 written). Validates the params and shapes exactly as plan creation
 * does; nothing is written on error.
 */
XCONV_API xconv_status xconv_output_shape(const xconv_params *params, const int64_t *x_shape,
                                          const int64_t *w_shape, int64_t *y_shape,
                                          xconv_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Context                                                                                  */
/* ---------------------------------------------------------------------------------------- */

typedef struct xconv_context xconv_context; /* opaque: threads, CUDA device and stream */

typedef struct xconv_context_options {
    int   threads;      /* CPU threads for execute; 0 = the number of online cores */
    int   cuda_device;  /* the CUDA device ordinal used by CUDA tensors */
    void *cuda_stream;  /* a cudaStream_t to run on; NULL = the default stream */
} xconv_context_options;

/*
 * Creates a context. `options` may be NULL (defaults). The caller owns *ctx and destroys it
 * with xconv_context_destroy. Not thread-safe with respect to the new context until it
 * returns.
 */
XCONV_API xconv_status xconv_context_create(const xconv_context_options *options,
                                            xconv_context **ctx, xconv_error *err);

/* Destroys a context; NULL is allowed. Plans created with it must be destroyed first. */
XCONV_API void xconv_context_destroy(xconv_context *ctx);

/* The number of CPU threads the context uses (>= 1). */
XCONV_API int xconv_context_threads(const xconv_context *ctx);

/* ---------------------------------------------------------------------------------------- */
/* Plans                                                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct xconv_plan xconv_plan; /* opaque: validated, normalized, engine chosen */

typedef struct xconv_plan_options {
    /* NULL or "" = let the planner choose; otherwise an engine name from xconv_engine_name,
     * e.g. "cpu.ref" or "cpu.im2col". A forced engine that does not support the problem is
     * an UNSUPPORTED error that says why. */
    const char *engine;
    /* Allow TF32 (or other reduced-precision math) for f32 problems. On CUDA this enables
     * cuda.f32_bf16x3: f32 conv as three bf16 tensor-core products per term (hi/lo
     * splits), about 2^-17 relative error per product (TF32: 2^-11), f32 sums. On the CPU
     * it enables cpu.winograd: 3-tap stride-1 kernel dims by Winograd's F(2x2, 3x3) or
     * F(2, 3), f32 throughout, whose rounding error scales with the inputs and weights of
     * the whole 4x4 window rather than with sum|x*w| (an output whose window holds a large
     * x that only a zero weight faces can be off by eps times that x); Inf and NaN still
     * give the direct sums' results. */
    bool allow_tf32;
    /* The weights are constant for the plan's life (inference): w's values at
     * xconv_plan_create are the ones every execute uses. Engines that reorder weights
     * (cpu.igemm) pack them once, at creation, into memory the plan owns
     * (xconv_plan_weights_bytes), so execute does no packing and its workspace is smaller;
     * other engines read w through the pointer given at creation. xconv_plan_execute then
     * ignores its w argument (it may be NULL). The caller keeps w's buffer alive and
     * unchanged until the plan is destroyed. */
    bool constant_weights;
    /* Allow fp8 (e4m3, e5m2) convs to sum in the tensor cores' fp8 accumulation (as cuBLAS's
     * fast-accumulation mode does), not in f32: on CUDA devices of compute capability 9.0,
     * cuda.igemm_wgmma then runs fp8 on Hopper's native fp8 wgmma at about twice the bf16
     * rate. The products stay exact, but each 32-term step's sum is kept at about 13 fraction
     * bits (truncated), so an output can be off by about K / 32 * 2^-13 * sum|x*w| where the
     * default f32 sums give K * 2^-24 (K: the reduction length); sums of small integers
     * below 2^12 stay exact. Without it fp8 convs sum in f32 (DESIGN.md §2). Other dtypes and
     * the CPU engines ignore it. */
    bool allow_fp8_fast_accum;
} xconv_plan_options;

/*
 * Validates the problem (every check of DESIGN.md §3), normalizes it, picks an engine and
 * sizes its workspace. `bias` may be NULL (no bias). The tensors' data pointers are used
 * for the extent and aliasing checks; xconv_plan_execute takes the pointers to run on.
 * `options` may be NULL. `ctx` may be NULL (a default context is used at execute time).
 * On success the caller owns *plan. On error *plan is left untouched and nothing is written.
 */
XCONV_API xconv_status xconv_plan_create(xconv_context *ctx, const xconv_params *params,
                                         const xconv_tensor *x, const xconv_tensor *w,
                                         const xconv_tensor *bias, const xconv_tensor *y,
                                         const xconv_plan_options *options, xconv_plan **plan,
                                         xconv_error *err);

/* Bytes of workspace the plan needs at execute (0 if none). */
XCONV_API size_t xconv_plan_workspace_size(const xconv_plan *plan);

/* Bytes of packed weights the plan holds (0 unless created with constant_weights by an
 * engine that packs them). */
XCONV_API size_t xconv_plan_weights_bytes(const xconv_plan *plan);

/* The name of the engine the plan chose, e.g. "cpu.im2col". Owned by the library. */
XCONV_API const char *xconv_plan_engine(const xconv_plan *plan);

/*
 * A one-line description of the plan's problem, benchdnn style, e.g.
 * "conv2d n1 cin64 cout64 x56x56 k3x3 s1 p1:1 d1 g1 f32 ncx". Owned by the plan.
 */
XCONV_API const char *xconv_plan_describe(const xconv_plan *plan);

/*
 * Runs the plan on buffers of the same shapes, strides, offsets, buffer sizes and dtypes
 * as at creation (only the data pointers may differ; each is the buffer start, like
 * xconv_tensor.data). `w` is ignored (may be NULL) for a plan created with
 * constant_weights. `bias` must be non-NULL exactly when the plan has a bias. y must not
 * overlap x, w or bias. `workspace` of `workspace_bytes` >= xconv_plan_workspace_size, or
 * NULL to let xconv allocate it for this call. On error y is untouched.
 * CUDA plans run asynchronously on the context's stream.
 */
XCONV_API xconv_status xconv_plan_execute(const xconv_plan *plan, const void *x,
                                          const void *w, const void *bias, void *y,
                                          void *workspace, size_t workspace_bytes,
                                          xconv_error *err);

/* Destroys a plan; NULL is allowed. */
XCONV_API void xconv_plan_destroy(xconv_plan *plan);

/*
 * One-shot convenience: create a plan, execute it with an internal workspace, destroy it.
 * `ctx`, `bias` and `options` may be NULL. If `engine_out` is non-NULL it receives the
 * chosen engine's name (library-owned).
 */
XCONV_API xconv_status xconv_conv(xconv_context *ctx, const xconv_params *params,
                                  const xconv_tensor *x, const xconv_tensor *w,
                                  const xconv_tensor *bias, const xconv_tensor *y,
                                  const xconv_plan_options *options, const char **engine_out,
                                  xconv_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Engines                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* The number of engines built in. */
XCONV_API int xconv_engine_count(void);

/* The name of engine `index` (0 <= index < xconv_engine_count()), or NULL. */
XCONV_API const char *xconv_engine_name(int index);

/*
 * Whether engine `name` supports the problem of `params` with the given tensors (which are
 * validated first, as by xconv_plan_create). Returns OK if it does; UNSUPPORTED with the
 * reason in `err` if it does not; INVALID_ARGUMENT if the problem itself is invalid.
 */
XCONV_API xconv_status xconv_engine_supports(const char *name, const xconv_params *params,
                                             const xconv_tensor *x, const xconv_tensor *w,
                                             const xconv_tensor *bias, const xconv_tensor *y,
                                             xconv_error *err);

/* ---------------------------------------------------------------------------------------- */
/* im2col and col2im                                                                        */
/* ---------------------------------------------------------------------------------------- */

/*
 * im2col: unfolds the patches of x into columns (PyTorch's unfold, generalized to 1-3-D).
 * Reads params' spatial_rank, layout, stride, dilation, pad_lo, pad_hi (op, groups and
 * output_padding are ignored and must be valid defaults: groups 1, output_padding 0).
 * kernel[i] (i < spatial_rank) is the kernel size per spatial dim.
 *
 *   CHANNELS_FIRST: x [N, C, X..]  -> cols [N, C*prod(K), prod(Y)],
 *                   row index c*prod(K) + k (k row-major over K), column = output position.
 *   CHANNELS_LAST:  x [N, X.., C]  -> cols [N, prod(Y), prod(K)*C],
 *                   column index k*C + c.
 * Y is the conv output size. Positions in the padding read as 0. cols has x's dtype.
 */
XCONV_API xconv_status xconv_im2col(xconv_context *ctx, const xconv_params *params,
                                    const int64_t *kernel, const xconv_tensor *x,
                                    const xconv_tensor *cols, xconv_error *err);

/*
 * col2im: the adjoint of im2col (PyTorch's fold): y (the image, of the shape x had) is set
 * to the sum of every column entry at the image position it was read from; entries that
 * fall in the padding are dropped. y's spatial sizes give X; cols must match the im2col
 * shape for that X. y may be cols' dtype or a wider one (xconv_dtype_can_widen); integer
 * sums wrap modulo 2^bits(y).
 */
XCONV_API xconv_status xconv_col2im(xconv_context *ctx, const xconv_params *params,
                                    const int64_t *kernel, const xconv_tensor *cols,
                                    const xconv_tensor *y, xconv_error *err);

#ifdef __cplusplus
}
#endif

#endif /* XCONV_H */
