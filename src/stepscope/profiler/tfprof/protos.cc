#include "stepscope/profiler/tfprof/protos.h"

#include <cstdio>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "stepscope/base/json_out.h"

namespace stepscope {
namespace {

using json_out::append_string;

void append_key(std::string& out, std::string_view key) {
  if (out.back() != '{') out += ',';
  append_string(out, key);
  out += ':';
}

void append_int(std::string& out, std::string_view key, int64_t v) {
  append_key(out, key);
  out += std::to_string(v);
}

void append_dims(std::string& out, std::span<const int64_t> dims) {
  out += '[';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(dims[i]);
  }
  out += ']';
}

// The statistics GraphNodeProto and MultiGraphNodeProto share (the node's own, or its total).
template <typename Node>
void append_stats(std::string& out, const Node& n) {
  for (const auto& s : kNodeStatistics<Node>) append_int(out, s.name, n.*s.self);
}
template <typename Node>
void append_total_stats(std::string& out, const Node& n) {
  for (const auto& s : kNodeStatistics<Node>) append_int(out, std::string("total_") + s.name, n.*s.total);
}

// "key":[item,item,...], each item written by append_item(out, item).
template <typename Items, typename F>
void append_list(std::string& out, std::string_view key, const Items& items, F&& append_item) {
  append_key(out, key);
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    append_item(out, items[i]);
  }
  out += ']';
}

void append_graph_node(std::string& out, const GraphNodeProto& n) {
  out += '{';
  append_key(out, "name");
  append_string(out, n.name);
  append_int(out, "run_count", n.run_count);
  append_stats(out, n);
  append_list(out, "devices", n.devices, [](std::string& o, const std::string& d) { append_string(o, d); });
  append_int(out, "total_definition_count", n.total_definition_count);
  append_int(out, "total_run_count", n.total_run_count);
  append_total_stats(out, n);
  append_list(out, "shapes", n.shapes, append_dims);
  append_key(out, "input_shapes");
  out += '{';
  for (const auto& [index, dims] : n.input_shapes) {
    append_key(out, std::to_string(index));
    append_dims(out, dims);
  }
  out += '}';
  append_list(out, "children", n.children, append_graph_node);
  out += '}';
}

void append_multi_node(std::string& out, const MultiGraphNodeProto& n) {
  out += '{';
  append_key(out, "name");
  append_string(out, n.name);
  append_stats(out, n);
  append_total_stats(out, n);
  append_list(out, "graph_nodes", n.graph_nodes, append_graph_node);
  append_list(out, "children", n.children, append_multi_node);
  out += '}';
}

}  // namespace

GraphNodeProto::~GraphNodeProto() {
  if (children.empty()) return;
  // Each level's nodes give up their children before they go, so no destructor recurses.
  std::vector<std::vector<GraphNodeProto>> pending;
  pending.push_back(std::move(children));
  while (!pending.empty()) {
    std::vector<GraphNodeProto> level = std::move(pending.back());
    pending.pop_back();
    for (GraphNodeProto& node : level)
      if (!node.children.empty()) pending.push_back(std::move(node.children));
  }
}

AdvisorOptions AdvisorOptions::tensorflow() {
  AdvisorOptions o;
  o.checkers["ExpensiveOperationChecker"];
  o.checkers["AcceleratorUtilizationChecker"];
  o.checkers["JobChecker"];
  o.checkers["OperationChecker"];
  return o;
}

AdvisorOptions AdvisorOptions::all() {
  AdvisorOptions o = tensorflow();
  o.checkers["CriticalPathChecker"];   // stepscope's own (profiler/tfprof/internal/critical_path_checker.h)
  o.checkers["InputPipelineChecker"];  // stepscope's own (profiler/tfprof/internal/input_pipeline_checker.h)
  return o;
}

std::string AdviceProto::text() const {
  std::string out;
  for (const auto& [name, checker] : checkers) {
    out += "\n" + name + ":\n";
    for (const std::string& r : checker.reports) out += r + "\n";
  }
  return out;
}

std::span<const std::string> device_list(std::string_view device) {
  static std::mutex mutex;
  // Never destroyed: a result may be read during static destruction. A deque keeps each name
  // where it is as others join.
  static auto* names = new std::deque<std::string>();
  static auto* index = new std::unordered_map<std::string_view, const std::string*>();
  std::lock_guard lock(mutex);
  auto it = index->find(device);
  if (it == index->end()) {
    // A bound on what the process keeps: no real job has this many devices, a hostile profile
    // file could name millions.
    if (names->size() >= kMaxDeviceNames) {
      it = index->find(kTooManyDeviceNames);
      if (it != index->end()) return {it->second, 1};
      device = kTooManyDeviceNames;
    }
    const std::string& kept = names->emplace_back(device);
    it = index->emplace(kept, &kept).first;
  }
  return {it->second, 1};
}

std::string to_json(const GraphNodeProto& node) {
  std::string out;
  out.reserve(1024);
  append_graph_node(out, node);
  return out;
}

std::string to_json(const MultiGraphNodeProto& node) {
  std::string out;
  out.reserve(1024);
  append_multi_node(out, node);
  return out;
}

std::string to_json(const AdviceProto& advice) {
  std::string out = "{";
  append_key(out, "checkers");
  out += '{';
  for (const auto& [name, checker] : advice.checkers) {
    append_key(out, name);
    out += "{";
    append_key(out, "reports");
    out += '[';
    for (size_t i = 0; i < checker.reports.size(); ++i) {
      if (i) out += ',';
      append_string(out, checker.reports[i]);
    }
    out += "]}";
  }
  out += "}}";
  return out;
}

}  // namespace stepscope
