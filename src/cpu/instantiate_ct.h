/*
 * instantiate_ct.h — includes the template file named by XCONV_TEMPLATE once per compute
 * type, with XCONV_T (name suffix), XCONV_CT (C type) and XCONV_MAC(acc, a, b) (acc += a*b,
 * wrapping for integers, the plain complex product for complex) defined; the template
 * #undefs those three. Used by kernels written once for every compute type.
 */
#define XCONV_CMAC(acc, a, b)                                                            \
    ((acc).re += (a).re * (b).re - (a).im * (b).im, (acc).im += (a).re * (b).im + (a).im * (b).re)

#define XCONV_T u32
#define XCONV_CT uint32_t
#define XCONV_MAC(acc, a, b) ((acc) += (a) * (b))
#include XCONV_TEMPLATE

#define XCONV_T u64
#define XCONV_CT uint64_t
#define XCONV_MAC(acc, a, b) ((acc) += (a) * (b))
#include XCONV_TEMPLATE

#define XCONV_T f32
#define XCONV_CT float
#define XCONV_MAC(acc, a, b) ((acc) += (a) * (b))
#include XCONV_TEMPLATE

#define XCONV_T f64
#define XCONV_CT double
#define XCONV_MAC(acc, a, b) ((acc) += (a) * (b))
#include XCONV_TEMPLATE

#define XCONV_T c64
#define XCONV_CT xconv_c64
#define XCONV_MAC XCONV_CMAC
#include XCONV_TEMPLATE

#define XCONV_T c128
#define XCONV_CT xconv_c128
#define XCONV_MAC XCONV_CMAC
#include XCONV_TEMPLATE

#undef XCONV_CMAC
#undef XCONV_TEMPLATE
