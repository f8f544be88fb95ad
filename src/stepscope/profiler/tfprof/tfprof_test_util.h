// Hand-made graphs and RunMetadata for the tfprof tests: op types of any name (one output whose
// shape is the node's "shape" attribute, FLOPs from its "flops" attribute; never run), and
// NodeExecStats with chosen devices, times and bytes.
//
// tf_test_model() rebuilds the model of TensorFlow's tfprof tests (testdata/graph.pbtxt and
// run_meta of tensorflow/core/profiler/internal): three variables DW (3x3x3x6), DW2 (2x2x6x12)
// and ScalarW with their initializers, two convolutions on a GPU, and one step of statistics,
// so the expected texts of tfprof_show_test.cc apply unchanged.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stepscope/graph/graph.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope::tfprof::testing {

// A model of NoOp nodes with these names, in this order (no graph behind it).
inline ProfileModel model_of(const std::vector<std::string>& names) {
  ProfileModel model;
  for (const std::string& name : names) {
    ModelNode node;
    node.name = name;
    node.op = "NoOp";
    model.add_node(std::move(node));
  }
  return model;
}

inline const OpDef& test_op(const std::string& type) {
  static std::map<std::string, std::unique_ptr<OpDef>> ops;
  auto& op = ops[type];
  if (!op) {
    op = std::make_unique<OpDef>();
    op->name = type;
    op->num_inputs = -1;
    op->num_outputs = 1;
    op->shape = [](ShapeContext& c) {
      c.set_output(0, DType::kFloat32, c.node().attrs().get_or<Shape>("shape", Shape()));
    };
    op->flops = [](const CostContext& c) { return c.node.attrs().get_or<int64_t>("flops", 0); };
  }
  return *op;
}

inline Node* add_node(Graph& g, const std::string& name, const std::string& type, std::vector<Node*> inputs = {},
                      Shape shape = Shape(), int64_t flops = 0, SourceLocation location = {}) {
  NodeSpec spec;
  spec.name = name;
  spec.op = &test_op(type);
  for (Node* in : inputs) spec.inputs.push_back(in->output(0));
  spec.attrs.set("shape", shape);
  if (flops) spec.attrs.set("flops", flops);
  spec.location = std::move(location);
  return g.add_node(std::move(spec));
}

inline constexpr const char* kCpu = "/job:localhost/replica:0/task:0/device:CPU:0";
inline constexpr const char* kGpu = "/job:localhost/replica:0/task:0/device:GPU:0";
inline constexpr const char* kGpuStreamAll = "/job:localhost/replica:0/task:0/device:GPU:0/stream:all";

struct ExecSpec {
  int64_t start_us = 1000;  // all_start (tfprof ignores a record starting at 0)
  int64_t duration_us = 0;  // op_end_rel
  int64_t requested_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t live_bytes = 0;
  int64_t output_bytes = 0;  // allocated bytes of output 0
  int64_t temp_bytes = 0;
  int64_t persistent_bytes = 0;
  uint32_t thread_id = 0;
};

// Appends a NodeExecStats of `node` on `device` to the metadata.
inline void add_exec(RunMetadata& md, const Node& node, const std::string& device, const ExecSpec& e) {
  StepStats& ss = md.step_stats;
  const std::string_view dev = StepStats::intern(device);
  DeviceStepStats* d = nullptr;
  for (auto& x : ss.dev_stats())
    if (x.device == dev) d = &x;
  if (!d) d = &ss.dev_stats().emplace_back(DeviceStepStats{dev, {}});
  NodeExecStats ns;
  ns.node_name = StepStats::intern(node.name());
  ns.op_type = StepStats::intern(node.op_type());
  ns.node_id = node.id();
  ns.all_start_ns = e.start_us * 1000;
  ns.scheduled_ns = ns.all_start_ns;
  ns.op_end_rel_ns = e.duration_us * 1000;
  ns.all_end_rel_ns = ns.op_end_rel_ns;
  ns.thread_id = e.thread_id;
  ns.timeline_label = StepStats::intern(node.timeline_label());
  if (e.requested_bytes || e.peak_bytes || e.live_bytes) {
    AllocatorMemoryUsed mem;
    mem.allocator_name = StepStats::intern(device.find("GPU") != std::string::npos ? "GPU_0_bfc" : "cpu");
    mem.total_bytes = e.requested_bytes;
    mem.peak_bytes = e.peak_bytes;
    mem.live_bytes = e.live_bytes;
    ns.memory = ss.store_memory(std::span<const AllocatorMemoryUsed>(&mem, 1));
  }
  if (e.output_bytes) {
    NodeOutput out;
    out.slot = 0;
    out.tensor_description.shape = node.output_shape(0);
    out.tensor_description.allocation_description.requested_bytes = e.output_bytes;
    out.tensor_description.allocation_description.allocated_bytes = e.output_bytes;
    ns.output = ss.store_outputs(std::span<const NodeOutput>(&out, 1));
  }
  ns.memory_stats.temp_memory_size = e.temp_bytes;
  ns.memory_stats.persistent_memory_size = e.persistent_bytes;
  d->node_stats.push_back(ns);
}

// A variable with TensorFlow's initializer subgraph under it (tf.get_variable with a
// random_normal initializer).
inline Node* add_variable(Graph& g, const std::string& name, const Shape& shape) {
  Node* var = add_node(g, name, "VariableV2", {}, shape);
  const std::string init = name + "/Initializer/random_normal";
  Node* shape_const = add_node(g, init + "/shape", "Const", {}, Shape{shape.rank()});
  Node* mean = add_node(g, init + "/mean", "Const");
  Node* stddev = add_node(g, init + "/stddev", "Const");
  Node* normal = add_node(g, init + "/RandomStandardNormal", "RandomStandardNormal", {shape_const}, shape);
  Node* mul = add_node(g, init + "/mul", "Mul", {normal, stddev}, shape);
  Node* add = add_node(g, init, "Add", {mul, mean}, shape);
  add_node(g, name + "/Assign", "Assign", {var, add}, shape);
  add_node(g, name + "/read", "Identity", {var}, shape);
  g.add_to_collection("trainable_variables", var);
  return var;
}

struct TfTestModel {
  Graph graph;
  RunMetadata run_metadata;  // step 0
};

inline std::unique_ptr<TfTestModel> tf_test_model() {
  auto m = std::make_unique<TfTestModel>();
  Graph& g = m->graph;
  Node* dw = add_variable(g, "DW", Shape{3, 3, 3, 6});
  Node* dw2 = add_variable(g, "DW2", Shape{2, 2, 6, 12});
  add_variable(g, "ScalarW", Shape());
  Node* zeros = add_node(g, "zeros", "Const", {}, Shape{2, 6, 6, 3});
  Node* conv = add_node(g, "Conv2D", "Conv2D", {zeros, g.find_node("DW/read")}, Shape{2, 3, 3, 6}, 5832);
  add_node(g, "Conv2D_1", "Conv2D", {conv, g.find_node("DW2/read")}, Shape{2, 2, 2, 12}, 4608);
  add_node(g, "init", "NoOp");

  RunMetadata& md = m->run_metadata;
  add_exec(md, *dw, kCpu, {.start_us = 1000, .duration_us = 2, .output_bytes = 1280});
  add_exec(md, *dw2, kCpu, {.start_us = 1003, .duration_us = 11, .output_bytes = 1280});
  add_exec(md, *zeros, kCpu, {.start_us = 1001, .duration_us = 2});
  add_exec(md, *conv, kGpu, {.start_us = 1020, .duration_us = 4067, .requested_bytes = 10000, .peak_bytes = 8000});
  add_exec(md, *conv, kGpuStreamAll, {.start_us = 1030, .duration_us = 226});
  const Node& conv1 = *g.find_node("Conv2D_1");
  add_exec(md, conv1, kGpu, {.start_us = 5100, .duration_us = 419, .requested_bytes = 4592, .peak_bytes = 4592});
  add_exec(md, conv1, kGpuStreamAll, {.start_us = 5110, .duration_us = 178});
  return m;
}

}  // namespace stepscope::tfprof::testing
