// A protocol-buffer message built in memory, field by field, and written either in the wire
// format (proto_wire.h) or in protobuf's text format — one description of a message (a
// GraphDef, a MetaGraphDef) with two encoders, so that the binary and the text file of the same
// graph cannot disagree.
//
//   ProtoMessage node;
//   node.add_string(1, "name", "w").add_string(2, "op", "Const");
//   node.serialize();  // 0a 01 77 12 05 43 6f 6e 73 74
//   node.to_text();    // name: "w"\nop: "Const"\n
//
// Fields are written in the order they are added: add them in field-number order, as protobuf's
// writers (and text printers) emit them, and entries of a map field sorted by key, as the text
// printers and deterministic serialization order them. Nothing is left out for being at its
// default (proto3's rule is the caller's to apply: it knows which fields are oneof members).
//
// The text format is Python protobuf's text_format.MessageToString as TensorFlow calls it in
// tf.io.write_graph (float_format=''): two spaces of indent per level, `name: value` for
// scalars, `name {` ... `}` for messages, one line per element of a repeated field, enum values
// by name, strings C-escaped byte by byte (\n \r \t \" \' \\ and octal \ooo for every other byte
// outside printable ASCII, UTF-8 included), floats as Python's str() of the float widened to a
// double ("0.5", "1.0", "0.10000000149011612", "1e-05", "inf", "nan").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

class ProtoMessage {
 public:
  // int32, int64 and (as 0 / 1) bool fields take a varint; text prints the number.
  ProtoMessage& add_int(uint32_t number, std::string_view name, int64_t value);
  ProtoMessage& add_bool(uint32_t number, std::string_view name, bool value);
  // An enum: the number on the wire, `value_name` in text (the number when empty).
  ProtoMessage& add_enum(uint32_t number, std::string_view name, int64_t value, std::string_view value_name);
  ProtoMessage& add_float(uint32_t number, std::string_view name, float value);
  ProtoMessage& add_double(uint32_t number, std::string_view name, double value);
  // string and bytes fields.
  ProtoMessage& add_string(uint32_t number, std::string_view name, std::string_view value);
  ProtoMessage& add_message(uint32_t number, std::string_view name, ProtoMessage value);
  // A packed repeated int64 field (one length-delimited field on the wire; one line per value
  // in text). Empty: nothing is written.
  ProtoMessage& add_packed_ints(uint32_t number, std::string_view name, std::vector<int64_t> values);

  bool empty() const { return fields_.empty(); }
  // The wire format.
  std::string serialize() const;
  void serialize_to(std::string& out) const;
  // The text format, each line indented by `indent` levels (two spaces each).
  std::string to_text(int indent = 0) const;
  void to_text(std::string& out, int indent) const;

 private:
  enum class Kind { kInt, kBool, kEnum, kFloat, kDouble, kString, kMessage, kPackedInts };
  struct Field {
    uint32_t number;
    std::string name;
    Kind kind;
    int64_t i = 0;
    double d = 0;
    std::string s;                // string value, or an enum's value name
    std::vector<ProtoMessage> m;  // the sub-message (one)
    std::vector<int64_t> packed;
  };
  Field& add(uint32_t number, std::string_view name, Kind kind);

  std::vector<Field> fields_;
};

// Protobuf's C escaping of bytes for the text format (see above), without the quotes.
std::string proto_text_escape(std::string_view bytes);
// Python's str() of a double: the shortest digits that read back as `value`, in fixed notation
// with at least one decimal ("1.0", "0.0001") for exponents -4..15, else "1e-05" / "1.5e+16".
std::string python_float_repr(double value);

}  // namespace stepscope
