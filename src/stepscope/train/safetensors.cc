#include "stepscope/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "stepscope/base/file_io.h"
#include "stepscope/base/json_out.h"

namespace stepscope {

// The format is little-endian; tensors are copied to and from the file without conversion.
static_assert(std::endian::native == std::endian::little, "safetensors IO assumes a little-endian host");

namespace {

// ---------------------------------------------------------------------------------------------
// dtypes: every name the reference knows (so a valid file with other dtypes is told apart from
// a corrupt one), its bit size, and the writer's sort rank (the Rust enum order).

struct StDType {
  const char* name;
  int bits;
  int rank;
};

constexpr StDType kStDTypes[] = {
    {"BOOL", 8, 0},         {"F4", 4, 1},      {"F6_E2M3", 6, 2}, {"F6_E3M2", 6, 3}, {"U8", 8, 4},
    {"I8", 8, 5},           {"F8_E5M2", 8, 6}, {"F8_E4M3", 8, 7}, {"F8_E8M0", 8, 8}, {"F8_E4M3FNUZ", 8, 9},
    {"F8_E5M2FNUZ", 8, 10}, {"I16", 16, 11},   {"U16", 16, 12},   {"F16", 16, 13},   {"BF16", 16, 14},
    {"I32", 32, 15},        {"U32", 32, 16},   {"F32", 32, 17},   {"C64", 64, 18},   {"F64", 64, 19},
    {"I64", 64, 20},        {"U64", 64, 21},
};

const StDType* find_st_dtype(std::string_view name) {
  for (const StDType& d : kStDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

const StDType& st_dtype_of(DType dtype) {
  const char* name = nullptr;
  switch (dtype) {
    case DType::kFloat32:
      name = "F32";
      break;
    case DType::kFloat64:
      name = "F64";
      break;
    case DType::kInt32:
      name = "I32";
      break;
    case DType::kInt64:
      name = "I64";
      break;
    case DType::kBool:
      name = "BOOL";
      break;
    case DType::kString:
      break;
  }
  if (!name) throw InvalidArgumentError("safetensors cannot store tensors of dtype " + std::string(dtype_name(dtype)));
  return *find_st_dtype(name);
}

bool dtype_from_st(std::string_view name, DType* out) {
  if (name == "F32")
    *out = DType::kFloat32;
  else if (name == "F64")
    *out = DType::kFloat64;
  else if (name == "I32")
    *out = DType::kInt32;
  else if (name == "I64")
    *out = DType::kInt64;
  else if (name == "BOOL")
    *out = DType::kBool;
  else
    return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Text helpers.

// Index of the first byte that is not part of well-formed UTF-8 (Rust's str::from_utf8 rules:
// no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
size_t invalid_utf8_at(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = json_out::utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

// Names in messages: backquoted like the reference's, with control bytes made visible.
std::string quote_name(std::string_view s) {
  std::string out = "`";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "`";
}

std::string shape_text(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

void put_u64_le(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_u64_le(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Header parsing and validation.

struct Entry {
  std::string name;
  const StDType* dtype;
  std::vector<uint64_t> shape;
  uint64_t begin, end;
};

struct Header {
  std::vector<Entry> entries;  // by (begin, end, name)
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
};

[[noreturn]] void corrupt(const std::string& source, const std::string& problem) {
  throw DataLossError("corrupt safetensors file '" + source + "': " + problem);
}

// Thrown from the JSON parser callback to stop parsing.
struct JsonReject {
  std::string why;
};

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  // Real headers nest three deep; serde_json stops at 128.
  constexpr int kMaxDepth = 128;
  std::vector<std::set<std::string>> keys;  // keys seen in each open object, to refuse duplicates
  int depth = 0;
  auto cb = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        if (++depth > kMaxDepth) throw JsonReject{"recursion limit exceeded"};
        if (event == E::object_start) keys.emplace_back();
        break;
      case E::object_end:
        keys.pop_back();
        --depth;
        break;
      case E::array_end:
        --depth;
        break;
      case E::key: {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(k).second) throw JsonReject{"duplicate key " + quote_name(k)};
        break;
      }
      case E::value:
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), cb);
  } catch (const JsonReject& r) {
    corrupt(source, "invalid JSON in header: " + r.why);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (what.starts_with("[json.exception.")) what = what.substr(what.find(']') + 2);
    corrupt(source, "invalid JSON in header: " + what);
  }
}

uint64_t get_usize(const nlohmann::json& v, const std::string& source, const std::string& what) {
  if (!v.is_number_unsigned()) corrupt(source, "invalid JSON in header: " + what + " must be a non-negative integer");
  return v.get<uint64_t>();
}

// Checks 4 to 10 of the reference on the header bytes of a file of `file_size` bytes.
Header parse_header(std::string_view text, uint64_t file_size, const std::string& source) {
  Header h;
  h.data_start = 8 + text.size();
  if (size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
    corrupt(source, "invalid UTF-8 in header at byte " + std::to_string(8 + bad));
  const std::string bad_json = "invalid JSON in header: ";
  // nlohmann's lexer takes a NUL byte for the end of input; valid JSON never holds a raw one.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos)
    corrupt(source, bad_json + "NUL byte at byte " + std::to_string(8 + nul));
  nlohmann::json json = parse_json(text, source);
  if (!json.is_object()) corrupt(source, bad_json + "the header is not a JSON object");
  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;  // serde reads null as no metadata
      if (!value.is_object()) corrupt(source, bad_json + "__metadata__ must be an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) corrupt(source, bad_json + "__metadata__ value for " + quote_name(k) + " is not a string");
        h.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    const std::string tensor = "tensor " + quote_name(name);
    if (!value.is_object()) corrupt(source, bad_json + tensor + " is not an object");
    Entry e;
    e.name = name;
    auto dtype = value.find("dtype");
    auto shape = value.find("shape");
    auto offsets = value.find("data_offsets");
    if (dtype == value.end()) corrupt(source, bad_json + tensor + " has no dtype");
    if (shape == value.end()) corrupt(source, bad_json + tensor + " has no shape");
    if (offsets == value.end()) corrupt(source, bad_json + tensor + " has no data_offsets");
    if (!dtype->is_string()) corrupt(source, bad_json + tensor + ": dtype is not a string");
    e.dtype = find_st_dtype(dtype->get_ref<const std::string&>());
    if (!e.dtype)
      corrupt(source, bad_json + tensor + " has unknown dtype " + quote_name(dtype->get_ref<const std::string&>()));
    if (!shape->is_array()) corrupt(source, bad_json + tensor + ": shape is not an array");
    for (const auto& d : *shape) e.shape.push_back(get_usize(d, source, tensor + " shape dimension"));
    if (!offsets->is_array() || offsets->size() != 2)
      corrupt(source, bad_json + tensor + ": data_offsets is not an array of two integers");
    e.begin = get_usize((*offsets)[0], source, tensor + " data_offsets");
    e.end = get_usize((*offsets)[1], source, tensor + " data_offsets");
    h.entries.push_back(std::move(e));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t position = 0;
  for (const Entry& e : h.entries) {
    const std::string tensor = "tensor " + quote_name(e.name);
    const std::string offsets = "[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]";
    if (e.begin != position || e.end < e.begin)
      corrupt(source, "invalid offset for " + tensor + ": data_offsets " + offsets + ", expected it to begin at " +
                          std::to_string(position));
    position = e.end;
    uint64_t elements = 1;
    for (uint64_t d : e.shape)
      if (__builtin_mul_overflow(elements, d, &elements))
        corrupt(source, "overflow computing buffer size for " + tensor + " of shape " + shape_text(e.shape));
    uint64_t bits;
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(e.dtype->bits), &bits))
      corrupt(source, "overflow computing buffer size for " + tensor + " of shape " + shape_text(e.shape));
    if (bits % 8 != 0)
      corrupt(source, "the slice is slicing for sub-byte dtypes: " + tensor + " of dtype " + e.dtype->name +
                          " and shape " + shape_text(e.shape) + " does not fill whole bytes");
    if (e.end - e.begin != bits / 8)
      corrupt(source, "invalid shape, data type, or offset for " + tensor + ": " + e.dtype->name + " " +
                          shape_text(e.shape) + " needs " + std::to_string(bits / 8) + " bytes, data_offsets " +
                          offsets + " give " + std::to_string(e.end - e.begin));
  }
  // data_start <= file_size (check 3), so this cannot underflow.
  if (position != file_size - h.data_start)
    corrupt(source, "incomplete metadata, file not fully covered: the tensors take " + std::to_string(position) +
                        " bytes but the file has " + std::to_string(file_size - h.data_start) +
                        " bytes after the header");
  return h;
}

// Checks 1 to 3: the header length N from the file's first 8 bytes.
uint64_t header_length(const char* first8, uint64_t file_size, const std::string& source) {
  if (file_size < 8)
    corrupt(source, "header too small: the file has " + std::to_string(file_size) +
                        " bytes, fewer than the 8 of the header length");
  uint64_t n = get_u64_le(first8);
  if (n > kSafetensorsMaxHeaderSize)
    corrupt(source, "header too large: " + std::to_string(n) + " bytes, more than the limit of " +
                        std::to_string(kSafetensorsMaxHeaderSize));
  if (n > file_size - 8)
    corrupt(source, "invalid header length: the header claims " + std::to_string(n) + " bytes but the file has " +
                        std::to_string(file_size) + " bytes");
  return n;
}

// Makes the tensors described by `h`, filling each with `read(dest, file_offset, bytes)`.
template <typename Read>
SafetensorsFile materialize(Header& h, const std::string& source, Read&& read) {
  SafetensorsFile out;
  out.metadata = std::move(h.metadata);
  // Refuse what stepscope cannot represent before reading any data.
  std::vector<DType> dtypes;
  for (const Entry& e : h.entries) {
    DType dt;
    if (!dtype_from_st(e.dtype->name, &dt))
      throw UnimplementedError("safetensors file '" + source + "': tensor " + quote_name(e.name) + " has dtype " +
                               e.dtype->name + "; stepscope reads F32, F64, I32, I64 and BOOL");
    if (e.shape.size() > static_cast<size_t>(Shape::kMaxRank))
      throw UnimplementedError("safetensors file '" + source + "': tensor " + quote_name(e.name) + " has rank " +
                               std::to_string(e.shape.size()) + ", more than the " + std::to_string(Shape::kMaxRank) +
                               " stepscope supports");
    for (uint64_t d : e.shape)
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw UnimplementedError("safetensors file '" + source + "': tensor " + quote_name(e.name) +
                                 " has a dimension too large for stepscope: " + shape_text(e.shape));
    dtypes.push_back(dt);
  }
  out.tensors.reserve(h.entries.size());
  for (size_t i = 0; i < h.entries.size(); ++i) {
    const Entry& e = h.entries[i];
    std::vector<int64_t> dims(e.shape.begin(), e.shape.end());
    Tensor t(dtypes[i], Shape(std::span<const int64_t>(dims)));
    const uint64_t bytes = e.end - e.begin;
    if (bytes > 0) {
      if (dtypes[i] == DType::kBool) {
        // Any byte other than 0 and 1 would be an invalid C++ bool: check before it becomes one.
        std::string raw(bytes, '\0');
        read(raw.data(), h.data_start + e.begin, bytes);
        for (uint64_t k = 0; k < bytes; ++k)
          if (static_cast<unsigned char>(raw[k]) > 1)
            corrupt(source, "BOOL tensor " + quote_name(e.name) + " holds byte " +
                                std::to_string(static_cast<unsigned char>(raw[k])) + " at element " +
                                std::to_string(k) + " (only 0 and 1 are booleans)");
        std::memcpy(t.raw_data(), raw.data(), bytes);
      } else {
        read(static_cast<char*>(t.raw_data()), h.data_start + e.begin, bytes);
      }
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing.

struct Layout {
  std::string prefix;  // N and the padded JSON header
  std::vector<std::pair<const std::string*, const Tensor*>> order;
};

Layout layout_of(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  auto check_text = [](std::string_view s, const std::string& what) {
    if (invalid_utf8_at(s) != std::string_view::npos)
      throw InvalidArgumentError("safetensors: " + what + " " + quote_name(s) + " is not valid UTF-8");
  };
  Layout l;
  std::set<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    check_text(name, "tensor name");
    if (name == "__metadata__")
      throw InvalidArgumentError("safetensors: a tensor cannot be named `__metadata__` (the name of the metadata)");
    if (!names.insert(name).second)
      throw InvalidArgumentError("safetensors: two tensors are named " + quote_name(name));
    if (!t.initialized()) throw InvalidArgumentError("safetensors: tensor " + quote_name(name) + " is uninitialized");
    st_dtype_of(t.dtype());  // refuses strings
    if (!t.shape().fully_defined())
      throw InvalidArgumentError("safetensors: tensor " + quote_name(name) + " has shape " + t.shape().to_string());
    l.order.emplace_back(&name, &t);
  }
  for (const auto& [k, v] : metadata) {
    check_text(k, "metadata key");
    check_text(v, "metadata value for " + quote_name(k) + ":");
  }
  // Widest dtypes first (so every tensor starts at a multiple of its element size), then by name.
  std::sort(l.order.begin(), l.order.end(), [](const auto& a, const auto& b) {
    int ra = st_dtype_of(a.second->dtype()).rank, rb = st_dtype_of(b.second->dtype()).rank;
    if (ra != rb) return ra > rb;
    return *a.first < *b.first;
  });
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) json += ',';
      first = false;
      json_out::append_string(json, k);
      json += ':';
      json_out::append_string(json, v);
    }
    json += '}';
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : l.order) {
    if (json.size() > 1) json += ',';
    json_out::append_string(json, *name);
    json += ":{\"dtype\":\"";
    json += st_dtype_of(t->dtype()).name;
    json += "\",\"shape\":[";
    for (int i = 0; i < t->rank(); ++i) json += (i ? "," : "") + std::to_string(t->dim(i));
    const auto bytes = static_cast<uint64_t>(t->bytes());
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  if (json.size() > kSafetensorsMaxHeaderSize)
    throw InvalidArgumentError("safetensors: header too large: " + std::to_string(json.size()) +
                               " bytes, more than the limit of " + std::to_string(kSafetensorsMaxHeaderSize));
  l.prefix.resize(8);
  put_u64_le(l.prefix.data(), json.size());
  l.prefix += json;
  return l;
}

std::vector<std::string_view> pieces_of(const Layout& l) {
  std::vector<std::string_view> pieces{l.prefix};
  for (const auto& [name, t] : l.order)
    if (t->bytes() > 0) pieces.emplace_back(static_cast<const char*>(t->raw_data()), static_cast<size_t>(t->bytes()));
  return pieces;
}

}  // namespace

const Tensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

std::string serialize_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  Layout l = layout_of(tensors, metadata);
  std::string out;
  for (std::string_view p : pieces_of(l)) out += p;
  return out;
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source) {
  uint64_t n = header_length(bytes.data(), bytes.size(), source);
  Header h = parse_header(bytes.substr(8, n), bytes.size(), source);
  return materialize(
      h, source, [&](char* dest, uint64_t offset, uint64_t count) { std::memcpy(dest, bytes.data() + offset, count); });
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Layout l = layout_of(tensors, metadata);
  write_file_atomically(path, pieces_of(l), {.sync = true});
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, NamedTensors(tensors.begin(), tensors.end()), metadata);
}

SafetensorsFile load_safetensors(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_os_error(errno, "cannot open safetensors file '" + path + "'");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_os_error(errno, "cannot stat safetensors file '" + path + "'");
  if (!S_ISREG(st.st_mode))
    throw FailedPreconditionError("cannot read safetensors file '" + path + "': not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  // A short read means the file shrank under us: report it as the corruption it looks like.
  auto read_at = [&](char* dest, uint64_t offset, uint64_t count) {
    while (count > 0) {
      ssize_t got = ::pread(fd.get(), dest, std::min<uint64_t>(count, 1 << 30), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw_os_error(errno, "cannot read safetensors file '" + path + "'");
      if (got == 0) corrupt(path, "the file ended early while reading (was it truncated while being read?)");
      dest += got, offset += got, count -= got;
    }
  };
  char first8[8] = {};
  if (file_size >= 8) read_at(first8, 0, 8);
  uint64_t n = header_length(first8, file_size, path);
  std::string text(n, '\0');
  read_at(text.data(), 8, n);
  Header h = parse_header(text, file_size, path);
  return materialize(h, path, read_at);
}

}  // namespace stepscope
