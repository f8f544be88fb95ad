// Test-local ops and helpers shared by the executor's tests (executor_test.cc,
// executor_trace_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <span>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/runtime/session.h"

namespace stepscope::testing {

inline std::atomic<int> g_runs{0};

// y = x + 1 (float32), counting its executions.
inline const OpDef& add_one_op() {
  static const OpDef def{
      .name = "TestAddOne",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
      .kernel =
          [](KernelContext& c) {
            g_runs++;
            const Tensor& x = c.input(0);
            Tensor& y = c.allocate_output(0, x.dtype(), x.shape());
            auto in = x.flat<float>();
            auto out = y.flat<float>();
            for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] + 1;
          },
      .doc = "a test op",
  };
  return def;
}
// z = x + y, same shapes.
inline const OpDef& add_op() {
  static const OpDef def{
      .name = "TestAdd",
      .num_inputs = 2,
      .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
      .kernel =
          [](KernelContext& c) {
            auto a = c.input(0).flat<float>(), b = c.input(1).flat<float>();
            auto out = c.allocate_output(0, DType::kFloat32, c.input(0).shape()).flat<float>();
            for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
          },
      .doc = "a test op",
  };
  return def;
}
// (x + 1, x + 2), float32, counting its executions.
inline const OpDef& pair_op() {
  static const OpDef def{
      .name = "TestPair",
      .num_inputs = 1,
      .num_outputs = 2,
      .shape =
          [](ShapeContext& c) {
            c.set_output(0, c.input_dtype(0), c.input_shape(0));
            c.set_output(1, c.input_dtype(0), c.input_shape(0));
          },
      .kernel =
          [](KernelContext& c) {
            g_runs++;
            auto in = c.input(0).flat<float>();
            for (int o = 0; o < 2; ++o) {
              auto out = c.allocate_output(o, DType::kFloat32, c.input(0).shape()).flat<float>();
              for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] + static_cast<float>(o + 1);
            }
          },
      .doc = "a test op",
  };
  return def;
}
// Fails when its input contains a negative number (like CheckNumerics).
inline const OpDef& fail_negative_op() {
  static const OpDef def{
      .name = "TestFailNegative",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
      .kernel =
          [](KernelContext& c) {
            for (float v : c.input(0).flat<float>())
              if (v < 0) c.fail("found a negative value");
            c.set_output(0, c.input(0));
          },
      .doc = "a test op",
  };
  return def;
}

inline Output add_one(const Scope& s, Output x, CallSite site = CallSite::current()) {
  return s.add_node(add_one_op(), {x}, {}, site)->output(0);
}
// A chain of n add_one nodes from x; its last output.
inline Output add_one_chain(const Scope& s, Output x, int n) {
  for (int i = 0; i < n; ++i) x = add_one(s, x);
  return x;
}
inline Output add(const Scope& s, Output x, Output y) {
  return s.add_node(add_op(), {x, y}, {}, CallSite::current())->output(0);
}

// The nodes that ran in a traced step: what follows the fed nodes, which come first (see
// FullTraceRecordsTheFeeds).
inline std::span<const NodeExecStats> ran_nodes(const DeviceStepStats& dev, size_t num_fed = 1) {
  EXPECT_GE(dev.node_stats.size(), num_fed);
  for (size_t i = 0; i < num_fed && i < dev.node_stats.size(); ++i)
    EXPECT_EQ(dev.node_stats[i].all_end_rel_ns, 0) << dev.node_stats[i].node_name << " is not a fed node";
  return std::span(dev.node_stats).subspan(std::min(num_fed, dev.node_stats.size()));
}

}  // namespace stepscope::testing
