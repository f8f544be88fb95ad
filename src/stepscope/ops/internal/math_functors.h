// Element functors of the elementwise math family (math_ops.cc): one struct per op with a
// static apply() over one element (or two), the dtypes it accepts, whether it yields bool and
// a rough cost per element in nanoseconds (decides when a kernel splits over threads); and
// dispatch(), which instantiates a kernel only for the dtypes a functor accepts. Header-only
// so the cwise loops inline apply() and vectorise.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "stepscope/core/dtype.h"
#include "stepscope/ops/internal/vector_math.h"

namespace stepscope::math_functors {

enum class Types { kFloat, kNumeric, kNumericOrBool };

inline bool accepts(Types types, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    case DType::kInt32:
    case DType::kInt64:
      return types != Types::kFloat;
    case DType::kBool:
      return types == Types::kNumericOrBool;
    default:
      return false;
  }
}

inline const char* accepted_names(Types types) {
  switch (types) {
    case Types::kFloat:
      return "float32 or float64";
    case Types::kNumeric:
      return "float32, float64, int32 or int64";
    case Types::kNumericOrBool:
      return "float32, float64, int32, int64 or bool";
  }
  return "";
}

// Calls fn(T{}) for the C++ type of `dtype` when `types` accepts it; false otherwise. Only the
// accepted types are instantiated, so functors need not compile for the others.
template <Types types, typename Fn>
bool dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      fn(float{});
      return true;
    case DType::kFloat64:
      fn(double{});
      return true;
    case DType::kInt32:
      if constexpr (types != Types::kFloat) {
        fn(int32_t{});
        return true;
      }
      break;
    case DType::kInt64:
      if constexpr (types != Types::kFloat) {
        fn(int64_t{});
        return true;
      }
      break;
    case DType::kBool:
      if constexpr (types == Types::kNumericOrBool) {
        fn(bool{});
        return true;
      }
      break;
    default:
      break;
  }
  return false;
}

// Integer arithmetic through the unsigned type: wraps on overflow instead of being undefined.
template <typename T>
constexpr T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
constexpr T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
constexpr T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

struct AddOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T a, T b) {
    return wrap_add(a, b);
  }
};
struct SubOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T a, T b) {
    return wrap_sub(a, b);
  }
};
struct MulOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T a, T b) {
    return wrap_mul(a, b);
  }
};
// Integer division truncates; the kernel rejects zero divisors before any element is computed.
struct DivOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 2;
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return b == -1 ? wrap_sub(T{0}, a) : a / b;  // INT_MIN / -1 would trap
    else
      return a / b;
  }
};
// x / y, and 0 where y is 0 (whatever x is): the ratio a metric reports before it has counted
// anything (TF's div_no_nan).
struct DivNoNanOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 2;
  template <typename T>
  static T apply(T a, T b) {
    return b == T{0} ? T{0} : a / b;
  }
};
// NaN in either operand gives NaN (a comparison alone would drop a NaN in `b`).
struct MaximumOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T a, T b) {
    return (a > b || a != a) ? a : b;
  }
};
struct MinimumOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T a, T b) {
    return (a < b || a != a) ? a : b;
  }
};
struct EqualOp {
  static constexpr Types kTypes = Types::kNumericOrBool;
  static constexpr bool kBoolOut = true;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static bool apply(T a, T b) {
    return a == b;
  }
};

struct NegOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T x) {
    return wrap_sub(T{0}, x);
  }
};
struct SquareOp {
  static constexpr Types kTypes = Types::kNumeric;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T x) {
    return wrap_mul(x, x);
  }
};
struct SqrtOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 2;
  template <typename T>
  static T apply(T x) {
    return std::sqrt(x);
  }
};
struct RsqrtOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 3;
  template <typename T>
  static T apply(T x) {
    return T{1} / std::sqrt(x);
  }
};
struct ExpOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 8;
  template <typename T>
  static T apply(T x) {
    if constexpr (std::is_same_v<T, float>)
      return vector_math::exp(x);
    else
      return std::exp(x);
  }
};
struct LogOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 8;
  template <typename T>
  static T apply(T x) {
    if constexpr (std::is_same_v<T, float>)
      return vector_math::log(x);
    else
      return std::log(x);
  }
};
struct TanhOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 10;
  template <typename T>
  static T apply(T x) {
    if constexpr (std::is_same_v<T, float>)
      return vector_math::tanh(x);
    else
      return std::tanh(x);
  }
};
// exp of a non-positive number only: e = exp(-|x|) is in (0, 1], so neither branch overflows;
// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below.
struct SigmoidOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 10;
  template <typename T>
  static T apply(T x) {
    if constexpr (std::is_same_v<T, float>) {
      return vector_math::sigmoid(x);
    } else {
      const T e = std::exp(-std::abs(x));
      const T r = T{1} / (T{1} + e);
      return x >= T{0} ? r : e * r;
    }
  }
};
// |x| <= max is false for both infinities and NaN; one compare, vectorisable.
struct IsFiniteOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = true;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static bool apply(T x) {
    return std::abs(x) <= std::numeric_limits<T>::max();
  }
};

// Backward functors, apply(y, dy) with y the forward output (TensorFlow's operand order and
// formulas, so results match its kernels bit for bit where the arithmetic is the same).
struct TanhGradOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T y, T dy) {
    return dy * (T{1} - y * y);
  }
};
struct SigmoidGradOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T y, T dy) {
    return dy * y * (T{1} - y);
  }
};
struct SqrtGradOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 2;
  template <typename T>
  static T apply(T y, T dy) {
    return T{0.5} * dy / y;
  }
};
struct RsqrtGradOp {
  static constexpr Types kTypes = Types::kFloat;
  static constexpr bool kBoolOut = false;
  static constexpr int64_t kCostNs = 1;
  template <typename T>
  static T apply(T y, T dy) {
    return T{-0.5} * (dy * y) * (y * y);
  }
};
// Whether Maximum / Minimum selected x: on ties too; never where x or y is NaN (the gradient
// then goes to y, as in TensorFlow).
struct GreaterEqual {
  template <typename T>
  static bool apply(T x, T y) {
    return x >= y;
  }
};
struct LessEqual {
  template <typename T>
  static bool apply(T x, T y) {
    return x <= y;
  }
};

}  // namespace stepscope::math_functors
