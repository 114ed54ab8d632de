/*
 * winograd.h — what tests may change in cpu.winograd (winograd.c).
 */
#ifndef XCONV_CPU_ENGINES_WINOGRAD_H
#define XCONV_CPU_ENGINES_WINOGRAD_H

#include <stddef.h>

/* Bytes of the channels-last copy of x with strided channels (8 MiB): a plan whose one image
 * is larger gathers each tile's inputs instead. Tests lower it to reach that path. */
extern size_t xconv__winograd_copy_bytes;

#endif
