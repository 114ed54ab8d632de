/*
 * depthwise_avx512_int.c — cpu.depthwise's AVX-512 fast path for integer x of 8, 16 and 32 bits
 * (i8 and u8 also with AVX512-VNNI): depthwise_avx512.tmpl.h's
 * stencils instantiated for those x kinds (depthwise_avx512.h), dispatched by
 * depthwise_avx512.c.
 */
#include "cpu/engines/depthwise_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)

#define DW_SFX avx512
#define DW_TARGET DW_TARGET_AVX512
#define DW_VNNI 0
#include "cpu/engines/depthwise_avx512.tmpl.h"

#define DW_SFX vnni
#define DW_TARGET DW_TARGET_VNNI
#define DW_VNNI 1
#include "cpu/engines/depthwise_avx512.tmpl.h"

DW_ENTRY(avx512, DW_TARGET_AVX512, i8, XCONV_DW_X_I8)
DW_ENTRY(avx512, DW_TARGET_AVX512, u8, XCONV_DW_X_U8)
DW_ENTRY(avx512, DW_TARGET_AVX512, i16, XCONV_DW_X_I16)
DW_ENTRY(avx512, DW_TARGET_AVX512, u16, XCONV_DW_X_U16)
DW_ENTRY(avx512, DW_TARGET_AVX512, b32, XCONV_DW_X_B32)
DW_ENTRY(vnni, DW_TARGET_VNNI, i8, XCONV_DW_X_I8)
DW_ENTRY(vnni, DW_TARGET_VNNI, u8, XCONV_DW_X_U8)

#else

typedef int xconv__dw_avx512_unused; /* (no x86-64 GNU C: nothing here) */

#endif
