// The code view (tfprof_code.cc): a tree of call sites. Each node's creation stack, outermost
// frame first, is a path from the root (TFCode::AddNode); the node counts at the path's last
// frame, and every frame totals the nodes created below it. Nodes without a stack (captured off,
// older profiles) go under the one line their std::source_location recorded.
#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "stepscope/profiler/symbolizer.h"
#include "stepscope/profiler/tfprof/internal/show.h"
#include "stepscope/profiler/tfprof/internal/views.h"

namespace stepscope::tfprof {
namespace {

constexpr std::string_view kGradientSuffix = " (gradient)";

// "...gradients/<forward>_grad/..." -> <forward> (TensorFlow's IsGradNode).
bool forward_name_of_gradient(std::string_view name, std::string_view* forward) {
  const size_t prefix = name.find("gradients/");
  const size_t suffix = name.find("_grad/");
  if (prefix == std::string_view::npos || suffix == std::string_view::npos) return false;
  const size_t start = prefix + std::string_view("gradients/").size();
  if (suffix <= start) return false;
  *forward = name.substr(start, suffix - start);
  return true;
}

struct CodeQuery {
  const CodeTree& tree;
  const ProfileModel& model;
  const std::vector<NodeStats>& stats;
  const ViewOptions& o;
  std::vector<MultiGraphNodeProto> protos;
  std::vector<MultiExtra> extras;
  std::vector<char> account;
  std::vector<std::vector<int32_t>> show_children;
  std::vector<std::string> lines;

  CodeQuery(const CodeTree& t, const ProfileModel& m, const std::vector<NodeStats>& s, const ViewOptions& opts)
      : tree(t),
        model(m),
        stats(s),
        o(opts),
        protos(t.entries.size()),
        extras(t.entries.size()),
        account(t.entries.size(), 0),
        show_children(t.entries.size()),
        lines(t.entries.size()) {}

  std::vector<int32_t> account_lines(const std::vector<int32_t>& roots) {
    std::vector<int32_t> kept;
    for (int32_t e : roots) {
      reset_totals(protos[e]);
      std::vector<int32_t> kept_children = account_lines(tree.entries[e].children);
      account[e] = snapshot_multi_node(protos[e], extras[e], tree.entries[e].name, tree.entries[e].nodes, model, stats,
                                       o.account);
      if (account[e] || !kept_children.empty()) {
        show_children[e].clear();
        reset_totals(protos[e]);
        add_self_to_totals(protos[e]);
        for (int32_t c : kept_children) {
          aggregate_totals(protos[e], protos[c]);
          show_children[e].push_back(c);
        }
        kept.push_back(e);
      }
    }
    return kept;
  }

  std::vector<int32_t> search_root(const std::vector<int32_t>& roots) {
    std::vector<int32_t> found;
    for (int32_t e : roots) {
      if (o.start.matches(tree.entries[e].name)) {
        found.push_back(e);
        continue;
      }
      std::vector<int32_t> below = search_root(show_children[e]);
      found.insert(found.end(), below.begin(), below.end());
    }
    return found;
  }

  std::string format_line(int32_t e, int indent) const {
    const MultiGraphNodeProto& p = protos[e];
    const bool acc = account[e] != 0;
    std::vector<std::string> attrs;
    if (o.has(Field::kBytes))
      attrs.push_back(self_total(acc, format_memory(p.requested_bytes), format_memory(p.total_requested_bytes)));
    if (o.has(Field::kPeakBytes))
      attrs.push_back(self_total(acc, format_memory(p.peak_bytes), format_memory(p.total_peak_bytes)));
    if (o.has(Field::kResidualBytes))
      attrs.push_back(self_total(acc, format_memory(p.residual_bytes), format_memory(p.total_residual_bytes)));
    if (o.has(Field::kOutputBytes))
      attrs.push_back(self_total(acc, format_memory(p.output_bytes), format_memory(p.total_output_bytes)));
    const bool micros = o.has(Field::kMicros);
    if (micros) attrs.push_back(self_total(acc, format_time(p.exec_micros), format_time(p.total_exec_micros)));
    if (micros || o.has(Field::kAcceleratorMicros))
      attrs.push_back(
          self_total(acc, format_time(p.accelerator_exec_micros), format_time(p.total_accelerator_exec_micros)));
    if (micros || o.has(Field::kCpuMicros))
      attrs.push_back(self_total(acc, format_time(p.cpu_exec_micros), format_time(p.total_cpu_exec_micros)));
    if (o.has(Field::kParams))
      attrs.push_back(self_total(acc, format_number(p.parameters), format_number(p.total_parameters) + " params"));
    if (o.has(Field::kFloatOps))
      attrs.push_back(self_total(acc, format_number(p.float_ops), format_number(p.total_float_ops) + " flops"));
    const MultiExtra& x = extras[e];
    if (o.has(Field::kDevice) && !x.devices.empty())
      attrs.push_back(join(std::vector<std::string>(x.devices.begin(), x.devices.end()), "|"));
    if (o.has(Field::kOpTypes))
      attrs.push_back(join(std::vector<std::string>(x.op_types.begin(), x.op_types.end()), "|"));
    if (o.has(Field::kOccurrence)) attrs.emplace_back("occurrence N/A in code view");
    if (o.has(Field::kInputShapes)) attrs.emplace_back("input_shapes N/A in code view");
    return std::string(indent, ' ') + p.name + " (" + join(attrs, ", ") + ")\n";
  }

  std::vector<int32_t> print(const std::vector<int32_t>& roots, int depth, int last_indent) {
    std::vector<int32_t> shown;
    for (int32_t e : roots) {
      if ((!o.trim.empty() && o.trim.matches(tree.entries[e].name)) || depth > o.max_depth) continue;
      const bool show = e == 0 || (passes_floors(protos[e], o, depth) && passes_names(protos[e].name, o));
      const int indent = show ? last_indent + 2 : last_indent;
      std::vector<int32_t> shown_children = print(show_children[e], depth + 1, indent);
      if (show) {
        sort_by_order(shown_children, protos, o.order_by);
        show_children[e] = std::move(shown_children);
        lines[e] = format_line(e, last_indent);
        shown.push_back(e);
      } else {
        shown.insert(shown.end(), shown_children.begin(), shown_children.end());
      }
    }
    return shown;
  }

  void format(int32_t e, std::string& text, MultiGraphNodeProto& out, std::vector<int32_t>& displayed) {
    out.children.reserve(show_children[e].size());
    for (int32_t c : show_children[e]) {  // a tree: each entry is shown once, moved into its place
      text += lines[c];
      displayed.insert(displayed.end(), tree.entries[c].nodes.begin(), tree.entries[c].nodes.end());
      format(c, text, out.children.emplace_back(std::move(protos[c])), displayed);
    }
  }

  MultiViewResult run(std::ostream& log) {
    if (o.account_displayed_op_only) log << "Note: code view ignores account_displayed_op_only\n";
    size_t all_nodes = 0;
    for (const auto& entry : tree.entries) all_nodes += entry.nodes.size();
    BulkArena arena = arena_for_protos(all_nodes);
    const BulkArena::Use use(arena);
    snapshot_multi_node(protos[0], extras[0], kTFProfRoot, {}, model, stats, o.account);
    reset_totals(protos[0]);
    std::vector<int32_t> roots = account_lines(tree.entries[0].children);
    for (int32_t e : roots) aggregate_totals(protos[0], protos[e]);
    if (!o.start.is_all()) roots = search_root(roots);
    show_children[0] = roots;
    print({0}, 1, 0);
    MultiViewResult result;
    std::string text = multi_legend(o) + lines[0];
    result.root = std::move(protos[0]);
    format(0, text, result.root, result.displayed);
    result.text = ViewText(std::move(text));
    return result;
  }
};

}  // namespace

std::string code_trace_name(const SourceLocation& location) {
  std::string_view file = location.file;
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos) file = file.substr(slash + 1);
  if (file.empty()) file = "??";  // no debug info: addr2line's spelling
  std::string function = bare_function_name(location.function);
  if (function.size() >= 20) function = function.substr(0, 17) + "...";
  return std::string(file) + ":" + std::to_string(location.line) + ":" + function;
}

CodeTree build_code_tree(const ProfileModel& model) {
  CodeTree tree;
  tree.entries.push_back({std::string(kTFProfRoot), {}, {}});
  // Entries are found by (parent, trace name, gradient or not), the trace name as a number: each
  // frame's and site's name is made once, and frames of one name (same basename, line and
  // function) share it, as TensorFlow's string keys do.
  std::vector<std::string> trace_names;
  std::unordered_map<std::string, int32_t> trace_name_ids;
  auto trace_name_id = [&](std::string name) {
    auto [it, inserted] = trace_name_ids.emplace(name, static_cast<int32_t>(trace_names.size()));
    if (inserted) trace_names.push_back(std::move(name));
    return it->second;
  };
  std::vector<int32_t> frame_name(model.frames.size());
  for (size_t f = 0; f < model.frames.size(); ++f) frame_name[f] = trace_name_id(code_trace_name(model.frames[f]));
  std::vector<int32_t> site_name(model.sites.size() + 1);  // [0]: the unknown site
  site_name[0] = trace_name_id(code_trace_name(SourceLocation{}));
  for (size_t i = 0; i < model.sites.size(); ++i) site_name[i + 1] = trace_name_id(code_trace_name(model.sites[i]));
  std::unordered_map<uint64_t, int32_t> child_of;  // (parent, trace name id, gradient) -> entry
  auto child = [&](int32_t parent, int32_t name, bool gradient) {
    const uint64_t key = (static_cast<uint64_t>(parent) << 32) | (static_cast<uint64_t>(name) << 1) | gradient;
    auto [it, inserted] = child_of.emplace(key, static_cast<int32_t>(tree.entries.size()));
    if (inserted) {
      tree.entries.push_back({trace_names[name] + std::string(gradient ? kGradientSuffix : ""), {}, {}});
      tree.entries[parent].children.push_back(it->second);
    }
    return it->second;
  };
  // The path's last entry (TFCode::AddNode; a gradient's path has every frame suffixed, Build).
  auto leaf = [&](const ModelNode& node, bool gradient) {
    int32_t at = 0;
    if (node.stack.empty()) return child(0, site_name[node.site + 1], gradient);
    for (int32_t frame : node.stack) at = child(at, frame_name[frame], gradient);
    return at;
  };

  const std::vector<int32_t> by_name = model.order_by_name();

  const auto traced = [&](const ModelNode& node) { return !model.site_of(node).file.empty() || !node.stack.empty(); };
  const auto is_gradient = [](std::string_view name) {
    std::string_view forward;
    return forward_name_of_gradient(name, &forward);
  };
  std::map<std::string_view, std::vector<int32_t>> gradients;  // forward name -> gradient nodes
  for (int32_t index : by_name) {
    const ModelNode& node = model.nodes[index];
    if (!traced(node)) continue;
    std::string_view forward;
    if (forward_name_of_gradient(node.name, &forward)) {
      gradients[forward].push_back(index);
      continue;
    }
    tree.entries[leaf(node, false)].nodes.push_back(index);
  }
  // A gradient's forward node: the model's node of that name, if it went in above.
  for (const auto& [name, grads] : gradients) {
    const int32_t f = model.find(name);
    if (f < 0 || !traced(model.nodes[f]) || is_gradient(model.nodes[f].name)) {
      ++tree.unaccounted_gradients;
      continue;
    }
    auto& nodes = tree.entries[leaf(model.nodes[f], true)].nodes;
    nodes.insert(nodes.end(), grads.begin(), grads.end());
  }
  // Nodes were added in name order; only a gradient entry shared by several forward nodes is not.
  const auto by_node_name = [&](int32_t a, int32_t b) { return model.nodes[a].name < model.nodes[b].name; };
  for (CodeTree::Entry& e : tree.entries)
    if (!std::is_sorted(e.nodes.begin(), e.nodes.end(), by_node_name))
      std::sort(e.nodes.begin(), e.nodes.end(), by_node_name);
  return tree;
}

MultiViewResult show_code(const CodeTree& tree, const ProfileModel& model, const std::vector<NodeStats>& stats,
                          const ViewOptions& options, std::ostream& log) {
  return CodeQuery(tree, model, stats, options).run(log);
}

}  // namespace stepscope::tfprof
