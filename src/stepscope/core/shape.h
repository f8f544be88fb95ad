// Tensor shapes with inline storage (no heap allocation: shapes are built on the hot path).
// During shape inference a dimension may be unknown (-1) and so may the rank.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace stepscope {

class Shape {
 public:
  static constexpr int kMaxRank = 8;
  static constexpr int64_t kUnknownDim = -1;

  Shape() = default;  // scalar
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);
  static Shape unknown_rank();
  static Shape vector(int64_t n) { return Shape{n}; }

  bool known_rank() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i < 0 ? i + rank_ : i]; }
  void set_dim(int i, int64_t d) { dims_[i] = d; }
  void add_dim(int64_t d);
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_ < 0 ? 0 : rank_)}; }
  std::vector<int64_t> dim_vector() const { return {dims().begin(), dims().end()}; }

  // True when the rank and every dimension are known.
  bool fully_defined() const;
  // Product of the dimensions (1 for a scalar); -1 if not fully defined. InvalidArgumentError
  // when the product overflows int64 (a wrapped count would let a kernel index past its data).
  int64_t num_elements() const;
  // Compatible = could describe the same tensor (unknowns match anything).
  bool compatible_with(const Shape& other) const;

  // "[64,784]", "[]" for a scalar, "[?,10]" with unknown dims, "<unknown>" for unknown rank.
  std::string to_string() const;
  // "64x784" as tfprof prints shapes ("" for a scalar).
  std::string to_x_string() const;

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  // Product of the known dimensions, checked for overflow.
  int64_t known_elements() const;

  int8_t rank_ = 0;
  std::array<int64_t, kMaxRank> dims_{};
};

}  // namespace stepscope
