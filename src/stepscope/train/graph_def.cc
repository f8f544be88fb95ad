#include "stepscope/train/graph_def.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/graph/node.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

ProtoMessage& add_dtype(ProtoMessage& m, uint32_t number, std::string_view name, DType dtype) {
  return m.add_enum(number, name, tf_datatype(dtype), tf_datatype_name(dtype));
}

// TensorShapeProto: dim 2 (Dim: size 1), unknown_rank 3.
ProtoMessage shape_message(const Shape& s) {
  ProtoMessage out;
  if (!s.known_rank()) return std::move(out.add_bool(3, "unknown_rank", true));
  for (int64_t d : s.dims()) {
    ProtoMessage dim;
    if (d != 0) dim.add_int(1, "size", d);  // -1 stands for an unknown size, as in TensorFlow
    out.add_message(2, "dim", std::move(dim));
  }
  return out;
}

// TensorProto: dtype 1, tensor_shape 2, tensor_content 4, string_val 8.
ProtoMessage tensor_message(const Tensor& t) {
  ProtoMessage out;
  if (!t.initialized()) return out;
  add_dtype(out, 1, "dtype", t.dtype());
  out.add_message(2, "tensor_shape", shape_message(t.shape()));
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.flat<std::string>()) out.add_string(8, "string_val", s);
  } else if (t.bytes() > 0) {
    out.add_string(4, "tensor_content", std::string_view(static_cast<const char*>(t.raw_data()), t.bytes()));
  }
  return out;
}

// AttrValue: list 1 (ListValue: i 3 packed, shape 7), s 2, i 3, f 4, b 5, type 6, shape 7,
// tensor 8. The member of the oneof is written even at its default.
ProtoMessage attr_value_message(const AttrValue& value) {
  ProtoMessage out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out.add_bool(5, "b", v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out.add_int(3, "i", v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.add_float(4, "f", static_cast<float>(v));
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.add_string(2, "s", v);
        } else if constexpr (std::is_same_v<T, DType>) {
          add_dtype(out, 6, "type", v);
        } else if constexpr (std::is_same_v<T, Shape>) {
          out.add_message(7, "shape", shape_message(v));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out.add_message(1, "list", std::move(ProtoMessage().add_packed_ints(3, "i", v)));
        } else if constexpr (std::is_same_v<T, Tensor>) {
          out.add_message(8, "tensor", tensor_message(v));
        } else {
          out.add_string(2, "s", v ? v->describe() : std::string());
        }
      },
      value);
  return out;
}

std::string input_name(const Output& in) {
  return in.index == 0 ? in.node->name() : in.node->name() + ":" + std::to_string(in.index);
}

// NodeDef: name 1, op 2, input 3, device 4, attr 5 (map<string, AttrValue>, by key).
ProtoMessage node_def_message(const Node& node) {
  ProtoMessage def;
  def.add_string(1, "name", node.name()).add_string(2, "op", node.op_type());
  for (const Output& in : node.inputs()) def.add_string(3, "input", input_name(in));
  for (const Node* c : node.control_inputs()) def.add_string(3, "input", "^" + c->name());
  if (!node.device().empty()) def.add_string(4, "device", node.device());
  std::vector<std::pair<std::string, ProtoMessage>> attrs;
  for (const auto& [key, value] : node.attrs().items()) attrs.emplace_back(key, attr_value_message(value));
  if (node.num_outputs() > 0) {
    ProtoMessage shapes;
    for (int i = 0; i < node.num_outputs(); ++i) shapes.add_message(7, "shape", shape_message(node.output_shape(i)));
    ProtoMessage value;
    value.add_message(1, "list", std::move(shapes));
    attrs.emplace_back("_output_shapes", std::move(value));
  }
  std::stable_sort(attrs.begin(), attrs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [key, value] : attrs) {
    ProtoMessage entry;
    entry.add_string(1, "key", key).add_message(2, "value", std::move(value));
    def.add_message(5, "attr", std::move(entry));
  }
  return def;
}

}  // namespace

// GraphDef: node 1, versions 4 (VersionDef: producer 1).
ProtoMessage graph_def_message(const Graph& graph) {
  ProtoMessage out;
  for (const auto& node : graph.nodes()) out.add_message(1, "node", node_def_message(*node));
  out.add_message(4, "versions", std::move(ProtoMessage().add_int(1, "producer", kGraphDefProducer)));
  return out;
}

std::string graph_def_binary(const Graph& graph) { return graph_def_message(graph).serialize(); }

std::string graph_def_text(const Graph& graph) { return graph_def_message(graph).to_text(); }

std::string write_graph(const Graph& graph, const std::string& dir, const std::string& name, bool as_text) {
  const std::string where = dir.empty() ? "." : dir;
  std::error_code ec, ec2;
  fs::create_directories(where, ec);
  if (ec && !fs::is_directory(where, ec2)) {
    if (fs::exists(where, ec2))
      throw FailedPreconditionError("write_graph: cannot use directory '" + where + "': it is not a directory");
    throw_os_error(ec.value(), "write_graph: cannot create directory '" + where + "'");
  }
  const std::string path = (fs::path(where) / name).string();
  write_file_atomically(path, as_text ? graph_def_text(graph) : graph_def_binary(graph));
  return path;
}

}  // namespace stepscope
