#include "stepscope/runtime/step_stats_builder.h"

#include <algorithm>
#include <functional>
#include <span>

#include "stepscope/base/clock.h"
#include "stepscope/base/thread_pool.h"
#include "stepscope/runtime/internal/executor_plan.h"

namespace stepscope {

// Default-initialized: not written.
TraceScratch::TraceScratch(size_t items, size_t slots)
    : records(new NodeRecord[items]),
      outputs(new StepStats::RecordedOutput[slots]),
      num_items(items),
      num_slots(slots) {
  grouped.resize(2 * items);
}

std::vector<std::span<const std::byte>> TraceScratch::memory() const {
  return {std::as_bytes(std::span(records.get(), num_items)), std::as_bytes(std::span(outputs.get(), num_slots)),
          std::as_bytes(std::span(grouped.data(), grouped.size()))};
}

StepStatsBuilder::Begun StepStatsBuilder::begin(const Executor::Plan& plan, StepStats& stats, StepClock::Point start) {
  bool spare_wanted = false;
  stats.reuse_for_step(&spare_wanted);
  // Room for what the step writes, made now so that a thread left idle can fault it in while
  // the step runs (StepStats::room): the recorded stream its end writes. finish() grows the room
  // where a step needs more.
  const size_t reserved = stats.reserved_bytes();
  stats.reserve_recorded(recorded_room(plan));
  stats.base_ns = start.ns;
  stats.base_wall_ns = wall_ns();
  return {stats.reserved_bytes() > reserved, spare_wanted};
}

size_t StepStatsBuilder::recorded_room(const Executor::Plan& plan) const {
  const size_t n = plan.items.size();
  return last_recorded_bytes_ ? last_recorded_bytes_ + last_recorded_bytes_ / 8
                              : StepStats::recorded_bytes_estimate(n, 2 * n, static_cast<size_t>(plan.num_slots));
}

StepStatsBuilder::Slots StepStatsBuilder::slots(const Executor::Plan& plan) {
  const TraceScratch* new_scratch = nullptr;
  if (!scratch_) {
    scratch_ = plan.take_prepared_scratch();
    if (!scratch_) {
      scratch_ = std::make_unique<TraceScratch>(plan.items.size(), static_cast<size_t>(plan.num_slots));
      new_scratch = scratch_.get();
    }
  }
  return {scratch_->records.get(), scratch_->outputs.get(), new_scratch};
}

void StepStatsBuilder::finish(const Executor::Plan& plan, AllocationRecorder& recorder, const StepClock& clock,
                              StepStats& stats) {
  const int n = static_cast<int>(plan.items.size());
  const NodeRecord* records = scratch_->records.get();
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

  // 2. The step's allocation records grouped per node in start order (a counting sort, into the
  // builder's scratch): the node at position k has the records [cursor[k - 1], cursor[k]). Events of
  // nodes that did not run (none usually) are left out. The threads' logs are stamped in ticks,
  // the other log (frees from elsewhere) in nanoseconds. Usually every event is the kernel
  // allocator's; otherwise sources[] has each record's allocator, its name and figure, taken now
  // while the allocators are sure to be there.
  const size_t num_ran = order.size();
  // position_[p]: where node p is in `order`, if it ran (checked against order: the entries of
  // nodes that did not run are left from earlier steps).
  auto& position = position_;
  if (position.size() < static_cast<size_t>(n)) position.resize(static_cast<size_t>(n));
  for (size_t k = 0; k < num_ran; ++k) position[static_cast<size_t>(order[k])] = static_cast<int32_t>(k);
  auto position_of = [&](int32_t node) -> int32_t {
    if (static_cast<uint32_t>(node) >= static_cast<uint32_t>(n)) return -1;
    const int32_t k = position[static_cast<size_t>(node)];
    return static_cast<size_t>(k) < num_ran && order[static_cast<size_t>(k)] == node ? k : -1;
  };
  auto& cursor = cursor_;
  cursor.assign(num_ran + 1, 0);
  const AllocationRecorder::ThreadLog& other = recorder.other_log();
  const Allocator* kernel_allocator = cpu_allocator();
  bool one_allocator = true;
  auto count = [&](const AllocationRecorder::ThreadLog& log) {
    for (const AllocationEvent& e : log.events) {
      const int32_t k = position_of(e.node);
      if (k < 0) continue;
      cursor[static_cast<size_t>(k) + 1]++;
      one_allocator &= e.allocator == kernel_allocator;
    }
  };
  for (const auto* log : logs) count(*log);
  count(other);
  for (size_t k = 0; k < num_ran; ++k) cursor[k + 1] += cursor[k];
  const size_t num_events = static_cast<size_t>(cursor[num_ran]);
  AllocationRecord* grouped = scratch_->grouped.data();
  if (num_events > scratch_->grouped.size()) {
    more_grouped_.resize(num_events);
    grouped = more_grouped_.data();
  }
  auto& sources = sources_;
  sources.resize(one_allocator ? 0 : num_events);
  const Allocator* named = nullptr;  // the allocator whose name is in `name`
  std::string_view name;
  auto place = [&](const AllocationRecorder::ThreadLog& log, bool ticks) {
    for (const AllocationEvent& e : log.events) {
      const int32_t k = position_of(e.node);
      if (k < 0) continue;
      const int32_t at = cursor[static_cast<size_t>(k)]++;
      grouped[static_cast<size_t>(at)] = {ticks ? clock.ns(e.time_ns) : e.time_ns, e.bytes};
      if (one_allocator) continue;
      if (e.allocator != named) {
        named = e.allocator;
        name = StepStats::intern(e.allocator->name());
      }
      // The kernel's allocator was read when the node finished; another one at its event.
      sources[static_cast<size_t>(at)] = {
          e.allocator, name,
          e.allocator == kernel_allocator ? records[e.node].bytes_in_use_at_end : e.allocator_bytes_in_use};
    }
  };
  for (const auto* log : logs) place(*log, true);
  place(other, false);

  // 3. The nodes as recorded, in start order, times in nanoseconds, each with its records: the
  // StepStats makes their node entries when they are first read, with the plan's names (which a
  // thread beside a plan's first traced step may still be making: the first read waits for them).
  StepStats::RecordedWriter writer = stats.write_recorded(static_cast<size_t>(plan.num_slots));
  const StepStats::RecordedOutput* outputs = scratch_->outputs.get();
  for (const auto& fed : plan.fed_nodes)
    writer.add_fed(outputs + fed.first_slot, static_cast<size_t>(fed.num_slots));
  for (size_t k = 0; k < num_ran; ++k) {
    const Executor::Plan::Item& item = plan.items[static_cast<size_t>(order[k])];
    const NodeRecord& r = records[order[k]];
    const size_t begin = k == 0 ? 0 : static_cast<size_t>(cursor[k - 1]);
    writer.add({.item = static_cast<uint32_t>(order[k]),
                .missing_outputs = r.missing_outputs != 0,
                .thread_id = r.thread_id,
                .start_ns = clock.ns(r.start),
                .end_ns = clock.ns(r.end),
                .scheduled_ns = clock.ns(r.scheduled),
                .bytes_in_use_at_end = r.bytes_in_use_at_end},
               grouped + begin, static_cast<size_t>(cursor[k]) - begin, outputs + item.output_base,
               static_cast<size_t>(item.num_outputs));
  }
  writer.close();
  last_recorded_bytes_ = stats.num_recorded_bytes();
  // Where the records came from several allocators, the node entries are made at once.
  static const std::string_view kernel_allocator_name = StepStats::intern(kernel_allocator->name());
  stats.set_recorded(plan.names_to_come(), kernel_allocator_name, current_thread_id(), sources);
}

}  // namespace stepscope
