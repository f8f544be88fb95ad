#include "stepscope/profiler/tfprof/internal/pprof_output.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "stepscope/base/proto_wire.h"

namespace stepscope::tfprof {

namespace {

using proto_wire::put_bytes_field;
using proto_wire::put_int_field;
using proto_wire::put_key;
using proto_wire::put_varint;
using proto_wire::WireType;

// profile.proto's field numbers.
enum ProfileField : uint32_t {
  kSampleType = 1,
  kSample = 2,
  kLocation = 4,
  kFunction = 5,
  kStringTable = 6,
  kComment = 13,
  kDefaultSampleType = 14,
};

struct Unit {
  std::string_view select, unit, comment;
};
// TensorFlow's units and comments (PprofProfileImpl::Build).
constexpr Unit kUnits[] = {
    {"micros", "microseconds", "Sum of accelerator execution time and cpu execution time."},
    {"accelerator_micros", "microseconds", "Accelerator execution time."},
    {"cpu_micros", "microseconds", "CPU execution time."},
    {"bytes", "bytes", "Sum of operation total memory requests, excluding deallocations."},
    {"peak_bytes", "bytes", "Sum of operation peak memory usage."},
    {"residual_bytes", "bytes", "Sum of operation allocated memory after finish."},
    {"output_bytes", "bytes", "Sum of operation output size."},
    {"params", "count", "Model parameters."},
    {"float_ops", "count", "Model float operations (Only available if defined)."},
};

const Unit* find_unit(std::string_view select) {
  for (const Unit& u : kUnits)
    if (u.select == select) return &u;
  return nullptr;
}

int64_t value_of(const GraphNodeProto& g, std::string_view select) {
  if (select == "micros") return g.exec_micros;
  if (select == "accelerator_micros") return g.accelerator_exec_micros;
  if (select == "cpu_micros") return g.cpu_exec_micros;
  if (select == "bytes") return g.requested_bytes;
  if (select == "peak_bytes") return g.peak_bytes;
  if (select == "residual_bytes") return g.residual_bytes;
  if (select == "output_bytes") return g.output_bytes;
  if (select == "params") return g.parameters;
  return g.float_ops;
}

struct Frame {
  std::string function, file;
  int64_t line = 0;
  auto key() const { return std::tie(function, file, line); }
  bool operator<(const Frame& o) const { return key() < o.key(); }
};

// A frame of the scope and op views: a name, no file.
Frame named(const std::string& name) {
  Frame f;
  f.function = name;
  return f;
}

class Builder {
 public:
  explicit Builder(std::string_view select) : select_(select) { strings_.push_back(""), index_.emplace("", 0); }

  uint64_t str(std::string_view s) {
    auto it = index_.find(std::string(s));
    if (it != index_.end()) return it->second;
    strings_.emplace_back(s);
    index_.emplace(std::string(s), strings_.size() - 1);
    return strings_.size() - 1;
  }

  uint64_t location(const Frame& frame) {
    auto [it, inserted] = locations_.emplace(frame, locations_.size() + 1);
    if (inserted) {
      const auto [fit, fnew] = functions_.emplace(std::make_pair(frame.function, frame.file), functions_.size() + 1);
      location_function_.push_back(fit->second);
    }
    return it->second;
  }

  void sample(const std::vector<uint64_t>& root_first, const GraphNodeProto& node) {
    std::string s;
    std::string packed;
    for (auto it = root_first.rbegin(); it != root_first.rend(); ++it) put_varint(packed, *it);
    put_bytes_field(s, 1, packed);
    packed.clear();
    put_varint(packed, 1);
    put_varint(packed, static_cast<uint64_t>(value_of(node, select_)));
    put_bytes_field(s, 2, packed);
    std::string label;
    put_int_field(label, 1, static_cast<int64_t>(str("graph node:")));
    put_int_field(label, 2, static_cast<int64_t>(str(node.name)));
    put_bytes_field(s, 3, label);
    samples_.push_back(std::move(s));
  }

  std::string serialize() {
    const Unit& unit = *find_unit(select_);
    std::string out;
    auto value_type = [&](std::string_view type, std::string_view u) {
      std::string vt;
      put_int_field(vt, 1, static_cast<int64_t>(str(type)));
      put_int_field(vt, 2, static_cast<int64_t>(str(u)));
      put_bytes_field(out, kSampleType, vt);
    };
    value_type("count", "count");
    value_type(select_, unit.unit);
    const uint64_t comment = str(unit.comment);
    const uint64_t default_type = str(select_);
    for (const std::string& s : samples_) put_bytes_field(out, kSample, s);
    // Locations and functions in id order.
    std::vector<const Frame*> by_location(locations_.size());
    for (const auto& [frame, id] : locations_) by_location[id - 1] = &frame;
    for (size_t i = 0; i < by_location.size(); ++i) {
      std::string line, loc;
      put_int_field(line, 1, static_cast<int64_t>(location_function_[i]));
      if (by_location[i]->line > 0) put_int_field(line, 2, by_location[i]->line);
      put_int_field(loc, 1, static_cast<int64_t>(i + 1));
      put_bytes_field(loc, 4, line);
      put_bytes_field(out, kLocation, loc);
    }
    std::vector<const std::pair<std::string, std::string>*> by_function(functions_.size());
    for (const auto& [key, id] : functions_) by_function[id - 1] = &key;
    std::vector<std::string> functions;
    for (size_t i = 0; i < by_function.size(); ++i) {
      std::string f;
      put_int_field(f, 1, static_cast<int64_t>(i + 1));
      const uint64_t name = str(by_function[i]->first);
      put_int_field(f, 2, static_cast<int64_t>(name));
      put_int_field(f, 3, static_cast<int64_t>(name));
      if (!by_function[i]->second.empty()) put_int_field(f, 4, static_cast<int64_t>(str(by_function[i]->second)));
      functions.push_back(std::move(f));
    }
    for (const std::string& f : functions) put_bytes_field(out, kFunction, f);
    for (const std::string& s : strings_) put_bytes_field(out, kStringTable, s);
    put_int_field(out, kComment, static_cast<int64_t>(comment));
    put_int_field(out, kDefaultSampleType, static_cast<int64_t>(default_type));
    return out;
  }

 private:
  std::string select_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint64_t> index_;
  std::map<Frame, uint64_t> locations_;
  std::vector<uint64_t> location_function_;  // by location id - 1
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::vector<std::string> samples_;
};

// A code view row "file.cc:42:function" (+ " (gradient)") as a frame: function
// "file:function" (+ suffix), as TensorFlow names functions, in file "file.cc" at line 42.
Frame code_frame(std::string_view name) {
  constexpr std::string_view kGradient = " (gradient)";
  std::string suffix;
  if (name.ends_with(kGradient)) {
    suffix = kGradient;
    name.remove_suffix(kGradient.size());
  }
  Frame f;
  const size_t colon = name.find(':');
  const size_t colon2 = colon == std::string_view::npos ? colon : name.find(':', colon + 1);
  if (colon2 == std::string_view::npos) {
    f.function = std::string(name) + suffix;
    return f;
  }
  f.file = std::string(name.substr(0, colon));
  for (char c : name.substr(colon + 1, colon2 - colon - 1)) {
    if (c < '0' || c > '9') break;
    f.line = f.line * 10 + (c - '0');
  }
  std::string_view base = f.file;
  if (size_t dot = base.rfind('.'); dot != std::string_view::npos) base = base.substr(0, dot);
  f.function = std::string(base) + ":" + std::string(name.substr(colon2 + 1)) + suffix;
  return f;
}

// Calls enter(row, path) for `top` and each row below it, depth first, with the path of their
// frames (root first; frame_of(row) adds each row's own). Over an explicit stack of the rows on
// the path (and the next child of each): a view is as deep as its graph, or its code's stacks.
template <typename Row, typename Frame, typename Enter>
void walk_rows(Builder& b, const Row& top, Frame frame_of, Enter enter) {
  std::vector<uint64_t> path;
  std::vector<std::pair<const Row*, size_t>> open;
  auto visit = [&](const Row& row) {
    path.push_back(b.location(frame_of(row)));
    enter(row, path);
    open.emplace_back(&row, 0);
  };
  visit(top);
  while (!open.empty()) {
    auto& [row, next] = open.back();
    if (next == row->children.size()) {
      path.pop_back();
      open.pop_back();
    } else {
      visit(row->children[next++]);
    }
  }
}

void code_rows(Builder& b, const MultiGraphNodeProto& top) {
  walk_rows(
      b, top, [](const MultiGraphNodeProto& row) { return code_frame(row.name); },
      [&](const MultiGraphNodeProto& row, const std::vector<uint64_t>& path) {
        for (const GraphNodeProto& g : row.graph_nodes) b.sample(path, g);
      });
}

void scope_rows(Builder& b, const GraphNodeProto& top, std::string_view select) {
  walk_rows(
      b, top, [](const GraphNodeProto& row) { return named(row.name); },
      [&](const GraphNodeProto& row, const std::vector<uint64_t>& path) {
        if (value_of(row, select) != 0) b.sample(path, row);
      });
}

}  // namespace

std::string pprof_select_error(const std::vector<std::string>& select) {
  std::vector<std::string> unique = select;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  if (unique.size() != 1) return "Can only select 1 attribute for pprof output.";
  if (!find_unit(unique[0])) return "pprof doesn't support -select=" + unique[0];
  return "";
}

std::string pprof_profile(std::string_view cmd, const MultiGraphNodeProto& root, std::string_view select) {
  Builder b(select);
  if (cmd == "code") {
    for (const MultiGraphNodeProto& row : root.children) code_rows(b, row);
    return b.serialize();
  }
  std::vector<uint64_t> path;
  // The op view: rows chained as TensorFlow's proto has them (each the one child of the row
  // before); every op type is a top-level frame, a sample per node on [node, op type].
  for (const MultiGraphNodeProto* row = root.children.empty() ? nullptr : &root.children.front(); row;
       row = row->children.empty() ? nullptr : &row->children.front()) {
    path.assign(1, b.location(named(row->name)));
    for (const GraphNodeProto& g : row->graph_nodes) {
      if (value_of(g, select) == 0) continue;
      path.push_back(b.location(named(g.name)));
      b.sample(path, g);
      path.pop_back();
    }
  }
  return b.serialize();
}

std::string pprof_profile(std::string_view, const GraphNodeProto& root, std::string_view select) {
  Builder b(select);
  for (const GraphNodeProto& row : root.children) scope_rows(b, row, select);
  return b.serialize();
}

}  // namespace stepscope::tfprof
