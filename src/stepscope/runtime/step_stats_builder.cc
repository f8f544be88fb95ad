#include "stepscope/runtime/step_stats_builder.h"

#include <algorithm>
#include <functional>
#include <span>

#include "stepscope/base/clock.h"
#include "stepscope/base/thread_pool.h"
#include "stepscope/runtime/internal/executor_plan.h"

namespace stepscope {

std::unique_ptr<NodeRecord[]> StepStatsBuilder::make_records(size_t n) {
  return std::unique_ptr<NodeRecord[]>(new NodeRecord[n]);  // default-initialized: not written
}

StepStatsBuilder::Begun StepStatsBuilder::begin(const Executor::Plan& plan, StepStats& stats, StepClock::Point start) {
  bool spare_wanted = false;
  stats.reuse_for_step(&spare_wanted);
  // Room for what the step writes, made now so that a thread left idle can fault it in while
  // the step runs (StepStats::room): a recorded output a slot, and at its end a recorded node
  // and two allocation records a node, as most nodes have (finish() grows them where a step
  // has more).
  const size_t n = plan.items.size();
  const size_t num_slots = static_cast<size_t>(plan.num_slots);
  const size_t reserved = stats.reserved_bytes();
  stats.reserve_recorded(n, num_slots);
  stats.reserve(0, 0, 2 * n - std::min(2 * n, stats.num_stored_records()));
  stats.base_ns = start.ns;
  stats.base_wall_ns = wall_ns();
  return {stats.reserved_bytes() > reserved, spare_wanted};
}

StepStatsBuilder::Slots StepStatsBuilder::slots(const Executor::Plan& plan, StepStats& stats) {
  std::span<const std::byte> new_records;
  if (!records_) {
    records_ = plan.take_prepared_records();
    if (!records_) {
      records_ = make_records(plan.items.size());
      new_records = std::as_bytes(std::span(records_.get(), plan.items.size()));
    }
  }
  // One recorded output per slot of the plan, in place: a node's outputs are consecutive slots,
  // so its output descriptions are made in place on the first read.
  return {records_.get(), stats.outputs_for_step(static_cast<size_t>(plan.num_slots)).data(), new_records};
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
  // allocator's; otherwise sources[] has each record's allocator, its name and figure, taken now
  // while the allocators are sure to be there.
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
  for (int p = 0; p < n; ++p) cursor[p + 1] += cursor[p];
  const size_t num_events = static_cast<size_t>(cursor[n]);
  const std::span<AllocationRecord> allocation_records = stats.resize_records(num_events);
  auto& sources = sources_;
  sources.resize(one_allocator ? 0 : num_events);
  const Allocator* named = nullptr;  // the allocator whose name is in `name`
  std::string_view name;
  auto place = [&](const AllocationRecorder::ThreadLog& log, bool ticks) {
    for (const AllocationEvent& e : log.events) {
      if (static_cast<uint32_t>(e.node) >= static_cast<uint32_t>(n)) continue;
      const int32_t at = cursor[e.node]++;
      allocation_records[at] = {ticks ? clock.ns(e.time_ns) : e.time_ns, e.bytes};
      if (one_allocator) continue;
      if (e.allocator != named) {
        named = e.allocator;
        name = StepStats::intern(e.allocator->name());
      }
      // The kernel's allocator was read when the node finished; another one at its event.
      sources[at] = {e.allocator, name,
                     e.allocator == kernel_allocator ? records[e.node].bytes_in_use_at_end : e.allocator_bytes_in_use};
    }
  };
  for (const auto* log : logs) place(*log, true);
  place(other, false);

  // 3. The nodes as recorded, in start order, times in nanoseconds: the StepStats makes their
  // node entries when they are first read, with the plan's names (which a thread beside a plan's
  // first traced step may still be making: the first read waits for them).
  const std::span<StepStats::RecordedNode> recorded = stats.recorded_for_step(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t p = order[k];
    const NodeRecord& r = records[p];
    recorded[k] = {
        .start_ns = clock.ns(r.start),
        .end_ns = clock.ns(r.end),
        .scheduled_ns = clock.ns(r.scheduled),
        .bytes_in_use_at_end = r.bytes_in_use_at_end,
        .thread_id = r.thread_id,
        .item = p,
        .records_begin = p == 0 ? 0u : static_cast<uint32_t>(cursor[p - 1]),
        .records_end = static_cast<uint32_t>(cursor[p]),
        .missing_outputs = r.missing_outputs != 0,
    };
  }
  // Where the records came from several allocators, the node entries are made at once.
  static const std::string_view kernel_allocator_name = StepStats::intern(kernel_allocator->name());
  stats.set_recorded(plan.names_to_come(), kernel_allocator_name, current_thread_id(), sources);
}

}  // namespace stepscope
