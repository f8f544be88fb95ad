#include "stepscope/runtime/step_stats.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "stepscope/base/huge_pages.h"

namespace stepscope {

namespace {

// The view of `span` re-pointed from [old_data, old_data + old_size) to the same place in
// new_data; views of other memory are left alone.
template <typename T>
void rebase_span(std::span<const T>& span, const T* old_data, size_t old_size, const T* new_data) {
  if (span.empty()) return;
  std::less<const T*> less;
  if (less(span.data(), old_data) || !less(span.data(), old_data + old_size)) return;
  span = {new_data + (span.data() - old_data), span.size()};
}

}  // namespace

template <typename T, typename A>
void StepStats::rebase(const std::vector<T, A>& array, const T* old_data, size_t old_size) {
  const T* new_data = array.data();
  if (old_data == new_data || old_size == 0) return;
  if constexpr (std::is_same_v<T, AllocationRecord>) {
    for (AllocatorMemoryUsed& m : memory_) rebase_span(m.allocation_records, old_data, old_size, new_data);
    return;
  }
  for (DeviceStepStats& dev : dev_stats_) {
    for (NodeExecStats& ns : dev.node_stats) {
      if constexpr (std::is_same_v<T, NodeOutput>) rebase_span(ns.output, old_data, old_size, new_data);
      if constexpr (std::is_same_v<T, AllocatorMemoryUsed>) rebase_span(ns.memory, old_data, old_size, new_data);
      if constexpr (std::is_same_v<T, AllocationDescription>)
        rebase_span(ns.referenced_tensor, old_data, old_size, new_data);
      if constexpr (std::is_same_v<T, int64_t>)
        rebase_span(ns.memory_stats.persistent_tensor_alloc_ids, old_data, old_size, new_data);
    }
  }
}

template <typename T, typename A>
std::span<T> StepStats::add(std::vector<T, A>& array, size_t n) {
  const size_t size = array.size();
  if (size + n > array.capacity()) {
    const T* old_data = array.data();
    array.reserve(std::max(size + n, 2 * array.capacity()));
    rebase(array, old_data, size);
  }
  array.resize(size + n);
  return {array.data() + size, n};
}

void StepStats::rebase_all(const StepStats& from) {
  rebase(outputs_, from.outputs_.data(), from.outputs_.size());
  rebase(records_, from.records_.data(), from.records_.size());  // in our memory_ entries
  rebase(memory_, from.memory_.data(), from.memory_.size());
  rebase(referenced_, from.referenced_.data(), from.referenced_.size());
  rebase(alloc_ids_, from.alloc_ids_.data(), from.alloc_ids_.size());
}

namespace {
std::mutex build_mutex;  // node entries are made once, whichever reader asks first
}  // namespace

StepStats::StepStats(const StepStats& other) { *this = other; }

// A recorded step is copied as it was recorded (6-33 bytes a node, not ~420; as a flight
// recorder copies every step into its ring), to be made node entries in the copy if it is read:
// also once read, unless through the non-const dev_stats() (its entries may have changed).
StepStats& StepStats::operator=(const StepStats& other) {
  if (this == &other) return *this;
  clear();
  base_ns = other.base_ns;
  base_wall_ns = other.base_wall_ns;
  // A reader may be making other's node entries meanwhile (which changes its arrays, not the
  // recorded stream or its names).
  std::unique_lock<std::mutex> lock(build_mutex, std::defer_lock);
  if (other.unbuilt_.load(std::memory_order_acquire)) lock.lock();
  if (other.remakeable_.load(std::memory_order_relaxed)) {
    outputs_apart_ = other.outputs_apart_;
    recorded_ = other.recorded_;
    num_recorded_nodes_ = other.num_recorded_nodes_;
    num_recorded_records_ = other.num_recorded_records_;
    num_recorded_groups_ = other.num_recorded_groups_;
    num_recorded_slots_ = other.num_recorded_slots_;
    names_ = other.names_;
    kernel_allocator_name_ = other.kernel_allocator_name_;
    caller_thread_ = other.caller_thread_;
    remakeable_.store(true, std::memory_order_relaxed);
    unbuilt_.store(true, std::memory_order_release);
    return *this;
  }
  dev_stats_ = other.dev_stats_;
  outputs_ = other.outputs_;
  memory_ = other.memory_;
  records_ = other.records_;
  referenced_ = other.referenced_;
  alloc_ids_ = other.alloc_ids_;
  rebase_all(other);
  return *this;
}

size_t StepStats::held_bytes() const {
  std::unique_lock<std::mutex> lock(build_mutex, std::defer_lock);
  if (unbuilt_.load(std::memory_order_acquire)) lock.lock();
  // Unread, it holds what the step recorded (the arrays its entries will be made in keep the
  // sizes of an earlier step's: see reuse_for_step).
  if (unbuilt_.load(std::memory_order_relaxed))
    return recorded_.size() + outputs_apart_.size() * sizeof(OutputApart);
  size_t bytes = outputs_.size() * sizeof(NodeOutput) + memory_.size() * sizeof(AllocatorMemoryUsed) +
                 records_.size() * sizeof(AllocationRecord) + referenced_.size() * sizeof(AllocationDescription) +
                 alloc_ids_.size() * sizeof(int64_t);
  for (const auto& dev : dev_stats_) bytes += dev.node_stats.size() * sizeof(NodeExecStats);
  return bytes;
}

namespace {

// The spare arrays (see ~StepStats), at most one set and kSpareLimit bytes: a step of a million
// nodes holds ~400 MB of them, which a fresh RunMetadata would otherwise fault in again (on this
// workplace's VMs, ~1 µs a node each time).
// A set made ahead (StepStats::prepare_spare) says what for; a set a StepStats left, nothing.
struct Spare {
  StepStats::OutputArray outputs;
  std::vector<AllocatorMemoryUsed> memory;
  std::vector<AllocationRecord> records;
  std::vector<std::vector<NodeExecStats>> node_stats;
  StepStats::RecordedBytes recorded;
  std::optional<StepStats::SpareFor> made_for;
};
constexpr size_t kSpareLimit = size_t{1} << 30;
constexpr size_t kSpareMinimum = size_t{64} << 10;  // smaller ones are cheap to make anew
std::mutex spare_mutex;
Spare& spare() {
  static auto* s = new Spare();  // never destroyed: StepStats may die during static destruction
  return *s;
}
int64_t fresh_steps = 0;  // fresh StepStats that traced a step (under spare_mutex)

StepStats::ArraySizes sizes_of(const Spare& s) {
  StepStats::ArraySizes sizes{.outputs = s.outputs.capacity(),
                              .memory = s.memory.capacity(),
                              .records = s.records.capacity(),
                              .node_stats = {},
                              .recorded_bytes = s.recorded.capacity()};
  for (const auto& nodes : s.node_stats) sizes.node_stats.push_back(nodes.capacity());
  return sizes;
}
// Whether arrays of sizes `have` hold a step of sizes `need`.
bool holds(const StepStats::ArraySizes& have, const StepStats::ArraySizes& need) {
  if (have.outputs < need.outputs || have.memory < need.memory || have.records < need.records ||
      have.recorded_bytes < need.recorded_bytes)
    return false;
  for (size_t d = 0; d < need.node_stats.size(); ++d)
    if (need.node_stats[d] > (d < have.node_stats.size() ? have.node_stats[d] : 0)) return false;
  return true;
}

}  // namespace

StepStats::~StepStats() { give_arrays_away(); }

StepStats::StepStats(StepStats&& other) noexcept
    : base_ns(other.base_ns),
      base_wall_ns(other.base_wall_ns),
      dev_stats_(std::move(other.dev_stats_)),
      unbuilt_(other.unbuilt_.exchange(false)),
      remakeable_(other.remakeable_.exchange(false, std::memory_order_relaxed)),
      recorded_(std::move(other.recorded_)),
      num_recorded_nodes_(other.num_recorded_nodes_),
      num_recorded_records_(other.num_recorded_records_),
      num_recorded_groups_(other.num_recorded_groups_),
      num_recorded_slots_(other.num_recorded_slots_),
      names_(std::move(other.names_)),
      kernel_allocator_name_(other.kernel_allocator_name_),
      caller_thread_(other.caller_thread_),
      outputs_apart_(std::move(other.outputs_apart_)),
      outputs_(std::move(other.outputs_)),
      memory_(std::move(other.memory_)),
      records_(std::move(other.records_)),
      referenced_(std::move(other.referenced_)),
      alloc_ids_(std::move(other.alloc_ids_)) {}

StepStats& StepStats::operator=(StepStats&& other) noexcept {
  if (this != &other) {
    give_arrays_away();
    dev_stats_ = std::move(other.dev_stats_);
    unbuilt_.store(other.unbuilt_.exchange(false), std::memory_order_relaxed);
    remakeable_.store(other.remakeable_.exchange(false, std::memory_order_relaxed), std::memory_order_relaxed);
    recorded_ = std::move(other.recorded_);
    num_recorded_nodes_ = other.num_recorded_nodes_;
    num_recorded_records_ = other.num_recorded_records_;
    num_recorded_groups_ = other.num_recorded_groups_;
    num_recorded_slots_ = other.num_recorded_slots_;
    names_ = std::move(other.names_);
    kernel_allocator_name_ = other.kernel_allocator_name_;
    caller_thread_ = other.caller_thread_;
    base_ns = other.base_ns;
    base_wall_ns = other.base_wall_ns;
    outputs_apart_ = std::move(other.outputs_apart_);
    outputs_ = std::move(other.outputs_);
    memory_ = std::move(other.memory_);
    records_ = std::move(other.records_);
    referenced_ = std::move(other.referenced_);
    alloc_ids_ = std::move(other.alloc_ids_);
  }
  return *this;
}

void StepStats::give_arrays_away() noexcept {
  const size_t bytes = reserved_bytes();
  if (bytes < kSpareMinimum || bytes > kSpareLimit) return;
  std::unique_lock<std::mutex> lock(spare_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  Spare& s = spare();
  // A set made ahead gives way to one as big that a StepStats left: a caller who made a new
  // RunMetadata a step and kept them has stopped keeping them, so none is made again.
  const bool own_bigger = s.recorded.capacity() < recorded_.capacity() ||
                         s.outputs.capacity() < outputs_.capacity() || s.memory.capacity() < memory_.capacity();
  if (!own_bigger && !(s.made_for && holds(reserved_sizes(), sizes_of(s)))) return;
  s.made_for.reset();
  // Sizes are kept (the items are trivially destructible): the next step resizes to its own,
  // which then initializes only what grows.
  std::swap(s.outputs, outputs_);
  std::swap(s.memory, memory_);
  std::swap(s.records, records_);
  std::swap(s.recorded, recorded_);
  s.node_stats.clear();
  for (auto& dev : dev_stats_) {
    dev.node_stats.clear();
    s.node_stats.push_back(std::move(dev.node_stats));
  }
}

bool StepStats::take_spare_arrays() {
  std::lock_guard<std::mutex> lock(spare_mutex);
  Spare& s = spare();
  const bool first = fresh_steps++ == 0;
  if (s.recorded.capacity() == 0 && s.outputs.capacity() == 0) return !first;
  const bool wanted = s.made_for == SpareFor::kKeptSteps;
  if (outputs_.capacity() < s.outputs.capacity()) std::swap(outputs_, s.outputs);
  if (memory_.capacity() < s.memory.capacity()) std::swap(memory_, s.memory);
  if (records_.capacity() < s.records.capacity()) std::swap(records_, s.records);
  if (recorded_.capacity() < s.recorded.capacity()) std::swap(recorded_, s.recorded);
  for (size_t d = 0; d < s.node_stats.size(); ++d) {
    if (d == dev_stats_.size()) dev_stats_.emplace_back();
    if (dev_stats_[d].node_stats.capacity() < s.node_stats[d].capacity())
      std::swap(dev_stats_[d].node_stats, s.node_stats[d]);
  }
  s = Spare();
  return wanted;
}

size_t StepStats::ArraySizes::bytes() const {
  size_t total = outputs * sizeof(NodeOutput) + memory * sizeof(AllocatorMemoryUsed) +
                 records * sizeof(AllocationRecord) + recorded_bytes +
0;
  for (size_t n : node_stats) total += n * sizeof(NodeExecStats);
  return total;
}

StepStats::ArraySizes StepStats::reserved_sizes() const {
  ArraySizes sizes{.outputs = outputs_.capacity(),
                   .memory = memory_.capacity(),
                   .records = records_.capacity(),
                   .node_stats = {},
                   .recorded_bytes = recorded_.capacity()};
  for (const auto& dev : dev_stats_) sizes.node_stats.push_back(dev.node_stats.capacity());
  return sizes;
}

bool StepStats::prepare_spare(const ArraySizes& sizes, SpareFor why, const std::atomic<bool>* stop) {
  const size_t bytes = sizes.bytes();
  if (bytes < kSpareMinimum || bytes > kSpareLimit) return false;
  {
    std::lock_guard<std::mutex> lock(spare_mutex);
    if (holds(sizes_of(spare()), sizes)) return false;
  }
  Spare made;
  made.outputs.reserve(sizes.outputs);
  made.memory.reserve(sizes.memory);
  made.records.reserve(sizes.records);
  made.recorded.reserve(sizes.recorded_bytes);
  for (size_t n : sizes.node_stats) made.node_stats.emplace_back().reserve(n);
  made.made_for = why;
  // Mapped in the order a step writes them (its recorded stream at its end, the node entries, output descriptions, memory entries and
  // allocation records when they are first read), then
  // made the spare set: a step finds it whole or not at all. (One that took it half mapped
  // would fault in the same pages as this thread, each waiting on the other: measured, back to
  // back steps of 10^4 nodes then took 5 ms where a step writing new memory took 3.7.)
  auto map = [&](const auto& array) {
    return prefault_pages_until(array.data(), array.capacity() * sizeof(array[0]), stop);
  };
  if (!map(made.recorded)) return false;
  for (const auto& nodes : made.node_stats)
    if (!map(nodes)) return false;
  if (!map(made.outputs) || !map(made.memory) || !map(made.records)) return false;
  std::lock_guard<std::mutex> lock(spare_mutex);
  Spare& s = spare();
  if (!holds(sizes_of(s), sizes)) std::swap(s, made);  // unless another thread's is here first
  return true;
}

void StepStats::clear() {
  dev_stats_.clear();
  unbuilt_.store(false, std::memory_order_relaxed);
  remakeable_.store(false, std::memory_order_relaxed);
  recorded_.clear();
  num_recorded_nodes_ = num_recorded_records_ = num_recorded_groups_ = num_recorded_slots_ = 0;
  names_.reset();
  base_ns = base_wall_ns = 0;
  outputs_apart_.clear();
  outputs_.clear();
  memory_.clear();
  records_.clear();
  referenced_.clear();
  alloc_ids_.clear();
}

void StepStats::drop_node_entries() {
  if (!remakeable_.load(std::memory_order_relaxed) || unbuilt_.load(std::memory_order_acquire)) return;
  // Freed, not kept (as clear() keeps them): the point is to hold less. (`v = {}` would keep
  // the capacity: it assigns an empty list.)
  auto free = [](auto& array) { std::remove_reference_t<decltype(array)>().swap(array); };
  free(dev_stats_);
  free(outputs_);
  free(memory_);
  free(records_);
  free(referenced_);
  free(alloc_ids_);
  unbuilt_.store(true, std::memory_order_release);
}

void StepStats::reuse_for_step(bool* spare_wanted) {
  // A fresh StepStats (a new RunMetadata per step) takes the spare arrays.
  const bool wanted = recorded_.capacity() == 0 && outputs_.capacity() == 0 && take_spare_arrays();
  if (spare_wanted) *spare_wanted = wanted;
  std::vector<DeviceStepStats> kept = std::move(dev_stats_);  // with their memory
  OutputArray outputs = std::move(outputs_);
  std::vector<AllocationRecord> records = std::move(records_);
  RecordedBytes recorded = std::move(recorded_);
  clear();
  dev_stats_ = std::move(kept);
  for (auto& dev : dev_stats_) dev.node_stats.clear();  // no views into the arrays left
  // Their sizes too: the first read's resize of the records initializes only what grows (the
  // arrays a step writes, nothing: it writes every item).
  outputs_ = std::move(outputs);
  records_ = std::move(records);
  recorded_ = std::move(recorded);
}

namespace {
std::mutex outputs_apart_mutex;  // rare: sizes of 4 GiB or more, or fed tensors (a few a step)
}  // namespace

void StepStats::keep_output_apart(RecordedOutput& out, int32_t slot, int64_t requested_bytes,
                                  int64_t allocated_bytes, const Shape& shape, std::string_view allocator) {
  std::lock_guard<std::mutex> lock(outputs_apart_mutex);
  out.flags |= RecordedOutput::kKeptApart;
  out.allocator = 0;
  out.requested_bytes = out.allocated_bytes = 0;  // kept apart with the rest
  out.shape = static_cast<uint32_t>(outputs_apart_.size());
  outputs_apart_.push_back({slot, requested_bytes, allocated_bytes, intern(allocator), shape});
}

void StepStats::record_output(RecordedOutput& out, const NodeOutput& output, bool slot_is_place) {
  const TensorDescription& td = output.tensor_description;
  const AllocationDescription& a = td.allocation_description;
  out.ptr = a.ptr;
  out.allocation_id = a.allocation_id;
  out.dtype = td.dtype;
  out.flags = a.has_single_reference ? RecordedOutput::kSingleReference : 0;
  const InternedShape* shape = intern_shape(td.shape);
  const uint16_t allocator = allocator_index(a.allocator_name);
  if (slot_is_place && shape && allocator && a.requested_bytes >= 0 && a.requested_bytes <= UINT32_MAX &&
      a.allocated_bytes >= 0 && a.allocated_bytes <= UINT32_MAX) {
    out.requested_bytes = static_cast<uint32_t>(a.requested_bytes);
    out.allocated_bytes = static_cast<uint32_t>(a.allocated_bytes);
    out.shape = shape->index;
    out.allocator = allocator;
    return;
  }
  keep_output_apart(out, output.slot, a.requested_bytes, a.allocated_bytes, td.shape, a.allocator_name);
}

std::span<const NodeOutput> StepStats::describe_outputs(RecordedReader& reader, size_t first, size_t n) {
  for (size_t i = first; i < first + n; ++i) {
    RecordedOutput r;
    reader.output(r);
    NodeOutput& out = outputs_[i];
    if (!r.allocator && !r.kept_apart()) {  // not produced: nothing else of it was written
      out = NodeOutput{};
      continue;
    }
    TensorDescription& td = out.tensor_description;
    td.dtype = r.dtype;
    AllocationDescription& a = td.allocation_description;
    a.allocation_id = r.allocation_id;
    a.has_single_reference = r.has_single_reference();
    a.ptr = r.ptr;
    if (r.kept_apart()) {
      const OutputApart& apart = outputs_apart_[r.shape];
      out.slot = apart.slot;
      td.shape = apart.shape;
      a.requested_bytes = apart.requested_bytes;
      a.allocated_bytes = apart.allocated_bytes;
      a.allocator_name = apart.allocator;
    } else {
      out.slot = static_cast<int32_t>(i - first);
      td.shape = interned_shape(r.shape);
      a.requested_bytes = r.requested_bytes;
      a.allocated_bytes = r.allocated_bytes;
      a.allocator_name = allocator_name(r.allocator);
    }
  }
  return stored_outputs(first, n);
}

size_t StepStats::reserved_bytes() const {
  size_t bytes = outputs_.capacity() * sizeof(NodeOutput) +
                 memory_.capacity() * sizeof(AllocatorMemoryUsed) + records_.capacity() * sizeof(AllocationRecord) +
                 recorded_.capacity();
  for (const auto& dev : dev_stats_) bytes += dev.node_stats.capacity() * sizeof(NodeExecStats);
  return bytes;
}

std::span<const std::byte> StepStats::room() const {
  return std::as_bytes(std::span(recorded_.data() + recorded_.size(), recorded_.capacity() - recorded_.size()));
}

std::span<NodeOutput> StepStats::add_outputs(size_t n) {
  const auto out = add(outputs_, n);
  std::fill(out.begin(), out.end(), NodeOutput{});  // growing the array wrote nothing
  return out;
}
std::span<AllocationRecord> StepStats::add_records(size_t n) { return add(records_, n); }

void StepStats::reserve(size_t outputs, size_t memory, size_t records) {
  auto grow = [this](auto& array, size_t n) {
    if (array.size() + n <= array.capacity()) return;
    const auto* old_data = array.data();
    array.reserve(array.size() + n);
    rebase(array, old_data, array.size());
  };
  grow(outputs_, outputs);
  grow(memory_, memory);
  grow(records_, records);
}

std::span<const NodeOutput> StepStats::store_outputs(std::span<const NodeOutput> outputs) {
  auto out = add(outputs_, outputs.size());
  std::copy(outputs.begin(), outputs.end(), out.begin());
  return out;
}

std::span<const AllocationRecord> StepStats::store_records(std::span<const AllocationRecord> records) {
  auto out = add(records_, records.size());
  std::copy(records.begin(), records.end(), out.begin());
  return out;
}

std::span<const AllocationDescription> StepStats::store_referenced(std::span<const AllocationDescription> tensors) {
  auto out = add(referenced_, tensors.size());
  std::copy(tensors.begin(), tensors.end(), out.begin());
  return out;
}

std::span<const int64_t> StepStats::store_alloc_ids(std::span<const int64_t> ids) {
  auto out = add(alloc_ids_, ids.size());
  std::copy(ids.begin(), ids.end(), out.begin());
  return out;
}

std::span<const AllocatorMemoryUsed> StepStats::store_memory(std::span<const AllocatorMemoryUsed> memory) {
  // Records already stored here are found by offset, since making room may move them.
  std::vector<ptrdiff_t> offset(memory.size(), -1);
  size_t extra = 0;
  std::less<const AllocationRecord*> less;
  for (size_t i = 0; i < memory.size(); ++i) {
    const auto& r = memory[i].allocation_records;
    if (!r.empty() && !less(r.data(), records_.data()) && less(r.data(), records_.data() + records_.size()))
      offset[i] = r.data() - records_.data();
    else
      extra += r.size();
  }
  reserve(0, memory.size(), extra);
  auto out = add(memory_, memory.size());
  for (size_t i = 0; i < memory.size(); ++i) {
    out[i] = memory[i];
    const size_t n = memory[i].allocation_records.size();
    out[i].allocation_records = offset[i] >= 0 ? std::span<const AllocationRecord>(records_.data() + offset[i], n)
                                               : store_records(memory[i].allocation_records);
  }
  return out;
}

void StepStats::reserve_recorded(size_t recorded_bytes) {
  if (recorded_.capacity() < recorded_bytes) recorded_.reserve(recorded_bytes);
}

StepStats::RecordedWriter::RecordedWriter(StepStats& stats, size_t num_slots)
    : stats_(&stats), num_slots_(num_slots), last_start_(stats.base_ns) {
  RecordedBytes& bytes = stats.recorded_;
  bytes.resize(bytes.capacity());  // writes nothing (UninitializedAllocator)
  at_ = bytes.data();
  end_ = at_ + bytes.size();
}

void StepStats::RecordedWriter::grow(size_t bound) {
  RecordedBytes& bytes = stats_->recorded_;
  const size_t used = static_cast<size_t>(at_ - bytes.data());
  bytes.resize(used);  // only what was written is copied
  bytes.reserve(std::max(2 * bytes.capacity(), used + bound));
  bytes.resize(bytes.capacity());
  at_ = bytes.data() + used;
  end_ = bytes.data() + bytes.size();
}

void StepStats::RecordedWriter::close() {
  RecordedBytes& bytes = stats_->recorded_;
  bytes.resize(static_cast<size_t>(at_ - bytes.data()));
  stats_->num_recorded_nodes_ = nodes_;
  stats_->num_recorded_records_ = records_;
  stats_->num_recorded_groups_ = groups_;
  stats_->num_recorded_slots_ = num_slots_;
}

StepStats::RecordedReader::RecordedReader(const StepStats& stats)
    : at_(stats.recorded_.data()), end_(at_ + stats.recorded_.size()), start_(stats.base_ns) {}

bool StepStats::RecordedReader::next(RecordedNode& node, size_t& num_records, size_t& num_outputs) {
  if (at_ == end_) return false;
  const uint8_t head = head_ = *at_++;
  item_ += (head & RecordedWriter::kNextItem) ? 1 : static_cast<uint32_t>(unzigzag(get()));
  start_ = static_cast<int64_t>(static_cast<uint64_t>(start_) + get());
  const uint64_t duration = get();
  const uint64_t waited = get();
  if (!(head & RecordedWriter::kSameThread)) thread_ += static_cast<uint32_t>(unzigzag(get()));
  if (!(head & RecordedWriter::kSameInUse))
    in_use_ = static_cast<int64_t>(static_cast<uint64_t>(in_use_) + unzigzag(get()));
  if (!(head & RecordedWriter::kSameCounts)) {
    num_records_ = static_cast<size_t>(get());
    num_outputs_ = static_cast<size_t>(get());
  }
  num_records = num_records_;
  num_outputs = num_outputs_;
  expected_bytes_ = static_cast<uint64_t>(last_first_bytes_);
  first_record_ = true;
  node = {.item = item_,
          .missing_outputs = (head & RecordedWriter::kMissing) != 0,
          .thread_id = thread_,
          .start_ns = start_,
          .end_ns = static_cast<int64_t>(static_cast<uint64_t>(start_) + duration),
          .scheduled_ns = static_cast<int64_t>(static_cast<uint64_t>(start_) - waited),
          .bytes_in_use_at_end = in_use_};
  return true;
}

void StepStats::RecordedReader::output(RecordedOutput& out) {
  const uint64_t head = (head_ & RecordedWriter::kOutputsPredicted) ? RecordedWriter::kOutputPredicted : get();
  if (head == RecordedWriter::kNotProduced) {
    out = {};
    return;
  }
  uint64_t ptr = 0;
  int64_t id = 0;
  if (!(head & 1)) {  // of the output before's description
    ptr = (head & RecordedWriter::kPointerTwoBack) ? pointer_two_back_ : last_.ptr + unzigzag(get());
    id = static_cast<int64_t>(static_cast<uint64_t>(last_.allocation_id) +
                              ((head & RecordedWriter::kIdNext) ? 1 : unzigzag(get())));
  } else {
    ptr = last_.ptr + unzigzag(get());
    id = static_cast<int64_t>(static_cast<uint64_t>(last_.allocation_id) + unzigzag(get()));
    last_.dtype = static_cast<DType>(head >> 3);
    last_.flags = static_cast<uint8_t>((head >> 1) & 3);
    const uint64_t requested = get();
    last_.requested_bytes = static_cast<uint32_t>(requested);
    last_.allocated_bytes = static_cast<uint32_t>(requested + unzigzag(get()));
    last_.shape = static_cast<uint32_t>(last_.shape + unzigzag(get()));
    last_.allocator = static_cast<uint16_t>(get());
  }
  pointer_two_back_ = last_.ptr;
  last_.ptr = ptr;
  last_.allocation_id = id;
  out = last_;
}

void StepStats::PlanNames::wait_until_made() const {
  for (int s = state.load(std::memory_order_acquire); s != kMade; s = state.load(std::memory_order_acquire)) {
    if (s == kFailed)
      throw std::runtime_error(
          "a traced step's node entries cannot be made: making its plan's names failed (out of memory?); the "
          "plan makes them again at its next traced step");
    state.wait(s, std::memory_order_acquire);
  }
}

void StepStats::set_recorded(std::shared_ptr<const PlanNames> names, std::string_view kernel_allocator_name,
                             uint32_t caller_thread, std::span<RecordSource> sources) {
  names_ = std::move(names);
  kernel_allocator_name_ = kernel_allocator_name;
  caller_thread_ = caller_thread;
  if (sources.empty()) {
    remakeable_.store(true, std::memory_order_relaxed);
    unbuilt_.store(true, std::memory_order_release);
    return;
  }
  names_->wait_until_made();
  make_node_entries(sources);
}

void StepStats::build_nodes() const {
  std::unique_lock<std::mutex> lock(build_mutex);
  if (!unbuilt_.load(std::memory_order_relaxed)) return;  // another reader made them
  if (!names_->made()) {
    // Waited for without the lock, which other steps' first reads take.
    const std::shared_ptr<const PlanNames> names = names_;
    lock.unlock();
    names->wait_until_made();
    lock.lock();
    if (!unbuilt_.load(std::memory_order_relaxed)) return;
  }
  // Changes only mutable members: the node lists and the arrays their entries view.
  const_cast<StepStats*>(this)->make_node_entries({});
  unbuilt_.store(false, std::memory_order_release);
}

// Per device, the fed nodes first (they start with the step: what TensorFlow records as the
// _Arg/_Recv nodes of the feeds, so that the fed tensors' shapes are in the step; nothing ran
// and nothing was allocated), then the recorded nodes in start order, with their interned
// names, outputs, and memory figures from their allocation records. No lock, no map, no string
// built, no allocation once the arrays have grown to the step's size.
void StepStats::make_node_entries(std::span<RecordSource> sources) {
  const PlanNames& names = *names_;
  // The output descriptions, made a node's at a time (only the slots of nodes that ran, and the
  // fed ones, were written); no node entry views the array yet.
  if (outputs_.capacity() < num_recorded_slots_) {
    outputs_.clear();
    outputs_.reserve(num_recorded_slots_);
  }
  outputs_.resize(num_recorded_slots_);
  // The allocation records, in the start order of their nodes (read with them, below).
  records_.resize(num_recorded_records_);
  auto& devices = dev_stats_;
  devices.resize(names.devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    devices[d].device = names.devices[d];
    devices[d].node_stats.clear();
  }
  if (devices.size() == 1) {
    devices[0].node_stats.reserve(names.fed.size() + num_recorded_nodes_);
  } else {
    std::vector<size_t> per_device(devices.size());
    for (const auto& f : names.fed) per_device[static_cast<size_t>(f.device)]++;
    RecordedReader reader(*this);
    RecordedOutput skipped;
    for (size_t f = 0; f < names.fed.size(); ++f)
      for (size_t i = reader.next_fed(); i > 0; --i) reader.output(skipped);
    RecordedNode r;
    for (size_t num_records, num_outputs; reader.next(r, num_records, num_outputs);) {
      per_device[static_cast<size_t>(names.items[r.item].device)]++;
      for (size_t i = 0; i < num_records; ++i) (void)reader.record();
      for (size_t i = 0; i < num_outputs; ++i) reader.output(skipped);
    }
    for (size_t d = 0; d < devices.size(); ++d) devices[d].node_stats.reserve(per_device[d]);
  }
  // One memory entry per node with records (more only for nodes using several allocators).
  reserve(0, num_recorded_groups_, 0);

  RecordedReader reader(*this);
  for (const ItemNames& f : names.fed) {
    const size_t num_outputs = reader.next_fed();
    devices[static_cast<size_t>(f.device)].node_stats.push_back({
        .node_name = f.name,
        .op_type = f.op_type,
        .node_id = f.node_id,
        .scheduled_ns = base_ns,
        .all_start_ns = base_ns,
        .op_start_rel_ns = 0,
        .op_end_rel_ns = 0,
        .all_end_rel_ns = 0,
        .memory = {},
        .output = describe_outputs(reader, static_cast<size_t>(f.output_base), num_outputs),
        .timeline_label = f.timeline_label,
        .thread_id = caller_thread_,
        .referenced_tensor = {},
        .memory_stats = {},
    });
  }

  // Usually every record is the kernels' allocator's; otherwise sources[] has each one's.
  const bool one_allocator = sources.empty();
  auto allocator_of = [&](size_t record) { return one_allocator ? nullptr : sources[record].allocator; };
  uintptr_t memory_end = 0;  // of the memory entries added last (for prefetching)
  RecordedNode r;
  size_t begin = 0;  // the node's first allocation record
  for (size_t num_records, num_outputs; reader.next(r, num_records, num_outputs); begin += num_records) {
    const size_t end = begin + num_records;
    for (size_t i = begin; i < end; ++i) records_[i] = reader.record();
    // The arrays written here are too big to stay in cache: ask for the lines a few nodes ahead.
    const ItemNames& item = names.items[r.item];
    const auto& ahead = devices[static_cast<size_t>(item.device)].node_stats;
    // Addresses computed as integers: a vector with nothing reserved yet has a null data(),
    // and pointer arithmetic on null is undefined (prefetching any address is harmless).
    const uintptr_t line = reinterpret_cast<uintptr_t>(ahead.data()) + (ahead.size() + 6) * sizeof(ahead[0]);
    for (size_t b = 0; b < sizeof(NodeExecStats); b += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(line + b), 1);
    __builtin_prefetch(reinterpret_cast<const char*>(memory_end + 8 * sizeof(AllocatorMemoryUsed)), 1);

    // Outputs: in place, unless one is missing (the kernel failed): then the others are copied.
    std::span<const NodeOutput> node_outputs = describe_outputs(reader, static_cast<size_t>(item.output_base), num_outputs);
    if (r.missing_outputs) {
      std::vector<NodeOutput> produced;
      for (const NodeOutput& out : node_outputs)
        if (out.tensor_description.allocation_description.allocator_name.data()) produced.push_back(out);
      node_outputs = store_outputs(produced);  // may move the array: rebases views
    }

    std::span<const AllocatorMemoryUsed> node_memory;
    if (begin < end) {
      AllocationRecord* recs = records_.data();
      // Usually one allocator and in time order already (one thread's log); otherwise (frees
      // made on other threads, several allocators) sorted by allocator, then time.
      bool simple = true;
      for (size_t i = begin + 1; i < end; ++i) simple &= recs[i - 1].alloc_ns <= recs[i].alloc_ns;
      if (!one_allocator)
        for (size_t i = begin + 1; i < end; ++i) simple &= sources[i].allocator == sources[begin].allocator;
      size_t runs = 1;
      if (!simple) {
        std::vector<size_t> index(end - begin);
        for (size_t i = 0; i < index.size(); ++i) index[i] = begin + i;
        std::stable_sort(index.begin(), index.end(), [&](size_t a, size_t b) {
          const void *x = allocator_of(a), *y = allocator_of(b);
          return x != y ? std::less<const void*>()(x, y) : recs[a].alloc_ns < recs[b].alloc_ns;
        });
        std::vector<AllocationRecord> sorted_recs;
        std::vector<RecordSource> sorted_sources;
        for (size_t i : index) {
          sorted_recs.push_back(recs[i]);
          if (!one_allocator) sorted_sources.push_back(sources[i]);
        }
        std::copy(sorted_recs.begin(), sorted_recs.end(), recs + begin);
        if (!one_allocator)  // else sources is empty (no pointer to offset)
          std::copy(sorted_sources.begin(), sorted_sources.end(), sources.begin() + static_cast<ptrdiff_t>(begin));
        for (size_t i = begin + 1; i < end; ++i) runs += allocator_of(i) != allocator_of(i - 1);
      }
      // Beyond the one per node reserved, the array grows (and the views are rebased).
      reserve_more_memory(runs);
      const AllocatorMemoryUsed* first_entry = nullptr;
      for (size_t i = begin; i < end;) {
        const void* a = allocator_of(i);
        int64_t live = 0, total = 0, peak = 0;
        size_t j = i;
        for (; j < end && (runs == 1 || allocator_of(j) == a); ++j) {
          live += recs[j].alloc_bytes;
          total += recs[j].alloc_bytes > 0 ? recs[j].alloc_bytes : 0;
          peak = std::max(peak, live);
        }
        const AllocatorMemoryUsed& entry = add_memory({
            .allocator_name = one_allocator ? kernel_allocator_name_ : sources[i].name,
            .total_bytes = total,
            .peak_bytes = peak,
            .live_bytes = live,
            .allocation_records = {recs + i, j - i},
            .allocator_bytes_in_use = one_allocator ? r.bytes_in_use_at_end : sources[j - 1].bytes_in_use,
        });
        if (!first_entry) first_entry = &entry;
        i = j;
      }
      node_memory = {first_entry, runs};
      memory_end = reinterpret_cast<uintptr_t>(first_entry + runs);
    }

    devices[static_cast<size_t>(item.device)].node_stats.push_back({
        .node_name = item.name,
        .op_type = item.op_type,
        .node_id = item.node_id,
        .scheduled_ns = r.scheduled_ns,
        .all_start_ns = r.start_ns,
        .op_start_rel_ns = 0,
        .op_end_rel_ns = r.end_ns - r.start_ns,
        .all_end_rel_ns = r.end_ns - r.start_ns,
        .memory = node_memory,
        .output = node_outputs,
        .timeline_label = item.timeline_label,
        .thread_id = r.thread_id,
        .referenced_tensor = {},
        .memory_stats = {},
    });
  }
  // The plan's names are let go unless the entries may be dropped and made again
  // (drop_node_entries): the recorded nodes are not read again.
  if (!remakeable_.load(std::memory_order_relaxed)) names_.reset();
}

}  // namespace stepscope
