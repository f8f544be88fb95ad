// Helpers for the profiler's tests: traced steps of small graphs, and reading traces back.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope::testing {

// FULL_TRACE run of `fetches`.
inline RunMetadata traced_run(Session& session, const std::vector<Output>& fetches, const FeedList& feeds = {},
                              const std::vector<Node*>& targets = {}) {
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  RunMetadata metadata;
  session.run(feeds, fetches, targets, options, &metadata);
  return metadata;
}

// A traced training step of a small MLP (several threads, many ops, real allocations).
inline RunMetadata traced_training_step() {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 8});
  Output y = placeholder(root.with_op_name("y"), DType::kInt64, Shape{-1});
  Output h = nn::dense(root.with_name_scope("dense"), x, 16, nn::Activation::relu, {.seed = 1});
  Output logits = nn::dense(root.with_name_scope("dense"), h, 3, nn::Activation::none, {.seed = 2});
  Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, y, logits));
  Node* train = GradientDescentOptimizer(0.1).minimize(root, loss);
  Session session(g, {.inter_op_threads = 2});
  session.run(global_variables_initializer(root));
  Tensor xs(DType::kFloat32, Shape{4, 8}), ys(DType::kInt64, Shape{4});
  for (float& v : xs.flat<float>()) v = 0.5f;
  for (int64_t& v : ys.flat<int64_t>()) v = 1;
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  options.output_partition_graphs = true;
  RunMetadata md;
  session.run({{x, xs}, {y, ys}}, {loss}, {train}, options, &md);
  return md;
}

// Parses a trace and checks what TensorFlow's _validateTrace checks (it parses, has
// traceEvents, every event has ph), and that validate_chrome_trace finds no problem at all.
inline nlohmann::json validated(const std::string& trace) {
  nlohmann::json j = nlohmann::json::parse(trace);
  EXPECT_TRUE(j.contains("traceEvents"));
  for (const auto& e : j["traceEvents"]) EXPECT_TRUE(e.contains("ph")) << e.dump();
  for (const TraceProblem& p : validate_chrome_trace(trace))
    ADD_FAILURE() << (p.warning ? "warning " : "error ") << p.rule << ": " << p.message;
  return j;
}

inline std::vector<nlohmann::json> events(const nlohmann::json& trace, std::string_view ph) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

// ts/dur in integer ns (they are written as µs with three decimals).
inline int64_t ns_of(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); }

}  // namespace stepscope::testing
