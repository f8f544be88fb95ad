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

// A node's fields up to its children, whose list it opens: `"children":[`.
void open_graph_node(std::string& out, const GraphNodeProto& n) {
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
  append_key(out, "children");
  out += '[';
}

// Writes `root` and its descendants, each node's fields and the opening of its list of children
// written by open_node(out, node), over an explicit stack of the nodes open (and the next child
// of each): a view is as deep as its graph.
template <typename Node, typename Open>
void append_tree(std::string& out, const Node& root, Open open_node) {
  std::vector<std::pair<const Node*, size_t>> open{{&root, 0}};
  open_node(out, root);
  while (!open.empty()) {
    auto& [node, next] = open.back();
    if (next == node->children.size()) {
      out += "]}";
      open.pop_back();
      continue;
    }
    const Node& child = node->children[next++];
    if (next > 1) out += ',';
    open_node(out, child);
    open.emplace_back(&child, 0);
  }
}

void append_graph_node(std::string& out, const GraphNodeProto& node) { append_tree(out, node, open_graph_node); }

void open_multi_node(std::string& out, const MultiGraphNodeProto& n) {
  out += '{';
  append_key(out, "name");
  append_string(out, n.name);
  append_stats(out, n);
  append_total_stats(out, n);
  append_list(out, "graph_nodes", n.graph_nodes, append_graph_node);
  append_key(out, "children");
  out += '[';
}

}  // namespace

// Copying and freeing a tree of protos level by level: a view is as deep as its graph (or, for
// the op view, as its number of op types), far deeper than the stack.
struct ProtoTree {
  template <typename Node>
  static Node copy(const Node& from) {
    Node copy;
    copy.copy_own_fields(from);
    if (from.children.empty()) return copy;  // most nodes: no list to keep
    // Each copied node's children are made (their own fields copied) before theirs in turn.
    std::vector<std::pair<const Node*, Node*>> pending{{&from, &copy}};
    while (!pending.empty()) {
      const auto [source, target] = pending.back();
      pending.pop_back();
      target->children.resize(source->children.size());
      for (size_t i = 0; i < source->children.size(); ++i) {
        target->children[i].copy_own_fields(source->children[i]);
        if (!source->children[i].children.empty()) pending.emplace_back(&source->children[i], &target->children[i]);
      }
    }
    return copy;
  }

  // Each level's nodes give up their children before they go, so no destructor recurses.
  template <typename Children>
  static void free_children(Children& children) {
    if (children.empty()) return;
    std::vector<Children> pending;
    pending.push_back(std::move(children));
    while (!pending.empty()) {
      Children level = std::move(pending.back());
      pending.pop_back();
      for (auto& node : level)
        if (!node.children.empty()) pending.push_back(std::move(node.children));
    }
  }
};

static_assert(sizeof(GraphNodeProto) == sizeof(GraphNodeStats) + sizeof(std::string) +
                                            sizeof(std::span<const std::string>) +
                                            sizeof(std::vector<std::vector<int64_t>>) + sizeof(InputShapes) +
                                            sizeof(GraphNodeProto::children),
              "a field was added to GraphNodeProto: copy it in copy_own_fields");
void GraphNodeProto::copy_own_fields(const GraphNodeProto& other) {
  static_cast<GraphNodeStats&>(*this) = other;
  name = other.name;
  devices = other.devices;
  shapes = other.shapes;
  input_shapes = other.input_shapes;
}

// Made whole before it replaces this node's: `other` may be one of this node's descendants.
GraphNodeProto::GraphNodeProto(const GraphNodeProto& other) : GraphNodeProto(ProtoTree::copy(other)) {}
GraphNodeProto& GraphNodeProto::operator=(const GraphNodeProto& other) {
  if (this != &other) *this = ProtoTree::copy(other);
  return *this;
}
GraphNodeProto::~GraphNodeProto() { ProtoTree::free_children(children); }

static_assert(sizeof(MultiGraphNodeProto) ==
                  sizeof(std::string) + 2 * std::size(kNodeStatistics<MultiGraphNodeProto>) * sizeof(int64_t) +
                      sizeof(MultiGraphNodeProto::graph_nodes) + sizeof(std::vector<MultiGraphNodeProto>),
              "a field was added to MultiGraphNodeProto: copy it in copy_own_fields");
void MultiGraphNodeProto::copy_own_fields(const MultiGraphNodeProto& other) {
  name = other.name;
  for (const auto& s : kNodeStatistics<MultiGraphNodeProto>) {
    this->*s.self = other.*s.self;
    this->*s.total = other.*s.total;
  }
  graph_nodes = other.graph_nodes;
}

MultiGraphNodeProto::MultiGraphNodeProto(const MultiGraphNodeProto& other)
    : MultiGraphNodeProto(ProtoTree::copy(other)) {}
MultiGraphNodeProto& MultiGraphNodeProto::operator=(const MultiGraphNodeProto& other) {
  if (this != &other) *this = ProtoTree::copy(other);
  return *this;
}
MultiGraphNodeProto::~MultiGraphNodeProto() { ProtoTree::free_children(children); }

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
  append_tree(out, node, open_multi_node);
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
