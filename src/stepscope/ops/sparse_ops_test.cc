#include "stepscope/ops/sparse_ops.h"

#include <string>

#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_tensor_near;

Tensor table() {  // [4, 2]: row r is {10r, 10r + 1}
  return Tensor::from_vector<float>({0, 1, 10, 11, 20, 21, 30, 31}, Shape{4, 2});
}

TEST(Gather, PicksRowsForIdsOfAnyShape) {
  Graph g;
  Scope s(g);
  Output params = constant(s, table());
  Output ids = constant(s, std::vector<int64_t>{3, 0, 3, 1, 2, 2}, Shape{2, 3});
  Output y = gather(s, params, ids);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  expect_tensor_near<float>(eval(y), Shape{2, 3, 2}, {30, 31, 0, 1, 30, 31, 10, 11, 20, 21, 20, 21});
  // A scalar id gives one row; 1-D params give scalars.
  expect_tensor_near<float>(eval(gather(s, params, constant(s, int32_t{2}))), Shape{2}, {20, 21});
  Output vec = constant(s, std::vector<double>{5, 6, 7}, Shape{3});
  expect_tensor_near<double>(eval(gather(s, vec, constant(s, std::vector<int32_t>{2, 0}, Shape{2}))), Shape{2}, {7, 5});
  // Integer tables too (a memcpy of rows), and no ids at all.
  Output itab = constant(s, std::vector<int64_t>{1, 2, 3, 4}, Shape{2, 2});
  expect_tensor_near<int64_t>(eval(gather(s, itab, constant(s, std::vector<int32_t>{1}, Shape{1}))), Shape{1, 2},
                              {3, 4});
  expect_tensor_near<float>(eval(gather(s, params, constant(s, std::vector<int32_t>{}, Shape{0}))), Shape{0, 2}, {});
}

TEST(Gather, EmbeddingLookupIsAGatherUnderItsNameScope) {
  Graph g;
  Scope s(g);
  Output y = embedding_lookup(s, constant(s, table()), constant(s, std::vector<int32_t>{1}, Shape{1}));
  EXPECT_EQ(y.node->op_type(), "Gather");
  EXPECT_EQ(y.node->name(), "embedding_lookup/Gather");
}

TEST(Gather, BadIdsNameTheNodeThePositionAndTheValueAndTheSessionCarriesOn) {
  Graph g;
  Scope s(g);
  Output params = constant(s, table());
  Output ids = placeholder(s, DType::kInt32, Shape{2, 2});
  Output y = gather(s.with_op_name("lookup"), params, ids);
  Session sess(g);
  auto run_with = [&](std::vector<int32_t> v) {
    return sess.run(y, {{ids, Tensor::from_vector<int32_t>(v, Shape{2, 2})}});
  };
  try {
    run_with({0, 1, 2, 17});
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()), "[Gather] lookup: indices[1,1] = 17 is not in [0, 4)");
  }
  try {
    run_with({0, -1, 2, 3});
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()), "[Gather] lookup: indices[0,1] = -1 is not in [0, 4)");
  }
  expect_tensor_near<float>(run_with({3, 2, 1, 0}), Shape{2, 2, 2}, {30, 31, 20, 21, 10, 11, 0, 1});
}

TEST(Gather, ShapeErrors) {
  Graph g;
  Scope s(g);
  EXPECT_THROW(gather(s, constant(s, 1.0f), constant(s, int32_t{0})), InvalidArgumentError);
  EXPECT_THROW(gather(s, constant(s, table()), constant(s, 1.0f)), InvalidArgumentError);
}

TEST(UnsortedSegmentSum, AddsRowsByIdAndZeroFillsTheRest) {
  Graph g;
  Scope s(g);
  Output data = constant(s, std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{3, 2});
  Output y = unsorted_segment_sum(s, data, constant(s, std::vector<int32_t>{2, 0, 2}, Shape{3}), 4);
  EXPECT_EQ(y.shape(), (Shape{4, 2}));
  expect_tensor_near<float>(eval(y), Shape{4, 2}, {3, 4, 0, 0, 6, 8, 0, 0});
  Output bad = unsorted_segment_sum(s, data, constant(s, std::vector<int32_t>{2, 0, 4}, Shape{3}), 4);
  try {
    eval(bad);
    ADD_FAILURE();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("segment_ids[2] = 4 is not in [0, 4)"), std::string::npos) << e.what();
  }
}

TEST(IndexedSlices, ToDenseAddsDuplicateRows) {
  Graph g;
  Scope s(g);
  IndexedSlices slices{constant(s, std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{3, 2}),
                       constant(s, std::vector<int64_t>{1, 1, 0}, Shape{3}),
                       constant(s, std::vector<int64_t>{3, 2}, Shape{2})};
  expect_tensor_near<double>(eval(to_dense(s, slices)), Shape{3, 2}, {5, 6, 4, 6, 0, 0});
  // A dense shape known only at run time.
  slices.dense_shape = shape(s, constant(s, std::vector<double>(6, 0.0), Shape{3, 2}), DType::kInt64);
  expect_tensor_near<double>(eval(to_dense(s, slices)), Shape{3, 2}, {5, 6, 4, 6, 0, 0});
}

}  // namespace
}  // namespace stepscope
