#include "stepscope/ops/internal/transpose.h"

#include <algorithm>
#include <cstring>

#include "stepscope/graph/kernel_context.h"

namespace stepscope {

bool TransposePlan::identity() const {
  for (int i = 0; i < rank; ++i)
    if (perm[i] != i) return false;
  return true;
}

TransposePlan plan_transpose(const Shape& in, std::span<const int> perm) {
  const int rank = in.rank();
  // Drop size-1 dimensions: they do not move any data.
  std::array<int, Shape::kMaxRank> new_index{};
  std::array<int64_t, Shape::kMaxRank> dims{};
  int kept = 0;
  for (int d = 0; d < rank; ++d) {
    new_index[d] = in.dim(d) == 1 ? -1 : kept;
    if (in.dim(d) != 1) dims[kept++] = in.dim(d);
  }
  std::array<int, Shape::kMaxRank> p{};
  int n = 0;
  for (int k = 0; k < rank; ++k)
    if (new_index[perm[k]] >= 0) p[n++] = new_index[perm[k]];

  // Group output positions whose input dims are consecutive; each group becomes one dim.
  std::array<int, Shape::kMaxRank> group_first{};  // first input dim of each group, output order
  std::array<int64_t, Shape::kMaxRank> group_size{};
  int groups = 0;
  for (int k = 0; k < n; ++k) {
    if (k > 0 && p[k] == p[k - 1] + 1) {
      group_size[groups - 1] *= dims[p[k]];
    } else {
      group_first[groups] = p[k];
      group_size[groups] = dims[p[k]];
      ++groups;
    }
  }
  // Number the groups in input order.
  TransposePlan plan;
  plan.rank = groups;
  for (int g = 0; g < groups; ++g) {
    int input_pos = 0;
    for (int h = 0; h < groups; ++h)
      if (group_first[h] < group_first[g]) ++input_pos;
    plan.perm[g] = input_pos;
    plan.in_dims[input_pos] = group_size[g];
  }
  return plan;
}

namespace {

// Walks a multi-index over some dimensions, keeping the matching input and output offsets.
struct Odometer {
  int rank = 0;
  std::array<int64_t, Shape::kMaxRank> dims{}, in_stride{}, out_stride{}, index{};
  int64_t in_offset = 0, out_offset = 0;

  void seek(int64_t linear) {
    in_offset = out_offset = 0;
    for (int k = rank - 1; k >= 0; --k) {
      index[k] = linear % dims[k];
      linear /= dims[k];
      in_offset += index[k] * in_stride[k];
      out_offset += index[k] * out_stride[k];
    }
  }
  void next() {
    for (int k = rank - 1; k >= 0; --k) {
      in_offset += in_stride[k];
      out_offset += out_stride[k];
      if (++index[k] < dims[k]) return;
      in_offset -= in_stride[k] * dims[k];
      out_offset -= out_stride[k] * dims[k];
      index[k] = 0;
    }
  }
};

template <typename E>
void run_transpose(const KernelContext& c, const E* in, E* out, const TransposePlan& plan) {
  const int r = plan.rank;
  std::array<int64_t, Shape::kMaxRank> in_stride{}, out_dims{}, out_stride{};
  int64_t s = 1;
  for (int d = r - 1; d >= 0; --d) in_stride[d] = s, s *= plan.in_dims[d];
  for (int k = 0; k < r; ++k) out_dims[k] = plan.in_dims[plan.perm[k]];
  s = 1;
  for (int k = r - 1; k >= 0; --k) out_stride[k] = s, s *= out_dims[k];
  const int64_t total = s;

  if (plan.perm[r - 1] == r - 1) {
    // The innermost input dim stays innermost: copy contiguous rows.
    const int64_t row = out_dims[r - 1];
    Odometer od;
    od.rank = r - 1;
    for (int k = 0; k < r - 1; ++k)
      od.dims[k] = out_dims[k], od.in_stride[k] = in_stride[plan.perm[k]], od.out_stride[k] = out_stride[k];
    c.parallel_for(total / row, std::max<int64_t>(1, row * static_cast<int64_t>(sizeof(E)) / 8),
                   [&](int64_t begin, int64_t end) {
                     Odometer o = od;
                     o.seek(begin);
                     for (int64_t i = begin; i < end; ++i, o.next())
                       std::memcpy(out + o.out_offset, in + o.in_offset, static_cast<size_t>(row) * sizeof(E));
                   });
    return;
  }

  // Otherwise a 2-D transpose between output dim r-1 (input dim a, read with stride is_a) and
  // output dim b (the innermost input dim, contiguous on the read side), done in square tiles so
  // both the reads and the writes stay in cache, repeated over every other dimension.
  const int a = plan.perm[r - 1];
  int b = 0;
  while (plan.perm[b] != r - 1) ++b;
  const int64_t cols = out_dims[r - 1], rows = out_dims[b];  // of the output sub-matrix
  const int64_t is_a = in_stride[a], os_b = out_stride[b];
  constexpr int64_t kTile = sizeof(E) >= 8 ? 16 : 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  Odometer od;
  for (int k = 0; k < r - 1; ++k) {
    if (k == b) continue;
    od.dims[od.rank] = out_dims[k], od.in_stride[od.rank] = in_stride[plan.perm[k]];
    od.out_stride[od.rank] = out_stride[k];
    ++od.rank;
  }
  const int64_t items = total / (rows * cols) * row_tiles;
  c.parallel_for(items, std::max<int64_t>(1, std::min(rows, kTile) * cols), [&](int64_t begin, int64_t end) {
    Odometer o = od;
    o.seek(begin / row_tiles);
    int64_t tile = begin % row_tiles;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t j0 = tile * kTile, j1 = std::min(rows, j0 + kTile);
      const E* src = in + o.in_offset;
      E* dst = out + o.out_offset;
      for (int64_t i0 = 0; i0 < cols; i0 += kTile) {
        const int64_t i1 = std::min(cols, i0 + kTile);
        for (int64_t j = j0; j < j1; ++j) {
          E* __restrict__ d = dst + j * os_b;
          const E* __restrict__ sp = src + j;
          for (int64_t i = i0; i < i1; ++i) d[i] = sp[i * is_a];
        }
      }
      if (++tile == row_tiles) tile = 0, o.next();
    }
  });
}

}  // namespace

void transpose_into(const KernelContext& c, const Tensor& in, const TransposePlan& plan, Tensor& out) {
  if (in.num_elements() == 0) return;
  if (plan.identity()) {
    std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(in.bytes()));
    return;
  }
  switch (dtype_size(in.dtype())) {
    case 1:
      run_transpose(c, static_cast<const uint8_t*>(in.raw_data()), static_cast<uint8_t*>(out.raw_data()), plan);
      break;
    case 4:
      run_transpose(c, static_cast<const uint32_t*>(in.raw_data()), static_cast<uint32_t*>(out.raw_data()), plan);
      break;
    case 8:
      run_transpose(c, static_cast<const uint64_t*>(in.raw_data()), static_cast<uint64_t*>(out.raw_data()), plan);
      break;
    default:
      throw InternalError("transpose: unsupported element size for " + std::string(dtype_name(in.dtype())));
  }
}

}  // namespace stepscope
