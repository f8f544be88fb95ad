#include "stepscope/profiler/memory_kinds.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

// A dense layer 8 -> 16 -> 4 trained with Adam, traced: every kind of memory is there.
struct AdamMlp {
  Graph graph;
  Node* train = nullptr;
  Output x, y;
  AdamMlp() {
    Scope root(graph);
    get_or_create_global_step(root);
    x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 8});
    y = placeholder(root.with_op_name("y"), DType::kInt32, Shape{-1});
    Output h = nn::dense(root.with_name_scope("hidden"), x, 16, nn::Activation::relu, {.seed = 1});
    Output logits = nn::dense(root.with_name_scope("logits"), h, 4, nn::Activation::none, {.seed = 2});
    Output loss = reduce_mean(root.with_name_scope("loss"), sparse_softmax_cross_entropy_with_logits(root, y, logits));
    train = AdamOptimizer(0.01).minimize(root, loss, get_global_step(graph));
  }
};

TEST(MemoryKinds, TheGraphSaysWhichNodeHoldsWhat) {
  AdamMlp m;
  auto kind = [&](const char* name) { return memory_kind(m.graph, *m.graph.find_node(name)); };
  EXPECT_EQ(kind("hidden/kernel"), MemoryKind::kParameters);
  EXPECT_EQ(kind("hidden/kernel/Adam"), MemoryKind::kOptimizerSlots);
  EXPECT_EQ(kind("hidden/kernel/Adam_1"), MemoryKind::kOptimizerSlots);
  EXPECT_EQ(kind("global_step"), MemoryKind::kOther);
  EXPECT_EQ(kind("hidden/MatMul"), MemoryKind::kActivations);
  EXPECT_EQ(kind("gradients/hidden/MatMul_grad/MatMul"), MemoryKind::kGradients);
  EXPECT_STREQ(memory_kind_name(MemoryKind::kOptimizerSlots), "optimizer_slots");
}

TEST(MemoryKinds, AStepsPeakSplitsExactlyIntoTheKinds) {
  AdamMlp m;
  Session session(m.graph);
  session.run(global_variables_initializer(Scope(m.graph)));
  Tensor xs(DType::kFloat32, Shape{32, 8});
  for (float& v : xs.flat<float>()) v = 0.5f;
  Tensor ys(DType::kInt32, Shape{32});
  for (int32_t& v : ys.flat<int32_t>()) v = 1;
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  RunMetadata metadata;
  session.run({{m.x, xs}, {m.y, ys}}, {}, {m.train}, traced, &metadata);

  const MemoryByKind memory = memory_by_kind(m.graph, metadata.step_stats);
  // Parameters: (8*16 + 16 + 16*4 + 4) floats; Adam keeps two slots of each.
  const int64_t params = (8 * 16 + 16 + 16 * 4 + 4) * 4;
  EXPECT_EQ(memory.of(MemoryKind::kParameters), params);
  EXPECT_EQ(memory.of(MemoryKind::kOptimizerSlots), 2 * params);
  EXPECT_GT(memory.of(MemoryKind::kActivations) + memory.of(MemoryKind::kGradients), 0);
  EXPECT_GT(memory.transient_peak_bytes, 0);
  EXPECT_GE(memory.peak_time_ns, 0);
  int64_t sum = 0;
  for (int64_t b : memory.bytes) sum += b;
  EXPECT_EQ(sum, memory.peak_bytes);
  EXPECT_EQ(memory.peak_bytes, memory.persistent_bytes + memory.transient_peak_bytes);
  const auto json = nlohmann::json::parse(memory.to_json());
  EXPECT_EQ(json["parameters"], params);
  EXPECT_EQ(json["optimizer_slots"], 2 * params);
  EXPECT_EQ(memory.to_text().rfind("Peak memory ", 0), 0u);
  EXPECT_NE(memory.to_text().find("optimizer slots 1.66 KB"), std::string::npos) << memory.to_text();
}

TEST(MemoryKinds, AStepWithoutMemoryRecordsHasOnlyTheVariables) {
  AdamMlp m;
  const MemoryByKind memory = memory_by_kind(m.graph, StepStats());
  EXPECT_EQ(memory.transient_peak_bytes, 0);
  EXPECT_EQ(memory.peak_time_ns, -1);
  EXPECT_EQ(memory.peak_bytes, memory.persistent_bytes);
  EXPECT_EQ(memory.of(MemoryKind::kGradients), 0);
}

}  // namespace
}  // namespace stepscope
