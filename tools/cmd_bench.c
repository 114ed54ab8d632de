/*
 * cmd_bench.c — `xconv bench`: xconv against its peers on a suite of problems (DESIGN.md §6).
 *
 * Per suite entry and dtype: one xconv plan (created once, on a context of --threads
 * threads, executed with a preallocated workspace) and every peer configuration built in
 * (bench/peer_*.c) run the same logical problem on the same data. Each runs once to warm up
 * and to check its output against xconv's (a peer with the same semantics must agree within
 * the dtype's tolerance, or the row is a loud MISMATCH), then they are timed round robin
 * (xconv rep, peer 1 rep, peer 2 rep, ...), each rep repeating the run until it lasts
 * --min-time after a short sleep (--settle) that lets the previous side's spinning threads
 * park, and each side reports the median of its reps. The ratio is xconv over the
 * best peer; % peak is xconv over the f32 FMA peak measured at start.
 *
 * Built only with bench/ (cmake/bench.cmake defines XCONV_HAVE_BENCH); main.c finds this
 * command through a weak reference.
 */
#include "args.h"

#ifdef XCONV_HAVE_BENCH

#include "bench.h"
#include "bench_cuda.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int xconv_cmd_bench(int argc, char **argv);

static const char usage[] =
    "usage: xconv bench [options]\n"
    "\n"
    "Times xconv and, in the same process and interleaved, each peer built in (oneDNN,\n"
    "XNNPACK) on every problem of a suite list, and prints GFLOP/s, %% of the measured f32\n"
    "FMA peak and xconv / best peer. Each peer with xconv's semantics is checked once against\n"
    "xconv's output; a disagreement is reported as MISMATCH and makes the exit status 1.\n"
    "\n"
    "options:\n"
    "  --suite FILE      suite file (default: ../shared/bench/suite.json beside the sources)\n"
    "  --list NAME       list of the suite to run (default cpu)\n"
    "  --filter TEXT     only entries whose name contains TEXT\n"
    "  --dtype LIST      comma-separated dtypes, each X or X:Y (y dtype Y), or 'all'\n"
    "                    (default f32)\n"
    "  --threads N       threads for xconv and every peer (default 2)\n"
    "  --layout L        xconv's layout: channels_last (default) or channels_first\n"
    "  --engine NAME     force an xconv engine (default: the planner's choice)\n"
    "  --peers LIST      all (default), none, or a comma-separated subset of onednn,xnnpack\n"
    "  --reps N          timed repetitions per side (default 7; fewer when --budget is short)\n"
    "  --min-time S      seconds a repetition lasts at least (default 0.02)\n"
    "  --budget S        seconds of timing per entry and dtype before reps are cut, down to 3\n"
    "                    (default 6)\n"
    "  --settle S        seconds of sleep before each rep, so that the previous side's\n"
    "                    spinning threads park (default 0.03)\n"
    "  --json            print a JSON array, one object per entry and dtype\n"
    "  --verbose, -v     print every rep's time per side on stderr\n"
    "  --allow-tf32      let xconv's plans use reduced-precision f32 math (allow_tf32; on\n"
    "                    cuda: cuda.f32_bf16x3); the peers keep full f32\n"
    "  --allow-fp8-fast-accum\n"
    "                    let xconv's fp8 plans sum in the tensor cores' fp8 accumulation\n"
    "                    (allow_fp8_fast_accum; cuda: cuda.igemm_wgmma's native fp8 wgmma)\n"
    "  --pack-each-run   create xconv's plans without constant_weights, so that weight\n"
    "                    packing is timed in every run (the peers reorder once)\n"
    "  --device D        cpu (default) or cuda: xconv on CUDA tensors against cuDNN (the\n"
    "                    'gpu' list, bf16 by default; --peers all|none|cudnn; --min-time is\n"
    "                    per timed batch; --threads and --settle do not apply; GPU.md)\n"
    "  --no-rotate       cuda: do not cycle inputs through copies larger than the L2 cache\n";

enum { MAX_DTYPES = 32, MAX_SIDES = 1 + 2 * BENCH_MAX_CONFIGS, MAX_REPS = 101 };

typedef struct options {
    const char  *suite, *list, *filter, *engine;
    xconv_dtype  x_dtypes[MAX_DTYPES], y_dtypes[MAX_DTYPES];
    int          ndtypes;
    int          threads, reps;
    double       min_time, budget, settle;
    xconv_layout layout;
    bool         json, onednn, xnnpack, verbose;
    bool         pack_each_run; /* no constant_weights: xconv packs weights in every run */
    bool         allow_tf32;    /* xconv's plans may use reduced-precision f32 math */
    bool         fp8_fast;      /* and the tensor cores' fp8 accumulation */
    bool         cuda, cudnn, rotate; /* --device cuda (bench/cuda_bench.c) */
} options;

/* One timed side: xconv or a peer configuration. */
typedef struct side {
    const char *name;
    int       (*run)(void *state);
    void       *state;
    int64_t     iters;       /* runs per rep */
    double      warm;        /* seconds of the warm-up run */
    double      seconds;     /* median seconds per run */
    bool        ok;          /* ran without error */
} side;

/* ---- xconv as a side ------------------------------------------------------------------- */

typedef struct xconv_side {
    xconv_plan *plan;
    void       *x, *w, *y, *ws;
    size_t      ws_bytes;
    xconv_error err;
} xconv_side;

static int xconv_side_run(void *state)
{
    xconv_side *s = state;
    return xconv_plan_execute(s->plan, s->x, s->w, NULL, s->y, s->ws, s->ws_bytes, &s->err) ==
                   XCONV_STATUS_OK
               ? 0
               : -1;
}

static void xconv_side_destroy(xconv_side *s)
{
    xconv_plan_destroy(s->plan);
    free(s->x);
    free(s->w);
    free(s->y);
    free(s->ws);
    memset(s, 0, sizeof *s);
}

/* The plan for the problem in the chosen layout, over copies of the logical data. */
static int xconv_side_create(xconv_context *ctx, const options *o, const bench_problem *p,
                             const bench_data *d, xconv_side *s)
{
    memset(s, 0, sizeof *s);
    bool last = o->layout == XCONV_LAYOUT_CHANNELS_LAST;
    int rank = p->rank + 2;
    size_t es = xconv_dtype_size(d->x_dtype), ys_bytes = xconv_dtype_size(d->y_dtype);
    int64_t xs = bench_spatial(p->in, p->rank), xn = bench_x_elems(p), wn = bench_w_elems(p);
    int64_t x_shape[XCONV_MAX_RANK], w_shape[XCONV_MAX_RANK], y_shape[XCONV_MAX_RANK];
    xconv_params params;
    bench_layout_problem(p, o->layout, x_shape, w_shape, &params);
    if (xconv_output_shape(&params, x_shape, w_shape, y_shape, &s->err) != XCONV_STATUS_OK)
        return -1;

    s->x = bench_alloc((size_t)xn * es + 64);
    s->w = bench_alloc((size_t)wn * es + 64);
    s->y = bench_alloc((size_t)bench_y_elems(p) * ys_bytes + 64);
    if (!s->x || !s->w || !s->y) goto oom;
    if (last) {
        bench_to_channels_last(d->x, s->x, p->n, p->cin, xs, es);
        bench_weight_to_okc(p, d->w, s->w, es);
    } else {
        memcpy(s->x, d->x, (size_t)xn * es);
        memcpy(s->w, d->w, (size_t)wn * es);
    }
    xconv_tensor x = xconv_tensor_contiguous(d->x_dtype, rank, x_shape, s->x);
    xconv_tensor w = xconv_tensor_contiguous(d->x_dtype, rank, w_shape, s->w);
    xconv_tensor y = xconv_tensor_contiguous(d->y_dtype, rank, y_shape, s->y);
    /* The peers reorder weights once, outside timing; xconv's plans do the same with
     * constant_weights unless --pack-each-run asks to time the packing too. */
    xconv_plan_options popts = {.engine = o->engine, .allow_tf32 = o->allow_tf32,
                                .constant_weights = !o->pack_each_run,
                                .allow_fp8_fast_accum = o->fp8_fast};
    if (xconv_plan_create(ctx, &params, &x, &w, NULL, &y, &popts, &s->plan, &s->err) !=
        XCONV_STATUS_OK)
        return -1;
    s->ws_bytes = xconv_plan_workspace_size(s->plan);
    if (s->ws_bytes && !(s->ws = bench_alloc(s->ws_bytes))) goto oom;
    return 0;
oom:
    snprintf(s->err.description, sizeof s->err.description, "out of memory");
    return -1;
}

/* xconv's output in the logical channels-first order, as doubles. */
static void xconv_side_output(const options *o, const bench_problem *p, const bench_data *d,
                              const xconv_side *s, double *y)
{
    int64_t ys = bench_spatial(p->out, p->rank);
    bool last = o->layout == XCONV_LAYOUT_CHANNELS_LAST;
    for (int64_t b = 0; b < p->n; b++)
        for (int64_t c = 0; c < p->cout; c++)
            for (int64_t i = 0; i < ys; i++) {
                int64_t at = last ? (b * ys + i) * p->cout + c : (b * p->cout + c) * ys + i;
                y[(b * p->cout + c) * ys + i] = bench_get(d->y_dtype, s->y, at);
            }
}

/* ---- timing ---------------------------------------------------------------------------- */

/* One run, timed: the warm-up. */
static int warm_up(side *s)
{
    double t0 = xconv_cli_now();
    int rc = s->run(s->state);
    s->warm = xconv_cli_now() - t0;
    return rc;
}

/* Sleeps `seconds`. Peers' thread pools spin-wait after a run and would steal a core from
 * the next side's rep: sleeping between reps lets them park, so each side is timed on a
 * quiet machine. Measured here: libgomp spins about 5 ms after a parallel region,
 * pthreadpool about 12 ms; the default 30 ms covers both. */
static void settle(double seconds)
{
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) continue;
}

static double time_rep(side *s)
{
    double t0 = xconv_cli_now();
    for (int64_t i = 0; i < s->iters; i++)
        if (s->run(s->state) != 0) s->ok = false;
    return (xconv_cli_now() - t0) / (double)s->iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One rep after the settle sleep. A rep of several short runs first does one untimed run:
 * the sleep let the threads (and, in a VM, the virtual CPUs) go idle, and waking them can
 * take milliseconds, which would swamp runs of tens of microseconds. Runs of a rep longer
 * than that pay the wake-up once, in the noise. */
static double settled_rep(const options *o, side *s)
{
    settle(o->settle);
    if (s->iters > 1 && s->run(s->state) != 0) s->ok = false;
    return time_rep(s);
}

/* Seconds per run, from settled runs repeated for half of --min-time: long enough that one
 * slow run (a VM's scheduling hiccup) cannot shrink the reps sized from it. */
static double calibrate(const options *o, side *s)
{
    settle(o->settle);
    if (s->run(s->state) != 0) s->ok = false;
    double t0 = xconv_cli_now(), dt = 0;
    int64_t n = 0;
    do {
        if (s->run(s->state) != 0) s->ok = false;
        n++;
        dt = xconv_cli_now() - t0;
    } while (dt < 0.5 * o->min_time && n < 100000);
    return dt / (double)n;
}

/* Sizes each side's reps from its warm-up or, when that was shorter than a rep, from
 * calibrate(), then times the sides round robin. */
static int time_sides(const options *o, side *sides, int nsides)
{
    double round_s = 0;
    for (int i = 0; i < nsides; i++) {
        side *s = &sides[i];
        if (!s->ok) continue;
        double t = s->warm >= o->min_time ? s->warm : calibrate(o, s);
        s->iters = t >= o->min_time || t <= 0 ? 1 : (int64_t)ceil(o->min_time / t);
        if (s->iters > 100000) s->iters = 100000;
        round_s += t * (double)s->iters;
    }
    const int reps = bench_fit_reps(o->reps, round_s, o->budget);
    static double times[MAX_SIDES][MAX_REPS];
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nsides; i++)
            if (sides[i].ok) times[i][r] = settled_rep(o, &sides[i]);
    for (int i = 0; i < nsides; i++) {
        if (!sides[i].ok) continue;
        if (o->verbose) {
            fprintf(stderr, "  %-14s %6lld runs/rep, ms/run:", sides[i].name,
                    (long long)sides[i].iters);
            for (int r = 0; r < reps; r++) fprintf(stderr, " %.4g", times[i][r] * 1e3);
            fprintf(stderr, "\n");
        }
        qsort(times[i], (size_t)reps, sizeof(double), cmp_double);
        sides[i].seconds = reps % 2 ? times[i][reps / 2]
                                    : 0.5 * (times[i][reps / 2 - 1] + times[i][reps / 2]);
    }
    return reps;
}

/* ---- one entry and dtype --------------------------------------------------------------- */

typedef struct result {
    double     xconv_gflops;
    char       engine[64];
    char       describe[160];
    bench_peer peers[2 * BENCH_MAX_CONFIGS];
    double     peer_gflops[2 * BENCH_MAX_CONFIGS]; /* < 0: not measured */
    int        npeers, best, reps;
    const char *checked_with;                      /* NULL: no comparable peer */
    double     max_err, tolerance;
    bool       mismatch;
    char       error[320];                         /* non-empty: xconv failed */
} result;

static void dtype_label(xconv_dtype x, xconv_dtype y, char *buf, size_t len)
{
    if (x == y) snprintf(buf, len, "%s", xconv_dtype_name(x));
    else snprintf(buf, len, "%s:%s", xconv_dtype_name(x), xconv_dtype_name(y));
}

static void bench_one(xconv_context *ctx, const options *o, const bench_problem *p,
                      xconv_dtype xt, xconv_dtype yt, result *r)
{
    memset(r, 0, sizeof *r);
    r->best = -1;
    bench_data d;
    if (bench_data_create(p, xt, yt, &d) != 0) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return;
    }
    xconv_side xs;
    if (xconv_side_create(ctx, o, p, &d, &xs) != 0) {
        snprintf(r->error, sizeof r->error, "%s: %s", xconv_status_name(xs.err.status),
                 xs.err.description);
        xconv_side_destroy(&xs);
        bench_data_destroy(&d);
        return;
    }
    snprintf(r->engine, sizeof r->engine, "%s", xconv_plan_engine(xs.plan));
    snprintf(r->describe, sizeof r->describe, "%s", xconv_plan_describe(xs.plan));
    if (o->onednn) r->npeers += bench_onednn_create(p, &d, o->threads, r->peers + r->npeers);
    if (o->xnnpack) r->npeers += bench_xnnpack_create(p, &d, o->threads, r->peers + r->npeers);

    side sides[MAX_SIDES];
    int nsides = 0;
    sides[nsides++] = (side){"xconv", xconv_side_run, &xs, 1, 0, 0, true};
    for (int i = 0; i < r->npeers; i++)
        if (r->peers[i].state)
            sides[nsides++] = (side){r->peers[i].name, r->peers[i].run, r->peers[i].state, 1, 0,
                                     0, true};

    /* Warm-up runs, and the check of every comparable peer against xconv. */
    int64_t yn = bench_y_elems(p);
    double *y_ref = malloc((size_t)(yn + 1) * sizeof *y_ref);
    double *y_peer = malloc((size_t)(yn + 1) * sizeof *y_peer);
    r->tolerance = bench_tolerance(yt);
    if (warm_up(&sides[0]) != 0 || !y_ref || !y_peer) {
        snprintf(r->error, sizeof r->error, "%s",
                 y_ref && y_peer ? xs.err.description : "out of memory");
        goto done;
    }
    xconv_side_output(o, p, &d, &xs, y_ref);
    for (int i = 1; i < nsides; i++) {
        bench_peer *peer = NULL;
        for (int k = 0; k < r->npeers; k++)
            if (r->peers[k].state == sides[i].state) peer = &r->peers[k];
        if (warm_up(&sides[i]) != 0) {
            sides[i].ok = false;
            snprintf(peer->unsupported, sizeof peer->unsupported, "run failed");
            continue;
        }
        if (!peer->comparable || !peer->output) continue;
        if (peer->output(peer->state, y_peer) != 0) {
            fprintf(stderr, "xconv bench: %s %s: cannot read %s's output, not checked\n",
                    p->name, xconv_dtype_name(xt), peer->name);
            continue;
        }
        double e = bench_compare(yt, y_ref, y_peer, yn);
        if (!r->checked_with || e > r->max_err) {
            r->checked_with = peer->name;
            r->max_err = e;
        }
        if (!(e <= r->tolerance)) {
            r->mismatch = true;
            fprintf(stderr,
                    "xconv bench: MISMATCH %s %s: xconv (%s) and %s differ by %.3g of max |y| "
                    "(tolerance %.3g)\n",
                    p->name, xconv_dtype_name(xt), r->engine, peer->name, e, r->tolerance);
        }
    }

    r->reps = time_sides(o, sides, nsides);
    double flops = bench_flops(p);
    if (!sides[0].ok) {
        snprintf(r->error, sizeof r->error, "%s", xs.err.description);
        goto done;
    }
    r->xconv_gflops = flops / sides[0].seconds * 1e-9;
    for (int k = 0; k < r->npeers; k++) r->peer_gflops[k] = -1;
    for (int i = 1; i < nsides; i++)
        for (int k = 0; k < r->npeers; k++) {
            if (r->peers[k].state != sides[i].state) continue;
            if (!sides[i].ok) {
                if (!r->peers[k].unsupported[0])
                    snprintf(r->peers[k].unsupported, sizeof r->peers[k].unsupported,
                             "run failed while timing");
                continue;
            }
            r->peer_gflops[k] = flops / sides[i].seconds * 1e-9;
            if (r->best < 0 || r->peer_gflops[k] > r->peer_gflops[r->best]) r->best = k;
        }
done:
    free(y_ref);
    free(y_peer);
    for (int k = 0; k < r->npeers; k++) bench_peer_destroy(&r->peers[k]);
    xconv_side_destroy(&xs);
    bench_data_destroy(&d);
}

/* ---- output ---------------------------------------------------------------------------- */

static double round2(double v) { return round(v * 100) / 100; }

static cJSON *result_json(const options *o, const bench_problem *p, xconv_dtype xt,
                          xconv_dtype yt, const result *r, double peak, double load)
{
    char label[32];
    dtype_label(xt, yt, label, sizeof label);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", p->name);
    cJSON_AddStringToObject(j, "op", p->op_name);
    cJSON_AddStringToObject(j, "dtype", label);
    cJSON_AddNumberToObject(j, "threads", o->threads);
    if (r->error[0]) {
        cJSON_AddNullToObject(j, "xconv_gflops");
        cJSON_AddStringToObject(j, "error", r->error);
    } else {
        cJSON_AddNumberToObject(j, "xconv_gflops", round2(r->xconv_gflops));
    }
    if (r->engine[0]) cJSON_AddStringToObject(j, "engine", r->engine);
    else cJSON_AddNullToObject(j, "engine");
    cJSON *peers = cJSON_AddObjectToObject(j, "peers");
    cJSON *impl = cJSON_CreateObject(), *unsup = cJSON_CreateObject();
    for (int k = 0; k < r->npeers; k++) {
        const bench_peer *pe = &r->peers[k];
        if (!r->error[0] && r->peer_gflops[k] >= 0) {
            cJSON_AddNumberToObject(peers, pe->name, round2(r->peer_gflops[k]));
            cJSON_AddStringToObject(impl, pe->name, pe->impl);
        } else if (pe->unsupported[0]) {
            cJSON_AddStringToObject(unsup, pe->name, pe->unsupported);
        }
    }
    if (r->best >= 0 && !r->error[0]) {
        cJSON_AddStringToObject(j, "best_peer", r->peers[r->best].name);
        cJSON_AddNumberToObject(j, "ratio", round(r->xconv_gflops / r->peer_gflops[r->best] *
                                                  1000) / 1000);
    } else {
        cJSON_AddNullToObject(j, "best_peer");
        cJSON_AddNullToObject(j, "ratio");
    }
    cJSON_AddItemToObject(j, "peer_impl", impl);
    cJSON_AddItemToObject(j, "unsupported", unsup);
    cJSON_AddStringToObject(j, "layout", o->layout == XCONV_LAYOUT_CHANNELS_LAST
                                             ? "channels_last" : "channels_first");
    cJSON_AddStringToObject(j, "problem", r->describe);
    cJSON_AddNumberToObject(j, "gflop", bench_flops(p) * 1e-9);
    cJSON_AddNumberToObject(j, "reps", r->reps);
    cJSON_AddNumberToObject(j, "peak_gflops", round2(peak));
    cJSON_AddNumberToObject(j, "load_avg", load);
    if (!r->error[0]) cJSON_AddNumberToObject(j, "pct_peak", round2(100 * r->xconv_gflops / peak));
    if (r->checked_with) {
        cJSON *c = cJSON_AddObjectToObject(j, "check");
        cJSON_AddStringToObject(c, "against", r->checked_with);
        cJSON_AddNumberToObject(c, "max_rel_err", r->max_err);
        cJSON_AddNumberToObject(c, "tolerance", r->tolerance);
        cJSON_AddBoolToObject(c, "ok", !r->mismatch);
    } else {
        cJSON_AddNullToObject(j, "check");
    }
    return j;
}

/* Table columns: the peer configurations built in and selected. */
static const char *columns[2 * BENCH_MAX_CONFIGS];
static int ncolumns;

/* The 1-minute load average (-1 if unknown). Other work on the machine skews every number:
 * the bench reports how much there was, and warns when it is a lot. */
static double machine_load(void)
{
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &load) != 1) load = -1;
    if (f) fclose(f);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && load > 0.5 * (double)cpus)
        fprintf(stderr,
                "xconv bench: warning: load average %.2f on %ld CPUs: other work skews these "
                "timings, multi-threaded peers (spinning OpenMP and pthreadpool barriers) most\n",
                load, cpus);
    return load;
}

static void table_header(const options *o, double peak, const char *isa, double load)
{
    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (f) fclose(f);
    printf("xconv %s bench: %s, %d thread%s, f32 FMA peak %.1f GFLOP/s (%s); xconv layout %s; "
           "load average %.2f at start\n",
           xconv_version(), model, o->threads, o->threads > 1 ? "s" : "", peak, isa,
           o->layout == XCONV_LAYOUT_CHANNELS_LAST ? "channels_last" : "channels_first", load);
    printf("GFLOP/s, median of interleaved reps; ratio = xconv / best peer; "
           "check = max |xconv - peer| / max |y|\n\n");
    printf("%-14s %-8s %9s %5s %-14s", "name", "dtype", "xconv", "%pk", "engine");
    for (int c = 0; c < ncolumns; c++) printf(" %12s", columns[c]);
    printf(" %-13s %6s  %s\n", "best peer", "ratio", "check");
}

static void table_row(const bench_problem *p, xconv_dtype xt, xconv_dtype yt, const result *r,
                      double peak)
{
    char label[32];
    dtype_label(xt, yt, label, sizeof label);
    if (r->error[0]) {
        printf("%-14s %-8s xconv FAILED: %s\n", p->name, label, r->error);
        fflush(stdout);
        return;
    }
    printf(r->xconv_gflops >= 1 ? "%-14s %-8s %9.1f %5.1f %-14s" : "%-14s %-8s %9.3f %5.1f %-14s",
           p->name, label, r->xconv_gflops,
           100 * r->xconv_gflops / peak, r->engine);
    for (int c = 0; c < ncolumns; c++) {
        const char *cell = "-";
        char num[32];
        for (int k = 0; k < r->npeers; k++)
            if (strcmp(r->peers[k].name, columns[c]) == 0 && r->peer_gflops[k] >= 0) {
                snprintf(num, sizeof num, r->peer_gflops[k] >= 1 ? "%.1f" : "%.3f",
                         r->peer_gflops[k]);
                cell = num;
            }
        printf(" %12s", cell);
    }
    if (r->best >= 0)
        printf(" %-13s %6.2f", r->peers[r->best].name, r->xconv_gflops / r->peer_gflops[r->best]);
    else
        printf(" %-13s %6s", "-", "-");
    if (r->checked_with)
        printf("  %s %.1e", r->mismatch ? "MISMATCH" : "ok", r->max_err);
    else
        printf("  -");
    printf("\n");
    fflush(stdout);
}

/* ---- options --------------------------------------------------------------------------- */

/* The default suite: the compile-time path, then ../shared beside the executable's repo
 * (build dir one level down), then relative to the working directory. With --device cuda,
 * where ../shared does not travel to the device machine, then the copy of the gpu list in
 * tests/gpu/suite_gpu.json beside the executable's repo, or under the working directory. */
static const char *default_suite(char *buf, size_t len, bool cuda)
{
#ifdef XCONV_BENCH_DEFAULT_SUITE
    if (access(XCONV_BENCH_DEFAULT_SUITE, R_OK) == 0) return XCONV_BENCH_DEFAULT_SUITE;
#endif
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(exe, '/');
            if (slash) *slash = '\0';
        }
        snprintf(buf, len, "%s/../shared/bench/suite.json", exe);
        if (access(buf, R_OK) == 0) return buf;
        snprintf(buf, len, "%s/tests/gpu/suite_gpu.json", exe);
        if (cuda && access("../shared/bench/suite.json", R_OK) != 0 && access(buf, R_OK) == 0)
            return buf;
    }
    if (cuda && access("../shared/bench/suite.json", R_OK) != 0 &&
        access("tests/gpu/suite_gpu.json", R_OK) == 0)
        return "tests/gpu/suite_gpu.json";
    return "../shared/bench/suite.json";
}

static int parse_dtypes(const char *text, options *o)
{
    if (strcmp(text, "all") == 0) {
        for (int d = 1; d < XCONV_DTYPE_COUNT; d++, o->ndtypes++)
            o->x_dtypes[o->ndtypes] = o->y_dtypes[o->ndtypes] = (xconv_dtype)d;
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->ndtypes == MAX_DTYPES)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--dtype lists too many dtypes");
        char *colon = strchr(tok, ':');
        if (colon) *colon = '\0';
        xconv_dtype x = xconv_dtype_from_name(tok);
        xconv_dtype y = colon ? xconv_dtype_from_name(colon + 1) : x;
        if (x == XCONV_DTYPE_INVALID || y == XCONV_DTYPE_INVALID)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--dtype: unknown dtype '%s'",
                                  x == XCONV_DTYPE_INVALID ? tok : colon + 1);
        if (!xconv_dtype_can_widen(x, y))
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench",
                                  "--dtype: y dtype %s cannot hold the results of %s",
                                  xconv_dtype_name(y), xconv_dtype_name(x));
        o->x_dtypes[o->ndtypes] = x;
        o->y_dtypes[o->ndtypes++] = y;
    }
    return o->ndtypes ? 0 : xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--dtype is empty");
}

static int parse_number(const xconv_opt *opt, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(opt->value, &end);
    if (end == opt->value || *end || !(v >= lo && v <= hi))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--%s %s must be a number in [%g, %g]",
                              opt->name, opt->value, lo, hi);
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv, options *o, bool *help)
{
    xconv_opt opts[] = {
        {"help", false, NULL, false},    {"suite", true, NULL, false},
        {"list", true, NULL, false},     {"filter", true, NULL, false},
        {"dtype", true, NULL, false},    {"threads", true, NULL, false},
        {"layout", true, NULL, false},   {"engine", true, NULL, false},
        {"peers", true, NULL, false},    {"reps", true, NULL, false},
        {"min-time", true, NULL, false}, {"budget", true, NULL, false},
        {"json", false, NULL, false},    {"settle", true, NULL, false},
        {"verbose", false, NULL, false}, {"pack-each-run", false, NULL, false},
        {"allow-tf32", false, NULL, false}, {"allow-fp8-fast-accum", false, NULL, false},
        {"device", true, NULL, false},   {"no-rotate", false, NULL, false},
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    int rc = xconv_args_parse(argc, argv, opts, nopts, "bench");
    if (rc) return rc;
    *help = opts[0].seen;
    memset(o, 0, sizeof *o);
    const xconv_opt *device = xconv_args_get(opts, nopts, "device");
    if (device->seen) {
        if (strcmp(device->value, "cuda") == 0) o->cuda = true;
        else if (strcmp(device->value, "cpu") != 0)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--device %s must be cpu or cuda",
                                  device->value);
    }
    o->rotate = !xconv_args_get(opts, nopts, "no-rotate")->seen;
    o->suite = xconv_args_get(opts, nopts, "suite")->value;
    o->list = opts[2].seen ? opts[2].value : o->cuda ? "gpu" : "cpu";
    o->filter = opts[3].value;
    o->engine = opts[7].value;
    o->pack_each_run = xconv_args_get(opts, nopts, "pack-each-run")->seen;
    o->allow_tf32 = xconv_args_get(opts, nopts, "allow-tf32")->seen;
    o->fp8_fast = xconv_args_get(opts, nopts, "allow-fp8-fast-accum")->seen;
    o->json = opts[12].seen;
    o->verbose = opts[14].seen;
    o->onednn = o->xnnpack = !o->cuda;
    o->cudnn = o->cuda;
    if ((rc = parse_dtypes(opts[4].seen ? opts[4].value : o->cuda ? "bf16" : "f32", o)))
        return rc;
    double v = 2;
    if (opts[5].seen && (rc = parse_number(&opts[5], 1, 1024, &v))) return rc;
    o->threads = (int)v;
    v = 7;
    if (opts[9].seen && (rc = parse_number(&opts[9], 1, MAX_REPS, &v))) return rc;
    o->reps = (int)v;
    o->min_time = 0.02;
    if (opts[10].seen && (rc = parse_number(&opts[10], 0, 60, &o->min_time))) return rc;
    o->budget = 6;
    if (opts[11].seen && (rc = parse_number(&opts[11], 0, 86400, &o->budget))) return rc;
    o->settle = 0.03;
    if (opts[13].seen && (rc = parse_number(&opts[13], 0, 10, &o->settle))) return rc;
    o->layout = XCONV_LAYOUT_CHANNELS_LAST;
    if (opts[6].seen) {
        const char *l = opts[6].value;
        if (strcmp(l, "channels_first") == 0 || strcmp(l, "ncx") == 0)
            o->layout = XCONV_LAYOUT_CHANNELS_FIRST;
        else if (strcmp(l, "channels_last") != 0 && strcmp(l, "nxc") != 0)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench",
                                  "--layout %s must be channels_last or channels_first", l);
    }
    if (opts[8].seen && o->cuda) {
        const char *s = opts[8].value;
        o->cudnn = strcmp(s, "cudnn") == 0 || strcmp(s, "all") == 0;
        if (!o->cudnn && strcmp(s, "none") != 0)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench",
                                  "--peers %s must be all, none or cudnn with --device cuda", s);
    } else if (opts[8].seen) {
        const char *s = opts[8].value;
        o->onednn = strstr(s, "onednn") || strcmp(s, "all") == 0;
        o->xnnpack = strstr(s, "xnnpack") || strcmp(s, "all") == 0;
        if (!o->onednn && !o->xnnpack && strcmp(s, "none") != 0)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench",
                                  "--peers %s must be all, none, or a list of onednn, xnnpack", s);
    }
    return 0;
}

int xconv_cmd_bench(int argc, char **argv)
{
    options o;
    bool help = false;
    int rc = parse_options(argc, argv, &o, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return XCONV_EXIT_OK;
    }
    if (o.cuda) { /* before anything else: without a GPU, one clear line and exit 2 */
        char why[320];
        if (bench_cuda_check(why, sizeof why) != 0)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "--device cuda: %s", why);
    }
    char pathbuf[PATH_MAX + 64];
    const char *path = o.suite ? o.suite : default_suite(pathbuf, sizeof pathbuf, o.cuda);
    bench_problem *probs = NULL;
    int nprobs = 0;
    char msg[512];
    if (bench_suite_load(path, o.list, &probs, &nprobs, msg, sizeof msg) != 0)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "%s", msg);
    int selected = 0;
    for (int i = 0; i < nprobs; i++)
        if (!o.filter || strstr(probs[i].name, o.filter)) selected++;
    if (!selected) {
        free(probs);
        return xconv_cli_fail(XCONV_EXIT_INVALID, "bench", "no entry of list \"%s\" in %s %s%s",
                              o.list, path, o.filter ? "matches filter " : "",
                              o.filter ? o.filter : "");
    }
    if (o.cuda) {
        bench_cuda_options co = {
            .filter = o.filter, .engine = o.engine, .x_dtypes = o.x_dtypes,
            .y_dtypes = o.y_dtypes, .ndtypes = o.ndtypes, .layout = o.layout, .reps = o.reps,
            .min_time = o.min_time, .budget = o.budget, .json = o.json, .verbose = o.verbose,
            .cudnn = o.cudnn, .rotate = o.rotate, .pack_each_run = o.pack_each_run,
            .allow_tf32 = o.allow_tf32, .fp8_fast = o.fp8_fast};
        rc = bench_cuda_run(&co, probs, nprobs);
        free(probs);
        return rc;
    }

    xconv_context *ctx = NULL;
    xconv_error err;
    xconv_context_options copts = {.threads = o.threads};
    if (xconv_context_create(&copts, &ctx, &err) != XCONV_STATUS_OK) {
        free(probs);
        return xconv_cli_fail_lib(&err);
    }
    const char *isa = "";
    double peak = bench_fma_peak(o.threads, 0.5, &isa);
    ncolumns = 0;
    if (o.onednn)
        for (int i = 0; bench_onednn_names[i]; i++) columns[ncolumns++] = bench_onednn_names[i];
    if (o.xnnpack)
        for (int i = 0; bench_xnnpack_names[i]; i++) columns[ncolumns++] = bench_xnnpack_names[i];
    double load = machine_load();
    if (!o.json) table_header(&o, peak, isa, load);

    cJSON *all = cJSON_CreateArray();
    bool failed = false;
    static result r; /* large (peer records): one at a time, off the stack */
    for (int dt = 0; dt < o.ndtypes; dt++) {
        for (int i = 0; i < nprobs; i++) {
            if (o.filter && !strstr(probs[i].name, o.filter)) continue;
            if (o.verbose) {
                char label[32];
                dtype_label(o.x_dtypes[dt], o.y_dtypes[dt], label, sizeof label);
                fprintf(stderr, "%s %s:\n", probs[i].name, label);
            }
            bench_one(ctx, &o, &probs[i], o.x_dtypes[dt], o.y_dtypes[dt], &r);
            if (r.error[0] || r.mismatch) failed = true;
            if (o.json)
                cJSON_AddItemToArray(all, result_json(&o, &probs[i], o.x_dtypes[dt],
                                                      o.y_dtypes[dt], &r, peak, load));
            else
                table_row(&probs[i], o.x_dtypes[dt], o.y_dtypes[dt], &r, peak);
        }
    }
    if (o.json) {
        char *text = cJSON_Print(all);
        if (text) puts(text);
        free(text);
    }
    cJSON_Delete(all);
    xconv_context_destroy(ctx);
    free(probs);
    if (failed)
        fprintf(stderr, "xconv bench: some entries failed or mismatched (see above)\n");
    return failed ? XCONV_EXIT_FAILURE : XCONV_EXIT_OK;
}

#else

/* Without bench/ in the build this file defines nothing, and main.c reports the command as
 * not built in. The typedef keeps the translation unit non-empty (ISO C). */
typedef int xconv_bench_not_built;

#endif /* XCONV_HAVE_BENCH */
