/*
 * depthwise_avx512_float.c — cpu.depthwise's AVX-512 fast path for x of 32, 16 and 8 bits of floating point
 * (f32, bf16, f16, e4m3, e5m2): depthwise_avx512.tmpl.h's
 * stencils instantiated for those x kinds (depthwise_avx512.h), dispatched by
 * depthwise_avx512.c.
 */
#include "cpu/engines/depthwise_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)

#define DW_SFX avx512
#define DW_TARGET DW_TARGET_AVX512
#define DW_VNNI 0
#include "cpu/engines/depthwise_avx512.tmpl.h"

DW_ENTRY(avx512, DW_TARGET_AVX512, f32, XCONV_DW_X_F32)
DW_ENTRY(avx512, DW_TARGET_AVX512, bf16, XCONV_DW_X_BF16)
DW_ENTRY(avx512, DW_TARGET_AVX512, bf16x2, XCONV_DW_X_BF16X2)
DW_ENTRY(avx512, DW_TARGET_AVX512, f16, XCONV_DW_X_F16)
DW_ENTRY(avx512, DW_TARGET_AVX512, e4m3, XCONV_DW_X_E4M3)
DW_ENTRY(avx512, DW_TARGET_AVX512, e5m2, XCONV_DW_X_E5M2)

#else

typedef int xconv__dw_avx512_unused; /* (no x86-64 GNU C: nothing here) */

#endif
