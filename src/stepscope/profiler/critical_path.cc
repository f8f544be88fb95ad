#include "stepscope/profiler/critical_path.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "stepscope/base/error.h"
#include "stepscope/base/json_out.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/node_label.h"
#include "stepscope/profiler/gpu_activity.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

const char* critical_path_edge_name(CriticalPathEdge edge) {
  switch (edge) {
    case CriticalPathEdge::kStart:
      return "start";
    case CriticalPathEdge::kData:
      return "data";
    case CriticalPathEdge::kControl:
      return "control";
    case CriticalPathEdge::kLaunch:
      return "launch";
    case CriticalPathEdge::kStream:
      return "stream";
  }
  return "start";
}

namespace {

struct Record {
  const NodeExecStats* stats;
  std::string_view device;
  const Node* node;  // null when the graph is not known or has no such node
  int64_t start;
  int64_t end;
  int prev_on_stream = -1;  // GPU work: the record before it on its stream (-1: none)
  bool gpu = false;         // on a GPU tracer's stream device
};

// "/stream:<digits>": a device with one GPU stream's work.
bool is_one_stream(std::string_view device) {
  const size_t at = device.rfind("/stream:");
  if (at == std::string_view::npos || at + 8 == device.size()) return false;
  for (char c : device.substr(at + 8))
    if (c < '0' || c > '9') return false;
  return true;
}

struct Predecessor {
  int record;
  CriticalPathEdge edge;
};

// A fed node: the executor records each one at the step's start, lasting nothing, allocating
// nothing (its outputs are the fed tensors). It ran nothing and held nothing up: not an op of
// the step here, so the path starts at the ops that read it.
bool is_feed(const NodeExecStats& ns, const StepStats& step) {
  return step.base_ns != 0 && ns.all_start_ns == step.base_ns && ns.scheduled_ns == step.base_ns &&
         ns.all_end_rel_ns == 0 && ns.memory.empty();
}

class PathFinder {
 public:
  PathFinder(const Graph* graph, const StepStats& step) : graph_(graph) {
    size_t n = 0;
    for (const auto& dev : step.dev_stats()) n += dev.node_stats.size();
    records_.reserve(n);
    if (graph_) by_id_.assign(graph_->num_nodes(), -1);
    bool per_stream = false;
    for (const auto& dev : step.dev_stats()) per_stream |= is_one_stream(dev.device);
    for (const auto& dev : step.dev_stats()) {
      const bool stream = is_one_stream(dev.device);
      if (per_stream && !stream && is_gpu_tracer_device(dev.device)) continue;  // repeats of stream records
      int prev = -1;
      for (const auto& ns : dev.node_stats) {
        if (is_feed(ns, step)) continue;
        add(dev.device, ns);
        if (stream) {
          records_.back().gpu = true;
          if (prev >= 0 && records_[prev].start <= records_.back().start) records_.back().prev_on_stream = prev;
          prev = static_cast<int>(records_.size()) - 1;
        }
      }
    }
    if (!graph_) {
      for (size_t i = 0; i < records_.size(); ++i) by_end_.emplace(records_[i].end, static_cast<int>(i));
    }
  }

  CriticalPath find(const StepStats& step) const {
    CriticalPath path;
    if (records_.empty()) return path;
    path.num_ops = static_cast<int>(records_.size());

    // The step starts at base_ns when it was recorded (roots are scheduled then), otherwise at
    // the first op's start.
    int64_t start = std::numeric_limits<int64_t>::max();
    int last = 0;
    for (size_t i = 0; i < records_.size(); ++i) {
      const Record& r = records_[i];
      start = std::min(start, r.start);
      const Record& l = records_[last];
      if (r.end > l.end || (r.end == l.end && r.start > l.start)) last = static_cast<int>(i);
    }
    if (step.base_ns != 0 && step.base_ns <= start) start = step.base_ns;
    path.step_start_ns = start;
    path.wall_ns = records_[last].end - start;

    std::map<std::pair<std::string_view, uint32_t>, ThreadUtilisation> threads;
    for (const Record& r : records_) {
      const int64_t d = r.end - r.start;
      path.busy_ns += d;
      ThreadUtilisation& t = threads[{r.device, r.stats->thread_id}];
      t.busy_ns += d;
      t.ops++;
    }
    const double wall = static_cast<double>(path.wall_ns);
    auto fraction = [wall](int64_t ns) { return wall > 0 ? static_cast<double>(ns) / wall : 0.0; };
    path.parallelism = fraction(path.busy_ns);
    for (auto& [key, t] : threads) {
      t.device = std::string(key.first);
      t.thread_id = key.second;
      t.utilisation = fraction(t.busy_ns);
      path.threads.push_back(std::move(t));
    }

    // Walk back from the last op.
    std::vector<std::pair<int, CriticalPathEdge>> chain;
    std::vector<bool> visited(records_.size(), false);
    std::vector<Predecessor> preds;
    int cur = last;
    while (cur >= 0 && !visited[cur]) {
      visited[cur] = true;
      preds.clear();
      predecessors(records_[cur], preds);
      const Predecessor* best = choose(records_[cur], preds, visited);
      // The edge by which cur was made ready.
      chain.emplace_back(cur, best ? best->edge : CriticalPathEdge::kStart);
      cur = best ? best->record : -1;
    }
    std::reverse(chain.begin(), chain.end());

    int64_t prev_end = start;
    path.ops.reserve(chain.size());
    for (auto [index, edge] : chain) {
      const Record& r = records_[index];
      CriticalPathOp op;
      op.name =
          std::string(r.stats->node_name.empty() && r.node ? std::string_view(r.node->name()) : r.stats->node_name);
      op.op_type = std::string(r.stats->op_type.empty() && r.node ? r.node->op_type() : r.stats->op_type);
      op.device = std::string(r.device);
      op.node_id = r.node ? r.node->id() : r.stats->node_id;
      op.thread_id = r.stats->thread_id;
      op.start_ns = r.start - start;
      op.duration_ns = r.end - r.start;
      // Clocks of different devices may disagree slightly: a negative gap is no wait.
      op.wait_ns = std::max<int64_t>(0, r.start - prev_end);
      op.share = fraction(op.duration_ns);
      op.wait_share = fraction(op.wait_ns);
      op.via = edge;
      path.path_busy_ns += op.duration_ns;
      path.path_wait_ns += op.wait_ns;
      if (is_input_op_type(op.op_type)) path.path_input_ns += op.duration_ns;
      prev_end = std::max(prev_end, r.end);
      path.ops.push_back(std::move(op));
    }
    return path;
  }

  // Replays the recorded schedule with the ops matching `target` (node name or op type) made
  // `speedup` times faster, writing the new times into the node records this finder was built
  // on (the caller's own copy of the step). Returns how many records matched.
  int replay(std::string_view target, double speedup) {
    const size_t n = records_.size();
    std::vector<int> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return records_[a].start < records_[b].start; });
    int64_t step_start = std::numeric_limits<int64_t>::max();
    for (const Record& r : records_) step_start = std::min(step_start, r.start);
    std::vector<int64_t> new_end(n, 0);
    std::vector<bool> replayed(n, false);
    // Per thread: when its previous op ended, recorded and replayed.
    std::map<std::pair<std::string_view, uint32_t>, std::pair<int64_t, int64_t>> thread_free;
    std::vector<Predecessor> preds;
    int matched = 0;
    for (int i : order) {
      const Record& r = records_[i];
      preds.clear();
      predecessors(r, preds);
      int64_t ready = step_start, new_ready = step_start;
      for (const Predecessor& p : preds) {
        const Record& q = records_[p.record];
        if (q.end > r.start) continue;  // not what held it back (another device's clock)
        ready = std::max(ready, q.end);
        new_ready = std::max(new_ready, replayed[p.record] ? new_end[p.record] : q.end);
      }
      auto [it, first_on_thread] = thread_free.try_emplace({r.device, r.stats->thread_id}, step_start, step_start);
      const auto [thread_end, new_thread_end] = it->second;
      // The dispatch delay the op had once both its inputs and its thread were free: kept.
      const int64_t delay = std::max<int64_t>(0, r.start - std::max(ready, thread_end));
      const int64_t start = std::max(new_ready, new_thread_end) + delay;
      int64_t duration = r.end - r.start;
      const std::string_view op_type = r.stats->op_type.empty() && r.node ? r.node->op_type() : r.stats->op_type;
      const std::string_view name =
          r.stats->node_name.empty() && r.node ? std::string_view(r.node->name()) : r.stats->node_name;
      if (name == target || op_type == target) {
        duration = static_cast<int64_t>(std::llround(static_cast<double>(duration) / speedup));
        ++matched;
      }
      new_end[i] = start + duration;
      replayed[i] = true;
      it->second = {std::max(thread_end, r.end), std::max(new_thread_end, new_end[i])};
      NodeExecStats& ns = const_cast<NodeExecStats&>(*r.stats);  // the caller's copy
      if (ns.scheduled_ns != 0) ns.scheduled_ns = new_ready;
      ns.all_start_ns = start;
      ns.op_start_rel_ns = 0;
      ns.op_end_rel_ns = duration;
      ns.all_end_rel_ns = duration;
    }
    return matched;
  }

 private:
  void add(std::string_view device, const NodeExecStats& ns) {
    const Node* node = nullptr;
    if (graph_ && !is_gpu_tracer_device(device)) {
      if (ns.node_id >= 0 && ns.node_id < graph_->num_nodes()) {
        const Node* candidate = graph_->node(ns.node_id);
        if (ns.node_name.empty() || candidate->name() == ns.node_name) node = candidate;
      }
      if (!node && !ns.node_name.empty()) node = graph_->find_node(ns.node_name);
    }
    const int index = static_cast<int>(records_.size());
    const int64_t end = ns.all_start_ns + ns.all_end_rel_ns;
    records_.push_back({&ns, device, node, ns.all_start_ns, end});
    // A node recorded twice (a window of steps): its latest run is the one inputs refer to.
    auto keep_latest = [&](int& slot) {
      if (slot < 0 || records_[slot].end <= end) slot = index;
    };
    if (node) keep_latest(by_id_[node->id()]);
    if (!ns.node_name.empty()) {
      auto [it, inserted] = by_name_.try_emplace(ns.node_name, index);
      if (!inserted) keep_latest(it->second);
    }
  }

  int record_of(const Node* node) const {
    if (!node) return -1;
    return by_id_[node->id()];
  }
  int record_of(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? -1 : it->second;
  }

  void predecessors(const Record& r, std::vector<Predecessor>& out) const {
    if (r.gpu) {
      const std::string_view op = gpu_op_of(r.stats->timeline_label, r.stats->node_name).name;
      if (int p = record_of(op); p >= 0 && !records_[p].gpu) out.push_back({p, CriticalPathEdge::kLaunch});
      if (r.prev_on_stream >= 0) out.push_back({r.prev_on_stream, CriticalPathEdge::kStream});
      return;
    }
    if (r.node) {
      for (const Output& in : r.node->inputs()) {
        if (int p = record_of(in.node); p >= 0) out.push_back({p, CriticalPathEdge::kData});
      }
      for (const Node* in : r.node->control_inputs()) {
        if (int p = record_of(in); p >= 0) out.push_back({p, CriticalPathEdge::kControl});
      }
      return;
    }
    bool exact = false;
    std::string_view inputs = parse_node_label(r.stats->timeline_label).inputs;
    for (ParsedNodeLabelInput in; next_node_label_input(inputs, in);) {
      if (int p = record_of(in.node); p >= 0) {
        out.push_back({p, in.control ? CriticalPathEdge::kControl : CriticalPathEdge::kData});
        exact |= records_[p].end == r.stats->scheduled_ns;
      }
    }
    // Labels name data inputs only: when none of them made the node ready, the op that ended at
    // the node's scheduled time did (through a control edge).
    if (!exact && r.stats->scheduled_ns != 0) {
      auto [first, last] = by_end_.equal_range(r.stats->scheduled_ns);
      for (auto it = first; it != last; ++it) {
        if (&records_[it->second] != &r) out.push_back({it->second, CriticalPathEdge::kControl});
      }
    }
  }

  // The input whose completion made `r` ready: the one that ended at its scheduled time, else
  // the latest to end at or before its start, else (clocks of different devices disagreeing)
  // the latest to end. Data edges win ties (an input that is both is reported as data).
  const Predecessor* choose(const Record& r, const std::vector<Predecessor>& preds,
                            const std::vector<bool>& visited) const {
    const Predecessor* exact = nullptr;
    const Predecessor* before = nullptr;
    const Predecessor* latest = nullptr;
    auto better = [&](const Predecessor* a, const Predecessor& b) {
      if (!a) return true;
      const int64_t ea = records_[a->record].end, eb = records_[b.record].end;
      if (eb != ea) return eb > ea;
      return a->edge == CriticalPathEdge::kControl && b.edge == CriticalPathEdge::kData;
    };
    const int64_t scheduled = r.stats->scheduled_ns;
    for (const Predecessor& p : preds) {
      if (visited[p.record]) continue;
      const int64_t end = records_[p.record].end;
      if (scheduled != 0 && end == scheduled && scheduled <= r.start && better(exact, p)) exact = &p;
      if (end <= r.start && better(before, p)) before = &p;
      if (better(latest, p)) latest = &p;
    }
    if (exact) return exact;
    if (before) return before;
    return latest;
  }

  const Graph* graph_;
  std::vector<Record> records_;
  std::vector<int> by_id_;
  std::unordered_map<std::string_view, int> by_name_;
  std::unordered_multimap<int64_t, int> by_end_;  // without a graph: records by end time
};

struct TimeUnit {
  const char* name;
  double ns;
};

TimeUnit unit_for(int64_t wall_ns) {
  if (wall_ns >= 1'000'000'000) return {"s", 1e9};
  if (wall_ns >= 1'000'000) return {"ms", 1e6};
  return {"us", 1e3};
}

void append(std::string& out, const char* format, auto... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, format, args...);
  if (n > 0) out.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

// Short device names in tables: ".../device:CPU:0" → "CPU:0".
std::string_view short_device(std::string_view device) {
  const size_t slash = device.rfind('/');
  std::string_view s = slash == std::string_view::npos ? device : device.substr(slash + 1);
  if (s.starts_with("device:")) s.remove_prefix(7);
  return s;
}

}  // namespace

CriticalPath critical_path(const Graph& graph, const StepStats& step) { return PathFinder(&graph, step).find(step); }

CriticalPath critical_path(const StepStats& step) { return PathFinder(nullptr, step).find(step); }

bool is_input_op_type(std::string_view op_type) {
  return op_type.starts_with("IteratorGetNext") || op_type == "MakeIterator" || op_type == "OneShotIterator";
}

WhatIf what_if(const Graph* graph, const StepStats& step, std::string_view target, double speedup) {
  if (!(speedup > 0) || !std::isfinite(speedup))
    throw InvalidArgumentError("what-if: the speedup must be a finite number > 0, given: " + std::to_string(speedup));
  WhatIf result;
  result.target = std::string(target);
  result.speedup = speedup;
  result.before = PathFinder(graph, step).find(step);
  StepStats replayed = step;
  result.matched_ops = PathFinder(graph, replayed).replay(target, speedup);
  if (result.matched_ops == 0)
    throw NotFoundError("what-if: no op named or of type '" + std::string(target) + "' ran in the step");
  result.after = PathFinder(graph, replayed).find(replayed);
  return result;
}

namespace {
bool same_ops(const CriticalPath& a, const CriticalPath& b) {
  if (a.ops.size() != b.ops.size()) return false;
  for (size_t i = 0; i < a.ops.size(); ++i)
    if (a.ops[i].name != b.ops[i].name) return false;
  return true;
}
}  // namespace

std::string WhatIf::to_text(const CriticalPathTextOptions& options) const {
  std::string out;
  const TimeUnit u = unit_for(before.wall_ns);
  const double change =
      before.wall_ns > 0 ? 100.0 * static_cast<double>(after.wall_ns - before.wall_ns) / before.wall_ns : 0;
  append(out, "What if %s (%d op%s) ran %.2fx faster: wall %.3f %s -> %.3f %s (%+.1f%%)\n", target.c_str(), matched_ops,
         matched_ops == 1 ? "" : "s", speedup, static_cast<double>(before.wall_ns) / u.ns, u.name,
         static_cast<double>(after.wall_ns) / u.ns, u.name, change);
  out += same_ops(before, after) ? "The critical path stays on the same ops.\n"
                                 : "The critical path moves: the replayed step's is below.\n";
  return out + after.to_text(options);
}

std::string WhatIf::to_json() const {
  std::string out = "{\"target\":";
  json_out::append_string(out, target);
  append(out,
         ",\"speedup\":%.6g,\"matched_ops\":%d,\"wall_ns\":%" PRId64 ",\"new_wall_ns\":%" PRId64 ",\"path_moved\":%s",
         speedup, matched_ops, before.wall_ns, after.wall_ns, same_ops(before, after) ? "false" : "true");
  return out + ",\"before\":" + before.to_json() + ",\"after\":" + after.to_json() + "}";
}

std::string CriticalPath::to_text(const CriticalPathTextOptions& options) const {
  std::string out;
  if (ops.empty()) return "Critical path: the step ran no ops.\n";
  const TimeUnit u = unit_for(wall_ns);
  auto t = [&u](int64_t ns) { return static_cast<double>(ns) / u.ns; };
  auto pct = [this](int64_t ns) { return wall_ns > 0 ? 100.0 * static_cast<double>(ns) / wall_ns : 0.0; };
  if (path_input_ns > 0) {
    append(out, "Critical path: %zu of %d ops, wall time %.3f %s (compute %.1f%%, input %.1f%%, waiting %.1f%%)\n",
           ops.size(), num_ops, t(wall_ns), u.name, pct(path_busy_ns - path_input_ns), pct(path_input_ns),
           pct(path_wait_ns));
  } else {
    append(out, "Critical path: %zu of %d ops, wall time %.3f %s (ops %.1f%%, waiting %.1f%%)\n", ops.size(), num_ops,
           t(wall_ns), u.name, pct(path_busy_ns), pct(path_wait_ns));
  }
  append(out, "Busy time of all ops: %.3f %s on %zu thread%s, parallelism %.2f\n", t(busy_ns), u.name, threads.size(),
         threads.size() == 1 ? "" : "s", parallelism);
  if (hooks_ns >= 0)
    append(out, "Hooks around the step (outside its trace): %.3f %s, %.1f%% of the step and its hooks\n", t(hooks_ns),
           u.name, wall_ns + hooks_ns > 0 ? 100.0 * static_cast<double>(hooks_ns) / (wall_ns + hooks_ns) : 0.0);

  // Which rows to show: all, or the max_rows largest (duration + wait), in path order.
  std::vector<bool> shown(ops.size(), true);
  if (options.max_rows > 0 && ops.size() > options.max_rows) {
    std::vector<size_t> order(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) {
      return ops[a].duration_ns + ops[a].wait_ns > ops[b].duration_ns + ops[b].wait_ns;
    });
    shown.assign(ops.size(), false);
    for (size_t i = 0; i < options.max_rows; ++i) shown[order[i]] = true;
  }
  size_t type_width = 7;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (shown[i]) type_width = std::max(type_width, ops[i].op_type.size());
  }
  const int tw = static_cast<int>(std::min<size_t>(type_width, 32));
  append(out, "%12s %12s %12s %7s  %-*s  %s\n", (std::string("start ") + u.name).c_str(),
         (std::string("wait ") + u.name).c_str(), (std::string("duration ") + u.name).c_str(), "share", tw, "op type",
         "name");
  for (size_t i = 0; i < ops.size();) {
    if (shown[i]) {
      const CriticalPathOp& op = ops[i];
      append(out, "%12.3f %12.3f %12.3f %6.1f%%  %-*s  %s", t(op.start_ns), t(op.wait_ns), t(op.duration_ns),
             100.0 * op.share, tw, op.op_type.c_str(), op.name.c_str());
      if (op.via == CriticalPathEdge::kControl) out += " (after a control input)";
      out += '\n';
      ++i;
      continue;
    }
    size_t j = i;
    int64_t busy = 0, wait = 0;
    for (; j < ops.size() && !shown[j]; ++j) {
      busy += ops[j].duration_ns;
      wait += ops[j].wait_ns;
    }
    append(out, "%12s %12.3f %12.3f %6.1f%%  ... %zu more ops\n", "", t(wait), t(busy), pct(busy), j - i);
    i = j;
  }
  if (options.show_threads && !threads.empty()) {
    out += "Threads:\n";
    for (const ThreadUtilisation& th : threads) {
      const std::string_view dev = short_device(th.device);
      append(out, "  %.*s thread %u: %.3f %s busy, %d ops, %.1f%% utilised\n", static_cast<int>(dev.size()), dev.data(),
             th.thread_id, t(th.busy_ns), u.name, th.ops, 100.0 * th.utilisation);
    }
  }
  return out;
}

std::string CriticalPath::to_json() const {
  std::string out;
  out.reserve(256 + ops.size() * 256 + threads.size() * 128);
  append(out,
         "{\"wall_ns\":%" PRId64 ",\"busy_ns\":%" PRId64
         ",\"num_ops\":%d,\"parallelism\":%.6f,\"path_busy_ns\":%" PRId64 ",\"path_wait_ns\":%" PRId64
         ",\"path_input_ns\":%" PRId64 ",\"path\":[",
         wall_ns, busy_ns, num_ops, parallelism, path_busy_ns, path_wait_ns, path_input_ns);
  for (size_t i = 0; i < ops.size(); ++i) {
    const CriticalPathOp& op = ops[i];
    if (i) out += ',';
    out += "{\"name\":";
    json_out::append_string(out, op.name);
    out += ",\"op_type\":";
    json_out::append_string(out, op.op_type);
    out += ",\"device\":";
    json_out::append_string(out, op.device);
    append(out,
           ",\"node_id\":%d,\"thread_id\":%u,\"start_ns\":%" PRId64 ",\"duration_ns\":%" PRId64 ",\"wait_ns\":%" PRId64
           ",\"share\":%.6f,\"wait_share\":%.6f,\"via\":\"%s\"}",
           op.node_id, op.thread_id, op.start_ns, op.duration_ns, op.wait_ns, op.share, op.wait_share,
           critical_path_edge_name(op.via));
  }
  out += "],\"threads\":[";
  for (size_t i = 0; i < threads.size(); ++i) {
    const ThreadUtilisation& th = threads[i];
    if (i) out += ',';
    out += "{\"device\":";
    json_out::append_string(out, th.device);
    append(out, ",\"thread_id\":%u,\"busy_ns\":%" PRId64 ",\"ops\":%d,\"utilisation\":%.6f}", th.thread_id, th.busy_ns,
           th.ops, th.utilisation);
  }
  append(out, "],\"hooks_ns\":%" PRId64 "}", hooks_ns);
  return out;
}

}  // namespace stepscope
