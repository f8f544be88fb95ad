// Elementwise ("cwise") loops shared by op families: unary maps and binary maps with NumPy
// broadcasting, broadcast copies and the Maximum/Minimum gradient select, over raw pointers.
//
// Inner loops are plain contiguous loops that GCC vectorises at -O3. Broadcasting works on
// stack arrays (rank <= Shape::kMaxRank): operand shapes are aligned on the right, dims of
// size 1 in the output are dropped and adjacent dims that broadcast the same way are merged,
// so [64,10] op [10] becomes a rank-2 problem ([64,10] with b's row stride 0) and most real
// cases end up at rank 1 or 2. Small tensors pay nothing beyond their output allocation: no
// heap, no std::function (for_range only builds one when the work is big enough to split).
#pragma once

#include <algorithm>
#include <cstdint>

#include "stepscope/core/shape.h"
#include "stepscope/graph/kernel_context.h"

namespace stepscope::cwise {

// Work estimated below this many nanoseconds runs on the calling thread. KernelContext::
// parallel_for would not split it either; deciding here keeps its std::function off the
// small-tensor path.
inline constexpr int64_t kMinParallelCostNs = 40000;

// Calls fn(begin, end) over [0, n), split over the intra-op pool when n * cost_per_item_ns
// is worth it. fn must write disjoint outputs for disjoint ranges.
template <typename Fn>
inline void for_range(const KernelContext& c, int64_t n, int64_t cost_per_item_ns, const Fn& fn) {
  if (n * cost_per_item_ns < kMinParallelCostNs || c.intra_op_threads() <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  c.parallel_for(n, cost_per_item_ns, [&fn](int64_t begin, int64_t end) { fn(begin, end); });
}

// Elements of a run-time (fully defined) shape; inline, unlike Shape::num_elements, which
// also handles unknown dims.
inline int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s.dims()) n *= d;
  return n;
}
inline bool same_shape(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (a.dim(i) != b.dim(i)) return false;
  return true;
}

// out[i] = F::apply(a[i], b[i]) and its scalar-operand variants. The operands may alias each
// other (x + x) but never the output.
template <typename F, typename T, typename R>
inline void map_vv(const T* a, const T* b, R* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F::apply(a[i], b[i]);
}
template <typename F, typename T, typename R>
inline void map_sv(T a, const T* b, R* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F::apply(a, b[i]);
}
template <typename F, typename T, typename R>
inline void map_vs(const T* a, T b, R* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F::apply(a[i], b);
}
template <typename F, typename T, typename R>
inline void map_v(const T* x, R* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F::apply(x[i]);
}

// The broadcast of two known shapes, reduced to the fewest dims that describe it.
struct Broadcast {
  Shape out_shape;  // the full NumPy broadcast shape
  int rank = 0;     // collapsed rank; 0 when the output has one element
  int64_t dims[Shape::kMaxRank] = {};
  // Element strides of each operand per collapsed dim: 0 where it broadcasts, and then
  // exactly one of the two operands has stride 0 (a dim where both broadcast was dropped).
  int64_t a_stride[Shape::kMaxRank] = {};
  int64_t b_stride[Shape::kMaxRank] = {};
};

// Fills `bc` and returns true when a and b (fully defined) broadcast; false otherwise.
inline bool analyze_broadcast(const Shape& a, const Shape& b, Broadcast& bc) {
  const int ra = a.rank(), rb = b.rank(), r = std::max(ra, rb);
  bool a_bcast[Shape::kMaxRank], b_bcast[Shape::kMaxRank];
  bc.out_shape = Shape();
  bc.rank = 0;
  bool empty = false;
  for (int i = 0; i < r; ++i) {
    const int64_t da = i < r - ra ? 1 : a.dim(i - (r - ra));
    const int64_t db = i < r - rb ? 1 : b.dim(i - (r - rb));
    if (da != db && da != 1 && db != 1) return false;
    const int64_t d = da == 1 ? db : da;
    bc.out_shape.add_dim(d);
    if (d == 0) empty = true;
    if (d == 1) continue;
    const bool ab = da == 1, bb = db == 1;
    const int n = bc.rank;
    if (n > 0 && a_bcast[n - 1] == ab && b_bcast[n - 1] == bb) {
      bc.dims[n - 1] *= d;
    } else {
      bc.dims[n] = d;
      a_bcast[n] = ab;
      b_bcast[n] = bb;
      ++bc.rank;
    }
  }
  if (empty) {  // nothing to compute; callers only allocate the output
    bc.rank = 1;
    bc.dims[0] = 0;
    bc.a_stride[0] = bc.b_stride[0] = 1;
    return true;
  }
  int64_t sa = 1, sb = 1;
  for (int k = bc.rank - 1; k >= 0; --k) {
    bc.a_stride[k] = a_bcast[k] ? 0 : sa;
    bc.b_stride[k] = b_bcast[k] ? 0 : sb;
    if (!a_bcast[k]) sa *= bc.dims[k];
    if (!b_bcast[k]) sb *= bc.dims[k];
  }
  return true;
}

// One contiguous run of `n` outputs whose operands advance by sa, sb (each 0 or 1, not both 0).
template <typename F, typename T, typename R>
inline void map_run(const T* a, int64_t sa, const T* b, int64_t sb, R* out, int64_t n) {
  if (sa && sb)
    map_vv<F>(a, b, out, n);
  else if (sa)
    map_vs<F>(a, *b, out, n);
  else
    map_sv<F>(*a, b, out, n);
}

// Calls run(a_offset, a_stride, b_offset, b_stride, out_offset, n) for each contiguous run of
// the flat outputs [begin, end) (any collapsed rank >= 1), walking the outer dims with a
// carried index. The strides are those of the innermost collapsed dim (each 0 or 1).
template <typename Run>
inline void for_each_run(const Broadcast& bc, int64_t begin, int64_t end, const Run& run) {
  const int r = bc.rank;
  const int64_t inner = bc.dims[r - 1];
  const int64_t sa = bc.a_stride[r - 1], sb = bc.b_stride[r - 1];
  int64_t idx[Shape::kMaxRank];
  int64_t oa = 0, ob = 0;
  int64_t rest = begin / inner, col = begin % inner;
  for (int d = r - 2; d >= 0; --d) {
    idx[d] = rest % bc.dims[d];
    rest /= bc.dims[d];
    oa += idx[d] * bc.a_stride[d];
    ob += idx[d] * bc.b_stride[d];
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t len = std::min(inner - col, end - pos);
    run(oa + col * sa, sa, ob + col * sb, sb, pos, len);
    pos += len;
    col = 0;
    for (int d = r - 2; d >= 0; --d) {
      oa += bc.a_stride[d];
      ob += bc.b_stride[d];
      if (++idx[d] < bc.dims[d]) break;
      oa -= bc.dims[d] * bc.a_stride[d];
      ob -= bc.dims[d] * bc.b_stride[d];
      idx[d] = 0;
    }
  }
}

// Every output of the broadcast `bc` (outputs already allocated with bc.out_shape) as runs
// run(a_offset, a_stride, b_offset, b_stride, out_offset, n), split over the intra-op pool.
// Runs of one call never overlap, so `run` may write its outputs without synchronisation.
// Rank 0 is one run of one element with both strides 0; ranks 1 and 2 (the common
// [n,m] op [m], [n,m] op [n,1] and [n,1] op [1,m]) skip the carried index.
template <typename Run>
inline void broadcast_runs(const KernelContext& c, const Broadcast& bc, int64_t cost_per_item_ns, const Run& run) {
  if (bc.rank == 0) {
    run(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1});
  } else if (bc.rank == 1) {
    const int64_t sa = bc.a_stride[0], sb = bc.b_stride[0];
    for_range(c, bc.dims[0], cost_per_item_ns,
              [&](int64_t begin, int64_t end) { run(begin * sa, sa, begin * sb, sb, begin, end - begin); });
  } else if (bc.rank == 2) {
    const int64_t m = bc.dims[1];
    const int64_t ra = bc.a_stride[0], rb = bc.b_stride[0];
    const int64_t sa = bc.a_stride[1], sb = bc.b_stride[1];
    for_range(c, bc.dims[0], cost_per_item_ns * m, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) run(r * ra, sa, r * rb, sb, r * m, m);
    });
  } else {
    for_range(c, num_elements(bc.out_shape), cost_per_item_ns,
              [&](int64_t begin, int64_t end) { for_each_run(bc, begin, end, run); });
  }
}

// out = F(a, b) with broadcasting, for outputs already allocated with bc.out_shape.
template <typename F, typename T, typename R>
inline void broadcast_map(const KernelContext& c, const Broadcast& bc, const T* a, const T* b, R* out,
                          int64_t cost_per_item_ns) {
  broadcast_runs(c, bc, cost_per_item_ns, [=](int64_t oa, int64_t sa, int64_t ob, int64_t sb, int64_t pos, int64_t n) {
    map_run<F>(a + oa, sa, b + ob, sb, out + pos, n);
  });
}

// out = f(a) broadcast to bc.out_shape, where bc = analyze_broadcast(a's shape, out shape) and
// the output shape is a broadcast of a's (b never broadcasts). f is applied once per output
// element (a division, say), in a loop that vectorises when f inlines.
template <typename T, typename Fn>
inline void broadcast_copy(const KernelContext& c, const Broadcast& bc, const T* a, T* out, const Fn& f) {
  broadcast_runs(c, bc, 1, [=](int64_t oa, int64_t sa, int64_t, int64_t, int64_t pos, int64_t n) {
    T* __restrict dst = out + pos;
    if (sa) {
      const T* src = a + oa;
      for (int64_t i = 0; i < n; ++i) dst[i] = f(src[i]);
    } else {
      const T v = f(a[oa]);
      for (int64_t i = 0; i < n; ++i) dst[i] = v;
    }
  });
}

// The gradient of max(x, y) (Cmp = GreaterEqual) or min(x, y) (Cmp = LessEqual) for x
// (kForX) or y: out[i] = g[i] where Cmp(x, y) selects that input at i, else 0, with x and y
// broadcast to g's shape (bc = analyze_broadcast(x's shape, y's shape), bc.out_shape == g's
// shape). Ties go to x, as TensorFlow's x >= y mask. A select, not g * mask: a zero-weight
// element stays 0 even where g is inf or NaN.
template <typename Cmp, bool kForX, typename T>
inline void select_grad(const KernelContext& c, const Broadcast& bc, const T* x, const T* y, const T* g, T* out) {
  broadcast_runs(c, bc, 1, [=](int64_t ox, int64_t sx, int64_t oy, int64_t sy, int64_t pos, int64_t n) {
    const T* __restrict gg = g + pos;
    T* __restrict dst = out + pos;
    const T* px = x + ox;
    const T* py = y + oy;
    auto pick = [](bool x_selected, T gv) { return (kForX ? x_selected : !x_selected) ? gv : T{0}; };
    if (sx && sy) {
      for (int64_t i = 0; i < n; ++i) dst[i] = pick(Cmp::apply(px[i], py[i]), gg[i]);
    } else if (sx) {
      const T yv = *py;
      for (int64_t i = 0; i < n; ++i) dst[i] = pick(Cmp::apply(px[i], yv), gg[i]);
    } else {
      const T xv = *px;
      for (int64_t i = 0; i < n; ++i) dst[i] = pick(Cmp::apply(xv, py[i]), gg[i]);
    }
  });
}

}  // namespace stepscope::cwise
