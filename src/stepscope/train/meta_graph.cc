#include "stepscope/train/meta_graph.h"

#include <set>
#include <utility>

#include "stepscope/base/file_io.h"
#include "stepscope/base/version.h"
#include "stepscope/graph/node.h"
#include "stepscope/train/graph_def.h"
#include "stepscope/train/variables.h"

namespace stepscope {

namespace {

std::string tensor_name(const Output& out) { return out.node->name() + ":" + std::to_string(out.index); }

// VariableDef (tensorflow/core/framework/variable.proto): variable_name 1, initializer_name 2,
// snapshot_name 3, initial_value_name 6, trainable 7.
std::string variable_def(Node* node) {
  const Variable v = Variable::from_node(node);
  ProtoMessage def;
  def.add_string(1, "variable_name", tensor_name(v.value()));
  if (v.initializer) def.add_string(2, "initializer_name", v.initializer->name());
  def.add_string(3, "snapshot_name", tensor_name(v.value()));
  if (v.initial_value) def.add_string(6, "initial_value_name", tensor_name(v.initial_value));
  if (v.trainable()) def.add_bool(7, "trainable", true);
  return def.serialize();
}

bool is_variable_collection(const std::string& key) {
  return key == kGlobalVariables || key == kTrainableVariables || key == kLocalVariables;
}

ProtoMessage collection_def(const std::string& key, const std::vector<Node*>& nodes) {
  ProtoMessage list;
  bool bytes = false;
  if (is_variable_collection(key)) {
    bytes = true;
    for (Node* n : nodes) {
      if (n->op_type() != "VariableV2") {
        bytes = false;  // not variables after all: named like any other collection
        break;
      }
    }
  }
  for (Node* n : nodes) {
    if (bytes) {
      list.add_string(1, "value", variable_def(n));
    } else {
      list.add_string(1, "value", n->num_outputs() > 0 ? n->name() + ":0" : n->name());
    }
  }
  ProtoMessage def;
  def.add_message(bytes ? 2 : 1, bytes ? "bytes_list" : "node_list", std::move(list));
  return def;
}

// MetaInfoDef: stripped_op_list 2, tensorflow_version 5.
ProtoMessage meta_info_def(const Graph& graph) {
  std::set<std::string> op_types;
  for (const auto& node : graph.nodes()) op_types.emplace(node->op_type());
  ProtoMessage op_list;
  for (const std::string& op : op_types)
    op_list.add_message(1, "op", std::move(ProtoMessage().add_string(1, "name", op)));
  ProtoMessage info;
  info.add_message(2, "stripped_op_list", std::move(op_list));
  info.add_string(5, "tensorflow_version", "stepscope " STEPSCOPE_VERSION);
  return info;
}

}  // namespace

ProtoMessage meta_graph_def_message(const Graph& graph) {
  ProtoMessage out;
  out.add_message(1, "meta_info_def", meta_info_def(graph));
  out.add_message(2, "graph_def", graph_def_message(graph));
  for (const auto& [key, nodes] : graph.collections()) {  // a std::map: by key
    if (nodes.empty()) continue;
    ProtoMessage entry;
    entry.add_string(1, "key", key).add_message(2, "value", collection_def(key, nodes));
    out.add_message(4, "collection_def", std::move(entry));
  }
  return out;
}

std::string meta_graph_def_binary(const Graph& graph) { return meta_graph_def_message(graph).serialize(); }

void export_meta_graph(const Graph& graph, const std::string& path) {
  write_file_atomically(path, meta_graph_def_binary(graph));
}

}  // namespace stepscope
