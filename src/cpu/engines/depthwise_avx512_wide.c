/*
 * depthwise_avx512_wide.c — cpu.depthwise's AVX-512 fast path for x of 64-bit lanes
 * (f64, u64 / i64, c64, c128): depthwise_avx512.tmpl.h's
 * stencils instantiated for those x kinds (depthwise_avx512.h), dispatched by
 * depthwise_avx512.c.
 */
#include "cpu/engines/depthwise_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)

#define DW_SFX avx512
#define DW_TARGET DW_TARGET_AVX512
#define DW_VNNI 0
#include "cpu/engines/depthwise_avx512.tmpl.h"

DW_ENTRY(avx512, DW_TARGET_AVX512, f64, XCONV_DW_X_F64)
DW_ENTRY(avx512, DW_TARGET_AVX512, c64, XCONV_DW_X_C64)
DW_ENTRY(avx512, DW_TARGET_AVX512, c128, XCONV_DW_X_C128)
DW_ENTRY(avx512, DW_TARGET_AVX512, b64, XCONV_DW_X_B64)

#else

typedef int xconv__dw_avx512_unused; /* (no x86-64 GNU C: nothing here) */

#endif
