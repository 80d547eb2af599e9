// Floating-point operations rounded once each, the same way on both compilers. nvcc fuses a * b + c
// into one FMA by default (--fmad=true) and g++ does under -ffp-contract=fast (the default of the gnu++
// modes), so a formula written with plain operators can round differently on the two sides. The shared
// formulas spell out every operation with these: on the device they are the _rn intrinsics, which nvcc
// never fuses or approximates (not even under --use_fast_math); on the host they are plain operators,
// so a host translation unit that includes a shared formula is compiled with -ffp-contract=off (see
// optim/CMakeLists.txt). Then the only fused operations on either side are the explicit fma_rn calls.
#pragma once
#include <cmath>

#include "core/math/hd.h"

namespace zero::math {

#if defined(__CUDA_ARCH__)
ZERO_HD float add_rn(float a, float b) { return __fadd_rn(a, b); }
ZERO_HD float sub_rn(float a, float b) { return __fsub_rn(a, b); }
ZERO_HD float mul_rn(float a, float b) { return __fmul_rn(a, b); }
ZERO_HD float div_rn(float a, float b) { return __fdiv_rn(a, b); }
ZERO_HD float sqrt_rn(float a) { return __fsqrt_rn(a); }
ZERO_HD float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
ZERO_HD double add_rn(double a, double b) { return __dadd_rn(a, b); }
ZERO_HD double sub_rn(double a, double b) { return __dsub_rn(a, b); }
ZERO_HD double mul_rn(double a, double b) { return __dmul_rn(a, b); }
ZERO_HD double div_rn(double a, double b) { return __ddiv_rn(a, b); }
ZERO_HD double sqrt_rn(double a) { return __dsqrt_rn(a); }
ZERO_HD double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
#else
ZERO_HD float add_rn(float a, float b) { return a + b; }
ZERO_HD float sub_rn(float a, float b) { return a - b; }
ZERO_HD float mul_rn(float a, float b) { return a * b; }
ZERO_HD float div_rn(float a, float b) { return a / b; }
ZERO_HD float sqrt_rn(float a) { return std::sqrt(a); }
ZERO_HD float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
ZERO_HD double add_rn(double a, double b) { return a + b; }
ZERO_HD double sub_rn(double a, double b) { return a - b; }
ZERO_HD double mul_rn(double a, double b) { return a * b; }
ZERO_HD double div_rn(double a, double b) { return a / b; }
ZERO_HD double sqrt_rn(double a) { return std::sqrt(a); }
ZERO_HD double fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
#endif

}  // namespace zero::math
