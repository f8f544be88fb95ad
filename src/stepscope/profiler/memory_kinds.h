// A step's peak memory by what it holds: parameters, optimizer slots, gradients, activations and
// other — the graph knows which tensor is which:
//  - parameters: the trainable variables' buffers;
//  - optimizer slots: the variables an optimizer keeps beside one ("<var>/Adam", "<var>/Momentum":
//    a non-trainable variable named under a trainable one);
//  - gradients: the outputs of the nodes gradients() added (under its "gradients/" name scope,
//    or "gradients_<n>/");
//  - activations: the outputs of the other (forward) ops;
//  - other: the other variables (global step, moving averages, an optimizer's beta powers), the
//    optimizers' update ops and the kernels' temporaries no tensor owns.
// Variables live across steps: their bytes (each variable's shape and dtype in the graph) are
// resident during the whole step. The rest is what the step allocated and still held when its
// allocator was fullest (Timeline::allocator_maximums). The step's peak is their sum.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stepscope {

class Graph;
class Node;
class StepStats;

enum class MemoryKind { kParameters = 0, kOptimizerSlots, kGradients, kActivations, kOther };
inline constexpr size_t kNumMemoryKinds = 5;
// "parameters", "optimizer_slots", "gradients", "activations", "other"
const char* memory_kind_name(MemoryKind kind);

// What `node`'s outputs (or, for a variable, its buffer) hold.
MemoryKind memory_kind(const Graph& graph, const Node& node);

struct MemoryByKind {
  int64_t peak_bytes = 0;        // resident variables + the step's transient peak
  int64_t persistent_bytes = 0;  // the variables'
  int64_t transient_peak_bytes = 0;
  int64_t peak_time_ns = -1;  // when the transient peak was first reached (the step's clock); -1: none
  std::array<int64_t, kNumMemoryKinds> bytes = {};  // by MemoryKind; they sum to peak_bytes

  int64_t of(MemoryKind kind) const { return bytes[static_cast<size_t>(kind)]; }
  // "Peak memory 1.25 MB: parameters 0.85 MB (68.0%), optimizer slots ..., other ..."
  std::string to_text() const;
  // {"peak_bytes", "persistent_bytes", "transient_peak_bytes", "parameters", "optimizer_slots",
  //  "gradients", "activations", "other"}
  std::string to_json() const;
};

// The breakdown of `step`'s peak, summed over the allocators (with several, each one's own
// peak: they need not coincide). A step without memory records has transient bytes 0.
MemoryByKind memory_by_kind(const Graph& graph, const StepStats& step);

}  // namespace stepscope
