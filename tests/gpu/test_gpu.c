/*
 * test_gpu.c — the CUDA engines against the CPU reference engine "cpu.ref", plus the
 * validation table on CUDA tensors.
 *
 *   1. random problems (both ops, ranks 1-3, both layouts, groups, padding, dilation, output
 *      padding, bias, contiguous and strided views with gaps, negative and zero strides,
 *      all 16 dtypes with every legal widening of y and bias), run by every CUDA engine that
 *      supports them and by the planner's choice:
 *        - "exact" inputs (integers: random bits; floats: small integers, so every partial
 *          sum is exact in f32 and the result is independent of summation order): the whole
 *          y buffer, gaps included, must equal cpu.ref's byte for byte;
 *        - "real" inputs (floats uniform in [-1, 1]): within the accumulation bound of
 *          DESIGN.md §2 plus one rounding of y.
 *   2. tensor-core-shaped problems (channels-last, wide channel counts) the same way, and
 *      batches shaped for each special engine (depthwise, patch, deconv, channels-first
 *      transposes around the tensor cores, wgmma: outputs up
 *      to 300 channels and rows over several 128-row tiles). fp8 convs run once more with
 *      allow_fp8_fast_accum on cuda.igemm_wgmma's native fp8 wgmma (check_problem: exact
 *      where the sums stay below 2^12, else within that accumulation's bound), and without
 *      the option that engine must refuse them.
 *   3. bad inputs: each mutation of a valid problem gives the same status, parameter and
 *      description on CUDA tensors as on CPU tensors, and y's device buffer is untouched;
 *      mixing devices and naming a missing device are errors.
 *
 * Runs on a machine without a GPU too: it then prints a skip line and "0 passed, 0 failed".
 * XCONV_GPU_TEST_QUICK=1 runs a reduced set (for compute-sanitizer); XCONV_GPU_TEST_ONLY=<engine>
 * only the problems shaped for that special engine (cuda.cf_gemm, say).
 */
#include "harness.h"
#include "xconv.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef XCONV_HAVE_CUDA
int main(void)
{
    printf("test_gpu: skipped: this build has no cuda backend\n");
    return xt_finish("test_gpu");
}
#else

#include <cuda_runtime_api.h>

/* ---------------------------------------------------------------------------------------- */
/* Random numbers and dtypes                                                                */
/* ---------------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t rnd_in(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

static bool is_int(xconv_dtype d) { return d >= XCONV_DTYPE_U8 && d <= XCONV_DTYPE_I64; }
static bool is_complex(xconv_dtype d) { return d == XCONV_DTYPE_C64 || d == XCONV_DTYPE_C128; }
static bool has_inf(xconv_dtype d)
{
    return d == XCONV_DTYPE_F16 || d == XCONV_DTYPE_BF16 || d == XCONV_DTYPE_F32 ||
           d == XCONV_DTYPE_F64 || is_complex(d);
}

/* Mantissa bits of a real float dtype (the relative size of one rounding of y). */
static int mant_bits(xconv_dtype d)
{
    switch (d) {
    case XCONV_DTYPE_F8E4M3: return 3;
    case XCONV_DTYPE_F8E5M2: return 2;
    case XCONV_DTYPE_F16: return 10;
    case XCONV_DTYPE_BF16: return 7;
    case XCONV_DTYPE_F32: case XCONV_DTYPE_C64: return 23;
    default: return 52;
    }
}

/* A dtype y (or bias) may take for inputs `in`: itself or a random legal widening. */
static xconv_dtype pick_out_dtype(xconv_dtype in)
{
    xconv_dtype cands[XCONV_DTYPE_COUNT];
    int n = 0;
    for (int d = 1; d < XCONV_DTYPE_COUNT; d++)
        if (xconv_dtype_can_widen(in, (xconv_dtype)d)) cands[n++] = (xconv_dtype)d;
    /* Half the time the same dtype, the common case. */
    return (rnd() & 1) ? in : cands[rnd() % (uint64_t)n];
}

/* Writes value v (a real, already representable or to be rounded) as dtype d at p. */
static void put_real(xconv_dtype d, void *p, double re, double im)
{
    switch (d) {
    case XCONV_DTYPE_F8E4M3: *(uint8_t *)p = xconv_f32_to_f8e4m3((float)re); break;
    case XCONV_DTYPE_F8E5M2: *(uint8_t *)p = xconv_f32_to_f8e5m2((float)re); break;
    case XCONV_DTYPE_F16: { uint16_t h = xconv_f32_to_f16((float)re); memcpy(p, &h, 2); break; }
    case XCONV_DTYPE_BF16: { uint16_t h = xconv_f32_to_bf16((float)re); memcpy(p, &h, 2); break; }
    case XCONV_DTYPE_F32: { float f = (float)re; memcpy(p, &f, 4); break; }
    case XCONV_DTYPE_F64: memcpy(p, &re, 8); break;
    case XCONV_DTYPE_C64: { float f[2] = {(float)re, (float)im}; memcpy(p, f, 8); break; }
    case XCONV_DTYPE_C128: { double f[2] = {re, im}; memcpy(p, f, 16); break; }
    default: break;
    }
}

static void get_real(xconv_dtype d, const void *p, double *re, double *im)
{
    *im = 0;
    switch (d) {
    case XCONV_DTYPE_F8E4M3: *re = xconv_f8e4m3_to_f32(*(const uint8_t *)p); break;
    case XCONV_DTYPE_F8E5M2: *re = xconv_f8e5m2_to_f32(*(const uint8_t *)p); break;
    case XCONV_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); *re = xconv_f16_to_f32(h); break; }
    case XCONV_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); *re = xconv_bf16_to_f32(h); break; }
    case XCONV_DTYPE_F32: { float f; memcpy(&f, p, 4); *re = f; break; }
    case XCONV_DTYPE_F64: memcpy(re, p, 8); break;
    case XCONV_DTYPE_C64: { float f[2]; memcpy(f, p, 8); *re = f[0], *im = f[1]; break; }
    case XCONV_DTYPE_C128: { double f[2]; memcpy(f, p, 16); *re = f[0], *im = f[1]; break; }
    default: *re = 0; break;
    }
}

/* FILL_SPECIAL: FILL_REAL with a few weights made infinite (float dtypes with an infinity):
 * a tap in conv's padding then reads 0, and 0 * Inf = NaN joins the sum (cpu.ref, PyTorch);
 * an engine that skipped padded taps would leave the sum finite. FILL_SPECIAL_X: a few
 * elements of x made infinite or NaN instead: an engine that multiplies values of x outside
 * a window by zero weights (cuda.fold_tc's overlapping fold) would make NaN where cpu.ref
 * has a finite sum or an infinity. */
typedef enum fill_mode { FILL_EXACT, FILL_REAL, FILL_SPECIAL, FILL_SPECIAL_X } fill_mode;

/* Fills every element of a buffer (gaps too). Integers: random bits. Floats: small integers
 * in [-3, 3] (exact) or uniform in [-1, 1] (real). */
static void fill_buffer(xconv_dtype d, void *buf, size_t bytes, fill_mode mode)
{
    const size_t es = xconv_dtype_size(d);
    unsigned char *p = buf;
    if (es == 0) { /* an invalid dtype (bad-input cases): any bytes do */
        memset(buf, 0x11, bytes);
        return;
    }
    for (size_t i = 0; i + es <= bytes; i += es) {
        if (is_int(d)) {
            uint64_t v = rnd();
            memcpy(p + i, &v, es);
        } else if (mode == FILL_EXACT) {
            put_real(d, p + i, (double)rnd_in(-3, 3), (double)rnd_in(-3, 3));
        } else {
            put_real(d, p + i, 2 * rnd_unit() - 1, 2 * rnd_unit() - 1);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Problems                                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct problem {
    xconv_params params;
    xconv_tensor x, w, b, y;    /* descriptors; data NULL until placed */
    bool has_bias;
    int64_t k_red;              /* reduction length per output: cin_g * prod(K) */
} problem;

static int64_t out_size(const xconv_params *q, int i, int64_t x, int64_t k)
{
    if (q->op == XCONV_OP_CONV) {
        int64_t span = x + q->pad_lo[i] + q->pad_hi[i] - q->dilation[i] * (k - 1) - 1;
        return span < 0 ? 0 : span / q->stride[i] + 1;
    }
    return (x - 1) * q->stride[i] - q->pad_lo[i] - q->pad_hi[i] + q->dilation[i] * (k - 1) +
           q->output_padding[i] + 1;
}

/* Lays a tensor of t->shape out in memory: contiguous, or (strided) in a random dim order
 * with gaps, an offset, maybe one negative stride and (inputs) maybe one zero stride. */
static void layout_tensor(xconv_tensor *t, bool strided, bool is_output)
{
    const size_t es = xconv_dtype_size(t->dtype);
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++) numel *= t->shape[i];
    if (!strided) {
        t->strided = false;
        t->buffer_bytes = (size_t)numel * es;
        return;
    }
    int order[XCONV_MAX_RANK];
    for (int i = 0; i < t->rank; i++) order[i] = i;
    for (int i = t->rank - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), s = order[i];
        order[i] = order[j], order[j] = s;
    }
    int64_t step = rnd_in(1, 2);
    for (int r = t->rank - 1; r >= 0; r--) {
        int dim = order[r];
        t->strides[dim] = step;
        step *= t->shape[dim] + rnd_in(0, 1);
    }
    int64_t offset = rnd_in(0, 3);
    int flip = (int)rnd_in(-1, t->rank - 1);
    if (flip >= 0 && t->shape[flip] > 1) {
        offset += (t->shape[flip] - 1) * t->strides[flip];
        t->strides[flip] = -t->strides[flip];
    }
    if (!is_output && rnd_in(0, 4) == 0) {
        int z = (int)rnd_in(0, t->rank - 1);
        if (t->strides[z] < 0) offset -= (t->shape[z] - 1) * -t->strides[z];
        t->strides[z] = 0;
    }
    int64_t hi = offset;
    for (int i = 0; i < t->rank; i++)
        if (t->strides[i] > 0) hi += (t->shape[i] - 1) * t->strides[i];
    t->strided = true;
    t->offset = offset;
    t->buffer_bytes = (size_t)(hi + 1 + rnd_in(0, 2)) * es;
}

/* What a random problem is shaped for: any CUDA engine, or one family of special engines
 * (the generator then draws until that engine supports the problem). */
typedef enum shape_kind {
    SHAPE_ANY,       /* every op, rank, layout, dtype, view */
    SHAPE_TC,        /* conv, channels-last, wide channels, tensor-core dtypes */
    SHAPE_DEPTHWISE, /* groups == cin, any multiplier, every dtype, both layouts, views */
    SHAPE_PATCH,     /* kernel == stride, no padding, small cin, tensor-core dtypes */
    SHAPE_DECONV,    /* conv_transpose shaped like SHAPE_TC */
    SHAPE_WGMMA,     /* SHAPE_TC with wide outputs and many rows: cuda.igemm_wgmma's tiles */
    SHAPE_CF,        /* SHAPE_TC in channels-first, both ops: cuda.cf_tc's transposes */
    SHAPE_F32,       /* SHAPE_TC in f32, both layouts: cuda.f32_bf16x3 (allow_tf32) */
    SHAPE_FOLD,      /* conv with 1-7 input channels, both layouts: cuda.fold_tc */
    SHAPE_SIMT,      /* both ops and layouts, views, the wide dtypes, rows over several
                      * tiles: cuda.igemm_simt */
    SHAPE_F8,        /* fp8 conv with 64+ channels per group, both layouts: cuda.f8_bf16 */
    SHAPE_CF1,       /* channels-first 1x1 conv at stride 1, bf16 / f16, positions and channels
                      * over several tiles, rows of 16 bytes or not: cuda.cf_gemm */
} shape_kind;

/* Set while main draws SHAPE_WGMMA problems for cuda.igemm_wgmma's resident-B launches
 * (the kernel's RB): 1x1 at stride 1, one group, 128 bytes of channels (one K stage,
 * whole for the TMA im2col loads), so that every tile of a launch reads the same B. */
static bool resb_shape;
/* Set while main draws SHAPE_WGMMA problems for its packed taps (wgmma_tma_kernel's PK): one
 * group of 64 channels of an 8-bit dtype, kernels of several taps (odd and even counts). */
static bool pack_shape;
/* cuda.patch_tc's row classes: 16-bit folded rows of whole 16-byte pieces off 128-byte lines
 * (cin * prod(k) a multiple of 8, not of 64), enough positions for every class (images of one
 * window each, channels-first, half of them) */
static bool class_shape;
/* plans with constant weights (engines with a prepack make their copies of w once) */
static bool use_constant_weights;

/* cuda.igemm_wgmma's launch knobs (read at each launch) for the next problem: tile
 * configuration cfg (an index of its CFGS), the persistent grid or not, and (blocks > 0) at
 * most that many blocks in it; wgmma_knobs_clear unsets these and every other knob a loop
 * below sets. */
static void wgmma_knobs_set(int cfg, bool persist, int blocks)
{
    const char c[2] = {(char)('0' + cfg), 0}, b[2] = {(char)('0' + blocks), 0};
    setenv("XCONV_WGMMA_CFG", c, 1);
    setenv("XCONV_WGMMA_PERSIST", persist ? "1" : "0", 1);
    if (blocks > 0) setenv("XCONV_WGMMA_BLOCKS", b, 1);
}
static void wgmma_knobs_clear(void)
{
    static const char *const names[] = {"XCONV_WGMMA_CFG",  "XCONV_WGMMA_PERSIST", "XCONV_WGMMA_BLOCKS",
                                        "XCONV_WGMMA_EPI",  "XCONV_WGMMA_SHORT",   "XCONV_WGMMA_RESB"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

/* A random valid problem of the given shape kind. */
static problem random_problem_once(shape_kind kind)
{
    const bool wg = kind == SHAPE_WGMMA;
    const bool cfk = kind == SHAPE_CF, f32k = kind == SHAPE_F32, fold = kind == SHAPE_FOLD;
    const bool simt = kind == SHAPE_SIMT, f8k = kind == SHAPE_F8, cf1 = kind == SHAPE_CF1;
    const bool tc = kind == SHAPE_TC || kind == SHAPE_DECONV || kind == SHAPE_PATCH || wg || cfk ||
                    f32k || fold || f8k || cf1;
    const bool dw = kind == SHAPE_DEPTHWISE, patch = kind == SHAPE_PATCH;
    /* a quarter of the depthwise problems shaped for dw_slide: channels-last, 16k channels,
     * 3- or 5-wide innermost windows at stride 1-2, every dtype (fp8 too) */
    const bool slide = dw && rnd() % 4 == 0;
    /* and a quarter shaped for dw_cf_plane: channels-first, square 3x3 / 5x5 windows at one
     * stride 1 or 2, no dilation, 2-D or 3-D with a 1-wide outer window */
    const bool cf_plane = dw && !slide && rnd() % 3 == 0;
    const int64_t plane_ks = rnd() & 1 ? 3 : 5, plane_s = rnd_in(1, 2);
    /* a quarter of the wgmma problems 1x1 at stride 1 without padding (the 1x1 layers'
     * shape: one K stage per tap, tiles of few stages) */
    const bool wg_plain = wg && !pack_shape && (resb_shape || rnd() % 4 == 0);
    static const xconv_dtype tc_dtypes[] = {XCONV_DTYPE_BF16, XCONV_DTYPE_F16, XCONV_DTYPE_I8,
                                            XCONV_DTYPE_U8, XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F8E5M2};
    problem pb;
    memset(&pb, 0, sizeof pb);
    const int d = cf_plane ? (int)rnd_in(2, 3) : (int)rnd_in(1, 3);
    const xconv_op op = kind == SHAPE_DECONV || ((kind == SHAPE_ANY || cfk || simt) && (rnd() & 1))
                            ? XCONV_OP_CONV_TRANSPOSE
                            : XCONV_OP_CONV;
    const xconv_layout L = cf_plane ? XCONV_LAYOUT_CHANNELS_FIRST
                           : slide || (!cfk && !cf1 && ((tc && !patch && !f32k && !fold && !f8k) ||
                                                (rnd() & 1)))
                               ? XCONV_LAYOUT_CHANNELS_LAST
                               : XCONV_LAYOUT_CHANNELS_FIRST;
    xconv_params q = xconv_params_init(op, d, L);
    int64_t n, g, cin_g, cout_g, xs[3], ks[3], ys[3];
    for (;;) {
        n = rnd_in(1, 2);
        g = tc ? (rnd_in(0, 3) == 0 ? 2 : 1) : rnd_in(1, 3);
        cin_g = tc ? 8 * rnd_in(1, 9) : rnd_in(1, 4);
        cout_g = tc ? rnd_in(1, 80) : rnd_in(1, 4);
        if (wg) { /* every tile width (64, 128, 256), column tails, two column tiles; taps
                   * of one to six 128-byte channel blocks (the TMA im2col loader reads
                   * whole blocks: groups > 1 take it at multiples of 128 bytes) */
            const int64_t r = rnd_in(0, 3);
            cin_g = r < 2 ? 8 * rnd_in(1, 8) : r == 2 ? 64 * rnd_in(1, 3) : 8 * rnd_in(9, 48);
            cout_g = rnd_in(0, 2) == 0 ? rnd_in(1, 64) : rnd_in(0, 1) ? rnd_in(65, 160)
                                                                     : rnd_in(161, 300);
            if (resb_shape) g = 1, cout_g = 16 * rnd_in(1, 16); /* y rows of whole 16-byte pieces: TMA boxes */
            if (pack_shape) g = 1, cin_g = 64;
        }
        if (kind == SHAPE_DECONV && rnd_in(0, 2) == 0) /* whole 128-byte blocks: the phases */
            cin_g = 64 * rnd_in(1, 3);                 /* in one launch of the TMA kernel */
        if (dw) { /* channel counts of 8k reach the 16-byte path */
            g = slide ? 16 * rnd_in(1, 4) : rnd() & 1 ? 8 * rnd_in(1, 4) : rnd_in(1, 20);
            cin_g = 1;
            cout_g = !slide && rnd_in(0, 3) == 0 ? 2 : 1;
        }
        if (patch) {
            g = 1;
            cin_g = rnd_in(1, 4);
            if (rnd() & 1) cin_g *= 8;
            if (class_shape && L == XCONV_LAYOUT_CHANNELS_FIRST) n = rnd_in(9, 150);
        }
        if (fold) {
            g = 1;
            cin_g = rnd_in(1, 7);
        }
        if (f8k) { /* whole 128-byte bf16 blocks after the copy, several column tiles */
            cin_g = rnd() & 1 ? 64 * rnd_in(1, 3) : 8 * rnd_in(8, 20);
            cout_g = rnd_in(1, 200);
        }
        if (cf1) { /* one to five 64-channel stages (tails too: odd counts make w's rows
                    * other than 16-byte multiples), one to three 128-channel tiles */
            g = rnd_in(0, 3) == 0 ? 2 : 1;
            cin_g = rnd_in(0, 2) == 0 ? rnd_in(1, 40) : rnd() & 1 ? 64 * rnd_in(1, 3) : 8 * rnd_in(1, 40);
            cout_g = rnd_in(0, 2) == 0 ? rnd_in(1, 64) : rnd_in(0, 1) ? rnd_in(65, 160)
                                                                     : rnd_in(161, 300);
            n = rnd_in(1, 3);
        }
        if (simt) { /* reductions over several 8-step stages, one to three column tiles */
            g = rnd_in(0, 3) == 0 ? 2 : 1;
            cin_g = rnd_in(0, 2) == 0 ? rnd_in(1, 4) : rnd_in(5, 24);
            cout_g = rnd_in(0, 2) == 0 ? rnd_in(1, 16) : rnd_in(0, 1) ? rnd_in(17, 130)
                                                                     : rnd_in(131, 300);
        }
        bool ok = true;
        /* depthwise: half the kernels square 3x3 / 5x5 (the compiled-size paths) */
        const int64_t square = dw && (rnd() & 1) ? (rnd() & 1 ? 3 : 5) : 0;
        for (int i = 0; i < d; i++) {
            ks[i] = rnd_in(1, dw ? 5 : 3);
            if (square) ks[i] = d == 3 && i == 0 ? 1 : square;
            q.stride[i] = rnd_in(1, tc ? 2 : 3);
            q.dilation[i] = rnd_in(1, 2);
            q.pad_lo[i] = rnd_in(0, 2);
            q.pad_hi[i] = rnd_in(0, 2);
            if (slide && i == d - 1) {
                ks[i] = rnd() & 1 ? 3 : 5;
                q.stride[i] = rnd_in(1, 2);
                q.dilation[i] = 1;
            }
            if (cf_plane) {
                const bool outer = d == 3 && i == 0;
                ks[i] = outer ? 1 : plane_ks;
                q.stride[i] = outer ? rnd_in(1, 2) : plane_s;
                q.dilation[i] = 1;
                if (outer) q.pad_lo[i] = q.pad_hi[i] = 0;
            }
            if (wg_plain || cf1) {
                ks[i] = 1;
                q.stride[i] = 1;
                q.pad_lo[i] = q.pad_hi[i] = 0;
            }
            if (patch) { /* windows tile x; sometimes one window per image */
                ks[i] = rnd_in(1, 4);
                q.stride[i] = ks[i];
                q.dilation[i] = 1;
                q.pad_lo[i] = 0;
                q.pad_hi[i] = 0;
            }
            q.output_padding[i] =
                op == XCONV_OP_CONV_TRANSPOSE
                    ? rnd_in(0, (q.stride[i] > q.dilation[i] ? q.stride[i] : q.dilation[i]) - 1)
                    : 0;
            xs[i] = rnd_in(1, tc ? (d == 3 ? 6 : d == 2 ? 12 : 40) : (d == 3 ? 4 : 7));
            if (wg) xs[i] = rnd_in(1, d == 3 ? 8 : d == 2 ? 20 : 300); /* M over several tiles */
            if (simt) xs[i] = rnd_in(1, d == 3 ? 7 : d == 2 ? 18 : 260);
            if (cf1) /* positions over several 128-wide tiles; whole 16-byte rows half the time */
                xs[i] = i < d - 1 ? rnd_in(1, d == 3 ? 5 : 14) : rnd() & 1 ? 8 * rnd_in(1, 40) : rnd_in(2, 330);
            if (dw) xs[i] = rnd_in(1, d == 3 ? 9 : d == 2 ? 40 : 300);
            if (cf_plane && i > 0) /* wide rows: several bands of output rows per plane */
                xs[i] = i < d - 1 ? rnd_in(1, 60) : rnd() & 1 ? 8 * rnd_in(1, 25) /* rows of 16 bytes */
                                                                : rnd_in(1, 200);
            if (patch) xs[i] = rnd() & 1 ? ks[i] : ks[i] * rnd_in(1, 3) + rnd_in(0, 1);
            if (class_shape && L == XCONV_LAYOUT_CHANNELS_FIRST) xs[i] = ks[i];
            ys[i] = out_size(&q, i, xs[i], ks[i]);
            ok = ok && ys[i] >= 1;
        }
        if (class_shape) { /* rows of 16-byte pieces off 128-byte lines (16-bit dtypes) */
            int64_t kk = cin_g;
            for (int i = 0; i < d; i++) kk *= ks[i];
            ok = ok && kk % 8 == 0 && kk % 64 != 0;
        }
        if (ok) break;
    }
    q.groups = g;
    pb.params = q;
    static const xconv_dtype dw_dtypes[] = {XCONV_DTYPE_BF16, XCONV_DTYPE_F16, XCONV_DTYPE_F32};
    xconv_dtype xd = tc ? tc_dtypes[rnd() % 6] : (xconv_dtype)rnd_in(1, XCONV_DTYPE_COUNT - 1);
    /* bf16, f16, i8, u8, and fp8 (check_problem runs those again with allow_fp8_fast_accum) */
    if (wg) xd = tc_dtypes[rnd() % 6];
    if (resb_shape) cin_g = 128 / (int64_t)xconv_dtype_size(xd); /* one whole 128-byte block */
    if (pack_shape) xd = tc_dtypes[2 + rnd() % 4];                  /* i8, u8, e4m3, e5m2 */
    if (dw && (cf_plane || (rnd() & 1))) xd = dw_dtypes[rnd() % 3]; /* the 16-byte and direct paths */
    if (slide) xd = (xconv_dtype)rnd_in(1, XCONV_DTYPE_COUNT - 1); /* dw_slide runs every dtype */
    if (f32k) xd = XCONV_DTYPE_F32;
    static const xconv_dtype simt_dtypes[] = {
        XCONV_DTYPE_F32, XCONV_DTYPE_F32, XCONV_DTYPE_F64, XCONV_DTYPE_I16, XCONV_DTYPE_U16,
        XCONV_DTYPE_I32, XCONV_DTYPE_U32, XCONV_DTYPE_I64, XCONV_DTYPE_U64, XCONV_DTYPE_C64,
        XCONV_DTYPE_C128, XCONV_DTYPE_BF16, XCONV_DTYPE_I8};
    if (simt) xd = simt_dtypes[rnd() % 13]; /* bf16 and i8 for their f64 / 64-bit sums */
    if (f8k) xd = rnd() & 1 ? XCONV_DTYPE_F8E4M3 : XCONV_DTYPE_F8E5M2;
    if (cf1 || class_shape) xd = rnd() & 1 ? XCONV_DTYPE_BF16 : XCONV_DTYPE_F16;
    const xconv_dtype yd = f32k ? XCONV_DTYPE_F32 : pick_out_dtype(xd);
    const int64_t cin = g * cin_g, cout = g * cout_g;
    pb.has_bias = rnd() & 1;
    pb.k_red = cin_g;
    for (int i = 0; i < d; i++) pb.k_red *= ks[i];

    xconv_tensor *x = &pb.x, *w = &pb.w, *b = &pb.b, *y = &pb.y;
    x->dtype = w->dtype = xd;
    y->dtype = yd;
    b->dtype = (rnd() & 1) ? xd : yd; /* bias is x's dtype or y's */
    x->rank = w->rank = y->rank = d + 2;
    b->rank = 1;
    const bool cf = L == XCONV_LAYOUT_CHANNELS_FIRST;
    x->shape[0] = y->shape[0] = n;
    x->shape[cf ? 1 : d + 1] = cin;
    y->shape[cf ? 1 : d + 1] = cout;
    for (int i = 0; i < d; i++) {
        x->shape[cf ? 2 + i : 1 + i] = xs[i];
        y->shape[cf ? 2 + i : 1 + i] = ys[i];
    }
    if (cf) {
        w->shape[0] = op == XCONV_OP_CONV ? cout : cin;
        w->shape[1] = op == XCONV_OP_CONV ? cin_g : cout_g;
        for (int i = 0; i < d; i++) w->shape[2 + i] = ks[i];
    } else {
        w->shape[0] = cout;
        for (int i = 0; i < d; i++) w->shape[1 + i] = ks[i];
        w->shape[d + 1] = cin_g;
    }
    b->shape[0] = cout;
    const bool strided = !tc && (rnd() % 3 == 0);
    layout_tensor(x, strided && (rnd() & 1), false);
    layout_tensor(w, strided && (rnd() & 1), false);
    layout_tensor(b, strided && (rnd() & 1), false);
    layout_tensor(y, strided && (rnd() & 1), true);
    return pb;
}

/* The engine a shape kind is for (NULL: any). */
static const char *kind_engine(shape_kind kind)
{
    switch (kind) {
    case SHAPE_DEPTHWISE: return "cuda.depthwise";
    case SHAPE_PATCH: return "cuda.patch_tc";
    case SHAPE_DECONV: return "cuda.deconv_tc";
    case SHAPE_WGMMA: return "cuda.igemm_wgmma";
    case SHAPE_CF: return "cuda.cf_tc";
    case SHAPE_FOLD: return "cuda.fold_tc";
    case SHAPE_SIMT: return "cuda.igemm_simt";
    case SHAPE_F8: return "cuda.f8_bf16";
    case SHAPE_CF1: return "cuda.cf_gemm";
    default: return NULL;
    }
}

/* Whether XCONV_GPU_TEST_ONLY (only, an engine name or NULL) leaves out the problems of kind. */
static bool skip_kind(const char *only, shape_kind kind)
{
    const char *eng = kind_engine(kind);
    return only && (!eng || strcmp(only, eng) != 0);
}

static problem random_problem(shape_kind kind)
{
    const char *want = kind_engine(kind);
    problem pb = random_problem_once(kind);
    for (int tries = 0; want && tries < 200; tries++) {
        xconv_error err;
        /* supports() reads descriptors only: distinct, far apart, aligned fake addresses */
        for (int i = 0; i < 4; i++) {
            xconv_tensor *t = i == 0 ? &pb.x : i == 1 ? &pb.w : i == 2 ? &pb.b : &pb.y;
            t->data = (void *)((uintptr_t)(i + 1) << 36);
            t->device = XCONV_DEVICE_CUDA;
            t->device_index = 0;
        }
        if (xconv_engine_supports(want, &pb.params, &pb.x, &pb.w, pb.has_bias ? &pb.b : NULL, &pb.y,
                                  &err) == XCONV_STATUS_OK)
            break;
        pb = random_problem_once(kind);
    }
    return pb;
}

static void describe(const problem *pb, char *buf, size_t size)
{
    const xconv_params *q = &pb->params;
    int len = snprintf(buf, size, "%s%dd %s x[", q->op == XCONV_OP_CONV ? "conv" : "conv_transpose",
                       q->spatial_rank, q->layout == XCONV_LAYOUT_CHANNELS_FIRST ? "cf" : "cl");
    for (int i = 0; i < pb->x.rank; i++)
        len += snprintf(buf + len, size - (size_t)len, "%" PRId64 ",", pb->x.shape[i]);
    len += snprintf(buf + len, size - (size_t)len, "] w[");
    for (int i = 0; i < pb->w.rank; i++)
        len += snprintf(buf + len, size - (size_t)len, "%" PRId64 ",", pb->w.shape[i]);
    len +=
        snprintf(buf + len, size - (size_t)len,
                 "] s%" PRId64 " d%" PRId64 " p%" PRId64 ":%" PRId64 " op%" PRId64 " g%" PRId64
                 " %s->%s bias %s %s%s%s%s",
                 q->stride[0], q->dilation[0], q->pad_lo[0], q->pad_hi[0], q->output_padding[0],
                 q->groups, xconv_dtype_name(pb->x.dtype), xconv_dtype_name(pb->y.dtype),
                 pb->has_bias ? xconv_dtype_name(pb->b.dtype) : "none", pb->x.strided ? "xs" : "",
                 pb->w.strided ? "ws" : "", pb->b.strided ? "bs" : "", pb->y.strided ? "ys" : "");
}

/* ---------------------------------------------------------------------------------------- */
/* Running and comparing                                                                    */
/* ---------------------------------------------------------------------------------------- */

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t ce_ = (call);                                                                  \
        if (ce_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                          \
                    cudaGetErrorString(ce_));                                                      \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct buffers {
    void *h[4];  /* x, w, bias, y on the host */
    void *d[4];  /* the same on the device */
    size_t bytes[4];
} buffers;

static xconv_tensor *tensor_at(problem *pb, int i)
{
    return i == 0 ? &pb->x : i == 1 ? &pb->w : i == 2 ? &pb->b : &pb->y;
}

static void buffers_make(problem *pb, buffers *bf, fill_mode mode)
{
    for (int i = 0; i < 4; i++) {
        xconv_tensor *t = tensor_at(pb, i);
        bf->bytes[i] = t->buffer_bytes ? t->buffer_bytes : 16;
        bf->h[i] = malloc(bf->bytes[i]);
        if (i == 3) memset(bf->h[i], 0xA5, bf->bytes[i]); /* canary: unwritten gaps stay so */
        else fill_buffer(t->dtype, bf->h[i], bf->bytes[i], mode);
        const size_t es = xconv_dtype_size(t->dtype);
        if (i == 1 && mode == FILL_SPECIAL && has_inf(t->dtype))
            for (int k = 0; k < 3; k++) /* gaps of a strided w may take one: harmless */
                put_real(t->dtype, (char *)bf->h[i] + (size_t)rnd_in(0, (int64_t)(bf->bytes[i] / es) - 1) * es,
                         (rnd() & 1) ? INFINITY : -INFINITY, 0.0);
        if (i == 0 && mode == FILL_SPECIAL_X && has_inf(t->dtype))
            for (int k = 0; k < 2; k++)
                put_real(t->dtype, (char *)bf->h[i] + (size_t)rnd_in(0, (int64_t)(bf->bytes[i] / es) - 1) * es,
                         k ? NAN : (rnd() & 1) ? INFINITY : -INFINITY, 0.0);
        CUDA_OK(cudaMalloc(&bf->d[i], bf->bytes[i]));
        CUDA_OK(cudaMemcpy(bf->d[i], bf->h[i], bf->bytes[i], cudaMemcpyHostToDevice));
    }
}

static void buffers_free(buffers *bf)
{
    for (int i = 0; i < 4; i++) {
        free(bf->h[i]);
        CUDA_OK(cudaFree(bf->d[i]));
    }
}

/* Points the descriptors at one side's buffers. */
static void place(problem *pb, buffers *bf, bool on_gpu)
{
    for (int i = 0; i < 4; i++) {
        xconv_tensor *t = tensor_at(pb, i);
        t->data = on_gpu ? bf->d[i] : bf->h[i];
        t->device = on_gpu ? XCONV_DEVICE_CUDA : XCONV_DEVICE_CPU;
        t->device_index = 0;
    }
}

/* Logical elements of y one by one: calls back with the element offset. */
static int64_t y_offset(const xconv_tensor *t, const int64_t *idx)
{
    int64_t off = t->strided ? t->offset : 0;
    for (int i = 0; i < t->rank; i++) {
        if (t->strided) off += idx[i] * t->strides[i];
        else off = off * t->shape[i] + idx[i];
    }
    return off;
}

/* Compares y element by element within the accumulation bound; returns mismatches. */
static int64_t compare_real(const problem *pb, const void *got, const void *want, char *msg,
                            size_t size, double product_rel)
{
    const xconv_tensor *y = &pb->y;
    const xconv_dtype d = y->dtype;
    const size_t es = xconv_dtype_size(d);
    const bool f64 = d == XCONV_DTYPE_F64 || d == XCONV_DTYPE_C128;
    /* |inputs| <= 1: the sum of |x*w| (and bias) is at most k_red + 1; complex doubles it. */
    const double mag = (double)(pb->k_red + 1) * (is_complex(d) ? 2 : 1);
    /* product_rel: an engine's own error per product (reduced-precision f32 math) */
    const double acc_bound = 4.0 * mag * mag * ldexp(1.0, f64 ? -52 : -23) + product_rel * mag;
    const double rel_y = ldexp(1.0, -mant_bits(d));
    /* the spacing of y's subnormals, where one rounding is not relative */
    const double min_step = d == XCONV_DTYPE_F8E4M3 ? 0x1p-9 : d == XCONV_DTYPE_F8E5M2 ? 0x1p-16
                          : d == XCONV_DTYPE_F16 ? 0x1p-24 : 0x1p-149;
    int64_t idx[XCONV_MAX_RANK] = {0}, bad = 0;
    for (;;) {
        const int64_t off = y_offset(y, idx);
        double gr, gi, wr, wi;
        get_real(d, (const char *)got + off * (int64_t)es, &gr, &gi);
        get_real(d, (const char *)want + off * (int64_t)es, &wr, &wi);
        const double tol_r = acc_bound + rel_y * fabs(wr) + min_step;
        const double tol_i = acc_bound + rel_y * fabs(wi) + min_step;
        bool ok = (isnan(gr) && isnan(wr)) || fabs(gr - wr) <= tol_r || gr == wr;
        ok = ok && ((isnan(gi) && isnan(wi)) || fabs(gi - wi) <= tol_i || gi == wi);
        /* an infinity's tolerance is infinite: it must match exactly */
        if (isinf(wr) || isinf(gr)) ok = ok && gr == wr;
        if (isinf(wi) || isinf(gi)) ok = ok && gi == wi;
        if (!ok && bad++ == 0)
            snprintf(msg, size, "element at %" PRId64 ": got (%.9g, %.9g) want (%.9g, %.9g)", off,
                     gr, gi, wr, wi);
        int i = y->rank - 1;
        while (i >= 0 && ++idx[i] == y->shape[i]) idx[i--] = 0;
        if (i < 0) break;
    }
    return bad;
}

static xconv_status run_conv(problem *pb, const char *engine, const char **used, xconv_error *err)
{
    xconv_plan_options o;
    memset(&o, 0, sizeof o);
    o.engine = engine;
    o.constant_weights = use_constant_weights;
    return xconv_conv(NULL, &pb->params, &pb->x, &pb->w, pb->has_bias ? &pb->b : NULL, &pb->y, &o,
                      used, err);
}

static int engines_run_total;

/* Runs per engine name, so a log shows that every engine was exercised. */
#define ENGINE_SLOTS 16
static struct { const char *name; int runs; } engine_runs[ENGINE_SLOTS];

static void count_run(const char *name)
{
    for (int e = 0; e < ENGINE_SLOTS; e++) {
        if (!engine_runs[e].name) engine_runs[e].name = name;
        if (strcmp(engine_runs[e].name, name) == 0) {
            engine_runs[e].runs++;
            return;
        }
    }
}

/* One problem: cpu.ref on the host, then every CUDA engine that supports it and the
 * planner's choice on the device, each compared with the reference. */
/* cuda.patch_tc planned under one XCONV_PATCH_PAD setting and run under another, with a
 * workspace of exactly the plan's size (memcheck would see a copy past it): the run keeps to
 * the plan's copies and gives cpu.ref's y. 0: not checked, else 1 + the pair of settings. */
static int patch_switch;

static void check_patch_switch(problem *pb, buffers *bf, const void *want, void *got,
                               fill_mode mode, const char *what)
{
    static const char *const pairs[][2] = {{"0", "1"}, {"0", "w"}, {"w", "1"},
                                           {"1", "0"}, {"c", "w"}, {"0", "c"}};
    const char *const *pair = pairs[(patch_switch - 1) % 6];
    xconv_plan_options o;
    memset(&o, 0, sizeof o);
    o.engine = "cuda.patch_tc";
    xconv_error err;
    xconv_plan *plan = NULL;
    setenv("XCONV_PATCH_PAD", pair[0], 1);
    xconv_status s = xconv_plan_create(NULL, &pb->params, &pb->x, &pb->w,
                                       pb->has_bias ? &pb->b : NULL, &pb->y, &o, &plan, &err);
    XT_CHECK(s == XCONV_STATUS_OK || s == XCONV_STATUS_UNSUPPORTED,
             "cuda.patch_tc planned with XCONV_PATCH_PAD=%s on %s: %s", pair[0], what,
             err.description);
    if (s == XCONV_STATUS_OK) {
        const size_t ws = xconv_plan_workspace_size(plan);
        void *dws = NULL;
        if (ws) CUDA_OK(cudaMalloc(&dws, ws));
        setenv("XCONV_PATCH_PAD", pair[1], 1);
        memset(got, 0xA5, bf->bytes[3]);
        CUDA_OK(cudaMemcpy(bf->d[3], got, bf->bytes[3], cudaMemcpyHostToDevice));
        s = xconv_plan_execute(plan, bf->d[0], bf->d[1], pb->has_bias ? bf->d[2] : NULL, bf->d[3],
                               dws, ws, &err);
        XT_CHECK(s == XCONV_STATUS_OK, "cuda.patch_tc planned with XCONV_PATCH_PAD=%s, run with "
                 "=%s on %s: %s", pair[0], pair[1], what, err.description);
        if (s == XCONV_STATUS_OK) {
            CUDA_OK(cudaDeviceSynchronize());
            CUDA_OK(cudaMemcpy(got, bf->d[3], bf->bytes[3], cudaMemcpyDeviceToHost));
            engines_run_total++;
            count_run("cuda.patch_tc knob switched");
            char msg[256] = "";
            const int64_t bad = mode == FILL_EXACT || is_int(pb->y.dtype)
                                    ? (memcmp(got, want, bf->bytes[3]) != 0)
                                    : compare_real(pb, got, want, msg, sizeof msg, 0.0);
            XT_CHECK(bad == 0, "cuda.patch_tc planned with XCONV_PATCH_PAD=%s, run with =%s on "
                     "%s: y differs from cpu.ref %s", pair[0], pair[1], what, msg);
        }
        if (dws) CUDA_OK(cudaFree(dws));
        xconv_plan_destroy(plan);
    }
    unsetenv("XCONV_PATCH_PAD");
}

/* A row-class problem of images of one window (channels-first): under XCONV_PATCH_PAD=c the
 * plan must take the classes, not fall back to w's single copy unseen. Its C >= 2 copies of w
 * (rows of whole 128-byte blocks, each at least as long as the single copy's) need at least
 * twice the single copy's workspace. */
static void check_classes_planned(problem *pb, const char *what)
{
    const char *knob = getenv("XCONV_PATCH_PAD");
    if (!knob || knob[0] != 'c' || pb->params.layout != XCONV_LAYOUT_CHANNELS_FIRST) return;
    const int d = pb->x.rank - 2;
    for (int i = 0; i < d; i++)
        if (pb->x.shape[2 + i] != pb->w.shape[2 + i]) return; /* not one window per image */
    const int64_t kk = pb->k_red, cout = pb->y.shape[1];
    /* (the single copy's bytes before its 256-byte rounding: two class copies of 64-byte rows
     * round up once, to less than two rounded single copies) */
    const size_t single = (size_t)(cout * ((kk + 63) / 64 * 64) * 2);
    xconv_plan_options o;
    memset(&o, 0, sizeof o);
    o.engine = "cuda.patch_tc";
    xconv_error err;
    xconv_plan *plan = NULL;
    const xconv_status s = xconv_plan_create(NULL, &pb->params, &pb->x, &pb->w,
                                             pb->has_bias ? &pb->b : NULL, &pb->y, &o, &plan, &err);
    XT_CHECK(s == XCONV_STATUS_OK, "cuda.patch_tc on %s: %s", what, err.description);
    if (s != XCONV_STATUS_OK) return;
    const size_t ws = xconv_plan_workspace_size(plan);
    XT_CHECK(ws >= 2 * single,
             "cuda.patch_tc on %s (XCONV_PATCH_PAD=c): workspace %zu bytes, not the row classes' "
             "copies (at least 2 x %zu)", what, ws, single);
    xconv_plan_destroy(plan);
}

static void check_problem(problem *pb, fill_mode mode)
{
    char what[512], msg[256] = "";
    describe(pb, what, sizeof what);
    buffers bf;
    buffers_make(pb, &bf, mode);
    place(pb, &bf, false);
    xconv_error err;
    const char *used = NULL;
    xconv_status s = run_conv(pb, "cpu.ref", &used, &err);
    XT_CHECK(s == XCONV_STATUS_OK, "cpu.ref on %s: %s", what, err.description);
    if (s != XCONV_STATUS_OK) {
        buffers_free(&bf);
        return;
    }
    void *want = bf.h[3];
    void *got = malloc(bf.bytes[3]);
    place(pb, &bf, true);
    const int ne = xconv_engine_count();
    for (int e = -1; e < ne; e++) {
        const char *name = e < 0 ? NULL : xconv_engine_name(e);
        if (name && strncmp(name, "cuda.", 5) != 0) continue;
        if (name &&
            xconv_engine_supports(name, &pb->params, &pb->x, &pb->w, pb->has_bias ? &pb->b : NULL,
                                  &pb->y, &err) != XCONV_STATUS_OK) {
            XT_CHECK(err.status == XCONV_STATUS_UNSUPPORTED, "%s supports(%s): %s %s", name, what,
                     xconv_status_name(err.status), err.description);
            continue;
        }
        memset(got, 0xA5, bf.bytes[3]);
        CUDA_OK(cudaMemcpy(bf.d[3], got, bf.bytes[3], cudaMemcpyHostToDevice));
        s = run_conv(pb, name, &used, &err);
        XT_CHECK(s == XCONV_STATUS_OK, "%s on %s: %s", name ? name : "planner", what,
                 err.description);
        if (s != XCONV_STATUS_OK) continue;
        XT_CHECK(strncmp(used, "cuda.", 5) == 0, "planner chose %s for a cuda problem", used);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(got, bf.d[3], bf.bytes[3], cudaMemcpyDeviceToHost));
        engines_run_total++;
        if (name) count_run(name);
        if (mode == FILL_EXACT || is_int(pb->y.dtype)) {
            size_t first = 0;
            while (first < bf.bytes[3] &&
                   ((unsigned char *)got)[first] == ((unsigned char *)want)[first])
                first++;
            XT_CHECK(first == bf.bytes[3],
                     "%s on %s (exact inputs): y differs from cpu.ref at byte %zu", used, what,
                     first);
        } else {
            int64_t bad = compare_real(pb, got, want, msg, sizeof msg, 0.0);
            XT_CHECK(bad == 0, "%s on %s: %" PRId64 " elements off, first %s", used, what, bad,
                     msg);
        }
    }
    if (class_shape) check_classes_planned(pb, what);
    if (patch_switch) check_patch_switch(pb, &bf, want, got, mode, what);
    /* f32 conv once more with reduced-precision math allowed: cuda.f32_bf16x3 (hi/lo bf16
     * splits, about 2^-17 per product) */
    if (pb->params.op == XCONV_OP_CONV && pb->x.dtype == XCONV_DTYPE_F32 &&
        pb->y.dtype == XCONV_DTYPE_F32) {
        xconv_plan_options o;
        memset(&o, 0, sizeof o);
        o.engine = "cuda.f32_bf16x3";
        o.allow_tf32 = true;
        memset(got, 0xA5, bf.bytes[3]);
        CUDA_OK(cudaMemcpy(bf.d[3], got, bf.bytes[3], cudaMemcpyHostToDevice));
        s = xconv_conv(NULL, &pb->params, &pb->x, &pb->w, pb->has_bias ? &pb->b : NULL, &pb->y,
                       &o, &used, &err);
        XT_CHECK(s == XCONV_STATUS_OK || s == XCONV_STATUS_UNSUPPORTED,
                 "cuda.f32_bf16x3 on %s: %s", what, err.description);
        if (s == XCONV_STATUS_OK) {
            CUDA_OK(cudaDeviceSynchronize());
            CUDA_OK(cudaMemcpy(got, bf.d[3], bf.bytes[3], cudaMemcpyDeviceToHost));
            engines_run_total++;
            count_run("cuda.f32_bf16x3");
            if (mode == FILL_EXACT) { /* small integers: exact in bf16 (lo = 0) */
                XT_CHECK(memcmp(got, want, bf.bytes[3]) == 0,
                         "cuda.f32_bf16x3 on %s (exact inputs): y differs from cpu.ref", what);
            } else {
                int64_t bad = compare_real(pb, got, want, msg, sizeof msg, 0x1p-16);
                XT_CHECK(bad == 0, "cuda.f32_bf16x3 on %s: %" PRId64 " elements off, first %s",
                         what, bad, msg);
            }
        }
    }
    /* fp8 conv once more with the tensor cores' fp8 accumulation allowed: cuda.igemm_wgmma's
     * native fp8 wgmma (where its loader applies). Exact inputs (integers in [-3, 3]) whose
     * sums stay below 2^12 keep every bit in its 13-fraction-bit steps, so y must equal
     * cpu.ref's; otherwise each 32-term step may lose 2^-13 of the running sum (truncated),
     * which compare_real's bound takes as (k_red / 32 + 2) * 2^-12 per unit of sum|x*w|.
     * Without the option the engine must refuse fp8, naming it. */
    const bool f8 = pb->x.dtype == XCONV_DTYPE_F8E4M3 || pb->x.dtype == XCONV_DTYPE_F8E5M2;
    if (pb->params.op == XCONV_OP_CONV && f8) {
        xconv_plan_options o;
        memset(&o, 0, sizeof o);
        o.engine = "cuda.igemm_wgmma";
        s = xconv_conv(NULL, &pb->params, &pb->x, &pb->w, pb->has_bias ? &pb->b : NULL, &pb->y,
                       &o, &used, &err);
        XT_CHECK(s == XCONV_STATUS_UNSUPPORTED && strstr(err.description, "allow_fp8_fast_accum"),
                 "cuda.igemm_wgmma on %s without allow_fp8_fast_accum: %s \"%s\"", what,
                 xconv_status_name(s), err.description);
        o.allow_fp8_fast_accum = true;
        memset(got, 0xA5, bf.bytes[3]);
        CUDA_OK(cudaMemcpy(bf.d[3], got, bf.bytes[3], cudaMemcpyHostToDevice));
        s = xconv_conv(NULL, &pb->params, &pb->x, &pb->w, pb->has_bias ? &pb->b : NULL, &pb->y,
                       &o, &used, &err);
        XT_CHECK(s == XCONV_STATUS_OK || s == XCONV_STATUS_UNSUPPORTED,
                 "cuda.igemm_wgmma (fp8 fast accumulation) on %s: %s", what, err.description);
        if (s == XCONV_STATUS_OK) {
            CUDA_OK(cudaDeviceSynchronize());
            CUDA_OK(cudaMemcpy(got, bf.d[3], bf.bytes[3], cudaMemcpyDeviceToHost));
            engines_run_total++;
            count_run("cuda.igemm_wgmma fp8");
            if (mode == FILL_EXACT && 9.0 * (double)(pb->k_red + 1) < 4096.0) {
                XT_CHECK(memcmp(got, want, bf.bytes[3]) == 0,
                         "cuda.igemm_wgmma fp8 fast accumulation on %s (exact inputs, sums "
                         "below 2^12): y differs from cpu.ref", what);
            } else {
                const double rel = ((double)pb->k_red / 32.0 + 2.0) * 0x1p-12;
                int64_t bad = compare_real(pb, got, want, msg, sizeof msg, rel);
                XT_CHECK(bad == 0,
                         "cuda.igemm_wgmma fp8 fast accumulation on %s: %" PRId64
                         " elements off, first %s", what, bad, msg);
            }
        }
    }
    free(got);
    buffers_free(&bf);
}

/* ---------------------------------------------------------------------------------------- */
/* Bad inputs                                                                               */
/* ---------------------------------------------------------------------------------------- */

typedef void (*mutate_fn)(problem *pb);

static void m_groups(problem *pb) { pb->params.groups = 3; }
static void m_stride0(problem *pb) { pb->params.stride[1] = 0; }
static void m_dil0(problem *pb) { pb->params.dilation[0] = 0; }
static void m_pad_neg(problem *pb) { pb->params.pad_lo[0] = -1; }
static void m_opad(problem *pb) { pb->params.output_padding[0] = 1; }
static void m_rank(problem *pb) { pb->params.spatial_rank = 4; }
static void m_y_shape(problem *pb) { pb->y.shape[2] += 1; }
static void m_w_shape(problem *pb) { pb->w.shape[1] += 1; }
static void m_dtype_mix(problem *pb) { pb->w.dtype = XCONV_DTYPE_F16; }
static void m_y_narrow(problem *pb) { pb->y.dtype = XCONV_DTYPE_F16; }
static void m_dtype_bad(problem *pb) { pb->x.dtype = (xconv_dtype)99; }
static void m_x_small(problem *pb) { pb->x.buffer_bytes = 8; }
static void m_y_zero_stride(problem *pb)
{
    pb->y.strided = true;
    pb->y.strides[0] = 0, pb->y.strides[1] = 64, pb->y.strides[2] = 8, pb->y.strides[3] = 1;
}
static void m_too_small(problem *pb)
{
    pb->params.pad_lo[0] = pb->params.pad_hi[0] = 0, pb->params.dilation[0] = 9;
}

typedef struct bad_case {
    const char *name;
    mutate_fn fn;
} bad_case;

/* A valid f32 conv2d, channels-first: x [2, 4, 8, 8], w [8, 4, 3, 3], y [2, 8, 8, 8]. */
static problem base_problem(void)
{
    problem pb;
    memset(&pb, 0, sizeof pb);
    pb.params = xconv_params_init(XCONV_OP_CONV, 2, XCONV_LAYOUT_CHANNELS_FIRST);
    pb.params.pad_lo[0] = pb.params.pad_hi[0] = pb.params.pad_lo[1] = pb.params.pad_hi[1] = 1;
    const int64_t xs[4] = {2, 4, 8, 8}, ws[4] = {8, 4, 3, 3}, ys[4] = {2, 8, 8, 8}, bs[1] = {8};
    pb.x = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, xs, NULL);
    pb.w = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, ws, NULL);
    pb.y = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, ys, NULL);
    pb.b = xconv_tensor_contiguous(XCONV_DTYPE_F32, 1, bs, NULL);
    pb.has_bias = true;
    for (int i = 0; i < 4; i++) {
        xconv_tensor *t = tensor_at(&pb, i);
        int64_t n = 1;
        for (int k = 0; k < t->rank; k++) n *= t->shape[k];
        t->buffer_bytes = (size_t)n * 4;
    }
    return pb;
}

static void check_bad_inputs(void)
{
    static const bad_case cases[] = {
        {"groups", m_groups}, {"stride 0", m_stride0}, {"dilation 0", m_dil0},
        {"negative padding", m_pad_neg}, {"output padding on conv", m_opad},
        {"spatial rank 4", m_rank}, {"y shape", m_y_shape}, {"w shape", m_w_shape},
        {"x/w dtype mix", m_dtype_mix}, {"narrower y", m_y_narrow}, {"invalid dtype", m_dtype_bad},
        {"x buffer too small", m_x_small}, {"y zero stride", m_y_zero_stride},
        {"input too small for kernel", m_too_small},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        problem cpu = base_problem(), gpu;
        cases[c].fn(&cpu);
        gpu = cpu;
        buffers bf;
        buffers_make(&cpu, &bf, FILL_EXACT);
        /* buffer sizes may have been shrunk by the mutation: keep the declared ones */
        place(&cpu, &bf, false);
        place(&gpu, &bf, true);
        for (int i = 0; i < 4; i++) {
            tensor_at(&cpu, i)->buffer_bytes = tensor_at(&gpu, i)->buffer_bytes =
                cases[c].fn == m_x_small && i == 0 ? 8 : bf.bytes[i];
        }
        xconv_error ec, eg;
        const char *used;
        xconv_status sc = run_conv(&cpu, NULL, &used, &ec);
        xconv_status sg = run_conv(&gpu, NULL, &used, &eg);
        XT_CHECK(sc != XCONV_STATUS_OK, "bad input \"%s\" accepted on the cpu", cases[c].name);
        XT_CHECK(sg == sc, "bad input \"%s\": cuda status %s, cpu %s", cases[c].name,
                 xconv_status_name(sg), xconv_status_name(sc));
        XT_CHECK(strcmp(ec.parameter, eg.parameter) == 0 &&
                     strcmp(ec.description, eg.description) == 0,
                 "bad input \"%s\": cuda says %s: %s, cpu says %s: %s", cases[c].name, eg.parameter,
                 eg.description, ec.parameter, ec.description);
        unsigned char *yb = malloc(bf.bytes[3]);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(yb, bf.d[3], bf.bytes[3], cudaMemcpyDeviceToHost));
        size_t k = 0;
        while (k < bf.bytes[3] && yb[k] == 0xA5) k++;
        XT_CHECK(k == bf.bytes[3], "bad input \"%s\": y's device buffer was written",
                 cases[c].name);
        free(yb);
        buffers_free(&bf);
    }

    /* Devices: a cpu w with a cuda x; a device that does not exist. */
    int count = 0;
    CUDA_OK(cudaGetDeviceCount(&count));
    problem pb = base_problem();
    buffers bf;
    buffers_make(&pb, &bf, FILL_EXACT);
    place(&pb, &bf, true);
    pb.w.device = XCONV_DEVICE_CPU;
    pb.w.data = bf.h[1];
    xconv_error err;
    const char *used;
    xconv_status s = run_conv(&pb, NULL, &used, &err);
    XT_CHECK(s == XCONV_STATUS_INVALID_ARGUMENT && strcmp(err.parameter, "w.device") == 0 &&
                 strcmp(err.description, "w.device cpu:0 differs from x.device cuda:0") == 0,
             "mixed devices: %s %s: %s", xconv_status_name(s), err.parameter, err.description);
    place(&pb, &bf, true);
    for (int i = 0; i < 4; i++) tensor_at(&pb, i)->device_index = count;
    s = run_conv(&pb, NULL, &used, &err);
    char want[128];
    snprintf(want, sizeof want, "x.device_index %d is not a cuda device (%d found)", count, count);
    XT_CHECK(s == XCONV_STATUS_INVALID_ARGUMENT && strcmp(err.description, want) == 0,
             "missing device: %s: %s", xconv_status_name(s), err.description);
    /* A cuda problem cannot be forced onto a cpu engine. */
    place(&pb, &bf, true);
    xconv_plan_options o;
    memset(&o, 0, sizeof o);
    o.engine = "cpu.ref";
    s = xconv_conv(NULL, &pb.params, &pb.x, &pb.w, &pb.b, &pb.y, &o, &used, &err);
    XT_CHECK(s == XCONV_STATUS_UNSUPPORTED, "cpu.ref forced on cuda tensors: %s",
             xconv_status_name(s));
    buffers_free(&bf);
}

/* The plan API on a stream of the caller's, with a device workspace of the caller's. */
static void check_plan_on_stream(void)
{
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    xconv_context_options co = {1, 0, stream};
    xconv_context *ctx = NULL;
    xconv_error err;
    XT_CHECK(xconv_context_create(&co, &ctx, &err) == XCONV_STATUS_OK, "context: %s",
             err.description);
    problem pb = base_problem();
    buffers bf;
    buffers_make(&pb, &bf, FILL_EXACT);
    place(&pb, &bf, false);
    const char *used;
    XT_CHECK(run_conv(&pb, "cpu.ref", &used, &err) == XCONV_STATUS_OK, "cpu.ref: %s",
             err.description);
    place(&pb, &bf, true);
    xconv_plan *plan = NULL;
    xconv_status s =
        xconv_plan_create(ctx, &pb.params, &pb.x, &pb.w, &pb.b, &pb.y, NULL, &plan, &err);
    XT_CHECK(s == XCONV_STATUS_OK, "plan: %s", err.description);
    if (s == XCONV_STATUS_OK) {
        XT_CHECK(strncmp(xconv_plan_engine(plan), "cuda.", 5) == 0, "plan engine %s",
                 xconv_plan_engine(plan));
        size_t ws = xconv_plan_workspace_size(plan);
        void *dws = NULL;
        if (ws) CUDA_OK(cudaMalloc(&dws, ws));
        for (int rep = 0; rep < 3; rep++) {
            s = xconv_plan_execute(plan, bf.d[0], bf.d[1], bf.d[2], bf.d[3], dws, ws, &err);
            XT_CHECK(s == XCONV_STATUS_OK, "execute: %s", err.description);
        }
        CUDA_OK(cudaStreamSynchronize(stream));
        void *got = malloc(bf.bytes[3]);
        CUDA_OK(cudaMemcpy(got, bf.d[3], bf.bytes[3], cudaMemcpyDeviceToHost));
        XT_CHECK(memcmp(got, bf.h[3], bf.bytes[3]) == 0,
                 "plan on a stream: y differs from cpu.ref");
        free(got);
        if (dws) CUDA_OK(cudaFree(dws));
        xconv_plan_destroy(plan);
    }
    buffers_free(&bf);
    xconv_context_destroy(ctx);
    CUDA_OK(cudaStreamDestroy(stream));
}

int main(void)
{
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        printf("test_gpu: skipped: no cuda device (%s)\n",
               ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return xt_finish("test_gpu");
    }
    const char *quick_env = getenv("XCONV_GPU_TEST_QUICK");
    const bool quick = quick_env && quick_env[0] && strcmp(quick_env, "0") != 0;
    const int generic_count = quick ? 60 : 600, tc_count = quick ? 20 : 200;
    /* per special engine; XCONV_GPU_TEST_SPECIAL=n sets it (many problems of one engine) */
    const char *special_env = getenv("XCONV_GPU_TEST_SPECIAL");
    const int special_set = special_env ? atoi(special_env) : 0;
    const int special_count = special_set > 0 ? special_set : quick ? 15 : 150;
    const int wgmma_count = quick ? 20 : 100;
    const int simt_count = quick ? 20 : 200;

    /* XCONV_GPU_TEST_ONLY=<engine>: only the problems shaped for that special engine (for
     * the slower compute-sanitizer tools on one engine) */
    const char *only = getenv("XCONV_GPU_TEST_ONLY");
    if (only && !only[0]) only = NULL;
    if (!only) {
        check_bad_inputs();
        check_plan_on_stream();
        for (int i = 0; i < generic_count; i++) {
            problem pb = random_problem(SHAPE_ANY);
            check_problem(&pb, (i & 1) ? FILL_REAL : FILL_EXACT);
        }
        for (int i = 0; i < tc_count; i++) {
            problem pb = random_problem(SHAPE_TC);
            check_problem(&pb, (i & 1) ? FILL_REAL : FILL_EXACT);
        }
    }
    const shape_kind special[] = {SHAPE_DEPTHWISE, SHAPE_PATCH, SHAPE_DECONV, SHAPE_WGMMA,
                                  SHAPE_CF,        SHAPE_F32,   SHAPE_FOLD,   SHAPE_SIMT,
                                  SHAPE_F8,        SHAPE_CF1};
    for (int k = 0; k < (int)(sizeof special / sizeof special[0]); k++)
        for (int i = 0; !skip_kind(only, special[k]) && i < (special[k] == SHAPE_WGMMA  ? wgmma_count
                             : special[k] == SHAPE_SIMT ? simt_count
                                                        : special_count);
             i++) {
            /* half of cuda.patch_tc's problems with its padded copies of x and w wherever they
             * apply (also where the folded rows are whole 16-byte pieces), a quarter with the
             * copy of w alone wherever the folded rows are (any dtype, however short the GEMM;
             * by default only 16-bit rows of long GEMMs take it) */
            const bool pad = special[k] == SHAPE_PATCH && (i & 3);
            if (pad) setenv("XCONV_PATCH_PAD", (i & 2) ? "1" : "w", 1);
            /* the others also planned under one setting and run under another */
            patch_switch = special[k] == SHAPE_PATCH && !pad ? 1 + i / 4 : 0;
            problem pb = random_problem(special[k]);
            /* cuda.igemm_wgmma's and cuda.deconv_tc's problems under each tile configuration
             * in turn (its knob, read at each launch), half of them on the persistent grid:
             * the planner's pick would leave most configurations unrun at these sizes */
            const bool force = special[k] == SHAPE_WGMMA || special[k] == SHAPE_DECONV ||
                               special[k] == SHAPE_F8;
            if (force) {
                /* few blocks in the persistent grid (1-3, or no cap), so that each runs many
                 * tiles */
                const int blocks = 1 + (i / 5) % 4;
                wgmma_knobs_set((i / 2) % 8, (i / 14) % 2, blocks < 4 ? blocks : 0);
                /* a third of them with the y tile copied row by row where y has a TMA view,
                 * a third with its TMA boxes handed over whole (not per warpgroup) */
                if ((i / 3) % 3 == 0) setenv("XCONV_WGMMA_EPI", "rows", 1);
                if ((i / 3) % 3 == 1) setenv("XCONV_WGMMA_EPI", "whole", 1);
                /* a quarter with channel runs under 128 bytes on the cp.async kernel (taps
                 * packed into its blocks) rather than the TMA kernel's zero-filled boxes */
                if (i % 4 == 1) setenv("XCONV_WGMMA_SHORT", "0", 1);
            }
            /* cuda.fold_tc's problems: a third with the overlapping fold wherever it applies,
             * a third with the plain fold, a third as the cost model picks */
            const bool fold = special[k] == SHAPE_FOLD;
            if (fold && i % 3 < 2) setenv("XCONV_FOLD_SPREAD", i % 3 ? "0" : "1", 1);
            /* cuda.cf_gemm's problems: half of them on persistent grids of 1-3 blocks, each
             * block running many tiles and both of its y buffers many times; a quarter with
             * Inf and NaN in x or w (the zero fill past the problem's edges must meet none);
             * its knobs in turn: 128-wide tiles for 16-bit y (else 256), one y buffer */
            const bool cf1 = special[k] == SHAPE_CF1;
            if (cf1 && (i & 2)) {
                const char blocks[2] = {(char)('1' + (i / 4) % 3), 0};
                setenv("XCONV_CFGEMM_BLOCKS", blocks, 1);
            }
            if (cf1 && i % 3 == 1) setenv("XCONV_CFGEMM_BN", "128", 1);
            if (cf1 && i % 7 == 3) setenv("XCONV_CFGEMM_YBUFS", "1", 1);
            check_problem(&pb, cf1 && i % 4 == 3 ? (i & 8 ? FILL_SPECIAL_X : FILL_SPECIAL)
                               : (i & 1)          ? FILL_REAL
                                                  : FILL_EXACT);
            if (cf1) {
                unsetenv("XCONV_CFGEMM_BLOCKS");
                unsetenv("XCONV_CFGEMM_BN");
                unsetenv("XCONV_CFGEMM_YBUFS");
            }
            if (fold) unsetenv("XCONV_FOLD_SPREAD");
            if (pad) unsetenv("XCONV_PATCH_PAD");
            patch_switch = 0;
            if (force) wgmma_knobs_clear();
        }
    /* cuda.patch_tc's row classes (XCONV_PATCH_PAD=c; a quarter with w's single copy, =w),
     * half with constant weights (w's copies made once, at plan creation; a quarter of those
     * with XCONV_PATCH_PREPACK=0, copies at every run), a third of them
     * also planned under one setting and run under another */
    class_shape = true;
    for (int i = 0; !skip_kind(only, SHAPE_PATCH) && i < special_count; i++) {
        problem pb = random_problem(SHAPE_PATCH);
        setenv("XCONV_PATCH_PAD", i % 4 == 3 ? "w" : "c", 1);
        setenv("XCONV_PATCH_PREPACK", i % 4 == 1 ? "0" : "1", 1);
        use_constant_weights = i & 1;
        patch_switch = i % 3 == 0 ? 5 + i / 3 % 2 : 0;
        check_problem(&pb, (i & 2) ? FILL_REAL : FILL_EXACT);
        patch_switch = 0;
        use_constant_weights = false;
        unsetenv("XCONV_PATCH_PAD");
        unsetenv("XCONV_PATCH_PREPACK");
    }
    class_shape = false;
    if (only) goto report;
    /* cuda.igemm_wgmma's resident-B launches (one B tile for all of a launch's tiles, two y
     * tiles in turn): persistent grids of 1-3 blocks, so that each block runs many tiles and
     * both y buffers many times, two thirds on 128 x 256 tiles (the others take none);
     * every other one with XCONV_WGMMA_RESB=0 (the same problems without residence) */
    resb_shape = true;
    for (int i = 0; i < wgmma_count / 2; i++) {
        problem pb = random_problem(SHAPE_WGMMA);
        /* mostly 128 x 256 tiles (the configuration it is compiled for), else the others */
        wgmma_knobs_set(i % 3 ? 0 : 1 + (i / 3) % 6, true, 1 + i % 3);
        if (i & 1) setenv("XCONV_WGMMA_RESB", "0", 1);
        check_problem(&pb, (i & 2) ? FILL_REAL : FILL_EXACT);
        wgmma_knobs_clear();
    }
    resb_shape = false;
    /* 64 channels of an 8-bit dtype: two taps per stage in the TMA kernel (every configuration,
     * persistent or not, grids of 1-3 blocks), the last stage of an odd tap count half
     * zero-filled; a quarter on the cp.async kernel's packed taps (XCONV_WGMMA_SHORT=0) */
    pack_shape = true;
    for (int i = 0; i < wgmma_count / 2; i++) {
        problem pb = random_problem(SHAPE_WGMMA);
        wgmma_knobs_set(i % 7, (i / 2) % 2, 1 + (i / 7) % 3);
        if (i % 4 == 3) setenv("XCONV_WGMMA_SHORT", "0", 1);
        check_problem(&pb, (i & 1) ? FILL_REAL : FILL_EXACT);
        wgmma_knobs_clear();
    }
    pack_shape = false;
    /* infinities in w, or infinities and NaN in x, on cuda.igemm_wgmma's tiles (every
     * configuration, a third of them shaped for resident B): its epilogues round 4-8 pairs of
     * sums at once and redo a group that holds a NaN value by value, so groups mix NaN,
     * infinite and finite sums (in swapped tiles a pair is two positions, else two channels) */
    for (int i = 0; i < special_count; i++) {
        resb_shape = i % 3 == 0;
        problem pb = random_problem(SHAPE_WGMMA);
        resb_shape = false;
        if (!has_inf(pb.x.dtype)) continue;
        wgmma_knobs_set(i % 3 == 0 ? 0 : i % 8, i % 3 == 0 || (i & 2), 0);
        check_problem(&pb, i & 1 ? FILL_SPECIAL_X : FILL_SPECIAL);
        wgmma_knobs_clear();
    }
    /* infinite weights over padding, on every engine that takes a float problem */
    for (int i = 0; i < special_count; i++) {
        problem pb = random_problem(i & 1 ? SHAPE_DEPTHWISE : i % 4 == 0 ? SHAPE_TC : SHAPE_ANY);
        if (has_inf(pb.w.dtype)) check_problem(&pb, FILL_SPECIAL);
    }
    /* infinite weights in conv_transpose on the tensor cores (cuda.deconv_tc, and cuda.cf_tc
     * through it): the stride phases' taps outside x would add 0 * Inf where cpu.ref has no
     * term, so those engines flag such weights and recompute y by cuda.generic's kernel */
    for (int i = 0; i < special_count / 3; i++) {
        problem pb = random_problem(i & 1 ? SHAPE_CF : SHAPE_DECONV);
        if (pb.params.op == XCONV_OP_CONV_TRANSPOSE && has_inf(pb.w.dtype))
            check_problem(&pb, FILL_SPECIAL);
    }
    /* infinite weights in conv_transpose on the CUDA cores (cuda.igemm_simt's stride phases,
     * f32 / f64 / complex): the same fallback */
    for (int i = 0; i < special_count / 3; i++) {
        problem pb = random_problem(SHAPE_SIMT);
        if (pb.params.op == XCONV_OP_CONV_TRANSPOSE && has_inf(pb.w.dtype))
            check_problem(&pb, FILL_SPECIAL);
    }
    /* infinities and NaN in x, for the overlapping fold's fallback (and every other engine) */
    setenv("XCONV_FOLD_SPREAD", "1", 1);
    for (int i = 0; i < special_count / 3; i++) {
        problem pb = random_problem(SHAPE_FOLD);
        while (!has_inf(pb.x.dtype)) pb = random_problem(SHAPE_FOLD); /* bf16 or f16 */
        check_problem(&pb, FILL_SPECIAL_X);
    }
    unsetenv("XCONV_FOLD_SPREAD");
report:
    for (int e = 0; e < ENGINE_SLOTS; e++)
        if (engine_runs[e].name)
            printf("test_gpu: %s ran %d problems\n", engine_runs[e].name, engine_runs[e].runs);
    printf("test_gpu: %d engine runs compared with cpu.ref\n", engines_run_total);
    return xt_finish("test_gpu");
}

#endif /* XCONV_HAVE_CUDA */
