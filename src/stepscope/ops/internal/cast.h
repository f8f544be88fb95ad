// Element conversion for Cast.
//
// Like TensorFlow: float -> int truncates toward zero, int -> narrower int wraps (two's
// complement), anything -> bool is `x != 0` (NaN is true), bool -> number is 0 or 1,
// float64 -> float32 rounds to nearest. Where C++ (and so TensorFlow's CPU kernel) leaves the
// result undefined — NaN or an out-of-range float converted to an integer — we define it the
// way XLA does: NaN becomes 0 and out-of-range values saturate to the integer's min or max.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace stepscope::kernels {

template <typename To, typename From>
inline To cast_value(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // 2^(bits-1) is exactly representable in both float types, and so is its negation (= min).
    constexpr From kLimit = static_cast<From>(static_cast<double>(std::numeric_limits<To>::max()) + 1.0);
    if (x != x) return To(0);
    if (x >= kLimit) return std::numeric_limits<To>::max();
    if (x < -kLimit) return std::numeric_limits<To>::min();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

// GCC does not vectorize loads or stores of bool; bools are bytes holding 0 or 1, so move them as
// uint8_t (which may alias them) and convert from and to that.
template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <typename To, typename From>
inline void cast_range(const From* in, To* out, int64_t n) {
  const auto* __restrict__ src = reinterpret_cast<const Storage<From>*>(in);
  auto* __restrict__ dst = reinterpret_cast<Storage<To>*>(out);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, bool>)
      dst[i] = static_cast<uint8_t>(src[i] != Storage<From>(0));
    else
      dst[i] = cast_value<To>(src[i]);
  }
}

}  // namespace stepscope::kernels
