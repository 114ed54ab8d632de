/*
 * isa.h — what the CPU kernels share about instruction sets: whether x86 target attributes
 * are available, the attributes themselves, and a loop-unrolling pragma for both compilers.
 */
#ifndef XCONV_CPU_ISA_H
#define XCONV_CPU_ISA_H

#if defined(__GNUC__) && defined(__x86_64__)
#define XCONV_X86           1
#define XCONV_TARGET_AVX2   __attribute__((target("avx2,fma")))
#define XCONV_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,fma")))
#else
#define XCONV_X86 0
#endif

#if defined(__clang__)
#define XCONV_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define XCONV_UNROLL _Pragma("GCC unroll 16")
#else
#define XCONV_UNROLL
#endif

#endif
