/*
 * cmd_caps.c — `xconv caps`: the table op x dtype x backend -> engine.
 *
 * For every op, dtype and backend, a few representative 2-D problems (a dense 3x3, a 1x1
 * and a depthwise 3x3, channels-first, y of the input dtype) are put to every engine of that
 * backend through xconv_engine_supports, and to the planner through xconv_plan_create; the
 * row lists the engines that accept the problem and the one the planner picks. The CUDA
 * backend is shown as "not built" unless an engine named "cuda.*" exists.
 */
#include "args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct caps_variant {
    const char *name;
    int64_t     k;       /* kernel size in both dims */
    int64_t     pad;
    int64_t     groups;
} caps_variant;

static const caps_variant variants[] = {
    {"3x3", 3, 1, 1},
    {"1x1", 1, 0, 1},
    {"depthwise", 3, 1, 8},
};

enum { CAPS_N = 1, CAPS_C = 8, CAPS_X = 8 };

static bool backend_built(const char *prefix)
{
    for (int i = 0; i < xconv_engine_count(); i++) {
        const char *e = xconv_engine_name(i);
        if (e && strncmp(e, prefix, strlen(prefix)) == 0) return true;
    }
    return false;
}

/* One row: the engines of `prefix` that support the problem and the planner's choice. */
static void caps_row(xconv_op op, xconv_dtype dtype, xconv_device device, const char *prefix,
                     const caps_variant *v, void *buf_x, void *buf_w, void *buf_y)
{
    xconv_params p = xconv_params_init(op, 2, XCONV_LAYOUT_CHANNELS_FIRST);
    p.pad_lo[0] = p.pad_hi[0] = p.pad_lo[1] = p.pad_hi[1] = v->pad;
    p.groups = v->groups;
    int64_t xs[4] = {CAPS_N, CAPS_C, CAPS_X, CAPS_X};
    /* conv w [Cout, Cin/g, K, K]; conv_transpose w [Cin, Cout/g, K, K]: both [8, 8/g, K, K]. */
    int64_t ws[4] = {CAPS_C, CAPS_C / v->groups, v->k, v->k};
    int64_t ys[4] = {CAPS_N, CAPS_C, CAPS_X, CAPS_X};
    xconv_tensor x = xconv_tensor_contiguous(dtype, 4, xs, buf_x);
    xconv_tensor w = xconv_tensor_contiguous(dtype, 4, ws, buf_w);
    xconv_tensor y = xconv_tensor_contiguous(dtype, 4, ys, buf_y);
    x.device = w.device = y.device = device;

    char supported[512] = "";
    size_t n = 0;
    xconv_error err;
    for (int i = 0; i < xconv_engine_count(); i++) {
        const char *e = xconv_engine_name(i);
        if (!e || strncmp(e, prefix, strlen(prefix)) != 0) continue;
        if (xconv_engine_supports(e, &p, &x, &w, NULL, &y, &err) != XCONV_STATUS_OK) continue;
        int wr = snprintf(supported + n, sizeof supported - n, "%s%s", n ? " " : "", e);
        if (wr > 0 && (size_t)wr < sizeof supported - n) n += (size_t)wr;
    }
    char picked[300];
    xconv_plan *plan = NULL;
    if (xconv_plan_create(NULL, &p, &x, &w, NULL, &y, NULL, &plan, &err) == XCONV_STATUS_OK) {
        snprintf(picked, sizeof picked, "%s", xconv_plan_engine(plan));
        xconv_plan_destroy(plan);
    } else {
        snprintf(picked, sizeof picked, "(%s: %s)", xconv_status_name(err.status),
                 err.description);
    }
    printf("%-15s %-7s %-8s %-10s %-18s %s\n", op == XCONV_OP_CONV ? "conv" : "conv_transpose",
           xconv_dtype_name(dtype), device == XCONV_DEVICE_CPU ? "cpu" : "cuda", v->name, picked,
           n ? supported : "(none)");
}

int xconv_cmd_caps(int argc, char **argv)
{
    xconv_opt opts[] = {{"help", false, NULL, false}};
    int rc = xconv_args_parse(argc, argv, opts, 1, "caps");
    if (rc) return rc;
    if (opts[0].seen) {
        fputs("usage: xconv caps\n"
              "Prints, for each op, dtype and backend, the engine the planner picks for small\n"
              "2-D problems (dense 3x3, 1x1, depthwise 3x3; n1 c8 x8x8, channels_first) and\n"
              "every engine that supports them.\n",
              stdout);
        return XCONV_EXIT_OK;
    }

    /* The largest tensor is w (8*8*3*3 elements) at 16 bytes per c128 element. */
    size_t bytes = (size_t)CAPS_C * CAPS_C * 9 * 16;
    void *bx = calloc(1, bytes), *bw = calloc(1, bytes), *by = calloc(1, bytes);
    if (!bx || !bw || !by) {
        free(bx);
        free(bw);
        free(by);
        return xconv_cli_fail(XCONV_EXIT_FAILURE, "caps", "out of memory");
    }
    printf("xconv %s, %d engines:", xconv_version(), xconv_engine_count());
    for (int i = 0; i < xconv_engine_count(); i++) printf(" %s", xconv_engine_name(i));
    printf("\nproblems: 2-D n%d c%d->c%d x%dx%d channels_first, y dtype = x dtype; variants "
           "3x3 (p1), 1x1, depthwise 3x3 (g%d)\n\n",
           CAPS_N, CAPS_C, CAPS_C, CAPS_X, CAPS_X, CAPS_C);
    /* A CUDA build on a machine without a usable GPU: say why once, not in every row. */
    bool cuda = backend_built("cuda.");
    const char *cuda_note = cuda ? NULL : "not built";
    if (cuda) {
        xconv_params p = xconv_params_init(XCONV_OP_CONV, 2, XCONV_LAYOUT_CHANNELS_FIRST);
        int64_t s4[4] = {1, 1, 1, 1};
        xconv_tensor x = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, s4, bx);
        xconv_tensor w = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, s4, bw);
        xconv_tensor y = xconv_tensor_contiguous(XCONV_DTYPE_F32, 4, s4, by);
        x.device = w.device = y.device = XCONV_DEVICE_CUDA;
        xconv_plan *plan = NULL;
        xconv_error err;
        if (xconv_plan_create(NULL, &p, &x, &w, NULL, &y, NULL, &plan, &err) != XCONV_STATUS_OK &&
            err.status != XCONV_STATUS_INVALID_ARGUMENT) {
            printf("cuda: built, but unavailable here: %s\n", err.description);
            cuda_note = "unavailable";
        }
        xconv_plan_destroy(plan);
    }
    printf("%-15s %-7s %-8s %-10s %-18s %s\n", "op", "dtype", "backend", "variant", "planner",
           "supported by");
    for (int op = XCONV_OP_CONV; op <= XCONV_OP_CONV_TRANSPOSE; op++) {
        for (int d = 1; d < XCONV_DTYPE_COUNT; d++) {
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
                caps_row((xconv_op)op, (xconv_dtype)d, XCONV_DEVICE_CPU, "cpu.", &variants[v],
                         bx, bw, by);
            if (cuda_note) {
                printf("%-15s %-7s %-8s %-10s %s\n", op == XCONV_OP_CONV ? "conv" : "conv_transpose",
                       xconv_dtype_name((xconv_dtype)d), "cuda", "-", cuda_note);
                continue;
            }
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
                caps_row((xconv_op)op, (xconv_dtype)d, XCONV_DEVICE_CUDA, "cuda.", &variants[v],
                         bx, bw, by);
        }
    }
    free(bx);
    free(bw);
    free(by);
    return XCONV_EXIT_OK;
}
