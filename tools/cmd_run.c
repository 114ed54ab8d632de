/*
 * cmd_run.c — `xconv run`: one conv or conv_transpose on .npy files.
 *
 *   x.npy, w.npy [, bias.npy]  --convert-->  op dtype (bias: out dtype)  --plan/execute-->
 *   y (out dtype)  --widen bf16/f8 to f32-->  out.npy (written atomically, only on success)
 *
 * Everything the user can get wrong is checked before the output file is created, and the
 * file appears only by a rename after the last byte was written, so a failed run never
 * leaves an output behind.
 */
#include "args.h"
#include "convert.h"
#include "npy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char run_usage[] =
    "usage: xconv run --op conv|conv_transpose --x X.npy --w W.npy [--bias B.npy] --out Y.npy\n"
    "                 [--layout channels_first|channels_last] [--stride S] [--padding P]\n"
    "                 [--dilation D] [--output-padding OP] [--groups G] [--dtype DT]\n"
    "                 [--out-dtype DT] [--engine NAME] [--threads N] [--allow-tf32]\n"
    "                 [--allow-fp8-fast-accum] [-v]\n"
    "\n"
    "  S, D, OP: one integer for every spatial dim, or a comma list with one per dim.\n"
    "  P: the same, where each entry is p (both sides) or lo:hi.\n"
    "  The spatial rank is x's rank minus 2. Defaults: channels_first, stride 1, padding 0,\n"
    "  dilation 1, output padding 0, groups 1, dtype = x's dtype, out dtype = dtype.\n"
    "  Layouts: channels_first x [N, C, X..], conv w [Cout, Cin/g, K..],\n"
    "           conv_transpose w [Cin, Cout/g, K..]; channels_last x [N, X.., C],\n"
    "           w [Cout, K.., Cin/g] for both ops (MLX).\n"
    "  Dtypes: u8 i8 u16 i16 u32 i32 u64 i64 f8e4m3 f8e5m2 f16 bf16 f32 f64 c64 c128.\n"
    "  x and w are converted to DT, bias to the out dtype; values that do not convert\n"
    "  exactly to an integer dtype are errors. bf16 and f8 outputs are written as f32.\n"
    "  --allow-tf32: reduced-precision f32 engines may run (cpu.winograd, cuda.f32_bf16x3).\n"
    "  --allow-fp8-fast-accum: fp8 convs may sum in the tensor cores' fp8 accumulation\n"
    "                 (cuda.igemm_wgmma's native fp8 wgmma on compute capability 9.0).\n"
    "  Exit status: 0 ok, 2 invalid argument or input, 1 other failure.\n";

enum { IN_X, IN_W, IN_BIAS, IN_COUNT };

typedef struct run_state {
    const char   *path[IN_COUNT];
    uint8_t      *bytes[IN_COUNT];
    npy_array     arr[IN_COUNT];
    void         *data[IN_COUNT];  /* converted, C order */
    void         *y;
    xconv_context *ctx;
    xconv_plan   *plan;
} run_state;

static void run_state_free(run_state *s)
{
    for (int i = 0; i < IN_COUNT; i++) {
        free(s->bytes[i]);
        free(s->data[i]);
    }
    free(s->y);
    xconv_plan_destroy(s->plan);
    xconv_context_destroy(s->ctx);
}

static int read_input(run_state *s, int which)
{
    char why[256], op[300];
    snprintf(op, sizeof op, "read %s", s->path[which]);
    int rc = xconv_npy_load(s->path[which], &s->bytes[which], &s->arr[which], why, sizeof why);
    if (rc == 1) return xconv_cli_fail(XCONV_EXIT_FAILURE, op, "%s", why);
    if (rc == 2) return xconv_cli_fail(XCONV_EXIT_INVALID, op, "%s", why);
    return XCONV_EXIT_OK;
}

static int convert_input(run_state *s, int which, xconv_dtype dtype)
{
    char why[400], op[300];
    snprintf(op, sizeof op, "read %s", s->path[which]);
    int rc = xconv_tool_convert(&s->arr[which], dtype, &s->data[which], why, sizeof why);
    if (rc == -2) return xconv_cli_fail(XCONV_EXIT_FAILURE, op, "out of memory");
    if (rc) return xconv_cli_fail(XCONV_EXIT_INVALID, op, "%s", why);
    return XCONV_EXIT_OK;
}

static int parse_dtype(const char *text, const char *option, xconv_dtype *out)
{
    *out = xconv_dtype_from_name(text);
    if (*out == XCONV_DTYPE_INVALID)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run",
                              "unknown dtype '%s' for --%s (expected u8 i8 u16 i16 u32 i32 u64 "
                              "i64 f8e4m3 f8e5m2 f16 bf16 f32 f64 c64 c128)", text, option);
    return XCONV_EXIT_OK;
}

static int check_engine(const char *name)
{
    char known[512] = "";
    size_t n = 0;
    for (int i = 0; i < xconv_engine_count(); i++) {
        const char *e = xconv_engine_name(i);
        if (e && strcmp(e, name) == 0) return XCONV_EXIT_OK;
        int w = snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", e ? e : "?");
        if (w > 0 && (size_t)w < sizeof known - n) n += (size_t)w;
    }
    return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "unknown engine '%s' (built in: %s)", name,
                          known);
}

/* Stride, dilation, padding, output padding and groups from the options into params. */
static int parse_geometry(xconv_opt *opts, int nopts, int rank, xconv_params *p)
{
    char why[300];
    const char *v;
    if ((v = xconv_args_get(opts, nopts, "stride")->value) &&
        xconv_args_int_list(v, rank, "stride", p->stride, why, sizeof why))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "%s", why);
    if ((v = xconv_args_get(opts, nopts, "dilation")->value) &&
        xconv_args_int_list(v, rank, "dilation", p->dilation, why, sizeof why))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "%s", why);
    if ((v = xconv_args_get(opts, nopts, "output-padding")->value) &&
        xconv_args_int_list(v, rank, "output-padding", p->output_padding, why, sizeof why))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "%s", why);
    if ((v = xconv_args_get(opts, nopts, "padding")->value) &&
        xconv_args_pad_list(v, rank, "padding", p->pad_lo, p->pad_hi, why, sizeof why))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "%s", why);
    if ((v = xconv_args_get(opts, nopts, "groups")->value) && !xconv_args_int(v, &p->groups))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "--groups '%s' must be an integer", v);
    return XCONV_EXIT_OK;
}

static int run(run_state *s, xconv_opt *opts, int nopts)
{
#define OPT(name) (xconv_args_get(opts, nopts, name)->value)
    static const char *const required[] = {"op", "x", "w", "out"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!OPT(required[i]))
            return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "missing required option '--%s'",
                                  required[i]);
    xconv_op op;
    if (strcmp(OPT("op"), "conv") == 0)
        op = XCONV_OP_CONV;
    else if (strcmp(OPT("op"), "conv_transpose") == 0)
        op = XCONV_OP_CONV_TRANSPOSE;
    else
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run",
                              "unknown --op '%s' (expected conv or conv_transpose)", OPT("op"));
    xconv_layout layout = XCONV_LAYOUT_CHANNELS_FIRST;
    if (OPT("layout")) {
        if (strcmp(OPT("layout"), "channels_last") == 0)
            layout = XCONV_LAYOUT_CHANNELS_LAST;
        else if (strcmp(OPT("layout"), "channels_first") != 0)
            return xconv_cli_fail(XCONV_EXIT_INVALID, "run",
                                  "unknown --layout '%s' (expected channels_first or "
                                  "channels_last)", OPT("layout"));
    }
    xconv_dtype dtype = XCONV_DTYPE_INVALID, out_dtype = XCONV_DTYPE_INVALID;
    int rc;
    if (OPT("dtype") && (rc = parse_dtype(OPT("dtype"), "dtype", &dtype))) return rc;
    if (OPT("out-dtype") && (rc = parse_dtype(OPT("out-dtype"), "out-dtype", &out_dtype)))
        return rc;
    int64_t threads = 0;
    if (OPT("threads") && (!xconv_args_int(OPT("threads"), &threads) || threads < 0 ||
                           threads > 4096))
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run",
                              "--threads '%s' must be an integer from 0 (all cores) to 4096",
                              OPT("threads"));
    if (OPT("engine") && (rc = check_engine(OPT("engine")))) return rc;

    s->path[IN_X] = OPT("x");
    s->path[IN_W] = OPT("w");
    s->path[IN_BIAS] = OPT("bias");
    for (int i = 0; i < IN_COUNT; i++)
        if (s->path[i] && (rc = read_input(s, i))) return rc;

    const npy_array *x = &s->arr[IN_X], *w = &s->arr[IN_W], *b = &s->arr[IN_BIAS];
    if (x->ndim < 3 || x->ndim > XCONV_MAX_RANK)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run",
                              "x has rank %d; it must be 3, 4 or 5 (batch, channels and 1 to 3 "
                              "spatial dims)", x->ndim);
    if (w->ndim != x->ndim)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run",
                              "w has rank %d but x has rank %d; they must match", w->ndim,
                              x->ndim);
    if (s->path[IN_BIAS] && b->ndim != 1)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "run", "bias has rank %d; it must be 1",
                              b->ndim);
    if (dtype == XCONV_DTYPE_INVALID) {
        dtype = xconv_npy_dtype(x);
        if (dtype == XCONV_DTYPE_INVALID) {
            char op_name[300];
            snprintf(op_name, sizeof op_name, "read %s", s->path[IN_X]);
            return xconv_cli_fail(XCONV_EXIT_INVALID, op_name,
                                  "bool arrays are not supported (save as an integer dtype)");
        }
    }
    if (out_dtype == XCONV_DTYPE_INVALID) out_dtype = dtype;

    int rank = x->ndim - 2;
    xconv_params params = xconv_params_init(op, rank, layout);
    if ((rc = parse_geometry(opts, nopts, rank, &params))) return rc;

    xconv_error err;
    int64_t y_shape[XCONV_MAX_RANK];
    if (xconv_output_shape(&params, x->shape, w->shape, y_shape, &err) != XCONV_STATUS_OK)
        return xconv_cli_fail_lib(&err);

    if ((rc = convert_input(s, IN_X, dtype)) || (rc = convert_input(s, IN_W, dtype))) return rc;
    if (s->path[IN_BIAS] && (rc = convert_input(s, IN_BIAS, out_dtype))) return rc;

    /* A huge stride can make y far larger than the inputs; refuse it before malloc. */
    size_t y_bytes = xconv_dtype_size(out_dtype);
    for (int i = 0; i < x->ndim; i++) {
        if (y_shape[i] != 0 && y_bytes > SIZE_MAX / (size_t)y_shape[i]) {
            char shape[160] = "";
            for (int k = 0, n = 0; k < x->ndim && n >= 0 && (size_t)n < sizeof shape; k++)
                n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, k ? ", " : "",
                              y_shape[k]);
            return xconv_cli_fail(XCONV_EXIT_FAILURE, "run",
                                  "y of shape [%s] does not fit in memory", shape);
        }
        y_bytes *= (size_t)y_shape[i];
    }
    s->y = malloc(y_bytes ? y_bytes : 1);
    if (!s->y)
        return xconv_cli_fail(XCONV_EXIT_FAILURE, "run", "out of memory allocating y (%zu bytes)",
                              y_bytes);

    xconv_tensor xt = xconv_tensor_contiguous(dtype, x->ndim, x->shape, s->data[IN_X]);
    xconv_tensor wt = xconv_tensor_contiguous(dtype, w->ndim, w->shape, s->data[IN_W]);
    xconv_tensor bt = xconv_tensor_contiguous(out_dtype, 1, b->shape, s->data[IN_BIAS]);
    xconv_tensor yt = xconv_tensor_contiguous(out_dtype, x->ndim, y_shape, s->y);
    xconv_context_options copts = {.threads = (int)threads};
    if (xconv_context_create(&copts, &s->ctx, &err) != XCONV_STATUS_OK)
        return xconv_cli_fail_lib(&err);
    xconv_plan_options popts = {.engine = OPT("engine"),
                                .allow_tf32 = xconv_args_get(opts, nopts, "allow-tf32")->seen,
                                .allow_fp8_fast_accum =
                                    xconv_args_get(opts, nopts, "allow-fp8-fast-accum")->seen};
    if (xconv_plan_create(s->ctx, &params, &xt, &wt, s->path[IN_BIAS] ? &bt : NULL, &yt, &popts,
                          &s->plan, &err) != XCONV_STATUS_OK)
        return xconv_cli_fail_lib(&err);
    double t0 = xconv_cli_now();
    if (xconv_plan_execute(s->plan, s->data[IN_X], s->data[IN_W], s->data[IN_BIAS], s->y, NULL, 0,
                           &err) != XCONV_STATUS_OK)
        return xconv_cli_fail_lib(&err);
    double ms = 1e3 * (xconv_cli_now() - t0);

    char why[300], op_name[300];
    snprintf(op_name, sizeof op_name, "write %s", OPT("out"));
    if (xconv_tool_save(OPT("out"), out_dtype, x->ndim, y_shape, s->y, why, sizeof why))
        return xconv_cli_fail(XCONV_EXIT_FAILURE, op_name, "%s", why);

    if (xconv_args_get(opts, nopts, "verbose")->seen) {
        printf("%s\n", xconv_plan_describe(s->plan));
        printf("y shape [");
        for (int i = 0; i < x->ndim; i++) printf("%s%" PRId64, i ? ", " : "", y_shape[i]);
        printf("] %s, engine %s, %d threads, %.3f ms\n", xconv_dtype_name(out_dtype),
               xconv_plan_engine(s->plan), xconv_context_threads(s->ctx), ms);
    }
    return XCONV_EXIT_OK;
#undef OPT
}

int xconv_cmd_run(int argc, char **argv)
{
    xconv_opt opts[] = {
        {"op", true, NULL, false},        {"x", true, NULL, false},
        {"w", true, NULL, false},         {"bias", true, NULL, false},
        {"out", true, NULL, false},       {"layout", true, NULL, false},
        {"stride", true, NULL, false},    {"padding", true, NULL, false},
        {"dilation", true, NULL, false},  {"output-padding", true, NULL, false},
        {"groups", true, NULL, false},    {"dtype", true, NULL, false},
        {"out-dtype", true, NULL, false}, {"engine", true, NULL, false},
        {"threads", true, NULL, false},   {"verbose", false, NULL, false},
        {"help", false, NULL, false},     {"allow-tf32", false, NULL, false},
        {"allow-fp8-fast-accum", false, NULL, false},
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    int rc = xconv_args_parse(argc, argv, opts, nopts, "run");
    if (rc) return rc;
    if (xconv_args_get(opts, nopts, "help")->seen) {
        fputs(run_usage, stdout);
        return XCONV_EXIT_OK;
    }
    run_state s = {0};
    rc = run(&s, opts, nopts);
    run_state_free(&s);
    return rc;
}
