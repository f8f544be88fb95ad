// What the tfprof views and the advisor return: TensorFlow's tfprof_output.proto messages
// (GraphNodeProto, MultiGraphNodeProto, AdviceProto) as plain structs, plus
// AdvisorOptionsProto, and their JSON form for programs.
//
// Shapes use tfprof's vectors: a scalar is {1}, an unknown shape {} (see format_dims).
//
// JSON: an object per message with the proto's field names (snake_case); every scalar field is
// written (zeros included) as a JSON number; repeated fields as arrays, input_shapes as an
// object keyed by the input index ("0", "1", ...); children nest. tensor_value is not written
// (tfprof's checkpoint values are not supported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stepscope/base/bulk_arena.h"

namespace stepscope {

// A node's input shapes by input index (tfprof's map<int32, TensorShapeProto>), in ascending
// index order, packed in one array: a view's result has one GraphNodeProto a graph node, and a
// map of vectors cost four allocations for an op of two inputs (40% of the scope view of a
// million nodes, with freeing them).
//   for (const auto& [index, dims] : node.input_shapes) ...   // dims: std::span<const int64_t>
class InputShapes {
 public:
  struct Entry {
    int32_t index;
    std::span<const int64_t> dims;
  };
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using reference = Entry;  // made on the fly: dereference gives a value
    using pointer = void;
    iterator() = default;
    Entry operator*() const { return {static_cast<int32_t>(at_[0]), {at_ + 2, static_cast<size_t>(at_[1])}}; }
    iterator& operator++() {
      at_ += 2 + at_[1];
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const iterator&) const = default;

   private:
    friend class InputShapes;
    explicit iterator(const int64_t* at) : at_(at) {}
    const int64_t* at_ = nullptr;  // an entry: index, rank, dims
  };

  InputShapes() = default;
  InputShapes(std::initializer_list<std::pair<int32_t, std::vector<int64_t>>> entries) {
    for (const auto& [index, dims] : entries) add(index, dims);
  }
  // An entry after those already there (iteration keeps the order of adding; the views add
  // them by ascending index, as tfprof's map orders them).
  void add(int32_t index, std::span<const int64_t> dims) {
    packed_.push_back(index);
    packed_.push_back(static_cast<int64_t>(dims.size()));
    packed_.insert(packed_.end(), dims.begin(), dims.end());
    ++size_;
  }
  // Room for `entries` entries of `dims` dimensions in all, so that add() does not reallocate.
  void reserve(size_t entries, size_t dims) { packed_.reserve(2 * entries + dims); }
  void clear() {
    packed_.clear();
    size_ = 0;
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  iterator begin() const { return iterator(packed_.data()); }
  iterator end() const { return iterator(packed_.data() + packed_.size()); }
  bool contains(int32_t index) const { return find(index) != end(); }
  iterator find(int32_t index) const {
    for (iterator it = begin(); it != end(); ++it)
      if ((*it).index == index) return it;
    return end();
  }
  // The dims of input `index`; std::out_of_range when the node has none for it.
  std::vector<int64_t> at(int32_t index) const {
    const iterator it = find(index);
    if (it == end()) throw std::out_of_range("no input shape for input " + std::to_string(index));
    const std::span<const int64_t> dims = (*it).dims;
    return {dims.begin(), dims.end()};
  }
  bool operator==(const InputShapes&) const = default;

 private:
  std::vector<int64_t, BulkAllocator<int64_t>> packed_;  // in a big view's arena (bulk_arena.h)
  size_t size_ = 0;
};

// The numbers of a GraphNodeProto: the node's own statistics for the chosen step (or the
// average over steps) and the total_* of the node and every accounted descendant. A view
// accounts, filters and sorts on these alone, then makes the protos it shows.
struct GraphNodeStats {
  int64_t run_count = 0;
  int64_t exec_micros = 0;
  int64_t accelerator_exec_micros = 0;
  int64_t cpu_exec_micros = 0;
  int64_t requested_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t residual_bytes = 0;
  int64_t output_bytes = 0;
  int64_t parameters = 0;
  int64_t float_ops = 0;

  int64_t total_definition_count = 0;
  int64_t total_run_count = 0;
  int64_t total_exec_micros = 0;
  int64_t total_accelerator_exec_micros = 0;
  int64_t total_cpu_exec_micros = 0;
  int64_t total_requested_bytes = 0;
  int64_t total_peak_bytes = 0;
  int64_t total_residual_bytes = 0;
  int64_t total_output_bytes = 0;
  int64_t total_parameters = 0;
  int64_t total_float_ops = 0;
};

// A node of the scope or graph view: one graph node (or a synthetic parent: the root
// "_TFProfRoot", a name scope with no node of its own), its numbers and what it is.
struct GraphNodeProto : GraphNodeStats {
  std::string name;
  // The node's device (none for a synthetic node): a view of the process's one copy of that
  // name (see device_list), so that a view's million nodes do not each allocate it.
  std::span<const std::string> devices;
  std::vector<std::vector<int64_t>> shapes;  // the variable's shape, for parameters
  InputShapes input_shapes;                  // by input index
  // The displayed children, in display order. A big view makes them in an arena (bulk_arena.h).
  std::vector<GraphNodeProto, BulkAllocator<GraphNodeProto>> children;

  GraphNodeProto() = default;
  // Copying and freeing go level by level, not by recursion: the graph view of a chain is as
  // deep as the chain (200,000 levels overflowed the stack).
  GraphNodeProto(const GraphNodeProto& other);
  GraphNodeProto(GraphNodeProto&&) noexcept = default;
  GraphNodeProto& operator=(const GraphNodeProto& other);
  GraphNodeProto& operator=(GraphNodeProto&&) noexcept = default;
  ~GraphNodeProto();

 private:
  friend struct ProtoTree;
  void copy_own_fields(const GraphNodeProto& other);  // everything but the children
};

// A node of the op view (an op type) or the code view (a source line): an aggregate of graph
// nodes. In the op view the displayed rows form a chain: each is the single child of the
// previous one (the root's child is the first row).
struct MultiGraphNodeProto {
  std::string name;
  int64_t exec_micros = 0;
  int64_t accelerator_exec_micros = 0;
  int64_t cpu_exec_micros = 0;
  int64_t requested_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t residual_bytes = 0;
  int64_t output_bytes = 0;
  int64_t parameters = 0;
  int64_t float_ops = 0;

  int64_t total_exec_micros = 0;
  int64_t total_accelerator_exec_micros = 0;
  int64_t total_cpu_exec_micros = 0;
  int64_t total_requested_bytes = 0;
  int64_t total_peak_bytes = 0;
  int64_t total_residual_bytes = 0;
  int64_t total_output_bytes = 0;
  int64_t total_parameters = 0;
  int64_t total_float_ops = 0;

  // The accounted graph nodes it aggregates. A big view makes them in an arena (bulk_arena.h).
  std::vector<GraphNodeProto, BulkAllocator<GraphNodeProto>> graph_nodes;
  std::vector<MultiGraphNodeProto> children;

  MultiGraphNodeProto() = default;
  // Level by level, as GraphNodeProto's: the op view of a profile with 200,000 op types is a
  // chain that deep.
  MultiGraphNodeProto(const MultiGraphNodeProto& other);
  MultiGraphNodeProto(MultiGraphNodeProto&&) noexcept = default;
  MultiGraphNodeProto& operator=(const MultiGraphNodeProto& other);
  MultiGraphNodeProto& operator=(MultiGraphNodeProto&&) noexcept = default;
  ~MultiGraphNodeProto();

 private:
  friend struct ProtoTree;
  void copy_own_fields(const MultiGraphNodeProto& other);  // everything but the children
};

// advise()'s options: the checkers to run, each with its (string) options. The built-in
// checkers accept options but use none, as TensorFlow's.
struct AdvisorOptions {
  std::map<std::string, std::map<std::string, std::string>> checkers;

  // TensorFlow's ALL_ADVICE: ExpensiveOperationChecker, AcceleratorUtilizationChecker,
  // JobChecker (internal to Google; runs nothing) and OperationChecker.
  static AdvisorOptions tensorflow();
  // Those and stepscope's CriticalPathChecker and InputPipelineChecker (what advise() runs by
  // default).
  static AdvisorOptions all();
};

// advise()'s result: the reports of each checker that ran, by checker name.
struct AdviceProto {
  struct Checker {
    std::vector<std::string> reports;
  };
  std::map<std::string, Checker> checkers;

  // What TensorFlow prints: for each checker (alphabetically) "\n<name>:\n", then each report
  // and a newline.
  std::string text() const;
};

// The nine statistics both messages carry for the node itself and in total, with TensorFlow's
// field names (the total's is "total_" + name): copying, summing, resetting and writing them all
// go over this one list.
template <typename Proto>
struct NodeStatistic {
  const char* name;
  int64_t Proto::*self;
  int64_t Proto::*total;
};
template <typename Proto>
inline constexpr NodeStatistic<Proto> kNodeStatistics[] = {
    {"exec_micros", &Proto::exec_micros, &Proto::total_exec_micros},
    {"accelerator_exec_micros", &Proto::accelerator_exec_micros, &Proto::total_accelerator_exec_micros},
    {"cpu_exec_micros", &Proto::cpu_exec_micros, &Proto::total_cpu_exec_micros},
    {"requested_bytes", &Proto::requested_bytes, &Proto::total_requested_bytes},
    {"peak_bytes", &Proto::peak_bytes, &Proto::total_peak_bytes},
    {"residual_bytes", &Proto::residual_bytes, &Proto::total_residual_bytes},
    {"output_bytes", &Proto::output_bytes, &Proto::total_output_bytes},
    {"parameters", &Proto::parameters, &Proto::total_parameters},
    {"float_ops", &Proto::float_ops, &Proto::total_float_ops},
};

// The one-device list {device}, for GraphNodeProto::devices: kept for the rest of the process,
// one per distinct name (a process sees a handful of devices; each costs its name's bytes). Past
// kMaxDeviceNames distinct names, every new one's list is {kTooManyDeviceNames}.
std::span<const std::string> device_list(std::string_view device);
inline constexpr size_t kMaxDeviceNames = 65536;
inline constexpr std::string_view kTooManyDeviceNames = "(more device names than stepscope keeps)";

std::string to_json(const GraphNodeProto& node);
std::string to_json(const MultiGraphNodeProto& node);
std::string to_json(const AdviceProto& advice);

}  // namespace stepscope
