// The executor's plan of one (feeds, fetches, targets) signature — a flat table built once and
// cached — and the per-step buffers it keeps between steps. Internal to the runtime:
// executor.cc runs steps over it, executor_plan.cc builds it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/base/thread_beside.h"
#include "stepscope/core/allocator.h"
#include "stepscope/graph/node.h"
#include "stepscope/graph/node_label.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/device.h"
#include "stepscope/runtime/executor.h"
#include "stepscope/runtime/step_stats.h"
#include "stepscope/runtime/step_stats_builder.h"

namespace stepscope {

// One step's state of a pack (Executor::Plan::Pack): made when its first producer allocates.
struct PackInStep {
  std::mutex mutex;
  bool made = false;
  std::vector<Buffer*> buffers;  // those no producer has taken yet (one reference each)
  // After the step: gives back the buffers no producer took.
  void reset() {
    for (Buffer*& b : buffers)
      if (b) b->release(), b = nullptr;
    made = false;
  }
};

// The per-step arrays of a plan. A finished step leaves them for the next step of the plan (all
// slots empty again), so a step allocates nothing of its own in the steady state.
struct StepBuffers {
  std::unique_ptr<std::atomic<int32_t>[]> pending;  // per plan item
  std::unique_ptr<std::atomic<int32_t>[]> refs;     // per slot
  std::unique_ptr<Tensor[]> slots;
  std::unique_ptr<int[]> deferred;  // per plan item at most: see RunState::deferred
  StepStatsBuilder trace;           // traced steps only
  std::unique_ptr<PackInStep[]> packs;  // per Plan::packs

  StepBuffers(size_t num_items, size_t num_slots, size_t num_packs)
      : pending(new std::atomic<int32_t>[num_items]),
        refs(new std::atomic<int32_t>[num_slots]),
        slots(new Tensor[num_slots]),
        deferred(new int[num_items]),
        packs(num_packs ? new PackInStep[num_packs] : nullptr) {}
};

struct Executor::Plan {
  struct Item {
    const Node* node;
    int node_id;
    KernelFn kernel;
    int input_base;  // into input_slots
    int num_inputs;
    int output_base;  // into the run's slots
    int num_outputs;
    int succ_begin, succ_end;  // into successors
    int initial_pending;
    bool expensive;  // worth a hop to another thread
    bool input;      // an input-pipeline op (StepTiming::input_ns)
    int device;      // index into devices
    int placements;  // into placements, one a output, when an output is packed; else -1
  };
  std::vector<Item> items;
  std::vector<int> input_slots;   // slot read by each input edge
  std::vector<int> successors;    // plan indices, one entry per edge (data or control)
  std::vector<int> initial_refs;  // per slot: consumer edges + fetches holding it
  std::vector<DType> dtypes;      // per slot: what the graph says (read here, not in the nodes)
  std::vector<int> roots;
  size_t num_state_roots = 0;        // the first roots are variable reads
  size_t num_inline_roots = 0;       // those and the cheap roots after them: run by the caller
  std::vector<int> feed_slots;       // per feed, in the order of the FeedList
  std::vector<int> fetch_slots;      // per fetch
  std::vector<std::string> devices;  // the items' first, then those only fed nodes are on
  std::vector<const Device*> placed;  // per entry of devices: the Device (resolved at plan build)
  size_t num_item_devices = 0;
  int num_slots = 0;
  // The fed nodes that do not run in the step: traced steps record each one as a node whose
  // outputs (the fed tensors) were there when the step started. Feeds take their slots grouped
  // per node, in output order, so a fed node's outputs are consecutive slots as a node's are.
  struct FedNode {
    const Node* node;
    int first_slot, num_slots, device;
  };
  std::vector<FedNode> fed_nodes;
  // Outputs of several nodes packed into one allocation a step for a consumer that wants them
  // contiguous (OpDef::contiguous_inputs; TensorFlow's ScopedAllocator): per pack, the dtype and
  // each output's element count, in the consumer's order; per output of an item with a packed
  // output, which pack and which place in it (-1: none).
  struct Pack {
    DType dtype;
    std::vector<int64_t> counts;
  };
  std::vector<Pack> packs;
  struct Placement {
    int32_t pack = -1, index = -1;
  };
  std::vector<Placement> placements;

  // What traces and partition graphs need of each item, names interned, in one cache line
  // (made on first use; shared with the StepStats of the plan's traced steps, which may outlive it).
  using Names = StepStats::ItemNames;
  static_assert(sizeof(Names) == 64);
  const std::vector<Names>& names() const {
    std::call_once(names_once_, [this] {
      // The labels are written back to back into one buffer (Node::timeline_label's text, no
      // allocation a label) and interned as one string: one hash over the buffer instead of a
      // table probe a label (a cache miss each on a big graph). A label starts with the node's
      // name, so the name is a view into it. Op types repeat: each is interned when it differs
      // from the one before.
      std::string labels;
      labels.reserve(items.size() * 48);
      struct Label {
        size_t end, name_size;     // in `labels`: where the label ends, how much of it is the name
        std::string_view op_type;  // the node's own
      };
      std::vector<Label> written;
      written.reserve(items.size());
      std::vector<NodeLabelInput> inputs;
      const size_t n = items.size();
      for (size_t i = 0; i < n; ++i) {
        // A big graph's nodes are far apart in memory, and this loop waited on their cache misses
        // (~230 ns a node at 10^6): their lines are asked for 16 items ahead, and once there, 8
        // ahead, the name's and the inputs' (in Node's layout, name_ and inputs_ lie in its first 96 bytes).
        if (i + 16 < n) {
          const char* far = reinterpret_cast<const char*>(items[i + 16].node);
          __builtin_prefetch(far);
          __builtin_prefetch(far + 48);
          __builtin_prefetch(far + 95);
        }
        if (i + 8 < n) {
          const Node* near = items[i + 8].node;
          __builtin_prefetch(near->name().data());
          __builtin_prefetch(near->inputs().data());
        }
        const Item& item = items[i];
        inputs.clear();
        for (const Output& in : item.node->inputs()) inputs.push_back({.node = in.node->name(), .output = in.index});
        append_node_label(labels, item.node->name(), item.node->op_type(), inputs);
        written.push_back({labels.size(), item.node->name().size(), item.node->op_type()});
      }
      const std::string_view interned = StepStats::intern(std::move(labels));
      std::string_view op_type, interned_op_type;
      StepStats::PlanNames& table = *names_table_;
      table.items.reserve(items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        const Item& item = items[i];
        const size_t begin = i ? written[i - 1].end : 0;
        const std::string_view label = interned.substr(begin, written[i].end - begin);
        if (written[i].op_type != op_type) {
          op_type = written[i].op_type;
          interned_op_type = StepStats::intern(op_type);
        }
        table.items.push_back({label.substr(0, written[i].name_size), interned_op_type, label, item.node_id,
                               item.output_base, item.num_outputs, item.device});
      }
      for (const auto& d : devices) table.devices.push_back(StepStats::intern(d));
      // A fed node computed nothing in the step: its label names no inputs.
      for (const FedNode& f : fed_nodes)
        table.fed.push_back({StepStats::intern(f.node->name()), StepStats::intern(f.node->op_type()),
                             StepStats::intern(format_node_label(f.node->name(), f.node->op_type(), {})), f.node->id(),
                             f.first_slot, f.num_slots, f.device});
      named_.store(true, std::memory_order_release);
    });
    return names_table_->items;
  }
  // The same, with the names of the fed nodes and devices, for a StepStats to keep.
  std::shared_ptr<const StepStats::PlanNames> shared_names() const {
    names();
    return names_table_;
  }
  // Whether names() has been made (a first traced step may make them on another thread).
  bool has_names() const { return named_.load(std::memory_order_acquire); }
  const std::vector<Names>& fed_names() const {
    names();
    return names_table_->fed;
  }
  const std::vector<std::string_view>& device_names() const {
    names();
    return names_table_->devices;
  }

  // One step's buffers, kept between steps (a step running beside another makes its own).
  StepBuffers* take_buffers() const {
    StepBuffers* b = spare_.exchange(nullptr, std::memory_order_acquire);
    return b ? b : new StepBuffers(items.size(), static_cast<size_t>(num_slots), packs.size());
  }
  void give_back(StepBuffers* b) const { delete spare_.exchange(b, std::memory_order_acq_rel); }

  // For a session that expects traced steps (Executor::expect_traced_steps): what the plan's
  // first traced step writes, made ahead (by `preparation` where a thread does it): a spare
  // StepStats set as big as a step (StepStats::prepare_spare), a recorder's log, the plan's
  // records (take_prepared_records) and its names.
  ThreadBeside preparation;
  bool preparing() const { return !preparation.done(); }
  void prepare_records() const {
    if (records_.load(std::memory_order_acquire)) return;
    delete[] records_.exchange(StepStatsBuilder::make_records(items.size()).release(), std::memory_order_acq_rel);
  }
  std::unique_ptr<NodeRecord[]> take_prepared_records() const {
    return std::unique_ptr<NodeRecord[]>(records_.exchange(nullptr, std::memory_order_acq_rel));
  }

  ~Plan() {
    preparation.join();  // it reads the plan
    delete spare_.load();
    delete[] records_.load();
  }

 private:
  mutable std::once_flag names_once_;
  mutable std::atomic<bool> named_{false};
  const std::shared_ptr<StepStats::PlanNames> names_table_ = std::make_shared<StepStats::PlanNames>();
  mutable std::atomic<StepBuffers*> spare_{nullptr};
  mutable std::atomic<NodeRecord*> records_{nullptr};  // made ahead, for a StepStatsBuilder to take
};

}  // namespace stepscope
