/*
 * data.c — the bench's logical data: random inputs in PyTorch's channels-first layout, the
 * layout changes each side needs, and the output comparison.
 */
#include "bench.h"
#include "convert.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: a fixed, portable stream, so every run benchmarks the same numbers. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void bench_fill(xconv_dtype dt, void *buf, int64_t count, uint64_t seed, bool narrow_unsigned)
{
    uint64_t state = seed;
    xconv_family family = xconv__dtype_family(dt);
    bool is_signed = xconv__dtype_signed(dt);
    for (int64_t i = 0; i < count; i++) {
        uint64_t r = next_random(&state);
        tool_scalar v = {0};
        if (family == XCONV_FAMILY_INT && is_signed) {
            v.kind = TOOL_INT;
            v.i = (int64_t)(r & 0xFF) - 128;
        } else if (family == XCONV_FAMILY_INT) {
            v.kind = TOOL_UINT;
            v.u = r & (narrow_unsigned ? 0x7F : 0xFF);
        } else {
            /* 24 random bits per part: exact in every float format's f32 path. */
            v.kind = family == XCONV_FAMILY_COMPLEX ? TOOL_COMPLEX : TOOL_FLOAT;
            v.re = (double)(r >> 40) / 8388608.0 - 1.0;
            v.im = (double)((r >> 16) & 0xFFFFFF) / 8388608.0 - 1.0;
            if (family == XCONV_FAMILY_FLOAT) v.im = 0;
        }
        /* Every value above fits every dtype, so the checked store cannot fail. */
        char ignored[8];
        (void)xconv_tool_set(dt, buf, i, &v, ignored, sizeof ignored);
    }
}

void *bench_alloc(size_t bytes)
{
    void *mem = NULL;
    size_t whole = (bytes + 63) / 64 * 64;
    return posix_memalign(&mem, 64, whole ? whole : 64) == 0 ? mem : NULL;
}

int bench_data_create(const bench_problem *p, xconv_dtype x_dtype, xconv_dtype y_dtype,
                      bench_data *d)
{
    memset(d, 0, sizeof *d);
    d->x_dtype = x_dtype;
    d->y_dtype = y_dtype;
    size_t es = xconv_dtype_size(x_dtype);
    int64_t xn = bench_x_elems(p), wn = bench_w_elems(p);
    /* +1 element: a problem with N = 0 still gets a valid pointer. */
    d->x = bench_alloc((size_t)(xn + 1) * es);
    d->w = bench_alloc((size_t)(wn + 1) * es);
    if (!d->x || !d->w) {
        bench_data_destroy(d);
        return -1;
    }
    bench_fill(x_dtype, d->x, xn, 1, false);
    bench_fill(x_dtype, d->w, wn, 2, true);
    return 0;
}

void bench_data_destroy(bench_data *d)
{
    free(d->x);
    free(d->w);
    d->x = d->w = NULL;
}

void bench_to_channels_last(const void *src, void *dst, int64_t n, int64_t c, int64_t s,
                            size_t esize)
{
    const uint8_t *in = src;
    uint8_t *out = dst;
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < s; i++)
                memcpy(out + (size_t)((b * s + i) * c + ch) * esize,
                       in + (size_t)((b * c + ch) * s + i) * esize, esize);
}

void bench_weight_to_okc(const bench_problem *p, const void *w_pt, void *dst, size_t esize)
{
    int64_t ks = bench_spatial(p->k, p->rank);
    if (p->op == XCONV_OP_CONV) {
        /* [Cout, Cin/g, K] -> [Cout, K, Cin/g]: a channels-last move per output channel. */
        bench_to_channels_last(w_pt, dst, p->cout, p->cin / p->groups, ks, esize);
        return;
    }
    int64_t cin_g = p->cin / p->groups, cout_g = p->cout / p->groups;
    const uint8_t *in = w_pt;
    uint8_t *out = dst;
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t a = 0; a < cin_g; a++)
            for (int64_t b = 0; b < cout_g; b++)
                for (int64_t k = 0; k < ks; k++) {
                    int64_t from = ((g * cin_g + a) * cout_g + b) * ks + k;
                    int64_t to = ((g * cout_g + b) * ks + k) * cin_g + a;
                    memcpy(out + (size_t)to * esize, in + (size_t)from * esize, esize);
                }
}

double bench_get(xconv_dtype dt, const void *buf, int64_t i)
{
    tool_scalar v = xconv_tool_get(dt, buf, i);
    switch (v.kind) {
    case TOOL_UINT: return (double)v.u;
    case TOOL_INT: return (double)v.i;
    default: return v.re;
    }
}

/* v reduced modulo 2^bits into dt's range, as xconv's wrapping arithmetic leaves it. Peers'
 * results are below 2^53 in magnitude, so the double holds them exactly. */
static double wrap(xconv_dtype dt, double v)
{
    int bits = xconv__dtype_bits(dt);
    if (bits >= 64) return v;
    uint64_t mask = (UINT64_C(1) << bits) - 1;
    uint64_t u = (uint64_t)(int64_t)v & mask;
    if (xconv__dtype_signed(dt) && (u >> (bits - 1)))
        return -(double)((mask - u) + 1);
    return (double)u;
}

double bench_compare(xconv_dtype dt, const double *a, const double *b, int64_t count)
{
    bool integer = xconv__dtype_family(dt) == XCONV_FAMILY_INT;
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < count; i++) {
        double ref = integer ? wrap(dt, b[i]) : b[i];
        double diff = fabs(a[i] - ref);
        if (isnan(diff)) return INFINITY; /* the inputs are finite: a NaN is a wrong result */
        if (diff > max_diff) max_diff = diff;
        if (fabs(ref) > max_ref) max_ref = fabs(ref);
    }
    if (max_diff == 0) return 0;
    return max_diff / (max_ref > 0 ? max_ref : 1);
}

double bench_tolerance(xconv_dtype dt)
{
    switch (dt) {
    case XCONV_DTYPE_F8E4M3: return 0.13; /* one ulp of a 3-bit mantissa at the top */
    case XCONV_DTYPE_F8E5M2: return 0.26;
    case XCONV_DTYPE_BF16: return 1.6e-2; /* about 2 ulp at the largest output */
    case XCONV_DTYPE_F16: return 2e-3;
    case XCONV_DTYPE_F32: case XCONV_DTYPE_C64: return 1e-4;
    case XCONV_DTYPE_F64: case XCONV_DTYPE_C128: return 1e-10;
    default: return 0;
    }
}

void bench_peer_destroy(bench_peer *peer)
{
    if (peer->destroy && peer->state) peer->destroy(peer->state);
    peer->state = NULL;
}

void bench_layout_problem(const bench_problem *p, xconv_layout layout, int64_t *x_shape,
                          int64_t *w_shape, xconv_params *params)
{
    const bool last = layout == XCONV_LAYOUT_CHANNELS_LAST;
    const int rank = p->rank + 2;
    x_shape[0] = p->n;
    x_shape[last ? rank - 1 : 1] = p->cin;
    for (int i = 0; i < p->rank; i++) {
        x_shape[(last ? 1 : 2) + i] = p->in[i];
        w_shape[(last ? 1 : 2) + i] = p->k[i];
    }
    if (last) { /* both ops: [Cout, K.., Cin/g] */
        w_shape[0] = p->cout;
        w_shape[rank - 1] = p->cin / p->groups;
    } else if (p->op == XCONV_OP_CONV) {
        w_shape[0] = p->cout;
        w_shape[1] = p->cin / p->groups;
    } else {
        w_shape[0] = p->cin;
        w_shape[1] = p->cout / p->groups;
    }
    *params = xconv_params_init(p->op, p->rank, layout);
    for (int i = 0; i < p->rank; i++) {
        params->stride[i] = p->stride[i];
        params->dilation[i] = p->dil[i];
        params->pad_lo[i] = p->pad_lo[i];
        params->pad_hi[i] = p->pad_hi[i];
        params->output_padding[i] = p->out_pad[i];
    }
    params->groups = p->groups;
}

int bench_fit_reps(int reps, double round_s, double budget)
{
    if (round_s * reps <= budget) return reps;
    const int fit = round_s > 0 ? (int)(budget / round_s) : reps;
    const int floor_reps = reps < 3 ? reps : 3;
    return fit < floor_reps ? floor_reps : fit;
}
