#include "stepscope/profiler/tfprof/profile_diff.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "stepscope/base/error.h"
#include "stepscope/base/json_out.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

namespace {

using tfprof::NodeStep;
using tfprof::ProfileModel;
using tfprof::StepData;

constexpr double kInf = std::numeric_limits<double>::infinity();

double ratio(double a, double b) {
  if (a == 0) return b == 0 ? 1.0 : kInf;
  return b / a;
}

std::string printf_string(const char* format, ...) {
  char buf[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

// The wall time of a step: its start (or the first op's) to the last op's end, on every device.
double step_wall_micros(const StepData& data) {
  if (data.execs.empty()) return 0;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const tfprof::ExecRecord& e : data.execs) {
    first = std::min(first, e.all_start_ns);
    last = std::max(last, e.all_start_ns + std::max<int64_t>(e.all_end_rel_ns, e.op_end_rel_ns));
  }
  // As the critical path: from the step's start when it was recorded.
  if (data.base_ns != 0 && data.base_ns <= first) first = data.base_ns;
  return static_cast<double>(last - first) / 1000.0;
}

// One side's per-node statistics per step, by node index of its model.
struct NodeTotals {
  double micros = 0, bytes = 0, peak_bytes = 0;
  bool ran = false;
};

struct SideData {
  const Profiler* profiler = nullptr;
  const ProfileModel* model = nullptr;
  std::vector<NodeTotals> nodes;
};

SideData measure(const Profiler& profiler, int64_t step, const std::string& label, DiffSide& side) {
  SideData data{&profiler, &profiler.model(), {}};
  const ProfileModel& model = *data.model;
  side.label = label;
  side.step = step;
  side.nodes = static_cast<int64_t>(model.nodes.size());
  std::string available;
  for (const auto& [s, _] : model.steps) available += (available.empty() ? "" : " ") + std::to_string(s);
  if (model.steps.empty()) throw NotFoundError(label + ": the profile has no steps");
  if (step >= 0 && !model.steps.count(step))
    throw NotFoundError(label + ": no step " + std::to_string(step) + " (steps: " + available + ")");

  data.nodes.assign(model.nodes.size(), {});
  std::vector<std::pair<double, int64_t>> walls;  // (wall, step)
  for (const auto& [s, step_data] : model.steps) {
    if (step >= 0 && s != step) continue;
    side.steps.push_back(s);
    walls.emplace_back(step_wall_micros(step_data), s);
    for (const NodeStep& r : step_data.nodes) {
      NodeTotals& t = data.nodes[r.node];
      t.micros += static_cast<double>(r.accelerator_micros + r.cpu_micros);
      t.bytes += static_cast<double>(r.requested_bytes);
      t.peak_bytes += static_cast<double>(r.peak_bytes);
      if (r.run_count > 0) t.ran = true;
    }
  }
  const double n = static_cast<double>(side.steps.size());
  for (NodeTotals& t : data.nodes) {
    t.micros /= n;
    t.bytes /= n;
    t.peak_bytes /= n;
    side.op_micros += t.micros;
    side.bytes += t.bytes;
  }
  for (const auto& [wall, _] : walls) side.step_micros += wall;
  side.step_micros /= n;
  // The critical path of the step, or of the median step by wall time.
  std::vector<std::pair<double, int64_t>> sorted = walls;
  std::sort(sorted.begin(), sorted.end());
  side.critical_path_step = sorted[(sorted.size() - 1) / 2].second;
  side.critical_path = critical_path(profiler.step_stats(side.critical_path_step));
  return data;
}

void add_to(DiffRow& row, const NodeTotals& t, bool is_a) {
  (is_a ? row.micros_a : row.micros_b) += t.micros;
  (is_a ? row.bytes_a : row.bytes_b) += t.bytes;
  (is_a ? row.peak_bytes_a : row.peak_bytes_b) += t.peak_bytes;
  if (t.ran) ++(is_a ? row.nodes_a : row.nodes_b);
}

// Rows by name, in first-seen order, then sorted.
class RowTable {
 public:
  DiffRow& at(std::string_view name) {
    auto it = index_.find(name);
    if (it != index_.end()) return rows_[it->second];
    index_.emplace(std::string(name), rows_.size());
    DiffRow& row = rows_.emplace_back();
    row.name = std::string(name);
    return row;
  }
  std::vector<DiffRow> sorted() && {
    std::sort(rows_.begin(), rows_.end(), [](const DiffRow& x, const DiffRow& y) {
      const double dx = std::abs(x.delta_micros()), dy = std::abs(y.delta_micros());
      if (dx != dy) return dx > dy;
      const double bx = std::abs(x.delta_bytes()), by = std::abs(y.delta_bytes());
      if (bx != by) return bx > by;
      return x.name < y.name;
    });
    return std::move(rows_);
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::vector<DiffRow> rows_;
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> index_;
};

void add_side(const SideData& side, bool is_a, RowTable& ops, RowTable& scopes, RowTable& nodes) {
  const ProfileModel& model = *side.model;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const tfprof::ModelNode& node = model.nodes[i];
    const NodeTotals& t = side.nodes[i];
    add_to(nodes.at(node.name), t, is_a);
    add_to(ops.at(node.op), t, is_a);
    const std::string_view name = node.name;
    for (size_t slash = name.find('/'); slash != std::string_view::npos; slash = name.find('/', slash + 1))
      add_to(scopes.at(name.substr(0, slash)), t, is_a);
  }
}

// "12us", "4.29ms", "1.37sec" (tfprof's units; fractions of a µs from averages kept below 10).
std::string format_micros(double us) {
  const double a = std::abs(us);
  if (a < 10 && a != std::floor(a)) return printf_string("%.1fus", us);
  if (a < 1000) return printf_string("%.0fus", us);
  if (a < 1e6) return printf_string("%.2fms", us / 1000.0);
  return printf_string("%.2fsec", us / 1e6);
}
std::string format_bytes(double bytes) {
  const double a = std::abs(bytes);
  if (a < 1000) return printf_string("%.0fB", bytes);
  if (a < 1e6) return printf_string("%.2fKB", bytes / 1000.0);
  return printf_string("%.2fMB", bytes / 1e6);
}
std::string signed_(std::string s, double v) { return v > 0 ? "+" + s : s; }
std::string format_ratio(double r) {
  if (std::isinf(r)) return "new";
  if (r == 0) return "gone";
  return printf_string("%.3fx", r);
}

std::string describe(const DiffSide& s) {
  if (s.step >= 0) return "step " + std::to_string(s.step);
  if (s.steps.size() == 1) return "its one step, " + std::to_string(s.steps.front());
  return "average of " + std::to_string(s.steps.size()) + " steps, " + std::to_string(s.steps.front()) + ".." +
         std::to_string(s.steps.back());
}

std::string pad(std::string s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}
std::string cut(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return "..." + s.substr(s.size() - (width - 3));
}

void append_table(std::string& out, const char* title, const char* what, const std::vector<DiffRow>& rows,
                  size_t max_rows) {
  size_t width = std::string_view(what).size();
  const size_t shown = std::min(rows.size(), max_rows);
  for (size_t i = 0; i < shown; ++i) width = std::max(width, std::min<size_t>(rows[i].name.size(), 60));
  out += printf_string("\n%s (by |B-A| time; %zu of %zu):\n", title, shown, rows.size());
  out += pad(what, width, true) + pad("time A", 11) + pad("time B", 11) + pad("B-A", 11) + pad("B/A", 9) +
         pad("bytes A", 11) + pad("bytes B", 11) + pad("B-A", 11) + "\n";
  for (size_t i = 0; i < shown; ++i) {
    const DiffRow& r = rows[i];
    std::string line =
        pad(cut(r.name, 60), width, true) + pad(format_micros(r.micros_a), 11) + pad(format_micros(r.micros_b), 11) +
        pad(signed_(format_micros(r.delta_micros()), r.delta_micros()), 11) + pad(format_ratio(r.ratio_micros()), 9) +
        pad(format_bytes(r.bytes_a), 11) + pad(format_bytes(r.bytes_b), 11) +
        pad(signed_(format_bytes(r.delta_bytes()), r.delta_bytes()), 11);
    if (r.appeared()) line += "  (appeared)";
    if (r.disappeared()) line += "  (disappeared)";
    out += line + "\n";
  }
  if (rows.size() > shown) out += printf_string("... %zu more\n", rows.size() - shown);
}

void append_names(std::string& out, const char* title, const std::vector<std::string>& names, size_t max) {
  if (names.empty()) return;
  out += printf_string("%s: %zu:", title, names.size());
  for (size_t i = 0; i < names.size() && i < max; ++i) out += " " + names[i];
  if (names.size() > max) out += printf_string(" ... (%zu more)", names.size() - max);
  out += "\n";
}

void append_json_number(std::string& out, double v) {
  if (std::isinf(v) || std::isnan(v)) {
    out += "null";
    return;
  }
  if (v == std::floor(v) && std::abs(v) < 9e15) {
    out += std::to_string(static_cast<int64_t>(v));
    return;
  }
  out += printf_string("%.12g", v);
}

void append_side_json(std::string& out, const DiffSide& s) {
  out += "{\"label\":";
  json_out::append_string(out, s.label);
  out += ",\"step\":" + std::to_string(s.step) + ",\"steps\":[";
  for (size_t i = 0; i < s.steps.size(); ++i) out += (i ? "," : "") + std::to_string(s.steps[i]);
  out += "],\"step_micros\":";
  append_json_number(out, s.step_micros);
  out += ",\"op_micros\":";
  append_json_number(out, s.op_micros);
  out += ",\"bytes\":";
  append_json_number(out, s.bytes);
  out += ",\"nodes\":" + std::to_string(s.nodes) + ",\"critical_path_step\":" + std::to_string(s.critical_path_step) +
         ",\"critical_path\":" + s.critical_path.to_json() + "}";
}

void append_rows_json(std::string& out, const char* key, const std::vector<DiffRow>& rows) {
  out += ",\"";
  out += key;
  out += "\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const DiffRow& r = rows[i];
    if (i) out += ',';
    out += "{\"name\":";
    json_out::append_string(out, r.name);
    const std::pair<const char*, double> fields[] = {
        {"micros_a", r.micros_a},           {"micros_b", r.micros_b},         {"delta_micros", r.delta_micros()},
        {"ratio_micros", r.ratio_micros()}, {"bytes_a", r.bytes_a},           {"bytes_b", r.bytes_b},
        {"delta_bytes", r.delta_bytes()},   {"ratio_bytes", r.ratio_bytes()}, {"peak_bytes_a", r.peak_bytes_a},
        {"peak_bytes_b", r.peak_bytes_b},   {"nodes_a", double(r.nodes_a)},   {"nodes_b", double(r.nodes_b)}};
    for (const auto& [name, value] : fields) {
      out += ",\"";
      out += name;
      out += "\":";
      append_json_number(out, value);
    }
    out += ",\"status\":\"";
    out += r.ran_a() ? (r.ran_b() ? "both" : "disappeared") : (r.ran_b() ? "appeared" : "neither");
    out += "\"}";
  }
  out += "]";
}

void append_names_json(std::string& out, const char* key, const std::vector<std::string>& names) {
  out += ",\"";
  out += key;
  out += "\":[";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    json_out::append_string(out, names[i]);
  }
  out += "]";
}

std::string path_cell(const CriticalPathOp& op) {
  return cut(op.op_type + " " + op.name, 44) + " " + format_micros(static_cast<double>(op.duration_ns) / 1000.0);
}

}  // namespace

double DiffRow::ratio_micros() const { return ratio(micros_a, micros_b); }
double DiffRow::ratio_bytes() const { return ratio(bytes_a, bytes_b); }
double ProfileDiff::step_ratio() const { return ratio(a.step_micros, b.step_micros); }

ProfileDiff diff_profiles(const Profiler& a, const Profiler& b, const DiffOptions& options) {
  ProfileDiff diff;
  const SideData side_a = measure(a, options.step_a, options.label_a, diff.a);
  const SideData side_b = measure(b, options.step_b, options.label_b, diff.b);
  RowTable ops, scopes, nodes;
  add_side(side_a, true, ops, scopes, nodes);
  add_side(side_b, false, ops, scopes, nodes);
  diff.op_types = std::move(ops).sorted();
  diff.scopes = std::move(scopes).sorted();
  diff.nodes = std::move(nodes).sorted();
  for (const tfprof::ModelNode& n : side_a.model->nodes)
    if (side_b.model->find(n.name) < 0) diff.only_in_a.push_back(n.name);
  for (const tfprof::ModelNode& n : side_b.model->nodes)
    if (side_a.model->find(n.name) < 0) diff.only_in_b.push_back(n.name);
  std::sort(diff.only_in_a.begin(), diff.only_in_a.end());
  std::sort(diff.only_in_b.begin(), diff.only_in_b.end());
  return diff;
}

std::string ProfileDiff::to_text(const DiffTextOptions& options) const {
  std::string out;
  const double r = step_ratio();
  out += "step time: A " + format_micros(a.step_micros) + " (" + describe(a) + "), B " + format_micros(b.step_micros) +
         " (" + describe(b) + "), B/A " +
         (std::isinf(r) ? std::string("inf") : printf_string("%.3fx (%+.1f%%)", r, (r - 1) * 100)) + "\n";
  out += "A: " + a.label + "\nB: " + b.label + "\n";
  out += "op time per step: A " + format_micros(a.op_micros) + ", B " + format_micros(b.op_micros) +
         "; bytes requested per step: A " + format_bytes(a.bytes) + ", B " + format_bytes(b.bytes) + "\n";
  append_table(out, "Op types", "op type", op_types, options.max_rows);
  append_table(out, "Name scopes", "name scope", scopes, options.max_rows);
  append_table(out, "Nodes", "node", nodes, options.max_rows);

  std::vector<std::string> appeared, disappeared;
  for (const DiffRow& row : nodes) {
    if (row.appeared()) appeared.push_back(row.name);
    if (row.disappeared()) disappeared.push_back(row.name);
  }
  std::sort(appeared.begin(), appeared.end());
  std::sort(disappeared.begin(), disappeared.end());
  if (!appeared.empty() || !disappeared.empty() || !only_in_a.empty() || !only_in_b.empty()) out += "\n";
  append_names(out, "Appeared (ran in B, not in A)", appeared, options.max_names);
  append_names(out, "Disappeared (ran in A, not in B)", disappeared, options.max_names);
  append_names(out, "Nodes known to A only", only_in_a, options.max_names);
  append_names(out, "Nodes known to B only", only_in_b, options.max_names);

  out += "\nCritical paths (A: step " + std::to_string(a.critical_path_step) + ", " +
         format_micros(a.critical_path.wall_ns / 1000.0) + ", " + std::to_string(a.critical_path.ops.size()) +
         " ops; B: step " + std::to_string(b.critical_path_step) + ", " +
         format_micros(b.critical_path.wall_ns / 1000.0) + ", " + std::to_string(b.critical_path.ops.size()) +
         " ops):\n";
  const size_t rows = std::max(a.critical_path.ops.size(), b.critical_path.ops.size());
  const size_t shown = std::min(rows, options.max_path_rows);
  bool differ = false;
  for (size_t i = 0; i < shown; ++i) {
    const std::string left = i < a.critical_path.ops.size() ? path_cell(a.critical_path.ops[i]) : "";
    const std::string right = i < b.critical_path.ops.size() ? path_cell(b.critical_path.ops[i]) : "";
    const bool same = i < a.critical_path.ops.size() && i < b.critical_path.ops.size() &&
                      a.critical_path.ops[i].name == b.critical_path.ops[i].name;
    differ |= !same;
    out += pad(std::to_string(i + 1), 4) + "  " + pad(left, 56, true) + (same ? " | " : " * ") + right + "\n";
  }
  if (rows > shown) out += printf_string("... %zu more\n", rows - shown);
  if (differ) out += "(*: the two paths differ at this row)\n";
  return out;
}

std::string ProfileDiff::to_json() const {
  std::string out = "{\"a\":";
  append_side_json(out, a);
  out += ",\"b\":";
  append_side_json(out, b);
  out += ",\"step_ratio\":";
  append_json_number(out, step_ratio());
  append_rows_json(out, "op_types", op_types);
  append_rows_json(out, "scopes", scopes);
  append_rows_json(out, "nodes", nodes);
  append_names_json(out, "only_in_a", only_in_a);
  append_names_json(out, "only_in_b", only_in_b);
  out += "}";
  return out;
}

}  // namespace stepscope
