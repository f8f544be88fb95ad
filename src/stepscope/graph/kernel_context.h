// What a CPU kernel sees while it runs: the node, its input tensors, slots for its outputs,
// the allocator, the intra-op thread pool and the session's state. A plain struct built by the
// executor on its stack: no virtual calls, no allocation.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "stepscope/base/error.h"
#include "stepscope/base/thread_pool.h"
#include "stepscope/core/tensor.h"
#include "stepscope/graph/node.h"
#include "stepscope/graph/resource_store.h"

namespace stepscope {

// The time of one stage inside a kernel: an input pipeline's stage ("Iterator::batch::csv")
// inside IteratorGetNext, its own time (without the stages it pulls from) and its calls.
struct KernelStageTime {
  std::string stage;
  int64_t self_ns = 0;
  int64_t calls = 0;
};

// Where a kernel of a traced run reports what it measured inside itself (the executor's, one a
// step; thread-safe). Null in a KernelContext of a run that is not traced.
class KernelTraceSink {
 public:
  virtual ~KernelTraceSink() = default;
  virtual void add_stages(const Node& node, std::span<const KernelStageTime> stages) = 0;
};

// Where the executor wants some of a node's outputs to live instead of a buffer of their own
// (TensorFlow's ScopedAllocator): packed with other nodes' outputs that one consumer wants
// contiguous (OpDef::contiguous_inputs). Set only on a node that has such outputs.
class OutputPlacer {
 public:
  // A buffer for output i of dtype and this many elements, or null for a buffer of its own.
  virtual Buffer* take(int output, DType dtype, int64_t num_elements) = 0;

 protected:
  ~OutputPlacer() = default;
};

class KernelContext {
 public:
  KernelContext(const Node& node, const Tensor* const* inputs, Tensor* outputs, Allocator* allocator,
                ThreadPool* intra_op_pool, ResourceStore* resources, int64_t step_id)
      : node_(node), inputs_(inputs), outputs_(outputs), allocator_(allocator), pool_(intra_op_pool),
        resources_(resources), step_id_(step_id) {}

  const Node& node() const { return node_; }
  const AttrMap& attrs() const { return node_.attrs(); }
  int num_inputs() const { return node_.num_inputs(); }
  const Tensor& input(int i) const { return *inputs_[i]; }
  int num_outputs() const { return node_.num_outputs(); }

  // Allocates output i (dtype and shape as computed by the kernel) and returns it.
  // A shape whose size overflows (say, dims computed from a fed tensor) is an
  // InvalidArgumentError that names this node.
  Tensor& allocate_output(int i, DType dtype, const Shape& shape) {
    if (placer_) [[unlikely]] {
      if (Buffer* b = shape.fully_defined() ? placer_->take(i, dtype, shape.num_elements()) : nullptr)
        return outputs_[i] = Tensor::adopt(dtype, shape, b);
    }
    try {
      outputs_[i] = Tensor(dtype, shape, allocator_);
    } catch (const InvalidArgumentError& e) {
      fail(e.what());
    }
    return outputs_[i];
  }
  // Hands an existing tensor out as output i (e.g. Identity forwards its input's buffer).
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  Tensor& output(int i) { return outputs_[i]; }

  Allocator* allocator() const { return allocator_; }
  ResourceStore& resources() const { return *resources_; }
  int64_t step_id() const { return step_id_; }
  // Non-null only while the run is traced.
  KernelTraceSink* trace_sink() const { return trace_sink_; }
  void set_trace_sink(KernelTraceSink* sink) { trace_sink_ = sink; }
  void set_output_placer(OutputPlacer* placer) { placer_ = placer; }

  // Splits [0, n) over the intra-op pool when n * cost_per_item is worth it, otherwise runs
  // fn(0, n) here. cost_per_item is roughly in nanoseconds.
  void parallel_for(int64_t n, int64_t cost_per_item, const std::function<void(int64_t, int64_t)>& fn) const {
    constexpr int64_t kMinCostPerChunk = 20000;
    if (!pool_ || pool_->num_threads() < 1 || n * cost_per_item < 2 * kMinCostPerChunk) {
      fn(0, n);
      return;
    }
    pool_->parallel_for(n, std::max<int64_t>(1, kMinCostPerChunk / std::max<int64_t>(1, cost_per_item)), fn);
  }
  int intra_op_threads() const { return pool_ ? pool_->num_threads() + 1 : 1; }

  // Throws the error type for `code` with "[Op] node: message".
  [[noreturn]] void fail(ErrorCode code, const std::string& message) const;
  [[noreturn]] void fail(const std::string& message) const { fail(ErrorCode::kInvalidArgument, message); }

 private:
  const Node& node_;
  const Tensor* const* inputs_;
  Tensor* outputs_;
  Allocator* allocator_;
  ThreadPool* pool_;
  ResourceStore* resources_;
  int64_t step_id_;
  KernelTraceSink* trace_sink_ = nullptr;
  OutputPlacer* placer_ = nullptr;
};

// "[Op] node/name: message" — the prefix every node error carries.
std::string node_error_message(const Node& node, const std::string& message);

}  // namespace stepscope
