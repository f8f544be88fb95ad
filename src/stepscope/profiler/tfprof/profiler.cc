#include "stepscope/profiler/tfprof/profiler.h"

#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <system_error>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/thread_beside.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/node_label.h"
#include "stepscope/profiler/tfprof/format.h"
#include "stepscope/profiler/tfprof/internal/pprof_output.h"
#include "stepscope/profiler/tfprof/internal/profile_io.h"
#include "stepscope/profiler/tfprof/internal/views.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

using tfprof::ProfileModel;
using tfprof::ViewOptions;

namespace {
// From how many records a step's memory by kind is worked out beside add_step: tens of µs of
// work there, against ~10 µs to wake a ThreadBeside (add_step of 1,000 nodes: 0.30 ms, against
// 0.32 with it worked out after).
constexpr size_t kRecordsWorthAThread = 1000;
}  // namespace

struct Profiler::Impl {
  const Graph* graph = nullptr;
  ProfileModel model;
  std::ostream* out = &std::cout;
  std::ostream* log = &std::cerr;
  std::vector<std::unique_ptr<AdviceChecker>> checkers;

  // Caches: the views' structures (by model.structure_version), the statistics of the last
  // step queried (by model.steps_version), compiled regexes, encoded chunks.
  mutable tfprof::RegexCache regexes;
  mutable uint64_t scope_version = ~0ull, graph_version = ~0ull, op_version = ~0ull, code_version = ~0ull;
  mutable tfprof::ViewTree scope_tree, graph_tree;
  mutable tfprof::OpGroups op_groups;
  mutable tfprof::CodeTree code_tree;
  mutable uint64_t stats_version = ~0ull;
  mutable int64_t stats_step = 0;
  mutable std::vector<tfprof::NodeStats> stats;
  mutable uint64_t model_chunk_version = ~0ull;
  mutable std::string model_chunk;
  // Each step's encoded chunk, made when a save first needs it and dropped when the step
  // changes: a hook that saves after every trace encodes each step once, and add_step alone
  // encodes nothing.
  mutable std::map<int64_t, std::string> step_chunks;
  // save()'s bytes, kept between saves: a hook saving after every trace would otherwise
  // allocate and free the whole file's size each time.
  mutable std::string save_buffer;

  void serialize_into(std::string& bytes) const;

  const std::vector<tfprof::NodeStats>& stats_for(int64_t step) const {
    if (stats_version != model.steps_version || stats_step != step || stats.size() != model.nodes.size()) {
      stats = model.stats(step);
      stats_version = model.steps_version;
      stats_step = step;
    }
    return stats;
  }

  const tfprof::ViewTree& scope() const {
    if (scope_version != model.structure_version) {
      scope_tree = tfprof::build_scope_tree(model);
      scope_version = model.structure_version;
    }
    return scope_tree;
  }
  const tfprof::ViewTree& graph_view() const {
    if (graph_version != model.structure_version) {
      graph_tree = tfprof::build_graph_tree(model);
      graph_version = model.structure_version;
    }
    return graph_tree;
  }
  const tfprof::OpGroups& ops() const {
    if (op_version != model.structure_version) {
      op_groups = tfprof::build_op_groups(model);
      op_version = model.structure_version;
    }
    return op_groups;
  }
  const tfprof::CodeTree& code() const {
    if (code_version != model.structure_version) {
      code_tree = tfprof::build_code_tree(model);
      code_version = model.structure_version;
      if (code_tree.unaccounted_gradients > 0)
        *log << code_tree.unaccounted_gradients << " gradient nodes not accounted\n";
    }
    return code_tree;
  }

  // TFStats::Validate.
  bool step_exists(int64_t step) const {
    if (step < 0 || model.steps.count(step)) return true;
    std::string line = "Options -step=" + std::to_string(step) + " not found.\nAvailable steps: ";
    for (const auto& [s, _] : model.steps) line += std::to_string(s) + " ";
    *log << line << "\n";
    return false;
  }

  // Runs a view with TensorFlow's output handling. `show(step)` computes the view for a step.
  template <typename Result, typename Show>
  Result run_view(std::string_view cmd, const ProfileOptions& options, Show show) const {
    const ViewOptions o = tfprof::resolve_options(options, regexes, log);
    const std::string& type = o.output.type;
    const bool to_stdout = type == "stdout";
    if (to_stdout) *out << tfprof::kOptionsBanner << options.to_string() << tfprof::kReportBanner;
    Result result;
    if (step_exists(o.step)) {
      std::string pprof_error;
      if (type == "pprof" && cmd == "graph") {
        *log << "pprof output supports the code, scope and op views (the graph view is not a tree).\n";
      } else if (type == "pprof" && !(pprof_error = tfprof::pprof_select_error(options.select)).empty()) {
        *log << pprof_error << "\n";
      } else if (cmd == "code" && !model.has_code_traces()) {
        *log << "No code trace information\n";
      } else {
        auto view = show(o, o.step);
        result.root = std::move(view.root);
        result.view_text = std::move(view.text);
        const std::string prefix = std::string(model.miss_accelerator_stream ? tfprof::kMissingAcceleratorStream : "") +
                                   tfprof::query_doc(cmd, o.select) + std::string(tfprof::kProfilePrefix);
        if (to_stdout) {
          *out << prefix << result.text();
        } else if (type == "file") {
          write_file_atomically(o.output.options.at("outfile"), prefix + result.text());
        } else if (type == "pprof") {
          const std::string& outfile = o.output.options.at("outfile");
          write_file_atomically(outfile, tfprof::pprof_profile(cmd, result.root, options.select.front()),
                                /*gzip=*/true);
          *out << "\nRun pprof -png --nodecount=100 --sample_index=1 <" << outfile << ">\n";
          out->flush();
        } else if (type == "timeline") {
          if (cmd == "op") {
            *log << "op view doesn't support timeline yet. Consider graph/scope/code view.\n";
          } else if (o.step >= 0) {
            write_timeline(o.output.options.at("outfile"), o.step, view.displayed);
          } else {
            for (const auto& [step, _] : model.steps) {
              ViewOptions step_options = o;
              step_options.step = step;
              write_timeline(o.output.options.at("outfile"), step, show(step_options, step).displayed);
            }
          }
        }
      }
    }
    if (to_stdout) {
      *out << tfprof::kEndBanner;
      out->flush();
    }
    return result;
  }

  void write_timeline(const std::string& outfile, int64_t step, const std::vector<int32_t>& displayed) const;
  StepStats step_stats(int64_t step, const std::vector<char>* only) const;
};

Profiler::Profiler() : impl_(std::make_unique<Impl>()) {}

Profiler::Profiler(const Graph& graph, ProfilerOptions options) : Profiler() {
  impl_->graph = &graph;
  impl_->model.max_steps = options.max_steps;
  impl_->model.step_timings = StepTimings(options.max_step_timings);
  impl_->model.sync_graph(graph);
}

Profiler::~Profiler() = default;
Profiler::Profiler(Profiler&&) noexcept = default;
Profiler& Profiler::operator=(Profiler&&) noexcept = default;

void Profiler::add_step(int64_t step, const RunMetadata& run_metadata) {
  Impl& m = *impl_;
  const StepStats& stats = run_metadata.step_stats;
  // The step's memory by kind (the graph says which tensor is which; a loaded profile has none,
  // so it is worked out now). It reads only the graph and the records, so a big step's is worked
  // out on another core while the model takes the step in.
  const bool by_kind_wanted = m.graph && !stats.empty();
  std::optional<MemoryByKind> by_kind;
  std::exception_ptr by_kind_failed;
  const auto work_out_by_kind = [&] {
    try {
      by_kind = stepscope::memory_by_kind(*m.graph, stats);
    } catch (...) {
      by_kind_failed = std::current_exception();
    }
  };
  ThreadBeside beside;  // declared after what it writes: its destructor waits for it
  if (by_kind_wanted && hardware_cores() > 1) {
    size_t records = 0;
    for (const DeviceStepStats& dev_stats : stats.dev_stats()) records += dev_stats.node_stats.size();
    if (records >= kRecordsWorthAThread) {
      try {
        beside = ThreadBeside(work_out_by_kind);
      } catch (const std::system_error&) {  // no thread to be had: worked out below instead
      }
    }
  }
  m.model.add_step(step, run_metadata, m.graph, *m.log);
  auto it = m.model.steps.find(step);
  if (it != m.model.steps.end() && by_kind_wanted) {
    if (beside.started())
      beside.join();
    else
      work_out_by_kind();
    if (by_kind_failed) std::rethrow_exception(by_kind_failed);
    // Of several RunMetadata of one step, the one with the highest peak is kept.
    if (!it->second.memory || by_kind->peak_bytes > it->second.memory->peak_bytes) it->second.memory = *by_kind;
  }
  m.step_chunks.erase(step);
}

void Profiler::add_step_timing(int64_t step, const StepTiming& timing, int64_t hooks_ns) {
  impl_->model.step_timings.add({.step = step,
                                 .wall_ns = timing.wall_ns,
                                 .busy_ns = timing.busy_ns,
                                 .input_ns = timing.input_ns,
                                 .idle_ns = timing.idle_ns,
                                 .hooks_ns = hooks_ns});
}

const StepTimings& Profiler::step_timings() const { return impl_->model.step_timings; }

std::optional<MemoryByKind> Profiler::memory_by_kind(int64_t step) const {
  auto it = impl_->model.steps.find(step);
  if (it == impl_->model.steps.end()) return std::nullopt;
  return it->second.memory;
}

std::vector<int64_t> Profiler::steps() const {
  std::vector<int64_t> out;
  for (const auto& [s, _] : impl_->model.steps) out.push_back(s);
  return out;
}

GraphProfile Profiler::profile_name_scope(const ProfileOptions& options) const {
  const Impl& m = *impl_;
  return m.run_view<GraphProfile>("scope", options, [&](const ViewOptions& o, int64_t step) {
    return tfprof::show_scope(m.scope(), m.model, m.stats_for(step), o);
  });
}

GraphProfile Profiler::profile_graph(const ProfileOptions& options) const {
  const Impl& m = *impl_;
  return m.run_view<GraphProfile>("graph", options, [&](const ViewOptions& o, int64_t step) {
    return tfprof::show_graph(m.graph_view(), m.model, m.stats_for(step), o);
  });
}

MultiGraphProfile Profiler::profile_operations(const ProfileOptions& options) const {
  const Impl& m = *impl_;
  return m.run_view<MultiGraphProfile>("op", options, [&](const ViewOptions& o, int64_t step) {
    return tfprof::show_op(m.ops(), m.model, m.stats_for(step), o);
  });
}

MultiGraphProfile Profiler::profile_code(const ProfileOptions& options) const {
  impl_->model.symbolize_stacks();  // the stacks captured are symbolised when first needed
  const Impl& m = *impl_;
  return m.run_view<MultiGraphProfile>("code", options, [&](const ViewOptions& o, int64_t step) {
    return tfprof::show_code(m.code(), m.model, m.stats_for(step), o, *m.log);
  });
}

AdviceProto Profiler::advise(const AdvisorOptions& options, bool print) const {
  AdviceProto advice;
  auto run = [&](const AdviceChecker& checker) {
    auto it = options.checkers.find(checker.name());
    if (it == options.checkers.end()) return;
    std::vector<std::string> reports = checker.check(*this, it->second, *impl_->log);
    auto& into = advice.checkers[checker.name()].reports;
    into.insert(into.end(), reports.begin(), reports.end());
  };
  for (const auto& checker : builtin_advice_checkers()) run(*checker);
  for (const auto& checker : impl_->checkers) run(*checker);
  if (print) {
    *impl_->out << advice.text();
    impl_->out->flush();
  }
  return advice;
}

void Profiler::add_checker(std::unique_ptr<AdviceChecker> checker) { impl_->checkers.push_back(std::move(checker)); }

void Profiler::Impl::serialize_into(std::string& bytes) const {
  if (model_chunk_version != model.structure_version) {
    model_chunk = tfprof::encode_model_chunk(model) + tfprof::encode_traces_chunk(model) +
                  tfprof::encode_collectives_chunk(model);
    model_chunk_version = model.structure_version;
  }
  // The encoded steps follow the model's: those it dropped go, those not encoded yet are.
  std::erase_if(step_chunks, [&](const auto& chunk) { return !model.steps.count(chunk.first); });
  for (const auto& [step, data] : model.steps)
    if (!step_chunks.count(step)) step_chunks.emplace(step, tfprof::encode_step_chunk(step, data));
  const std::string state = tfprof::encode_state_chunk(model) + tfprof::encode_dropped_chunk(model);
  size_t size = model_chunk.size() + state.size() + 64;
  for (const auto& [_, chunk] : step_chunks) size += chunk.size();
  bytes.clear();
  bytes.reserve(size);
  bytes += tfprof::encode_header();
  bytes += model_chunk;
  bytes += state;
  for (const auto& [_, chunk] : step_chunks) bytes += chunk;
  bytes += tfprof::encode_timings_chunk(model.step_timings);
  bytes += tfprof::encode_end_chunk(step_chunks.size());
}

std::string Profiler::serialize_to_string() const {
  impl_->model.symbolize_stacks();
  std::string bytes;
  impl_->serialize_into(bytes);
  return bytes;
}

void Profiler::save(const std::filesystem::path& path) const {
  impl_->model.symbolize_stacks();
  impl_->serialize_into(impl_->save_buffer);
  write_file_atomically(path, impl_->save_buffer, /*gzip=*/path.extension() == ".gz");
}

Profiler Profiler::load(const std::filesystem::path& path, uint64_t max_decompressed_bytes) {
  return parse(read_file(path, max_decompressed_bytes), path.string());
}

Profiler Profiler::parse(std::string_view bytes, const std::string& source) {
  Profiler p;
  p.impl_->model = tfprof::decode_profile(bytes, source);
  return p;
}

bool Profiler::looks_like_profile(std::string_view bytes) {
  const std::string header = tfprof::encode_header();
  return bytes.substr(0, 8) == std::string_view(header).substr(0, 8);
}

Profiler Profiler::from_run_metadata(const RunMetadata& run_metadata, int64_t step) {
  Profiler p;
  ProfileModel& model = p.impl_->model;
  model.add_step(step, run_metadata, nullptr, *p.impl_->log);
  // The nodes were created from the records with their names as op types (TensorFlow's choice
  // without a graph); the records know better, and their labels name the inputs (for the
  // critical path and timelines of the step).
  for (const DeviceStepStats& dev : run_metadata.step_stats.dev_stats())
    for (const NodeExecStats& ns : dev.node_stats) {
      std::string_view name = ns.node_name;
      if (size_t colon = name.find(':'); colon != std::string_view::npos) name = name.substr(0, colon);
      const int32_t index = model.find(name);
      if (index < 0) continue;
      tfprof::ModelNode& node = model.nodes[index];
      if (!ns.op_type.empty() && node.op == node.name) node.op = std::string(ns.op_type);
      const ParsedNodeLabel label = parse_node_label(ns.timeline_label);
      if (!label.valid || node.num_inputs > 0) continue;
      std::vector<std::pair<int32_t, int32_t>> data, control;  // (node, slot)
      std::vector<tfprof::ModelInput> inputs;
      std::string_view rest = label.inputs;
      ParsedNodeLabelInput input;
      while (next_node_label_input(rest, input)) {
        const int32_t from = model.find(input.node);
        if (from >= 0) (input.control ? control : data).emplace_back(from, input.control ? -1 : input.output);
      }
      for (const auto* list : {&data, &control})
        for (const auto& [from, slot] : *list) inputs.push_back({.node = from, .slot = slot});
      model.set_inputs(node, inputs);
    }
  model.recompute_derived();
  return p;
}

void Profiler::set_stdout(std::ostream* out) { impl_->out = out ? out : &std::cout; }
void Profiler::set_log(std::ostream* log) { impl_->log = log ? log : &std::cerr; }
std::ostream& Profiler::log() const { return *impl_->log; }

const tfprof::ProfileModel& Profiler::model() const { return impl_->model; }
const Graph* Profiler::graph() const { return impl_->graph; }

StepStats Profiler::step_stats(int64_t step) const { return impl_->step_stats(step, nullptr); }

std::unordered_map<std::string, int64_t> Profiler::float_ops_per_run(int64_t step) const {
  std::unordered_map<std::string, int64_t> out;
  auto it = impl_->model.steps.find(step);
  if (it == impl_->model.steps.end()) return out;
  for (const tfprof::NodeStep& n : it->second.nodes)
    out[impl_->model.nodes[n.node].name] = n.float_ops / std::max<int64_t>(1, n.run_count);
  return out;
}

StepStats Profiler::Impl::step_stats(int64_t step, const std::vector<char>* only) const {
  StepStats out;
  auto it = model.steps.find(step);
  if (it == model.steps.end()) return out;
  const tfprof::StepData& data = it->second;
  out.base_ns = data.base_ns;
  out.base_wall_ns = data.base_wall_ns;
  std::vector<int32_t> slot(model.devices.size(), -1);
  std::vector<NodeLabelInput> label_inputs;
  for (const tfprof::ExecRecord& e : data.execs) {
    if (only && !(*only)[e.node]) continue;
    if (slot[e.device] < 0) {
      slot[e.device] = static_cast<int32_t>(out.dev_stats().size());
      out.dev_stats().push_back({StepStats::intern(model.device_labels[e.device]), {}});
    }
    const tfprof::ModelNode& node = model.nodes[e.node];
    label_inputs.clear();
    for (const tfprof::ModelInput& in : model.inputs_of(node))
      if (in.slot >= 0) label_inputs.push_back({.node = model.nodes[in.node].name, .output = in.slot});
    NodeExecStats ns;
    ns.node_name = StepStats::intern(node.name);
    ns.op_type = StepStats::intern(node.op);
    ns.node_id = node.graph_id;
    ns.scheduled_ns = e.scheduled_ns;
    ns.all_start_ns = e.all_start_ns;
    ns.op_start_rel_ns = e.op_start_rel_ns;
    ns.op_end_rel_ns = e.op_end_rel_ns;
    ns.all_end_rel_ns = e.all_end_rel_ns;
    ns.thread_id = e.thread_id;
    ns.timeline_label = StepStats::intern(format_node_label(node.name, node.op, label_inputs));
    out.dev_stats()[slot[e.device]].node_stats.push_back(ns);
  }
  return out;
}

void Profiler::Impl::write_timeline(const std::string& outfile, int64_t step,
                                    const std::vector<int32_t>& displayed) const {
  std::vector<char> only(model.nodes.size(), 0);
  for (int32_t node : displayed) only[node] = 1;
  const StepStats stats = step_stats(step, &only);
  const std::string trace = Timeline(stats, graph).generate_chrome_trace_format(/*show_dataflow=*/true);
  const std::string file = outfile + "_" + std::to_string(step);
  write_file_atomically(file, trace);
  *out << "\n******************************************************\n"
       << "Timeline file is written to " << file
       << ".\nOpen a Chrome browser, enter URL chrome://tracing and load the timeline file."
       << "\n******************************************************\n";
  out->flush();
}

}  // namespace stepscope
