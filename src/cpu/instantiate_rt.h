/*
 * instantiate_rt.h — includes the template file named by XCONV_TEMPLATE once per compute
 * type, with XCONV_T (name suffix), XCONV_RT (the real component type) and XCONV_NCOMP (1
 * real, 2 complex) defined; the template #undefs those three. Used by the vector-extension
 * GEMM kernels, which work on real components.
 */
#define XCONV_T     u32
#define XCONV_RT    uint32_t
#define XCONV_NCOMP 1
#include XCONV_TEMPLATE
#define XCONV_T     u64
#define XCONV_RT    uint64_t
#define XCONV_NCOMP 1
#include XCONV_TEMPLATE
#define XCONV_T     f32
#define XCONV_RT    float
#define XCONV_NCOMP 1
#include XCONV_TEMPLATE
#define XCONV_T     f64
#define XCONV_RT    double
#define XCONV_NCOMP 1
#include XCONV_TEMPLATE
#define XCONV_T     c64
#define XCONV_RT    float
#define XCONV_NCOMP 2
#include XCONV_TEMPLATE
#define XCONV_T     c128
#define XCONV_RT    double
#define XCONV_NCOMP 2
#include XCONV_TEMPLATE

#undef XCONV_TEMPLATE
