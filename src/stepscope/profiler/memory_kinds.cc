#include "stepscope/profiler/memory_kinds.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "stepscope/base/huge_pages.h"
#include "stepscope/core/dtype.h"
#include "stepscope/graph/graph.h"
#include "stepscope/profiler/node_cost.h"
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

// A stable sort for records that are in order but for a few out of place by a few positions (a
// free is recorded with the buffer's allocation, in node order, though it happened after later
// nodes' allocations): an insertion sort, moving each point at most kMaxShift places, falling
// back to std::stable_sort when some point is farther off.
template <typename T, typename Less>
void stable_sort_nearly_sorted(std::vector<T>& v, const Less& less) {
  constexpr size_t kMaxShift = 32;
  for (size_t i = 1; i < v.size(); ++i) {
    if (!less(v[i], v[i - 1])) continue;
    const T item = v[i];
    size_t j = i;
    while (j > 0 && less(item, v[j - 1])) {
      if (i - j == kMaxShift) {  // farther off than this sort is for: undo and sort the rest properly
        std::move(v.begin() + j + 1, v.begin() + i + 1, v.begin() + j);
        v[i] = item;
        std::stable_sort(v.begin(), v.end(), less);
        return;
      }
      v[j] = v[j - 1];
      --j;
    }
    v[j] = item;
  }
}

// Adds each allocator's fullest moment of a step with allocation records to `result` and
// returns true (false, adding nothing, for a step without records). The same pairing, order and
// peak as Timeline's memory (timeline_memory.cc: analyze_memory, maximums), without building a
// Timeline: no lanes, labels, tensor names or lifetimes, only the buffers and which node's output
// took each. That was half of Profiler::add_step on a small model; the test compares the two.
bool add_transient_peaks(const Graph& graph, const StepStats& step, MemoryByKind& result) {
  const size_t num_records = step.num_stored_records();  // what the loop below will see, usually
  size_t seen = 0;
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  struct Buffer {
    int64_t free, bytes;
    const NodeExecStats* owner;  // the node whose output took the buffer (null: none did)
    uint32_t alloc_pos, free_pos;
  };
  struct Point {
    int64_t time, delta;
    uint32_t buffer;
  };
  struct Series {
    std::string_view allocator;
    std::vector<Point> points;
  };
  std::vector<Buffer> buffers;
  reserve_huge_unless_reclaimed(buffers, num_records);
  std::vector<Series> series;
  // Allocator names are interned: one pointer, almost always.
  const auto same = [](std::string_view a, std::string_view b) {
    return (a.data() == b.data() && a.size() == b.size()) || a == b;
  };
  std::vector<uint32_t> open;  // buffers of the current node and allocator not yet freed
  for (const auto& dev : step.dev_stats()) {
    for (const NodeExecStats& ns : dev.node_stats) {
      for (const AllocatorMemoryUsed& m : ns.memory) {
        if (m.allocation_records.empty()) continue;
        seen += m.allocation_records.size();
        auto it = std::find_if(series.begin(), series.end(),
                               [&](const Series& x) { return same(x.allocator, m.allocator_name); });
        Series& sr = it != series.end() ? *it : series.emplace_back(Series{m.allocator_name, {}});
        if (sr.points.empty()) reserve_huge_unless_reclaimed(sr.points, num_records);
        const auto first_buffer = static_cast<uint32_t>(buffers.size());
        open.clear();
        for (const AllocationRecord& r : m.allocation_records) {
          if (r.alloc_bytes >= 0) {
            open.push_back(static_cast<uint32_t>(buffers.size()));
            sr.points.push_back({r.alloc_ns, r.alloc_bytes, static_cast<uint32_t>(buffers.size())});
            buffers.push_back({kNever, r.alloc_bytes, nullptr, 0, std::numeric_limits<uint32_t>::max()});
            continue;
          }
          // A free: of the latest open buffer of that size.
          auto o =
              std::find_if(open.rbegin(), open.rend(), [&](uint32_t b) { return buffers[b].bytes == -r.alloc_bytes; });
          if (o == open.rend()) continue;  // a free without its allocation: not this step's buffer
          buffers[*o].free = r.alloc_ns;
          sr.points.push_back({r.alloc_ns, r.alloc_bytes, *o});
          open.erase(std::next(o).base());
        }
        // Outputs allocated here take the buffer of their size that lived longest.
        for (const NodeOutput& out : ns.output) {
          const AllocationDescription& ad = out.tensor_description.allocation_description;
          if (!same(ad.allocator_name, m.allocator_name)) continue;
          int64_t best = -1;
          for (uint32_t b = first_buffer; b < buffers.size(); ++b) {
            const Buffer& v = buffers[b];
            if (v.owner || v.bytes != ad.requested_bytes) continue;
            if (best < 0 || v.free > buffers[best].free) best = b;
          }
          if (best >= 0) buffers[best].owner = &ns;
        }
      }
    }
  }
  if (seen == 0) return false;
  for (Series& sr : series) {
    if (sr.points.empty()) continue;
    const auto by_time = [](const Point& a, const Point& b) { return a.time < b.time; };
    if (!std::is_sorted(sr.points.begin(), sr.points.end(), by_time)) stable_sort_nearly_sorted(sr.points, by_time);
    int64_t total = 0, max_bytes = -1;
    size_t max_pos = 0;
    for (size_t p = 0; p < sr.points.size(); ++p) {
      const Point& pt = sr.points[p];
      if (__builtin_add_overflow(total, pt.delta, &total))  // saturating, as Timeline's
        total = pt.delta > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
      (pt.delta >= 0 ? buffers[pt.buffer].alloc_pos : buffers[pt.buffer].free_pos) = static_cast<uint32_t>(p);
      if (total > max_bytes) max_bytes = total, max_pos = p;
    }
    result.transient_peak_bytes += max_bytes;
    const int64_t time = sr.points[max_pos].time;
    if (result.peak_time_ns < 0 || time < result.peak_time_ns) result.peak_time_ns = time;
    int64_t attributed = 0;
    for (const Point& p : sr.points) {
      if (p.delta < 0) continue;
      const Buffer& v = buffers[p.buffer];
      if (v.alloc_pos > max_pos || v.free_pos <= max_pos) continue;
      const Node* node = v.owner ? recorded_node(graph, *v.owner) : nullptr;  // only the buffers live at the peak
      const MemoryKind kind = node ? memory_kind(graph, *node) : MemoryKind::kOther;
      result.bytes[static_cast<size_t>(kind)] += v.bytes;
      attributed += v.bytes;
    }
    // Allocations the records could not tie to a buffer (should be none).
    if (max_bytes > attributed) result.bytes[static_cast<size_t>(MemoryKind::kOther)] += max_bytes - attributed;
  }
  return true;
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
  // What the step held at each allocator's fullest: from its records; a step without records
  // (a TensorFlow file) by TensorFlow's rules, which Timeline knows.
  if (add_transient_peaks(graph, step, result)) {
    result.peak_bytes = result.persistent_bytes + result.transient_peak_bytes;
    return result;
  }
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
