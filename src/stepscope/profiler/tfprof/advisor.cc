#include "stepscope/profiler/tfprof/advisor.h"

#include <algorithm>
#include <cstdio>

#include "stepscope/profiler/tfprof/format.h"
#include "stepscope/profiler/tfprof/internal/critical_path_checker.h"
#include "stepscope/profiler/tfprof/internal/input_pipeline_checker.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/tfprof/profiler.h"

namespace stepscope {
namespace {

using tfprof::format_time;

std::string printf_string(const char* format, auto... args) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i];
  }
  return out;
}

// Options of the checkers' internal queries (positional in TensorFlow's C++).
ProfileOptions checker_options(int max_depth, int64_t min_micros, std::vector<std::string> select) {
  ProfileOptions o;
  o.max_depth = max_depth;
  o.min_micros = min_micros;
  o.order_by = "micros";
  o.account_type_regexes = {".*"};
  o.start_name_regexes = {".*"};
  o.show_name_regexes = {".*"};
  o.select = std::move(select);
  o.output = "none";
  return o;
}

class AcceleratorUtilizationChecker : public AdviceChecker {
 public:
  std::string name() const override { return "AcceleratorUtilizationChecker"; }

  std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>&,
                                 std::ostream&) const override {
    const tfprof::ProfileModel& model = profiler.model();
    // Each node's record in the latest step it ran in.
    std::vector<const tfprof::NodeStep*> latest(model.nodes.size(), nullptr);
    for (const auto& [_, data] : model.steps)
      for (const tfprof::NodeStep& r : data.nodes) latest[r.node] = &r;
    struct ExecStats {
      int64_t start_micros = 0, end_micros = 0, exec_micros = 0;
    };
    std::map<std::string, ExecStats> by_device;
    for (size_t i = 0; i < model.nodes.size(); ++i) {
      const tfprof::ModelNode& node = model.nodes[i];
      if (!latest[i] || node.device < 0 || !tfprof::is_placed_on_accelerator(model.devices[node.device])) continue;
      ExecStats& s = by_device[model.devices[node.device]];
      const tfprof::NodeStep& r = *latest[i];
      if (s.start_micros == 0)
        s.start_micros = r.all_start_micros;
      else if (r.all_start_micros != 0)
        s.start_micros = std::min(s.start_micros, r.all_start_micros);
      s.end_micros = std::max(s.end_micros, r.latest_end_micros);
      s.exec_micros += r.accelerator_micros;
    }
    std::vector<std::string> reports;
    for (const auto& [device, s] : by_device) {
      const int64_t total = s.end_micros - s.start_micros;
      if (total <= 0) continue;
      const double utilization = 1.0 * s.exec_micros / total;
      reports.push_back(
          printf_string(utilization >= 0.5 ? "device: %s utilization: %.2f" : "device: %s low utilization: %.2f",
                        device.c_str(), utilization));
    }
    return reports;
  }
};

class OperationChecker : public AdviceChecker {
 public:
  std::string name() const override { return "OperationChecker"; }

  std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>&,
                                 std::ostream&) const override {
    const tfprof::ProfileModel& model = profiler.model();
    bool batch_norm = false, fused_batch_norm = false, recommend_nchw = false;
    for (const tfprof::ModelNode& node : model.nodes) {
      if (node.name.find("BatchNorm") != std::string::npos) batch_norm = true;
      if (std::find(node.op_types.begin(), node.op_types.end(), "FusedBatchNorm") != node.op_types.end())
        fused_batch_norm = true;
      if (node.data_format == "NHWC" && node.device >= 0 &&
          tfprof::is_placed_on_accelerator(model.devices[node.device]))
        recommend_nchw = true;
    }
    std::vector<std::string> reports;
    if (batch_norm && !fused_batch_norm) reports.emplace_back("Maybe use faster FusedBatchNorm instead of BatchNorm");
    if (recommend_nchw) reports.emplace_back("Found operation using NHWC data_format on GPU. Maybe NCHW is faster.");
    return reports;
  }
};

class ExpensiveOperationChecker : public AdviceChecker {
 public:
  std::string name() const override { return "ExpensiveOperationChecker"; }

  std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>&,
                                 std::ostream& log) const override {
    std::vector<std::string> reports;
    const bool no_steps = profiler.steps().empty();
    if (no_steps) log << "Missing RunMetadata info. Skip " << name() << "\n";
    check_op_view(profiler, no_steps, log, reports);
    check_scope_view(profiler, reports);
    check_code_view(profiler, log, reports);
    return reports;
  }

 private:
  void check_op_view(const Profiler& profiler, bool no_steps, std::ostream& log,
                     std::vector<std::string>& reports) const {
    if (no_steps) {
      log << "Missing run_meta for " << name() << "\n";
      return;
    }
    const MultiGraphProfile op = profiler.profile_operations(checker_options(3, 1, {"micros", "occurrence"}));
    const MultiGraphNodeProto& root = op.root;
    if (root.children.empty()) return;
    std::vector<std::string> lines;
    const MultiGraphNodeProto* node = &root;
    for (int i = 0; i < 3 && !node->children.empty(); ++i) {
      node = &node->children[0];
      lines.push_back(printf_string(
          "top %d operation type: %s, cpu: %s, accelerator: %s, total: %s (%.2f%%)", i + 1, node->name.c_str(),
          format_time(node->cpu_exec_micros).c_str(), format_time(node->accelerator_exec_micros).c_str(),
          format_time(node->exec_micros).c_str(), 100.0 * node->exec_micros / (root.total_exec_micros + 1e-10)));
    }
    reports.push_back(join_lines(lines));
  }

  void check_scope_view(const Profiler& profiler, std::vector<std::string>& reports) const {
    const GraphProfile scope = profiler.profile_name_scope(checker_options(100, 100, {"micros"}));
    const GraphNodeProto& root = scope.root;
    if (root.children.empty()) return;
    std::vector<std::string> lines;
    for (size_t i = 0; i < 3 && i < root.children.size(); ++i) {
      const GraphNodeProto& node = root.children[i];
      lines.push_back(
          printf_string("top %d graph node: %s, cpu: %s, accelerator: %s, total: %s", static_cast<int>(i + 1),
                        node.name.c_str(), format_time(node.cpu_exec_micros).c_str(),
                        format_time(node.accelerator_exec_micros).c_str(), format_time(node.exec_micros).c_str()));
    }
    reports.push_back(join_lines(lines));
  }

  void check_code_view(const Profiler& profiler, std::ostream& log, std::vector<std::string>& reports) const {
    if (!profiler.model().has_code_traces()) {
      log << "Missing op_log (code traces) for " << name() << "\n";
      return;
    }
    const MultiGraphProfile code = profiler.profile_code(checker_options(100, 1, {"micros"}));
    const MultiGraphNodeProto* node = &code.root;
    // Library code is usually reached once, the user's own code many times: skip the chains.
    while (node->children.size() == 1) node = &node->children[0];
    if (node->children.empty()) return;
    std::vector<std::string> lines;
    code_lines(*node, 0, lines);
    reports.push_back(join_lines(lines));
  }

  static void code_lines(const MultiGraphNodeProto& node, int depth, std::vector<std::string>& lines) {
    if (node.children.size() <= 1 || depth > 3) return;
    for (size_t j = 0; j < 3 && j < node.children.size(); ++j) {
      const MultiGraphNodeProto& c = node.children[j];
      if (c.total_exec_micros < 1000) continue;
      lines.push_back(std::string(depth * 2, ' ') + c.name + ", cpu: " + format_time(c.total_cpu_exec_micros) +
                      ", accelerator: " + format_time(c.total_accelerator_exec_micros) +
                      ", total: " + format_time(c.total_exec_micros));
      code_lines(c, depth + 1, lines);
    }
  }
};

}  // namespace

std::vector<std::unique_ptr<AdviceChecker>> builtin_advice_checkers() {
  std::vector<std::unique_ptr<AdviceChecker>> checkers;
  checkers.push_back(std::make_unique<AcceleratorUtilizationChecker>());
  checkers.push_back(std::make_unique<OperationChecker>());
  checkers.push_back(std::make_unique<ExpensiveOperationChecker>());
  checkers.push_back(std::make_unique<CriticalPathChecker>());
  checkers.push_back(std::make_unique<InputPipelineChecker>());
  return checkers;
}

}  // namespace stepscope
