/*
 * isa.h — what the CPU kernels share about the machine: whether x86 target attributes are
 * available, the attributes themselves, a loop-unrolling pragma for both compilers, and the
 * L2 cache's size (cache.c).
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

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* This core's L2 cache in bytes (sysconf, asked once per process), or 0 where unknown. */
size_t xconv__l2_bytes(void);

/* probe()'s answer, asked once per process (*state: 0 not yet, 1 yes, 2 no): CPU probes
 * run cpuid, which traps under a hypervisor, and every plan asks. */
static inline bool xconv__probe_once(_Atomic int *state, bool (*probe)(void))
{
    int s = atomic_load_explicit(state, memory_order_acquire);
    if (!s) {
        s = probe() ? 1 : 2;
        atomic_store_explicit(state, s, memory_order_release);
    }
    return s == 1;
}

#if defined(__clang__)
#define XCONV_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define XCONV_UNROLL _Pragma("GCC unroll 16")
#else
#define XCONV_UNROLL
#endif

#endif
