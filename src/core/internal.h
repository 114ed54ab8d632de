/*
 * internal.h — what every part of xconv shares behind the public header: the canonical
 * problem form engines see, the engine table entry, compute types, row converters, the
 * thread pool and the error helpers.
 */
#ifndef XCONV_INTERNAL_H
#define XCONV_INTERNAL_H

#include "xconv.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Plain loops that vectorize, built for AVX-512 and AVX2 as well as the library's SSE2
 * baseline and picked at load time (ifunc), where the toolchain supports it. */
#if defined(__x86_64__) && defined(__linux__) && (defined(__clang__) || defined(__GNUC__))
#define XCONV_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define XCONV_TARGET_CLONES
#endif

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* Fills `err` (if non-NULL) and returns `status`. `parameter` may be NULL. */
xconv_status xconv__fail(xconv_error *err, xconv_status status, const char *parameter,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Sets err->status = OK and err->operation; clears the rest. `err` may be NULL. */
void xconv__begin(xconv_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Returns from the calling function with a filled error record unless `cond` holds. */
#define XCONV_CHECK(err, cond, status, param, ...)                                        \
    do {                                                                                 \
        if (!(cond)) return xconv__fail((err), XCONV_STATUS_##status, (param), __VA_ARGS__); \
    } while (0)

/* Propagates a non-OK status. */
#define XCONV_TRY(expr)                                                                  \
    do {                                                                                 \
        xconv_status xconv__s = (expr);                                                  \
        if (xconv__s != XCONV_STATUS_OK) return xconv__s;                                \
    } while (0)

/* ---------------------------------------------------------------------------------------- */
/* Dtypes and compute types                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef enum xconv_family { XCONV_FAMILY_INT, XCONV_FAMILY_FLOAT, XCONV_FAMILY_COMPLEX } xconv_family;

xconv_family xconv__dtype_family(xconv_dtype dtype);
int          xconv__dtype_bits(xconv_dtype dtype);   /* value bits (complex: both parts) */
bool         xconv__dtype_signed(xconv_dtype dtype);
bool         xconv__dtype_valid(xconv_dtype dtype);
/* The alignment data of a dtype must have: its size, or its component's for complex. */
size_t       xconv__dtype_align(xconv_dtype dtype);

/*
 * The type arithmetic happens in (DESIGN.md §2): integers in wrapping u32 when y has at
 * most 32 bits, else u64; real floats in f32, or f64 when y is f64; complex in c64/c128.
 */
typedef enum xconv_ctype {
    XCONV_CT_U32,
    XCONV_CT_U64,
    XCONV_CT_F32,
    XCONV_CT_F64,
    XCONV_CT_C64,
    XCONV_CT_C128,
    XCONV_CT_COUNT
} xconv_ctype;

typedef struct xconv_c64  { float re, im; } xconv_c64;
typedef struct xconv_c128 { double re, im; } xconv_c128;

xconv_ctype xconv__compute_type(xconv_dtype xw_dtype, xconv_dtype y_dtype);
size_t      xconv__ctype_size(xconv_ctype ct);
const char *xconv__ctype_name(xconv_ctype ct);

/*
 * Row converters between storage dtypes and compute types. `src`/`dst` point at the first
 * element (already offset); strides are in elements of the side they describe; the compute
 * side is contiguous. Load: integers are sign- or zero-extended then wrapped to the
 * compute width; floats are exact. Store: integers truncate to y's width; floats round to
 * nearest even once. The (dtype, ct) pair must be of one family.
 */
/* Whether dtype stores exactly ct's bits (f32 for f32, i32 or u32 for u32, ...), so dense
 * rows convert by copying and kernels may read or write such tensors in place. */
bool xconv__same_bits(xconv_ctype ct, xconv_dtype dtype);

void xconv__load_row(xconv_ctype ct, xconv_dtype dtype, const void *src, int64_t src_stride,
                     void *dst, int64_t n);
void xconv__store_row(xconv_ctype ct, xconv_dtype dtype, const void *src, void *dst,
                      int64_t dst_stride, int64_t n);
/* store_row for `rows` rows at once: row r from src + r * src_pitch bytes to dst[r]. One
 * call per tile keeps the per-call costs off short rows. */
void xconv__store_rows(xconv_ctype ct, xconv_dtype dtype, const void *src, size_t src_pitch,
                       void *const *dst, int64_t dst_stride, int64_t n, int rows);

/* ---------------------------------------------------------------------------------------- */
/* The canonical problem                                                                    */
/* ---------------------------------------------------------------------------------------- */

/*
 * Every problem after validation: always 3 spatial dims (1-D and 2-D problems get leading
 * unit dims: size 1, kernel 1, stride 1, dilation 1, no padding), channels-first index
 * order with the layout folded into element strides, and the weight addressed by
 * (group, y channel in group, x channel in group, k0, k1, k2) for both ops:
 *
 *   conv:           y[n, g*cout_g + o, Y] += x[n, g*cin_g + i, Y*s + k*t - lo] * w[g, o, i, k]
 *   conv_transpose: y[n, g*cout_g + o, j] += x[n, g*cin_g + i, (j + lo - k*t)/s] * w[g, o, i, k]
 *                   where (j + lo - k*t) is a non-negative multiple of s inside x.
 *
 * Element address of x[n, c, d0, d1, d2] = x_off + n*x_sn + c*x_sc + sum d_i*x_ss[i]
 * (in elements of x's dtype, from the buffer start); the same for y, w and bias.
 */
typedef struct xconv_canon {
    xconv_op     op;
    int          spatial_rank;  /* the user's rank, for descriptions and engine choice */
    xconv_layout layout;        /* the user's layout, for descriptions and engine choice */
    xconv_device device;
    int          device_index;
    xconv_dtype  x_dtype;       /* x and w */
    xconv_dtype  y_dtype;
    xconv_dtype  bias_dtype;    /* INVALID when there is no bias */
    xconv_ctype  ct;
    bool         has_bias;

    int64_t n, cin, cout, groups, cin_g, cout_g;
    int64_t x_size[3], k_size[3], y_size[3];
    int64_t stride[3], dil[3], pad_lo[3], pad_hi[3], opad[3];

    int64_t x_off, x_sn, x_sc, x_ss[3];
    int64_t y_off, y_sn, y_sc, y_ss[3];
    int64_t w_off, w_sg, w_so, w_si, w_sk[3];
    int64_t b_off, b_s;

    int     threads;            /* the plan's context's threads: workspace slots to size */
    bool    prepacked;          /* weights packed once at plan creation (engine's prepack) */
    bool    constant_weights;   /* the caller's promise: engines with a prepack will pack once
                                 * (known when engines are chosen; prepacked only after) */
    bool    allow_reduced;      /* the caller allows reduced-precision f32 math (allow_tf32) */
    bool    fp8_fast;           /* the caller allows fp8 sums in the tensor cores' fp8
                                 * accumulation (allow_fp8_fast_accum) */
    double  flops;              /* DESIGN.md §6 count: 2 * MACs */
} xconv_canon;

/* The problem in benchdnn style ("conv2d n1 cin64 ... f32 ncx") into buf. */
void xconv__describe(const xconv_canon *p, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------- */
/* Contexts and threads                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* Runs fn(arg, begin, end) over a static split of [0, count) into at most `threads`
 * contiguous chunks, chunk t always the same range for a given (count, threads): results
 * that depend only on the index are bit-identical for any thread count. */
typedef void (*xconv_range_fn)(void *arg, int64_t begin, int64_t end);
void xconv__parallel_for(xconv_context *ctx, int64_t count, xconv_range_fn fn, void *arg);

/* The CUDA device ordinal and stream (a cudaStream_t, NULL = default) of a context. */
int   xconv__context_cuda_device(const xconv_context *ctx);
void *xconv__context_cuda_stream(const xconv_context *ctx);

#ifdef XCONV_HAVE_CUDA
/* src/cuda: device checks and stream-ordered workspace for CUDA plans. */
xconv_status xconv__cuda_check_device(int device_index, xconv_error *err);
void        *xconv__cuda_workspace_alloc(xconv_context *ctx, size_t bytes);
void         xconv__cuda_workspace_free(xconv_context *ctx, void *ptr);
#endif

/* parallel_for whose callback also gets its chunk's index `slot` (0 <= slot < the context's
 * thread count, as xconv__context_slots tells): lets an engine give each chunk its own part
 * of a workspace sized at plan time with canon.threads. */
typedef void (*xconv_slot_fn)(void *arg, int64_t begin, int64_t end, int slot);
void xconv__parallel_for_slot(xconv_context *ctx, int64_t count, xconv_slot_fn fn, void *arg);

/* Work ranges that threads share out: left[i] holds thread i's units [lo, hi) still to run
 * (lo in the low 32 bits, hi in the high). xconv__units_init gives thread i its static
 * share of `units` (< 2^32); xconv__take_unit hands thread `self` the front of its own range,
 * or else the back of another thread's (a thread slowed by other work on its core is
 * relieved of its last units), and returns false when no unit is left. Each unit still runs
 * once, so results that depend only on the unit are the same for any schedule. left holds
 * XCONV_UNITS_STRIDE words per thread: each thread's range on its own cache line (two
 * threads' ranges in one line cost a few percent of a 1x1 conv in line transfers). */
#define XCONV_UNITS_STRIDE 8
void xconv__units_init(void *left, int nthreads, int64_t units);
bool xconv__take_unit(void *left, int nthreads, int self, int64_t *unit);
/* The same for up to `most` units at once, [*first, *first + *count) in order: one atomic
 * operation for all (a locked operation waits for the thread's stores to drain, which the
 * next unit's products could otherwise run under). */
bool xconv__take_units(void *left, int nthreads, int self, int64_t most, int64_t *first, int64_t *count);

/* A context for internal use when the caller passed NULL (single thread, created on demand,
 * lives for the process). */
xconv_context *xconv__default_context(void);

/* ---------------------------------------------------------------------------------------- */
/* Engines                                                                                  */
/* ---------------------------------------------------------------------------------------- */

typedef struct xconv_exec {
    const xconv_canon *p;
    xconv_context     *ctx;       /* never NULL */
    const void        *x, *w, *bias;  /* buffer starts; bias NULL without bias */
    void              *y;
    void              *workspace; /* >= workspace_bytes(p), aligned to 64 bytes */
    size_t             workspace_bytes;
    const void        *packed;    /* the prepack output when p->prepacked, else NULL */
} xconv_exec;

typedef struct xconv_engine {
    const char *name;                                        /* "cpu.im2col", stable */
    xconv_device device;
    bool (*supports)(const xconv_canon *p, const char **why_not);
    size_t (*workspace_bytes)(const xconv_canon *p);
    double (*cost)(const xconv_canon *p);                    /* lower is preferred */
    xconv_status (*run)(const xconv_exec *e, xconv_error *err);
    /* Optional (NULL: the engine reads w in place at every run). With p->prepacked set,
     * prepack_bytes(p) bytes (64-byte aligned) receive the packed weights once, at plan
     * creation, and run finds them in e->packed; workspace_bytes(p) then leaves them out. */
    size_t (*prepack_bytes)(const xconv_canon *p);
    void (*prepack)(const xconv_canon *p, xconv_context *ctx, const void *w, void *packed);
    /* Optional (NULL: nothing to do): frees what prepack acquired beyond the packed bytes
     * (device memory whose address the packed bytes hold), when the plan is destroyed. */
    void (*release)(const xconv_canon *p, void *packed);
} xconv_engine;

/* The engine table (src/plan/engines.c), in preference order, cpu.ref last. */
extern const xconv_engine *const xconv__engines[];
extern const int xconv__engine_count;

const xconv_engine *xconv__engine_find(const char *name);

/* Picks the engine for p: the forced one (UNSUPPORTED with its why_not if it cannot run p)
 * or the cheapest that supports p. */
xconv_status xconv__select_engine(const xconv_canon *p, const char *forced,
                                  const xconv_engine **out, xconv_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Validation and normalization (src/api/validate.c, src/plan/normalize.c)                  */
/* ---------------------------------------------------------------------------------------- */

/* Every check of DESIGN.md §3 for a conv / conv_transpose problem; on success fills *canon.
 * `op_name` is used in nothing but must already be in err->operation. bias may be NULL. */
xconv_status xconv__validate_problem(const xconv_params *params, const xconv_tensor *x,
                                     const xconv_tensor *w, const xconv_tensor *bias,
                                     const xconv_tensor *y, xconv_canon *canon,
                                     xconv_error *err);

/* Checks params and shapes only (xconv_output_shape); y_shape gets the output shape. */
xconv_status xconv__validate_shapes(const xconv_params *params, const int64_t *x_shape,
                                    const int64_t *w_shape, int64_t *y_shape,
                                    xconv_error *err);

/* Maps a validated problem onto the canonical form (src/plan/normalize.c). */
void xconv__normalize(const xconv_params *params, const xconv_tensor *x, const xconv_tensor *w,
                      const xconv_tensor *bias, const xconv_tensor *y, xconv_canon *canon);

/* A conv whose kernel covers x (no padding, no dilation, one output per image: a vision
 * transformer's patch projection over patchified x) is a 1x1 conv over the flattened
 * (channel, tap) values when x and w both hold them at one stride in the same order: both
 * channels-last (tap-major, channel inner) or both channels-first (channel-major). Returns
 * p itself otherwise, or the 1x1 problem, written into *view: cin = cin * taps, x_sc =
 * w_si = 1, and one image whose N positions along dim 2 are the images (x_ss[2] = x_sn,
 * y_ss[2] = y_sn); op, dtypes, layout, rank and flops kept. Engines that do not merge
 * kernel taps into one reduction run use it (cpu.amx, cpu.avx512bf16). */
const xconv_canon *xconv__patch_view(const xconv_canon *p, xconv_canon *view);

/* One tensor descriptor: present, valid dtype, `rank`, non-negative shape, a known device.
 * `what` names it in messages ("x", "w", "bias", "y", "cols"). */
xconv_status xconv__check_tensor(const xconv_tensor *t, const char *what, int rank,
                                 xconv_error *err);

/* The memory of a shape-checked view: sizes fit 64 bits, data present, strides, extent
 * inside the buffer; an output may not broadcast or put two elements at one address. */
xconv_status xconv__check_memory(const xconv_tensor *t, const char *what, bool is_output,
                                 xconv_error *err);

/* Whether the byte ranges two views touch intersect (NULL or empty views never do). */
bool xconv__tensors_overlap(const xconv_tensor *a, const xconv_tensor *b);

/* The element strides and offset of a view (row-major when not strided). */
void xconv__view_strides(const xconv_tensor *t, int64_t *strides, int64_t *offset);

/* The byte range [lo, hi) a tensor view touches; false when it touches nothing. */
bool xconv__tensor_span(const xconv_tensor *t, int64_t *lo_bytes, int64_t *hi_bytes);

/* ---------------------------------------------------------------------------------------- */
/* im2col / col2im kernels (src/cpu/engines/im2col_kernels.c)                              */
/* ---------------------------------------------------------------------------------------- */

/*
 * The geometry of a validated im2col/col2im call, in canonical 3-D form: image
 * img[n, c, d0, d1, d2] and cols[n, row, col] where for CHANNELS_FIRST row = c*KK + k,
 * col = output position, and for CHANNELS_LAST row = output position, col = k*C + c
 * (KK = prod(k_size), positions row-major over Y).
 */
typedef struct xconv_unfold {
    xconv_layout layout;
    int64_t n, c;
    int64_t x_size[3], k_size[3], y_size[3];
    int64_t stride[3], dil[3], pad_lo[3];
    xconv_dtype img_dtype, cols_dtype;
    xconv_ctype ct;     /* col2im accumulation type */
    int64_t img_off, img_sn, img_sc, img_ss[3];
    int64_t cols_off, cols_s[3];
} xconv_unfold;

xconv_status xconv__im2col_run(xconv_context *ctx, const xconv_unfold *u, const void *img,
                               void *cols, xconv_error *err);
xconv_status xconv__col2im_run(xconv_context *ctx, const xconv_unfold *u, const void *cols,
                               void *img, xconv_error *err);

/* Small helpers */
static inline int64_t xconv__prod3(const int64_t v[3]) { return v[0] * v[1] * v[2]; }

#endif /* XCONV_INTERNAL_H */
