// Reduction kernels shared by Sum, Mean, Max and ArgMax (reduction_ops.cc).
//
// Every reduction is brought down to two contiguous shapes:
//   reduce_rows: out[o]    = reduce_r x[o, r]      (the reduced axis is innermost)
//   reduce_cols: out[o, j] = reduce_r x[o, r, j]   (kept elements innermost: whole rows are
//                                                   combined into an output row, vectorised)
// reduce_axes() drops size-1 dimensions, merges neighbouring dimensions that are all reduced
// or all kept, and applies one of the two per remaining reduced group, innermost first.
//
// Determinism: work is cut into blocks whose bounds depend only on the shape, partial results
// go to fixed slots and are combined in a fixed order, so results are the same for any thread
// count. Accuracy: floating-point sums are pairwise (16 independent lanes over leaves of 1024
// elements along a row, recursive halving over rows), so float32 error grows with log(n), not n.
// Max propagates NaN whatever the order of the elements.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/kernel_context.h"

namespace stepscope::kernels {

template <typename T>
struct SumReducer {
  // Integer sums are exact in any order (modulo wrap-around); only floats need pairwise trees.
  static constexpr bool kPairwise = std::is_floating_point_v<T>;
  static T init() { return T(0); }
  static T combine(T acc, T x) { return acc + x; }
};

template <typename T>
struct MaxReducer {
  static constexpr bool kPairwise = false;
  // Like TensorFlow: the max of nothing is -inf for floats, the lowest value for integers.
  static T init() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::lowest();
  }
  // NaN is sticky in both directions (a NaN acc stays, a NaN x is taken), so a NaN anywhere
  // gives NaN regardless of order; compiles to compare + blend, which vectorises.
  static T combine(T acc, T x) { return ((x > acc) | (x != x)) ? x : acc; }
};

constexpr int kLanes = 16;             // independent accumulators along a row (two AVX registers of float)
constexpr int64_t kLeaf = 1024;        // row elements summed lane-wise before pairwise halving
constexpr int64_t kRowLeaf = 16;       // rows accumulated in sequence before pairwise halving
constexpr int64_t kColChunk = 512;     // output columns one task accumulates (stays in L1)
constexpr int64_t kBlock = 16384;      // elements per parallel block (fixed: results do not depend on threads)
constexpr int64_t kNsPerElement4 = 4;  // elements per nanosecond, for parallel_for's cost

template <typename R, typename T>
T reduce_leaf(const T* __restrict x, int64_t n) {
  T acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = R::init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    // Kept as a loop so the loop vectoriser (which if-converts Max's select) handles it; fully
    // unrolled, the basic-block vectoriser leaves Max as scalar compares and branches.
#pragma GCC unroll 1
    for (int j = 0; j < kLanes; ++j) acc[j] = R::combine(acc[j], x[i + j]);
  }
  T tail = R::init();
  for (; i < n; ++i) tail = R::combine(tail, x[i]);
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] = R::combine(acc[j], acc[j + w]);
  return R::combine(acc[0], tail);
}

// Reduction of x[0, n) (init() when n == 0).
template <typename R, typename T>
T reduce_contiguous(const T* x, int64_t n) {
  if (!R::kPairwise || n <= kLeaf) return reduce_leaf<R>(x, n);
  const int64_t half = (n / 2) / kLanes * kLanes;
  return R::combine(reduce_contiguous<R>(x, half), reduce_contiguous<R>(x + half, n - half));
}

// Number of scratch rows accumulate_rows needs for `rows` rows.
template <typename R>
int pairwise_depth(int64_t rows) {
  int depth = 0;
  if (R::kPairwise)
    for (; rows > kRowLeaf; rows = (rows + 1) / 2) ++depth;
  return depth;
}

// out[j] = reduce over r in [r0, r1) of row(r)[j], j < width; r1 > r0. row(r) returns a pointer
// to the first element of row r. scratch holds pairwise_depth(r1 - r0) rows of `width`.
template <typename R, typename T, typename RowFn>
void accumulate_rows(const RowFn& row, int64_t r0, int64_t r1, int64_t width, T* __restrict out, T* scratch) {
  if (!R::kPairwise || r1 - r0 <= kRowLeaf) {
    std::memcpy(out, row(r0), static_cast<size_t>(width) * sizeof(T));
    int64_t r = r0 + 1;
    // Four rows per pass over `out` (same order of operations as one at a time).
    for (; r + 4 <= r1; r += 4) {
      const T* __restrict p0 = row(r);
      const T* __restrict p1 = row(r + 1);
      const T* __restrict p2 = row(r + 2);
      const T* __restrict p3 = row(r + 3);
      for (int64_t j = 0; j < width; ++j)
        out[j] = R::combine(R::combine(R::combine(R::combine(out[j], p0[j]), p1[j]), p2[j]), p3[j]);
    }
    for (; r < r1; ++r) {
      const T* __restrict p = row(r);
      for (int64_t j = 0; j < width; ++j) out[j] = R::combine(out[j], p[j]);
    }
    return;
  }
  const int64_t mid = r0 + (r1 - r0 + 1) / 2;
  accumulate_rows<R>(row, r0, mid, width, out, scratch + width);
  accumulate_rows<R>(row, mid, r1, width, scratch, scratch + width);
  const T* __restrict s = scratch;
  for (int64_t j = 0; j < width; ++j) out[j] = R::combine(out[j], s[j]);
}

// out[o] = reduce over r < len of x[o * len + r]; len > 0.
template <typename R, typename T>
void reduce_rows(const KernelContext& c, const T* x, int64_t outer, int64_t len, T* out) {
  if (len < 2 * kLanes) {
    // Short rows: the lanes would cost more than they save.
    c.parallel_for(outer, std::max<int64_t>(1, len), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = x + o * len;
        T acc = row[0];
        for (int64_t r = 1; r < len; ++r) acc = R::combine(acc, row[r]);
        out[o] = acc;
      }
    });
    return;
  }
  if (len <= 4 * kBlock) {
    c.parallel_for(outer, std::max<int64_t>(1, len / kNsPerElement4), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) out[o] = reduce_contiguous<R>(x + o * len, len);
    });
    return;
  }
  // Long rows: fixed blocks of every row in parallel, then each row's partials in order.
  const int64_t blocks = (len + kBlock - 1) / kBlock;
  Tensor partial_t(dtype_of<T>, Shape{outer * blocks}, c.allocator());
  T* partial = partial_t.data<T>();
  c.parallel_for(outer * blocks, kBlock / kNsPerElement4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / blocks, start = (i % blocks) * kBlock;
      partial[i] = reduce_contiguous<R>(x + o * len + start, std::min(kBlock, len - start));
    }
  });
  for (int64_t o = 0; o < outer; ++o) out[o] = reduce_contiguous<R>(partial + o * blocks, blocks);
}

// out[o * width + j] = reduce over r < rows of src(o, r)[j], over tasks of (o, column chunk).
template <typename R, typename T, typename SrcFn>
void accumulate_rows_parallel(const KernelContext& c, const SrcFn& src, int64_t outer, int64_t rows, int64_t width,
                              T* out) {
  const int64_t chunks = (width + kColChunk - 1) / kColChunk;
  const int64_t cost = std::max<int64_t>(1, rows * std::min(width, kColChunk) / kNsPerElement4);
  c.parallel_for(outer * chunks, cost, [&](int64_t b, int64_t e) {
    std::vector<T> scratch(static_cast<size_t>(pairwise_depth<R>(rows) * std::min(width, kColChunk)));
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / chunks, j0 = (i % chunks) * kColChunk, w = std::min(kColChunk, width - j0);
      accumulate_rows<R>([&](int64_t r) { return src(o, r) + j0; }, 0, rows, w, out + o * width + j0, scratch.data());
    }
  });
}

// out[o * width + j] = reduce over r < rows of x[(o * rows + r) * width + j]; rows > 0.
template <typename R, typename T>
void reduce_cols(const KernelContext& c, const T* x, int64_t outer, int64_t rows, int64_t width, T* out) {
  // Rows per block: enough that a block is ~kBlock elements, at least a pairwise leaf.
  const int64_t block_rows = std::max(kRowLeaf, kBlock / width);
  if (rows <= block_rows) {
    accumulate_rows_parallel<R>(
        c, [&](int64_t o, int64_t r) { return x + (o * rows + r) * width; }, outer, rows, width, out);
    return;
  }
  // Tall input: each block of rows into its own partial row (in parallel), then the partial
  // rows of each output row combined in order.
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  Tensor partial_t(dtype_of<T>, Shape{outer * blocks, width}, c.allocator());
  T* partial = partial_t.data<T>();
  const int64_t chunks = (width + kColChunk - 1) / kColChunk;
  const int64_t cost = std::max<int64_t>(1, block_rows * std::min(width, kColChunk) / kNsPerElement4);
  c.parallel_for(outer * blocks * chunks, cost, [&](int64_t b, int64_t e) {
    std::vector<T> scratch(static_cast<size_t>(pairwise_depth<R>(block_rows) * std::min(width, kColChunk)));
    for (int64_t i = b; i < e; ++i) {
      const int64_t ob = i / chunks, j0 = (i % chunks) * kColChunk, w = std::min(kColChunk, width - j0);
      const int64_t o = ob / blocks, r0 = (ob % blocks) * block_rows, r1 = std::min(rows, r0 + block_rows);
      const T* base = x + (o * rows) * width + j0;
      accumulate_rows<R>([&](int64_t r) { return base + r * width; }, r0, r1, w, partial + ob * width + j0,
                         scratch.data());
    }
  });
  accumulate_rows_parallel<R>(
      c, [&](int64_t o, int64_t r) { return partial + (o * blocks + r) * width; }, outer, blocks, width, out);
}

// Reduces x over the dimensions flagged in `reduced` (one flag per dimension of x) into out,
// whose element count is that of the kept dimensions. Returns false, doing nothing, when no
// dimension of size > 1 is reduced (the caller forwards x). Zero-size inputs give init().
template <typename R, typename T>
bool reduce_axes(const KernelContext& c, const Tensor& x, const std::vector<bool>& reduced, T* out,
                 int64_t out_elements) {
  if (out_elements == 0) return true;
  if (x.num_elements() == 0) {
    std::fill(out, out + out_elements, R::init());
    return true;
  }
  // Groups of merged dimensions, alternating reduced / kept.
  struct Group {
    int64_t size;
    bool reduced;
  };
  Group groups[Shape::kMaxRank];
  int n = 0;
  for (int d = 0; d < x.rank(); ++d) {
    if (x.dim(d) == 1) continue;
    if (n > 0 && groups[n - 1].reduced == reduced[d])
      groups[n - 1].size *= x.dim(d);
    else
      groups[n++] = {x.dim(d), reduced[d]};
  }
  int num_reduced = 0;
  for (int g = 0; g < n; ++g) num_reduced += groups[g].reduced;
  if (num_reduced == 0) return false;

  // Innermost reduced group first; intermediate results in temporaries from the allocator
  // (so traces with memory show them).
  const T* src = x.data<T>();
  Tensor temp[2];
  for (int step = 0; step < num_reduced; ++step) {
    int g = n - 1;
    while (!groups[g].reduced) --g;
    int64_t outer = 1;
    for (int i = 0; i < g; ++i) outer *= groups[i].size;
    const int64_t rows = groups[g].size;
    const int64_t inner = g + 1 < n ? groups[g + 1].size : 1;
    T* dst = out;
    if (step + 1 < num_reduced) {
      temp[step % 2] = Tensor(dtype_of<T>, Shape{outer * inner}, c.allocator());
      dst = temp[step % 2].template data<T>();
    }
    if (inner == 1)
      reduce_rows<R>(c, src, outer, rows, dst);
    else
      reduce_cols<R>(c, src, outer, rows, inner, dst);
    src = dst;
    // Drop the group; its kept neighbours are now adjacent and merge.
    if (g > 0 && g + 1 < n) {
      groups[g - 1].size *= groups[g + 1].size;
      for (int i = g; i + 2 < n; ++i) groups[i] = groups[i + 2];
      n -= 2;
    } else {
      for (int i = g; i + 1 < n; ++i) groups[i] = groups[i + 1];
      n -= 1;
    }
  }
  return true;
}

// argmax over the middle axis of [outer, rows, inner], inner > 1: the running best of each
// column of a chunk, updated row by row.
template <typename T, typename Idx, typename I>
void argmax_cols(const KernelContext& c, const T* x, int64_t outer, int64_t rows, int64_t inner, I* out) {
  const int64_t chunks = (inner + kColChunk - 1) / kColChunk;
  const int64_t cost = std::max<int64_t>(1, rows * std::min(inner, kColChunk) / kNsPerElement4);
  c.parallel_for(outer * chunks, cost, [&](int64_t b, int64_t e) {
    T best[kColChunk];
    Idx index[kColChunk];
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / chunks, j0 = (i % chunks) * kColChunk, w = std::min(kColChunk, inner - j0);
      const T* base = x + o * rows * inner + j0;
      for (int64_t j = 0; j < w; ++j) best[j] = base[j], index[j] = 0;
      for (int64_t r = 1; r < rows; ++r) {
        const T* __restrict p = base + r * inner;
        const Idx ri = static_cast<Idx>(r);
        for (int64_t j = 0; j < w; ++j) {
          const T v = p[j];
          // Larger, or the first NaN (a NaN best stays: nothing compares greater).
          const bool take = (v > best[j]) | ((v != v) & (best[j] == best[j]));
          best[j] = take ? v : best[j];
          index[j] = take ? ri : index[j];
        }
      }
      I* dst = out + o * inner + j0;
      for (int64_t j = 0; j < w; ++j) dst[j] = static_cast<I>(index[j]);
    }
  });
}

// The first index of the maximum of x[0, n), n > 0 (the first NaN if any). Each of kLanes
// lanes keeps its best value and the first index where it occurs (vectorised compare and
// blend); the lanes are then merged preferring the larger value, then the smaller index.
template <typename T, typename Idx>
int64_t argmax_row(const T* __restrict x, int64_t n) {
  // Larger, or the first NaN (a NaN best stays: nothing compares greater).
  auto better = [](T v, T best) { return (v > best) | ((v != v) & (best == best)); };
  int64_t i = 0;
  int64_t result = 0;
  if (n >= 2 * kLanes) {
    T best[kLanes];
    Idx index[kLanes];
    for (int j = 0; j < kLanes; ++j) best[j] = x[j], index[j] = static_cast<Idx>(j);
    for (i = kLanes; i + kLanes <= n; i += kLanes) {
#pragma GCC unroll 1
      for (int j = 0; j < kLanes; ++j) {
        const T v = x[i + j];
        const bool take = better(v, best[j]);
        best[j] = take ? v : best[j];
        index[j] = take ? static_cast<Idx>(i + j) : index[j];
      }
    }
    int lane = 0;
    for (int j = 1; j < kLanes; ++j) {
      const bool tie = best[j] == best[lane] || (best[j] != best[j] && best[lane] != best[lane]);
      if (better(best[j], best[lane]) || (tie && index[j] < index[lane])) lane = j;
    }
    result = index[lane];
  }
  for (; i < n; ++i)
    if (better(x[i], x[result])) result = i;
  return result;
}

// out[o * inner + j] = the first r < rows maximising x[(o * rows + r) * inner + j]; rows > 0.
// NaN counts as larger than any number (the first NaN wins), like NumPy.
template <typename T, typename I>
void argmax(const KernelContext& c, const T* x, int64_t outer, int64_t rows, int64_t inner, I* out) {
  if (inner == 1) {
    c.parallel_for(outer, std::max<int64_t>(1, rows / kNsPerElement4), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = x + o * rows;
        out[o] = static_cast<I>(sizeof(T) == 4 && rows <= INT32_MAX ? argmax_row<T, int32_t>(row, rows)
                                                                    : argmax_row<T, int64_t>(row, rows));
      }
    });
    return;
  }
  // Indices as wide as the values (int32 beside float) so the compare-and-blend vectorises.
  if (sizeof(T) == 4 && rows <= INT32_MAX)
    argmax_cols<T, int32_t>(c, x, outer, rows, inner, out);
  else
    argmax_cols<T, int64_t>(c, x, outer, rows, inner, out);
}

}  // namespace stepscope::kernels
