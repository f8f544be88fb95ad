// Element types of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stepscope {

enum class DType : uint8_t { kFloat32, kFloat64, kInt32, kInt64, kBool, kString };

// "float32", "float64", "int32", "int64", "bool", "string".
std::string_view dtype_name(DType dtype);
// Bytes per element; a string element is a std::string object.
size_t dtype_size(DType dtype);
bool is_floating(DType dtype);
bool is_integer(DType dtype);
// The tensorflow.DataType value of a dtype (types.proto: DT_FLOAT = 1, ...), for the protobuf
// files stepscope writes (event files, RunMetadata); and back, std::nullopt for a DataType
// stepscope has no dtype for.
int tf_datatype(DType dtype);
std::optional<DType> dtype_from_tf_datatype(int64_t value);
// The DataType's enum name ("DT_FLOAT", ...), as protobuf's text format and TensorFlow's
// timeline print it.
std::string_view tf_datatype_name(DType dtype);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<std::string> {
  static constexpr DType value = DType::kString;
};
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls f(T{}) with T the C++ type of `dtype` (numeric types and bool).
template <typename F>
decltype(auto) dispatch_numeric(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kBool:
      return f(bool{});
    case DType::kString:
      break;
  }
  return f(float{});  // unreachable for validated graphs; callers check dtypes at build time
}

}  // namespace stepscope
