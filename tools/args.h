/*
 * args.h — what every xconv command shares: option parsing, integer lists and the error
 * line.
 *
 * Exit codes: 0 success; 2 a validation error (a bad argument, a bad value in an input
 * file, or INVALID_ARGUMENT from the library); 1 any other failure (I/O, unsupported,
 * out of memory). Every failure prints exactly one line on stderr:
 *     xconv: error: <operation>: <description>
 */
#ifndef XCONV_TOOLS_ARGS_H
#define XCONV_TOOLS_ARGS_H

#include "xconv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { XCONV_EXIT_OK = 0, XCONV_EXIT_FAILURE = 1, XCONV_EXIT_INVALID = 2 };

/* The commands, one file each (cmd_<name>.c). argv[0] is the command name. */
int xconv_cmd_run(int argc, char **argv);
int xconv_cmd_caps(int argc, char **argv);
int xconv_cmd_demo(int argc, char **argv);

/* Prints the error line (newlines in the message become spaces) and returns `code`. */
int xconv_cli_fail(int code, const char *operation, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The exit code for a library status: 2 for INVALID_ARGUMENT, 1 for the rest. */
int xconv_cli_exit_code(xconv_status status);

/* Prints the library's error record as the error line and returns its exit code. */
int xconv_cli_fail_lib(const xconv_error *err);

/* One option of a command: "--name VALUE", "--name=VALUE" or, without a value, "--name". */
typedef struct xconv_opt {
    const char *name;      /* without the dashes */
    bool        has_value;
    const char *value;     /* set by the parser; NULL when absent */
    bool        seen;
} xconv_opt;

/* Parses argv[1..argc) against opts; an unknown option, a missing value, a repeated option
 * or a positional argument prints the error line (operation `command`) and returns 2. */
int xconv_args_parse(int argc, char **argv, xconv_opt *opts, int nopts, const char *command);

/* The option named `name` in opts (which must contain it). */
xconv_opt *xconv_args_get(xconv_opt *opts, int nopts, const char *name);

/* A whole decimal int64 ("12", "-3"); false on anything else. */
bool xconv_args_int(const char *text, int64_t *out);

/*
 * "V" (every spatial dim) or "V1,V2,...,Vrank" into out[0..rank). Returns 0, or -1 with a
 * message in errbuf naming `option`.
 */
int xconv_args_int_list(const char *text, int rank, const char *option, int64_t *out,
                        char *errbuf, size_t errlen);

/* Padding: like an int list, where each entry is "p" (lo = hi = p) or "lo:hi". */
int xconv_args_pad_list(const char *text, int rank, const char *option, int64_t *lo,
                        int64_t *hi, char *errbuf, size_t errlen);

/* Seconds on a monotonic clock. */
double xconv_cli_now(void);

#endif /* XCONV_TOOLS_ARGS_H */
