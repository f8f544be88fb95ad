// Helpers for op tests: evaluate outputs in a fresh session and compare with expected values.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

}  // namespace stepscope::testing
