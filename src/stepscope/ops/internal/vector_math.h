// exp, log, tanh and sigmoid for float32 written so that GCC vectorises the loops that call
// them (8 lanes with the project's -march=x86-64-v3), instead of one libm call per element.
//
// Why our own: glibc's vector variants (libmvec) are only used under -ffast-math, which would
// change the meaning of every comparison with NaN in the project. These are branch-free: range
// reduction, a polynomial and selects, the classic Cephes scheme. Accuracy: within 2 ulp of
// libm over the whole float range (tests: vector_math_test.cc), exact at 0, +-inf and NaN,
// denormal results included.
//
// Determinism: every multiply-add is an explicit std::fma (one instruction on FMA machines) and
// the project builds with -ffp-contract=off, so a vectorised loop body and its scalar tail
// compute the same bits; results do not depend on where a parallel_for cut the loop.
// float64 keeps libm (std::exp etc.): it is not on any model's hot path.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace stepscope::vector_math {

// 2^n for an integer-valued float n in [-126, 127], built in the exponent field.
inline float pow2i(float n) { return std::bit_cast<float>(static_cast<int32_t>(n + 127.0f) << 23); }

// e^x. Overflows to +inf above ~88.72, underflows through the denormals to 0 below ~-103.9.
inline float exp(float x) {
  // Selects rather than fmin/fmax, whose NaN rules keep GCC from vectorising them. A NaN
  // fails both comparisons and becomes -104 (converting NaN to an integer below would be
  // undefined); it is given back at the end.
  float xc = x >= -104.0f ? x : -104.0f;
  xc = xc <= 89.0f ? xc : 89.0f;
  const float n = std::nearbyint(xc * 1.44269504088896341f);  // round(x / ln 2)
  // r = x - n ln2, with ln2 split in two so that n * ln2_hi is exact.
  float r = std::fma(n, -0.693359375f, xc);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p * r, r, r) + 1.0f;
  // 2^n as two factors, each a normal float for n in [-150, 129]; the product over- or
  // underflows exactly where e^x does.
  const float half = std::trunc(n * 0.5f);
  const float result = p * pow2i(half) * pow2i(n - half);
  return x != x ? x : result;
}

// Natural log. log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf; denormals exact.
inline float log(float x) {
  const bool denormal = x < std::numeric_limits<float>::min();
  const float xs = denormal ? x * 8388608.0f : x;  // 2^23 brings a positive denormal to normal
  const int32_t bits = std::bit_cast<int32_t>(xs);
  float e = static_cast<float>((bits >> 23) - 126) - (denormal ? 23.0f : 0.0f);
  // Mantissa in [0.5, 1); moved to [sqrt(1/2), sqrt(2)) so the polynomial's argument is small.
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = std::fma(p, m, -1.1514610310e-1f);
  p = std::fma(p, m, 1.1676998740e-1f);
  p = std::fma(p, m, -1.2420140846e-1f);
  p = std::fma(p, m, 1.4249322787e-1f);
  p = std::fma(p, m, -1.6668057665e-1f);
  p = std::fma(p, m, 2.0000714765e-1f);
  p = std::fma(p, m, -2.4999993993e-1f);
  p = std::fma(p, m, 3.3333331174e-1f);
  float y = p * m * z;
  y = std::fma(e, -2.12194440e-4f, y);
  y = std::fma(z, -0.5f, y);
  float result = m + y;
  result = std::fma(e, 0.693359375f, result);
  result = x == std::numeric_limits<float>::infinity() ? x : result;
  result = x == 0.0f ? -std::numeric_limits<float>::infinity() : result;
  result = x < 0.0f || x != x ? std::numeric_limits<float>::quiet_NaN() : result;
  return result;
}

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), that formula elsewhere.
inline float tanh(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = std::fma(p, z, 2.06390887954e-2f);
  p = std::fma(p, z, -5.37397155531e-2f);
  p = std::fma(p, z, 1.33314422036e-1f);
  p = std::fma(p, z, -3.33332819422e-1f);
  const float small = std::fma(p * z, x, x);
  const float large = 1.0f - 2.0f / (exp(a + a) + 1.0f);
  return std::copysign(a < 0.625f ? small : large, x);  // the sign also makes tanh(-0) = -0
}

// 1 / (1 + e^-x), from e = e^-|x| (in (0, 1], never overflows): 1 / (1 + e) for x >= 0 and
// e / (1 + e) below.
inline float sigmoid(float x) {
  const float e = exp(-std::fabs(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;
}

}  // namespace stepscope::vector_math
