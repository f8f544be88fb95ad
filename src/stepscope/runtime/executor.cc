#include "stepscope/runtime/executor.h"

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "stepscope/base/clock.h"
#include "stepscope/base/huge_pages.h"
#include "stepscope/base/mapping_ahead.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/internal/executor_plan.h"
#include "stepscope/runtime/step_clock.h"
#include "stepscope/runtime/step_stats_builder.h"

namespace stepscope {

// ---------------------------------------------------------------------------------------------
// One step.

struct Executor::RunState {
  const Plan* plan;
  const Executor* executor;
  std::atomic<int32_t>* pending;
  std::atomic<int32_t>* refs;
  Tensor* slots;
  PackInStep* packs;  // per plan pack
  std::atomic<int32_t> remaining{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards error
  std::atomic<bool> done{false};  // set by the thread that finishes the last node
  std::exception_ptr error;
  std::vector<int> overflow;  // ready nodes when there is no pool (single-threaded only)
  // While the caller runs the roots it runs first (run()), the nodes they make ready wait here,
  // so that no root waits behind a chain another root started; null afterwards.
  int* deferred = nullptr;
  int num_deferred = 0;
  int64_t step_id = 0;
  int64_t deadline_ns = 0;
  // Tracing (null unless traced).
  bool trace = false;
  // What kernels measured inside themselves (input pipeline stages), for RunMetadata.
  struct StageSink : KernelTraceSink {
    std::mutex mutex;
    std::vector<InputStage> stages;
    void add_stages(const Node& node, std::span<const KernelStageTime> times) override {
      std::lock_guard<std::mutex> lock(mutex);
      for (const KernelStageTime& t : times) add_input_stage(stages, {node.name(), t.stage, t.self_ns, t.calls});
    }
  } stage_sink;
  int64_t start_ticks = 0;
  NodeRecord* records = nullptr;
  StepStats* step_stats = nullptr;                          // being filled
  StepStats::RecordedOutput* output_descriptions = nullptr;  // per slot, in step_stats
  AllocationRecorder* recorder = nullptr;
  // Step timing (RunOptions::collect_step_timing, or a traced run with a RunMetadata): threads
  // running nodes, and the gaps when none is.
  // Lock-free: the thread that takes the count of active threads 1 -> 0 stores when; the one
  // that takes it 0 -> 1 takes that time (leaving kBusy) and counts the gap. It may find kBusy
  // for a moment (the other has counted down and not yet stored): it waits for the store.
  bool timing = false;
  static constexpr int64_t kBusy = -1;
  std::atomic<int64_t> busy_ticks{0}, input_ticks{0}, idle_ticks{0};  // StepClock ticks
  std::atomic<int32_t> active{0};
  std::atomic<int64_t> idle_since{kBusy};

  void start_busy() {
    if (active.fetch_add(1, std::memory_order_acq_rel) != 0) return;
    int64_t since;
    while ((since = idle_since.exchange(kBusy, std::memory_order_acq_rel)) == kBusy) std::this_thread::yield();
    idle_ticks.fetch_add(std::max<int64_t>(0, StepClock::ticks() - since), std::memory_order_relaxed);
  }
  void end_busy(int64_t since) {
    const int64_t now = StepClock::ticks();
    busy_ticks.fetch_add(now - since, std::memory_order_relaxed);
    if (active.fetch_sub(1, std::memory_order_acq_rel) == 1) idle_since.store(now, std::memory_order_release);
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) error = e;
    failed.store(true, std::memory_order_release);
  }
  bool fail_deadline(const Node& node) {
    fail(std::make_exception_ptr(DeadlineExceededError(
        node_error_message(node, "Timed out waiting for the step to finish (timeout_in_ms exceeded)"))));
    return true;
  }
};

Executor::Executor(Graph& graph, ResourceStore& resources, DeviceSet* devices, std::unique_ptr<DeviceSet> own_devices,
                   int threads, int intra_op_threads)
    : graph_(graph),
      resources_(resources),
      own_devices_(std::move(own_devices)),
      devices_(devices ? *devices : *own_devices_),
      cpu_allocator_index_(StepStats::allocator_index(cpu_allocator()->name())) {
  if (threads < 0 || intra_op_threads < 0)
    throw InvalidArgumentError("SessionOptions: inter_op_threads (" + std::to_string(threads) +
                               ") and intra_op_threads (" + std::to_string(intra_op_threads) +
                               ") must be >= 0 (0 = one per core)");
  if (threads == 0) threads = static_cast<int>(std::max(1u, hardware_cores()));
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads - 1);
  if (intra_op_threads == 0 || intra_op_threads == threads) {
    intra_op_pool_ = pool_.get();
  } else if (intra_op_threads > 1) {
    own_intra_op_pool_ = std::make_unique<ThreadPool>(intra_op_threads - 1);
    intra_op_pool_ = own_intra_op_pool_.get();
  }
  // The trace clock is chosen by reading sysfs, once a process: here, not inside the process's
  // first traced or timed step (it added ~40 ns an op to a 10^3-node step's first trace).
  StepClock::tsc();
  // And the number of cores, which a traced step's first wish for a thread beside asks (it read
  // a file of /sys: ~40 µs inside a 10^3-node step's first trace on this workplace's VMs).
  hardware_cores();
  // Likewise the process's first threads (see ThreadBeside), which its traced steps start.
  ThreadBeside::make_ahead();
}

Executor::Executor(Graph& graph, ResourceStore& resources, DeviceSet& devices, int threads, int intra_op_threads)
    : Executor(graph, resources, &devices, nullptr, threads, intra_op_threads) {}

Executor::Executor(Graph& graph, ResourceStore& resources, int threads, int intra_op_threads)
    : Executor(graph, resources, nullptr, std::make_unique<DeviceSet>(), threads, intra_op_threads) {}

Executor::~Executor() = default;

void Executor::start_device_tracers() const {
  for (const auto& t : devices_.tracers()) t->start();
}
void Executor::stop_device_tracers() const {
  for (const auto& t : devices_.tracers()) t->stop();
}
void Executor::collect_device_tracers(StepStats& stats) const {
  for (const auto& t : devices_.tracers()) t->collect(stats);
}

void Executor::process_task(void* state, int64_t index) {
  auto* s = static_cast<RunState*>(state);
  s->executor->process(s, static_cast<int>(index));
}

namespace {

// Counts down a counter that only reaches zero once: true for the caller that takes it there.
// The last party sees 1 in a plain load and skips the read-modify-write (nobody else can touch
// the counter then; the acquire pairs with the release of the others' decrements). Without a
// pool, a step runs on one thread from start to end: no locked instruction at all.
inline bool count_down(std::atomic<int32_t>& counter, bool threaded) {
  const int32_t v = counter.load(threaded ? std::memory_order_acquire : std::memory_order_relaxed);
  if (v == 1) return true;
  if (threaded) return counter.fetch_sub(1, std::memory_order_acq_rel) == 1;
  counter.store(v - 1, std::memory_order_relaxed);
  return false;
}

// The allocator's out-of-memory error, thrown from a tensor a kernel made, knows nothing of the
// kernel: it gets the node's prefix that the kernel's own errors have.
[[gnu::cold]] std::exception_ptr out_of_memory(const Node& node, const ResourceExhaustedError& e) {
  const std::string prefix = node_error_message(node, "");
  if (std::string_view(e.what()).starts_with(prefix)) return std::current_exception();
  return std::make_exception_ptr(ResourceExhaustedError(prefix + e.what()));
}

// Gives up one hold on a slot (a consumer's, a fetch's or a feed's): the slot's tensor when it
// was the last, otherwise one of the references counted for the holders (see process()).
inline void release(std::atomic<int32_t>& refs, Tensor& slot, bool threaded) {
  // The buffer is read before the count goes down: after that, the last holder may reset the
  // slot on another thread (a data race ThreadSanitizer caught).
  // The const_cast is sound: the hold being given back is a reference this holder owns.
  Buffer* const held = const_cast<Buffer*>(slot.buffer());
  if (count_down(refs, threaded))
    slot = Tensor();
  else if (held)
    held->release();
}

// What a traced step records of a fed tensor, as output `slot` of its node. Cold: see place_feeds.
[[gnu::cold]] void describe_fed(const Tensor& t, int slot, StepStats& stats, StepStats::RecordedOutput& description) {
  describe_output_apart(t, slot, stats, description);
}

// Puts a node's packed outputs (Plan::placements) into their packs, made by the first producer
// that allocates one.
class PackPlacer final : public OutputPlacer {
 public:
  PackPlacer(const Executor::Plan& plan, PackInStep* packs, const Executor::Plan::Placement* placements)
      : plan_(plan), packs_(packs), placements_(placements) {}
  Buffer* take(int output, DType dtype, int64_t num_elements) override {
    const Executor::Plan::Placement& p = placements_[output];
    if (p.pack < 0) return nullptr;
    const Executor::Plan::Pack& pack = plan_.packs[p.pack];
    if (dtype != pack.dtype || num_elements != pack.counts[p.index]) return nullptr;
    PackInStep& step = packs_[p.pack];
    std::lock_guard lock(step.mutex);
    if (!step.made) {
      step.buffers.resize(pack.counts.size());
      Buffer::create_packed(cpu_allocator(), pack.dtype, pack.counts, step.buffers);
      step.made = true;
    }
    return std::exchange(step.buffers[p.index], nullptr);
  }

 private:
  const Executor::Plan& plan_;
  PackInStep* packs_;
  const Executor::Plan::Placement* placements_;
};

}  // namespace

void Executor::run_node(RunState* s, int index, RecordingScope* rec, uint32_t thread_id, int64_t scheduled) const {
  const Plan::Item& item = s->plan->items[index];
  if (s->failed.load(std::memory_order_relaxed) ||
      (s->deadline_ns && now_ns() > s->deadline_ns && s->fail_deadline(*item.node))) {
    // Skipped: what the caller frees next (this node's inputs) is stamped with the time now.
    if (rec) rec->time_ns = StepClock::ticks();
    return;
  }
  constexpr int kInlineInputs = 16;
  const Tensor* inline_inputs[kInlineInputs];
  std::vector<const Tensor*> many_inputs;
  const Tensor** inputs = inline_inputs;
  if (item.num_inputs > kInlineInputs) {
    many_inputs.resize(item.num_inputs);
    inputs = many_inputs.data();
  }
  const int* in_slots = s->plan->input_slots.data() + item.input_base;
  for (int i = 0; i < item.num_inputs; ++i) inputs[i] = &s->slots[in_slots[i]];
  Tensor* outputs = &s->slots[item.output_base];
  Allocator* allocator = cpu_allocator();
  KernelContext ctx(*item.node, inputs, outputs, allocator, intra_op_pool_, &resources_, s->step_id);
  if (s->trace) ctx.set_trace_sink(&s->stage_sink);
  std::optional<PackPlacer> placer;
  if (item.placements >= 0) [[unlikely]]
    ctx.set_output_placer(&placer.emplace(*s->plan, s->packs, &s->plan->placements[item.placements]));

  // Traced: one clock reading right before the kernel (all_start = op_start); what the kernel
  // allocates and frees is stamped with it.
  int64_t start = 0;
  if (rec) {
    start = StepClock::ticks();
    rec->node = index;
    rec->time_ns = start;
  }
  try {
    item.kernel(ctx);
    const DType* dtypes = s->plan->dtypes.data() + item.output_base;
    for (int i = 0; i < item.num_outputs; ++i) {
      if (!outputs[i].initialized())
        throw InternalError(node_error_message(*item.node, "kernel did not produce output " + std::to_string(i)));
      if (outputs[i].dtype() != dtypes[i])
        throw InternalError(node_error_message(*item.node, "kernel produced output " + std::to_string(i) +
                                                               " of dtype " +
                                                               std::string(dtype_name(outputs[i].dtype())) +
                                                               ", graph says " + std::string(dtype_name(dtypes[i]))));
    }
  } catch (const ResourceExhaustedError& e) {
    s->fail(out_of_memory(*item.node, e));
  } catch (const Error&) {
    s->fail(std::current_exception());
  } catch (const std::exception& e) {
    s->fail(std::make_exception_ptr(InternalError(node_error_message(*item.node, e.what()))));
  }
  if (rec) {
    // And one right after it (op_end = all_end); the frees that follow (inputs this node was
    // the last to read) are stamped with it.
    const int64_t end = StepClock::ticks();
    rec->node = -1;
    rec->time_ns = end;
    NodeRecord& r = s->records[index];
    r.start = start;
    r.end = end;
    if (scheduled >= 0) r.scheduled = scheduled;
    r.bytes_in_use_at_end = allocator->bytes_in_use();
    r.thread_id = thread_id;
    rec->log->nodes.push_back(index);
    r.missing_outputs = 0;
    StepStats::RecordedOutput* descriptions = s->output_descriptions + item.output_base;
    for (int i = 0; i < item.num_outputs; ++i) {
      if (outputs[i].initialized()) {
        describe_output(outputs[i], i, allocator, cpu_allocator_index_, *s->step_stats, descriptions[i]);
      } else {
        mark_missing(descriptions[i]);
        r.missing_outputs++;
      }
    }
  }
}

void Executor::process(RunState* s, int first) const {
  const Plan& plan = *s->plan;
  std::optional<ScopedRecording> recording;
  RecordingScope* rec = nullptr;
  uint32_t thread_id = 0;
  if (s->trace) {
    recording.emplace(s->recorder);
    rec = &recording->scope();
    rec->time_ns = s->start_ticks;  // until the first node sets it (nothing is freed before)
    thread_id = current_thread_id();
  }
  const bool threaded = pool_ != nullptr;
  // Read once: the check below is per node, and run_node could (for all the compiler knows)
  // change *s.
  const bool timing = s->timing;
  int64_t busy_since = 0;
  if (timing) {
    s->start_busy();
    busy_since = StepClock::ticks();
  }
  constexpr int kLocalReady = 32;
  int ready[kLocalReady];
  int64_t ready_since[kLocalReady];  // traced: when each became ready (-1: in its record already)
  int num_ready = 0;
  int32_t finished = 0;
  ready[num_ready] = first;
  ready_since[num_ready++] = -1;
  for (;;) {
    if (num_ready == 0) {
      if (pool_ || s->overflow.empty()) break;
      ready[num_ready] = s->overflow.back();
      ready_since[num_ready++] = -1;
      s->overflow.pop_back();
    }
    --num_ready;
    const int index = ready[num_ready];
    const Plan::Item& item = plan.items[index];
    if (timing && item.input) [[unlikely]] {
      const int64_t since = StepClock::ticks();
      run_node(s, index, rec, thread_id, ready_since[num_ready]);
      s->input_ticks.fetch_add(StepClock::ticks() - since, std::memory_order_relaxed);
    } else {
      run_node(s, index, rec, thread_id, ready_since[num_ready]);
    }
    // Every consumer of an output (and the fetch holding it) counts in its buffer's references,
    // not only the slot: a kernel that updates a buffer in place when nobody else holds it (a
    // variable's update) then never writes under a reader of the same step still running.
    const int* out_refs = plan.initial_refs.data() + item.output_base;
    for (int o = 0; o < item.num_outputs; ++o)
      if (out_refs[o] > 1) s->slots[item.output_base + o].add_holders(out_refs[o] - 1);

    // Successors that became ready: keep cheap ones (and one expensive one) here. Traced, a
    // successor became ready when this node ended.
    const int64_t end = rec ? s->records[index].end : 0;
    bool kept_expensive = false;
    for (int e = item.succ_begin; e < item.succ_end; ++e) {
      const int succ = plan.successors[e];
      if (!count_down(s->pending[succ], threaded)) continue;
      if (s->deferred) {
        if (rec) s->records[succ].scheduled = end;
        s->deferred[s->num_deferred++] = succ;
        continue;
      }
      const bool expensive = plan.items[succ].expensive;
      if (pool_ && ((expensive && kept_expensive) || num_ready == kLocalReady)) {
        if (rec) s->records[succ].scheduled = end;
        pool_->schedule({&Executor::process_task, s, succ});
      } else if (num_ready == kLocalReady) {
        if (rec) s->records[succ].scheduled = end;
        s->overflow.push_back(succ);
      } else {
        ready[num_ready] = succ;
        ready_since[num_ready++] = end;
        kept_expensive |= expensive;
      }
    }
    // Release the inputs: the slot when this was its last consumer, otherwise this one's hold.
    const int* in_slots = plan.input_slots.data() + item.input_base;
    for (int i = 0; i < item.num_inputs; ++i) release(s->refs[in_slots[i]], s->slots[in_slots[i]], threaded);
    // Outputs nobody consumes are released at once.
    for (int o = 0; o < item.num_outputs; ++o)
      if (plan.initial_refs[item.output_base + o] == 0) s->slots[item.output_base + o] = Tensor();
    ++finished;
  }
  recording.reset();
  if (timing) s->end_busy(busy_since);
  // Nodes are counted off once per call, not once per node; the call that takes the count to
  // zero wakes the caller, and `s` must not be touched once `done` is set (the caller may
  // return at once).
  if (s->remaining.fetch_sub(finished, std::memory_order_acq_rel) == finished) {
    s->done.store(true, std::memory_order_release);
    if (pool_) pool_->wake_all();
  }
}

namespace {

// From how many nodes a plan's names, mapping a step's new room, or making a spare set of its
// arrays (~400 KB of new memory at 1,000 nodes, ~200 µs to map on a VM) are worth a thread: ~100 µs
// of work (~100 ns a node, mostly cache misses over the graph's nodes or page faults) against
// 15-40 µs to wake a parked ThreadBeside on this workplace's VMs. (Measured, a RunMetadata kept
// each step at 3,000 nodes: 0.70-0.77 ms a step with the room mapped beside it, 0.90-0.95 mapped
// by the step itself; at 1,000 nodes a threshold of 2,000 made the first, second and kept
// traced steps slower.)
constexpr size_t kItemsWorthAThread = 1000;

bool core_left_idle(size_t items, int cores_used) {
  return items >= kItemsWorthAThread && static_cast<unsigned>(cores_used) < hardware_cores();
}

// What a traced step of `plan` writes in its StepStats' arrays (see StepStatsBuilder::begin and
// finish): its recorded stream, as recorded_bytes_estimate reckons it for two allocation
// records a node and an output a slot; and what the first read of its node entries writes: a
// node entry a node and fed node, on its device, an output description a slot, a memory entry
// and two allocation records a node.
StepStats::ArraySizes step_array_sizes(const Executor::Plan& plan) {
  const size_t n = plan.items.size();
  const auto slots = static_cast<size_t>(plan.num_slots);
  StepStats::ArraySizes sizes{.outputs = slots,
                              .memory = n,
                              .records = 2 * n,
                              .node_stats = {},
                              .recorded_bytes = StepStats::recorded_bytes_estimate(n, 2 * n, slots)};
  sizes.node_stats.assign(plan.devices.size(), 0);
  for (const auto& item : plan.items) sizes.node_stats[static_cast<size_t>(item.device)]++;
  for (const auto& fed : plan.fed_nodes) sizes.node_stats[static_cast<size_t>(fed.device)]++;
  return sizes;
}

// Has a traced step's new memory (see mapping_ahead.h) mapped and, where `needs_names`, the plan's
// names made (each node's label, op type and device, interned; needed only by the first read of
// the step's node entries). Where the step leaves a core idle, a thread there maps the room
// while the step runs and then makes the names: the step does not wait for them (the thread may
// outlive it, and maps the next steps' room first while it makes them). Otherwise both are done
// here, before the step. Returns the mapping, which the step stops at its end (null where none
// runs).
std::shared_ptr<MappingAhead> map_room_and_name(const Executor::Plan& plan, bool needs_names, NewMemory room,
                                                int cores_used, ThreadBeside& mapping) {
  if ((needs_names || !room.empty()) && core_left_idle(plan.items.size(), cores_used)) {
    auto beside = std::make_shared<MappingAhead>(std::move(room));
    if (needs_names && plan.name_beside(beside)) return beside;
    if (!beside->memory().empty()) {
      try {
        mapping = ThreadBeside([beside] { beside->map(); });
        if (needs_names) plan.names();
        return beside;
      } catch (const std::system_error&) {  // no thread to be had: mapped here instead
      }
    }
    map_now(beside->memory());
  } else {
    map_now(room);
  }
  if (needs_names) plan.names();
  return nullptr;
}

}  // namespace

int Executor::cores_used() const {
  return std::max(pool_ ? pool_->num_threads() + 1 : 1, intra_op_pool_ ? intra_op_pool_->num_threads() + 1 : 1);
}

// Up to how many nodes a plan of a session not told that steps will be traced has its first
// traced step's memory made ahead all the same, where a core is left idle to make it: ~550
// bytes a node, 9 MB at most (the RSS of a 16,000-node plan's session grew 11.9 MB against 3.6
// without), about what the plan and its graph take themselves. A process's first traced step
// writing that memory new was +168-402 ns an op at 10^3 nodes and +49-76 at 10^4, made ahead
// +50-117 and +33-63 (ten processes each; BENCHMARKS.md, issue 16, thirty-second session).
// Bigger plans are made ready only when told (Session::expect_traced_steps): tens of MB.
constexpr size_t kItemsReadiedUntold = 16384;

// A first traced step's new memory costs more than its tracing (~200 ns a node in a step's
// arrays on a VM, and a plan's names), so a session that expects traced steps has them made
// with the plan: beside the steps on a core they leave idle (the spare arrays first, which a
// step takes at its start; the names a traced step needs only at its end), or here. A session
// not told has them made beside its steps for a plan of up to kItemsReadiedUntold nodes, never
// on the caller's time.
void Executor::prepare_traced_steps(Plan& plan) const {
  const bool told = expects_traced_steps();
  const bool beside = core_left_idle(plan.items.size(), cores_used());
  if (!told && !(beside && plan.items.size() <= kItemsReadiedUntold)) return;
  // Stopped where a traced step starts before it is done (Plan::stop_preparation): the step
  // then makes the names too, unless this thread is making them already (names() makes them
  // once; a second caller waits for the first).
  auto prepare = [&plan] {
    const size_t n = plan.items.size();
    const std::atomic<bool>& stopped = plan.preparation_stopped;
    StepStats::prepare_spare(step_array_sizes(plan), StepStats::SpareFor::kFirstStep, &stopped);
    if (stopped.load(std::memory_order_relaxed)) return;
    AllocationRecorder::prepare(2 * n, n, &stopped);  // what run() expects a step to record
    if (stopped.load(std::memory_order_relaxed)) return;
    plan.prepare_scratch();
    if (stopped.load(std::memory_order_relaxed)) return;
    plan.names();
  };
  if (beside) {
    try {
      plan.preparation = ThreadBeside([&plan, prepare] {
        if (Plan::before_preparing_beside) Plan::before_preparing_beside(plan.preparation_stopped);
        prepare();
      });  // a head start: a traced step makes what is missing
      return;
    } catch (const std::system_error&) {  // no thread to be had: made here instead, if told
    }
  }
  if (!told) return;
  try {
    prepare();
  } catch (const std::bad_alloc&) {  // only a head start (see above)
  }
}

// A caller who traces each step into a new RunMetadata and keeps them has each step write new
// memory: a core the steps leave idle makes the next one's arrays between them. It stops when
// the next traced step starts (a set not made whole is dropped: a step takes a set whole or not
// at all), after the piece it is mapping (StepStats::prepare_spare), so as not to fight that
// step, whose own new memory the core then maps beside it (map_room_and_name). (Measured at
// 10^5 nodes, back to back, a set still being made beside the next step: 15 ms for a step given
// a set made ahead but 33-36 ms for the one after, against 21 ms for every step with its memory
// mapped beside it.)
void Executor::make_spare_beside(StepStats::ArraySizes sizes, size_t items) {
  if (!core_left_idle(items, cores_used())) return;
  std::lock_guard<std::mutex> lock(spare_mutex_);
  spare_sizes_ = std::move(sizes);
  spare_wanted_ = true;
  spare_stopped_.store(false, std::memory_order_relaxed);
  if (making_spares_) return;  // the thread making them makes this one next
  making_spares_ = true;
  try {
    // The thread before has returned or is returning (it set making_spares_ false last): the
    // assignment's wait for it is short, and it takes no lock again.
    making_spare_ = ThreadBeside([this] {
      for (;;) {
        StepStats::ArraySizes sizes;
        {
          std::lock_guard<std::mutex> lock(spare_mutex_);
          if (!spare_wanted_) {
            making_spares_ = false;
            return;
          }
          spare_wanted_ = false;
          sizes = spare_sizes_;
        }
        try {
          StepStats::prepare_spare(sizes, StepStats::SpareFor::kKeptSteps, &spare_stopped_);
        } catch (const std::bad_alloc&) {  // a head start only: the next step makes its own arrays
        }
      }
    });
  } catch (const std::system_error&) {  // no thread to be had: the next step makes its own
    making_spares_ = false;
  }
}

std::vector<Tensor> Executor::run(const FeedList& feeds, const std::vector<Output>& fetches,
                                  const std::vector<Node*>& targets, const RunOptions& options, RunMetadata* metadata) {
  std::shared_ptr<const Plan> plan = plan_for(feeds, fetches, targets);
  const size_t num_items = plan->items.size();
  StepBuffers* buf = plan->take_buffers();
  RunState s;
  s.plan = plan.get();
  s.executor = this;
  s.pending = buf->pending.get();
  s.refs = buf->refs.get();
  s.slots = buf->slots.get();
  s.packs = buf->packs.get();
  s.step_id = next_step_id_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < num_items; ++i) s.pending[i].store(plan->items[i].initial_pending, std::memory_order_relaxed);
  for (int i = 0; i < plan->num_slots; ++i) s.refs[i].store(plan->initial_refs[i], std::memory_order_relaxed);
  for (size_t i = 0; i < feeds.size(); ++i) {
    const int slot = plan->feed_slots[i];
    s.slots[slot] = feeds[i].second;
    if (plan->initial_refs[slot] > 1) s.slots[slot].add_holders(plan->initial_refs[slot] - 1);  // as for outputs
  }
  s.remaining.store(static_cast<int32_t>(num_items), std::memory_order_relaxed);
  if (options.timeout_in_ms > 0) s.deadline_ns = now_ns() + options.timeout_in_ms * 1000000;
  // Step timing counts in StepClock ticks (the TSC where Linux keeps time with it: a few ns a
  // reading, where clock_gettime costs ~50-100 ns on some virtual machines), turned into
  // nanoseconds once, after the step.
  StepClock::Point timing_start{};
  const bool timing = metadata && (options.collect_step_timing || options.trace_level != TraceLevel::kNoTrace);
  if (timing) {
    s.timing = true;
    timing_start = StepClock::Point::now();
    s.idle_since.store(timing_start.ticks, std::memory_order_relaxed);
  }

  // Whatever happens, the buffers go back with every slot empty: the fetches and feeds give up
  // their holds as consumers do (so no reference counted for them stays behind).
  bool clean = false;
  struct GiveBack {
    RunState& s;
    StepBuffers* buf;
    const bool& clean;
    ~GiveBack() {
      for (int slot : s.plan->fetch_slots) release(s.refs[slot], buf->slots[slot], false);
      for (int slot : s.plan->feed_slots) release(s.refs[slot], buf->slots[slot], false);
      if (!clean)
        for (int i = 0; i < s.plan->num_slots; ++i) buf->slots[i] = Tensor();
      for (size_t i = 0; i < s.plan->packs.size(); ++i) buf->packs[i].reset();
      s.plan->give_back(buf);
    }
  } give_back{s, buf, clean};

  StepStats* stats = nullptr;
  StepClock::Point start{};
  ThreadBeside mapping;  // the step's new memory, mapped beside it
  // Stopped as the step ends (or throws), before `mapping` waits for its thread.
  struct StopMapping {
    std::shared_ptr<MappingAhead> beside;
    ~StopMapping() {
      if (beside) beside->stop();
    }
  } room_mapping;
  bool spare_wanted = false;  // see StepStats::reuse_for_step
  if (options.trace_level != TraceLevel::kNoTrace && metadata) {
    plan->stop_preparation();  // where still at work: this step makes what it needs
    spare_stopped_.store(true, std::memory_order_relaxed);  // a set not made yet is not this step's
    s.trace = true;
    s.recorder = AllocationRecorder::acquire();
    // Room for a node's output and the free of its input (what most nodes record), on whichever
    // thread runs them: room not written is not memory used.
    NewMemory room;
    room.early = s.recorder->expect(2 * num_items, num_items);
    stats = &metadata->step_stats;
    start = StepClock::Point::now();
    s.start_ticks = start.ticks;
    const StepStatsBuilder::Begun begun = buf->trace.begin(*plan, *stats, start);
    const StepStatsBuilder::Slots slots = buf->trace.slots(*plan);
    if (slots.new_scratch) {  // the records and outputs written from the step's start; the rest at its end
      const auto memory = slots.new_scratch->memory();
      room.early.insert(room.early.end(), memory.begin(), memory.end() - 1);
      room.late.push_back(memory.back());
    }
    if (begun.new_room) room.late.push_back(stats->room());
    room_mapping.beside =
        map_room_and_name(*plan, !plan->has_names(), std::move(room), cores_used(), mapping);
    spare_wanted = begun.spare_wanted;
    s.records = slots.records;
    s.step_stats = stats;
    s.output_descriptions = slots.outputs;
    // The fed tensors, as the outputs of their nodes (recorded after the step, see finish).
    for (size_t i = 0; i < feeds.size(); ++i)
      describe_fed(feeds[i].second, feeds[i].first.index, *stats, s.output_descriptions[plan->feed_slots[i]]);
  }

  // Device tracers (a GPU's CUPTI records) for hardware and full traces.
  const bool trace_devices =
      s.trace && options.trace_level >= TraceLevel::kHardwareTrace && !devices_.tracers().empty();
  if (trace_devices) start_device_tracers();

  if (num_items > 0) {
    // Variable reads run first, here, before anything else is scheduled: every read of a step
    // sees the value the variable had when the step started, never an update made later in the
    // same step (so global_step/read, fetched beside the train op, is the pre-increment step).
    // Cheap roots follow them on this thread (see build_plan). Only this thread runs until they
    // are all done: what they make ready waits in s.deferred.
    const auto& roots = plan->roots;
    const size_t first_other = plan->num_inline_roots;
    s.deferred = buf->deferred.get();
    for (size_t i = 0; i < first_other; ++i) {
      if (s.trace) s.records[roots[i]].scheduled = start.ticks;
      process(&s, roots[i]);
    }
    s.deferred = nullptr;
    // Then the expensive roots and what the others made ready: the caller takes one (an
    // expensive root first), the pool the rest.
    int own = -1;
    auto dispatch = [&](int index) {
      if (own < 0)
        own = index;
      else if (pool_)
        pool_->schedule({&Executor::process_task, &s, index});
      else
        s.overflow.push_back(index);
    };
    for (size_t i = first_other; i < roots.size(); ++i) {
      if (s.trace) s.records[roots[i]].scheduled = start.ticks;
      dispatch(roots[i]);
    }
    for (int k = 0; k < s.num_deferred; ++k) dispatch(buf->deferred[k]);
    if (own >= 0) process(&s, own);
    // The caller waits for the step as one more worker of the pool, taking queued nodes and
    // kernels' parallel_for chunks.
    if (pool_ && !s.done.load(std::memory_order_acquire)) pool_->run_until(s.done);
  }
  if (timing) {
    const StepClock::Point end = StepClock::Point::now();
    const StepClock clock(timing_start, end);
    auto ns = [&](const std::atomic<int64_t>& ticks) {
      return clock.ns(timing_start.ticks + ticks.load(std::memory_order_relaxed)) - timing_start.ns;
    };
    metadata->step_timing = {.wall_ns = end.ns - timing_start.ns,
                             .busy_ns = ns(s.busy_ticks),
                             .input_ns = ns(s.input_ticks),
                             .idle_ns = ns(s.idle_ticks)};
  }

  if (s.trace) {
    std::sort(s.stage_sink.stages.begin(), s.stage_sink.stages.end(), [](const InputStage& a, const InputStage& b) {
      return std::tie(a.node, a.stage) < std::tie(b.node, b.stage);
    });
    metadata->input_stages = std::move(s.stage_sink.stages);
    s.recorder->close();
    const StepClock::Point end = StepClock::Point::now();
    if (trace_devices) stop_device_tracers();
    buf->trace.finish(*plan, *s.recorder, StepClock(start, end), *stats);
    if (room_mapping.beside) std::exchange(room_mapping.beside, nullptr)->stop();  // all written
    s.recorder->recycle();
    if (trace_devices) collect_device_tracers(*stats);
    if (spare_wanted) {
      // The next kept step's arrays are this one's, but for a stream only as big as the room the
      // next step reserves: this one's may be a plan's first estimate, 4-5x a chain's stream.
      StepStats::ArraySizes sizes = stats->reserved_sizes();
      sizes.recorded_bytes = std::min(sizes.recorded_bytes, buf->trace.recorded_room(*plan));
      make_spare_beside(std::move(sizes), num_items);
    }
  }
  if (metadata && options.output_partition_graphs) {
    const auto& names = plan->names();
    metadata->partition_graphs.assign(plan->num_item_devices, {});
    for (size_t d = 0; d < plan->num_item_devices; ++d) metadata->partition_graphs[d].device = plan->device_names()[d];
    for (size_t i = 0; i < num_items; ++i)
      metadata->partition_graphs[plan->items[i].device].node_names.push_back(names[i].name);
    if (num_items == 0) {
      // Every fetch was fed: TensorFlow still returns the graph that moved the fed values to
      // the fetches (its _Arg and _Retval nodes); here, the fed nodes on their devices.
      for (const auto& fed : plan->fed_names()) {
        auto it = std::find_if(metadata->partition_graphs.begin(), metadata->partition_graphs.end(),
                               [&](const PartitionGraph& p) { return p.device == plan->device_names()[fed.device]; });
        if (it == metadata->partition_graphs.end())
          it = metadata->partition_graphs.insert(it, PartitionGraph{plan->device_names()[fed.device], {}});
        it->node_names.push_back(fed.name);
      }
    }
  }

  if (s.error) std::rethrow_exception(s.error);
  std::vector<Tensor> results;
  results.reserve(fetches.size());
  for (int slot : plan->fetch_slots) results.push_back(s.slots[slot]);
  clean = true;
  return results;
}

}  // namespace stepscope
