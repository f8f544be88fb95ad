// The data-movement core of Transpose, for any element type (it moves bytes: 1, 4 or 8 per
// element).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "stepscope/core/shape.h"
#include "stepscope/core/tensor.h"

namespace stepscope {

class KernelContext;

// A transpose reduced to its essentials: dimensions of size 1 dropped and runs of input
// dimensions that stay adjacent and in order merged ([A,B,C,D] with perm [0,2,3,1] becomes
// [A,B,C*D] with perm [0,2,1]). Identity after reduction means a pure reshape.
struct TransposePlan {
  int rank = 0;
  std::array<int64_t, Shape::kMaxRank> in_dims{};
  std::array<int, Shape::kMaxRank> perm{};
  bool identity() const;
};
TransposePlan plan_transpose(const Shape& in, std::span<const int> perm);

// Writes the transpose of `in` into `out` (allocated with the permuted shape), splitting the
// work over the kernel's intra-op threads.
void transpose_into(const KernelContext& c, const Tensor& in, const TransposePlan& plan, Tensor& out);

}  // namespace stepscope
