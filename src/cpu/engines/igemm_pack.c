/*
 * igemm_pack.c — cpu.igemm's packing (see igemm.c for the engine):
 *
 *   weights  wp [G, panel, K, cin_g, nr] in the compute type (complex rows as split planes),
 *            [panel, cin, K, nr] for channels-first runs (q->cf), or for VNNI bytes grouped
 *            by four reduction indices, [panel, run, len/4, nr, 4],
 *            with the per-channel sums psum [panel, K, nr] that correct the x' shift;
 *   x        the zero-padded channels-last buffer [image, xp0, xp1, xp2, channels] of the
 *            compute type, [image, channels, X0, X1, X2] for channels-first runs, or for
 *            VNNI the bytes x' = x ^ 0x80 with cin_r channels;
 *   init     VNNI's per-panel bias row plus the shift correction.
 * Assumes: a validated canonical problem; q from cpu.igemm's geometry for it.
 */
#include "cpu/engines/igemm.h"

#include <stdlib.h>
#include <string.h>

/* Writes `count` compute-type values (interleaved if complex) as one packed row of nr. */
void xconv__igemm_put_row(const ig_geom *q, const void *src, char *row, int64_t count, size_t cs)
{
    memset(row, 0, q->row_bytes);
    if (q->g->ncomp == 1) {
        memcpy(row, src, (size_t)count * cs);
        return;
    }
    const size_t half = cs / 2;
    for (int64_t j = 0; j < count; j++) {
        memcpy(row + (size_t)j * half, (const char *)src + (size_t)j * cs, half);
        memcpy(row + ((size_t)q->g->nr + (size_t)j) * half, (const char *)src + (size_t)j * cs + half, half);
    }
}

bool xconv__igemm_any_lane(xconv_ctype ct, const void *v, size_t bytes, ig_lane_test test)
{
    const unsigned char *b = v;
    if (ct == XCONV_CT_F32 || ct == XCONV_CT_C64) {
        uint32_t any = 0; /* no early exit: the loop vectorizes */
        for (size_t i = 0; i < bytes / 4; i++) {
            uint32_t u;
            memcpy(&u, b + 4 * i, 4);
            any |= (uint32_t)((u & test.m32) == test.v32);
        }
        return any != 0;
    }
    if (ct == XCONV_CT_F64 || ct == XCONV_CT_C128) {
        uint64_t any = 0;
        for (size_t i = 0; i < bytes / 8; i++) {
            uint64_t u;
            memcpy(&u, b + 8 * i, 8);
            any |= (uint64_t)((u & test.m64) == test.v64);
        }
        return any != 0;
    }
    return false;
}

/* Sets the blob's nonfinite word when one of `bytes` bytes of packed float weights at rows
 * is Inf or NaN (zero padding past cout is finite). Runs on the rows just packed, while they
 * are in cache. */
static void note_nonfinite(const ig_task *t, const char *rows, size_t bytes)
{
    if (xconv__igemm_any_lane(t->e->p->ct, rows, bytes, IG_NONFINITE))
        atomic_store_explicit((_Atomic uint32_t *)(t->blob + t->q->nonfinite), 1u, memory_order_relaxed);
}

void xconv__igemm_pack_weights_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const ig_task *t = arg;
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    const size_t cs = xconv__ctype_size(p->ct);
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), kk = xconv__prod3(p->k_size);
    _Alignas(64) unsigned char tmp[64 * 16]; /* one row: nr <= 64 values of <= 16 bytes */
    /* item = (g, panel, k): one block of cin_g rows */
    for (int64_t item = begin; item < end; item++) {
        const int64_t k = item % kk, gp = item / kk, panel = gp % q->panels, g = gp / q->panels;
        const int64_t k0 = k / (p->k_size[1] * p->k_size[2]), k1 = k / p->k_size[2] % p->k_size[1],
                      k2 = k % p->k_size[2];
        const int64_t o0 = panel * q->g->nr;
        const int64_t cnt = p->cout_g - o0 < q->g->nr ? p->cout_g - o0 : q->g->nr;
        /* rows in (k, c) order, or for cf in (c, k): row c of tap k at c * kk + k */
        char *dst = t->blob + q->wp +
                    q->row_bytes * (size_t)(q->cf ? (gp * kk - t->item0) * p->cin_g + k
                                                  : (item - t->item0) * p->cin_g);
        const size_t drow = q->row_bytes * (size_t)(q->cf ? kk : 1);
        const int64_t wbase = p->w_off + g * p->w_sg + o0 * p->w_so + k0 * p->w_sk[0] +
                              k1 * p->w_sk[1] + k2 * p->w_sk[2];
        if (q->g->ncomp == 1 && llabs(p->w_si) < llabs(p->w_so)) {
            /* Input channels are the nearer dim in memory (channels-last weights, or [Cout,
             * Cin, K]): read along them and scatter into the rows, not a far gather per row. */
            _Alignas(64) unsigned char tile[64 * 64 * 8]; /* [j][c], real compute types */
            if (cnt < q->g->nr) /* panel edge */
                for (int64_t c = 0; c < p->cin_g; c++) memset(dst + drow * (size_t)c, 0, q->row_bytes);
            for (int64_t c0 = 0; c0 < p->cin_g; c0 += 64) {
                const int64_t cn = p->cin_g - c0 < 64 ? p->cin_g - c0 : 64;
                for (int64_t j = 0; j < cnt; j++)
                    xconv__load_row(p->ct, p->x_dtype,
                                    (const char *)t->e->w + (wbase + j * p->w_so + c0 * p->w_si) * xes,
                                    p->w_si, tile + cs * (size_t)(j * 64), cn);
                /* a 64 x 64 transpose through L1: each packed row is written whole */
                for (int64_t c = 0; c < cn; c++) {
                    char *row = dst + drow * (size_t)(c0 + c);
                    if (cs == 4)
                        for (int64_t j = 0; j < cnt; j++) memcpy(row + 4 * j, tile + 4 * (j * 64 + c), 4);
                    else
                        for (int64_t j = 0; j < cnt; j++) memcpy(row + 8 * j, tile + 8 * (j * 64 + c), 8);
                }
            }
            if (q->skip) note_nonfinite(t, dst, q->row_bytes * (size_t)p->cin_g);
            continue;
        }
        char *const first = dst;
        for (int64_t ci = 0; ci < p->cin_g; ci++, dst += drow) {
            const int64_t el = wbase + ci * p->w_si;
            xconv__load_row(p->ct, p->x_dtype, (const char *)t->e->w + el * xes, p->w_so, tmp, cnt);
            xconv__igemm_put_row(q, tmp, dst, cnt, cs);
        }
        if (q->skip) note_nonfinite(t, first, q->row_bytes * (size_t)p->cin_g); /* not cf: dense */
    }
    (void)slot;
}

/* VNNI x' of a dense row of npx pixels of 3 channels into pixels of 4 bytes, the fourth
 * 0x80 (x = 0): one 4-byte store per pixel, not a loop of three bytes (the channel loop
 * cost rn50_conv1 a third of its time). */
static void shift_rgb(unsigned char *dst, const unsigned char *src, int64_t npx)
{
    for (int64_t i = 0; i < npx; i++) {
        uint16_t lo; /* two loads straight into registers: a 3-byte copy through memory
                      * would make the 4-byte read wait on store forwarding */
        memcpy(&lo, src + 3 * i, 2);
        const uint32_t v = ((uint32_t)lo | (uint32_t)src[3 * i + 2] << 16) ^ 0x80808080u;
        memcpy(dst + 4 * i, &v, 4);
    }
}

/* Converts images [n0, n0 + nb) into the padded channels-last buffer [image, xp0, xp1, xp2,
 * channels] (q->cf: [image, channels, X0, X1, X2]); item = (image, q0, q1). Values are the compute type, or for VNNI the bytes
 * x' = x ^ 0x80 with cin_r channels; padding (and VNNI's channels past Cin) hold x = 0. */
void xconv__igemm_convert_x_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const ig_task *t = arg;
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype);
    const int64_t ch = q->vnni ? q->cin_r : p->cin;
    const int zero_byte = q->vnni ? 0x80 : 0;
    const bool pc = q->pad_copy;
    const int64_t lo0 = pc ? p->pad_lo[0] : 0, lo1 = pc ? p->pad_lo[1] : 0, lo2 = pc ? p->pad_lo[2] : 0;
    const size_t row_bytes = (size_t)(q->xp[2] * ch) * q->a_es;
    uint32_t tmp[64];
    for (int64_t item = begin; item < end; item++) {
        const int64_t b1 = item % q->xp[1], b0 = item / q->xp[1] % q->xp[0], nl = item / (q->xp[0] * q->xp[1]);
        if (q->cf) { /* x's own order, [image, c, X0, X1, X2]: a row per channel */
            const int64_t img = p->cin * xconv__prod3(q->xp), xrow = (item % (q->xp[0] * q->xp[1])) * q->xp[2];
            char *dst = (char *)t->e->workspace + q->xbuf + (size_t)(nl * img + xrow) * q->a_es;
            const int64_t base = p->x_off + (t->n0 + nl) * p->x_sn + b0 * p->x_ss[0] + b1 * p->x_ss[1];
            for (int64_t c = 0; c < p->cin; c++)
                xconv__load_row(p->ct, p->x_dtype, (const char *)t->e->x + (base + c * p->x_sc) * xes,
                                p->x_ss[2], dst + (size_t)(c * xconv__prod3(q->xp)) * q->a_es, p->x_size[2]);
            continue;
        }
        char *row = (char *)t->e->workspace + q->xbuf + row_bytes * (size_t)item;
        memset(row, zero_byte, row_bytes);
        const int64_t a0 = b0 - lo0, a1 = b1 - lo1;
        if (a0 < 0 || a0 >= p->x_size[0] || a1 < 0 || a1 >= p->x_size[1]) continue;
        const int64_t base = p->x_off + (t->n0 + nl) * p->x_sn + a0 * p->x_ss[0] + a1 * p->x_ss[1];
        if (!q->vnni && p->x_sc == 1 && p->x_ss[2] == p->cin) {
            /* a dense row of x (pixels of cin channels back to back): one conversion, not
             * one per pixel, which costs more than the copy when cin is small */
            xconv__load_row(p->ct, p->x_dtype, (const char *)t->e->x + base * xes, 1,
                            row + (size_t)(lo2 * ch) * q->a_es, p->x_size[2] * p->cin);
            continue;
        }
        for (int64_t a2 = 0; a2 < p->x_size[2]; a2++) {
            const char *src = (const char *)t->e->x + (base + a2 * p->x_ss[2]) * xes;
            char *px = row + (size_t)((lo2 + a2) * ch) * q->a_es;
            if (!q->vnni) {
                xconv__load_row(p->ct, p->x_dtype, src, p->x_sc, px, p->cin);
                continue;
            }
            if (p->x_sc == 1) { /* dense bytes: the shift alone, vectorized */
                const unsigned char *sb = (const unsigned char *)src;
                unsigned char *db = (unsigned char *)px;
                const int64_t cin = p->cin;
                if (ch == cin && p->x_ss[2] == cin) { /* the whole row at once */
                    xconv__igemm_vnni_shift(db, sb, cin * (p->x_size[2] - a2));
                    break;
                }
                if (cin == 3 && p->x_ss[2] == 3) { /* RGB pixels into groups of 4 (rn50_conv1) */
                    shift_rgb(db, sb, p->x_size[2] - a2);
                    break;
                }
                for (int64_t c = 0; c < cin; c++) db[c] = (unsigned char)(sb[c] ^ 0x80u);
                continue;
            }
            for (int64_t c0 = 0; c0 < p->cin; c0 += 64) {
                const int64_t cnt = p->cin - c0 < 64 ? p->cin - c0 : 64;
                xconv__load_row(XCONV_CT_U32, p->x_dtype, src + c0 * p->x_sc * xes, p->x_sc, tmp, cnt);
                for (int64_t c = 0; c < cnt; c++) px[c0 + c] = (char)(unsigned char)(tmp[c] ^ 0x80u);
            }
        }
    }
    (void)slot;
}

void xconv__igemm_shift_rows(unsigned char *dst, int64_t cin_r, const void *src,
                             ptrdiff_t src_step, int64_t rows, int64_t cin)
{
    /* dense rows: one span, not a call per row (i8 rn50_1x1_64: 380 -> 407 GOP/s on one
     * thread, 648 -> 784 on two) */
    if (cin_r == cin && src_step == (ptrdiff_t)cin) {
        xconv__igemm_vnni_shift(dst, src, rows * cin);
        return;
    }
    for (int64_t i = 0; i < rows; i++, dst += cin_r) {
        xconv__igemm_vnni_shift(dst, (const unsigned char *)src + i * src_step, cin);
        for (int64_t c = cin; c < cin_r; c++) dst[c] = 0x80;
    }
}

/*
 * VNNI packing. Weights become bytes grouped by four reduction indices, [panel, run,
 * len/4, nr, 4]: a run's taps back to back, cin_r values each (zeros past Cin and past the
 * panel's channels), then zeros up to len. Each item (one tap) writes only its own bytes and
 * sums its w per output channel (psum [panel, K, nr], wrapping u32) for the x' shift
 * correction.
 */
static void pack_weights_vnni_range(void *arg, int64_t begin, int64_t end, int slot)
{
    const ig_task *t = arg;
    const xconv_canon *p = t->e->p;
    const ig_geom *q = t->q;
    const int64_t xes = (int64_t)xconv_dtype_size(p->x_dtype), kk = xconv__prod3(p->k_size);
    const int64_t per_run = kk / q->runs; /* taps per run */
    const int nr = q->g->nr;
    uint32_t tmp[64];
    for (int64_t item = begin; item < end; item++) {
        const int64_t k = item % kk, panel = item / kk, m = k % per_run;
        const int64_t k0 = k / (p->k_size[1] * p->k_size[2]), k1 = k / p->k_size[2] % p->k_size[1],
                      k2 = k % p->k_size[2];
        const int64_t o0 = panel * nr;
        const int64_t cnt = p->cout_g - o0 < nr ? p->cout_g - o0 : nr;
        unsigned char *run = (unsigned char *)t->blob + q->wp +
                             q->b_row * (size_t)((panel * q->runs + k / per_run) * q->len);
        uint32_t *sum = (uint32_t *)(t->blob + q->psum) + item * nr;
        memset(sum, 0, sizeof(uint32_t) * (size_t)nr);
        const int64_t l0 = m * q->cin_r, l1 = m == per_run - 1 ? q->len : l0 + q->cin_r;
        for (int64_t l = l0; l < l1; l++) {
            const int64_t ci = l - l0;
            const int64_t live = ci < p->cin_g ? cnt : 0;
            if (live) {
                const int64_t el = p->w_off + o0 * p->w_so + ci * p->w_si + k0 * p->w_sk[0] +
                                   k1 * p->w_sk[1] + k2 * p->w_sk[2];
                xconv__load_row(XCONV_CT_U32, p->x_dtype, (const char *)t->e->w + el * xes, p->w_so, tmp, cnt);
            }
            unsigned char *grp = run + (size_t)(l / 4) * (size_t)nr * 4 + (size_t)(l % 4);
            for (int64_t j = 0; j < nr; j++) {
                grp[j * 4] = j < live ? (unsigned char)tmp[j] : 0;
                if (j < live) sum[j] += tmp[j];
            }
        }
    }
    (void)slot;
}

/* init = bias + the shift correction: -128 * sum(w) when x' = x + 128 is the unsigned
 * operand (i8), +128 * sum(w) when x' = x - 128 is the signed one (u8); all mod 2^32.
 * conv sums every tap; conv_transpose's correction is added per tile (tap_init). */
void xconv__igemm_vnni_init(const xconv_exec *e, const ig_geom *q, const char *blob)
{
    const xconv_canon *p = e->p;
    const int nr = q->g->nr;
    const int64_t kk = xconv__prod3(p->k_size);
    uint32_t *init = (uint32_t *)((char *)e->workspace + q->bp);  /* panels rows of nr */
    const uint32_t *psum = (const uint32_t *)(blob + q->psum);
    const uint32_t scale = q->x_unsigned ? (uint32_t)0 - 128u : 128u;
    memset(init, 0, sizeof(uint32_t) * (size_t)(q->panels * nr));
    for (int64_t panel = 0; panel < q->panels; panel++) {
        const int64_t o0 = panel * nr;
        const int64_t cnt = p->cout_g - o0 < nr ? p->cout_g - o0 : nr;
        uint32_t *row = init + panel * nr;
        if (p->has_bias)
            xconv__load_row(XCONV_CT_U32, p->bias_dtype,
                            (const char *)e->bias + (p->b_off + o0 * p->b_s) * (int64_t)xconv_dtype_size(p->bias_dtype),
                            p->b_s, row, cnt);
        if (p->op == XCONV_OP_CONV) /* every tap of every position (padding reads x = 0) */
            for (int64_t k = 0; k < kk; k++)
                for (int64_t j = 0; j < cnt; j++) row[j] += scale * psum[(panel * kk + k) * nr + j];
    }
}

/* Every panel of the weights into t->blob, split over the context's threads. */
void xconv__igemm_pack_all_weights(xconv_context *ctx, ig_task *t)
{
    const xconv_canon *p = t->e->p;
    if (t->q->skip) atomic_init((_Atomic uint32_t *)(t->blob + t->q->nonfinite), 0u);
    xconv__parallel_for_slot(ctx, p->groups * t->q->panels * xconv__prod3(p->k_size),
                             t->q->vnni ? pack_weights_vnni_range : xconv__igemm_pack_weights_range, t);
}
