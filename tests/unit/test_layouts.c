/*
 * test_layouts.c — one logical problem, many memory layouts: channels-first, channels-last,
 * and strided views of the same data (permuted dims, negative strides, zero strides that
 * broadcast x, w or bias, gaps between rows, views at an offset into a larger buffer whose
 * unused bytes hold garbage). Every variant must give the same y, bit for bit: integers take
 * full-range random bits (exact modulo 2^bits), floats take small integers (exact sums), and
 * all are compared with ref_conv.h's direct sum rather than with one another.
 *
 * y is also written through strided views: every byte of its buffer that is not an element
 * of the view holds a canary that must survive, and the input buffers must come back
 * unchanged. Each variant runs through the planner's choice and every engine forced.
 */
#include "common/ref_conv.h"
#include "harness.h"

/* How one tensor is laid out in memory, independent of its logical layout. */
typedef struct view_spec {
    int     perm[XCONV_MAX_RANK];  /* physical order, outermost first */
    bool    neg[XCONV_MAX_RANK];   /* negative stride */
    int64_t gap[XCONV_MAX_RANK];   /* unused elements after each row of this dim */
    bool    bcast[XCONV_MAX_RANK]; /* stride 0 (inputs only; data constant along the dim) */
    int64_t lead, tail;            /* unused elements before and after the view */
    bool    plain;                 /* strided = false */
} view_spec;

static view_spec random_spec(tu_rng *r, int rank, const bool *may_bcast, int style)
{
    view_spec v;
    memset(&v, 0, sizeof v);
    for (int i = 0; i < rank; i++) v.perm[i] = i;
    if (style == 0) {
        v.plain = true;
        return v;
    }
    /* style 1: row-major but given as explicit strides; 2+: random everything. */
    if (style >= 2) {
        for (int i = rank - 1; i > 0; i--) {
            int j = (int)tu_int(r, 0, i), t = v.perm[i];
            v.perm[i] = v.perm[j];
            v.perm[j] = t;
        }
        for (int i = 0; i < rank; i++) {
            v.neg[i] = tu_int(r, 0, 2) == 0;
            v.gap[i] = tu_int(r, 0, 3) == 0 ? tu_int(r, 1, 3) : 0;
            v.bcast[i] = may_bcast && may_bcast[i] && tu_int(r, 0, 1);
        }
        v.lead = tu_int(r, 0, 5);
        v.tail = tu_int(r, 0, 5);
    }
    return v;
}

/* A view of `shape` built from spec in a fresh buffer of random garbage. */
static xconv_tensor make_view(tu_rng *r, xconv_dtype dt, int rank, const int64_t *shape,
                              const view_spec *v)
{
    if (v->plain) {
        xconv_tensor t = tu_alloc(dt, rank, shape, 0);
        return t;
    }
    xconv_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.strided = true;
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    int64_t step = 1;
    for (int a = rank - 1; a >= 0; a--) {
        int d = v->perm[a];
        if (v->bcast[d]) {
            t.strides[d] = 0;
            continue;
        }
        t.strides[d] = v->neg[d] ? -step : step;
        step *= shape[d] + v->gap[d];
    }
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < rank; d++) {
        int64_t reach = (shape[d] - 1) * t.strides[d];
        if (reach < 0) lo += reach;
        else hi += reach;
    }
    t.offset = v->lead - lo;
    int64_t elems = t.offset + hi + 1 + v->tail;
    t.buffer_bytes = (size_t)elems * tu_info(dt)->size;
    t.data = malloc(t.buffer_bytes);
    unsigned char *b = t.data;
    for (size_t i = 0; i < t.buffer_bytes; i++) b[i] = (unsigned char)tu_next(r);
    return t;
}

static size_t buffer_size(const xconv_tensor *t)
{
    return t->buffer_bytes ? t->buffer_bytes
                           : (size_t)tu_numel(t->rank, t->shape) * tu_info(t->dtype)->size;
}

/* Makes a channels-first contiguous tensor constant along dim b (b < 0: no change). */
static void make_constant_along(xconv_tensor *t, int b)
{
    int64_t idx[XCONV_MAX_RANK] = {0}, src[XCONV_MAX_RANK];
    if (b < 0) return;
    do {
        memcpy(src, idx, sizeof src);
        src[b] = 0;
        tu_store(t->dtype, t->data, tu_offset(t, idx), tu_load(t->dtype, t->data, tu_offset(t, src)));
    } while (tu_next_index(t->rank, t->shape, idx));
}

static void copy_elem(const xconv_tensor *from, const int64_t *fi, xconv_tensor *to, const int64_t *ti)
{
    tu_store(to->dtype, to->data, tu_offset(to, ti), tu_load(from->dtype, from->data, tu_offset(from, fi)));
}

/* Copies the channels-first masters into views laid out for p->layout. */
static void copy_into(const tu_problem *p, const xconv_tensor *mx, const xconv_tensor *mw,
                      const xconv_tensor *mb, xconv_tensor *x, xconv_tensor *w, xconv_tensor *b)
{
    int64_t fi[XCONV_MAX_RANK], ti[XCONV_MAX_RANK], s[3], k[3];
    int64_t cin_g = p->cin / p->groups, cout_g = p->cout / p->groups;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->cin; c++)
            for (s[0] = 0; s[0] < p->x[0]; s[0]++)
                for (s[1] = 0; s[1] < p->x[1]; s[1]++)
                    for (s[2] = 0; s[2] < p->x[2]; s[2]++) {
                        tu_act_index(XCONV_LAYOUT_CHANNELS_FIRST, p->d, n, c, s, fi);
                        tu_act_index(p->layout, p->d, n, c, s, ti);
                        copy_elem(mx, fi, x, ti);
                    }
    for (int64_t G = 0; G < p->groups; G++)
        for (int64_t o = 0; o < cout_g; o++)
            for (int64_t i = 0; i < cin_g; i++)
                for (k[0] = 0; k[0] < p->k[0]; k[0]++)
                    for (k[1] = 0; k[1] < p->k[1]; k[1]++)
                        for (k[2] = 0; k[2] < p->k[2]; k[2]++) {
                            tu_w_index(p->op, XCONV_LAYOUT_CHANNELS_FIRST, p->d, cin_g, cout_g, G, o, i, k, fi);
                            tu_w_index(p->op, p->layout, p->d, cin_g, cout_g, G, o, i, k, ti);
                            copy_elem(mw, fi, w, ti);
                        }
    for (int64_t c = 0; p->has_bias && c < p->cout; c++) copy_elem(mb, &c, b, &c);
}

/* Bytes of y's buffer that belong to elements of the view. */
static unsigned char *element_mask(const xconv_tensor *y)
{
    size_t         bytes = buffer_size(y), es = tu_info(y->dtype)->size;
    unsigned char *m = calloc(bytes, 1);
    int64_t        idx[XCONV_MAX_RANK] = {0};
    do {
        memset(m + (size_t)tu_offset(y, idx) * es, 1, es);
    } while (tu_next_index(y->rank, y->shape, idx));
    return m;
}

static const xconv_dtype PAIRS[][2] = {
    {XCONV_DTYPE_I8, XCONV_DTYPE_I8},   {XCONV_DTYPE_U8, XCONV_DTYPE_U32},
    {XCONV_DTYPE_I16, XCONV_DTYPE_I16}, {XCONV_DTYPE_U16, XCONV_DTYPE_I64},
    {XCONV_DTYPE_I32, XCONV_DTYPE_I32}, {XCONV_DTYPE_U32, XCONV_DTYPE_U32},
    {XCONV_DTYPE_U64, XCONV_DTYPE_U64}, {XCONV_DTYPE_I64, XCONV_DTYPE_I64},
    {XCONV_DTYPE_F32, XCONV_DTYPE_F32}, {XCONV_DTYPE_F64, XCONV_DTYPE_F64},
    {XCONV_DTYPE_F16, XCONV_DTYPE_F16}, {XCONV_DTYPE_BF16, XCONV_DTYPE_F32},
    {XCONV_DTYPE_F8E4M3, XCONV_DTYPE_F32}, {XCONV_DTYPE_C64, XCONV_DTYPE_C64},
    {XCONV_DTYPE_C128, XCONV_DTYPE_C128},  {XCONV_DTYPE_F32, XCONV_DTYPE_F64},
};

static tu_problem random_problem(tu_rng *r, int index)
{
    tu_problem p;
    memset(&p, 0, sizeof p);
    p.op = (xconv_op)(index & 1);
    p.d = 1 + (index / 2) % 3;
    p.n = tu_int(r, 1, 3);
    p.groups = tu_int(r, 0, 2) == 0 ? tu_int(r, 2, 3) : 1;
    p.cin = p.groups * tu_int(r, 1, 3);
    p.cout = p.groups * tu_int(r, 1, 3);
    if (tu_int(r, 0, 4) == 0) p.cin = p.cout = p.groups; /* depthwise */
    for (int i = 0; i < p.d; i++) {
        p.k[i] = tu_int(r, 1, 3);
        p.stride[i] = tu_int(r, 1, 3);
        p.dil[i] = tu_int(r, 1, 2);
        p.lo[i] = tu_int(r, 0, 2);
        p.hi[i] = tu_int(r, 0, 2);
        p.x[i] = tu_int(r, 1, p.d == 3 ? 4 : 7);
        if (p.op == XCONV_OP_CONV) {
            int64_t need = p.dil[i] * (p.k[i] - 1) + 1 - p.lo[i] - p.hi[i];
            if (p.x[i] < need) p.x[i] = need;
        } else {
            int64_t lim = p.stride[i] > p.dil[i] ? p.stride[i] : p.dil[i];
            p.opad[i] = tu_int(r, 0, lim - 1);
            /* Keep Y >= 1 for the transpose: cut the padding if it eats the output. */
            while (tu_out_size(p.op, p.x[i], p.k[i], p.stride[i], p.dil[i], p.lo[i], p.hi[i],
                               p.opad[i]) < 1) {
                if (p.lo[i]) p.lo[i]--;
                else p.hi[i]--;
            }
        }
    }
    p.has_bias = tu_int(r, 0, 1);
    p.xdt = PAIRS[index % (int)(sizeof PAIRS / sizeof PAIRS[0])][0];
    p.ydt = PAIRS[index % (int)(sizeof PAIRS / sizeof PAIRS[0])][1];
    tu_problem_finish(&p);
    return p;
}

static tu_val gen_for(tu_rng *r, xconv_dtype dt)
{
    return tu_is_int(dt) ? tu_gen_wide(r, dt) : tu_gen_small(r, dt);
}

static void run_problem(xconv_context *ctx, tu_rng *r, int index)
{
    tu_problem p = random_problem(r, index);
    tu_problem m = p;
    m.layout = XCONV_LAYOUT_CHANNELS_FIRST;
    int64_t xs[5], ws[5], bs[1], ys[5];
    tu_shapes(&m, xs, ws, bs, ys);
    int rank = p.d + 2;

    /* The masters: channels-first, contiguous, optionally constant along one dim so that a
     * stride-0 view can stand for them. */
    xconv_tensor mx = tu_alloc(p.xdt, rank, xs, 0), mw = tu_alloc(p.xdt, rank, ws, 0);
    xconv_tensor mb = tu_alloc(p.ydt, 1, bs, 0);
    tu_fill(&mx, r, gen_for);
    tu_fill(&mw, r, gen_for);
    tu_fill(&mb, r, gen_for);
    int x_const = tu_int(r, 0, 1) ? (int)tu_int(r, 0, rank - 1) : -1;     /* n, c or spatial */
    int w_const = tu_int(r, 0, 1) ? 2 + (int)tu_int(r, 0, p.d - 1) : -1;  /* a kernel dim */
    int b_const = tu_int(r, 0, 2) == 0 ? 0 : -1;
    make_constant_along(&mx, x_const);
    make_constant_along(&mw, w_const);
    make_constant_along(&mb, b_const);

    tu_val *expect = calloc((size_t)tu_ycount(&p), sizeof(tu_val));
    tu_ref_conv(&m, &mx, &mw, &mb, expect, NULL);
    char desc[300];

    for (int variant = 0; variant < 8; variant++) {
        p.layout = (xconv_layout)(variant & 1);
        tu_shapes(&p, xs, ws, bs, ys);
        /* Which dims of this layout's x and w may broadcast: the ones the masters are
         * constant along, found through the index maps. */
        bool xb[XCONV_MAX_RANK] = {false}, wb[XCONV_MAX_RANK] = {false}, bb[1] = {b_const == 0};
        if (x_const >= 0) {
            int64_t ci[XCONV_MAX_RANK] = {0}, li[XCONV_MAX_RANK], s[3] = {0, 0, 0};
            ci[x_const] = 1;
            for (int i = 0; i < p.d; i++) s[i] = ci[2 + i];
            tu_act_index(p.layout, p.d, ci[0], ci[1], s, li);
            for (int i = 0; i < rank; i++) xb[i] = li[i] != 0;
        }
        if (w_const >= 0) {
            int64_t k[3] = {0, 0, 0}, li[XCONV_MAX_RANK];
            k[w_const - 2] = 1;
            tu_w_index(p.op, p.layout, p.d, 1, 1, 0, 0, 0, k, li);
            for (int i = 0; i < rank; i++) wb[i] = li[i] != 0;
        }
        int style = variant < 2 ? 0 : variant < 4 ? 1 : 2;
        view_spec vx = random_spec(r, rank, xb, style), vw = random_spec(r, rank, wb, style);
        view_spec vb = random_spec(r, 1, bb, style), vy = random_spec(r, rank, NULL, style);
        xconv_tensor x = make_view(r, p.xdt, rank, xs, &vx), w = make_view(r, p.xdt, rank, ws, &vw);
        xconv_tensor b = make_view(r, p.ydt, 1, bs, &vb), y = make_view(r, p.ydt, rank, ys, &vy);
        copy_into(&p, &mx, &mw, &mb, &x, &w, &b);
        unsigned char *mask = element_mask(&y);
        size_t ybytes = buffer_size(&y);
        xconv_tensor *ins[3] = {&x, &w, &b};
        void *saved[3];
        for (int t = 0; t < 3; t++) {
            saved[t] = malloc(buffer_size(ins[t]));
            memcpy(saved[t], ins[t]->data, buffer_size(ins[t]));
        }
        tu_describe(&p, desc, sizeof desc);

        for (int e = -1; e < xconv_engine_count(); e++) {
            const char  *forced = e < 0 ? NULL : xconv_engine_name(e), *used;
            xconv_error  err;
            char         label[400];
            snprintf(label, sizeof label, "%s variant %d [%s]", desc, variant, forced ? forced : "planner");
            memset(y.data, 0xA5, ybytes);
            xconv_status st = tu_conv(e & 1 ? ctx : NULL, &p, &x, &w, &b, &y, forced, &used, &err);
            if (forced && st == XCONV_STATUS_UNSUPPORTED && strcmp(forced, "cpu.ref") != 0) continue;
            XT_CHECK(st == XCONV_STATUS_OK, "%s: %s: %s", label, xconv_status_name(st), err.description);
            if (st != XCONV_STATUS_OK) continue;
            int64_t bad = tu_compare_y(&p, &y, expect, NULL, true, 0.0, label);
            XT_CHECK(bad == 0, "%s: %" PRId64 " wrong elements", label, bad);
            int64_t touched = 0;
            for (size_t i = 0; i < ybytes; i++)
                touched += !mask[i] && ((unsigned char *)y.data)[i] != 0xA5;
            XT_CHECK(touched == 0, "%s: %" PRId64 " bytes between y's elements were written", label,
                     touched);
            for (int t = 0; t < 3; t++)
                XT_CHECK(memcmp(saved[t], ins[t]->data, buffer_size(ins[t])) == 0,
                         "%s: input %d was modified", label, t);
        }
        for (int t = 0; t < 3; t++) free(saved[t]);
        free(mask);
        free(x.data);
        free(w.data);
        free(b.data);
        free(y.data);
    }
    free(expect);
    free(mx.data);
    free(mw.data);
    free(mb.data);
}

int main(void)
{
    xconv_context        *ctx = NULL;
    xconv_context_options opt = {.threads = 3};
    xconv_error           err;
    XT_CHECK(xconv_context_create(&opt, &ctx, &err) == XCONV_STATUS_OK, "context: %s", err.description);
    tu_rng rng = {2024};
    for (int i = 0; i < 96; i++) run_problem(ctx, &rng, i);
    xconv_context_destroy(ctx);
    return xt_finish("test_layouts");
}
