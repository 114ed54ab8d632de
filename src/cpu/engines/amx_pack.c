/*
 * amx_pack.c — cpu.amx's data movement: the weights into VNNI tiles, x into the zero-padded
 * planes that A reads, and the exponent scans that tell whether AMX's flushing of bf16
 * denormals could change a result (amx.c decides).
 *
 * Values are moved as bits: bf16, i8 and u8 as they are; f8 (e4m3, e5m2) through f32, whose
 * upper half is then the same value in bf16 (every f8 value is one exactly).
 */
#include "cpu/engines/amx.h"

#include <string.h>

/* n values of x's dtype at src (element stride `stride`) as A's values (bf16 bits or
 * bytes) at dst. */
static void take_values(const amx_task *t, xconv_dtype dt, const char *src, int64_t stride, char *dst,
                        int64_t n)
{
    const size_t es = xconv_dtype_size(dt);
    if (dt == XCONV_DTYPE_F8E4M3 || dt == XCONV_DTYPE_F8E5M2) {
        const unsigned char *b = (const unsigned char *)src;
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = t->f8[b[i * stride]];
            memcpy(dst + i * 2, &h, 2);
        }
    } else if (stride == 1) {
        memcpy(dst, src, (size_t)n * es);
    } else if (es == 2) {
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * 2, src + i * stride * 2, 2);
    } else {
        for (int64_t i = 0; i < n; i++) dst[i] = src[i * stride];
    }
}

void xconv__amx_f8_table(xconv_dtype dt, uint16_t table[256])
{
    unsigned char bytes[256];
    float f[256];
    for (int i = 0; i < 256; i++) bytes[i] = (unsigned char)i;
    xconv__load_row(XCONV_CT_F32, dt, bytes, 1, f, 256);
    for (int i = 0; i < 256; i++) {
        uint32_t b;
        memcpy(&b, &f[i], 4);
        table[i] = (uint16_t)(b >> 16);
    }
}

/* Split mode (f16): each of n f16 values as four bf16 reduction values, v = hi + lo with
 * hi = v rounded to bf16 and lo = v - hi (both exact: lo keeps f16's last three bits). x
 * gives (hi, hi, lo, lo) and w (hi, lo, hi, lo), so that the pairs' products sum to
 * xh wh + xh wl + xl wh + xl wl = x w exactly. An Inf or NaN keeps its bits in hi (lo 0);
 * cpu.amx sends such problems to the f32 kernels (amx.c). */
static void take_split(const char *src, int64_t stride, char *dst, int64_t n, bool weights)
{
    float tmp[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        const int64_t c = n - i0 < 256 ? n - i0 : 256;
        xconv__load_row(XCONV_CT_F32, XCONV_DTYPE_F16, src + i0 * stride * 2, stride, tmp, c);
        for (int64_t i = 0; i < c; i++) {
            uint32_t b;
            memcpy(&b, &tmp[i], 4);
            uint16_t hi, lo = 0;
            if ((b & 0x7f800000u) == 0x7f800000u) {
                hi = (uint16_t)(b >> 16);
            } else {
                hi = (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
                const uint32_t hb = (uint32_t)hi << 16;
                float h, r;
                memcpy(&h, &hb, 4);
                r = tmp[i] - h;
                uint32_t rb;
                memcpy(&rb, &r, 4);
                lo = (uint16_t)(rb >> 16);
            }
            const uint16_t v[4] = {hi, weights ? lo : hi, weights ? hi : lo, lo};
            memcpy(dst + (i0 + i) * 8, v, 8);
        }
    }
}

void xconv__amx_pack_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const amx_task *t = arg;
    const amx_geom *q = t->q;
    const xconv_canon *p = t->e->p;
    const size_t xes = xconv_dtype_size(p->x_dtype);
    const int per = 64 / 16 / q->es; /* values per column of a B row: 2 or 4 */
    _Alignas(64) char vals[4096];
    int emin = 255, emax = 0;
    /* row mode: a tap is a kernel row (k0, k1), its reduction index k2 * cin + c */
    const int64_t folded = q->row ? p->k_size[2] : 1;
    for (int64_t item = begin; item < end; item++) {
        const int64_t kk = item % q->wtaps, gp = item / q->wtaps;
        const int64_t g = gp / q->panels, panel = gp % q->panels;
        const int64_t kin = q->row ? 1 : p->k_size[2];
        const int64_t k2t = kk % kin, k1 = kk / kin % p->k_size[1], k0 = kk / kin / p->k_size[1];
        char *dst = (char *)t->blob + AMX_BLOB_HEADER + (size_t)item * q->tap_bytes;
        memset(dst, 0, q->tap_bytes);
        for (int64_t oo = 0; oo < 32; oo++) {
            const int64_t o = panel * 32 + oo;
            if (o >= p->cout_g) break;
            const int64_t j = oo / 16, n = oo % 16;
            for (int64_t f = 0; f < folded; f++) {
                const int64_t k2 = q->row ? f : k2t;
                const char *w = (const char *)t->e->w +
                                (p->w_off + g * p->w_sg + o * p->w_so + k0 * p->w_sk[0] +
                                 k1 * p->w_sk[1] + k2 * p->w_sk[2]) * (int64_t)xes;
                const int64_t chunk = (int64_t)sizeof vals / 2 / q->red;
                for (int64_t i0 = 0; i0 < p->cin_g; i0 += chunk) {
                    const int64_t c = p->cin_g - i0 < chunk ? p->cin_g - i0 : chunk, cr = c * q->red;
                    if (q->red == 4)
                        take_split(w + i0 * p->w_si * (int64_t)xes, p->w_si, vals, c, true);
                    else
                        take_values(t, p->x_dtype, w + i0 * p->w_si * (int64_t)xes, p->w_si, vals, c);
                    if (q->kind == AMX_BF16)
                        xconv__amx_bf16_scan((const uint16_t *)(const void *)vals, cr, &emin, &emax);
                    for (int64_t ii = 0; ii < cr; ii++) {
                        const int64_t i = (f * p->cin_g + i0) * q->red + ii, s = i / q->kstep,
                                      rem = i % q->kstep;
                        const int64_t r = rem / per, e = rem % per;
                        memcpy(dst + s * 2048 + j * 1024 + r * 64 + (n * per + e) * q->es,
                               vals + ii * q->es, (size_t)q->es);
                    }
                }
            }
        }
    }
    if (emin < t->emin[slot]) t->emin[slot] = emin;
    if (emax > t->emax[slot]) t->emax[slot] = emax;
}

void xconv__amx_pack_all(xconv_context *ctx, amx_task *t)
{
    int emin[256], emax[256];
    for (int i = 0; i < 256; i++) emin[i] = 255, emax[i] = 0;
    int *saved_min = t->emin, *saved_max = t->emax;
    t->emin = emin, t->emax = emax;
    xconv__parallel_for_slot(ctx, t->e->p->groups * t->q->panels * t->q->wtaps,
                             xconv__amx_pack_range, t);
    t->emin = saved_min, t->emax = saved_max;
    int head[2] = {255, 0};
    for (int i = 0; i < 256; i++) {
        head[0] = emin[i] < head[0] ? emin[i] : head[0];
        head[1] = emax[i] > head[1] ? emax[i] : head[1];
    }
    memcpy((char *)t->blob, head, sizeof head);
}

/* Row mode: pixels [pa, pb) of x's row (x0, x1) as cin values each (split mode: 4 cin),
 * zero past x. */
static void copy_pixels(const amx_task *t, int64_t n, int64_t x0, int64_t x1, char *row, int64_t pa,
                        int64_t pb, int *emin, int *emax)
{
    const amx_geom *q = t->q;
    const xconv_canon *p = t->e->p;
    const size_t xes = xconv_dtype_size(p->x_dtype);
    const int64_t cin = p->cin, pix = cin * q->red * q->es; /* bytes per pixel */
    int64_t a = pa - q->lo[2] < 0 ? 0 : pa - q->lo[2]; /* x's pixels [a, b) */
    int64_t b = pb - q->lo[2] > p->x_size[2] ? p->x_size[2] : pb - q->lo[2];
    if (b <= a) {
        memset(row + pa * pix, 0, (size_t)((pb - pa) * pix));
        return;
    }
    memset(row + pa * pix, 0, (size_t)((a + q->lo[2] - pa) * pix));
    memset(row + (b + q->lo[2]) * pix, 0, (size_t)((pb - b - q->lo[2]) * pix));
    const char *src = (const char *)t->e->x +
                      (p->x_off + n * p->x_sn + x0 * p->x_ss[0] + x1 * p->x_ss[1] + a * p->x_ss[2]) *
                          (int64_t)xes;
    char *d = row + (a + q->lo[2]) * pix;
    const bool dense = p->x_sc == 1 && p->x_ss[2] == cin;
    if (dense && q->red == 4) {
        xconv__amx_split_f16((const uint16_t *)(const void *)src, (uint16_t *)(void *)d, (b - a) * cin);
    } else if (dense) {
        take_values(t, p->x_dtype, src, 1, d, (b - a) * cin);
    } else {
        for (int64_t x2 = 0; x2 < b - a; x2++)
            for (int64_t c = 0; c < cin; c++) {
                const char *sv = src + (x2 * p->x_ss[2] + c * p->x_sc) * (int64_t)xes;
                char *dv = d + (x2 * cin + c) * q->red * q->es;
                if (q->red == 4)
                    take_split(sv, 1, dv, 1, false);
                else
                    take_values(t, p->x_dtype, sv, 1, dv, 1);
            }
    }
    if (q->kind == AMX_BF16)
        xconv__amx_bf16_scan((const uint16_t *)(const void *)d, (b - a) * cin * q->red, emin, emax);
}

/* The values past a group's channels up to the tile step, which meet the weights' zero rows:
 * bf16 -0, whose products with +0 are -0, which leaves every sum as it is (+0 would turn a
 * sum of -0, from a bias of -0, into +0, where cpu.ref keeps -0); bytes 0. */
static void pad_channels(const amx_geom *q, char *d, int64_t count)
{
    if (q->kind != AMX_BF16) {
        memset(d, 0, (size_t)(count * q->es));
        return;
    }
    const uint16_t neg_zero = 0x8000;
    for (int64_t i = 0; i < count; i++) memcpy(d + 2 * i, &neg_zero, 2);
}

void xconv__amx_copy_segment(const amx_task *t, int64_t line, int64_t ua, int64_t ub, int slot)
{
    const amx_geom *q = t->q;
    const xconv_canon *p = t->e->p;
    const size_t xes = xconv_dtype_size(p->x_dtype);
    const int64_t planes = q->ph[0] * q->ph[1] * q->ph[2];
    const bool scan = q->kind == AMX_BF16 && p->x_dtype == XCONV_DTYPE_BF16;
    int emin = 255, emax = 0;
    const int64_t u1 = line % q->q[1], u0 = line / q->q[1] % q->q[0];
    const int64_t pi = line / q->q[1] / q->q[0] % planes, nl = line / q->q[1] / q->q[0] / planes;
    const int64_t p2 = pi % q->ph[2], p1 = pi / q->ph[2] % q->ph[1], p0 = pi / q->ph[2] / q->ph[1];
    char *row = (char *)t->ws + q->xbuf +
                (size_t)(nl * q->image + pi * q->plane + (u0 * q->q[1] + u1) * q->q[2]) * q->row_bytes;
    char *dst = row + (size_t)ua * q->row_bytes;
    const int64_t x0 = u0 * q->ph[0] + p0 - q->lo[0], x1 = u1 * q->ph[1] + p1 - q->lo[1];
    if (x0 < 0 || x0 >= p->x_size[0] || x1 < 0 || x1 >= p->x_size[1]) {
        memset(dst, 0, (size_t)(ub - ua) * q->row_bytes);
    } else if (q->row) {
        /* the last segment also zeroes the row's pixels past its positions' */
        const int64_t pb = ub == q->q[2] ? q->q[2] * p->stride[2] : ub * p->stride[2];
        copy_pixels(t, t->n0 + nl, x0, x1, row, ua * p->stride[2], pb, &emin, &emax);
    } else if (q->red == 1 && p->groups == 1 && p->x_sc == 1 && q->cp == p->cin && xes == (size_t)q->es &&
               p->x_dtype != XCONV_DTYPE_F8E4M3 && p->x_dtype != XCONV_DTYPE_F8E5M2) {
        /* x's own bits with dense channels filling whole steps: the positions inside x as
         * channel spans (one copy when x's pixels are dense too), zeros around them */
        int64_t a = ua, b = ub; /* positions [a, b) lie inside x */
        while (a < b && a * q->ph[2] + p2 - q->lo[2] < 0) a++;
        while (b > a && (b - 1) * q->ph[2] + p2 - q->lo[2] >= p->x_size[2]) b--;
        memset(dst, 0, (size_t)(a - ua) * q->row_bytes);
        memset(row + b * q->row_bytes, 0, (size_t)(ub - b) * q->row_bytes);
        if (b > a) {
            const char *src = (const char *)t->e->x +
                              (p->x_off + (t->n0 + nl) * p->x_sn + x0 * p->x_ss[0] + x1 * p->x_ss[1] +
                               (a * q->ph[2] + p2 - q->lo[2]) * p->x_ss[2]) * (int64_t)xes;
            xconv__amx_copy_spans(row + a * q->row_bytes, q->row_bytes, src,
                                  (ptrdiff_t)(q->ph[2] * p->x_ss[2] * (int64_t)xes), b - a,
                                  (size_t)p->cin * xes);
            if (scan)
                xconv__amx_bf16_scan((const uint16_t *)(const void *)(row + a * q->row_bytes),
                                     (b - a) * p->cin, &emin, &emax);
        }
    } else {
        for (int64_t u2 = ua; u2 < ub; u2++, dst += q->row_bytes) {
            const int64_t x2 = u2 * q->ph[2] + p2 - q->lo[2];
            if (x2 < 0 || x2 >= p->x_size[2]) {
                memset(dst, 0, q->row_bytes);
                continue;
            }
            const char *src = (const char *)t->e->x +
                              (p->x_off + (t->n0 + nl) * p->x_sn + x0 * p->x_ss[0] +
                               x1 * p->x_ss[1] + x2 * p->x_ss[2]) * (int64_t)xes;
            for (int64_t g = 0; g < p->groups; g++) {
                char *d = dst + (size_t)(g * q->cp * q->es);
                const char *sg = src + g * p->cin_g * p->x_sc * (int64_t)xes;
                if (q->red == 4 && p->x_sc == 1)
                    xconv__amx_split_f16((const uint16_t *)(const void *)sg, (uint16_t *)(void *)d, p->cin_g);
                else if (q->red == 4)
                    take_split(sg, p->x_sc, d, p->cin_g, false);
                else
                    take_values(t, p->x_dtype, sg, p->x_sc, d, p->cin_g);
                if (scan || q->red == 4)
                    xconv__amx_bf16_scan((const uint16_t *)(const void *)d, p->cin_g * q->red, &emin, &emax);
                pad_channels(q, d + p->cin_g * q->red * q->es, q->cp - p->cin_g * q->red);
            }
        }
    }
    if (emin < t->emin[slot]) t->emin[slot] = emin;
    if (emax > t->emax[slot]) t->emax[slot] = emax;
}
