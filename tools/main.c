/*
 * main.c — the xconv command line: dispatches to one function per command (cmd_*.c).
 */
#include "args.h"

#include <stdio.h>
#include <string.h>

/* `bench` lives in its own file, which may not be part of every build: a weak reference
 * lets the dispatcher offer it exactly when it is linked in. */
#if defined(__GNUC__)
#define XCONV_WEAK __attribute__((weak))
#else
#define XCONV_WEAK
#endif
int xconv_cmd_bench(int argc, char **argv) XCONV_WEAK;

static const char usage[] =
    "usage: xconv <command> [options]\n"
    "\n"
    "xconv runs convolutions (conv and conv_transpose, 1-3-D, any groups, both layouts,\n"
    "16 dtypes) through the xconv library.\n"
    "\n"
    "commands:\n"
    "  run       run one conv or conv_transpose on .npy files (xconv run --help)\n"
    "  caps      print which engines serve each op x dtype x backend\n"
    "  demo      run a small audio/vision pipeline in several dtypes, checked against the\n"
    "            reference engine\n"
    "  bench     benchmark a suite (when built in)\n"
    "  version   print the library version\n"
    "\n"
    "Exit status: 0 ok, 2 invalid argument or input, 1 other failure.\n";

typedef int (*command_fn)(int argc, char **argv);

int main(int argc, char **argv)
{
    if (argc < 2)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "xconv", "no command given (try 'xconv --help')");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return XCONV_EXIT_OK;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("xconv %s\n", xconv_version());
        return XCONV_EXIT_OK;
    }
    command_fn fn = NULL;
    if (strcmp(cmd, "run") == 0) fn = xconv_cmd_run;
    if (strcmp(cmd, "caps") == 0) fn = xconv_cmd_caps;
    if (strcmp(cmd, "demo") == 0) fn = xconv_cmd_demo;
    if (strcmp(cmd, "bench") == 0) {
        if (!xconv_cmd_bench)
            return xconv_cli_fail(XCONV_EXIT_FAILURE, "bench", "not built into this xconv");
        fn = xconv_cmd_bench;
    }
    if (!fn)
        return xconv_cli_fail(XCONV_EXIT_INVALID, "xconv",
                              "unknown command '%s' (try 'xconv --help')", cmd);
    return fn(argc - 1, argv + 1);
}
