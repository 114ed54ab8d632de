/*
 * bench.h — what the benchmark harness shares: a suite entry as a problem, the problem's
 * logical data, the interface every peer library implements, and the machine's FMA peak.
 *
 * All data travels in one logical form, PyTorch's channels-first order, as raw elements of
 * the x dtype: x [N, Cin, X..], w [Cout, Cin/g, K..] (conv) or [Cin, Cout/g, K..]
 * (conv_transpose). Each side (xconv, each peer configuration) builds its own layout from
 * it, and hands its output back in the same logical order as doubles, so every output can
 * be compared with every other.
 */
#ifndef XCONV_BENCH_BENCH_H
#define XCONV_BENCH_BENCH_H

#include "xconv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- suites (suite.c) ------------------------------------------------------------------ */

/* One suite entry. Spatial arrays are outermost first; only the first `rank` are used. */
typedef struct bench_problem {
    char     name[64];
    char     op_name[32];        /* as the suite spells it: "conv2d", "conv_transpose1d" */
    xconv_op op;
    int      rank;               /* spatial rank, 1..3 */
    int64_t  n, cin, cout, groups;
    int64_t  in[3], k[3], stride[3], dil[3], pad_lo[3], pad_hi[3], out_pad[3];
    int64_t  out[3];             /* the output spatial size, from the DESIGN.md §1 formulas */
} bench_problem;

/*
 * Reads list `list` ("cpu", "gpu", ...) of the suite file at `path` into a malloc'ed array
 * (*out, *count; free with free()). Returns 0, or -1 with a message in errbuf that names the
 * entry and the field ("entry 3 (rn50_1x1): field \"k\" must have 2 entries").
 */
int bench_suite_load(const char *path, const char *list, bench_problem **out, int *count,
                     char *errbuf, size_t errlen);

/* FLOPs of one run: 2*N*Cout*(Cin/g)*prod(K)*prod(Y) for conv, 2*N*Cin*(Cout/g)*prod(K)*
 * prod(X) for conv_transpose (a multiply-add counts 2, whatever the dtype). */
double bench_flops(const bench_problem *p);

/* Element counts of the logical tensors. */
int64_t bench_x_elems(const bench_problem *p);
int64_t bench_w_elems(const bench_problem *p);
int64_t bench_y_elems(const bench_problem *p);
int64_t bench_spatial(const int64_t *dims, int rank); /* prod(dims[0..rank)) */

/* ---- data (data.c) --------------------------------------------------------------------- */

typedef struct bench_data {
    xconv_dtype x_dtype;   /* of x and w */
    xconv_dtype y_dtype;
    void       *x;         /* [N, Cin, X..], channels-first contiguous */
    void       *w;         /* PyTorch's weight layout for the op (see the top of this file) */
} bench_data;

/*
 * Random data for the problem, the same for every run (fixed seed): floats uniform in
 * [-1, 1) rounded to the dtype; signed integers in [-128, 127]; unsigned x in [0, 255] and
 * unsigned w in [0, 127], so that u8 weights read the same as s8 (oneDNN's u8 x s8).
 * Returns 0 or -1 (out of memory).
 */
int  bench_data_create(const bench_problem *p, xconv_dtype x_dtype, xconv_dtype y_dtype,
                       bench_data *d);
void bench_data_destroy(bench_data *d);

/* `bytes` (rounded up to a whole line) at a 64-byte boundary, or NULL; free() releases it.
 * Every buffer a timed side reads or writes comes from here: glibc's malloc returns large
 * blocks 16 bytes past a page, so each 64-byte vector of such a buffer straddles two cache
 * lines, while oneDNN allocates its own tensors aligned (and PyTorch's CPU allocator aligns
 * to 64). Misaligned x and y cost xconv's f32 depthwise about 1.6x (mbv2_dw_144s2, one
 * thread: 51 GFLOP/s aligned, 32 at 16 bytes past). */
void *bench_alloc(size_t bytes);

/* count random elements of dtype dt from `seed` (splitmix64), as bench_data_create makes
 * them; `narrow_unsigned` keeps unsigned values below 128. */
void bench_fill(xconv_dtype dt, void *buf, int64_t count, uint64_t seed, bool narrow_unsigned);

/* The repetitions to time when one round of every side takes round_s seconds: `reps`, cut
 * to fit `budget` seconds but never below min(reps, 3). */
int bench_fit_reps(int reps, double round_s, double budget);

/* xconv's x and w shapes (rank + 2 entries) and params for the problem in `layout`. */
void bench_layout_problem(const bench_problem *p, xconv_layout layout, int64_t *x_shape,
                          int64_t *w_shape, xconv_params *params);

/* [N, C, S] -> [N, S, C] for elements of `esize` bytes (and the reverse with c, s swapped). */
void bench_to_channels_last(const void *src, void *dst, int64_t n, int64_t c, int64_t s,
                            size_t esize);

/* The logical weight as [Cout, K.., Cin/g] (xconv's channels-last and XNNPACK's layout),
 * for both ops; for conv_transpose w[G*Cout/g + b, k, a] = w_pt[G*Cin/g + a, b, k]. */
void bench_weight_to_okc(const bench_problem *p, const void *w_pt, void *dst, size_t esize);

/* Element i of a buffer of dtype dt as a double (complex: the real part; callers compare
 * complex outputs through bench_compare, which reads both parts). */
double bench_get(xconv_dtype dt, const void *buf, int64_t i);

/*
 * The largest |a - b| over `count` elements divided by the largest |b| (so a scale-free
 * error that does not blow up near zero). For integer dtypes `b` may hold wider results
 * (a peer's s32): each b is first wrapped modulo 2^bits(dt) into dt's range, as xconv's
 * wrapping arithmetic would, and the comparison is exact.
 */
double bench_compare(xconv_dtype dt, const double *a, const double *b, int64_t count);

/* The largest error bench_compare may report for outputs of dtype dt computed in two
 * summation orders (0 for integers). */
double bench_tolerance(xconv_dtype dt);

/* ---- peers (peer_onednn.c, peer_xnnpack.c) ---------------------------------------------- */

enum { BENCH_MAX_CONFIGS = 8 };

/* One configuration of one peer library, ready to run one problem. */
typedef struct bench_peer {
    char  name[32];          /* "onednn.ncx", "xnnpack.nhwc": the JSON key */
    char  impl[96];          /* what the peer runs, e.g. "jit:avx512_core f32" */
    char  unsupported[160];  /* non-empty: the peer cannot run this problem (and why) */
    bool  comparable;        /* its output has xconv's semantics (checked against xconv) */
    void *state;
    /* One run. Returns 0, or -1 on a failure (which the caller reports). */
    int  (*run)(void *state);
    /* The last run's output in the logical channels-first order, as doubles (y elems). */
    int  (*output)(void *state, double *y);
    void (*destroy)(void *state);
} bench_peer;

/* The configuration names each peer can produce, for table headers; NULL-terminated. Empty
 * when the peer is not built in. */
extern const char *const bench_onednn_names[];
extern const char *const bench_xnnpack_names[];

/*
 * Fills peers[0..) with this peer's configurations for the problem in dtype d->x_dtype
 * (y d->y_dtype), one per name in bench_*_names, and returns how many. A configuration the
 * peer cannot run has `unsupported` set and no state. Data is copied: `d` may go.
 */
int bench_onednn_create(const bench_problem *p, const bench_data *d, int threads,
                        bench_peer *peers);
int bench_xnnpack_create(const bench_problem *p, const bench_data *d, int threads,
                         bench_peer *peers);

/* Releases a peer's state (safe on unsupported ones). */
void bench_peer_destroy(bench_peer *peer);

/* ---- the machine (fma_peak.c) ----------------------------------------------------------- */

/*
 * Measures the f32 FMA peak, in GFLOP/s (an FMA counts 2), with `threads` threads each
 * running independent vector FMA chains for about `seconds`. *isa receives "avx512f",
 * "avx2+fma" or "scalar": the widest this CPU and OS allow.
 */
double bench_fma_peak(int threads, double seconds, const char **isa);

#endif /* XCONV_BENCH_BENCH_H */
