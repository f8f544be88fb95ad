// Where the user's code created a node, and a table that keeps each such place once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <source_location>
#include <string>
#include <string_view>
#include <unordered_map>

namespace stepscope {

// Where the user's code created a node (the tfprof "code" view groups by it).
struct SourceLocation {
  std::string file;
  int line = 0;
  std::string function;
  static SourceLocation from(const std::source_location& loc) {
    return {loc.file_name(), static_cast<int>(loc.line()), loc.function_name()};
  }
  bool unknown() const { return file.empty() && line == 0 && function.empty(); }
};

// Source locations, each once (a graph's nodes' call sites, a profile's sites and the frames of
// its stacks), by index. A deque: they stay put as it grows, and the index views their strings.
class SourceLocationTable {
 public:
  SourceLocationTable() = default;
  SourceLocationTable(const SourceLocationTable&) = delete;  // the index views its own strings
  SourceLocationTable& operator=(const SourceLocationTable&) = delete;
  SourceLocationTable(SourceLocationTable&&) = default;
  SourceLocationTable& operator=(SourceLocationTable&&) = default;

  int32_t intern(const SourceLocation& location);
  const SourceLocation& operator[](size_t i) const { return locations_[i]; }
  size_t size() const { return locations_.size(); }
  bool empty() const { return locations_.empty(); }
  auto begin() const { return locations_.begin(); }
  auto end() const { return locations_.end(); }

 private:
  struct Key {
    std::string_view file;
    int line;
    std::string_view function;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      const std::hash<std::string_view> h;
      return h(k.file) ^ (h(k.function) * 31) ^ (static_cast<size_t>(k.line) * 0x9E3779B97F4A7C15ull);
    }
  };
  std::deque<SourceLocation> locations_;
  std::unordered_map<Key, int32_t, KeyHash> index_;
  int32_t last_ = -1;  // the latest interned: nodes made in a loop share their site
};

}  // namespace stepscope
