// Helpers for the profiler's tests: traced steps of small graphs, and reading traces back.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stepscope/base/proto_wire.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/trace_validator.h"
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

inline constexpr int64_t kEpochUs = 1'700'000'000'000'000;  // TensorFlow writes wall-clock micros

struct TfNode {
  std::string name, op;
  std::vector<std::string> inputs;
  int64_t start_us, dur_us;
  int64_t output_bytes;  // one float output of this many bytes, in allocator "cpu"
};

// RunMetadata bytes as TensorFlow writes them (what its tools save), for the readers' tests.
// A NodeExecStats as TensorFlow's step_stats_collector fills it on a CPU (field numbers from
// step_stats.proto; no field of stepscope's own).
inline std::string encode_node(const TfNode& n) {
  std::string alloc;  // AllocationDescription
  proto_wire::put_int_field(alloc, 1, n.output_bytes);
  proto_wire::put_int_field(alloc, 2, n.output_bytes);
  proto_wire::put_bytes_field(alloc, 3, "cpu");
  proto_wire::put_int_field(alloc, 6, 0x7f0000001000);
  std::string dim, shape, tensor, output;
  proto_wire::put_int_field(dim, 1, n.output_bytes / 4);
  proto_wire::put_bytes_field(shape, 2, dim);
  proto_wire::put_int_field(tensor, 1, 1);  // DT_FLOAT
  proto_wire::put_bytes_field(tensor, 2, shape);
  proto_wire::put_bytes_field(tensor, 4, alloc);
  proto_wire::put_bytes_field(output, 3, tensor);  // slot 0: not written (proto3 default)
  std::string memory;                              // AllocatorMemoryUsed without allocation_records
  proto_wire::put_bytes_field(memory, 1, "cpu");
  proto_wire::put_int_field(memory, 2, n.output_bytes);
  proto_wire::put_int_field(memory, 3, n.output_bytes);
  proto_wire::put_int_field(memory, 4, n.output_bytes);
  std::string stats;  // MemoryStats
  proto_wire::put_int_field(stats, 1, 64);
  std::string label = n.name + " = " + n.op + "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) label += (i ? ", " : "") + n.inputs[i];
  label += ")";
  std::string ns;
  proto_wire::put_bytes_field(ns, 1, n.name);
  proto_wire::put_int_field(ns, 2, kEpochUs + n.start_us);
  proto_wire::put_int_field(ns, 4, n.dur_us);
  proto_wire::put_int_field(ns, 5, n.dur_us);
  proto_wire::put_bytes_field(ns, 6, memory);
  proto_wire::put_bytes_field(ns, 7, output);
  proto_wire::put_bytes_field(ns, 8, label);
  proto_wire::put_int_field(ns, 10, 140000);
  proto_wire::put_bytes_field(ns, 12, stats);
  return ns;
}

inline std::string tf_run_metadata(const std::vector<TfNode>& nodes) {
  std::string dev;
  proto_wire::put_bytes_field(dev, 1, "/job:localhost/replica:0/task:0/device:CPU:0");
  for (const TfNode& n : nodes) proto_wire::put_bytes_field(dev, 2, encode_node(n));
  std::string step, md;
  proto_wire::put_bytes_field(step, 1, dev);
  proto_wire::put_bytes_field(md, 1, step);
  return md;
}

}  // namespace stepscope::testing
