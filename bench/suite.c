/*
 * suite.c — reads a benchmark suite file (the format of shared/bench/suite.json) with cJSON.
 *
 * A suite is an object of named lists ("cpu", "gpu"); each entry is an object:
 *   name, op ("conv1d".."conv3d", "conv_transpose1d".."conv_transpose3d"), n, cin, cout,
 *   in, k (spatial rank entries each, outermost first), and optionally stride, dil
 *   (default 1), pad (symmetric) or pad_lo/pad_hi (default 0), output_padding (transpose,
 *   default 0), groups (default 1).
 * The output size comes from DESIGN.md §1; an entry whose output would be empty is an error
 * here, so that the bench never times an invalid problem.
 */
#include "bench.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t bench_spatial(const int64_t *dims, int rank)
{
    int64_t s = 1;
    for (int i = 0; i < rank; i++) s *= dims[i];
    return s;
}

int64_t bench_x_elems(const bench_problem *p)
{
    return p->n * p->cin * bench_spatial(p->in, p->rank);
}

int64_t bench_w_elems(const bench_problem *p)
{
    /* conv [Cout, Cin/g, K], conv_transpose [Cin, Cout/g, K]: the same count. */
    return p->cout * (p->cin / p->groups) * bench_spatial(p->k, p->rank);
}

int64_t bench_y_elems(const bench_problem *p)
{
    return p->n * p->cout * bench_spatial(p->out, p->rank);
}

double bench_flops(const bench_problem *p)
{
    double k = (double)bench_spatial(p->k, p->rank);
    if (p->op == XCONV_OP_CONV)
        return 2.0 * (double)p->n * (double)p->cout * (double)(p->cin / p->groups) * k *
               (double)bench_spatial(p->out, p->rank);
    return 2.0 * (double)p->n * (double)p->cin * (double)(p->cout / p->groups) * k *
           (double)bench_spatial(p->in, p->rank);
}

#define BENCH_MAX_ELEMS 68719476736.0 /* 2^36 */

/* ---- field readers: each returns 0, or -1 with the message ------------------------------ */

typedef struct reader {
    int         index;
    const char *name;
    char       *errbuf;
    size_t      errlen;
} reader;

static int fail(const reader *r, const char *field, const char *what)
{
    snprintf(r->errbuf, r->errlen, "entry %d (%s): field \"%s\" %s", r->index,
             r->name ? r->name : "unnamed", field, what);
    return -1;
}

/* A JSON number that is a whole value in [lo, 2^31): with every field that small, the
 * size products below stay far from int64 overflow once checked against BENCH_MAX_ELEMS. */
static int as_int(const reader *r, const char *field, const cJSON *v, int64_t lo, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return fail(r, field, "must be a number");
    double d = v->valuedouble;
    if (d != (double)(int64_t)d || d < (double)lo || d > 2147483647.0) {
        char what[64];
        snprintf(what, sizeof what, "must be a whole number >= %lld", (long long)lo);
        return fail(r, field, what);
    }
    *out = (int64_t)d;
    return 0;
}

static int get_int(const reader *r, const cJSON *e, const char *field, bool required,
                   int64_t dflt, int64_t lo, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, field);
    if (!v) {
        if (required) return fail(r, field, "is missing");
        *out = dflt;
        return 0;
    }
    return as_int(r, field, v, lo, out);
}

/* A list of exactly `rank` whole numbers >= lo, or (when absent and not required) dflt. */
static int get_list(const reader *r, const cJSON *e, const char *field, int rank, bool required,
                    int64_t dflt, int64_t lo, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, field);
    if (!v) {
        if (required) return fail(r, field, "is missing");
        for (int i = 0; i < rank; i++) out[i] = dflt;
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != rank) {
        char what[64];
        snprintf(what, sizeof what, "must be a list of %d number%s", rank, rank > 1 ? "s" : "");
        return fail(r, field, what);
    }
    for (int i = 0; i < rank; i++)
        if (as_int(r, field, cJSON_GetArrayItem(v, i), lo, &out[i]) != 0) return -1;
    return 0;
}

static int parse_op(const char *s, xconv_op *op, int *rank)
{
    const char *digits;
    if (strncmp(s, "conv_transpose", 14) == 0) {
        *op = XCONV_OP_CONV_TRANSPOSE;
        digits = s + 14;
    } else if (strncmp(s, "conv", 4) == 0) {
        *op = XCONV_OP_CONV;
        digits = s + 4;
    } else {
        return -1;
    }
    if (digits[0] < '1' || digits[0] > '3' || strcmp(digits + 1, "d") != 0) return -1;
    *rank = digits[0] - '0';
    return 0;
}

static int parse_entry(const cJSON *e, int index, bench_problem *p, char *errbuf, size_t errlen)
{
    memset(p, 0, sizeof *p);
    reader r = {index, NULL, errbuf, errlen};
    if (!cJSON_IsObject(e)) return fail(&r, "(entry)", "must be an object");

    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(name) || !name->valuestring[0]) return fail(&r, "name", "must be a string");
    snprintf(p->name, sizeof p->name, "%s", name->valuestring);
    r.name = p->name;

    const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "op");
    if (!cJSON_IsString(op) || parse_op(op->valuestring, &p->op, &p->rank) != 0)
        return fail(&r, "op", "must be conv1d, conv2d, conv3d or conv_transpose1d..3d");
    snprintf(p->op_name, sizeof p->op_name, "%s", op->valuestring);
    int d = p->rank;

    if (get_int(&r, e, "n", false, 1, 0, &p->n) || get_int(&r, e, "cin", true, 0, 1, &p->cin) ||
        get_int(&r, e, "cout", true, 0, 1, &p->cout) ||
        get_int(&r, e, "groups", false, 1, 1, &p->groups) ||
        get_list(&r, e, "in", d, true, 0, 1, p->in) || get_list(&r, e, "k", d, true, 0, 1, p->k) ||
        get_list(&r, e, "stride", d, false, 1, 1, p->stride) ||
        get_list(&r, e, "dil", d, false, 1, 1, p->dil) ||
        get_list(&r, e, "output_padding", d, false, 0, 0, p->out_pad))
        return -1;

    /* pad is symmetric; pad_lo/pad_hi, when given, say each side and win over it. */
    if (get_list(&r, e, "pad", d, false, 0, 0, p->pad_lo)) return -1;
    memcpy(p->pad_hi, p->pad_lo, sizeof p->pad_hi);
    if (cJSON_GetObjectItemCaseSensitive(e, "pad_lo") &&
        get_list(&r, e, "pad_lo", d, true, 0, 0, p->pad_lo))
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(e, "pad_hi") &&
        get_list(&r, e, "pad_hi", d, true, 0, 0, p->pad_hi))
        return -1;

    if (p->cin % p->groups || p->cout % p->groups)
        return fail(&r, "groups", "must divide cin and cout");
    for (int i = 0; i < d; i++) {
        if (p->op == XCONV_OP_CONV) {
            if (p->out_pad[i]) return fail(&r, "output_padding", "is for conv_transpose only");
            int64_t span = p->in[i] + p->pad_lo[i] + p->pad_hi[i] - p->dil[i] * (p->k[i] - 1) - 1;
            if (span < 0) return fail(&r, "in", "is too small for the kernel");
            p->out[i] = span / p->stride[i] + 1;
        } else {
            int64_t max_op = p->stride[i] > p->dil[i] ? p->stride[i] : p->dil[i];
            if (p->out_pad[i] >= max_op)
                return fail(&r, "output_padding", "must be less than max(stride, dil)");
            p->out[i] = (p->in[i] - 1) * p->stride[i] - p->pad_lo[i] - p->pad_hi[i] +
                        p->dil[i] * (p->k[i] - 1) + p->out_pad[i] + 1;
            if (p->out[i] < 1) return fail(&r, "pad", "leaves an empty output");
        }
    }
    /* Element counts in double first, so the int64 products used later cannot overflow. */
    double xs = (double)p->n * (double)p->cin, ys = (double)p->n * (double)p->cout;
    double ws = (double)p->cout * (double)(p->cin / p->groups);
    for (int i = 0; i < d; i++) {
        xs *= (double)p->in[i];
        ys *= (double)p->out[i];
        ws *= (double)p->k[i];
    }
    if (xs > BENCH_MAX_ELEMS || ys > BENCH_MAX_ELEMS || ws > BENCH_MAX_ELEMS)
        return fail(&r, "in", "makes a tensor of more than 2^36 elements");
    return 0;
}

static char *read_file(const char *path, char *errbuf, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(errbuf, errlen, "cannot open suite %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(errbuf, errlen, "cannot read suite %s", path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

int bench_suite_load(const char *path, const char *list, bench_problem **out, int *count,
                     char *errbuf, size_t errlen)
{
    char *text = read_file(path, errbuf, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        /* The error pointer points into `text`: report before freeing it. */
        const char *at = cJSON_GetErrorPtr();
        size_t offset = at && at >= text ? (size_t)(at - text) : 0;
        snprintf(errbuf, errlen, "suite %s is not valid JSON (at byte %zu)", path, offset);
        free(text);
        return -1;
    }
    free(text);
    int rc = -1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, list);
    if (!cJSON_IsArray(arr)) {
        snprintf(errbuf, errlen, "suite %s has no list \"%s\"", path, list);
        goto done;
    }
    int n = cJSON_GetArraySize(arr);
    bench_problem *probs = calloc(n > 0 ? (size_t)n : 1, sizeof *probs);
    if (!probs) {
        snprintf(errbuf, errlen, "out of memory reading suite %s", path);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (parse_entry(cJSON_GetArrayItem(arr, i), i, &probs[i], errbuf, errlen) != 0) {
            free(probs);
            goto done;
        }
    }
    *out = probs;
    *count = n;
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}
