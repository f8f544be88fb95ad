#include "stepscope/core/dtype.h"

namespace stepscope {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kString:
      return "string";
  }
  return "invalid";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
    case DType::kString:
      return sizeof(std::string);
  }
  return 0;
}

bool is_floating(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kFloat64; }
bool is_integer(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

int tf_datatype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 1;
    case DType::kFloat64:
      return 2;
    case DType::kInt32:
      return 3;
    case DType::kString:
      return 7;
    case DType::kInt64:
      return 9;
    case DType::kBool:
      return 10;
  }
  return 0;
}

std::string_view tf_datatype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "DT_FLOAT";
    case DType::kFloat64:
      return "DT_DOUBLE";
    case DType::kInt32:
      return "DT_INT32";
    case DType::kInt64:
      return "DT_INT64";
    case DType::kBool:
      return "DT_BOOL";
    case DType::kString:
      return "DT_STRING";
  }
  return "DT_INVALID";
}

std::optional<DType> dtype_from_tf_datatype(int64_t value) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kString, DType::kInt64, DType::kBool}) {
    if (tf_datatype(d) == value) return d;
  }
  return std::nullopt;
}

}  // namespace stepscope
