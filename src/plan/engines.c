/*
 * engines.c — THE engine table, in preference order, cpu.ref last (it supports every CPU
 * problem, so a fallback always exists). Adding an engine is adding a row here; the CUDA
 * backend's rows come from src/cuda/engines.def when it is built.
 */
#include "core/internal.h"

#include <string.h>

#define XCONV_ENGINE(sym) extern const xconv_engine sym;
#ifdef XCONV_HAVE_CUDA
#include "cuda/engines.def"
#endif
XCONV_ENGINE(xconv__engine_cpu_amx)
XCONV_ENGINE(xconv__engine_cpu_avx512bf16)
XCONV_ENGINE(xconv__engine_cpu_winograd)
XCONV_ENGINE(xconv__engine_cpu_igemm)
XCONV_ENGINE(xconv__engine_cpu_depthwise)
XCONV_ENGINE(xconv__engine_cpu_im2col)
XCONV_ENGINE(xconv__engine_cpu_ref)
#undef XCONV_ENGINE

const xconv_engine *const xconv__engines[] = {
#define XCONV_ENGINE(sym) &sym,
#ifdef XCONV_HAVE_CUDA
#include "cuda/engines.def"
#endif
#undef XCONV_ENGINE
    &xconv__engine_cpu_amx,
    &xconv__engine_cpu_avx512bf16,
    &xconv__engine_cpu_winograd,
    &xconv__engine_cpu_igemm,
    &xconv__engine_cpu_depthwise,
    &xconv__engine_cpu_im2col,
    &xconv__engine_cpu_ref,
};
const int xconv__engine_count = (int)(sizeof xconv__engines / sizeof xconv__engines[0]);

const xconv_engine *xconv__engine_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < xconv__engine_count; i++)
        if (strcmp(xconv__engines[i]->name, name) == 0) return xconv__engines[i];
    return NULL;
}

int xconv_engine_count(void) { return xconv__engine_count; }

const char *xconv_engine_name(int index)
{
    return index >= 0 && index < xconv__engine_count ? xconv__engines[index]->name : NULL;
}
