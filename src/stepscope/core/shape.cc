#include "stepscope/core/shape.h"

#include "stepscope/base/error.h"

namespace stepscope {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw InvalidArgumentError("shape of rank " + std::to_string(dims.size()) + " exceeds the maximum rank " +
                               std::to_string(kMaxRank));
  rank_ = static_cast<int8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) dims_[i] = dims[i];
}

Shape Shape::unknown_rank() {
  Shape s;
  s.rank_ = -1;
  return s;
}

void Shape::add_dim(int64_t d) {
  if (rank_ >= kMaxRank) throw InvalidArgumentError("shape exceeds the maximum rank " + std::to_string(kMaxRank));
  if (rank_ < 0) rank_ = 0;
  dims_[rank_++] = d;
}

bool Shape::fully_defined() const {
  if (rank_ < 0) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] < 0) return false;
  return true;
}

int64_t Shape::known_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) continue;
    if (__builtin_mul_overflow(n, dims_[i], &n))
      throw InvalidArgumentError("shape " + to_string() +
                                 " has more elements than a 64-bit count can hold; check the dimensions");
  }
  return n;
}

int64_t Shape::num_elements() const {
  if (!fully_defined()) return -1;
  return known_elements();
}

bool Shape::compatible_with(const Shape& other) const {
  if (rank_ < 0 || other.rank_ < 0) return true;
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i]) return false;
  return true;
}

std::string Shape::to_string() const {
  if (rank_ < 0) return "<unknown>";
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ',';
    s += dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]);
  }
  return s + "]";
}

std::string Shape::to_x_string() const {
  if (rank_ < 0) return "unknown";
  std::string s;
  for (int i = 0; i < rank_; ++i) {
    if (i) s += 'x';
    s += dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]);
  }
  return s;
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

}  // namespace stepscope
