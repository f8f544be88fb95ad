#include "stepscope/ops/linalg_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/ops/registry.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_tensor_near;

// Deterministic values in [-1, 1) that are not all alike (so a wrong index shows).
template <typename T>
Tensor pattern(const Shape& shape, int seed) {
  Tensor t(dtype_of<T>, shape);
  auto v = t.flat<T>();
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<T>((s >> 8) % 2000) / T(1000) - T(1);
  }
  return t;
}

// op(a) x op(b) in double, straight from the definition.
template <typename T>
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const T* x = a.data<T>();
  const T* w = b.data<T>();
  const int64_t m = a.dim(ta ? 1 : 0), k = a.dim(ta ? 0 : 1), n = b.dim(tb ? 0 : 1);
  const int64_t lda = a.dim(1), ldb = b.dim(1);
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += static_cast<double>(ta ? x[p * lda + i] : x[i * lda + p]) *
             static_cast<double>(tb ? w[j * ldb + p] : w[p * ldb + j]);
      out[i * n + j] = s;
    }
  return out;
}

TEST(MatMul, HandComputed) {
  Graph g;
  Scope root(g);
  auto a = constant<float>(root, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto b = constant<float>(root, {7, 8, 9, 10, 11, 12}, Shape{3, 2});
  auto y = matmul(root, a, b);
  EXPECT_EQ(y.node->name(), "MatMul");
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  expect_tensor_near<float>(eval(y), Shape{2, 2}, {58, 64, 139, 154});
}

TEST(MatMul, Float64AndTransposesHandComputed) {
  Graph g;
  Scope root(g);
  // a = [[1,2],[3,4]], b = [[5,6],[7,8]].
  auto a = constant<double>(root, {1, 2, 3, 4}, Shape{2, 2});
  auto b = constant<double>(root, {5, 6, 7, 8}, Shape{2, 2});
  expect_tensor_near<double>(eval(matmul(root, a, b)), Shape{2, 2}, {19, 22, 43, 50});
  expect_tensor_near<double>(eval(matmul(root, a, b, true)), Shape{2, 2}, {26, 30, 38, 44});
  expect_tensor_near<double>(eval(matmul(root, a, b, false, true)), Shape{2, 2}, {17, 23, 39, 53});
  expect_tensor_near<double>(eval(matmul(root, a, b, true, true)), Shape{2, 2}, {23, 31, 34, 46});
}

// Every transpose combination, on both split directions of the kernel (more rows than columns
// in the product, and fewer), large enough to be split over the 2-thread session's pool.
TEST(MatMul, AllTransposesAgainstNaiveReference) {
  struct Case {
    int64_t m, k, n;
  };
  for (Case cs : {Case{200, 90, 70}, Case{70, 90, 200}, Case{5, 3, 4}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      Graph g;
      Scope root(g);
      Tensor a = pattern<float>(ta ? Shape{cs.k, cs.m} : Shape{cs.m, cs.k}, t);
      Tensor b = pattern<float>(tb ? Shape{cs.n, cs.k} : Shape{cs.k, cs.n}, t + 10);
      auto y = matmul(root, constant(root, a), constant(root, b), ta, tb);
      SCOPED_TRACE("m=" + std::to_string(cs.m) + " transpose_a=" + std::to_string(ta) +
                   " transpose_b=" + std::to_string(tb));
      auto want = naive_matmul<float>(a, b, ta, tb);
      for (int threads : {1, 2, 4})
        expect_tensor_near<float>(eval({y}, {}, threads)[0], Shape{cs.m, cs.n},
                                  std::vector<float>(want.begin(), want.end()), 1e-4);
    }
  }
}

// float32 runs on oneDNN in blocks of 128 rows or columns (ops/internal/dnnl.h), fixed by the
// shapes: every transpose combination, with a short last block, gives the same bits for any
// intra-op thread count.
TEST(MatMul, Float32GivesTheSameBitsForAnyThreadCount) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{300, 90, 70}, {70, 90, 300}, {64, 784, 256}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      Graph g;
      Scope root(g);
      Tensor a = pattern<float>(ta ? Shape{k, m} : Shape{m, k}, t);
      Tensor b = pattern<float>(tb ? Shape{n, k} : Shape{k, n}, t + 10);
      auto y = matmul(root, constant(root, a), constant(root, b), ta, tb);
      Tensor first = eval({y}, {}, 1)[0];
      for (int threads : {2, 3, 4})
        EXPECT_TRUE(tensors_equal(eval({y}, {}, threads)[0], first))
            << m << "x" << k << "x" << n << " transpose " << ta << tb << ", " << threads << " threads";
    }
  }
}

// Through 2- and 4-thread sessions (2 is the common test setup; 4 gives the pool several
// workers, so the product is certainly split into blocks).
TEST(MatMul, LargeFloat64ThroughThreadedSessionsIsDeterministic) {
  Graph g;
  Scope root(g);
  Tensor a = pattern<double>(Shape{300, 256}, 1);
  Tensor b = pattern<double>(Shape{150, 256}, 2);
  auto y = matmul(root, constant(root, a), constant(root, b), false, true);
  auto want = naive_matmul<double>(a, b, false, true);
  for (int threads : {2, 4}) {
    Session session(g, {.inter_op_threads = threads});
    Tensor first = session.run(y);
    expect_tensor_near<double>(first, Shape{300, 150}, want, 1e-12);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(tensors_equal(session.run(y), first));
  }
}

TEST(MatMul, EmptyInnerDimensionGivesZeros) {
  Graph g;
  Scope root(g);
  auto a = placeholder(root, DType::kFloat32, Shape{2, -1});
  auto b = placeholder(root, DType::kFloat32, Shape{-1, 3});
  auto y = matmul(root, a, b);
  expect_tensor_near<float>(
      eval(y, {{a, Tensor(DType::kFloat32, Shape{2, 0})}, {b, Tensor(DType::kFloat32, Shape{0, 3})}}), Shape{2, 3},
      {0, 0, 0, 0, 0, 0});
}

TEST(MatMul, UnknownDimsPropagate) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 784});
  auto w = placeholder(root, DType::kFloat32, Shape{784, 10});
  EXPECT_EQ(matmul(root, x, w).shape(), (Shape{-1, 10}));
  auto u = placeholder(root, DType::kFloat32);  // unknown rank
  EXPECT_EQ(matmul(root, u, w).shape(), (Shape{-1, 10}));
  EXPECT_EQ(matmul(root, w, u, true, true).shape(), (Shape{10, -1}));
  // Inner dimensions unknown at build time are checked when the kernel runs.
  auto p = placeholder(root, DType::kFloat32, Shape{2, -1});
  auto y = matmul(root, p, w);
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              eval(y, {{p, Tensor(DType::kFloat32, Shape{2, 5})}, {w, Tensor(DType::kFloat32, Shape{784, 10})}});
            }),
            "[MatMul] MatMul_3: inner dimensions differ: [2,5] x [784,10]");
}

TEST(MatMul, ShapeErrorsNameTheShapesAndTransposes) {
  Graph g;
  Scope root(g);
  // (A failed add still uses up its node name, as in TensorFlow: MatMul, MatMul_1, ...)
  auto x = placeholder(root, DType::kFloat32, Shape{64, 784});
  auto w = placeholder(root, DType::kFloat32, Shape{100, 10});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root.with_name_scope("layer1"), x, w); }),
            "[MatMul] layer1/MatMul: inner dimensions differ: [64,784] x [100,10]");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root, x, w, true); }),
            "[MatMul] MatMul: inner dimensions differ: [64,784] x [100,10] (transpose_a=true)");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root, x, w, false, true); }),
            "[MatMul] MatMul_1: inner dimensions differ: [64,784] x [100,10] (transpose_b=true)");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root, x, w, true, true); }),
            "[MatMul] MatMul_2: inner dimensions differ: [64,784] x [100,10] (transpose_a=true, transpose_b=true)");
  auto v = placeholder(root, DType::kFloat32, Shape{3});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root, v, w); }), "[MatMul] MatMul_3: input 0 must have rank 2, got shape [3]");
  auto d = placeholder(root, DType::kFloat64, Shape{784, 10});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root, x, d); }), "[MatMul] MatMul_4: input 1 must be float32, got float64");
  auto i = placeholder(root, DType::kInt32, Shape{2, 2});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { matmul(root, i, i); }), "[MatMul] MatMul_5: input 0 must be float32 or float64, got int32");
}

TEST(MatMul, FlopsAre2MNK) {
  Graph g;
  Scope root(g);
  auto a = placeholder(root, DType::kFloat32, Shape{784, 64});
  auto b = placeholder(root, DType::kFloat32, Shape{784, 10});
  auto y = matmul(root, a, b, true);
  const Node& n = *y.node;
  std::vector<Shape> in{a.shape(), b.shape()}, out{y.shape()};
  EXPECT_EQ(n.op().flops(CostContext{n, in, out}), 2 * 64 * 10 * 784);
  std::vector<Shape> unknown_out{Shape{-1, 10}};
  EXPECT_EQ(n.op().flops(CostContext{n, in, unknown_out}), 0);
}

}  // namespace
}  // namespace stepscope
