// The protocol-buffer wire format, by hand: just enough to write and read the messages of
// TensorBoard event files (Event, Summary, SessionLog, GraphDef) without a protobuf dependency.
//
// Writers emit fields in field-number order and follow proto3's rule that a singular field at
// its default is not written (callers decide; these helpers always write what they are given).
// The Reader accepts fields in any order and skips the ones a caller does not know; groups
// (wire types 3 and 4, long deprecated) are treated as malformed input.
//
// Limits, for untrusted input: a length is checked against the bytes left before it is used (a
// length-delimited field is a view into the input, never a copy sized by the claim); varints
// are at most ten bytes and 64 bits; decoded integers are handed over as they are (int64 by
// two's complement), so any arithmetic on them is the caller's to check.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace stepscope::proto_wire {

enum class WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The raw forms: for a writer that has made room (ten bytes at most a varint) and a reader of
// memory its own process wrote (no checks), where a string's growth or a check a byte would
// cost (a traced step's recorded stream, StepStats::RecordedWriter; a profile's chunks).
inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}
inline uint64_t get_varint(const uint8_t*& p) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    const uint8_t b = *p++;
    v |= uint64_t{b & 0x7Fu} << shift;
    if (!(b & 0x80)) return v;
  }
}
// A signed number as protobuf's sint64 has it: small either side of 0.
inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (uint64_t{0} - (v & 1))); }

inline void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint32_t>(type));
}

inline void put_fixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

inline void put_fixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// int32/int64/enum/bool fields: a negative value takes ten bytes (sign-extended to 64 bits).
inline void put_int_field(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, WireType::kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

inline void put_double_field(std::string& out, uint32_t field, double v) {
  put_key(out, field, WireType::kFixed64);
  put_fixed64(out, std::bit_cast<uint64_t>(v));
}

inline void put_float_field(std::string& out, uint32_t field, float v) {
  put_key(out, field, WireType::kFixed32);
  put_fixed32(out, std::bit_cast<uint32_t>(v));
}

// string, bytes and (already serialized) sub-message fields.
inline void put_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, WireType::kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Reads one message's fields in order. Every method returns false on malformed input and then
// leaves the reader in an unspecified position; error() says what was wrong.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }
  size_t position() const { return pos_; }
  const char* error() const { return error_; }

  // The next field's number and wire type.
  bool next_field(uint32_t& field, WireType& type) {
    field = 0;
    type = WireType::kVarint;
    uint64_t key;
    if (!read_varint(key)) return false;
    const uint32_t wt = static_cast<uint32_t>(key & 7);
    const uint64_t number = key >> 3;
    if (number == 0 || number > 0x1FFFFFFF) return fail("invalid field number");
    if (wt != 0 && wt != 1 && wt != 2 && wt != 5) return fail("unsupported wire type");
    field = static_cast<uint32_t>(number);
    type = static_cast<WireType>(wt);
    return true;
  }

  bool read_varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= data_.size()) return fail("truncated varint");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      if (shift == 63 && b > 1) return fail("varint longer than 64 bits");
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return fail("varint longer than ten bytes");
  }

  bool read_fixed32(uint32_t& v) {
    if (data_.size() - pos_ < 4) return fail("truncated fixed32");
    v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return true;
  }

  bool read_fixed64(uint64_t& v) {
    if (data_.size() - pos_ < 8) return fail("truncated fixed64");
    v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return true;
  }

  bool read_bytes(std::string_view& bytes) {
    uint64_t n;
    if (!read_varint(n)) return false;
    if (n > data_.size() - pos_) return fail("length-delimited field runs past the end");
    bytes = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  // Typed reads that also check the wire type the field must have.
  bool read_int(WireType type, int64_t& v) {
    uint64_t u;
    if (type != WireType::kVarint) return fail("expected a varint field");
    if (!read_varint(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  bool read_double(WireType type, double& v) {
    uint64_t u;
    if (type != WireType::kFixed64) return fail("expected a fixed64 field");
    if (!read_fixed64(u)) return false;
    v = std::bit_cast<double>(u);
    return true;
  }
  bool read_float(WireType type, float& v) {
    uint32_t u;
    if (type != WireType::kFixed32) return fail("expected a fixed32 field");
    if (!read_fixed32(u)) return false;
    v = std::bit_cast<float>(u);
    return true;
  }
  bool read_length_delimited(WireType type, std::string_view& bytes) {
    if (type != WireType::kLengthDelimited) return fail("expected a length-delimited field");
    return read_bytes(bytes);
  }

  // Skips a field whose key was just read; `raw` (optional) receives the field's bytes,
  // key included, so unknown fields can be written back verbatim.
  bool skip(size_t field_start, WireType type, std::string* raw = nullptr) {
    uint64_t u64;
    uint32_t u32;
    std::string_view b;
    bool ok = false;
    switch (type) {
      case WireType::kVarint:
        ok = read_varint(u64);
        break;
      case WireType::kFixed64:
        ok = read_fixed64(u64);
        break;
      case WireType::kFixed32:
        ok = read_fixed32(u32);
        break;
      case WireType::kLengthDelimited:
        ok = read_bytes(b);
        break;
    }
    if (ok && raw) raw->append(data_.substr(field_start, pos_ - field_start));
    return ok;
  }

 private:
  bool fail(const char* why) {
    error_ = why;
    return false;
  }

  std::string_view data_;
  size_t pos_ = 0;
  const char* error_ = "";
};

}  // namespace stepscope::proto_wire
