/*
 * peer_onednn.c — oneDNN (Debian libdnnl-dev, 2.x C API) as a benchmark peer: the
 * convolution (algorithm "auto": oneDNN may pick Winograd) and deconvolution forward
 * inference primitives, without bias, in three configurations:
 *
 *   onednn.ncx   src/dst in plain channels-first memory (NCW, NCHW, NCDHW)
 *   onednn.nxc   src/dst in plain channels-last memory (NWC, NHWC, NDHWC)
 *   onednn.any   src/dst in the format oneDNN prefers
 *
 * Weights are always in the format oneDNN prefers: they are reordered once, as inference
 * does. Inputs of the "any" configuration are reordered once before timing; the output is
 * reordered to plain memory only to check it, outside timing.
 *
 * Configurations for which oneDNN has only its reference implementation ("ref:any",
 * "ref_int8:any") are reported unsupported rather than timed.
 *
 * Dtypes: f32; bf16 and f16 (dst of y's dtype, f32 allowed); i8 as s8 x s8 -> s32 and u8 as
 * u8 x s8 -> s32 (the bench keeps u8 weights below 128, so they read the same as s8). The
 * s32 results are compared with xconv's after wrapping to y's width. Other dtypes, and
 * combinations oneDNN's primitive creation refuses on this CPU, are reported unsupported.
 *
 * Threads: Debian's oneDNN runs on OpenMP; omp_set_num_threads is looked up at run time so
 * the bench needs no OpenMP flags of its own. Set before creating primitives, because
 * oneDNN sizes its work partition at creation.
 */
#include "bench.h"

#ifdef XCONV_HAVE_ONEDNN

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_onednn_names[] = {"onednn.ncx", "onednn.nxc", "onednn.any", NULL};

enum { FMT_NCX, FMT_NXC, FMT_ANY };

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static int setup(int threads, char *why, size_t whylen)
{
    void (*set_threads)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (set_threads) set_threads(threads);
    if (engine) return 0;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        snprintf(why, whylen, "oneDNN: cannot create a CPU engine");
        return -1;
    }
    return 0;
}

typedef struct onednn_state {
    dnnl_primitive_t   prim;
    dnnl_memory_t      src, wei, dst;
    dnnl_memory_desc_t plain_dst;   /* ncx, f32 or s32: where output() reads */
    void              *xbuf, *wbuf; /* the inputs as loaded; src/wei may point into them */
    int64_t            y_elems;
    bool               int_dst;
} onednn_state;

static dnnl_data_type_t dnnl_type(xconv_dtype dt, bool *ok)
{
    *ok = true;
    switch (dt) {
    case XCONV_DTYPE_F32: return dnnl_f32;
    case XCONV_DTYPE_BF16: return dnnl_bf16;
    case XCONV_DTYPE_F16: return dnnl_f16;
    case XCONV_DTYPE_I8: return dnnl_s8;
    case XCONV_DTYPE_U8: return dnnl_u8;
    default: *ok = false; return dnnl_f32;
    }
}

/* Activation dims {N, C, spatial..} with ncx or nxc strides (or format any). */
static void act_md(dnnl_memory_desc_t *md, const bench_problem *p, int64_t c, const int64_t *sp,
                   dnnl_data_type_t dt, int fmt)
{
    dnnl_dims_t dims, strides;
    int nd = p->rank + 2;
    dims[0] = p->n;
    dims[1] = c;
    for (int i = 0; i < p->rank; i++) dims[2 + i] = sp[i];
    if (fmt == FMT_ANY) {
        dnnl_memory_desc_init_by_tag(md, nd, dims, dt, dnnl_format_tag_any);
        return;
    }
    int64_t s = 1;
    if (fmt == FMT_NCX) {
        for (int i = nd - 1; i >= 0; i--) {
            strides[i] = s;
            s *= dims[i];
        }
    } else {
        strides[1] = 1;
        s = c;
        for (int i = nd - 1; i >= 2; i--) {
            strides[i] = s;
            s *= dims[i];
        }
        strides[0] = s;
    }
    dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}

/* The weights as the bench holds them (PyTorch's layout), in oneDNN's dims order
 * {[G,] OC/G, IC/G, K..}; `any` instead gives the format-any desc of the same dims. */
static void wei_md(dnnl_memory_desc_t *md, const bench_problem *p, dnnl_data_type_t dt, bool any)
{
    dnnl_dims_t dims, strides;
    bool grouped = p->groups > 1;
    int nd = p->rank + 2 + (grouped ? 1 : 0), at = 0;
    int64_t ks = bench_spatial(p->k, p->rank);
    int64_t ocg = p->cout / p->groups, icg = p->cin / p->groups;
    if (grouped) dims[at++] = p->groups;
    dims[at++] = ocg;
    dims[at++] = icg;
    for (int i = 0; i < p->rank; i++) dims[at + i] = p->k[i];
    if (any) {
        dnnl_memory_desc_init_by_tag(md, nd, dims, dt, dnnl_format_tag_any);
        return;
    }
    int64_t s = 1;
    for (int i = nd - 1; i >= at; i--) {
        strides[i] = s;
        s *= dims[i];
    }
    if (p->op == XCONV_OP_CONV) { /* [G][OC/G][IC/G][K]: contiguous */
        strides[at - 1] = ks;
        strides[at - 2] = icg * ks;
    } else {                      /* [G][IC/G][OC/G][K]: IC/G outer */
        strides[at - 2] = ks;
        strides[at - 1] = ocg * ks;
    }
    if (grouped) strides[0] = ocg * icg * ks;
    dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}

/* A memory of `want` holding `data` (described by `have`): over the data itself when the
 * formats agree (oneDNN does not copy, so `data` must outlive it), else a reorder into a
 * new library-allocated memory. */
static dnnl_status_t load(const dnnl_memory_desc_t *have, void *data,
                          const dnnl_memory_desc_t *want, dnnl_memory_t *out)
{
    dnnl_status_t st;
    if (dnnl_memory_desc_equal(have, want)) return dnnl_memory_create(out, want, engine, data);
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    if ((st = dnnl_memory_create(&from, have, engine, data)) != dnnl_success) goto done;
    if ((st = dnnl_memory_create(&to, want, engine, DNNL_MEMORY_ALLOCATE)) != dnnl_success)
        goto done;
    if ((st = dnnl_reorder_primitive_desc_create(&rpd, have, engine, want, engine, NULL)) !=
        dnnl_success)
        goto done;
    if ((st = dnnl_primitive_create(&reorder, rpd)) != dnnl_success) goto done;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    if ((st = dnnl_primitive_execute(reorder, stream, 2, args)) != dnnl_success) goto done;
    st = dnnl_stream_wait(stream);
done:
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(from);
    if (st == dnnl_success) {
        *out = to;
    } else {
        dnnl_memory_destroy(to);
    }
    return st;
}

static void peer_destroy(void *state)
{
    onednn_state *s = state;
    if (!s) return;
    dnnl_primitive_destroy(s->prim);
    dnnl_memory_destroy(s->src);
    dnnl_memory_destroy(s->wei);
    dnnl_memory_destroy(s->dst);
    free(s->xbuf);
    free(s->wbuf);
    free(s);
}

static int peer_run(void *state)
{
    onednn_state *s = state;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, s->wei},
                              {DNNL_ARG_DST, s->dst}};
    if (dnnl_primitive_execute(s->prim, stream, 3, args) != dnnl_success) return -1;
    return dnnl_stream_wait(stream) == dnnl_success ? 0 : -1;
}

static int peer_output(void *state, double *y)
{
    onednn_state *s = state;
    const dnnl_memory_desc_t *have = NULL;
    if (dnnl_memory_get_memory_desc(s->dst, &have) != dnnl_success) return -1;
    size_t bytes = (size_t)s->y_elems * 4 + 4;
    void *plain = malloc(bytes);
    if (!plain) return -1;
    int rc = -1;
    dnnl_memory_t to = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    if (dnnl_memory_create(&to, &s->plain_dst, engine, plain) != dnnl_success ||
        dnnl_reorder_primitive_desc_create(&rpd, have, engine, &s->plain_dst, engine, NULL) !=
            dnnl_success ||
        dnnl_primitive_create(&reorder, rpd) != dnnl_success)
        goto done;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, s->dst}, {DNNL_ARG_TO, to}};
    if (dnnl_primitive_execute(reorder, stream, 2, args) != dnnl_success ||
        dnnl_stream_wait(stream) != dnnl_success)
        goto done;
    for (int64_t i = 0; i < s->y_elems; i++)
        y[i] = s->int_dst ? (double)((const int32_t *)plain)[i] : (double)((const float *)plain)[i];
    rc = 0;
done:
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(to);
    free(plain);
    return rc;
}

/* One configuration; on failure fills peer->unsupported and leaves no state. */
static void create_one(const bench_problem *p, const bench_data *d, int fmt, bench_peer *peer)
{
    bool ok_x, ok_y;
    dnnl_data_type_t xt = dnnl_type(d->x_dtype, &ok_x), yt = dnnl_type(d->y_dtype, &ok_y);
    dnnl_data_type_t wt = xt;
    bool int_dst = xt == dnnl_s8 || xt == dnnl_u8;
    if (int_dst) {
        wt = dnnl_s8;
        yt = dnnl_s32;
        ok_y = true;
    } else if (ok_y && yt != xt && yt != dnnl_f32) {
        ok_y = false;
    }
    if (!ok_x || !ok_y) {
        snprintf(peer->unsupported, sizeof peer->unsupported, "oneDNN has no %s -> %s conv",
                 xconv_dtype_name(d->x_dtype), xconv_dtype_name(d->y_dtype));
        return;
    }
    const int64_t *xs = p->in, *ys = p->out;
    dnnl_memory_desc_t src, wei, dst, src_user, wei_user;
    act_md(&src, p, p->cin, xs, xt, fmt);
    act_md(&dst, p, p->cout, ys, yt, fmt);
    act_md(&src_user, p, p->cin, xs, xt, FMT_NCX);
    wei_md(&wei, p, wt, true);
    wei_md(&wei_user, p, wt, false);

    dnnl_dims_t strides, dil, pl, pr;
    for (int i = 0; i < p->rank; i++) {
        strides[i] = p->stride[i];
        dil[i] = p->dil[i] - 1; /* oneDNN counts dilation from 0 */
        pl[i] = p->pad_lo[i];
        /* A transpose's output padding extends the far end: oneDNN takes it off pad_hi. */
        pr[i] = p->pad_hi[i] - p->out_pad[i];
    }

    dnnl_status_t st;
    dnnl_primitive_desc_t pd = NULL;
    if (p->op == XCONV_OP_CONV) {
        dnnl_convolution_desc_t cd;
        st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                        dnnl_convolution_auto, &src, &wei, NULL,
                                                        &dst, strides, dil, pl, pr);
        if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &cd, NULL, engine, NULL);
    } else {
        dnnl_deconvolution_desc_t cd;
        st = dnnl_dilated_deconvolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                          dnnl_deconvolution_direct, &src, &wei,
                                                          NULL, &dst, strides, dil, pl, pr);
        if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &cd, NULL, engine, NULL);
    }
    if (st != dnnl_success) {
        snprintf(peer->unsupported, sizeof peer->unsupported,
                 "oneDNN has no implementation for %s %s%s (%s)", xconv_dtype_name(d->x_dtype),
                 p->op_name, fmt == FMT_NCX ? " ncx" : fmt == FMT_NXC ? " nxc" : "",
                 dnnl_status2str(st));
        return;
    }
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    /* oneDNN's reference implementations are its fallback of last resort (for example
     * ref_int8 on channels-first int8, 1000x slower than its jit paths): nobody runs them
     * for speed, and timing them would take minutes. */
    if (impl && strncmp(impl, "ref", 3) == 0) {
        snprintf(peer->unsupported, sizeof peer->unsupported,
                 "only oneDNN's reference implementation (%s), not timed", impl);
        dnnl_primitive_desc_destroy(pd);
        return;
    }
    snprintf(peer->impl, sizeof peer->impl, "%s %s:%s:%s", impl ? impl : "?", dnnl_dt2str(xt),
             dnnl_dt2str(wt), dnnl_dt2str(yt));

    onednn_state *s = calloc(1, sizeof *s);
    size_t xe = (size_t)bench_x_elems(p), we = (size_t)bench_w_elems(p);
    size_t es = xconv_dtype_size(d->x_dtype);
    void *xbuf = bench_alloc(xe * es + 64), *wbuf = bench_alloc(we * es + 64);
    if (!s || !xbuf || !wbuf) {
        free(s);
        free(xbuf);
        free(wbuf);
        dnnl_primitive_desc_destroy(pd);
        snprintf(peer->unsupported, sizeof peer->unsupported, "out of memory");
        return;
    }
    memcpy(wbuf, d->w, we * es);
    if (fmt == FMT_NXC) {
        bench_to_channels_last(d->x, xbuf, p->n, p->cin, bench_spatial(p->in, p->rank), es);
        src_user = src;
    } else {
        memcpy(xbuf, d->x, xe * es);
    }
    s->xbuf = xbuf;
    s->wbuf = wbuf;
    s->y_elems = bench_y_elems(p);
    s->int_dst = int_dst;
    act_md(&s->plain_dst, p, p->cout, ys, int_dst ? dnnl_s32 : dnnl_f32, FMT_NCX);
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wei_md_p = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    st = load(&src_user, xbuf, src_md, &s->src);
    if (st == dnnl_success) st = load(&wei_user, wbuf, wei_md_p, &s->wei);
    if (st == dnnl_success) st = dnnl_memory_create(&s->dst, dst_md, engine, DNNL_MEMORY_ALLOCATE);
    if (st == dnnl_success) st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) {
        peer_destroy(s);
        snprintf(peer->unsupported, sizeof peer->unsupported, "oneDNN setup failed (%s)",
                 dnnl_status2str(st));
        return;
    }
    peer->comparable = true;
    peer->state = s;
    peer->run = peer_run;
    peer->output = peer_output;
    peer->destroy = peer_destroy;
}

int bench_onednn_create(const bench_problem *p, const bench_data *d, int threads,
                        bench_peer *peers)
{
    char why[160] = "";
    int ready = setup(threads, why, sizeof why);
    int n = 0;
    for (int fmt = FMT_NCX; fmt <= FMT_ANY; fmt++, n++) {
        bench_peer *peer = &peers[n];
        memset(peer, 0, sizeof *peer);
        snprintf(peer->name, sizeof peer->name, "%s", bench_onednn_names[fmt]);
        if (ready != 0) {
            snprintf(peer->unsupported, sizeof peer->unsupported, "%s", why);
            continue;
        }
        create_one(p, d, fmt, peer);
    }
    return n;
}

#else /* !XCONV_HAVE_ONEDNN */

const char *const bench_onednn_names[] = {NULL};

int bench_onednn_create(const bench_problem *p, const bench_data *d, int threads,
                        bench_peer *peers)
{
    (void)p;
    (void)d;
    (void)threads;
    (void)peers;
    return 0;
}

#endif
