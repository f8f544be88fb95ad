#include "stepscope/runtime/executor.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <span>

#include "stepscope/base/clock.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/internal/executor_plan.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace stepscope {

// ---------------------------------------------------------------------------------------------
// One step.

namespace {

// The clock of traced steps. Where Linux keeps time with the TSC (so it is invariant and in
// step across cores), a node's two readings are raw TSC reads, about half the cost of
// steady_clock::now(), turned into now_ns() nanoseconds after the step by a linear map anchored
// at the step's start and scaled over everything measured since the first traced step.
// Elsewhere, or with STEPSCOPE_TRACE_CLOCK=steady in the environment, ticks are now_ns() and
// the map is the identity.
class StepClock {
 public:
  static bool tsc() {
    static const bool use = [] {
#if defined(__x86_64__) && defined(__linux__)
      if (const char* choice = std::getenv("STEPSCOPE_TRACE_CLOCK"); choice && std::string_view(choice) == "steady")
        return false;
      std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
      std::string source;
      return static_cast<bool>(f >> source) && source == "tsc";
#else
      return false;
#endif
    }();
    return use;
  }
  static int64_t ticks() {
#if defined(__x86_64__)
    if (tsc()) return static_cast<int64_t>(__rdtsc());
#endif
    return now_ns();
  }

  // A (ticks, ns) pair read together.
  struct Point {
    int64_t ticks, ns;
    static Point now() {
      const int64_t t = StepClock::ticks();
      return {t, tsc() ? now_ns() : t};
    }
  };
  StepClock(Point start, Point end) : start_(start) {
    static const Point first = start;  // the first traced step's start
    if (tsc() && end.ticks > first.ticks)
      mult_ = static_cast<int64_t>(std::ldexp(double(end.ns - first.ns) / double(end.ticks - first.ticks), 32) + 0.5);
  }
  int64_t ns(int64_t ticks) const {
    return start_.ns + static_cast<int64_t>((static_cast<__int128>(ticks - start_.ticks) * mult_) >> 32);
  }

 private:
  Point start_;
  int64_t mult_ = int64_t{1} << 32;  // ns per tick, 32.32 fixed point
};

}  // namespace

struct Executor::RunState {
  const Plan* plan;
  const Executor* executor;
  std::atomic<int32_t>* pending;
  std::atomic<int32_t>* refs;
  Tensor* slots;
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
  int64_t start_ticks = 0;
  NodeRecord* records = nullptr;
  NodeOutput* output_descriptions = nullptr;  // per slot, in the StepStats being filled
  AllocationRecorder* recorder = nullptr;

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

Executor::Executor(Graph& graph, ResourceStore& resources, int threads, int intra_op_threads)
    : graph_(graph), resources_(resources), cpu_allocator_name_(StepStats::intern(cpu_allocator()->name())) {
  if (threads < 0 || intra_op_threads < 0)
    throw InvalidArgumentError("SessionOptions: inter_op_threads (" + std::to_string(threads) +
                               ") and intra_op_threads (" + std::to_string(intra_op_threads) +
                               ") must be >= 0 (0 = one per core)");
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads - 1);
  if (intra_op_threads == 0 || intra_op_threads == threads) {
    intra_op_pool_ = pool_.get();
  } else if (intra_op_threads > 1) {
    own_intra_op_pool_ = std::make_unique<ThreadPool>(intra_op_threads - 1);
    intra_op_pool_ = own_intra_op_pool_.get();
  }
}

Executor::~Executor() = default;

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

// What a traced step records of a fed tensor, as output `slot` of its node: what run_node
// records of the outputs a kernel made (the allocator named as the executor names the kernels'
// allocator). Cold: see place_feeds.
[[gnu::cold]] void describe_fed_tensor(const Tensor& t, int slot, const Allocator* kernel_allocator,
                                       std::string_view kernel_allocator_name, NodeOutput& description) {
  const Buffer* b = t.buffer();
  AllocationDescription& ad = description.tensor_description.allocation_description;
  description.slot = slot;
  description.tensor_description.dtype = t.dtype();
  description.tensor_description.shape = t.shape();
  ad.requested_bytes = b->requested_bytes();
  ad.allocated_bytes = b->allocated_bytes();
  ad.allocator_name =
      b->allocator() == kernel_allocator ? kernel_allocator_name : StepStats::intern(b->allocator()->name());
  ad.allocation_id = b->allocation_id();
  ad.has_single_reference = b->unique();
  ad.ptr = reinterpret_cast<uint64_t>(t.raw_data());
}

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
    NodeOutput* descriptions = s->output_descriptions + item.output_base;
    for (int i = 0; i < item.num_outputs; ++i) {
      const Tensor& t = outputs[i];
      AllocationDescription& ad = descriptions[i].tensor_description.allocation_description;
      if (!t.initialized()) {
        ad.allocator_name = {};  // marks it missing
        r.missing_outputs++;
        continue;
      }
      // As describe_fed_tensor does for a feed (written out here: this is the hot path's copy).
      const Buffer* b = t.buffer();
      descriptions[i].slot = i;
      descriptions[i].tensor_description.dtype = t.dtype();
      descriptions[i].tensor_description.shape = t.shape();
      ad.requested_bytes = b->requested_bytes();  // a tensor always spans its whole buffer
      ad.allocated_bytes = b->allocated_bytes();
      ad.allocator_name = b->allocator() == allocator ? cpu_allocator_name_ : StepStats::intern(b->allocator()->name());
      ad.allocation_id = b->allocation_id();
      ad.has_single_reference = b->unique();
      ad.ptr = reinterpret_cast<uint64_t>(t.raw_data());
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
    run_node(s, index, rec, thread_id, ready_since[num_ready]);
    const Plan::Item& item = plan.items[index];
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
  // Nodes are counted off once per call, not once per node; the call that takes the count to
  // zero wakes the caller, and `s` must not be touched once `done` is set (the caller may
  // return at once).
  if (s->remaining.fetch_sub(finished, std::memory_order_acq_rel) == finished) {
    s->done.store(true, std::memory_order_release);
    if (pool_) pool_->wake_all();
  }
}

// Turns what a traced step recorded into StepStats: per device, the nodes in start order with
// their interned names, outputs and memory figures from the allocation events. No lock, no map,
// no string built, no allocation once the arrays have grown to the step's size (they come from
// the plan's step buffers and from the StepStats, which keeps its memory from the step it held
// before).
struct StepStatsBuilder {
  // Before the step: room for the output descriptions, written while the nodes run.
  static NodeOutput* begin(StepStats& stats, size_t num_slots, StepClock::Point start);
  static void finish(const Executor::Plan& plan, StepBuffers& buf, AllocationRecorder& recorder, const StepClock& clock,
                     StepStats& stats);
  // Fed nodes first (in start order, they start with the step): what TensorFlow records as the
  // _Arg/_Recv nodes of the feeds, so that the fed tensors' shapes are in the step. Nothing ran
  // and nothing was allocated: zero duration, no memory, on the calling thread. Cold: see
  // place_feeds.
  [[gnu::cold]] static void add_fed_nodes(const Executor::Plan& plan, StepStats& stats);
};

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
      s.plan->give_back(buf);
    }
  } give_back{s, buf, clean};

  StepStats* stats = nullptr;
  StepClock::Point start{};
  if (options.trace_level != TraceLevel::kNoTrace && metadata) {
    s.trace = true;
    plan->names();
    if (!buf->records) buf->records.reset(new NodeRecord[num_items]());
    s.records = buf->records.get();
    s.recorder = AllocationRecorder::acquire();
    stats = &metadata->step_stats;
    start = StepClock::Point::now();
    s.start_ticks = start.ticks;
    s.output_descriptions = StepStatsBuilder::begin(*stats, static_cast<size_t>(plan->num_slots), start);
    // The fed tensors, as the outputs of their nodes (recorded after the step, see finish).
    for (size_t i = 0; i < feeds.size(); ++i)
      describe_fed_tensor(feeds[i].second, feeds[i].first.index, cpu_allocator(), cpu_allocator_name_,
                          s.output_descriptions[plan->feed_slots[i]]);
  }

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

  if (s.trace) {
    s.recorder->close();
    StepStatsBuilder::finish(*plan, *buf, *s.recorder, StepClock(start, StepClock::Point::now()), *stats);
    s.recorder->recycle();
  }
  if (metadata && options.output_partition_graphs) {
    const auto& names = plan->names();
    metadata->partition_graphs.assign(plan->num_item_devices, {});
    for (size_t d = 0; d < plan->num_item_devices; ++d) metadata->partition_graphs[d].device = plan->device_names()[d];
    for (size_t i = 0; i < num_items; ++i)
      metadata->partition_graphs[plan->items[i].device].node_names.push_back(names[i].name);
  }

  if (s.error) std::rethrow_exception(s.error);
  std::vector<Tensor> results;
  results.reserve(fetches.size());
  for (int slot : plan->fetch_slots) results.push_back(s.slots[slot]);
  clean = true;
  return results;
}

NodeOutput* StepStatsBuilder::begin(StepStats& stats, size_t num_slots, StepClock::Point start) {
  if (stats.outputs_.capacity() == 0) stats.take_spare_arrays();  // a fresh RunMetadata
  // Arrays that are written whole keep their size: resizing them initializes only what grows.
  std::vector<DeviceStepStats> kept = std::move(stats.dev_stats);  // with their memory
  std::vector<NodeOutput> outputs = std::move(stats.outputs_);
  std::vector<AllocationRecord> records = std::move(stats.records_);
  stats.clear();
  stats.dev_stats = std::move(kept);
  for (auto& dev : stats.dev_stats) dev.node_stats.clear();  // no views into the arrays left
  // One description per slot of the plan, in place: a node's outputs are consecutive slots, so
  // its view needs no copy.
  outputs.resize(num_slots);
  stats.outputs_ = std::move(outputs);
  stats.records_ = std::move(records);
  stats.base_ns = start.ns;
  stats.base_wall_ns = wall_ns();
  return stats.outputs_.data();
}

void StepStatsBuilder::finish(const Executor::Plan& plan, StepBuffers& buf, AllocationRecorder& recorder,
                              const StepClock& clock, StepStats& stats) {
  const int n = static_cast<int>(plan.items.size());
  const NodeRecord* records = buf.records.get();
  const auto& names = plan.names();
  const auto& fed = plan.fed_names();
  const auto logs = recorder.thread_logs();

  // 1. The nodes that ran, in start order: each thread's list is (a thread runs one node at a
  // time); merge them.
  std::span<const int32_t> order;
  if (logs.size() == 1) {
    order = logs[0]->nodes;
  } else {
    buf.order.clear();
    std::vector<size_t> bounds{0};
    for (const auto* log : logs) {
      buf.order.insert(buf.order.end(), log->nodes.begin(), log->nodes.end());
      bounds.push_back(buf.order.size());
    }
    auto by_start = [records](int32_t a, int32_t b) { return records[a].start < records[b].start; };
    for (size_t width = 1; width + 1 < bounds.size(); width *= 2)
      for (size_t i = 0; i + width < bounds.size() - 1; i += 2 * width)
        std::inplace_merge(buf.order.begin() + bounds[i], buf.order.begin() + bounds[i + width],
                           buf.order.begin() + bounds[std::min(i + 2 * width, bounds.size() - 1)], by_start);
    order = buf.order;
  }

  // 2. The step's allocation records grouped per node (a counting sort), written in place: node
  // p's are records_[cursor[p - 1] .. cursor[p]]. The threads' logs are stamped in ticks, the
  // other log (frees from elsewhere) in nanoseconds. Usually every event is the kernel
  // allocator's; otherwise source[] keeps the event of each record, for its allocator.
  auto& cursor = buf.cursor;
  cursor.assign(static_cast<size_t>(n) + 1, 0);
  const AllocationRecorder::ThreadLog& other = recorder.other_log();
  const Allocator* kernel_allocator = cpu_allocator();
  bool one_allocator = true;
  auto count = [&](const AllocationRecorder::ThreadLog& log) {
    for (const AllocationEvent& e : log.events) {
      if (static_cast<uint32_t>(e.node) >= static_cast<uint32_t>(n)) continue;
      cursor[e.node + 1]++;
      one_allocator &= e.allocator == kernel_allocator;
    }
  };
  for (const auto* log : logs) count(*log);
  count(other);
  size_t num_groups = 0;
  for (int p = 0; p < n; ++p) {
    num_groups += cursor[p + 1] != 0;
    cursor[p + 1] += cursor[p];
  }
  const size_t num_events = static_cast<size_t>(cursor[n]);
  auto& allocation_records = stats.records_;
  allocation_records.resize(num_events);
  buf.sources.resize(one_allocator ? 0 : num_events);
  const AllocationEvent** source = buf.sources.data();
  auto place = [&](const AllocationRecorder::ThreadLog& log, bool ticks) {
    for (const AllocationEvent& e : log.events) {
      if (static_cast<uint32_t>(e.node) >= static_cast<uint32_t>(n)) continue;
      const int32_t at = cursor[e.node]++;
      allocation_records[at] = {ticks ? clock.ns(e.time_ns) : e.time_ns, e.bytes};
      if (!one_allocator) source[at] = &e;
    }
  };
  for (const auto* log : logs) place(*log, true);
  place(other, false);
  auto allocator_of = [&](size_t record) { return one_allocator ? kernel_allocator : source[record]->allocator; };

  // 3. The StepStats.
  auto& devices = stats.dev_stats;
  devices.resize(plan.devices.size());
  for (size_t d = 0; d < devices.size(); ++d) devices[d].device = plan.device_names()[d];
  if (devices.size() == 1) {
    devices[0].node_stats.reserve(fed.size() + order.size());
  } else {
    std::vector<size_t> per_device(devices.size());
    for (const auto& f : fed) per_device[f.device]++;
    for (int32_t p : order) per_device[names[p].device]++;
    for (size_t d = 0; d < devices.size(); ++d) devices[d].node_stats.reserve(per_device[d]);
  }
  // One memory entry per node with events (more only for nodes using several allocators).
  stats.reserve(0, num_groups, 0);
  auto& outputs = stats.outputs_;
  auto& memory = stats.memory_;

  const Allocator* named = nullptr;  // the allocator whose name is in `name`
  std::string_view name;
  auto name_of = [&](const Allocator* a) {
    if (a != named) {
      named = a;
      name = StepStats::intern(a->name());
    }
    return name;
  };

  if (!fed.empty()) add_fed_nodes(plan, stats);

  for (int32_t p : order) {
    // The arrays written here are too big to stay in cache between steps: ask for the lines
    // a few nodes ahead.
    const auto& item = names[p];
    const auto& ahead = devices[item.device].node_stats;
    // Addresses computed as integers: a vector with nothing reserved yet has a null data(),
    // and pointer arithmetic on null is undefined (prefetching any address is harmless).
    const uintptr_t line = reinterpret_cast<uintptr_t>(ahead.data()) + (ahead.size() + 6) * sizeof(ahead[0]);
    for (size_t b = 0; b < sizeof(NodeExecStats); b += 64) __builtin_prefetch(reinterpret_cast<const char*>(line + b), 1);
    __builtin_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(memory.data()) +
                                                     (memory.size() + 8) * sizeof(memory[0])),
                       1);

    const NodeRecord& r = records[p];
    const int64_t start_ns = clock.ns(r.start);
    const int64_t duration = clock.ns(r.end) - start_ns;

    // Outputs: in place, unless one is missing (the kernel failed): then the others are copied.
    std::span<const NodeOutput> node_outputs(outputs.data() + item.output_base, item.num_outputs);
    if (r.missing_outputs) {
      std::vector<NodeOutput> produced;
      for (const NodeOutput& out : node_outputs)
        if (out.tensor_description.allocation_description.allocator_name.data()) produced.push_back(out);
      node_outputs = stats.store_outputs(produced);  // may move the array: rebases views
    }

    const size_t first_memory = memory.size();
    const size_t begin = p == 0 ? 0 : static_cast<size_t>(cursor[p - 1]);
    const size_t end = static_cast<size_t>(cursor[p]);
    if (begin < end) {
      AllocationRecord* recs = allocation_records.data();
      // Usually one allocator and in time order already (one thread's log); otherwise (frees
      // made on other threads, several allocators) sorted by allocator, then time.
      bool simple = true;
      for (size_t i = begin + 1; i < end; ++i) simple &= recs[i - 1].alloc_ns <= recs[i].alloc_ns;
      if (!one_allocator)
        for (size_t i = begin + 1; i < end; ++i) simple &= source[i]->allocator == source[begin]->allocator;
      size_t runs = 1;
      if (!simple) {
        std::vector<size_t> index(end - begin);
        for (size_t i = 0; i < index.size(); ++i) index[i] = begin + i;
        std::stable_sort(index.begin(), index.end(), [&](size_t a, size_t b) {
          const Allocator *x = allocator_of(a), *y = allocator_of(b);
          return x != y ? std::less<const Allocator*>()(x, y) : recs[a].alloc_ns < recs[b].alloc_ns;
        });
        std::vector<AllocationRecord> sorted_recs;
        std::vector<const AllocationEvent*> sorted_source;
        for (size_t i : index) {
          sorted_recs.push_back(recs[i]);
          if (!one_allocator) sorted_source.push_back(source[i]);
        }
        std::copy(sorted_recs.begin(), sorted_recs.end(), recs + begin);
        if (!one_allocator) std::copy(sorted_source.begin(), sorted_source.end(), source + begin);  // else null
        for (size_t i = begin + 1; i < end; ++i) runs += allocator_of(i) != allocator_of(i - 1);
        if (memory.size() + runs > memory.capacity())  // beyond the one per node reserved: rebases the views
          stats.reserve(0, std::max(runs, memory.capacity()), 0);
      }
      for (size_t i = begin; i < end;) {
        const Allocator* a = allocator_of(i);
        int64_t live = 0, total = 0, peak = 0;
        size_t j = i;
        for (; j < end && (runs == 1 || allocator_of(j) == a); ++j) {
          live += recs[j].alloc_bytes;
          total += recs[j].alloc_bytes > 0 ? recs[j].alloc_bytes : 0;
          peak = std::max(peak, live);
        }
        memory.push_back({
            .allocator_name = name_of(a),
            .total_bytes = total,
            .peak_bytes = peak,
            .live_bytes = live,
            .allocation_records = {recs + i, j - i},
            // The kernel's allocator was read when the node finished; another one at its last event.
            .allocator_bytes_in_use =
                a == kernel_allocator ? r.bytes_in_use_at_end : source[j - 1]->allocator_bytes_in_use,
        });
        i = j;
      }
    }

    devices[item.device].node_stats.push_back({
        .node_name = item.name,
        .op_type = item.op_type,
        .node_id = item.node_id,
        .scheduled_ns = clock.ns(r.scheduled),
        .all_start_ns = start_ns,
        .op_start_rel_ns = 0,
        .op_end_rel_ns = duration,
        .all_end_rel_ns = duration,
        .memory = {memory.data() + first_memory, memory.size() - first_memory},
        .output = node_outputs,
        .timeline_label = item.timeline_label,
        .thread_id = r.thread_id,
        .referenced_tensor = {},
        .memory_stats = {},
    });
  }
}

void StepStatsBuilder::add_fed_nodes(const Executor::Plan& plan, StepStats& stats) {
  const uint32_t caller = current_thread_id();
  for (const auto& f : plan.fed_names()) {
    stats.dev_stats[f.device].node_stats.push_back({
        .node_name = f.name,
        .op_type = f.op_type,
        .node_id = f.node_id,
        .scheduled_ns = stats.base_ns,
        .all_start_ns = stats.base_ns,
        .op_start_rel_ns = 0,
        .op_end_rel_ns = 0,
        .all_end_rel_ns = 0,
        .memory = {},
        .output = {stats.outputs_.data() + f.output_base, static_cast<size_t>(f.num_outputs)},
        .timeline_label = f.timeline_label,
        .thread_id = caller,
        .referenced_tensor = {},
        .memory_stats = {},
    });
  }
}

}  // namespace stepscope
