/*
 * amx_tiles.c — cpu.amx's use of the AMX tile unit: whether this process may use it, the
 * tile configuration, and the one block kernel (amx.h has the contract).
 *
 * Besides the tiles, cpu.amx needs AVX-512 F, BW, VL and BF16 for the stores around them.
 * Linux keeps AMX's 8 KiB of tile state off until a process asks for it with
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA); a kernel that refuses (older than 5.16, or a
 * hypervisor without the state) leaves AMX unusable and cpu.amx unsupported, so the other
 * engines run. The permission is per process, asked for once.
 *
 * Tiles: 0..3 are C (rows 0-15 x columns 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x 16-31),
 * 4 and 5 the two 16-row halves of A, 6 and 7 the two 16-column halves of B.
 */
#include "cpu/engines/amx.h"
#include "cpu/isa.h"

#include <string.h>

#if XCONV_X86 && defined(__linux__)
#include <immintrin.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_ARCH_REQ_XCOMP_PERM 0x1023
#define AMX_XFEATURE_XTILEDATA  18

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,amx-int8")))

static bool amx_probe(void)
{
    /* the conversions and stores around the tiles use AVX-512 F, BW, VL and BF16: what
     * cpu.avx512bf16 needs (amx_vec.c asks for them) */
    if (!xconv__amx_vec_available()) return false;
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    const bool tile = (d >> 24) & 1, bf16 = (d >> 22) & 1, int8 = (d >> 25) & 1;
    if (!tile || !bf16 || !int8) return false;
    return syscall(SYS_arch_prctl, AMX_ARCH_REQ_XCOMP_PERM, AMX_XFEATURE_XTILEDATA) == 0;
}

bool xconv__amx_available(void)
{
    static _Atomic int state;
    return xconv__probe_once(&state, amx_probe);
}

/* The 64-byte operand of ldtilecfg (palette 1). */
typedef struct amx_config {
    uint8_t  palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
} amx_config;

/* Loads the configuration for C and A halves of m0 and m1 rows (m1 may be 0: tiles 2, 3 and
 * 5 are then left unconfigured). GCC does not see ldtilecfg's builtin read its operand, so
 * the stores into it could be dropped: the asm names the operand as memory it reads. */
static AMX_TARGET void amx_configure(int m0, int m1)
{
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    const int rows[8] = {m0, m0, m1, m1, m0, m1, 16, 16};
    for (int t = 0; t < 8; t++)
        if (rows[t]) cfg.rows[t] = (uint8_t)rows[t], cfg.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

static AMX_TARGET void amx_tile_release(void) { _tile_release(); }

void xconv__amx_release(amx_thread *th)
{
    if (th->m0 || th->m1) amx_tile_release();
    th->m0 = th->m1 = 0;
}

/* The products of one (A half, B half) pair for the three kinds; the tile numbers are
 * immediates, so each call site names them. */
#define AMX_DP(kind, c, a, b)                                                               \
    do {                                                                                    \
        if ((kind) == AMX_BF16)                                                             \
            _tile_dpbf16ps(c, a, b);                                                        \
        else if ((kind) == AMX_S8)                                                          \
            _tile_dpbssd(c, a, b);                                                          \
        else                                                                                \
            _tile_dpbuud(c, a, b);                                                          \
    } while (0)

static inline __attribute__((always_inline)) AMX_TARGET void
amx_block_body(const amx_kind kind, const amx_block_args *k, const bool two)
{
    const size_t lda = k->lda;
    const bool keep = k->b_keep;
    if (k->init) {
        _tile_loadd(0, k->init, 128);
        _tile_loadd(1, (const char *)k->init + 64, 128);
        if (two) {
            _tile_loadd(2, k->init, 128);
            _tile_loadd(3, (const char *)k->init + 64, 128);
        }
    } else {
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
    }
    for (int64_t t = 0; t < k->ntaps; t++) {
        const char *a = k->a[t], *b = k->b[t];
        for (int64_t s = 0; s < k->ksteps; s++, a += 64, b += 2048) {
            /* B streams from L2 with the non-temporal hint (unless b_keep), keeping L1 for A's rows, which
             * the next taps read again (rn50_3x3_64 bf16: 1.9-2.0 -> 2.4 TFLOP/s). The order
             * uses each B half for both A halves before loading the other B half, which gives
             * every load the longest time after the products that read the tile before it:
             * about 10% faster than A0 B0 B1 00 01 A1 10 11 in a kernel-only benchmark. */
            if (keep)
                _tile_loadd(6, b, 64);
            else
                _tile_stream_loadd(6, b, 64);
            _tile_loadd(4, a, lda);
            AMX_DP(kind, 0, 4, 6);
            if (two) {
                _tile_loadd(5, a + 16 * lda, lda);
                AMX_DP(kind, 2, 5, 6);
            }
            if (keep)
                _tile_loadd(7, b + 1024, 64);
            else
                _tile_stream_loadd(7, b + 1024, 64);
            AMX_DP(kind, 1, 4, 7);
            if (two) AMX_DP(kind, 3, 5, 7);
        }
    }
    if (k->between) k->between(k->between_arg);
    char *c = k->c;
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 64, 128);
    if (two) {
        _tile_stored(2, c + 16 * 128, 128);
        _tile_stored(3, c + 16 * 128 + 64, 128);
    }
}

/* one instantiation per kind keeps the dispatch out of the inner loop */
/* two (both A halves live) is a constant in each body, keeping its tests out of the loop */
static AMX_TARGET void amx_block_bf16(const amx_block_args *k)
{
    if (k->m1) amx_block_body(AMX_BF16, k, true);
    else amx_block_body(AMX_BF16, k, false);
}
static AMX_TARGET void amx_block_s8(const amx_block_args *k)
{
    if (k->m1) amx_block_body(AMX_S8, k, true);
    else amx_block_body(AMX_S8, k, false);
}
static AMX_TARGET void amx_block_u8(const amx_block_args *k)
{
    if (k->m1) amx_block_body(AMX_U8, k, true);
    else amx_block_body(AMX_U8, k, false);
}

void xconv__amx_block(amx_thread *th, amx_kind kind, const amx_block_args *k)
{
    if (th->m0 != k->m0 || th->m1 != k->m1) {
        amx_configure(k->m0, k->m1);
        th->m0 = k->m0, th->m1 = k->m1;
    }
    if (kind == AMX_BF16)
        amx_block_bf16(k);
    else if (kind == AMX_S8)
        amx_block_s8(k);
    else
        amx_block_u8(k);
}

#else /* no AMX on this target */

bool xconv__amx_available(void) { return false; }
void xconv__amx_release(amx_thread *th) { th->m0 = th->m1 = 0; }
void xconv__amx_block(amx_thread *th, amx_kind kind, const amx_block_args *k)
{
    (void)th, (void)kind, (void)k;
}

#endif
