// protoc as an independent decoder of the protobuf files stepscope writes by hand (GraphDef,
// MetaGraphDef), for tests: Debian's protobuf-compiler (scripts/install-deps.sh).
//
//   std::optional<std::string> text = protoc_decode(bytes, "tensorflow.MetaGraphDef");
//   if (!text) GTEST_SKIP() << kNoProtoc;
//   ProtoText tree = parse_proto_text(*text);
//   tree.one("graph_def").all("node")[0]->one("name").value  // "\"x\""
//
// protoc_decode reads the bytes with kTensorFlowSubsetProto, the messages involved transcribed
// from TensorFlow's graph.proto, node_def.proto, attr_value.proto, tensor.proto,
// tensor_shape.proto, types.proto, versions.proto, op_def.proto, meta_graph.proto, saver.proto
// and variable.proto (field numbers and types; fields stepscope never writes are left out, so
// they would show as bare numbers). protoc_decode_raw needs no schema but cannot tell a string
// from a message that happens to parse (it shows "update_ops" as a message): use it for the
// structure of field numbers only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope::testing {

inline constexpr const char* kNoProtoc =
    "protoc is not on the PATH: install Debian's protobuf-compiler (scripts/install-deps.sh) to run this check";

extern const char* const kTensorFlowSubsetProto;

// Whether an executable `protoc` is on the PATH.
bool have_protoc();
// `protoc --decode_raw` of `bytes`; nullopt when protoc is not on the PATH. A failed decode is a
// gtest failure, and the text then is protoc's output.
std::optional<std::string> protoc_decode_raw(std::string_view bytes);
// `protoc --decode=<type>` of `bytes` with kTensorFlowSubsetProto (type e.g.
// "tensorflow.GraphDef"); as protoc_decode_raw otherwise.
std::optional<std::string> protoc_decode(std::string_view bytes, std::string_view type);
// The same with another schema (the text of a .proto file declaring `type`).
std::optional<std::string> protoc_decode_with_schema(std::string_view bytes, std::string_view schema,
                                                     std::string_view type);

// protoc's text output as a tree: `key: value` is a leaf (value as printed: a number, an enum
// name, a quoted C-escaped string), `key { ... }` a message; keys are field names, or numbers
// for --decode_raw and unknown fields.
struct ProtoText {
  std::string key;
  std::string value;                // leaves
  std::vector<ProtoText> children;  // messages
  // The children with key `key`, in order.
  std::vector<const ProtoText*> all(std::string_view key) const;
  // The only child with key `key` (a gtest failure, and an empty node, when there is not one).
  const ProtoText& one(std::string_view key) const;
};
ProtoText parse_proto_text(std::string_view text);

}  // namespace stepscope::testing
