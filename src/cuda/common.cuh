/*
 * common.cuh — what the CUDA engines share: the C internals seen from C++, host helpers for
 * devices and launch errors, and device versions of the dtype rules of src/core/dtypes.c and
 * convert.c (load any storage dtype into a compute type, store back rounding once).
 *
 * The device conversions are ports of the CPU ones, not the CUDA intrinsics, so that the
 * rounding, e4m3 saturation and NaN handling are the library's everywhere (DESIGN.md §2).
 */
#ifndef XCONV_CUDA_COMMON_CUH
#define XCONV_CUDA_COMMON_CUH

extern "C" {
#include "core/internal.h"
}

#include <cuda.h> /* CUtensorMap (the encoders are reached through cudart) */
#include <cuda_runtime.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------- */
/* Host helpers (device.cu)                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* Makes the problem's device current for a run and remembers the caller's; fails with
 * DEVICE_ERROR (CUDA's message) or INVALID_ARGUMENT when the context's device differs. */
struct xconv_cuda_scope {
    int          prev;
    cudaStream_t stream;
};
xconv_status xconv__cuda_enter(const xconv_exec *e, xconv_cuda_scope *s, xconv_error *err);
void         xconv__cuda_leave(const xconv_cuda_scope *s);

/* DEVICE_ERROR with CUDA's message for the last launch of `engine`, or OK. */
xconv_status xconv__cuda_launch_status(const char *engine, xconv_error *err);

/* A prepack's device scope at plan creation (*e over p, ctx and w alone): false when the
 * device cannot be entered (the prepack then leaves its record empty). */
static inline bool xconv__cuda_prepack_enter(const xconv_canon *p, xconv_context *ctx,
                                             const void *w, xconv_exec *e, xconv_cuda_scope *s)
{
    *e = xconv_exec{};
    e->p = p, e->ctx = ctx, e->w = w;
    return xconv__cuda_enter(e, s, nullptr) == XCONV_STATUS_OK;
}

/* The compute capability (major*10 + minor) of a device, 0 when it cannot be read. */
int xconv__cuda_device_cc(int device);

/* cuda.generic's run (generic.cu), for engines that find out at run time (pointer alignment)
 * that their fast path does not apply. */
xconv_status xconv__cuda_generic_run(const xconv_exec *e, xconv_error *err);
/* cuda.generic's kernel for e on stream st; with only_if, it does nothing unless *only_if
 * (device memory) is nonzero when it runs (a fallback decided on the device). */
void xconv__cuda_generic_launch(const xconv_exec *e, cudaStream_t st, const int *only_if);
/* Whether p's weights are floats that can be Inf or NaN (bf16, f16, f8, f32, f64, complex), and a kernel
 * that clears *flag (device memory) and sets it when one of e's weights is: the
 * conv_transpose engines built from stride phases add 0 * w for taps that fall outside x,
 * where cpu.ref (the gather formula) has no term, so with such a weight they run
 * xconv__cuda_generic_launch(e, st, flag) behind them. */
bool xconv__cuda_float_weights(const xconv_canon *p);
void xconv__cuda_flag_nonfinite_w(const xconv_exec *e, int *flag, cudaStream_t st);

/* With constant weights, the conv_transpose engines built from stride phases check w for
 * Inf / NaN once, at plan creation, instead of at every run: their prepack is one int (host
 * memory), 0 when every weight is finite, 1 when one is not, -1 when the check could not run.
 * A run's mode: 0 no fallback, 1 y by cuda.generic alone, 2 the flag on the device and the
 * flagged fallback behind the phases. */
size_t xconv__cuda_wcheck_bytes(const xconv_canon *p);
void   xconv__cuda_wcheck_prepack(const xconv_canon *p, xconv_context *ctx, const void *w,
                                  void *packed);
int    xconv__cuda_wcheck_mode(const xconv_exec *e);

/* The tensor-core implicit GEMM (igemm.cu) on any canonical conv it fits, for the engines
 * that rewrite a problem into that form (cuda.patch_tc, cuda.deconv_tc). why_not strings
 * speak of "the tensor-core engines". */
bool xconv__cuda_igemm_fits(const xconv_canon *p, const char **why_not);     /* any loader */
bool xconv__cuda_igemm_fast(const xconv_canon *p);                           /* cp.async loader */
bool xconv__cuda_igemm_fast_why(const xconv_canon *p, const char **why_not);
double xconv__cuda_igemm_cost(const xconv_canon *p, double scale);
bool xconv__cuda_igemm_ptrs_ok(const xconv_exec *e, const xconv_canon *p);
/* Picks the cp.async loader when p and the pointers allow it, else the gathering one. */
void xconv__cuda_igemm_launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream);

/* The Hopper wgmma implicit GEMM (igemm_wgmma.cu): whether its kernel runs p (bf16 / f16 /
 * i8 / u8, the 16-byte loader's conditions, compute capability 9.0), and a launch of p (which
 * fits cuda.igemm_tc's kernel) on the wgmma kernel where p and the pointers allow, else on
 * cuda.igemm_tc's. */
bool xconv__cuda_wgmma_fits(const xconv_canon *p, const char **why_not);
void xconv__cuda_tc_launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream);
/* n problems that differ only in y's view, the padding and w's taps (cuda.deconv_tc's stride
 * phases, each with taps) in one launch of the wgmma kernel, its tiles numbered across them;
 * false (nothing launched) where that kernel cannot take them all. */
struct xconv_tc_views;
bool xconv__cuda_tc_launch_set(const xconv_canon *ps, int n, const xconv_exec *e,
                               cudaStream_t stream, const xconv_tc_views *av = nullptr);
/* cuda.patch_tc's row classes: problem i's A tiles (x) come through a[i]'s view (x's rows as
 * they are, a[i].cin channels) at channel coordinates kshift[i] before ps[i]'s, which the copy
 * engine fills with zeros; ps[i] gives the tiling, the reduction's length and B. Only the TMA
 * kernel reads A that way: false (nothing launched) where it cannot take them. */
struct xconv_tc_views {
    const xconv_canon *a;
    const int         *kshift;
};
/* The most problems xconv__cuda_tc_launch_set takes (the kernel's parameter holds them). */
constexpr int XCONV_CUDA_TC_SET_MAX = 8;

/* Tensor maps for the wgmma kernel's TMA loads (tma_maps.cu), false where the view or the
 * driver does not allow one: w as B tiles of 128 bytes of channels x bn output channels;
 * x in im2col mode as A tiles of bm output positions x 128 bytes of channels, with *q the
 * kernel's view of p (negative dilations turned, their dims' bits in *flip) and *rank the
 * map's rank (3-5: the spatial dims kept, channels and images); y for the stores of bm x bn
 * tiles, in boxes of bm positions x 128 bytes of channels. kb = 64: boxes of 64 bytes of
 * channels in the 64-byte swizzle (cuda.igemm_wgmma's packed taps). */
bool xconv__cuda_map_w(const xconv_canon *p, const xconv_exec *e, int bn, CUtensorMap *map,
                       int kb = 128);
bool xconv__cuda_map_y(const xconv_canon *p, const xconv_exec *e, int bm, int bn, CUtensorMap *map);
bool xconv__cuda_map_x_im2col(const xconv_canon *p, const xconv_exec *e, int bm, CUtensorMap *map,
                              int *rank, int *flip, xconv_canon *q, int kb = 128);
/* A plain tiled map (rank <= 5, 1-, 2- or 4-byte elements, 128-byte swizzle) for engines that
 * describe their own views: false where the driver refuses or has no encoder. */
bool xconv__cuda_map_tiled(CUtensorMap *map, int es, int rank, const void *base,
                           const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box);

/* The number of multiprocessors of a device, at least 1. */
int xconv__cuda_device_sms(int device);

/* cuda.deconv_tc's stride-phase launches of the conv_transpose p (which its supports took),
 * for engines that rewrite a problem into one (cuda.cf_tc). */
void xconv__cuda_deconv_launch(const xconv_canon *p, const xconv_exec *e, cudaStream_t stream);

/* An engine's run: nothing for an empty y; else the device scope entered, launch(stream),
 * the launch status read once (CUDA keeps an earlier launch's error until it is read), the
 * caller's device restored. */
template <typename Launch>
xconv_status xconv__cuda_run(const xconv_exec *e, const char *engine, xconv_error *err,
                             Launch &&launch)
{
    const xconv_canon *p = e->p;
    if (p->n * p->cout * xconv__prod3(p->y_size) == 0) return XCONV_STATUS_OK;
    xconv_cuda_scope s;
    XCONV_TRY(xconv__cuda_enter(e, &s, err));
    launch(s.stream);
    const xconv_status st = xconv__cuda_launch_status(engine, err);
    xconv__cuda_leave(&s);
    return st;
}

/* The y element offset of output position m (of M; m >= M reads position 0) at channel o0
 * of group g: the tensor-core epilogues' row offsets. */
__device__ __forceinline__ int64_t xconv_cuda_y_row_off(const xconv_canon &p, int64_t m, int64_t M,
                                                        int64_t g, int64_t o0)
{
    int64_t t = m < M ? m : 0;
    const int64_t j2 = t % p.y_size[2];
    t /= p.y_size[2];
    const int64_t j1 = t % p.y_size[1];
    t /= p.y_size[1];
    const int64_t j0 = t % p.y_size[0], n = t / p.y_size[0];
    return p.y_off + n * p.y_sn + j0 * p.y_ss[0] + j1 * p.y_ss[1] + j2 * p.y_ss[2] +
           (g * p.cout_g + o0) * p.y_sc;
}

/* The [BM][pitch] tile of y values in shared memory (rows: output positions m0.., M in all;
 * columns: BN output channels from o0) to y by NT threads, row r at y element row_off[r]
 * (shared memory): 16-byte pieces when y's rows allow them (y_vec), else element by
 * element. */
template <int BM, int BN, int NT>
__device__ __forceinline__ void xconv_cuda_tile_copy(const xconv_canon &p, const unsigned char *smem,
                                                     int pitch, const int64_t *row_off, char *y,
                                                     int y_es, bool y_vec, int tid, int64_t m0,
                                                     int64_t M, int64_t o0)
{
    const int cols = (int)(p.cout_g - o0 < BN ? p.cout_g - o0 : BN);
    const int row_bytes = cols * y_es;
    if (y_vec) {
        const int vpr = BN * y_es / 16; /* 16-byte pieces per full row */
        for (int idx = tid; idx < BM * vpr; idx += NT) {
            const int r = idx / vpr, v = idx % vpr;
            if (m0 + r >= M || v * 16 >= row_bytes) continue;
            *(uint4 *)(y + row_off[r] * y_es + v * 16) = *(const uint4 *)(smem + r * pitch + v * 16);
        }
    } else {
        for (int idx = tid; idx < BM * BN; idx += NT) {
            const int r = idx / BN, c = idx % BN;
            if (m0 + r >= M || c >= cols) continue;
            const unsigned char *src = smem + r * pitch + c * y_es;
            char *dst = y + (row_off[r] + c * p.y_sc) * y_es;
            switch (y_es) {
            case 1: *(uint8_t *)dst = *src; break;
            case 2: *(uint16_t *)dst = *(const uint16_t *)src; break;
            default: *(uint32_t *)dst = *(const uint32_t *)src; break;
            }
        }
    }
}

/* cuda.igemm_tc's last epilogue step: each row's y offset computed once, into the BM int64
 * of shared memory after the tile, then the tile to y. sync() is the threads' barrier. */
template <int BM, int BN, int NT, class Sync>
__device__ __forceinline__ void xconv_cuda_tile_to_y(const xconv_canon &p, unsigned char *smem,
                                                     int pitch, char *y, int y_es, bool y_vec,
                                                     int tid, int64_t m0, int64_t M, int64_t g,
                                                     int64_t o0, Sync sync)
{
    int64_t *row_off = (int64_t *)(smem + BM * pitch);
    if (tid < BM) row_off[tid] = xconv_cuda_y_row_off(p, m0 + tid, M, g, o0);
    sync();
    xconv_cuda_tile_copy<BM, BN, NT>(p, smem, pitch, row_off, y, y_es, y_vec, tid, m0, M, o0);
}

/* Whether the tensor-core epilogues may write y's rows in whole 16-byte pieces: channels
 * contiguous and every row start 16-byte aligned. */
static inline bool xconv__cuda_y_vec(const xconv_canon *p, const xconv_exec *e)
{
    const int64_t yes = (int64_t)xconv_dtype_size(p->y_dtype);
    bool vec = p->y_sc == 1 && (uintptr_t)e->y % 16 == 0;
    const int64_t ys[] = {p->y_off, p->y_sn, p->y_ss[0], p->y_ss[1], p->y_ss[2], p->cout_g};
    for (int64_t v : ys) vec = vec && (v * yes) % 16 == 0;
    return vec;
}

/* e over a rewritten problem q and workspace copies (no workspace of its own). */
static inline xconv_exec xconv__cuda_inner_exec(const xconv_exec *e, const xconv_canon *q,
                                                const void *x, const void *w, void *y)
{
    xconv_exec inner = *e;
    inner.p = q;
    inner.x = x, inner.w = w, inner.y = y;
    inner.workspace = nullptr, inner.workspace_bytes = 0;
    return inner;
}

/* For the engines that rewrite a problem over channels-last copies in their workspace
 * (cuda.cf_tc, cuda.f32_bf16x3, cuda.fold_tc): strides of dense dims `size` (innermost
 * last) with `inner` elements per position, 0 for size-1 dims as the canonical form has
 * them; and the 256-byte rounding of each copy's bytes. */
static inline void xconv__cuda_dense_strides(const int64_t *size, int64_t inner, int64_t *stride)
{
    int64_t s = inner;
    for (int d = 2; d >= 0; d--) {
        stride[d] = size[d] == 1 ? 0 : s;
        s *= size[d];
    }
}

static inline size_t xconv__cuda_align256(size_t v) { return (v + 255) & ~(size_t)255; }

/* Whether a tensor's spatial (or kernel) dims of `size` (innermost last) lie densely at
 * `stride`, the innermost at stride 1 (size-1 dims are free: the canonical form gives them
 * stride 0): each channel plane one contiguous run (cuda.cf_tc, cuda.cf_gemm). */
static inline bool xconv__cuda_dense_spatial(const int64_t *size, const int64_t *stride)
{
    int64_t want = 1;
    for (int d = 2; d >= 0; d--) {
        if (size[d] != 1 && stride[d] != want) return false;
        want *= size[d];
    }
    return true;
}

/* p over dense channels-last bf16 copies of x and w in the workspace (cuda.f32_bf16x3,
 * cuda.f8_bf16): cin_g channels per group in the copies, images and groups as in p, the
 * copies' bytes (rounded to 256) in *x_bytes and *w_bytes. */
static inline xconv_canon xconv__cuda_bf16_copies(const xconv_canon *p, int64_t cin_g,
                                                  size_t *x_bytes, size_t *w_bytes)
{
    xconv_canon q = *p;
    q.x_dtype = XCONV_DTYPE_BF16;
    q.cin_g = cin_g;
    q.cin = p->groups * q.cin_g;
    const int64_t xs = xconv__prod3(p->x_size), kk = xconv__prod3(p->k_size);
    q.x_off = 0, q.x_sc = 1, q.x_sn = p->n > 1 ? xs * q.cin : 0;
    xconv__cuda_dense_strides(p->x_size, q.cin, q.x_ss);
    q.w_off = 0, q.w_si = 1, q.w_so = kk * q.cin_g, q.w_sg = p->groups > 1 ? p->cout_g * q.w_so : 0;
    xconv__cuda_dense_strides(p->k_size, q.cin_g, q.w_sk);
    *x_bytes = xconv__cuda_align256(2 * (size_t)(p->n * xs * q.cin));
    *w_bytes = xconv__cuda_align256(2 * (size_t)(p->cout * kk * q.cin_g));
    return q;
}

/* ---------------------------------------------------------------------------------------- */
/* Device dtype conversions                                                                 */
/* ---------------------------------------------------------------------------------------- */

namespace xconv_cuda {

/* The small binary float formats, as in dtypes.c: explicit mantissa bits, bias, width,
 * whether the top exponent is inf/NaN (IEEE) or finite (e4m3 "FN"), codes of the largest
 * finite value and of the canonical NaN. */
struct minifloat {
    int      mbits, bias, total_bits;
    bool     has_inf;
    uint32_t max_finite, nan_code;
};
constexpr minifloat MF_E5M2 = {2, 15, 8, true, 0x7b, 0x7e};
constexpr minifloat MF_E4M3 = {3, 7, 8, false, 0x7e, 0x7f};

/* A shared-memory pointer as the 32-bit address cp.async and ldmatrix take. */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared by cp.async (sm_80+), zero-filled when !valid (nothing is read:
 * padding, tails). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* until at most N of this thread's groups are in flight (its copies before them visible) */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Rounds f to the nearest representable value, ties to even (dtypes.c's mini_encode). */
__device__ __forceinline__ uint32_t mini_encode(const minifloat mf, float f)
{
    const uint32_t bits = __float_as_uint(f);
    const uint32_t sign = (bits >> 31) << (mf.total_bits - 1);
    const uint32_t abs_bits = bits & 0x7fffffffu;
    const uint32_t overflow = mf.has_inf ? mf.max_finite + 1 : mf.max_finite;
    if (abs_bits > 0x7f800000u) return sign | mf.nan_code;
    if (abs_bits == 0x7f800000u) return sign | overflow;
    const int exp_field = (int)(abs_bits >> 23);
    if (exp_field == 0) return sign;
    const int e = exp_field - 127;
    const int emin = 1 - mf.bias;
    const int emax = (int)(mf.max_finite >> mf.mbits) - mf.bias;
    if (e > emax + 1) return sign | overflow;
    const uint32_t m = (abs_bits & 0x7fffffu) | 0x800000u;
    const int q = (e < emin ? emin : e) - mf.mbits;
    const int shift = 23 + q - e;
    uint32_t r;
    if (shift >= 26) {
        r = 0;
    } else {
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        r = m >> shift;
        if (rem > half || (rem == half && (r & 1u))) r++;
    }
    uint32_t code = e < emin ? r : ((uint32_t)(e + mf.bias) << mf.mbits) + r - (1u << mf.mbits);
    if (code > mf.max_finite) code = overflow;
    return sign | code;
}

__device__ __forceinline__ float mini_decode(const minifloat mf, uint32_t v)
{
    const uint32_t mag = v & ((1u << (mf.total_bits - 1)) - 1);
    const float sign = (v >> (mf.total_bits - 1)) ? -1.0f : 1.0f;
    const uint32_t mant = mag & ((1u << mf.mbits) - 1);
    const int exp_field = (int)(mag >> mf.mbits);
    if (mag > mf.max_finite)
        return mf.has_inf && mant == 0 ? sign * __int_as_float(0x7f800000)
                                       : __int_as_float(0x7fc00000);
    if (exp_field == 0) return sign * ldexpf((float)mant, 1 - mf.bias - mf.mbits);
    return sign * ldexpf((float)(mant | (1u << mf.mbits)), exp_field - mf.bias - mf.mbits);
}

/* Two fp8 codes (bytes 0-1 of u, or 2-3 with high) as an f16x2, exactly. e5m2 is the top
 * byte of an f16. e4m3 placed in an f16's low bits reads as its value * 2^-8 (biases 7 and
 * 15), subnormals included; multiplying by 2^8 is exact; the one NaN code (0x7f) becomes an
 * f16 NaN (not mini_decode's one NaN: sums through arithmetic canonicalize it). */
template <bool E4M3> __device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t u, bool high)
{
    const uint32_t v = __byte_perm(u, 0, high ? 0x3424 : 0x1404); /* code << 8 in each half */
    if constexpr (!E4M3) {
        return v;
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
        /* the hardware conversion (sm_89+): exact as well, one instruction */
        uint32_t r;
        if (high) asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi; }" : "=r"(r) : "r"(u));
        else asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, lo; }" : "=r"(r) : "r"(u));
        (void)v;
        return r;
#else
        const uint32_t sign = v & 0x80008000u, mag = v & 0x7f007f00u;
        uint32_t h = sign | (mag >> 1), r;
        asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(h), "r"(0x5c005c00u)); /* 256.0 */
        const uint32_t nan = __vcmpeq2(mag, 0x7f007f00u);
        return (r & ~nan) | (nan & (0x7e007e00u | sign));
#endif
    }
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t bits = __float_as_uint(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* f16 -> f32 through the hardware conversion: exact, like every widening. */
__device__ __forceinline__ float f16_to_f32(uint16_t h)
{
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}

/* One element as its value modulo 2^64: sign- or zero-extended per dtype. */
__device__ __forceinline__ uint64_t load_int(xconv_dtype d, const void *base, int64_t i)
{
    switch (d) {
    case XCONV_DTYPE_U8: return ((const uint8_t *)base)[i];
    case XCONV_DTYPE_I8: return (uint64_t)(int64_t)((const int8_t *)base)[i];
    case XCONV_DTYPE_U16: return ((const uint16_t *)base)[i];
    case XCONV_DTYPE_I16: return (uint64_t)(int64_t)((const int16_t *)base)[i];
    case XCONV_DTYPE_U32: return ((const uint32_t *)base)[i];
    case XCONV_DTYPE_I32: return (uint64_t)(int64_t)((const int32_t *)base)[i];
    case XCONV_DTYPE_U64:
    case XCONV_DTYPE_I64: return ((const uint64_t *)base)[i];
    default: return 0;
    }
}

/* Writes the low bits of v in d's width (truncation = wrapping). */
__device__ __forceinline__ void store_int(xconv_dtype d, void *base, int64_t i, uint64_t v)
{
    switch (d) {
    case XCONV_DTYPE_U8: case XCONV_DTYPE_I8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case XCONV_DTYPE_U16: case XCONV_DTYPE_I16: ((uint16_t *)base)[i] = (uint16_t)v; break;
    case XCONV_DTYPE_U32: case XCONV_DTYPE_I32: ((uint32_t *)base)[i] = (uint32_t)v; break;
    case XCONV_DTYPE_U64: case XCONV_DTYPE_I64: ((uint64_t *)base)[i] = v; break;
    default: break;
    }
}

/* A real element in f32: exact for every real dtype but f64 (never loaded into f32). */
__device__ __forceinline__ float load_f32(xconv_dtype d, const void *base, int64_t i)
{
    switch (d) {
    case XCONV_DTYPE_F8E4M3: return mini_decode(MF_E4M3, ((const uint8_t *)base)[i]);
    case XCONV_DTYPE_F8E5M2: return mini_decode(MF_E5M2, ((const uint8_t *)base)[i]);
    case XCONV_DTYPE_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    case XCONV_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    case XCONV_DTYPE_F32: return ((const float *)base)[i];
    case XCONV_DTYPE_F64: return (float)((const double *)base)[i];
    default: return 0.0f;
    }
}

__device__ __forceinline__ double load_f64(xconv_dtype d, const void *base, int64_t i)
{
    return d == XCONV_DTYPE_F64 ? ((const double *)base)[i] : (double)load_f32(d, base, i);
}

/* f32 -> f16 through the hardware's rounding: cvt.rn rounds every non-NaN value as
 * mini_encode does (nearest even, overflow to inf, subnormals kept); only a NaN's code
 * differs, and is rewritten to the library's sign | 0x7e00. mini_encode's branches made f16
 * stores ~30% slower than bf16's in the bandwidth-bound kernels. */
__device__ __forceinline__ uint16_t f32_to_f16_rne(float f)
{
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    if (f != f) h = (uint16_t)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u);
    return h;
}

/* n pairs of f32 values rounded to YD (bf16 or f16; lo in each word's low half) through the
 * hardware's cvt.rn: the same bits as f32_to_bf16 / f32_to_f16_rne for every non-NaN value
 * (nearest even, overflow to inf, subnormals kept) in about a third of f32_to_bf16's
 * instructions; where any value is a NaN (rare) one branch redoes the group value by value,
 * for the library's NaN bits instead of the hardware's canonical one. One branch per pair,
 * each with its convergence barrier, was most of the tensor-core epilogues' instructions:
 * rn50_1x1_256's tile fill cost it a fifth of its time (nineteenth session). */
template <xconv_dtype YD, int N>
__device__ __forceinline__ void round_pairs(const float (&lo)[N], const float (&hi)[N], uint32_t (&w)[N])
{
    static_assert(YD == XCONV_DTYPE_BF16 || YD == XCONV_DTYPE_F16, "16-bit float pairs");
    bool nan = false;
#pragma unroll
    for (int q = 0; q < N; q++) {
        if constexpr (YD == XCONV_DTYPE_BF16)
            asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[q]) : "f"(hi[q]), "f"(lo[q]));
        else
            asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[q]) : "f"(hi[q]), "f"(lo[q]));
        nan |= (lo[q] != lo[q]) | (hi[q] != hi[q]);
    }
    if (nan) {
#pragma unroll
        for (int q = 0; q < N; q++)
            w[q] = YD == XCONV_DTYPE_BF16
                       ? (uint32_t)f32_to_bf16(lo[q]) | (uint32_t)f32_to_bf16(hi[q]) << 16
                       : (uint32_t)f32_to_f16_rne(lo[q]) | (uint32_t)f32_to_f16_rne(hi[q]) << 16;
    }
}

/* n pairs of f32 values rounded to fp8 (lo in each pair's low byte) as mini_encode does:
 * nearest even, e4m3 saturating (OCP FN), e5m2 overflowing to inf. The hardware's
 * cvt.rn.satfinite (sm_89+) gives the same bits for every value but a NaN (its code differs)
 * and, in e5m2, a magnitude that rounds past 57344 (it saturates where the library gives inf,
 * from 61440 = halfway to 2^16 on); where a group holds either (rare), one branch redoes it
 * value by value. */
template <bool E4M3, int N>
__device__ __forceinline__ void round_pairs_f8(const float (&lo)[N], const float (&hi)[N], uint16_t (&w)[N])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    bool odd = false;
#pragma unroll
    for (int q = 0; q < N; q++) {
        if constexpr (E4M3)
            asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(w[q]) : "f"(hi[q]), "f"(lo[q]));
        else
            asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(w[q]) : "f"(hi[q]), "f"(lo[q]));
        /* !(|v| < limit) holds for NaN too (and, in e4m3, for inf, which saturates alike) */
        const float limit = E4M3 ? __int_as_float(0x7f800000) : 61440.0f;
        odd |= !(fabsf(lo[q]) < limit) | !(fabsf(hi[q]) < limit);
    }
    if (!odd) return;
#endif
    const minifloat mf = E4M3 ? MF_E4M3 : MF_E5M2;
#pragma unroll
    for (int q = 0; q < N; q++)
        w[q] = (uint16_t)(mini_encode(mf, lo[q]) | mini_encode(mf, hi[q]) << 8);
}

/* Stores a value computed in f32, rounding once to nearest even (e4m3 saturating). */
__device__ __forceinline__ void store_f32(xconv_dtype d, void *base, int64_t i, float v)
{
    switch (d) {
    case XCONV_DTYPE_F8E4M3: ((uint8_t *)base)[i] = (uint8_t)mini_encode(MF_E4M3, v); break;
    case XCONV_DTYPE_F8E5M2: ((uint8_t *)base)[i] = (uint8_t)mini_encode(MF_E5M2, v); break;
    case XCONV_DTYPE_F16: ((uint16_t *)base)[i] = f32_to_f16_rne(v); break;
    case XCONV_DTYPE_BF16: ((uint16_t *)base)[i] = f32_to_bf16(v); break;
    case XCONV_DTYPE_F32: ((float *)base)[i] = v; break;
    case XCONV_DTYPE_F64: ((double *)base)[i] = v; break;
    default: break;
    }
}

__device__ __forceinline__ void store_f64(xconv_dtype d, void *base, int64_t i, double v)
{
    if (d == XCONV_DTYPE_F64) ((double *)base)[i] = v;
    else store_f32(d, base, i, (float)v);
}

/* ---------------------------------------------------------------------------------------- */
/* Compute types: one arithmetic per xconv_ctype, storage conversions at the edges           */
/* ---------------------------------------------------------------------------------------- */

template <class T> struct ops;

template <> struct ops<uint32_t> {
    static __device__ __forceinline__ uint32_t zero() { return 0u; }
    static __device__ __forceinline__ uint32_t load(xconv_dtype d, const void *b, int64_t i)
    {
        return (uint32_t)load_int(d, b, i);
    }
    static __device__ __forceinline__ void store(xconv_dtype d, void *b, int64_t i, uint32_t v)
    {
        store_int(d, b, i, v);
    }
    static __device__ __forceinline__ void mac(uint32_t &acc, uint32_t a, uint32_t w)
    {
        acc += a * w;
    }
};

template <> struct ops<uint64_t> {
    static __device__ __forceinline__ uint64_t zero() { return 0u; }
    static __device__ __forceinline__ uint64_t load(xconv_dtype d, const void *b, int64_t i)
    {
        return load_int(d, b, i);
    }
    static __device__ __forceinline__ void store(xconv_dtype d, void *b, int64_t i, uint64_t v)
    {
        store_int(d, b, i, v);
    }
    static __device__ __forceinline__ void mac(uint64_t &acc, uint64_t a, uint64_t w)
    {
        acc += a * w;
    }
};

template <> struct ops<float> {
    static __device__ __forceinline__ float zero() { return 0.0f; }
    static __device__ __forceinline__ float load(xconv_dtype d, const void *b, int64_t i)
    {
        return load_f32(d, b, i);
    }
    static __device__ __forceinline__ void store(xconv_dtype d, void *b, int64_t i, float v)
    {
        store_f32(d, b, i, v);
    }
    static __device__ __forceinline__ void mac(float &acc, float a, float w) { acc += a * w; }
};

template <> struct ops<double> {
    static __device__ __forceinline__ double zero() { return 0.0; }
    static __device__ __forceinline__ double load(xconv_dtype d, const void *b, int64_t i)
    {
        return load_f64(d, b, i);
    }
    static __device__ __forceinline__ void store(xconv_dtype d, void *b, int64_t i, double v)
    {
        store_f64(d, b, i, v);
    }
    static __device__ __forceinline__ void mac(double &acc, double a, double w) { acc += a * w; }
};

/* Complex: (re, im) pairs of float or double, the plain product formula of DESIGN.md §2. */
template <class R, class C> struct complex_ops {
    static __device__ __forceinline__ C zero() { return C{0, 0}; }
    static __device__ __forceinline__ C load(xconv_dtype d, const void *b, int64_t i)
    {
        if (d == XCONV_DTYPE_C64) {
            const float *p = (const float *)b + 2 * i;
            return C{(R)p[0], (R)p[1]};
        }
        const double *p = (const double *)b + 2 * i;
        return C{(R)p[0], (R)p[1]};
    }
    static __device__ __forceinline__ void store(xconv_dtype d, void *b, int64_t i, C v)
    {
        if (d == XCONV_DTYPE_C64) {
            float *p = (float *)b + 2 * i;
            p[0] = (float)v.re, p[1] = (float)v.im;
        } else {
            double *p = (double *)b + 2 * i;
            p[0] = (double)v.re, p[1] = (double)v.im;
        }
    }
    static __device__ __forceinline__ void mac(C &acc, C a, C w)
    {
        acc.re += a.re * w.re - a.im * w.im;
        acc.im += a.re * w.im + a.im * w.re;
    }
};
template <> struct ops<xconv_c64> : complex_ops<float, xconv_c64> {};
template <> struct ops<xconv_c128> : complex_ops<double, xconv_c128> {};

/* The bias of output channel o0 + i of group g as the tensor-core epilogues add it (f32, or
 * u32 for integer sums); channels past cout/groups read channel 0. */
template <class bias_t>
__device__ __forceinline__ bias_t xconv_cuda_bias_at(const xconv_canon &p, const char *bias,
                                                     int64_t o, int64_t g)
{
    return ops<bias_t>::load(p.bias_dtype, bias,
                             p.b_off + (g * p.cout_g + (o < p.cout_g ? o : 0)) * p.b_s);
}

/* The tensor-core kernels' bias for the BN output channels from o0 of group g, read once by
 * the first BN threads into bv (shared memory after the y tile and its row offsets; in
 * registers it made the float kernels spill). The caller's barrier follows. */
template <class bias_t, int BN>
__device__ __forceinline__ void xconv_cuda_stage_bias(const xconv_canon &p, const char *bias,
                                                      bias_t *bv, int tid, int64_t o0, int64_t g)
{
    if (bias && tid < BN) bv[tid] = xconv_cuda_bias_at<bias_t>(p, bias, o0 + tid, g);
}

} /* namespace xconv_cuda */

#endif /* XCONV_CUDA_COMMON_CUH */
