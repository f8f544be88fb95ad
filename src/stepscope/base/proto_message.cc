#include "stepscope/base/proto_message.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "stepscope/base/proto_wire.h"

namespace stepscope {

namespace wire = proto_wire;

ProtoMessage::Field& ProtoMessage::add(uint32_t number, std::string_view name, Kind kind) {
  Field& f = fields_.emplace_back();
  f.number = number;
  f.name = name;
  f.kind = kind;
  return f;
}

ProtoMessage& ProtoMessage::add_int(uint32_t number, std::string_view name, int64_t value) {
  add(number, name, Kind::kInt).i = value;
  return *this;
}

ProtoMessage& ProtoMessage::add_bool(uint32_t number, std::string_view name, bool value) {
  add(number, name, Kind::kBool).i = value ? 1 : 0;
  return *this;
}

ProtoMessage& ProtoMessage::add_enum(uint32_t number, std::string_view name, int64_t value,
                                     std::string_view value_name) {
  Field& f = add(number, name, Kind::kEnum);
  f.i = value;
  f.s = value_name;
  return *this;
}

ProtoMessage& ProtoMessage::add_float(uint32_t number, std::string_view name, float value) {
  add(number, name, Kind::kFloat).d = value;
  return *this;
}

ProtoMessage& ProtoMessage::add_double(uint32_t number, std::string_view name, double value) {
  add(number, name, Kind::kDouble).d = value;
  return *this;
}

ProtoMessage& ProtoMessage::add_string(uint32_t number, std::string_view name, std::string_view value) {
  add(number, name, Kind::kString).s = value;
  return *this;
}

ProtoMessage& ProtoMessage::add_message(uint32_t number, std::string_view name, ProtoMessage value) {
  add(number, name, Kind::kMessage).m.push_back(std::move(value));
  return *this;
}

ProtoMessage& ProtoMessage::add_packed_ints(uint32_t number, std::string_view name, std::vector<int64_t> values) {
  if (!values.empty()) add(number, name, Kind::kPackedInts).packed = std::move(values);
  return *this;
}

// ----- wire format -------------------------------------------------------------------------

std::string ProtoMessage::serialize() const {
  std::string out;
  serialize_to(out);
  return out;
}

void ProtoMessage::serialize_to(std::string& out) const {
  for (const Field& f : fields_) {
    switch (f.kind) {
      case Kind::kInt:
      case Kind::kBool:
      case Kind::kEnum:
        wire::put_int_field(out, f.number, f.i);
        break;
      case Kind::kFloat:
        wire::put_float_field(out, f.number, static_cast<float>(f.d));
        break;
      case Kind::kDouble:
        wire::put_double_field(out, f.number, f.d);
        break;
      case Kind::kString:
        wire::put_bytes_field(out, f.number, f.s);
        break;
      case Kind::kMessage:
        wire::put_bytes_field(out, f.number, f.m.front().serialize());
        break;
      case Kind::kPackedInts: {
        std::string packed;
        for (int64_t v : f.packed) wire::put_varint(packed, static_cast<uint64_t>(v));
        wire::put_bytes_field(out, f.number, packed);
        break;
      }
    }
  }
}

// ----- text format -------------------------------------------------------------------------

std::string proto_text_escape(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c >= 0x7F) {
          out += '\\';
          out += static_cast<char>('0' + (c >> 6));
          out += static_cast<char>('0' + ((c >> 3) & 7));
          out += static_cast<char>('0' + (c & 7));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest digits that round-trip, from to_chars' scientific form "d[.ddd]e±xx".
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, ec == std::errc() ? static_cast<size_t>(end - buf) : 0);
  std::string out;
  if (!sci.empty() && sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  if (exp10 < -4 || exp10 >= 16) {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    out += exp10 < 0 ? "e-" : "e+";
    const int a = std::abs(exp10);
    if (a < 10) out += '0';
    out += std::to_string(a);
    return out;
  }
  const int decpt = exp10 + 1;  // digits before the decimal point
  if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt < n) {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  } else {
    out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
  }
  return out;
}

std::string ProtoMessage::to_text(int indent) const {
  std::string out;
  to_text(out, indent);
  return out;
}

void ProtoMessage::to_text(std::string& out, int indent) const {
  const std::string pad(static_cast<size_t>(indent) * 2, ' ');
  for (const Field& f : fields_) {
    if (f.kind == Kind::kMessage) {
      out += pad + f.name + " {\n";
      f.m.front().to_text(out, indent + 1);
      out += pad + "}\n";
      continue;
    }
    if (f.kind == Kind::kPackedInts) {
      for (int64_t v : f.packed) out += pad + f.name + ": " + std::to_string(v) + "\n";
      continue;
    }
    out += pad + f.name + ": ";
    switch (f.kind) {
      case Kind::kInt:
        out += std::to_string(f.i);
        break;
      case Kind::kBool:
        out += f.i ? "true" : "false";
        break;
      case Kind::kEnum:
        out += f.s.empty() ? std::to_string(f.i) : f.s;
        break;
      case Kind::kFloat:
      case Kind::kDouble:
        out += python_float_repr(f.d);
        break;
      case Kind::kString:
        out += "\"" + proto_text_escape(f.s) + "\"";
        break;
      case Kind::kMessage:
      case Kind::kPackedInts:
        break;
    }
    out += "\n";
  }
}

}  // namespace stepscope
