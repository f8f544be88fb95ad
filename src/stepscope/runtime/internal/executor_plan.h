// The executor's plan of one (feeds, fetches, targets) signature — a flat table built once and
// cached — and the per-step buffers it keeps between steps. Internal to the runtime:
// executor.cc runs steps over it, executor_plan.cc builds it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "stepscope/base/huge_pages.h"
#include "stepscope/base/mapping_ahead.h"
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
      try {
        make_names();
      } catch (...) {
        names_table_->set_state(StepStats::PlanNames::kFailed);  // readers waiting for them give up
        throw;                                                   // and the next call makes them again
      }
      names_table_->set_state(StepStats::PlanNames::kMade);
    });
    return names_table_->items;
  }
  // The names, made or not: what a traced step's StepStats keep, to read once they are made (a
  // first traced step does not wait for names made beside it).
  std::shared_ptr<const StepStats::PlanNames> names_to_come() const { return names_table_; }
  // Whether names() has been made (a first traced step may make them on another thread).
  bool has_names() const { return names_table_->made(); }
  // Has the names made on a thread beside the caller's step, once it has mapped the step's new
  // memory (`room`, which the step stops at its end). Where another step's thread is making
  // them, that thread maps `room` first (it looks for such work as it makes them). Returns false
  // where no thread is to be had (then nothing was done). The thread may outlive the step; the
  // plan waits for it when it goes.
  bool name_beside(std::shared_ptr<MappingAhead> room) const {
    if (naming_claimed_.exchange(true, std::memory_order_acq_rel)) {
      std::lock_guard<std::mutex> lock(naming_mutex_);
      mapping_asked_ = std::move(room);  // one asked before and not taken yet: its step is over
      mapping_was_asked_.store(true, std::memory_order_release);
      return true;
    }
    try {
      std::lock_guard<std::mutex> lock(naming_mutex_);  // a failed thread's successor may come soon
      naming_ = ThreadBeside([this, room = std::move(room)] {
        room->map();
        try {
          names();
        } catch (...) {  // readers were told (kFailed); a later traced step starts another thread
          naming_claimed_.store(false, std::memory_order_release);
        }
        map_what_was_asked();
      });
      return true;
    } catch (const std::system_error&) {
      naming_claimed_.store(false, std::memory_order_release);
      return false;
    }
  }
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
  // trace scratch (take_prepared_scratch) and its names.
  ThreadBeside preparation;
  bool preparing() const { return !preparation.done(); }
  // Called by a traced step that starts while the preparation is at work: it maps no more, and
  // makes nothing after what it is making (the spare set it was mapping is dropped). The step
  // makes its own, as an unprepared plan's first traced step does, with the idle core to map it
  // alone: measured at 10^6 nodes, a told session's first traced step ~0.2 s after its plan was
  // made took +0.7-2.4 µs an op with the preparation mapping beside it (both fighting for the
  // kernel's page faults), +0.09-0.38 with it stopped (BENCHMARKS.md, issue 16, thirty-third
  // session).
  void stop_preparation() const {
    if (preparing()) preparation_stopped.store(true, std::memory_order_relaxed);
  }
  mutable std::atomic<bool> preparation_stopped{false};
  // For tests: where set, what a preparation on a thread calls first, with its stop flag (a test
  // holds it there until a traced step has stopped it: how soon a preparation gets ahead of a
  // step depends on the machine and its allocator).
  static inline void (*before_preparing_beside)(const std::atomic<bool>& stopped) = nullptr;
  void prepare_scratch() const {
    if (scratch_.load(std::memory_order_acquire)) return;
    auto made = std::make_unique<TraceScratch>(items.size(), static_cast<size_t>(num_slots));
    for (const auto& memory : made->memory())  // unmapped pages fault in
      if (!prefault_pages_until(memory.data(), memory.size(), &preparation_stopped)) break;
    delete scratch_.exchange(made.release(), std::memory_order_acq_rel);
  }
  std::unique_ptr<TraceScratch> take_prepared_scratch() const {
    return std::unique_ptr<TraceScratch>(scratch_.exchange(nullptr, std::memory_order_acq_rel));
  }

  ~Plan() {
    preparation.join();  // they read the plan
    naming_.join();
    delete spare_.load();
    delete scratch_.load();
  }

 private:
  void make_names() const;
  // The room another step asked the naming thread to map (see name_beside), if any.
  void map_what_was_asked() const {
    if (!mapping_was_asked_.load(std::memory_order_acquire)) return;
    std::shared_ptr<MappingAhead> room;
    {
      std::lock_guard<std::mutex> lock(naming_mutex_);
      room = std::move(mapping_asked_);
      mapping_was_asked_.store(false, std::memory_order_relaxed);
    }
    if (room) room->map();
  }

  mutable std::once_flag names_once_;
  mutable std::mutex naming_mutex_;
  mutable ThreadBeside naming_;  // see name_beside
  mutable std::shared_ptr<MappingAhead> mapping_asked_;
  mutable std::atomic<bool> mapping_was_asked_{false};
  mutable std::atomic<bool> naming_claimed_{false};
  const std::shared_ptr<StepStats::PlanNames> names_table_ = std::make_shared<StepStats::PlanNames>();
  mutable std::atomic<StepBuffers*> spare_{nullptr};
  mutable std::atomic<TraceScratch*> scratch_{nullptr};  // made ahead, for a StepStatsBuilder to take
};

}  // namespace stepscope
