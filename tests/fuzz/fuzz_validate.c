/*
 * fuzz_validate.c — libFuzzer target for the validation boundary: the fuzz input is decoded
 * into xconv_params, tensor descriptors for x, w, bias and y (and im2col's cols), an engine
 * name and a workspace, then xconv_output_shape, xconv_plan_create, xconv_engine_supports,
 * xconv_plan_execute, xconv_im2col and xconv_col2im run on them. Build with clang and
 * -DXCONV_FUZZ=ON (ASan and UBSan via -DXCONV_SANITIZE=ON) and -DXCONV_CUDA=OFF.
 *
 * Every descriptor sits on a real heap buffer, and a declared buffer_bytes is never larger
 * than the allocation (0, "exactly what a contiguous view needs", only when the allocation
 * holds that much). So whatever validation accepts is safe to execute, and an ASan report
 * means validation accepted a view that reaches outside its buffer. Execution is skipped
 * when a pessimistic work estimate exceeds a few million operations, to keep runs fast.
 *
 * The harness also checks what the API promises: a failed call fills err with a non-OK
 * status, a non-empty operation and a description, and leaves y's buffer untouched.
 */
#include "../common/tensor_util.h"

#include <stdlib.h>
#include <string.h>

#define CAP_BYTES (1u << 16)   /* the largest buffer behind one tensor */
#define WORK_LIMIT 4.0e6       /* skip execution above this many (over-estimated) operations */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---------------------------------------------------------------------------------------- */
/* Decoding                                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t         n;
} reader;

static uint8_t rd_u8(reader *r)
{
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static int64_t rd_raw64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | rd_u8(r);
    return tu_as_signed(v);
}

/* Mostly a small value in [lo, hi]; sometimes one of the values that break arithmetic. */
static int64_t rd_small(reader *r, int64_t lo, int64_t hi)
{
    static const int64_t special[] = {0, -1, 1, INT64_MAX, INT64_MIN, INT64_MAX / 2,
                                      (int64_t)1 << 31, ((int64_t)1 << 32) + 1, (int64_t)1 << 62,
                                      -((int64_t)1 << 40), INT64_MAX - 1, 3037000500};
    uint8_t b = rd_u8(r);
    if (b < 232) return lo + (int64_t)(b % (uint64_t)(hi - lo + 1));
    if (b < 254) return special[(b - 232) % (sizeof special / sizeof special[0])];
    return rd_raw64(r);
}

/* One tensor: a descriptor and the allocation behind it. */
typedef struct ftensor {
    xconv_tensor t;
    void        *alloc;
    size_t       alloc_bytes;
} ftensor;

/* Element count of a shape, or -1 when negative or beyond 2^62. */
static int64_t count_of(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n) || n > ((int64_t)1 << 62)) return -1;
    }
    return n;
}

/* Builds a descriptor of `shape` (possibly mutated) over a fresh allocation. */
static void make_tensor(reader *r, ftensor *f, xconv_dtype dt, int rank, const int64_t *shape,
                        bool is_output)
{
    memset(f, 0, sizeof *f);
    xconv_tensor *t = &f->t;
    t->dtype = rd_u8(r) < 248 ? dt : (xconv_dtype)(rd_u8(r) % 20 - 2);
    t->rank = rd_u8(r) < 250 ? rank : (int)rd_small(r, -1, 7);
    for (int i = 0; i < XCONV_MAX_RANK; i++)
        t->shape[i] = i < rank && rd_u8(r) < 240 ? shape[i] : rd_small(r, 0, 6);
    int    vr = t->rank >= 0 && t->rank <= XCONV_MAX_RANK ? t->rank : XCONV_MAX_RANK;
    size_t es = tu_info(t->dtype)->size ? tu_info(t->dtype)->size : 1;
    int    mode = rd_u8(r) % 5;
    size_t need = 0;  /* bytes the view needs, when known and within the cap */
    if (mode == 0) {
        int64_t n = count_of(vr, t->shape);
        if (n >= 0 && (uint64_t)n * es <= CAP_BYTES) need = (size_t)n * es;
        f->alloc_bytes = need ? need : (size_t)rd_small(r, 1, 64);
    } else {
        /* Strides: row-major, then permuted order, signs, gaps, zeros or raw values. */
        t->strided = true;
        int64_t step = 1;
        for (int i = vr - 1; i >= 0; i--) {
            int64_t s = t->shape[i] > 0 ? t->shape[i] : 1;
            t->strides[i] = step;
            if (mode >= 2 && rd_u8(r) < 64) t->strides[i] = -step;
            if (mode >= 3 && rd_u8(r) < 48) t->strides[i] = rd_small(r, -2, 2);
            if (mode == 4 && rd_u8(r) < 32) t->strides[i] = rd_small(r, -100, 100);
            int64_t ext;
            if (__builtin_add_overflow(s, (int64_t)(mode >= 2 ? rd_u8(r) % 3 : 0), &ext) ||
                __builtin_mul_overflow(step, ext, &step))
                step = 1;
        }
        /* The element hull, in 128 bits and clamped far beyond any buffer, so that nothing
         * here overflows. */
        const __int128 far = (__int128)1 << 100;
        __int128       lo = 0, hi = 0;
        bool           empty = false;
        for (int i = 0; i < vr; i++) {
            if (t->shape[i] <= 0) empty = true;
            __int128 reach = (__int128)(t->shape[i] > 0 ? t->shape[i] - 1 : 0) * t->strides[i];
            if (reach < 0) lo = lo + reach < -far ? -far : lo + reach;
            else hi = hi + reach > far ? far : hi + reach;
        }
        __int128 off = rd_u8(r) < 240 ? -lo + rd_small(r, 0, 3) : (__int128)rd_small(r, -4, 4);
        t->offset = off > INT64_MAX ? INT64_MAX : off < INT64_MIN ? INT64_MIN : (int64_t)off;
        __int128 end = ((__int128)t->offset + hi + 1) * (__int128)es;
        if (!empty && (__int128)t->offset + lo >= 0 && end <= CAP_BYTES) need = (size_t)end;
        f->alloc_bytes = need ? need : (size_t)rd_small(r, 1, 256);
    }
    if (f->alloc_bytes > CAP_BYTES) f->alloc_bytes = CAP_BYTES;
    if (f->alloc_bytes == 0) f->alloc_bytes = 1; /* (rd_small's specials include 0): a buffer_bytes
                                                  * of 0 would then claim "exact" falsely */
    f->alloc = malloc(f->alloc_bytes);
    memset(f->alloc, is_output ? 0xA5 : 0x3C, f->alloc_bytes);
    for (size_t i = 0; i < f->alloc_bytes && i < 64; i++) ((uint8_t *)f->alloc)[i] ^= rd_u8(r);
    if (is_output) memset(f->alloc, 0xA5, f->alloc_bytes);
    t->data = rd_u8(r) < 250 ? f->alloc : NULL;
    /* Declared size: the allocation, a little less, or 0 = "exact" where that is safe. */
    uint8_t b = rd_u8(r);
    t->buffer_bytes = f->alloc_bytes;
    if (b < 24) t->buffer_bytes = f->alloc_bytes - (size_t)(b % 4 < f->alloc_bytes ? b % 4 : 0);
    else if (b < 64 && !t->strided && need == f->alloc_bytes) t->buffer_bytes = 0;
    t->device = XCONV_DEVICE_CPU;
#ifndef XCONV_HAVE_CUDA
    if (rd_u8(r) >= 252) t->device = (xconv_device)(rd_u8(r) % 3);
#endif
    if (rd_u8(r) >= 252) t->device_index = (int)rd_small(r, -1, 2);
}

static void free_tensor(ftensor *f) { free(f->alloc); }

/* Pessimistic work estimate from logical sizes (doubles: no overflow). */
static double numel_d(const xconv_tensor *t)
{
    double n = 1.0;
    for (int i = 0; i < t->rank && i < XCONV_MAX_RANK; i++) n *= (double)t->shape[i];
    return n;
}

/* XCONV_FUZZ_VERBOSE=1 prints every call's arguments: how a crash becomes a bug report. */
static bool verbose(void)
{
    static int v = -1;
    if (v < 0) v = getenv("XCONV_FUZZ_VERBOSE") != NULL;
    return v;
}

static void dump_tensor(const char *name, const xconv_tensor *t)
{
    if (!verbose() || !t) return;
    fprintf(stderr, "  %s: dtype %d rank %d shape", name, (int)t->dtype, t->rank);
    for (int i = 0; i < XCONV_MAX_RANK; i++) fprintf(stderr, " %" PRId64, t->shape[i]);
    fprintf(stderr, " strided %d strides", (int)t->strided);
    for (int i = 0; i < XCONV_MAX_RANK; i++) fprintf(stderr, " %" PRId64, t->strides[i]);
    fprintf(stderr, " offset %" PRId64 " data %s buffer_bytes %zu device %d:%d\n", t->offset,
            t->data ? "set" : "NULL", t->buffer_bytes, (int)t->device, t->device_index);
}

static void dump_params(const char *call, const xconv_params *p, const int64_t *kernel)
{
    if (!verbose()) return;
    fprintf(stderr, "%s: op %d rank %d layout %d groups %" PRId64 "\n", call, (int)p->op,
            p->spatial_rank, (int)p->layout, p->groups);
    for (int i = 0; i < XCONV_MAX_SPATIAL; i++)
        fprintf(stderr, "  dim %d: stride %" PRId64 " dilation %" PRId64 " pad %" PRId64 ":%" PRId64
                " output_padding %" PRId64 " kernel %" PRId64 "\n", i, p->stride[i],
                p->dilation[i], p->pad_lo[i], p->pad_hi[i], p->output_padding[i],
                kernel ? kernel[i] : 0);
}

/* XCONV_FUZZ_SKIP=im2col (or col2im, execute) leaves that call out, so that fuzzing can go
 * on past a known bug without hiding it from default runs. */
static bool skipped(const char *call)
{
    const char *v = getenv("XCONV_FUZZ_SKIP");
    return v && strstr(v, call) != NULL;
}

/* A failed call must say so completely. */
static void check_failure(xconv_status st, const xconv_error *err)
{
    if (st == XCONV_STATUS_OK) return;
    if (err->status != st || err->operation[0] == '\0' || err->description[0] == '\0') abort();
}

static const xconv_dtype XDT[] = {XCONV_DTYPE_U8,  XCONV_DTYPE_I8,     XCONV_DTYPE_I16,
                                  XCONV_DTYPE_I32, XCONV_DTYPE_U64,    XCONV_DTYPE_F8E4M3,
                                  XCONV_DTYPE_F16, XCONV_DTYPE_BF16,   XCONV_DTYPE_F32,
                                  XCONV_DTYPE_F64, XCONV_DTYPE_C64,    XCONV_DTYPE_C128};

/* y's dtype: mostly x's or a widening of it, sometimes anything. */
static xconv_dtype pick_ydt(reader *r, xconv_dtype xdt)
{
    uint8_t b = rd_u8(r);
    if (b < 160) return xdt;
    if (b < 240) {
        xconv_dtype cands[XCONV_DTYPE_COUNT];
        int         n = 0;
        for (int d = 1; d < XCONV_DTYPE_COUNT; d++)
            if (xconv_dtype_can_widen(xdt, (xconv_dtype)d)) cands[n++] = (xconv_dtype)d;
        return n ? cands[b % n] : xdt;
    }
    return (xconv_dtype)(b % XCONV_DTYPE_COUNT);
}

/* ---------------------------------------------------------------------------------------- */
/* The target                                                                               */
/* ---------------------------------------------------------------------------------------- */

static void fuzz_conv(reader *r, xconv_context *ctx)
{
    tu_problem q;
    memset(&q, 0, sizeof q);
    q.op = (xconv_op)(rd_u8(r) & 1);
    q.d = 1 + rd_u8(r) % 3;
    q.layout = (xconv_layout)(rd_u8(r) & 1);
    q.n = rd_small(r, 0, 3);
    q.groups = rd_small(r, 1, 3);
    /* Wrapping products: groups may be one of the extreme values. */
    q.cin = tu_as_signed((uint64_t)q.groups * (uint64_t)rd_small(r, 1, 3));
    q.cout = tu_as_signed((uint64_t)q.groups * (uint64_t)rd_small(r, 1, 3));
    for (int i = 0; i < q.d; i++) {
        q.x[i] = rd_small(r, 1, 8);
        q.k[i] = rd_small(r, 1, 4);
        q.stride[i] = rd_small(r, 1, 3);
        q.dil[i] = rd_small(r, 1, 3);
        q.lo[i] = rd_small(r, 0, 2);
        q.hi[i] = rd_small(r, 0, 2);
        q.opad[i] = q.op == XCONV_OP_CONV_TRANSPOSE ? rd_small(r, 0, 2) : 0;
    }
    q.has_bias = rd_u8(r) & 1;
    q.xdt = XDT[rd_u8(r) % (sizeof XDT / sizeof XDT[0])];
    q.ydt = pick_ydt(r, q.xdt);
    int64_t xs[5] = {0}, ws[5] = {0}, bs[1] = {0}, ys[5] = {0};
    bool    sane = q.n >= 0 && q.n < 64 && q.cin > 0 && q.cin < 64 && q.cout > 0 && q.cout < 64 &&
               q.groups > 0;
    for (int i = 0; i < q.d; i++)
        sane = sane && q.x[i] >= 1 && q.x[i] <= 64 && q.k[i] >= 1 && q.k[i] <= 64 &&
               q.stride[i] >= 1 && q.stride[i] <= 64 && q.dil[i] >= 1 && q.dil[i] <= 64 &&
               q.lo[i] >= 0 && q.lo[i] <= 64 && q.hi[i] >= 0 && q.hi[i] <= 64 &&
               q.opad[i] >= 0 && q.opad[i] <= 64;
    if (sane) {
        tu_problem_finish(&q);
        tu_shapes(&q, xs, ws, bs, ys);
    }
    xconv_params p = tu_params(&q);
    if (!sane) {
        for (int i = 0; i < q.d; i++) {
            p.stride[i] = q.stride[i];
            p.dilation[i] = q.dil[i];
            p.pad_lo[i] = q.lo[i];
            p.pad_hi[i] = q.hi[i];
            p.output_padding[i] = q.opad[i];
        }
        for (int i = 0; i < 5; i++) xs[i] = ws[i] = ys[i] = rd_small(r, 0, 6);
        bs[0] = rd_small(r, 0, 6);
    }
    /* Occasionally out-of-range enums and ranks. */
    if (rd_u8(r) >= 250) p.op = (xconv_op)(rd_u8(r) % 5 - 1);
    if (rd_u8(r) >= 250) p.spatial_rank = (int)(rd_u8(r) % 6) - 1;
    if (rd_u8(r) >= 250) p.layout = (xconv_layout)(rd_u8(r) % 4 - 1);
    int rank = q.d + 2;

    ftensor x, w, b, y;
    make_tensor(r, &x, q.xdt, rank, xs, false);
    make_tensor(r, &w, q.xdt, rank, ws, false);
    make_tensor(r, &b, rd_u8(r) < 200 ? q.ydt : q.xdt, 1, bs, false);
    make_tensor(r, &y, q.ydt, rank, ys, true);
    /* y aliasing an input: still inside that input's allocation. */
    uint8_t alias = rd_u8(r);
    if (alias >= 248) {
        ftensor *victim = alias & 1 ? &x : &w;
        y.t.data = (uint8_t *)victim->alloc + (alias & 2 ? 0 : victim->alloc_bytes / 2);
        size_t room = victim->alloc_bytes - (size_t)((uint8_t *)y.t.data - (uint8_t *)victim->alloc);
        y.t.buffer_bytes = y.t.buffer_bytes && y.t.buffer_bytes <= room ? y.t.buffer_bytes : room;
        if (!y.t.strided && count_of(y.t.rank > 0 && y.t.rank <= 5 ? y.t.rank : 5, y.t.shape) < 0)
            y.t.buffer_bytes = room;
        if (y.t.buffer_bytes == 0) y.t.buffer_bytes = room;
    }

    xconv_error  err;
    int64_t      oshape[XCONV_MAX_RANK];
    xconv_status st = xconv_output_shape(&p, x.t.shape, w.t.shape, oshape, &err);
    check_failure(st, &err);

    char               name[24];
    xconv_plan_options opt = {0};
    uint8_t            e = rd_u8(r);
    if (e < 64 && xconv_engine_count() > 0) {
        opt.engine = xconv_engine_name(e % xconv_engine_count());
    } else if (e < 72) {
        for (size_t i = 0; i + 1 < sizeof name; i++) name[i] = (char)(rd_u8(r) | 1);
        name[sizeof name - 1] = '\0';
        opt.engine = name;
    }
    opt.allow_tf32 = rd_u8(r) & 1;
    const xconv_tensor *pb = q.has_bias ? &b.t : NULL;

    st = xconv_engine_supports(opt.engine, &p, &x.t, &w.t, pb, &y.t, &err);
    check_failure(st, &err);

    dump_params("conv", &p, NULL);
    dump_tensor("x", &x.t);
    dump_tensor("w", &w.t);
    dump_tensor("bias", pb);
    dump_tensor("y", &y.t);
    xconv_plan *plan = NULL;
    st = xconv_plan_create(rd_u8(r) & 1 ? ctx : NULL, &p, &x.t, &w.t, pb, &y.t, &opt, &plan, &err);
    check_failure(st, &err);
    if (st != XCONV_STATUS_OK) {
        if (plan) abort();
        if (y.t.data == y.alloc && !tu_all_bytes(y.alloc, y.alloc_bytes, 0xA5)) abort();
    } else {
        (void)xconv_plan_describe(plan);
        (void)xconv_plan_engine(plan);
        double work = (numel_d(&x.t) + numel_d(&y.t)) * numel_d(&w.t);
        if (work <= WORK_LIMIT && !skipped("execute")) {
            size_t ws_need = xconv_plan_workspace_size(plan);
            uint8_t wmode = rd_u8(r);
            void *wsp = NULL;
            size_t ws_bytes = 0;
            if (wmode & 1 && ws_need) {
                ws_bytes = ws_need - (wmode & 2 ? 1 : 0);
                wsp = malloc(ws_bytes ? ws_bytes : 1);
            }
            st = xconv_plan_execute(plan, x.t.data, w.t.data, pb ? b.t.data : NULL, y.t.data, wsp,
                                    ws_bytes, &err);
            check_failure(st, &err);
            free(wsp);
        }
        xconv_plan_destroy(plan);
    }

    /* im2col / col2im on the same params, x as the image, a cols tensor of the im2col shape. */
    int64_t kernel[3] = {rd_small(r, 1, 4), rd_small(r, 1, 4), rd_small(r, 1, 4)};
    for (int i = 0; i < q.d; i++)
        if (sane) kernel[i] = q.k[i];
    int64_t cs[5] = {rd_small(r, 0, 4), rd_small(r, 0, 64), rd_small(r, 0, 64), 0, 0};
    if (sane) {
        /* The conv output positions of x with this kernel, from the tests' own formula. */
        int64_t l = 1, kk = 1;
        bool    ok = true;
        for (int i = 0; i < q.d; i++) {
            int64_t yi = tu_out_size(XCONV_OP_CONV, q.x[i], kernel[i], q.stride[i], q.dil[i],
                                     q.lo[i], q.hi[i], 0);
            ok = ok && yi >= 1;
            l *= yi;
            kk *= kernel[i];
        }
        if (ok && rd_u8(r) < 230) {
            cs[0] = q.n;
            cs[1] = q.layout == XCONV_LAYOUT_CHANNELS_FIRST ? q.cin * kk : l;
            cs[2] = q.layout == XCONV_LAYOUT_CHANNELS_FIRST ? l : kk * q.cin;
        }
    }
    xconv_params up = p;
    if (rd_u8(r) < 200) {
        up.groups = 1;
        for (int i = 0; i < XCONV_MAX_SPATIAL; i++) up.output_padding[i] = 0;
    }
    ftensor cols, img;
    make_tensor(r, &cols, q.xdt, 3, cs, true);
    double unfold_work = numel_d(&cols.t) + numel_d(&x.t);
    if (unfold_work <= WORK_LIMIT && !skipped("im2col")) {
        dump_params("im2col", &up, kernel);
        dump_tensor("x", &x.t);
        dump_tensor("cols", &cols.t);
        st = xconv_im2col(rd_u8(r) & 1 ? ctx : NULL, &up, kernel, &x.t, &cols.t, &err);
        check_failure(st, &err);
        if (st != XCONV_STATUS_OK && cols.t.data == cols.alloc &&
            !tu_all_bytes(cols.alloc, cols.alloc_bytes, 0xA5))
            abort();
    }
    make_tensor(r, &img, pick_ydt(r, q.xdt), rank, xs, true);
    if (numel_d(&cols.t) + numel_d(&img.t) <= WORK_LIMIT && !skipped("col2im")) {
        /* cols now holds whatever im2col left there: any bytes are valid input. */
        dump_params("col2im", &up, kernel);
        dump_tensor("cols", &cols.t);
        dump_tensor("y", &img.t);
        st = xconv_col2im(rd_u8(r) & 1 ? ctx : NULL, &up, kernel, &cols.t, &img.t, &err);
        check_failure(st, &err);
        if (st != XCONV_STATUS_OK && img.t.data == img.alloc &&
            !tu_all_bytes(img.alloc, img.alloc_bytes, 0xA5))
            abort();
    }
    free_tensor(&cols);
    free_tensor(&img);
    free_tensor(&x);
    free_tensor(&w);
    free_tensor(&b);
    free_tensor(&y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static xconv_context *ctx;
    if (!ctx) {
        xconv_context_options o = {.threads = 2};
        xconv_error           err;
        if (xconv_context_create(&o, &ctx, &err) != XCONV_STATUS_OK) abort();
    }
    reader r = {data, size};
    fuzz_conv(&r, ctx);
    return 0;
}
