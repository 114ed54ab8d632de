/*
 * cache.c — the size of this core's L2 cache, asked once per process: the CPU engines size
 * their blocks of packed weights to half of it (cpu.igemm's reduction blocks, cpu.amx's
 * range of panels), so that the block stays there beside the rows of x that run over it.
 */
#include "cpu/isa.h"

#include <unistd.h>

static _Atomic long l2_cached; /* 0: not asked yet; sysconf runs cpuid, which traps in a VM */

size_t xconv__l2_bytes(void)
{
    long b = atomic_load_explicit(&l2_cached, memory_order_relaxed);
    if (!b) {
        long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
        l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        b = l2 > 0 ? l2 : -1;
        atomic_store_explicit(&l2_cached, b, memory_order_relaxed);
    }
    return b > 0 ? (size_t)b : 0;
}
