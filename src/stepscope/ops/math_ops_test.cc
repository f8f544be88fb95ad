// Elementwise math ops: values against hand-computed results for each op and dtype class,
// every broadcasting path, shape rules (error texts, unknown dims), CheckNumerics errors
// through Session::run, and large tensors split over threads.
#include "stepscope/ops/math_ops.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/cwise.h"
#include "stepscope/ops/registry.h"
#include "stepscope/testing/error_text.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;

// testing::expect_tensor_near, but an infinite expected value must be matched exactly (the
// shared helper's relative tolerance becomes inf - inf = NaN there).
template <typename T>
void expect_tensor_near(const Tensor& t, const Shape& shape, const std::vector<T>& expected, double tolerance = 1e-5) {
  if constexpr (std::is_floating_point_v<T>) {
    ASSERT_EQ(t.dtype(), dtype_of<T>);
    ASSERT_EQ(t.num_elements(), static_cast<int64_t>(expected.size()));
    Tensor rest = t.deep_copy();
    std::vector<T> finite = expected;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (!std::isinf(expected[i])) continue;
      EXPECT_EQ(t.flat<T>()[i], expected[i]) << "at " << i;
      rest.data<T>()[i] = finite[i] = 0;
    }
    testing::expect_tensor_near<T>(rest, shape, finite, tolerance);
  } else {
    testing::expect_tensor_near<T>(t, shape, expected, tolerance);
  }
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename T>
Output vec(const Scope& s, std::vector<T> values, Shape shape) {
  return constant(s, Tensor::from_vector<T>(values, shape));
}

// first, first + step, ... filling `shape`.
template <typename T>
Tensor iota(const Shape& shape, T first = 0, T step = 1) {
  Tensor t(dtype_of<T>, shape);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = static_cast<T>(first + static_cast<T>(i) * step);
  return t;
}

// Straightforward NumPy broadcasting, index by index: the reference for the fast paths.
template <typename T, typename R>
std::vector<R> reference(const Tensor& a, const Tensor& b, const Shape& out, R (*f)(T, T)) {
  std::vector<R> result(out.num_elements());
  const int r = out.rank();
  for (int64_t flat = 0; flat < out.num_elements(); ++flat) {
    int64_t rest = flat, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t i = rest % out.dim(d);
      rest /= out.dim(d);
      const int da = d - (r - a.rank()), db = d - (r - b.rank());
      if (da >= 0) {
        if (a.dim(da) != 1) ia += i * sa;
        sa *= a.dim(da);
      }
      if (db >= 0) {
        if (b.dim(db) != 1) ib += i * sb;
        sb *= b.dim(db);
      }
    }
    result[flat] = f(a.data<T>()[ia], b.data<T>()[ib]);
  }
  return result;
}

float add_f(float a, float b) { return a + b; }
float sub_f(float a, float b) { return a - b; }

// ---------------------------------------------------------------------------------------------
// Binary ops, same shapes

TEST(MathOps, BinaryFloat32) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {1, -2, 3.5f, 8}, Shape{2, 2});
  auto y = vec<float>(s, {4, 5, -0.5f, 2}, Shape{2, 2});
  auto out = eval({add(s, x, y), sub(s, x, y), mul(s, x, y), div(s, x, y), maximum(s, x, y), minimum(s, x, y)});
  expect_tensor_near<float>(out[0], Shape{2, 2}, {5, 3, 3, 10});
  expect_tensor_near<float>(out[1], Shape{2, 2}, {-3, -7, 4, 6});
  expect_tensor_near<float>(out[2], Shape{2, 2}, {4, -10, -1.75f, 16});
  expect_tensor_near<float>(out[3], Shape{2, 2}, {0.25f, -0.4f, -7, 4});
  expect_tensor_near<float>(out[4], Shape{2, 2}, {4, 5, 3.5f, 8});
  expect_tensor_near<float>(out[5], Shape{2, 2}, {1, -2, -0.5f, 2});
}

TEST(MathOps, BinaryFloat64) {
  Graph g;
  Scope s(g);
  auto x = vec<double>(s, {1, 1e300, -3}, Shape{3});
  auto y = vec<double>(s, {3, 1e10, 0}, Shape{3});
  auto out = eval({add(s, x, y), sub(s, x, y), mul(s, x, y), div(s, x, y), maximum(s, x, y), minimum(s, x, y)});
  expect_tensor_near<double>(out[0], Shape{3}, {4, 1e300, -3}, 1e-12);
  expect_tensor_near<double>(out[1], Shape{3}, {-2, 1e300, -3}, 1e-12);
  EXPECT_TRUE(std::isinf(out[2].flat<double>()[1]));  // overflows float64 too
  EXPECT_EQ(out[2].flat<double>()[0], 3);
  expect_tensor_near<double>(out[3], Shape{3}, {1.0 / 3, 1e290, -std::numeric_limits<double>::infinity()}, 1e-12);
  expect_tensor_near<double>(out[4], Shape{3}, {3, 1e300, 0}, 1e-12);
  expect_tensor_near<double>(out[5], Shape{3}, {1, 1e10, -3}, 1e-12);
}

TEST(MathOps, BinaryInt32WrapsAndDivTruncates) {
  Graph g;
  Scope s(g);
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = std::numeric_limits<int32_t>::min();
  auto x = vec<int32_t>(s, {7, -7, 7, -7, kMax, kMin}, Shape{6});
  auto y = vec<int32_t>(s, {2, 2, -2, -2, 1, -1}, Shape{6});
  auto out = eval({add(s, x, y), sub(s, x, y), mul(s, x, y), div(s, x, y), maximum(s, x, y), minimum(s, x, y)});
  expect_tensor_near<int32_t>(out[0], Shape{6}, {9, -5, 5, -9, kMin, kMax});  // wraps both ways
  expect_tensor_near<int32_t>(out[1], Shape{6}, {5, -9, 9, -5, kMax - 1, kMin + 1});
  expect_tensor_near<int32_t>(out[2], Shape{6}, {14, -14, -14, 14, kMax, kMin});  // kMin * -1 wraps
  expect_tensor_near<int32_t>(out[3], Shape{6}, {3, -3, -3, 3, kMax, kMin});      // toward zero
  expect_tensor_near<int32_t>(out[4], Shape{6}, {7, 2, 7, -2, kMax, -1});
  expect_tensor_near<int32_t>(out[5], Shape{6}, {2, -7, -2, -7, 1, kMin});
}

TEST(MathOps, BinaryInt64) {
  Graph g;
  Scope s(g);
  auto x = vec<int64_t>(s, {int64_t{1} << 40, -9, 10}, Shape{3});
  auto y = vec<int64_t>(s, {3, 4, -3}, Shape{3});
  auto out = eval({add(s, x, y), sub(s, x, y), mul(s, x, y), div(s, x, y), maximum(s, x, y), minimum(s, x, y)});
  expect_tensor_near<int64_t>(out[0], Shape{3}, {(int64_t{1} << 40) + 3, -5, 7});
  expect_tensor_near<int64_t>(out[1], Shape{3}, {(int64_t{1} << 40) - 3, -13, 13});
  expect_tensor_near<int64_t>(out[2], Shape{3}, {int64_t{3} << 40, -36, -30});
  expect_tensor_near<int64_t>(out[3], Shape{3}, {(int64_t{1} << 40) / 3, -2, -3});
  expect_tensor_near<int64_t>(out[4], Shape{3}, {int64_t{1} << 40, 4, 10});
  expect_tensor_near<int64_t>(out[5], Shape{3}, {3, -9, -3});
}

TEST(MathOps, IntegerDivisionByZeroFailsAndSessionStaysUsable) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kInt32, Shape{3});
  auto y = placeholder(s.with_op_name("y"), DType::kInt32, Shape{3});
  auto q = div(s.with_op_name("q"), x, y);
  Session sess(g, {.inter_op_threads = 2});
  auto xs = Tensor::from_vector<int32_t>({1, 2, 3});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              sess.run(q, {{x, xs}, {y, Tensor::from_vector<int32_t>({1, 0, 1})}});
            }),
            "[Div] q: Integer division by zero");
  expect_tensor_near<int32_t>(sess.run(q, {{x, xs}, {y, Tensor::from_vector<int32_t>({1, 2, -3})}}), Shape{3},
                              {1, 1, -1});
  // Floats divide by zero the IEEE way.
  auto f = div(s, vec<float>(s, {1, -1, 0}, Shape{3}), vec<float>(s, {0, 0, 0}, Shape{3}));
  expect_tensor_near<float>(sess.run(f), Shape{3}, {kInf, -kInf, kNaN});
}

TEST(MathOps, MaximumAndMinimumPropagateNaN) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {kNaN, 1, kNaN, -kInf}, Shape{4});
  auto y = vec<float>(s, {1, kNaN, kNaN, 2}, Shape{4});
  auto out = eval({maximum(s, x, y), minimum(s, x, y)});
  expect_tensor_near<float>(out[0], Shape{4}, {kNaN, kNaN, kNaN, 2});
  expect_tensor_near<float>(out[1], Shape{4}, {kNaN, kNaN, kNaN, -kInf});
}

TEST(MathOps, EqualOnEveryDtypeGivesBool) {
  Graph g;
  Scope s(g);
  auto f = equal(s, vec<float>(s, {1, kNaN, 0.0f, 2}, Shape{4}), vec<float>(s, {1, kNaN, -0.0f, 3}, Shape{4}));
  auto d = equal(s, vec<double>(s, {0.5, 1}, Shape{2}), vec<double>(s, {0.5, 2}, Shape{2}));
  auto i = equal(s, vec<int32_t>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3}), vec<int32_t>(s, {1, 0, 3}, Shape{3}));
  auto l = equal(s, vec<int64_t>(s, {7}, Shape{}), vec<int64_t>(s, {7, 8}, Shape{2}));
  auto b = equal(s, vec<bool>(s, {true, false, true, false}, Shape{2, 2}), vec<bool>(s, {true, true}, Shape{2, 1}));
  EXPECT_EQ(f.dtype(), DType::kBool);
  auto out = eval({f, d, i, l, b});
  expect_tensor_near<bool>(out[0], Shape{4}, {true, false, true, false});  // NaN != NaN, 0 == -0
  expect_tensor_near<bool>(out[1], Shape{2}, {true, false});
  expect_tensor_near<bool>(out[2], Shape{2, 3}, {true, false, true, false, false, false});
  expect_tensor_near<bool>(out[3], Shape{2}, {true, false});
  expect_tensor_near<bool>(out[4], Shape{2, 2}, {true, false, true, false});
}

// ---------------------------------------------------------------------------------------------
// Broadcasting: each kernel path, checked against hand values and the index-by-index reference

TEST(MathOps, BroadcastScalarEitherSide) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto ten = vec<float>(s, {10}, Shape{});
  auto out = eval({sub(s, x, ten), sub(s, ten, x), sub(s, vec<float>(s, {10}, Shape{1, 1}), x)});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {-9, -8, -7, -6, -5, -4});
  expect_tensor_near<float>(out[1], Shape{2, 3}, {9, 8, 7, 6, 5, 4});
  expect_tensor_near<float>(out[2], Shape{2, 3}, {9, 8, 7, 6, 5, 4});
}

TEST(MathOps, BroadcastOneElementOfHigherRankRaisesRank) {
  Graph g;
  Scope s(g);
  // A [1,1] against a [3]: not a plain scalar case, the output is [1,3].
  auto out = eval(add(s, vec<float>(s, {10}, Shape{1, 1}), vec<float>(s, {1, 2, 3}, Shape{3})));
  expect_tensor_near<float>(out, Shape{1, 3}, {11, 12, 13});
  auto same_rank = eval(add(s, vec<float>(s, {1, 2, 3}, Shape{3}), vec<float>(s, {10}, Shape{1})));
  expect_tensor_near<float>(same_rank, Shape{3}, {11, 12, 13});
}

TEST(MathOps, BroadcastRowVector) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto row = vec<float>(s, {10, 20, 30}, Shape{3});
  auto out = eval({sub(s, x, row), sub(s, row, x), sub(s, x, vec<float>(s, {10, 20, 30}, Shape{1, 3}))});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {-9, -18, -27, -6, -15, -24});
  expect_tensor_near<float>(out[1], Shape{2, 3}, {9, 18, 27, 6, 15, 24});
  expect_tensor_near<float>(out[2], Shape{2, 3}, {-9, -18, -27, -6, -15, -24});
}

TEST(MathOps, BroadcastColumnAndOuter) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto col = vec<float>(s, {10, 20}, Shape{2, 1});
  auto out = eval({sub(s, x, col), sub(s, col, x), add(s, col, vec<float>(s, {1, 2, 3}, Shape{1, 3})),
                   mul(s, vec<float>(s, {1, 2, 3}, Shape{3}), col)});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {-9, -8, -7, -16, -15, -14});
  expect_tensor_near<float>(out[1], Shape{2, 3}, {9, 8, 7, 16, 15, 14});
  expect_tensor_near<float>(out[2], Shape{2, 3}, {11, 12, 13, 21, 22, 23});
  expect_tensor_near<float>(out[3], Shape{2, 3}, {10, 20, 30, 20, 40, 60});
}

TEST(MathOps, BroadcastGeneralPath) {
  Graph g;
  Scope s(g);
  // [2,1,3] op [4,1] -> [2,4,3]: three collapsed dims, each operand broadcast somewhere.
  auto a = vec<float>(s, {0, 1, 2, 100, 101, 102}, Shape{2, 1, 3});
  auto b = vec<float>(s, {10, 20, 30, 40}, Shape{4, 1});
  auto out = eval(add(s, a, b));
  expect_tensor_near<float>(out, Shape{2, 4, 3}, {10,  11,  12,  20,  21,  22,  30,  31,  32,  40,  41,  42,
                                                  110, 111, 112, 120, 121, 122, 130, 131, 132, 140, 141, 142});
}

TEST(MathOps, BroadcastMatchesReferenceOnManyShapes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {Shape{2, 1, 3}, Shape{4, 1}},
      {Shape{3, 1, 5, 1}, Shape{1, 4, 1, 2}},
      {Shape{2, 3, 4}, Shape{3, 1}},
      {Shape{2, 3, 4}, Shape{2, 1, 4}},
      {Shape{1, 3, 1, 4}, Shape{2, 1, 5, 4}},
      {Shape{5, 1}, Shape{1, 5}},
      {Shape{2, 2, 2, 2, 2, 2, 2, 2}, Shape{2, 1, 2, 1, 2, 1, 2, 1}},
      {Shape{6}, Shape{4, 1, 6}},
      {Shape{1}, Shape{3, 2}},
      {Shape{3, 1, 1}, Shape{3, 4, 1}},
  };
  for (const auto& [sa, sb] : cases) {
    Graph g;
    Scope s(g);
    Tensor ta = iota<float>(sa, 1, 1), tb = iota<float>(sb, 0.5f, 0.25f);
    auto out = eval({add(s, constant(s, ta), constant(s, tb)), sub(s, constant(s, tb), constant(s, ta))});
    cwise::Broadcast bc;
    ASSERT_TRUE(cwise::analyze_broadcast(sa, sb, bc));
    SCOPED_TRACE(sa.to_string() + " op " + sb.to_string());
    expect_tensor_near<float>(out[0], bc.out_shape, reference<float, float>(ta, tb, bc.out_shape, add_f));
    expect_tensor_near<float>(out[1], bc.out_shape, reference<float, float>(tb, ta, bc.out_shape, sub_f));
  }
}

TEST(MathOps, BroadcastCollapsesDims) {
  cwise::Broadcast bc;
  ASSERT_TRUE(cwise::analyze_broadcast(Shape{4, 5, 6}, Shape{4, 5, 6}, bc));
  EXPECT_EQ(bc.rank, 1);
  EXPECT_EQ(bc.dims[0], 120);
  ASSERT_TRUE(cwise::analyze_broadcast(Shape{8, 4, 5}, Shape{4, 5}, bc));  // row vector of 20
  ASSERT_EQ(bc.rank, 2);
  EXPECT_EQ(bc.dims[0], 8);
  EXPECT_EQ(bc.dims[1], 20);
  EXPECT_EQ(bc.a_stride[0], 20);
  EXPECT_EQ(bc.b_stride[0], 0);
  EXPECT_EQ(bc.b_stride[1], 1);
  ASSERT_TRUE(cwise::analyze_broadcast(Shape{8, 1, 1}, Shape{1, 1, 1}, bc));  // size-1 dims drop
  EXPECT_EQ(bc.rank, 1);
  EXPECT_EQ(bc.out_shape, (Shape{8, 1, 1}));
  ASSERT_TRUE(cwise::analyze_broadcast(Shape{1, 1}, Shape{1}, bc));
  EXPECT_EQ(bc.rank, 0);
  ASSERT_TRUE(cwise::analyze_broadcast(Shape{2, 1, 3}, Shape{4, 1}, bc));
  EXPECT_EQ(bc.rank, 3);
  EXPECT_EQ(bc.out_shape, (Shape{2, 4, 3}));
  EXPECT_FALSE(cwise::analyze_broadcast(Shape{2, 3}, Shape{4}, bc));
}

struct AddFunctor {
  template <typename T>
  static T apply(T a, T b) {
    return a + b;
  }
};

// What parallel_for chunks do: compute arbitrary flat ranges, starting and ending inside rows.
TEST(MathOps, BroadcastRangesStartingMidRowMatchTheWhole) {
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{
           {Shape{2, 1, 3}, Shape{4, 1}}, {Shape{3, 1, 5, 1}, Shape{1, 4, 1, 2}}, {Shape{5, 7}, Shape{5, 1}}}) {
    SCOPED_TRACE(sa.to_string() + " op " + sb.to_string());
    Tensor ta = iota<float>(sa, 1, 1), tb = iota<float>(sb, 100, 100);
    cwise::Broadcast bc;
    ASSERT_TRUE(cwise::analyze_broadcast(sa, sb, bc));
    const int64_t n = bc.out_shape.num_elements();
    const auto expected = reference<float, float>(ta, tb, bc.out_shape, add_f);
    for (int64_t step : {1, 2, 5, 7, 11}) {
      std::vector<float> got(n, -1);
      const float* a = ta.data<float>();
      const float* b = tb.data<float>();
      for (int64_t begin = 0; begin < n; begin += step)
        cwise::for_each_run(bc, begin, std::min(n, begin + step),
                            [&](int64_t oa, int64_t sa, int64_t ob, int64_t sb, int64_t pos, int64_t len) {
                              cwise::map_run<AddFunctor>(a + oa, sa, b + ob, sb, got.data() + pos, len);
                            });
      EXPECT_EQ(got, expected) << "step " << step;
    }
  }
}

TEST(MathOps, BroadcastWithEmptyTensors) {
  Graph g;
  Scope s(g);
  auto out = eval({add(s, constant(s, Tensor(DType::kFloat32, Shape{0, 3})), vec<float>(s, {1, 2, 3}, Shape{3})),
                   add(s, constant(s, Tensor(DType::kFloat32, Shape{2, 0})), vec<float>(s, {1, 2}, Shape{2, 1})),
                   div(s, constant(s, Tensor(DType::kInt32, Shape{0})), vec<int32_t>(s, {0}, Shape{1}))});
  EXPECT_EQ(out[0].shape(), (Shape{0, 3}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(out[2].shape(), (Shape{0}));  // no element is divided, so no division by zero
}

// ---------------------------------------------------------------------------------------------
// Shape rules

TEST(MathOps, IncompatibleShapesNameOpNodeAndShapes) {
  Graph g;
  Scope s(g);
  auto a = vec<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto b = vec<float>(s, {1, 2, 3, 4}, Shape{4});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { add(s, a, b); }), "[Add] Add: incompatible shapes for broadcasting: [2,3] and [4]");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { equal(s.with_op_name("eq"), b, a); }),
            "[Equal] eq: incompatible shapes for broadcasting: [4] and [2,3]");
  auto p = placeholder(s, DType::kFloat32, Shape{2, -1});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              mul(s, p, placeholder(s, DType::kFloat32, Shape{4, 1}));
            }),
            "[Mul] Mul: incompatible shapes for broadcasting: [2,?] and [4,1]");
}

TEST(MathOps, DtypeErrors) {
  Graph g;
  Scope s(g);
  auto f = vec<float>(s, {1}, Shape{1});
  auto d = vec<double>(s, {1}, Shape{1});
  auto i = vec<int32_t>(s, {1}, Shape{1});
  auto b = vec<bool>(s, {true}, Shape{1});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { add(s, f, d); }), "[Add] Add: inputs must have the same dtype, got float32 and float64");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { add(s.with_op_name("bools"), b, b); }),
            "[Add] bools: input 0 must be float32, float64, int32 or int64, got bool");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { sqrt(s, i); }), "[Sqrt] Sqrt: input 0 must be float32 or float64, got int32");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { is_finite(s, i); }), "[IsFinite] IsFinite: input 0 must be float32 or float64, got int32");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { check_numerics(s, i, "m"); }),
            "[CheckNumerics] CheckNumerics: input 0 must be float32 or float64, got int32");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { neg(s, b); }), "[Neg] Neg: input 0 must be float32, float64, int32 or int64, got bool");
  EXPECT_EQ(equal(s, b, b).dtype(), DType::kBool);
  EXPECT_EQ(neg(s, i).dtype(), DType::kInt32);
  EXPECT_EQ(square(s, i).dtype(), DType::kInt32);
}

TEST(MathOps, UnknownDimsPropagate) {
  Graph g;
  Scope s(g);
  auto ph = [&](Shape shape) { return placeholder(s, DType::kFloat32, shape); };
  EXPECT_EQ(add(s, ph(Shape{-1, 3}), ph(Shape{3})).shape(), (Shape{-1, 3}));
  EXPECT_EQ(add(s, ph(Shape{-1}), ph(Shape{1})).shape(), (Shape{-1}));  // unknown vs 1: unknown
  EXPECT_EQ(add(s, ph(Shape{1}), ph(Shape{-1})).shape(), (Shape{-1}));
  EXPECT_EQ(add(s, ph(Shape{-1}), ph(Shape{5})).shape(), (Shape{5}));  // unknown vs n: n
  EXPECT_EQ(add(s, ph(Shape{5}), ph(Shape{-1})).shape(), (Shape{5}));
  EXPECT_EQ(add(s, ph(Shape{-1}), ph(Shape{-1})).shape(), (Shape{-1}));
  EXPECT_EQ(add(s, ph(Shape{-1, 1}), ph(Shape{1, -1})).shape(), (Shape{-1, -1}));
  EXPECT_EQ(add(s, ph(Shape{7, -1, 1}), ph(Shape{4, 1})).shape(), (Shape{7, 4, 1}));
  EXPECT_EQ(add(s, ph(Shape::unknown_rank()), ph(Shape{3})).shape(), Shape::unknown_rank());
  EXPECT_EQ(equal(s, ph(Shape{2}), ph(Shape::unknown_rank())).shape(), Shape::unknown_rank());
  EXPECT_EQ(exp(s, ph(Shape{-1, 4})).shape(), (Shape{-1, 4}));
  EXPECT_EQ(check_numerics(s, ph(Shape::unknown_rank()), "m").shape(), Shape::unknown_rank());
}

TEST(MathOps, RunTimeShapeMismatchIsCheckedByTheKernel) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1});
  auto y = placeholder(s.with_op_name("y"), DType::kFloat32, Shape{-1});
  auto z = add(s.with_op_name("z"), x, y);
  Session sess(g, {.inter_op_threads = 2});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              sess.run(z, {{x, Tensor::from_vector<float>({1, 2})}, {y, Tensor::from_vector<float>({1, 2, 3})}});
            }),
            "[Add] z: incompatible shapes for broadcasting: [2] and [3]");
  expect_tensor_near<float>(
      sess.run(z, {{x, Tensor::from_vector<float>({1, 2})}, {y, Tensor::from_vector<float>({5})}}), Shape{2}, {6, 7});
}

// ---------------------------------------------------------------------------------------------
// Unary ops

TEST(MathOps, UnaryFloat32) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {0.25f, 1, 4, 9}, Shape{2, 2});
  auto out = eval({neg(s, x), square(s, x), sqrt(s, x), rsqrt(s, x), exp(s, x), log(s, x), tanh(s, x), sigmoid(s, x)});
  expect_tensor_near<float>(out[0], Shape{2, 2}, {-0.25f, -1, -4, -9});
  expect_tensor_near<float>(out[1], Shape{2, 2}, {0.0625f, 1, 16, 81});
  expect_tensor_near<float>(out[2], Shape{2, 2}, {0.5f, 1, 2, 3});
  expect_tensor_near<float>(out[3], Shape{2, 2}, {2, 1, 0.5f, 1.0f / 3});
  expect_tensor_near<float>(out[4], Shape{2, 2}, {1.2840254f, 2.7182818f, 54.598150f, 8103.0839f});
  expect_tensor_near<float>(out[5], Shape{2, 2}, {-1.3862944f, 0, 1.3862944f, 2.1972246f});
  expect_tensor_near<float>(out[6], Shape{2, 2}, {0.24491866f, 0.76159416f, 0.99932930f, 0.99999997f});
  expect_tensor_near<float>(out[7], Shape{2, 2}, {0.56217650f, 0.73105858f, 0.98201379f, 0.99987661f});
}

TEST(MathOps, UnaryFloat64AndSpecialValues) {
  Graph g;
  Scope s(g);
  auto x = vec<double>(s, {-2, 0, 0.5}, Shape{3});
  auto out = eval({neg(s, x), square(s, x), sqrt(s, x), rsqrt(s, x), exp(s, x), log(s, x), tanh(s, x), sigmoid(s, x)});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  expect_tensor_near<double>(out[0], Shape{3}, {2, 0, -0.5}, 1e-12);
  expect_tensor_near<double>(out[1], Shape{3}, {4, 0, 0.25}, 1e-12);
  expect_tensor_near<double>(out[2], Shape{3}, {nan, 0, 0.70710678118654752}, 1e-12);
  expect_tensor_near<double>(out[3], Shape{3}, {nan, inf, 1.4142135623730950}, 1e-12);
  expect_tensor_near<double>(out[4], Shape{3}, {0.13533528323661270, 1, 1.6487212707001282}, 1e-12);
  expect_tensor_near<double>(out[5], Shape{3}, {nan, -inf, -0.69314718055994531}, 1e-12);
  expect_tensor_near<double>(out[6], Shape{3}, {-0.96402758007581690, 0, 0.46211715726000974}, 1e-12);
  expect_tensor_near<double>(out[7], Shape{3}, {0.11920292202211755, 0.5, 0.62245933120185456}, 1e-12);
}

TEST(MathOps, NegAndSquareOnIntegers) {
  Graph g;
  Scope s(g);
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  auto i = vec<int32_t>(s, {3, -4, 0, kMin, 65536}, Shape{5});
  auto l = vec<int64_t>(s, {3, -4, int64_t{1} << 31}, Shape{3});
  auto out = eval({neg(s, i), square(s, i), neg(s, l), square(s, l)});
  expect_tensor_near<int32_t>(out[0], Shape{5}, {-3, 4, 0, kMin, -65536});  // -INT_MIN wraps to itself
  expect_tensor_near<int32_t>(out[1], Shape{5}, {9, 16, 0, 0, 0});          // 2^32 wraps to 0
  expect_tensor_near<int64_t>(out[2], Shape{3}, {-3, 4, -(int64_t{1} << 31)});
  expect_tensor_near<int64_t>(out[3], Shape{3}, {9, 16, int64_t{1} << 62});
}

TEST(MathOps, SigmoidDoesNotOverflow) {
  Graph g;
  Scope s(g);
  auto f = vec<float>(s, {-1000, -100, -20, 20, 100, 1000, -kInf, kInf}, Shape{8});
  auto d = vec<double>(s, {-1000, 1000, -700}, Shape{3});
  auto out = eval({sigmoid(s, f), sigmoid(s, d)});
  auto v = out[0].flat<float>();
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_GT(v[1], 0.0f);  // e^-100 ~ 3.7e-44 is a float32 denormal, not 0 / NaN
  EXPECT_NEAR(v[1], 3.7200760e-44f, 2e-45f);
  EXPECT_NEAR(v[2], 2.0611537e-09f, 1e-15f);
  EXPECT_EQ(v[3], 1.0f);
  EXPECT_EQ(v[4], 1.0f);
  EXPECT_EQ(v[5], 1.0f);
  EXPECT_EQ(v[6], 0.0f);
  EXPECT_EQ(v[7], 1.0f);
  auto w = out[1].flat<double>();
  EXPECT_EQ(w[0], 0.0);
  EXPECT_EQ(w[1], 1.0);
  EXPECT_NEAR(w[2], 9.8596765437597708e-305, 1e-316);  // e^-700, no 1 + e^700 anywhere
}

TEST(MathOps, IsFinite) {
  Graph g;
  Scope s(g);
  auto out = eval({is_finite(s, vec<float>(s, {1, kInf, -kInf, kNaN, 0, 3e38f}, Shape{2, 3})),
                   is_finite(s, vec<double>(s, {1e308, std::nan("")}, Shape{2}))});
  expect_tensor_near<bool>(out[0], Shape{2, 3}, {true, false, false, false, true, true});
  expect_tensor_near<bool>(out[1], Shape{2}, {true, false});
}

// ---------------------------------------------------------------------------------------------
// CheckNumerics

TEST(MathOps, CheckNumericsForwardsFiniteInput) {
  Graph g;
  Scope s(g);
  Tensor value = Tensor::from_vector<float>({1, 2, -3}, Shape{3});
  auto x = constant(s, value);
  auto out = eval(check_numerics(s, x, "bad x"));
  expect_tensor_near<float>(out, Shape{3}, {1, 2, -3});
  EXPECT_TRUE(out.shares_buffer_with(value));  // forwarded, not copied
}

TEST(MathOps, CheckNumericsFailsWithTensorFlowsMessageAndSessionStaysUsable) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1});
  auto checked = check_numerics(s.with_name_scope("layer").with_op_name("check"), x, "found bad loss");
  auto y = mul(s, checked, 2.0);
  Session sess(g, {.inter_op_threads = 2});
  auto run = [&](std::vector<float> v) { return sess.run(y, {{x, Tensor::from_vector<float>(v)}}); };
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              run({1, kNaN, 3});
            }),
            "[CheckNumerics] layer/check: found bad loss : Tensor had NaN values");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { run({1, -kInf}); }), "[CheckNumerics] layer/check: found bad loss : Tensor had Inf values");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              run({kInf, kNaN});
            }),
            "[CheckNumerics] layer/check: found bad loss : Tensor had Inf and NaN values");
  expect_tensor_near<float>(run({1, 2.5f}), Shape{2}, {2, 5});
  expect_tensor_near<float>(run({}), Shape{0}, {});
}

TEST(MathOps, CheckNumericsFloat64) {
  Graph g;
  Scope s(g);
  auto x = vec<double>(s, {1, std::numeric_limits<double>::infinity()}, Shape{2});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { eval(check_numerics(s.with_op_name("c"), x, "m")); }),
            "[CheckNumerics] c: m : Tensor had Inf values");
}

// ---------------------------------------------------------------------------------------------
// Scalar overloads, names, flops

TEST(MathOps, ScalarOverloadsMakeConstOfTheInputsDtype) {
  Graph g;
  Scope s(g);
  auto f = vec<float>(s, {1, 2}, Shape{2});
  auto d = vec<double>(s, {1, 4}, Shape{2});
  auto i = vec<int32_t>(s, {7, -7}, Shape{2});
  auto l = vec<int64_t>(s, {5, 6}, Shape{2});
  auto half = mul(s.with_op_name("half"), f, 0.5f);
  EXPECT_EQ(half.node->name(), "half");  // the op gets the name, the Const a default one
  EXPECT_EQ(half.node->input(1).node->op_type(), "Const");
  EXPECT_EQ(half.node->input(1).dtype(), DType::kFloat32);
  auto out = eval({half, add(s, f, 1), sub(s, f, 1), sub(s, 1.0, d), div(s, d, 2), div(s, 1.0, d), maximum(s, f, 1.5),
                   minimum(s, f, 1.5), div(s, i, 2), mul(s, l, -3)});
  expect_tensor_near<float>(out[0], Shape{2}, {0.5f, 1});
  expect_tensor_near<float>(out[1], Shape{2}, {2, 3});
  expect_tensor_near<float>(out[2], Shape{2}, {0, 1});
  expect_tensor_near<double>(out[3], Shape{2}, {0, -3});
  expect_tensor_near<double>(out[4], Shape{2}, {0.5, 2});
  expect_tensor_near<double>(out[5], Shape{2}, {1, 0.25});
  expect_tensor_near<float>(out[6], Shape{2}, {1.5f, 2});
  expect_tensor_near<float>(out[7], Shape{2}, {1, 1.5f});
  expect_tensor_near<int32_t>(out[8], Shape{2}, {3, -3});
  expect_tensor_near<int64_t>(out[9], Shape{2}, {-15, -18});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { mul(s, i, 0.5); }), "[Mul] cannot convert 0.5 to a scalar of dtype int32");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { add(s, i, 3e9); }), "[Add] cannot convert 3e+09 to a scalar of dtype int32");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { add(s, vec<bool>(s, {true}, Shape{1}), 1); }),
            "[Add] cannot convert 1 to a scalar of dtype bool");
}

TEST(MathOps, NodesAreNamedByOpType) {
  Graph g;
  Scope s(g);
  auto x = vec<float>(s, {1}, Shape{1});
  EXPECT_EQ(add(s, x, x).node->name(), "Add");
  EXPECT_EQ(add(s, x, x).node->name(), "Add_1");
  EXPECT_EQ(sigmoid(s.with_name_scope("act"), x).node->name(), "act/Sigmoid");
  EXPECT_EQ(check_numerics(s, x, "msg").node->attrs().get<std::string>("message"), "msg");
}

TEST(MathOps, FlopsAreOnePerOutputElement) {
  Graph g;
  Scope s(g);
  auto a = placeholder(s, DType::kFloat32, Shape{64, 10});
  auto b = placeholder(s, DType::kFloat32, Shape{10});
  auto flops = [](Output o) {
    const Node& n = *o.node;
    std::vector<Shape> in, out{n.output_shape(0)};
    for (const Output& i : n.inputs()) in.push_back(i.shape());
    const OpDef& def = n.op();
    return def.flops ? def.flops(CostContext{n, in, out}) : 0;
  };
  EXPECT_EQ(flops(add(s, a, b)), 640);
  EXPECT_EQ(flops(equal(s, b, a)), 640);
  EXPECT_EQ(flops(div(s, a, 2.0)), 640);
  EXPECT_EQ(flops(exp(s, b)), 10);
  EXPECT_EQ(flops(sigmoid(s, a)), 640);
  EXPECT_EQ(flops(is_finite(s, a)), 640);
  EXPECT_EQ(flops(check_numerics(s, a, "m")), 0);
  EXPECT_EQ(flops(add(s, placeholder(s, DType::kFloat32, Shape{-1, 10}), b)), 0);  // unknown: counted at run time
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Equal", "Neg", "Square", "Sqrt", "Rsqrt",
                         "Exp", "Log", "Tanh", "Sigmoid", "IsFinite"})
    EXPECT_NE(op_def(op).flops, nullptr) << op;
}

// ---------------------------------------------------------------------------------------------
// Large tensors: parallel_for splits, results do not depend on the split

TEST(MathOps, LargeTensorsWithTwoThreads) {
  Graph g;
  Scope s(g);
  const int64_t n = int64_t{1} << 20;
  auto x = constant(s, iota<float>(Shape{n}, 0, 1));
  auto y = constant(s, iota<float>(Shape{n}, 1, 2));
  auto sum = add(s, x, y);
  auto e = exp(s, mul(s, x, 1e-6));
  auto checked = check_numerics(s, sum, "sum");
  auto out = eval({sum, e, checked}, {}, 2);
  auto vs = out[0].flat<float>();
  auto ve = out[1].flat<float>();
  for (int64_t i = 0; i < n; i += 4099) {
    ASSERT_EQ(vs[i], static_cast<float>(i) + static_cast<float>(1 + 2 * i)) << i;
    ASSERT_NEAR(ve[i], std::exp(static_cast<float>(i) * 1e-6f), 1e-5f * ve[i]) << i;
  }
  EXPECT_EQ(vs[n - 1], static_cast<float>(n - 1) + static_cast<float>(2 * n - 1));
  EXPECT_TRUE(out[2].shares_buffer_with(out[0]));
}

TEST(MathOps, LargeTensorsSplitOverFourThreadsMatchOneThread) {
  Graph g;
  Scope s(g);
  // Each path big enough to split; row lengths chosen so chunks end inside rows.
  auto a3 = constant(s, iota<float>(Shape{37, 129, 131}, 0, 0.5f));
  auto b3 = constant(s, iota<float>(Shape{129, 1}, 3, -1));
  auto big = constant(s, iota<float>(Shape{1 << 20}, -5, 0.001f));
  auto m = constant(s, iota<float>(Shape{1031, 257}, 0, 1));
  auto row = constant(s, iota<float>(Shape{257}, 1, 1));
  auto bad = constant(s, [] {
    Tensor t = iota<float>(Shape{1 << 20}, 0, 1);
    t.data<float>()[(1 << 20) - 1] = kNaN;  // only the last chunk sees it
    return t;
  }());
  std::vector<Output> fetches = {add(s, a3, b3),  sub(s, big, 2.0),  mul(s, m, row),  maximum(s, row, m),
                                 sigmoid(s, big), is_finite(s, bad), equal(s, m, row)};
  auto one = eval(fetches, {}, 1);
  auto four = eval(fetches, {}, 4);
  for (size_t i = 0; i < fetches.size(); ++i) EXPECT_TRUE(tensors_equal(one[i], four[i])) << "fetch " << i;
  Tensor ta = iota<float>(Shape{37, 129, 131}, 0, 0.5f), tb = iota<float>(Shape{129, 1}, 3, -1);
  expect_tensor_near<float>(four[0], Shape{37, 129, 131}, reference<float, float>(ta, tb, Shape{37, 129, 131}, add_f));
  EXPECT_FALSE(four[5].flat<bool>()[(1 << 20) - 1]);
  EXPECT_TRUE(four[5].flat<bool>()[(1 << 20) - 2]);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { eval({check_numerics(s.with_op_name("cn"), bad, "big")}, {}, 4); }),
            "[CheckNumerics] cn: big : Tensor had NaN values");
}

}  // namespace
}  // namespace stepscope
