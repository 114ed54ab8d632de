/*
 * test_amx.c — cpu.amx (AMX tiles: bf16 and f8 with f32 sums, i8 and u8 with wrapping int32
 * sums) and cpu.avx512bf16 (the same engine with AVX512-BF16 dot products for its bf16, f8
 * and f16 blocks) against cpu.ref, each forced by name where the CPU runs it:
 *
 *   - every (x, y) dtype pair it serves: bf16, e4m3 and e5m2 x with their own y and f32 y
 *     (within DESIGN.md §2's tolerance), f16 (split into exact bf16 halves) likewise, i8 and
 *     u8 x with 8-, 16- and 32-bit y (bit for bit);
 *   - named problems around its blocking: output channels around the 16-column tiles and
 *     the 32-channel panel (1, 15, 17, 31, 33, 64), virtual-row counts around the 16-row
 *     halves and 32-row blocks (tails of 1..31 rows), input channels that fill whole tile
 *     steps (read in place, 1x1 and kxk at stride 1 without padding) and ones that do not
 *     (padded with zeros in the copy), strided, dilated and padded convs in 1, 2 and 3 dims
 *     (stride planes), groups, and conv_transpose with every phase shape (taps per phase
 *     that differ, phases that no tap reaches, padding larger than the kernel); patch
 *     projections (kernel == x's extent), which dense views run as a 1x1 conv over the
 *     images (xconv__patch_view);
 *   - row mode (few channels: a kernel row's K2 * cin values form one reduction run read
 *     across x's pixels), whose zero weights past the run must not meet an Inf or NaN x;
 *   - both conventions and the dense, dense-innermost-rows and fully strided views;
 *   - 1, 2 and 3 threads, which must give the same bits; no byte outside y's elements
 *     written;
 *   - cpu.avx512bf16's runs of blocks that leave out the taps reading padding (rows of a
 *     small map, planes of a 3-D conv, lines with no tap in x, runs by plane alone where
 *     lines would make too many, strided and dilated), and its reading of padded or strided
 *     x in place through tables of each tap's rows (groups: tables per group): the runs each
 *     makes, which reads x in place, its results, and Inf or NaN weights or a bias of -0
 *     turning the leaving out off.
 * bf16 inputs in the denormal range (which AMX flushes) must still meet the tolerance: the
 * engine sends them to the f32 kernels, checked with values scaled down to 2^-120.
 * Row mode's Inf and NaN inputs are checked the same way, and a bias of f32 denormals.
 * A CPU or OS without AMX makes cpu.amx unsupported, one without AVX512-BF16 cpu.avx512bf16:
 * the test then checks that forcing it fails with a clear message and that the planner
 * never picks it.
 */
#include "common/engine_check.h"
#include "cpu/engines/amx.h"

static xconv_context *CTX[4]; /* CTX[t]: t threads */

#define CV XCONV_OP_CONV
#define CT XCONV_OP_CONV_TRANSPOSE

/* clang-format off */
static const table_case CASES[] = {
    {"conv1d 1x1, 64 channels in place, 13 positions, 33 out",
     CV, 1, 1, 64, 33, 1, {13}, {1}, {1}, {1}, {0}, {0}, {0}},
    {"conv2d 1x1, 32 channels, 2 images of 47 positions, 64 out",
     CV, 2, 2, 32, 64, 1, {5, 9}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d 3x3 unpadded in place, 64 channels, 17 out",
     CV, 2, 1, 64, 17, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d 3x3 padded, 40 channels (copied, padded to steps), 31 out",
     CV, 2, 1, 40, 31, 1, {6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 padded, 64 channels (copied as channel spans), 32 out",
     CV, 2, 1, 64, 32, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 stride 2 padded, 128 channels (spans every other pixel), 16 out",
     CV, 2, 1, 128, 16, 1, {9, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 2}, {0}},
    {"conv2d 3x3 stride 2 padded, 70 channels, 15 out",
     CV, 2, 1, 70, 15, 1, {9, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d stride 2 dilation 2 asymmetric padding, 3 channels, 1 out",
     CV, 2, 2, 3, 1, 1, {9, 8}, {3, 2}, {2, 2}, {2, 1}, {1, 0}, {2, 1}, {0}},
    {"conv2d 7x7 stride 2 pad 3 over 3 channels (row mode: kernel rows in the reduction)",
     CV, 2, 1, 3, 40, 1, {20, 18}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 2}, {0}},
    {"conv1d k4 stride 3 over 5 channels, 2 images (row mode, rows past the step)",
     CV, 1, 2, 5, 17, 1, {40}, {4}, {3}, {1}, {1}, {2}, {0}},
    {"conv1d k5 over 130 channels, 300 positions: many blocks",
     CV, 1, 1, 130, 20, 1, {300}, {5}, {1}, {1}, {2}, {2}, {0}},
    {"conv1d k3 stride 3, 1 position",
     CV, 1, 1, 16, 16, 1, {3}, {3}, {3}, {1}, {0}, {0}, {0}},
    {"conv3d mixed, 20 channels",
     CV, 3, 1, 20, 15, 1, {5, 4, 6}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}, {0}},
    {"conv2d 1x1 in place, 64 channels, 2 images of 63 positions (blocks of 32 and 31), 80 out",
     CV, 2, 2, 64, 80, 1, {7, 9}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d groups 2, 64 channels each, in place",
     CV, 2, 1, 128, 34, 2, {5, 4}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv2d groups 4 padded, 12 channels each",
     CV, 2, 1, 48, 20, 4, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv3d patch projection (kernel covers x), 3 channels, 5 images: a 1x1 conv of 96 values",
     CV, 3, 5, 3, 40, 1, {2, 4, 4}, {2, 4, 4}, {2, 4, 4}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0}},
    {"conv2d patch projection, 32 channels, 37 images (blocks past 32 of them)",
     CV, 2, 37, 32, 33, 1, {3, 3}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"conv_transpose1d stride 3: outputs no tap reaches",
     CT, 1, 2, 6, 17, 1, {7}, {2}, {3}, {1}, {0}, {0}, {2}},
    {"conv_transpose2d k4 s2 p1, 64 channels",
     CT, 2, 1, 64, 33, 1, {5, 4}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}},
    {"conv_transpose2d mixed, 40 channels",
     CT, 2, 1, 40, 31, 1, {4, 5}, {3, 2}, {2, 1}, {1, 2}, {1, 1}, {0, 1}, {1, 0}},
    {"conv_transpose1d k16 s8 p4 (encodec), 70 channels",
     CT, 1, 1, 70, 24, 1, {9}, {16}, {8}, {1}, {4}, {4}, {0}},
    {"conv_transpose1d padding past the kernel",
     CT, 1, 1, 33, 16, 1, {12}, {3}, {2}, {1}, {4}, {3}, {1}},
    {"conv_transpose3d groups 2",
     CT, 3, 1, 24, 18, 2, {3, 4, 3}, {2, 3, 2}, {2, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 0}, {1, 0, 0}},
};

/* cpu.avx512bf16's runs (amx.h: blocks that leave out the taps reading only padding), each
 * with the runs it must make */
static const table_case RUN_CASES[] = {
    {"conv2d 3x3 pad 1 over 7x7, 128 channels: lines 0 and 6 leave out a kernel row, lines 1-5 in columns 0, 1-5, 6",
     CV, 2, 1, 128, 40, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv3d 3x3x3 pad 1 over 4x5x6, 32 channels: runs by plane and line, lines 1-3 by column",
     CV, 3, 1, 32, 17, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0}},
    {"conv2d 3x3 pad 3 over 2x3, 128 channels: lines with no tap in x (y = bias)",
     CV, 2, 1, 128, 9, 1, {2, 3}, {3, 3}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, {0}},
    {"conv3d 5x3x3 pad 2:1:1 over 22x5x4, 32 channels: too many runs by line, runs by plane, each by column",
     CV, 3, 1, 32, 5, 1, {22, 5, 4}, {5, 3, 3}, {1, 1, 1}, {1, 1, 1}, {2, 1, 1}, {2, 1, 1}, {0}},
    {"conv2d 3x3 stride 2 dilation 2 pad 2 over 9x10, 40 channels (copied, padded to steps), lines 1-3 by column",
     CV, 2, 1, 40, 20, 1, {9, 10}, {3, 3}, {2, 2}, {2, 2}, {2, 2}, {2, 2}, {0}},
    {"conv2d 3x3 pad 1 over 60x60, 32 channels: runs would save under 3% (by columns 1.1%), blocks of 32 outputs",
     CV, 2, 1, 32, 8, 1, {60, 60}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 3x3 stride 2 pad 1 over 9x8, groups 2 of 128 channels: tables per group, lines 1-3 by column",
     CV, 2, 1, 256, 34, 2, {9, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv1d k3 stride 2 pad 1 over 75, 128 channels (whisper_c2's shape): tables, no runs",
     CV, 1, 1, 128, 20, 1, {75}, {3}, {2}, {1}, {1}, {1}, {0}},
    {"conv2d 3x3 pad 1 over 9x9, 128 channels: lines 1-7 by column, the middle's second block from mid-line",
     CV, 2, 1, 128, 36, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    {"conv2d 1x161 pad 80 over 2x80, 128 channels: 80 column ranges, more than runs hold (whole lines)",
     CV, 2, 1, 128, 8, 1, {2, 80}, {1, 161}, {1, 1}, {1, 1}, {0, 80}, {0, 80}, {0}},
};
/* the runs each case makes, and whether it reads x through tables of rows (x read in place
 * for at least 4 steps of channels, 128) or copies it */
static const int RUNS_WANTED[] = {5, 20, 6, 15, 5, 0, 4, 0, 5, 0};
static const bool GATHER_WANTED[] = {true, false, true, false, false, false, true, true, true, true};
/* clang-format on */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))
#define NRUN_CASES ((int)(sizeof RUN_CASES / sizeof RUN_CASES[0]))

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},     {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F8E4M3}, {XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16},       {XCONV_DTYPE_F16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_I8, XCONV_DTYPE_I8},         {XCONV_DTYPE_I8, XCONV_DTYPE_I32},
    {XCONV_DTYPE_U8, XCONV_DTYPE_U16},        {XCONV_DTYPE_U8, XCONV_DTYPE_I32},
};
#define NPAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))
#define NFLOAT_PAIRS 6 /* PAIRS' float ones, first: what cpu.avx512bf16 serves */

static dense_problem dense_of(int ci, xconv_layout L, xconv_dtype xdt, xconv_dtype ydt, bool bias)
{
    return dense_of_case(&CASES[ci], L, xdt, ydt, bias);
}

/* The engine (2 threads) against cpu.ref on d's values: within the tolerance, Inf and NaN
 * where cpu.ref has them. */
static void check_against_ref(const char *engine, dense_problem *d, const char *label)
{
    xconv_error err;
    const char *used = NULL;
    xconv_status st = tu_conv(CTX[2], &d->p, &d->x, &d->w, &d->b, &d->yr, "cpu.ref", &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [cpu.ref]: %s", label, err.description);
    st = tu_conv(CTX[2], &d->p, &d->x, &d->w, &d->b, &d->y, engine, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK, "%s [%s]: %s", label, engine, err.description);
    tu_val *exact = malloc(sizeof(tu_val) * (size_t)tu_ycount(&d->p));
    double *mag = malloc(sizeof(double) * (size_t)tu_ycount(&d->p));
    tu_ref_conv(&d->p, &d->x, &d->w, &d->b, exact, mag);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < tu_ycount(&d->p); i++) nonzero += exact[i].re != 0.0;
    XT_CHECK(nonzero > 0, "%s: the sums should not all be zero", label);
    const int64_t bad = compare_outputs(&d->p, &d->y, &d->yr, mag, label);
    XT_CHECK(bad == 0, "%s: %" PRId64 " elements differ from cpu.ref", label, bad);
    free(exact), free(mag);
}

/* An engine this CPU cannot run: forcing it is an error that names what is missing
 * (`missing`), and no plan picks it. */
static void check_absent(const char *engine, const char *missing)
{
    dense_problem d = dense_of(2, XCONV_LAYOUT_CHANNELS_LAST, XCONV_DTYPE_BF16, XCONV_DTYPE_BF16, false);
    tu_rng r = {7};
    fill_all(&d.x, &r), fill_all(&d.w, &r);
    xconv_error err;
    const char *used = NULL;
    xconv_status st = tu_conv(CTX[1], &d.p, &d.x, &d.w, &d.b, &d.y, engine, &used, &err);
    XT_CHECK(st != XCONV_STATUS_OK && strstr(err.description, missing) && strstr(err.description, engine),
             "forcing %s without %s: status %d, \"%s\"", engine, missing, (int)st, err.description);
    st = tu_conv(CTX[1], &d.p, &d.x, &d.w, &d.b, &d.y, NULL, &used, &err);
    XT_CHECK(st == XCONV_STATUS_OK && used && strcmp(used, engine) != 0,
             "the planner picked %s without %s", used ? used : "(none)", missing);
    dense_free(&d);
}

/* Every nonzero finite bf16 value of t's buffer moved to a binade in [2^-70, 2^-63): the
 * products of two such values lie below 2^-126, where AMX would flush them to zero. */
static void shrink_bf16(xconv_tensor *t)
{
    uint16_t *v = t->data;
    const size_t count = view_bytes(t) / 2;
    for (size_t i = 0; i < count; i++) {
        const unsigned e = (v[i] >> 7) & 0xff;
        if ((v[i] & 0x7fff) == 0 || e == 0xff) continue;
        v[i] = (uint16_t)((v[i] & 0x807f) | (unsigned)(57 + e % 8) << 7);
    }
}

/* bf16 problems whose products are f32 denormals: the engine must still match cpu.ref
 * within the tolerance (it hands them to the f32 kernels), with x read in place, through
 * cpu.avx512bf16's tables of rows (case 5) and copied. */
static void check_tiny(const char *engine)
{
    static const int cases[] = {1, 2, 3, 5};
    for (int i = 0; i < 4; i++) {
        const int ci = cases[i];
        dense_problem d = dense_of(ci, XCONV_LAYOUT_CHANNELS_LAST, XCONV_DTYPE_BF16, XCONV_DTYPE_F32, false);
        tu_rng r = {0x7a11 + (uint64_t)ci};
        fill_all(&d.x, &r), fill_all(&d.w, &r);
        shrink_bf16(&d.x), shrink_bf16(&d.w);
        char label[200];
        snprintf(label, sizeof label, "tiny products, %s", CASES[ci].name);
        check_against_ref(engine, &d, label);
        dense_free(&d);
    }
}

/* A bias of f32 denormals (which AMX would flush from the tiles' initial value) over zero x:
 * y must be the bias itself, for bf16, f16 and e4m3 x (the engine takes the f32 path). */
static void check_tiny_bias(const char *engine)
{
    const xconv_dtype dts[3] = {XCONV_DTYPE_BF16, XCONV_DTYPE_F16, XCONV_DTYPE_F8E4M3};
    for (int k = 0; k < 3; k++) {
        dense_problem d = dense_of(2, XCONV_LAYOUT_CHANNELS_LAST, dts[k], XCONV_DTYPE_F32, true);
        tu_rng r = {0xb1a5 + (uint64_t)k};
        fill_all(&d.w, &r);
        memset(d.x.data, 0, view_bytes(&d.x));
        for (int64_t c = 0; c < d.p.cout; c++) {
            const uint32_t bits = 0x00000100u * (uint32_t)(c + 1) | (c % 2 ? 0x80000000u : 0u);
            memcpy((char *)d.b.data + 4 * c, &bits, 4);
        }
        xconv_error err;
        const char *used = NULL;
        xconv_status st = tu_conv(CTX[1], &d.p, &d.x, &d.w, &d.b, &d.y, engine, &used, &err);
        XT_CHECK(st == XCONV_STATUS_OK, "denormal bias [%s]: %s", engine, err.description);
        int64_t bad = 0, idx[XCONV_MAX_RANK] = {0}, j[3];
        for (int64_t c = 0; c < d.p.cout; c++)
            for (j[0] = 0; j[0] < d.p.y[0]; j[0]++)
                for (j[1] = 0; j[1] < d.p.y[1]; j[1]++)
                    for (j[2] = 0; j[2] < d.p.y[2]; j[2]++) {
                        tu_act_index(d.p.layout, d.p.d, 0, c, j, idx);
                        bad += memcmp((char *)d.y.data + 4 * tu_offset(&d.y, idx), (char *)d.b.data + 4 * c, 4) != 0;
                    }
        XT_CHECK(bad == 0, "denormal bias over zero x, %s [%s]: %" PRId64 " outputs are not the bias",
                 tu_info(dts[k])->name, engine, bad);
        dense_free(&d);
    }
}

/* Row mode with an Inf and a NaN in x (and once in w): the outputs they reach are Inf or
 * NaN as in cpu.ref, and no other output may turn NaN through the zero weights past a
 * kernel row's run, nor have no exact bf16 halves (split f16): the engine hands such x to
 * the f32 kernels. Both layouts, bf16, e5m2 and f16. */
static void check_nonfinite(const char *engine)
{
    const xconv_dtype dts[3] = {XCONV_DTYPE_BF16, XCONV_DTYPE_F8E5M2, XCONV_DTYPE_F16};
    for (int k = 0; k < 6; k++) {
        const xconv_layout L = k & 1 ? XCONV_LAYOUT_CHANNELS_LAST : XCONV_LAYOUT_CHANNELS_FIRST;
        dense_problem d = dense_of(8, L, dts[k >> 1], XCONV_DTYPE_F32, true);
        tu_rng r = {0xf1a7 + (uint64_t)k};
        fill_all(&d.x, &r), fill_all(&d.w, &r), fill_all(&d.b, &r);
        const int64_t nx = tu_numel(d.x.rank, d.x.shape);
        tu_store(d.p.xdt, d.x.data, nx / 3, (tu_val){0, INFINITY, 0.0});
        tu_store(d.p.xdt, d.x.data, 2 * nx / 3, (tu_val){0, NAN, 0.0});
        if (k % 2 == 1) tu_store(d.p.xdt, d.w.data, 5, (tu_val){0, -INFINITY, 0.0});
        char label[200];
        snprintf(label, sizeof label, "Inf and NaN in x%s, %s, %s", k % 2 ? " and w" : "",
                 tu_info(d.p.xdt)->name, k & 1 ? "channels_last" : "channels_first");
        check_against_ref(engine, &d, label);
        dense_free(&d);
    }
}

/* xconv__amx_bf16_scan against the definition, value by value: the smallest exponent field
 * among nonzero values (255 when all are zero) and the largest among all, over lengths
 * around its 32- and 64-value steps and values drawn to hit zeros of both signs, denormals,
 * Inf and NaN, and each one alone at every place of a short span. */
static void check_scan(void)
{
    tu_rng r = {0x5ca7};
    uint16_t v[300];
    for (int n = 0; n <= 300; n += n < 140 ? 1 : 17) {
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < n; i++) {
                const uint64_t u = tu_next(&r);
                const uint16_t sign = (uint16_t)(u & 0x8000);
                switch (u >> 60) {
                case 0: case 1: case 2: v[i] = sign; break;                            /* +-0 */
                case 3: v[i] = (uint16_t)(sign | (1 + (u >> 8) % 127)); break;         /* denormal */
                case 4: v[i] = (uint16_t)(sign | (rep == 3 ? 0x7f80 : 0x7fc1)); break; /* Inf, NaN */
                default: v[i] = (uint16_t)(sign | (1 + (u >> 8) % 0x7f7f)); break;     /* finite */
                }
            }
            if (rep == 0 && n <= 70) /* only zeros, then one value among them */
                for (int i = 0; i < n; i++) v[i] = (uint16_t)(i & 1 ? 0x8000 : 0);
            int want_min = 255, want_max = 0;
            for (int i = 0; i < n; i++) {
                const int e = (v[i] >> 7) & 0xff;
                if ((v[i] & 0x7fff) && e < want_min) want_min = e;
                if (e > want_max) want_max = e;
            }
            int emin = 255, emax = 0;
            xconv__amx_bf16_scan(v, n, &emin, &emax);
            XT_CHECK(emin == want_min && emax == want_max,
                     "bf16 scan of %d values (draw %d): emin %d emax %d, expected %d and %d", n, rep,
                     emin, emax, want_min, want_max);
        }
        for (int at = 0; at < n && n <= 70; at++) { /* one denormal, one 1.0 alone among zeros */
            for (int i = 0; i < n; i++) v[i] = 0;
            for (int k = 0; k < 2; k++) {
                v[at] = k ? 0x3f80 : 0x0001;
                int emin = 255, emax = 0;
                xconv__amx_bf16_scan(v, n, &emin, &emax);
                const int want = k ? 127 : 0;
                XT_CHECK(emin == want && emax == want, "bf16 scan, %s alone at %d of %d: emin %d emax %d",
                         k ? "1.0" : "a denormal", at, n, emin, emax);
            }
        }
    }
}

/* cpu.avx512bf16's runs for a case in bf16 channels-last, from its canonical problem, and
 * whether it reads x through tables of rows. */
static int vec_runs_of(const table_case *c, bool *gather)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    CASE_GEOMETRY(&p, c);
    p.layout = XCONV_LAYOUT_CHANNELS_LAST, p.xdt = p.ydt = XCONV_DTYPE_BF16;
    tu_problem_finish(&p);
    int64_t xs[XCONV_MAX_RANK], ws[XCONV_MAX_RANK], bs[1], ys[XCONV_MAX_RANK];
    tu_shapes(&p, xs, ws, bs, ys);
    xconv_tensor x = tu_alloc(p.xdt, c->d + 2, xs, 0), w = tu_alloc(p.xdt, c->d + 2, ws, 0);
    xconv_tensor y = tu_alloc(p.ydt, c->d + 2, ys, 0);
    const xconv_params q = tu_params(&p);
    xconv_canon canon;
    xconv__normalize(&q, &x, &w, NULL, &y, &canon);
    canon.threads = 2;
    const int runs = xconv__amx_vec_runs(&canon, gather);
    free(x.data), free(w.data), free(y.data);
    return runs;
}

/* cpu.avx512bf16's runs: the blocks each case must make, its table against cpu.ref, and the
 * padding terms its blocks leave out: Inf and NaN weights and a bias of -0 must turn that
 * off (engine_check.h's check_padding_terms, bf16). */
static void check_runs(void)
{
    for (int ci = 0; ci < NRUN_CASES; ci++) {
        bool gather;
        const int runs = vec_runs_of(&RUN_CASES[ci], &gather);
        XT_CHECK(runs == RUNS_WANTED[ci], "%s: cpu.avx512bf16 made %d runs, expected %d",
                 RUN_CASES[ci].name, runs, RUNS_WANTED[ci]);
        XT_CHECK(gather == GATHER_WANTED[ci], "%s: cpu.avx512bf16 %s x through tables of rows",
                 RUN_CASES[ci].name, gather ? "reads" : "does not read");
    }
    /* the runs and tables do not depend on the dtype: bf16 with both y, and split f16 */
    static const xconv_dtype run_pairs[][2] = {{XCONV_DTYPE_BF16, XCONV_DTYPE_BF16},
                                               {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
                                               {XCONV_DTYPE_F16, XCONV_DTYPE_F16}};
    tu_rng r = {0x5eed7a11c0ffee01ull};
    check_engine_table(CTX, "cpu.avx512bf16", RUN_CASES, NRUN_CASES, run_pairs, 3, table_view,
                       TV_NAMES, TV_COUNT, 0, false, &r);
    for (int ci = 0; ci < NRUN_CASES; ci++)
        for (int kind = 0; kind < 3; kind++)
            check_padding_terms(CTX, "cpu.avx512bf16", &RUN_CASES[ci], XCONV_DTYPE_BF16, kind, &r);
}

/* cpu.avx512bf16's straight-line kernel for whole blocks (32 positions x 32 channels of a 1x1
 * conv into bf16 y, xconv__amx_vec_lean): 2 images of 96 positions and 96 outputs are whole
 * blocks and panels only, with and without a bias. */
static void check_whole_blocks(const char *engine)
{
    static const table_case c = {"conv2d 1x1 in place, 64 channels, 2 images of 8x12, 96 out (whole blocks)",
                                 CV, 2, 2, 64, 96, 1, {8, 12}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}};
    for (int bias = 0; bias < 2; bias++) {
        dense_problem d = dense_of_case(&c, XCONV_LAYOUT_CHANNELS_LAST, XCONV_DTYPE_BF16, XCONV_DTYPE_BF16, bias);
        tu_rng r = {0x1ea0b10c + (uint64_t)bias};
        fill_all(&d.x, &r), fill_all(&d.w, &r), fill_all(&d.b, &r);
        char label[200];
        snprintf(label, sizeof label, "%s%s", c.name, bias ? ", bias" : "");
        check_against_ref(engine, &d, label);
        dense_free(&d);
    }
}

/* Every check of an engine the CPU runs, over the dtype pairs it serves. */
static void check_engine(const char *engine, int npairs)
{
    tu_rng r = {0x5eed0a3b1c2d4e5full};
    check_engine_table(CTX, engine, CASES, NCASES, PAIRS, npairs, table_view, TV_NAMES, TV_COUNT, 0, false, &r);
    check_tiny(engine);
    check_tiny_bias(engine);
    check_nonfinite(engine);
}

int main(void)
{
    if (xconv__amx_vec_available()) check_scan(); /* AVX-512 code, called only there */
    for (int t = 1; t <= 3; t++) {
        xconv_context_options o = {.threads = t};
        xconv_context_create(&o, &CTX[t], NULL);
    }
    if (!xconv__amx_available()) {
        printf("test_amx: no AMX here (CPU or OS): checking that cpu.amx stays unused\n");
        check_absent("cpu.amx", "AMX");
    } else {
        check_engine("cpu.amx", NPAIRS);
    }
    if (!xconv__amx_vec_available()) {
        printf("test_amx: no AVX512-BF16 here: checking that cpu.avx512bf16 stays unused\n");
        check_absent("cpu.avx512bf16", "AVX512-BF16");
    } else {
        check_engine("cpu.avx512bf16", NFLOAT_PAIRS);
        check_whole_blocks("cpu.avx512bf16");
        check_runs();
    }
    for (int t = 1; t <= 3; t++) xconv_context_destroy(CTX[t]);
    return xt_finish("test_amx");
}
