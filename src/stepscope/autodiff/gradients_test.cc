#include "stepscope/autodiff/gradients.h"

#include <gtest/gtest.h>

#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_tensor_near;

// An embedding table [4, 2] looked up with ids that repeat.
struct Embedding {
  Graph g;
  Scope s{g};
  Output table = placeholder(s, DType::kFloat64, Shape{4, 2});
  Tensor value = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{4, 2});
  Output ids = constant(s, std::vector<int32_t>{2, 0, 2}, Shape{3});
  // loss = sum(lookup * weights): d/d lookup = weights
  Output weights = constant(s, std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{3, 2});
  Output loss_of(Output lookup) { return reduce_sum(s, mul(s, lookup, weights)); }
};

TEST(Gradients, GatherGivesIndexedSlicesThatDensifyToTheSumOfRows) {
  Embedding e;
  Output loss = e.loss_of(gather(e.s, e.table, e.ids));
  std::vector<Gradient> grads = gradients_with_indexed_slices(e.s, {loss}, {e.table});
  ASSERT_TRUE(grads[0].is_sparse());
  EXPECT_FALSE(grads[0].dense);
  const IndexedSlices& g = grads[0].slices;
  EXPECT_EQ(g.values.shape(), (Shape{3, 2}));
  FeedList feed{{e.table, e.value}};
  expect_tensor_near<double>(eval(g.values, feed), Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  expect_tensor_near<int32_t>(eval(g.indices, feed), Shape{3}, {2, 0, 2});
  expect_tensor_near<int64_t>(eval(g.dense_shape, feed), Shape{2}, {4, 2});
  // gradients() asks for dense: duplicates added up, untouched rows zero.
  Output dense = gradients(e.s, {loss}, {e.table})[0];
  EXPECT_EQ(dense.node->op_type(), "UnsortedSegmentSum");
  expect_tensor_near<double>(eval(dense, feed), Shape{4, 2}, {3, 4, 0, 0, 6, 8, 0, 0});
}

TEST(Gradients, SeveralSparseContributionsConcatenateAndPassThroughIdentity) {
  Embedding e;
  Output a = gather(e.s, e.table, e.ids);
  Output b = gather(e.s, identity(e.s, e.table), constant(e.s, std::vector<int64_t>{3, 1, 3}, Shape{3}));
  Output loss = add(e.s, e.loss_of(a), e.loss_of(b));
  std::vector<Gradient> grads = gradients_with_indexed_slices(e.s, {loss}, {e.table});
  ASSERT_TRUE(grads[0].is_sparse());
  FeedList feed{{e.table, e.value}};
  EXPECT_EQ(grads[0].slices.indices.dtype(), DType::kInt64);  // int32 and int64 ids: int64
  // The later use's slices come first (the walk goes from the loss back).
  expect_tensor_near<int64_t>(eval(grads[0].slices.indices, feed), Shape{6}, {3, 1, 3, 2, 0, 2});
  expect_tensor_near<double>(eval(grads[0].slices.values, feed), Shape{6, 2}, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  expect_tensor_near<double>(eval(gradients(e.s, {loss}, {e.table})[0], feed), Shape{4, 2}, {3, 4, 3, 4, 6, 8, 6, 8});
}

TEST(Gradients, SparseMeetingDenseIsDensified) {
  Embedding e;
  Output loss = add(e.s, e.loss_of(gather(e.s, e.table, e.ids)), reduce_sum(e.s, e.table));
  std::vector<Gradient> grads = gradients_with_indexed_slices(e.s, {loss}, {e.table});
  ASSERT_TRUE(grads[0]);
  ASSERT_FALSE(grads[0].is_sparse());
  expect_tensor_near<double>(eval(grads[0].dense, {{e.table, e.value}}), Shape{4, 2}, {4, 5, 1, 1, 7, 9, 1, 1});
  // And a sparse gradient flowing on through another op is densified for that op's rule.
  Embedding f;
  Output loss2 = f.loss_of(gather(f.s, mul(f.s, f.table, constant(f.s, 2.0)), f.ids));
  std::vector<Gradient> g2 = gradients_with_indexed_slices(f.s, {loss2}, {f.table});
  ASSERT_FALSE(g2[0].is_sparse());
  expect_tensor_near<double>(eval(g2[0].dense, {{f.table, f.value}}), Shape{4, 2}, {6, 8, 0, 0, 12, 16, 0, 0});
}

TEST(Gradients, GatherOfATableOfRunTimeShapeTakesItsShapeAtRunTime) {
  Graph g;
  Scope s(g);
  Output table = placeholder(s, DType::kFloat64, Shape{-1, 2});
  Output ids = constant(s, std::vector<int32_t>{1, 1}, Shape{2});
  Output loss = reduce_sum(s, gather(s, table, ids));
  std::vector<Gradient> grads = gradients_with_indexed_slices(s, {loss}, {table});
  ASSERT_TRUE(grads[0].is_sparse());
  FeedList feed{{table, Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, Shape{3, 2})}};
  expect_tensor_near<int64_t>(eval(grads[0].slices.dense_shape, feed), Shape{2}, {3, 2});
  expect_tensor_near<double>(eval(gradients(s, {loss}, {table})[0], feed), Shape{3, 2}, {0, 0, 2, 2, 0, 0});
}

TEST(Gradients, DenseOnlyGraphsAreUnchanged) {
  Graph g;
  Scope s(g);
  Output x = placeholder(s, DType::kFloat64, Shape{2});
  Output y = reduce_sum(s, square(s, x));
  std::vector<Gradient> grads = gradients_with_indexed_slices(s, {y}, {x, constant(s, 1.0)});
  ASSERT_FALSE(grads[0].is_sparse());
  EXPECT_FALSE(grads[1]);
  expect_tensor_near<double>(eval(grads[0].dense, {{x, Tensor::from_vector<double>({1, 2})}}), Shape{2}, {2, 4});
}

}  // namespace
}  // namespace stepscope
