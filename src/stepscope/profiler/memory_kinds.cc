#include "stepscope/profiler/memory_kinds.h"

#include <cstdio>

#include "stepscope/core/dtype.h"
#include "stepscope/graph/graph.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

namespace {

// The collection Variable adds trainable variables to (train/variables.h, a layer above).
constexpr const char* kTrainable = "trainable_variables";

bool is_variable_op(std::string_view op) { return op == "VariableV2" || op == "Variable" || op == "VarHandleOp"; }

// "gradients/..." or "gradients_3/...": a node gradients() added.
bool in_gradients_scope(std::string_view name) {
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view scope = name.substr(0, slash);
  if (!scope.starts_with("gradients")) return false;
  scope.remove_prefix(9);
  if (scope.empty()) return true;
  if (scope.front() != '_' || scope.size() == 1) return false;
  for (char c : scope.substr(1))
    if (c < '0' || c > '9') return false;
  return true;
}

bool is_trainable(const Graph& graph, const Node& node) {
  for (const Node* t : graph.collection(kTrainable))
    if (t == &node) return true;
  return false;
}

// A non-trainable variable named under a trainable one: an optimizer's slot.
bool is_slot(const Graph& graph, const Node& node) {
  for (const Node* t : graph.collection(kTrainable)) {
    const std::string& var = t->name();
    if (node.name().size() > var.size() + 1 && node.name().compare(0, var.size(), var) == 0 &&
        node.name()[var.size()] == '/')
      return true;
  }
  return false;
}

// An optimizer's update op (ApplyGradientDescent, ApplyAdam, ResourceApply..., ScatterAdd of a
// sparse update) and the NoOp that groups them: their outputs are the variables they update.
bool is_update_op(std::string_view op) {
  return op.starts_with("Apply") || op.starts_with("ResourceApply") || op.starts_with("SparseApply") ||
         op.starts_with("Assign") || op.starts_with("Scatter");
}

std::string megabytes(int64_t bytes) {
  char buffer[32];
  if (bytes >= 1 << 20)
    std::snprintf(buffer, sizeof buffer, "%.2f MB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1 << 10)
    std::snprintf(buffer, sizeof buffer, "%.2f KB", static_cast<double>(bytes) / (1 << 10));
  else
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  return buffer;
}

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kParameters:
      return "parameters";
    case MemoryKind::kOptimizerSlots:
      return "optimizer_slots";
    case MemoryKind::kGradients:
      return "gradients";
    case MemoryKind::kActivations:
      return "activations";
    case MemoryKind::kOther:
      return "other";
  }
  return "other";
}

MemoryKind memory_kind(const Graph& graph, const Node& node) {
  if (is_variable_op(node.op_type())) {
    if (is_trainable(graph, node)) return MemoryKind::kParameters;
    return is_slot(graph, node) ? MemoryKind::kOptimizerSlots : MemoryKind::kOther;
  }
  if (in_gradients_scope(node.name())) return MemoryKind::kGradients;
  if (is_update_op(node.op_type()) || node.op_type() == "NoOp") return MemoryKind::kOther;
  return MemoryKind::kActivations;
}

MemoryByKind memory_by_kind(const Graph& graph, const StepStats& step) {
  MemoryByKind result;
  auto add = [&](MemoryKind kind, int64_t bytes) { result.bytes[static_cast<size_t>(kind)] += bytes; };
  // The variables, resident through the step.
  for (int id = 0; id < graph.num_nodes(); ++id) {
    const Node& node = *graph.node(id);
    if (!is_variable_op(node.op_type()) || node.num_outputs() == 0) continue;
    const Shape& shape = node.output_shape(0);
    if (!shape.fully_defined()) continue;
    const int64_t bytes = shape.num_elements() * static_cast<int64_t>(dtype_size(node.output_dtype(0)));
    result.persistent_bytes += bytes;
    add(memory_kind(graph, node), bytes);
  }
  // What the step held at each allocator's fullest.
  for (const auto& [allocator, maximum] : Timeline(step, &graph).allocator_maximums()) {
    result.transient_peak_bytes += maximum.num_bytes;
    if (result.peak_time_ns < 0 || maximum.timestamp_ns < result.peak_time_ns)
      result.peak_time_ns = maximum.timestamp_ns;
    add(MemoryKind::kOther, maximum.untracked_bytes);
    int64_t attributed = maximum.untracked_bytes;
    for (const auto& [tensor, bytes] : maximum.tensor_bytes) {
      const std::string node_name =
          tensor.substr(0, tensor.rfind(':') == std::string::npos ? tensor.size() : tensor.rfind(':'));
      const Node* node = graph.find_node(node_name);
      if (!node) node = graph.find_node(tensor);  // a name with a ':' of its own
      add(node ? memory_kind(graph, *node) : MemoryKind::kOther, bytes);
      attributed += bytes;
    }
    // Allocations the records could not tie to a tensor or a temporary (should be none).
    if (maximum.num_bytes > attributed) add(MemoryKind::kOther, maximum.num_bytes - attributed);
  }
  result.peak_bytes = result.persistent_bytes + result.transient_peak_bytes;
  return result;
}

std::string MemoryByKind::to_text() const {
  std::string out = "Peak memory " + megabytes(peak_bytes) + " (" + megabytes(persistent_bytes) + " of variables, " +
                    megabytes(transient_peak_bytes) + " allocated in the step):";
  for (size_t k = 0; k < kNumMemoryKinds; ++k) {
    char share[16];
    std::snprintf(share, sizeof share, "%.1f%%", peak_bytes > 0 ? 100.0 * bytes[k] / peak_bytes : 0.0);
    std::string name = memory_kind_name(static_cast<MemoryKind>(k));
    for (char& c : name)
      if (c == '_') c = ' ';
    out += std::string(k ? "," : "") + " " + name + " " + megabytes(bytes[k]) + " (" + share + ")";
  }
  return out + "\n";
}

std::string MemoryByKind::to_json() const {
  std::string out = "{\"peak_bytes\":" + std::to_string(peak_bytes) +
                    ",\"persistent_bytes\":" + std::to_string(persistent_bytes) +
                    ",\"transient_peak_bytes\":" + std::to_string(transient_peak_bytes);
  for (size_t k = 0; k < kNumMemoryKinds; ++k)
    out += ",\"" + std::string(memory_kind_name(static_cast<MemoryKind>(k))) + "\":" + std::to_string(bytes[k]);
  return out + "}";
}

}  // namespace stepscope
