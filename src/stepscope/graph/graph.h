// The dataflow graph: nodes with unique names, data and control edges, shape inference when
// a node is added, and finalization (after which the graph is read-only; MonitoredSession
// finalizes it for the duration of a session).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stepscope/graph/attr.h"
#include "stepscope/graph/call_stack.h"
#include "stepscope/graph/node.h"
#include "stepscope/graph/op_def.h"

namespace stepscope {

struct NodeSpec {
  std::string name;  // full, unique name (Scope makes one)
  const OpDef* op = nullptr;
  std::vector<Output> inputs;
  std::vector<Node*> control_inputs;
  AttrMap attrs;
  std::string device;
  SourceLocation location;
};

class Graph {
 public:
  Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Validates inputs (same graph, op arity), runs the op's shape rule and adds the node.
  // Errors: FailedPreconditionError when finalized; InvalidArgumentError naming the op and node.
  Node* add_node(NodeSpec spec);

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  Node* node(int id) const { return nodes_[id].get(); }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  Node* find_node(std::string_view name) const;
  // "name" or "name:i"; NotFoundError when absent.
  Output output_by_name(std::string_view name) const;

  // Returns `base` if unused, else base_1, base_2, ... (and reserves it).
  std::string unique_name(std::string_view base);
  bool name_in_use(std::string_view name) const;

  void finalize() { finalized_ = true; }
  void unfinalize() { finalized_ = false; }
  bool finalized() const { return finalized_; }

  // Named groups of nodes (trainable variables, the global step, summaries, ...).
  void add_to_collection(const std::string& key, Node* node);
  const std::vector<Node*>& collection(const std::string& key) const;
  // Every collection, by key (tf.Graph.get_all_collection_keys with their contents).
  const std::map<std::string, std::vector<Node*>>& collections() const { return collections_; }

  uint64_t id() const { return id_; }

  // Whether add_node records the caller's stack (Node::call_stack) of a node with a source location
  // (built by a user's call); default capture_call_stacks_by_default(): on unless STEPSCOPE_CAPTURE_STACKS=0.
  void set_capture_call_stacks(bool capture) { capture_call_stacks_ = capture; }
  bool capture_call_stacks() const { return capture_call_stacks_; }
  const CallStackTable& call_stacks() const { return call_stacks_; }

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, Node*> by_name_;
  std::unordered_map<std::string, int> name_counters_;
  std::map<std::string, std::vector<Node*>> collections_;
  bool finalized_ = false;
  bool capture_call_stacks_ = capture_call_stacks_by_default();
  CallStackTable call_stacks_;
  uint64_t id_;
  // Each node's device and source location, kept once here (deques: they stay put).
  const std::string* keep_device(std::string device);
  std::deque<std::string> devices_;
  std::unordered_map<std::string_view, const std::string*> device_index_;
  SourceLocationTable locations_;
};

// Canonical device name: "/cpu:0", "CPU:1", "/device:CPU:0" and "" become
// "/job:localhost/replica:0/task:0/device:CPU:<n>"; anything else is InvalidArgumentError.
std::string canonical_device(std::string_view device);

}  // namespace stepscope
