/*
 * tma_maps.cu — the tensor maps (TMA descriptors) of cuda.igemm_wgmma's copies: w as tiles of
 * B, x in im2col mode as tiles of A, y as the boxes its tiles are stored in. The driver's
 * encoders are reached through cudart's entry-point query, so the library does not link
 * against libcuda; a missing encoder, or one that refuses a view, sends the kernel to its
 * cp.async loads (or, for y, to the store warps' row copies).
 */
#include "cuda/common.cuh"

#include <stdint.h>

namespace {

constexpr int BKB = 128; /* bytes of K per stage of the wgmma kernels */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

typedef CUresult (*encode_im2col_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                     const cuuint64_t *, const cuuint64_t *, const int *,
                                     const int *, cuuint32_t, cuuint32_t, const cuuint32_t *,
                                     CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* A driver entry point through cudart (no link against libcuda), null when missing. */
void *driver_fn(const char *name)
{
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        f = nullptr;
    (void)cudaGetLastError();
    return f;
}

} /* namespace */

/* A plain tiled map of rank r (<= 5) over elements of es bytes (1, 2 or 4) at base: dims
 * innermost first, byte strides of dims 1 .., box, 128-byte swizzle, zero fill outside. False
 * where the driver has no encoder or refuses (strides not multiples of 16, base not 16-byte
 * aligned). cuda.cf_gemm's maps of w, x and y. */
bool xconv__cuda_map_tiled(CUtensorMap *map, int es, int r, const void *base, const cuuint64_t *dims,
                           const cuuint64_t *strides, const cuuint32_t *box)
{
    static encode_tiled_fn enc = (encode_tiled_fn)driver_fn("cuTensorMapEncodeTiled");
    if (!enc || r < 1 || r > 5 || (uintptr_t)base % 16) return false;
    for (int i = 0; i < r - 1; i++)
        if (strides[i] % 16 || strides[i] >= (1ull << 40)) return false;
    const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
    const CUtensorMapDataType dt = es == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : es == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                             : CU_TENSOR_MAP_DATA_TYPE_UINT32;
    return enc(map, dt, (cuuint32_t)r, (void *)base, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The TMA view of w for the B tiles: dims (channel, k2, k1, k0, output channel of every
 * group), box 128 bytes x 1 x 1 x 1 x BN. False (cp.async loads B) when the driver's encoder
 * is missing or refuses, a stride is not positive, or the groups' rows are not one run of
 * output channels (w_sg != cout_g * w_so). */
bool xconv__cuda_map_w(const xconv_canon *p, const xconv_exec *e, int bn, CUtensorMap *map, int kb)
{
    const int es = (int)xconv_dtype_size(p->x_dtype);
    static encode_tiled_fn enc = (encode_tiled_fn)driver_fn("cuTensorMapEncodeTiled");
    if (!enc || p->w_so <= 0 || (p->groups > 1 && p->w_sg != p->cout_g * p->w_so)) return false;
    /* (the encoder's rules: dims in [1, 2^32], strides multiples of 16 below 2^40; a
     * deconv phase without taps has a 0 dim and needs no B) */
    cuuint64_t dims[5] = {(cuuint64_t)p->cin_g, (cuuint64_t)p->k_size[2], (cuuint64_t)p->k_size[1],
                          (cuuint64_t)p->k_size[0], (cuuint64_t)(p->groups * p->cout_g)};
    for (cuuint64_t d : dims)
        if (d == 0 || d > (1ull << 32)) return false;
    cuuint64_t strides[4];
    for (int d = 0; d < 3; d++) {
        const int64_t st = p->w_sk[2 - d];
        if (dims[1 + d] > 1 && st <= 0) return false;
        strides[d] = (cuuint64_t)((dims[1 + d] > 1 ? st : p->w_so) * es); /* size 1: any */
    }
    strides[3] = (cuuint64_t)(p->w_so * es);
    for (cuuint64_t st : strides)
        if (st % 16 || st >= (1ull << 40)) return false;
    const cuuint32_t box[5] = {(cuuint32_t)(kb / es), 1, 1, 1, (cuuint32_t)bn};
    const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
    void *base = (void *)((const char *)e->w + p->w_off * es);
    return enc(map, es == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, 5,
               base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               kb == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The TMA view of y for the wgmma kernel's stores of a BM x BN tile: dims (output channel of
 * every group, output position), box 128 bytes x BM, 128-byte swizzle (the layout the
 * epilogue fills its tile in: no bank conflicts, no padding); the copy engine clips rows
 * past the last position and columns past the last channel. False (the store warps copy row
 * by row) unless y's positions are one run at one stride (channels-last, dense over the
 * spatial dims and images), its channels contiguous, BN's rows whole 128-byte boxes, a tile
 * inside one group (groups 1 or cout/groups a multiple of BN), and the strides and base
 * 16-byte aligned. */
bool xconv__cuda_map_y(const xconv_canon *p, const xconv_exec *e, int bm, int bn, CUtensorMap *map)
{
    const int64_t es = (int64_t)xconv_dtype_size(p->y_dtype);
    static encode_tiled_fn enc = (encode_tiled_fn)driver_fn("cuTensorMapEncodeTiled");
    if (!enc || p->y_sc != 1 || (bn * es) % BKB || (p->groups > 1 && p->cout_g % bn)) return false;
    const int64_t *Y = p->y_size, st = p->y_ss[2];
    const bool dense = (Y[2] == 1 || st > 0) && (Y[1] == 1 || p->y_ss[1] == Y[2] * st) &&
                       (Y[0] == 1 || p->y_ss[0] == Y[1] * Y[2] * st) &&
                       (p->n == 1 || p->y_sn == Y[0] * Y[1] * Y[2] * st);
    const int64_t M = p->n * Y[0] * Y[1] * Y[2], C = p->groups * p->cout_g;
    const int64_t row = (M > 1 ? st : C) * es; /* bytes from one position to the next */
    const uintptr_t base = (uintptr_t)e->y + (uintptr_t)(p->y_off * es);
    if (!dense || (st < C && M > 1) || row % 16 || row >= (1ll << 40) || base % 16 || M < 1 ||
        M > (1ll << 32) || C > (1ll << 32))
        return false;
    const cuuint64_t dims[2] = {(cuuint64_t)C, (cuuint64_t)M}, strides[1] = {(cuuint64_t)row};
    const cuuint32_t box[2] = {(cuuint32_t)(BKB / es), (cuuint32_t)bm}, estr[2] = {1, 1};
    const CUtensorMapDataType dt = es == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : es == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                             : CU_TENSOR_MAP_DATA_TYPE_UINT32;
    return es <= 4 && enc(map, dt, 2, (void *)base, dims, strides, box, estr,
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                          CU_TENSOR_MAP_L2_PROMOTION_NONE,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The TMA view of x for the A tiles in im2col mode: dims (channels, the spatial dims from
 * the innermost, images), dropping outer spatial dims that are size 1 everywhere (a 1-D or
 * 2-D problem's), so the map's rank is 3, 4 or 5; box BM pixels x 128 bytes, 128-byte
 * swizzle, traversal steps = the conv strides, the bounding box of window corners
 * [-lo, (Y - 1) s - lo] per dim, zero fill outside x: the copy engine writes the A tile the
 * cp.async loader would, zeros included. A negative dilation t (cuda.deconv_tc's phases)
 * runs the dim's taps backwards: tap K - 1 - k at offset k |t| from the corner of padding
 * lo + (K - 1) |t|, written into *q (the kernel's view of p) with the dim's bit in m->flip.
 * Channel runs shorter than one 128-byte block (one group) take a box past them, zero-filled:
 * half of each block's products are zeros for 64-byte runs, yet the TMA kernel's pipeline
 * beat the cp.async kernel with two taps packed per block (twenty-ninth session, H100, i8 /
 * fp8: rn50_1x1_256 99 -> 217 / 86 -> 165 TOP/s, rn50_3x3_64 229 -> 279 / 220 -> 272; the
 * seventh session had measured cuda.fold_tc's 48-byte rows 11% slower by TMA, before the
 * producer warpgroup and the persistent grid). False (cp.async loads A) where the map does
 * not hold: a tap's block reading
 * into the next group's channels (groups > 1 with cin/groups not a multiple of 128 bytes,
 * zeros of B against them could make NaN), steps over 8, corners or tap offsets outside the
 * ranges the rank allows, strides that are not positive multiples of 16 bytes. */
bool xconv__cuda_map_x_im2col(const xconv_canon *p, const xconv_exec *e, int bm, CUtensorMap *map,
                              int *rank_out, int *flip, xconv_canon *q, int kb)
{
    static encode_im2col_fn enc = (encode_im2col_fn)driver_fn("cuTensorMapEncodeIm2col");
    const int es = (int)xconv_dtype_size(p->x_dtype);
    if (!enc || (p->groups > 1 && (p->cin_g * es) % BKB)) return false;
    *q = *p;
    *flip = 0;
    for (int d = 0; d < 3; d++)
        if (q->dil[d] < 0) {
            q->pad_lo[d] = p->pad_lo[d] - (p->k_size[d] - 1) * p->dil[d];
            q->dil[d] = -p->dil[d];
            *flip |= 1 << d;
        }
    int outer = 0; /* spatial dims 0 .. outer - 1 are size 1 everywhere */
    while (outer < 2 && q->x_size[outer] == 1 && q->k_size[outer] == 1 &&
           q->y_size[outer] == 1 && q->pad_lo[outer] == 0)
        outer++;
    const int rank = 5 - outer, lim = rank == 3 ? 32767 : rank == 4 ? 127 : 15;
    cuuint64_t dims[5], strides[4];
    cuuint32_t estr[5] = {1, 1, 1, 1, 1};
    int lower[3], upper[3];
    dims[0] = (cuuint64_t)q->cin;
    cuuint64_t prev = (cuuint64_t)(q->cin * es); /* a stride any size-1 dim can take */
    for (int i = 0; i < rank - 2; i++) {
        const int d = 2 - i; /* innermost first */
        const int64_t lo = q->pad_lo[d];
        const int64_t hi = (q->y_size[d] - 1) * q->stride[d] + 1 - q->x_size[d] - lo;
        if (q->stride[d] < 1 || q->stride[d] > 8 || (q->k_size[d] - 1) * q->dil[d] > lim ||
            -lo < -lim - 1 || -lo > lim || hi < -lim - 1 || hi > lim)
            return false;
        lower[i] = (int)-lo;
        upper[i] = (int)hi;
        dims[1 + i] = (cuuint64_t)q->x_size[d];
        estr[1 + i] = (cuuint32_t)q->stride[d];
        strides[i] = q->x_size[d] > 1 ? (cuuint64_t)(q->x_ss[d] * es) : prev;
        if (q->x_size[d] > 1 && q->x_ss[d] <= 0) return false;
        prev = strides[i] * dims[1 + i];
    }
    dims[rank - 1] = (cuuint64_t)q->n;
    strides[rank - 2] = q->n > 1 ? (cuuint64_t)(q->x_sn * es) : prev;
    if (q->n > 1 && q->x_sn <= 0) return false;
    for (int i = 0; i < rank; i++)
        if (dims[i] == 0 || dims[i] > (1ull << 32)) return false;
    for (int i = 0; i < rank - 1; i++)
        if (strides[i] % 16 || strides[i] >= (1ull << 40)) return false;
    void *base = (void *)((const char *)e->x + q->x_off * es);
    *rank_out = rank;
    return enc(map, es == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8,
               (cuuint32_t)rank, base, dims, strides, lower, upper, (cuuint32_t)(kb / es),
               (cuuint32_t)bm, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               kb == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

