/*
 * args.c — option parsing, integer lists and the one-line error report (see args.h).
 */
#include "args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int xconv_cli_fail(int code, const char *operation, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Exactly one line, whatever a message or a file name contains. */
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    char op[256];
    snprintf(op, sizeof op, "%s", operation && *operation ? operation : "xconv");
    for (char *c = op; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    fprintf(stderr, "xconv: error: %s: %s\n", op, msg);
    return code;
}

int xconv_cli_exit_code(xconv_status status)
{
    if (status == XCONV_STATUS_OK) return XCONV_EXIT_OK;
    return status == XCONV_STATUS_INVALID_ARGUMENT ? XCONV_EXIT_INVALID : XCONV_EXIT_FAILURE;
}

int xconv_cli_fail_lib(const xconv_error *err)
{
    const char *desc = err->description[0] ? err->description : xconv_status_name(err->status);
    return xconv_cli_fail(xconv_cli_exit_code(err->status), err->operation, "%s", desc);
}

xconv_opt *xconv_args_get(xconv_opt *opts, int nopts, const char *name)
{
    for (int i = 0; i < nopts; i++)
        if (strcmp(opts[i].name, name) == 0) return &opts[i];
    return NULL;
}

int xconv_args_parse(int argc, char **argv, xconv_opt *opts, int nopts, const char *command)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        /* The two short spellings every command understands. */
        if (strcmp(arg, "-v") == 0) arg = "--verbose";
        if (strcmp(arg, "-h") == 0) arg = "--help";
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return xconv_cli_fail(XCONV_EXIT_INVALID, command, "unexpected argument '%s'", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        xconv_opt *o = NULL;
        for (int k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == name_len && strncmp(opts[k].name, name, name_len) == 0)
                o = &opts[k];
        if (!o)
            return xconv_cli_fail(XCONV_EXIT_INVALID, command, "unknown option '--%.*s'",
                                  (int)name_len, name);
        if (o->seen)
            return xconv_cli_fail(XCONV_EXIT_INVALID, command, "option '--%s' given twice",
                                  o->name);
        o->seen = true;
        if (!o->has_value) {
            if (eq)
                return xconv_cli_fail(XCONV_EXIT_INVALID, command,
                                      "option '--%s' takes no value", o->name);
            continue;
        }
        if (eq) {
            o->value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return xconv_cli_fail(XCONV_EXIT_INVALID, command,
                                      "option '--%s' needs a value", o->name);
            o->value = argv[++i];
        }
    }
    return XCONV_EXIT_OK;
}

bool xconv_args_int(const char *text, int64_t *out)
{
    if (!text || !*text) return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno == ERANGE || *end != '\0' || end == text) return false;
    /* strtoll accepts leading spaces and '+'; an option value should not need them. */
    if (text[0] == ' ' || text[0] == '\t' || text[0] == '+') return false;
    *out = (int64_t)v;
    return true;
}

/* Splits `text` at commas into at most `max` entries copied into bufs; returns the count,
 * or -1 when there are more. */
static int split_commas(const char *text, char bufs[][64], int max)
{
    int n = 0;
    const char *s = text;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (n == max || len >= 64) return -1;
        memcpy(bufs[n], s, len);
        bufs[n][len] = '\0';
        n++;
        if (!comma) return n;
        s = comma + 1;
    }
}

static int list_fail(char *errbuf, size_t errlen, const char *option, const char *text, int rank,
                     const char *what)
{
    snprintf(errbuf, errlen, "--%s '%s' must be %s, or a comma list of %d of them (one per "
             "spatial dim)", option, text, what, rank);
    return -1;
}

int xconv_args_int_list(const char *text, int rank, const char *option, int64_t *out,
                        char *errbuf, size_t errlen)
{
    char parts[XCONV_MAX_SPATIAL][64];
    int n = split_commas(text, parts, XCONV_MAX_SPATIAL);
    if (n != 1 && n != rank) return list_fail(errbuf, errlen, option, text, rank, "an integer");
    for (int i = 0; i < rank; i++)
        if (!xconv_args_int(parts[n == 1 ? 0 : i], &out[i]))
            return list_fail(errbuf, errlen, option, text, rank, "an integer");
    return 0;
}

int xconv_args_pad_list(const char *text, int rank, const char *option, int64_t *lo,
                        int64_t *hi, char *errbuf, size_t errlen)
{
    static const char what[] = "an integer p or a pair lo:hi";
    char parts[XCONV_MAX_SPATIAL][64];
    int n = split_commas(text, parts, XCONV_MAX_SPATIAL);
    if (n != 1 && n != rank) return list_fail(errbuf, errlen, option, text, rank, what);
    for (int i = 0; i < rank; i++) {
        char *part = parts[n == 1 ? 0 : i];
        char *colon = strchr(part, ':');
        if (colon) {
            *colon = '\0';
            bool ok = xconv_args_int(part, &lo[i]) && xconv_args_int(colon + 1, &hi[i]);
            *colon = ':';
            if (!ok) return list_fail(errbuf, errlen, option, text, rank, what);
        } else {
            if (!xconv_args_int(part, &lo[i])) return list_fail(errbuf, errlen, option, text, rank, what);
            hi[i] = lo[i];
        }
    }
    return 0;
}

double xconv_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
