#!/usr/bin/env python3
"""Writes src/cuda/wgmma_ops.cuh: one inline-PTX wrapper per (input type, N) of the Hopper
wgmma.mma_async instructions cuda.igemm_wgmma and cuda.cf_gemm issue. The operand lists are
long and regular, so they are generated rather than typed.

    python3 scripts/gen_wgmma_ops.py > src/cuda/wgmma_ops.cuh
"""

NS = [64, 128, 160, 192, 256]
# (name, PTX shape suffix, accumulator C type, constraint, trailing immediates, the Ns):
# types 0-3 read both operands K-major; 4-5 (16-bit floats only: wgmma transposes no 8-bit
# operand) read B N-major (imm-trans-b 1), for cuda.cf_gemm's channels-first x, whose
# positions are contiguous; 6-7 (fp8, K-major like the bytes; imm-scale only, no transposes)
# sum in the tensor cores' reduced-precision fp8 accumulation (the opt-in
# allow_fp8_fast_accum).
TYPES = [
    ("bf16", "k16.f32.bf16.bf16", "float", "f", ", 1, 1, 0, 0", NS),
    ("f16", "k16.f32.f16.f16", "float", "f", ", 1, 1, 0, 0", NS),
    ("s8", "k32.s32.s8.s8", "int32_t", "r", "", NS),
    ("u8", "k32.s32.u8.u8", "int32_t", "r", "", NS),
    ("bf16_bn", "k16.f32.bf16.bf16", "float", "f", ", 1, 1, 0, 1", [128, 256]),
    ("f16_bn", "k16.f32.f16.f16", "float", "f", ", 1, 1, 0, 1", [128, 256]),
    ("e4m3", "k32.f32.e4m3.e4m3", "float", "f", ", 1, 1", NS),
    ("e5m2", "k32.f32.e5m2.e5m2", "float", "f", ", 1, 1", NS),
]

HEAD = """/*
 * wgmma_ops.cuh — the Hopper warpgroup MMA instructions cuda.igemm_wgmma and cuda.cf_gemm
 * issue (wgmma.mma_async, sm_90a), one wrapper per (input type, N): m64nNk16 for bf16 / f16
 * with f32 accumulators, m64nNk32 for s8 / u8 with s32 accumulators (no .satfinite: the sums
 * wrap, which is exact modulo 2^32) and for e4m3 / e5m2 with f32 accumulators that the tensor
 * cores keep at fewer bits (13 fraction bits measured by others on the H100: only under
 * xconv_plan_options.allow_fp8_fast_accum). A and B come from shared memory through
 * descriptors (both K-major; for types 4 and 5, B N-major), the accumulators stay in registers (the layout of
 * mma.sync's m16n8 C fragments: d[4j .. 4j+3] is the n8 block j). scale-d is 1: the caller
 * zeroes the accumulators.
 *
 * Written out by scripts/gen_wgmma_ops.py (the operand lists are long); include only from code
 * compiled for sm_90a.
 */
#ifndef XCONV_CUDA_WGMMA_OPS_CUH
#define XCONV_CUDA_WGMMA_OPS_CUH

#include <stdint.h>

namespace xconv_wgmma {
"""

TAIL = """

/* The wrapper for an input type (0 bf16, 1 f16, 2 s8, 3 u8; 4 bf16 and 5 f16 with B N-major;
 * 6 e4m3, 7 e5m2) and N. */
template <int T, int N> struct mma_op;
#define XCONV_WGMMA_OP(T, N, acc_t, fn)                                                            \\
    template <> struct mma_op<T, N> {                                                              \\
        static __device__ __forceinline__ void run(acc_t (&d)[N / 2], uint64_t da, uint64_t db)    \\
        {                                                                                          \\
            fn(d, da, db);                                                                         \\
        }                                                                                          \\
    };
"""


def wrapper(name, shape, acc, con, imm, ns, n):
    regs = n // 2
    lines = [f"__device__ __forceinline__ void wgmma_{name}_n{n}({acc} (&d)[{regs}], uint64_t da, uint64_t db)", "{"]
    lines.append(f'    asm volatile("{{ .reg .pred p; setp.ne.b32 p, %{regs + 2}, 0;\\n"')
    ops = ", ".join(f"%{i}" for i in range(regs))
    lines.append(f'                 "wgmma.mma_async.sync.aligned.m64n{n}{shape} {{{ops}}}, %{regs}, %{regs + 1}, p{imm}; }}"')
    outs = [f'"+{con}"(d[{i}])' for i in range(regs)]
    for row in range(0, regs, 8):
        chunk = ", ".join(outs[row:row + 8])
        prefix = "                 : " if row == 0 else "                   "
        suffix = "," if row + 8 < regs else ""
        lines.append(prefix + chunk + suffix)
    lines.append('                 : "l"(da), "l"(db), "r"(1));')
    lines.append("}")
    return "\n".join(lines)


def main():
    out = [HEAD]
    for n in NS:
        for t in TYPES:
            if n in t[5]:
                out.append(wrapper(*t, n))
                out.append("")
    text = "\n".join(out) + TAIL
    for ti, t in enumerate(TYPES):
        for n in t[5]:
            text += f"XCONV_WGMMA_OP({ti}, {n}, {t[2]}, wgmma_{t[0]}_n{n})\n"
    text += "#undef XCONV_WGMMA_OP\n\n} /* namespace xconv_wgmma */\n\n#endif /* XCONV_CUDA_WGMMA_OPS_CUH */\n"
    print(text, end="")


if __name__ == "__main__":
    main()
