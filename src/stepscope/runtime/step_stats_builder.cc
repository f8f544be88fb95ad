#include "stepscope/runtime/step_stats_builder.h"

#include <algorithm>
#include <functional>
#include <span>

#include "stepscope/base/clock.h"
#include "stepscope/base/huge_pages.h"
#include "stepscope/base/thread_pool.h"
#include "stepscope/runtime/internal/executor_plan.h"

namespace stepscope {

std::unique_ptr<NodeRecord[]> StepStatsBuilder::make_records(size_t n) {
  std::unique_ptr<NodeRecord[]> records(new NodeRecord[n]);  // mapped in one call, then zeroed (see outputs_for_step)
  prefault_pages(records.get(), n * sizeof(NodeRecord));
  std::fill_n(records.get(), n, NodeRecord{});
  return records;
}

StepStatsBuilder::Begun StepStatsBuilder::begin(const Executor::Plan& plan, StepStats& stats, StepClock::Point start) {
  bool spare_wanted = false;
  stats.reuse_for_step(&spare_wanted);
  // Room for what finish() writes, made now so that a thread left idle can fault it in while
  // the step runs (StepStats::room): a node entry a node, and a memory entry and two allocation
  // records a node, as most nodes have (finish() grows them where a step has more).
  const size_t n = plan.items.size();
  const size_t reserved = stats.reserved_bytes();
  stats.dev_stats.resize(plan.devices.size());
  if (stats.dev_stats.size() == 1) stats.dev_stats[0].node_stats.reserve(plan.fed_nodes.size() + n);
  stats.reserve(0, n, 2 * n - std::min(2 * n, stats.num_stored_records()));
  stats.base_ns = start.ns;
  stats.base_wall_ns = wall_ns();
  return {stats.reserved_bytes() > reserved, spare_wanted};
}

StepStatsBuilder::Slots StepStatsBuilder::slots(const Executor::Plan& plan, StepStats& stats) {
  if (!records_) {
    records_ = plan.take_prepared_records();
    if (!records_) records_ = make_records(plan.items.size());
  }
  // One description per slot of the plan, in place: a node's outputs are consecutive slots, so
  // its view needs no copy.
  return {records_.get(), stats.outputs_for_step(static_cast<size_t>(plan.num_slots)).data()};
}

void StepStatsBuilder::finish(const Executor::Plan& plan, AllocationRecorder& recorder, const StepClock& clock,
                              StepStats& stats) {
  const int n = static_cast<int>(plan.items.size());
  const NodeRecord* records = records_.get();
  const auto logs = recorder.thread_logs();

  // 1. The nodes that ran, in start order: each thread's list is (a thread runs one node at a
  // time); merge them.
  std::span<const int32_t> order;
  if (logs.size() == 1) {
    order = logs[0]->nodes;
  } else {
    order_.clear();
    std::vector<size_t> bounds{0};
    for (const auto* log : logs) {
      order_.insert(order_.end(), log->nodes.begin(), log->nodes.end());
      bounds.push_back(order_.size());
    }
    auto by_start = [records](int32_t a, int32_t b) { return records[a].start < records[b].start; };
    for (size_t width = 1; width + 1 < bounds.size(); width *= 2)
      for (size_t i = 0; i + width < bounds.size() - 1; i += 2 * width)
        std::inplace_merge(order_.begin() + bounds[i], order_.begin() + bounds[i + width],
                           order_.begin() + bounds[std::min(i + 2 * width, bounds.size() - 1)], by_start);
    order = order_;
  }

  // 2. The step's allocation records grouped per node (a counting sort), written in place: node
  // p's are the StepStats' records [cursor[p - 1], cursor[p]). The threads' logs are stamped in ticks, the
  // other log (frees from elsewhere) in nanoseconds. Usually every event is the kernel
  // allocator's; otherwise source[] keeps the event of each record, for its allocator.
  auto& cursor = cursor_;
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
  const std::span<AllocationRecord> allocation_records = stats.resize_records(num_events);
  sources_.resize(one_allocator ? 0 : num_events);
  const AllocationEvent** source = sources_.data();
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

  // 3. The StepStats. A plan's first traced step may have its names made on another thread
  // meanwhile (Executor::run): what came before does not need them, this waits for them.
  const auto& names = plan.names();
  const auto& fed = plan.fed_names();
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
  uintptr_t memory_end = 0;  // of the memory entries added last (for prefetching)

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
    for (size_t b = 0; b < sizeof(NodeExecStats); b += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(line + b), 1);
    __builtin_prefetch(reinterpret_cast<const char*>(memory_end + 8 * sizeof(AllocatorMemoryUsed)), 1);

    const NodeRecord& r = records[p];
    const int64_t start_ns = clock.ns(r.start);
    const int64_t duration = clock.ns(r.end) - start_ns;

    // Outputs: in place, unless one is missing (the kernel failed): then the others are copied.
    std::span<const NodeOutput> node_outputs = stats.stored_outputs(item.output_base, item.num_outputs);
    if (r.missing_outputs) {
      std::vector<NodeOutput> produced;
      for (const NodeOutput& out : node_outputs)
        if (out.tensor_description.allocation_description.allocator_name.data()) produced.push_back(out);
      node_outputs = stats.store_outputs(produced);  // may move the array: rebases views
    }

    std::span<const AllocatorMemoryUsed> node_memory;
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
      }
      // Beyond the one per node reserved, the array grows (and the views are rebased).
      stats.reserve_more_memory(runs);
      const AllocatorMemoryUsed* first_entry = nullptr;
      for (size_t i = begin; i < end;) {
        const Allocator* a = allocator_of(i);
        int64_t live = 0, total = 0, peak = 0;
        size_t j = i;
        for (; j < end && (runs == 1 || allocator_of(j) == a); ++j) {
          live += recs[j].alloc_bytes;
          total += recs[j].alloc_bytes > 0 ? recs[j].alloc_bytes : 0;
          peak = std::max(peak, live);
        }
        const AllocatorMemoryUsed& entry = stats.add_memory({
            .allocator_name = name_of(a),
            .total_bytes = total,
            .peak_bytes = peak,
            .live_bytes = live,
            .allocation_records = {recs + i, j - i},
            // The kernel's allocator was read when the node finished; another one at its last event.
            .allocator_bytes_in_use =
                a == kernel_allocator ? r.bytes_in_use_at_end : source[j - 1]->allocator_bytes_in_use,
        });
        if (!first_entry) first_entry = &entry;
        i = j;
      }
      node_memory = {first_entry, runs};
      memory_end = reinterpret_cast<uintptr_t>(first_entry + runs);
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
        .memory = node_memory,
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
        .output = stats.stored_outputs(f.output_base, static_cast<size_t>(f.num_outputs)),
        .timeline_label = f.timeline_label,
        .thread_id = caller,
        .referenced_tensor = {},
        .memory_stats = {},
    });
  }
}

}  // namespace stepscope
