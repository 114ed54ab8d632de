/*
 * depthwise_avx512_bf16.c — cpu.depthwise's blocks of 32 bf16 channels (XCONV_DW_X_BF16X2)
 * on CPUs with AVX512-BF16: depthwise_avx512.tmpl.h's stencils with bf16 y rounded by
 * vcvtne2ps2bf16 (DW_HW_BF16), dispatched by depthwise_avx512.c. The same kind without the
 * instruction is in depthwise_avx512_float.c.
 */
#include "cpu/engines/depthwise_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)

#define DW_SFX bf16hw
#define DW_TARGET DW_TARGET_BF16
#define DW_VNNI 0
#define DW_HW_BF16 1
#include "cpu/engines/depthwise_avx512.tmpl.h"

DW_ENTRY(bf16hw, DW_TARGET_BF16, bf16x2, XCONV_DW_X_BF16X2)

#else

typedef int xconv__dw_bf16_unused; /* (no x86-64 GNU C: nothing here) */

#endif
