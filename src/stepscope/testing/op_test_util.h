// Helpers for op tests: evaluate outputs in a fresh session and compare with expected values.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/session.h"

namespace stepscope::testing {

// Runs `fetches` in a new session over the output's graph (2 threads unless told otherwise).
inline std::vector<Tensor> eval(const std::vector<Output>& fetches, const FeedList& feeds = {}, int threads = 2) {
  Session session(*fetches.front().graph(), {.inter_op_threads = threads});
  return session.run(feeds, fetches);
}
inline Tensor eval(Output fetch, const FeedList& feeds = {}) { return eval(std::vector<Output>{fetch}, feeds)[0]; }

// Expects `t` to have `shape` and values within `tolerance` (absolute + relative) of `expected`.
template <typename T>
void expect_tensor_near(const Tensor& t, const Shape& shape, const std::vector<T>& expected, double tolerance = 1e-5) {
  ASSERT_TRUE(t.initialized());
  ASSERT_EQ(t.dtype(), dtype_of<T>) << "dtype " << dtype_name(t.dtype());
  ASSERT_EQ(t.shape(), shape) << "shape " << t.shape().to_string() << " vs " << shape.to_string();
  auto got = t.flat<T>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(static_cast<double>(expected[i]))) {
        EXPECT_TRUE(std::isnan(static_cast<double>(got[i]))) << "at " << i;
        continue;
      }
      if (std::isinf(static_cast<double>(expected[i]))) {
        EXPECT_EQ(got[i], expected[i]) << "at " << i;
        continue;
      }
      EXPECT_NEAR(got[i], expected[i], tolerance * (1 + std::abs(static_cast<double>(expected[i])))) << "at " << i;
    } else {
      EXPECT_EQ(got[i], expected[i]) << "at " << i;
    }
  }
}

// Expects fn() to throw InvalidArgumentError with exactly `message`.
template <typename F>
void expect_invalid_argument(F&& fn, const std::string& message) {
  try {
    fn();
    ADD_FAILURE() << "expected InvalidArgumentError: " << message;
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

// Expects building a node in a fresh graph to fail with exactly `message` (a fresh graph, so
// that the node keeps its default name: a failed node still uses up its name).
inline void expect_build_error(const std::function<void(const Scope&)>& build, const std::string& message) {
  Graph g;
  Scope s(g);
  expect_invalid_argument([&] { build(s); }, message);
}

// The op's flops for the shapes inferred at graph-build time.
inline int64_t flops_of(Output out) {
  const Node& node = *out.node;
  std::vector<Shape> in_shapes, out_shapes;
  for (const Output& in : node.inputs()) in_shapes.push_back(in.shape());
  for (int i = 0; i < node.num_outputs(); ++i) out_shapes.push_back(node.output_shape(i));
  return node.op().flops(CostContext{node, in_shapes, out_shapes});
}

}  // namespace stepscope::testing
