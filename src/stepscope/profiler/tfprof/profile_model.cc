#include "stepscope/profiler/tfprof/profile_model.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <system_error>

#include "stepscope/base/huge_pages.h"
#include "stepscope/base/mapping_ahead.h"
#include "stepscope/base/thread_beside.h"
#include "stepscope/graph/graph.h"
#include "stepscope/ops/collective_trace.h"
#include "stepscope/profiler/node_cost.h"
#include "stepscope/profiler/symbolizer.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope::tfprof {
namespace {

// Nodes TensorFlow leaves out when a step names a node the graph does not have.
bool creatable_from_step(std::string_view name) {
  return name != "RecvTensor" && name != "_SOURCE" && name.find("MEMCPY") == std::string_view::npos;
}

// New memory a model writes (its nodes, a step's records) is mapped beside it from ~1 MiB: 256
// pages, ~0.6 ms of page faults on this workplace's VMs, against ~0.1-0.2 ms to wake a thread.
// A new Profiler's model of 10^6 nodes (280 MB) was made in ~0.35 s so, against ~0.65.
constexpr size_t kNewMemoryWorthAThread = size_t{1} << 20;
// A step's nodes' float ops and input shapes take ~0.2 µs a node (cache misses over the graph
// and the step): from 10^4 nodes, half of them are worth a thread (~0.1-0.2 ms to wake one).
constexpr size_t kNodesWorthAThread = 10000;

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool is_canonical_device(std::string_view d) {
  // Full match of ".*/(device:gpu|gpu|device:cpu|cpu):\d+".
  size_t end = d.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(d[end - 1]))) --end;
  if (end == d.size() || end == 0 || d[end - 1] != ':') return false;
  const std::string_view head = d.substr(0, end - 1);
  return head.ends_with("/cpu") || head.ends_with("/gpu") || head.ends_with("/device:cpu") ||
         head.ends_with("/device:gpu");
}

bool counts_as_accelerator_time(std::string_view d) { return d.find("stream:all") != std::string_view::npos; }

bool is_placed_on_accelerator(std::string_view d) { return d.find("gpu") != std::string_view::npos; }

std::span<const int64_t> tfprof_dims_view(const Shape& shape) {
  static constexpr int64_t kScalar[] = {1};
  if (!shape.known_rank()) return {};
  if (shape.rank() == 0) return kScalar;
  return shape.dims();
}

std::vector<int64_t> tfprof_dims(const Shape& shape) {
  const std::span<const int64_t> dims = tfprof_dims_view(shape);
  return {dims.begin(), dims.end()};
}

std::string_view ProfileModel::intern_type_name(std::string_view name) {
  if (name == last_type_name_ && last_type_name_.data()) return last_type_name_;
  if (auto it = type_name_index_.find(name); it != type_name_index_.end())
    return last_type_name_ = type_names_[it->second];
  const std::string_view kept = type_names_.emplace_back(name);
  type_name_index_.emplace(kept, static_cast<int32_t>(type_names_.size() - 1));
  return last_type_name_ = kept;
}

void ProfileModel::update_op_types(ModelNode& node) {
  // At most three, sorted and each once.
  std::string_view types[3];
  size_t n = 0;
  types[n++] = intern_type_name(node.op);
  if (node.device >= 0) {
    if (device_type_names_.size() <= static_cast<size_t>(node.device)) device_type_names_.resize(devices.size());
    std::string_view& device = device_type_names_[node.device];
    if (device.empty()) device = intern_type_name(devices[node.device]);
    types[n++] = device;
  }
  if (node.trainable) types[n++] = kTrainableVarType;
  std::sort(types, types + n);
  n = static_cast<size_t>(std::unique(types, types + n) - types);
  std::copy(types, types + n, node.op_types.types_.begin());
  node.op_types.size_ = static_cast<uint8_t>(n);
}

int32_t ProfileModel::find(std::string_view name) const {
  return by_name_.find(name, [this](int32_t i) { return name_of(i); });
}

std::vector<int32_t> ProfileModel::order_by_name() const {
  std::vector<int32_t> order(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) order[i] = static_cast<int32_t>(i);
  sort_by_name(order, [this](int32_t i) -> std::string_view { return nodes[i].name; });
  return order;
}

int32_t ProfileModel::add_node(ModelNode node) {
  nodes.push_back(std::move(node));
  return index_last_node();
}

int32_t ProfileModel::index_last_node(bool by_name) {
  const auto index = static_cast<int32_t>(nodes.size() - 1);
  ModelNode& node = nodes.back();
  if (node.graph_id >= 0) {
    if (static_cast<size_t>(node.graph_id) >= by_graph_id_.size()) by_graph_id_.resize(node.graph_id + 1, -1);
    by_graph_id_[node.graph_id] = index;
  }
  update_op_types(node);  // views of this model's names, whatever the node held
  if (by_name) by_name_.insert(node.name, index, [this](int32_t i) { return name_of(i); });
  ++structure_version;
  return index;
}

int32_t ProfileModel::intern_device(std::string_view device) {
  for (size_t i = 0; i < device_labels.size(); ++i)
    if (device_labels[i] == device) return static_cast<int32_t>(i);
  const std::string lower = lowercase(device);
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == lower) return static_cast<int32_t>(i);
  devices.push_back(lower);
  device_labels.emplace_back(device);
  return static_cast<int32_t>(devices.size() - 1);
}

bool ProfileModel::has_code_traces() const {
  for (const ModelNode& n : nodes)
    if (!site_of(n).file.empty() || !n.stack.empty() || n.raw_stack >= 0) return true;
  return false;
}

int32_t ProfileModel::intern_site(const SourceLocation& site) {
  if (site.unknown()) return -1;
  return sites.intern(site);
}

const SourceLocation& ProfileModel::site_of(const ModelNode& node) const {
  static const SourceLocation unknown;
  return node.site >= 0 ? sites[node.site] : unknown;
}

void ProfileModel::symbolize_stacks() {
  if (!stacks_pending_) return;
  stacks_pending_ = false;
  bool changed = false;
  for (size_t r = 0; r < raw_stacks_.size(); ++r) {
    if (raw_symbolized_[r]) continue;
    raw_symbolized_[r] = 1;
    for (const SourceLocation& frame : user_call_stack(raw_stacks_[r], raw_sites_[r]))
      symbolized_[r].push_back(intern_frame(frame));
  }
  for (ModelNode& n : nodes) {
    if (n.raw_stack < 0 || n.stack == symbolized_[n.raw_stack]) continue;
    n.stack = symbolized_[n.raw_stack];
    changed = true;
  }
  if (changed) ++structure_version;
}

void ProfileModel::sync_graph(const Graph& graph) {
  const int n = graph.num_nodes();
  const auto& trainable = graph.collection(kTrainableVariablesCollection);
  std::vector<char> is_trainable(n, 0);
  for (const Node* node : trainable)
    if (node && &node->graph() == &graph) is_trainable[node->id()] = 1;

  const bool same_graph = synced_graph_ == graph.id();
  const int first = same_graph ? static_cast<int>(by_graph_id_.size()) : 0;
  synced_graph_ = graph.id();
  if (!same_graph) raw_of_graph_stack_.clear();
  if (first >= n) return;

  // A fresh model (a new Profiler's) knows no node yet: nothing to look up, and room for all.
  const bool fresh_model = nodes.empty();
  reserve_huge_unless_reclaimed(nodes, nodes.size() + static_cast<size_t>(n - first));
  // Two inputs a node, as many ops have (more grow it).
  reserve_huge_unless_reclaimed(inputs_, inputs_.size() + 2 * static_cast<size_t>(n - first));
  by_name_.reserve(nodes.size() + static_cast<size_t>(n - first), [this](int32_t i) { return name_of(i); });
  NewMemory room;
  room.add_room_of(nodes);
  room.add_room_of(inputs_);
  MappedBeside mapped(std::move(room), kNewMemoryWorthAThread);
  // The graph keeps each location once (Node::source_location): nodes made at one site share
  // it, and are interned by its address while the graph is here.
  const SourceLocation* last_location = nullptr;
  int32_t last_site = -1;
  for (int id = first; id < n; ++id) {
    const Node& node = *graph.node(id);
    const int32_t index = fresh_model ? -1 : find(node.name());
    if (index >= 0 && nodes[index].graph_id >= 0 && same_graph) continue;
    // A new node is made in place (indexed once filled in).
    ModelNode& m = index >= 0 ? nodes[index] : nodes.emplace_back();
    m.name = node.name();
    m.op = std::string(node.op_type());
    if (&node.source_location() != last_location) {
      last_location = &node.source_location();
      last_site = intern_site(*last_location);
    }
    m.site = last_site;
    m.stack.clear();
    m.raw_stack = -1;
    if (const int32_t stack = node.call_stack_id(); stack >= 0) {
      auto [it, inserted] = raw_of_graph_stack_.emplace(stack, static_cast<int32_t>(raw_stacks_.size()));
      if (inserted) {
        const auto pcs = node.call_stack();
        raw_stacks_.emplace_back(pcs.begin(), pcs.end());
        raw_sites_.push_back(site_of(m));
        raw_symbolized_.push_back(0);
        symbolized_.emplace_back();
      }
      m.raw_stack = it->second;
      stacks_pending_ = true;
    }
    m.graph_id = id;
    replaced_inputs_ += m.num_inputs;
    m.first_input = static_cast<uint32_t>(inputs_.size());
    m.input_shapes_known = true;
    for (const Output& in : node.inputs()) {
      const int32_t producer =
          static_cast<size_t>(in.node->id()) < by_graph_id_.size() ? by_graph_id_[in.node->id()] : -1;
      if (producer < 0) continue;
      inputs_.push_back({producer, in.index, in.shape()});
    }
    for (const Node* c : node.control_inputs()) {
      const int32_t producer = static_cast<size_t>(c->id()) < by_graph_id_.size() ? by_graph_id_[c->id()] : -1;
      if (producer < 0) continue;
      inputs_.push_back({producer, -1, c->num_outputs() > 0 ? c->output_shape(0) : Shape::unknown_rank()});
    }
    m.num_inputs = static_cast<uint32_t>(inputs_.size() - m.first_input);
    m.trainable = is_trainable[id] != 0;
    m.shape.clear();
    m.parameters = 0;
    if (m.trainable && node.num_outputs() > 0) {
      const Shape& shape = node.output_shape(0);
      m.shape = tfprof_dims(shape);
      m.parameters = shape.fully_defined() ? shape.num_elements() : 0;
    }
    m.static_float_ops = node_float_ops(node);
    if (const AttrValue* v = node.attrs().find("data_format"))
      if (const auto* s = std::get_if<std::string>(v)) m.data_format = *s;
    m.collective_ranks = 0;
    if (is_collective_op(m.op))
      if (const auto collective = collective_trace_args(node, {}))
        m.collective_ranks = static_cast<int32_t>(collective->ranks);
    if (index >= 0) {
      update_op_types(m);
      if (static_cast<size_t>(id) >= by_graph_id_.size()) by_graph_id_.resize(id + 1, -1);
      by_graph_id_[id] = index;
      ++structure_version;
    } else {
      // A fresh model's names are indexed together after the loop (nothing looks them up
      // before): NodeNameIndex::insert_range overlaps their cache misses.
      index_last_node(/*by_name=*/!fresh_model);
    }
  }
  if (fresh_model)
    by_name_.insert_range(0, static_cast<int32_t>(nodes.size()), [this](int32_t i) { return name_of(i); });
  if (static_cast<size_t>(n) > by_graph_id_.size()) by_graph_id_.resize(n, -1);
  drop_replaced_inputs();
}

void ProfileModel::set_inputs(ModelNode& node, std::span<const ModelInput> inputs) {
  replaced_inputs_ += node.num_inputs;
  node.first_input = static_cast<uint32_t>(inputs_.size());
  node.num_inputs = static_cast<uint32_t>(inputs.size());
  inputs_.insert(inputs_.end(), inputs.begin(), inputs.end());
}

void ProfileModel::drop_replaced_inputs() {
  // A model synced with other graphs in turn gives its nodes new inputs each time: the old ones
  // go once they are most of the array, so that it stays at most twice what the nodes hold.
  if (replaced_inputs_ <= inputs_.size() / 2) return;
  std::vector<ModelInput> kept;
  kept.reserve(inputs_.size() - replaced_inputs_);
  for (ModelNode& node : nodes) {
    const auto own = inputs_of(node);
    node.first_input = static_cast<uint32_t>(kept.size());
    kept.insert(kept.end(), own.begin(), own.end());
  }
  inputs_ = std::move(kept);
  replaced_inputs_ = 0;
}

void ProfileModel::add_step(int64_t step, const RunMetadata& metadata, const Graph* graph, std::ostream& log) {
  const StepStats& stats = metadata.step_stats;
  if (stats.dev_stats().empty()) {
    log << "Invalid RunMetadata for step " << step << "\n";
    return;
  }
  if (graph) sync_graph(*graph);
  StepData& data = steps[step];
  if (data.nodes.empty()) {
    data.base_ns = stats.base_ns;
    data.base_wall_ns = stats.base_wall_ns;
  }
  // Several RunMetadata of one step: their stages add up.
  for (const InputStage& stage : metadata.input_stages) add_input_stage(data.input_stages, stage);

  // Where each node's NodeStep is in data.nodes (a step added again merges into it).
  std::vector<int32_t> slot(nodes.size(), -1);
  for (size_t i = 0; i < data.nodes.size(); ++i) slot[data.nodes[i].node] = static_cast<int32_t>(i);
  const size_t first_new = data.nodes.size();
  size_t num_records = 0;
  for (const DeviceStepStats& dev_stats : stats.dev_stats()) num_records += dev_stats.node_stats.size();
  reserve_huge_unless_reclaimed(data.nodes, data.nodes.size() + num_records);
  reserve_huge_unless_reclaimed(data.execs, data.execs.size() + num_records);
  NewMemory room;
  room.add_room_of(data.nodes);
  room.add_room_of(data.execs);
  MappedBeside mapped(std::move(room), kNewMemoryWorthAThread);
  // Each graph node's record, for RunShapes (its rule: the record's node_id is a node of the
  // graph of the record's name), found here with the model's own check: synced with the graph,
  // the model node at by_graph_id_[id] has graph node id's name.
  const int graph_nodes = graph ? graph->num_nodes() : 0;
  std::vector<const NodeExecStats*> recorded(static_cast<size_t>(graph_nodes), nullptr), again;

  bool has_gpu_scheduling = false, has_gpu_stream = false;
  for (const DeviceStepStats& dev_stats : stats.dev_stats()) {
    const int32_t dev_index = intern_device(dev_stats.device);
    const std::string& dev = devices[dev_index];
    if (is_placed_on_accelerator(dev)) {
      has_gpu_scheduling = true;
      if (counts_as_accelerator_time(dev)) has_gpu_stream = true;
    }
    const bool canonical = is_canonical_device(dev);
    const bool accelerator_time = counts_as_accelerator_time(dev);

    for (const NodeExecStats& ns : dev_stats.node_stats) {
      std::string_view name = ns.node_name;
      if (size_t colon = name.find(':'); colon != std::string_view::npos) name = name.substr(0, colon);
      int32_t index = -1;
      if (ns.node_id >= 0 && static_cast<size_t>(ns.node_id) < by_graph_id_.size()) {
        const int32_t candidate = by_graph_id_[ns.node_id];
        if (candidate >= 0 && nodes[candidate].name == name) index = candidate;
        if (index >= 0 && ns.node_id < graph_nodes && name.size() == ns.node_name.size())
          (recorded[ns.node_id] ? again.emplace_back() : recorded[ns.node_id]) = &ns;
      }
      if (index < 0) index = find(name);
      if (index < 0) {
        if (!creatable_from_step(name)) continue;
        ModelNode created;
        created.name = std::string(name);
        created.op = created.name;  // TensorFlow's choice: the op type is unknown
        index = add_node(std::move(created));
        slot.push_back(-1);
      }
      ModelNode& node = nodes[index];
      if (canonical) {
        if (node.device >= 0 && node.device != dev_index) continue;  // seen on another device: dropped
        if (node.device < 0) {
          node.device = dev_index;
          update_op_types(node);
        }
      }
      if (slot[index] < 0) {
        slot[index] = static_cast<int32_t>(data.nodes.size());
        data.nodes.push_back(NodeStep{.node = index});
      }
      NodeStep& r = data.nodes[slot[index]];
      const int64_t all_start_micros = ns.all_start_micros();
      if (all_start_micros > 0) {
        r.all_start_micros = r.all_start_micros > 0 ? std::min(r.all_start_micros, all_start_micros) : all_start_micros;
        // A run shorter than a microsecond counts one.
        const int64_t op_end_rel_micros = std::max<int64_t>(ns.op_end_rel_micros(), 1);
        r.latest_end_micros = std::max(r.latest_end_micros, all_start_micros + op_end_rel_micros);
        if (accelerator_time) {
          r.accelerator_micros += op_end_rel_micros;
        } else if (canonical) {
          r.cpu_micros += op_end_rel_micros;
          ++r.run_count;
        }
        data.execs.push_back(ExecRecord{.node = index,
                                        .device = dev_index,
                                        .thread_id = ns.thread_id,
                                        .scheduled_ns = ns.scheduled_ns,
                                        .all_start_ns = ns.all_start_ns,
                                        .op_start_rel_ns = ns.op_start_rel_ns,
                                        .op_end_rel_ns = ns.op_end_rel_ns,
                                        .all_end_rel_ns = ns.all_end_rel_ns});
      }
      if (dev_index != node.device) continue;
      if (all_start_micros <= 0) {
        log << ns.node_name << " has no start time, skipping\n";
        continue;
      }
      int64_t requested = 0, peak = 0, residual = 0;
      for (const AllocatorMemoryUsed& mem : ns.memory) {
        requested += mem.total_bytes;
        peak += mem.peak_bytes;
        residual += mem.live_bytes;
      }
      const int64_t temp = ns.memory_stats.temp_memory_size;
      const int64_t persistent = ns.memory_stats.persistent_memory_size;
      r.requested_bytes += requested + persistent + temp;
      r.peak_bytes += peak + persistent + temp;
      r.residual_bytes += residual + persistent;
      for (const NodeOutput& out : ns.output) {
        const AllocationDescription& a = out.tensor_description.allocation_description;
        r.output_bytes += std::max(a.allocated_bytes, a.requested_bytes);
      }
    }
  }
  if (has_gpu_scheduling && !has_gpu_stream) miss_accelerator_stream = true;
  for (size_t i = first_new; i < data.nodes.size(); ++i) ++nodes[data.nodes[i].node].steps_run;

  // Float ops and input shapes from the shapes the step saw.
  std::unique_ptr<RunShapes> shapes;
  if (graph) shapes = std::make_unique<RunShapes>(*graph, recorded, again);
  // Each node's NodeSteps [begin, end) (each node's own: the two halves of a big step are done on
  // two threads).
  const auto cost_nodes = [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      NodeStep& r = data.nodes[k];
      const ModelNode& node = nodes[r.node];
      const Node* graph_node = nullptr;
      // The graph's node of this name (the model is synced with the graph: see above).
      if (shapes && node.graph_id >= 0 && node.graph_id < graph_nodes && by_graph_id_[node.graph_id] == r.node)
        graph_node = graph->node(node.graph_id);
      if (!graph_node) {
        r.float_ops = node.static_float_ops * r.run_count;
        continue;
      }
      r.float_ops = node_float_ops(*graph_node, *shapes) * r.run_count;
      if (!shapes->ran(*graph_node)) continue;
      const auto& inputs = graph_node->inputs();
      const std::span<ModelInput> model_inputs = inputs_of(node);
      for (size_t i = 0; i < inputs.size() && i < model_inputs.size(); ++i)
        model_inputs[i].shape = shapes->output(inputs[i]);
    }
  };
  const size_t half = data.nodes.size() >= kNodesWorthAThread && hardware_cores() > 1 ? data.nodes.size() / 2 : 0;
  std::exception_ptr other_failed;
  ThreadBeside other;  // declared after what it writes: its destructor waits for it
  if (half > 0) {
    try {
      other = ThreadBeside([&] {
        try {
          cost_nodes(half, data.nodes.size());
        } catch (...) {
          other_failed = std::current_exception();
        }
      });
    } catch (const std::system_error&) {  // no thread to be had: all of them here
    }
  }
  cost_nodes(0, other.started() ? half : data.nodes.size());
  other.join();
  if (other_failed) std::rethrow_exception(other_failed);
  const auto by_node = [](const NodeStep& a, const NodeStep& b) { return a.node < b.node; };
  // Usually in order already (a step's records follow the graph's order), so checked first.
  if (!std::is_sorted(data.nodes.begin(), data.nodes.end(), by_node))
    std::sort(data.nodes.begin(), data.nodes.end(), by_node);
  ++steps_version;
  drop_old_steps();
}

namespace {
void accumulate(NodeStats& s, const NodeStep& r) {
  s.run_count += r.run_count;
  s.accelerator_exec_micros += r.accelerator_micros;
  s.cpu_exec_micros += r.cpu_micros;
  s.exec_micros += r.accelerator_micros + r.cpu_micros;
  s.requested_bytes += r.requested_bytes;
  s.peak_bytes += r.peak_bytes;
  s.residual_bytes += r.residual_bytes;
  s.output_bytes += r.output_bytes;
  s.float_ops += r.float_ops;
}
}  // namespace

void ProfileModel::drop_old_steps() {
  if (max_steps == 0) return;
  while (steps.size() > max_steps) {
    if (dropped.size() < nodes.size()) dropped.resize(nodes.size());
    for (const NodeStep& r : steps.begin()->second.nodes) {
      ++dropped[r.node].steps;
      accumulate(dropped[r.node].sums, r);
    }
    steps.erase(steps.begin());
    ++steps_version;
  }
}

std::vector<NodeStats> ProfileModel::stats(int64_t step) const {
  std::vector<NodeStats> out = sized_huge<NodeStats>(nodes.size());
  if (step >= 0) {
    auto it = steps.find(step);
    if (it != steps.end()) {
      for (const NodeStep& r : it->second.nodes) {
        NodeStats& s = out[r.node];
        s.run_count = r.run_count;
        s.accelerator_exec_micros = r.accelerator_micros;
        s.cpu_exec_micros = r.cpu_micros;
        s.exec_micros = r.accelerator_micros + r.cpu_micros;
        s.requested_bytes = r.requested_bytes;
        s.peak_bytes = r.peak_bytes;
        s.residual_bytes = r.residual_bytes;
        s.output_bytes = r.output_bytes;
        s.float_ops = r.float_ops;
      }
    }
  } else {
    for (size_t i = 0; i < dropped.size() && i < out.size(); ++i) out[i] = dropped[i].sums;
    for (const auto& [_, data] : steps)
      for (const NodeStep& r : data.nodes) accumulate(out[r.node], r);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const int64_t n = nodes[i].steps_run;
      if (n <= 1) continue;
      NodeStats& s = out[i];
      for (int64_t NodeStats::*field : kSummedNodeStats) s.*field /= n;
      s.exec_micros /= n;
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].steps_run == 0) out[i].float_ops = nodes[i].static_float_ops;
  return out;
}

void ProfileModel::recompute_derived() {
  for (size_t i = 0; i < nodes.size(); ++i)
    nodes[i].steps_run = i < dropped.size() ? static_cast<int32_t>(dropped[i].steps) : 0;
  for (const auto& [_, data] : steps)
    for (const NodeStep& r : data.nodes) ++nodes[r.node].steps_run;
  for (ModelNode& n : nodes) update_op_types(n);
  ++structure_version;
  ++steps_version;
}

}  // namespace stepscope::tfprof
