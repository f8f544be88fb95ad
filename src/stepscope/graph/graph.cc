#include "stepscope/graph/graph.h"

#include <charconv>

namespace stepscope {
namespace {
std::atomic<uint64_t> next_graph_id{1};
}

Graph::Graph() : id_(next_graph_id.fetch_add(1)) {}

Node* Graph::add_node(NodeSpec spec) {
  const std::string op_name = spec.op ? spec.op->name : std::string("?");
  if (finalized_)
    throw FailedPreconditionError("Graph is finalized and cannot be modified (adding " + op_name + " node '" +
                                  spec.name + "')");
  if (!spec.op) throw InvalidArgumentError("node '" + spec.name + "' has no op");
  if (spec.name.empty()) throw InvalidArgumentError("[" + op_name + "] node name is empty");
  if (by_name_.count(spec.name))
    throw InvalidArgumentError("[" + op_name + "] duplicate node name '" + spec.name + "'");
  const std::string prefix = "[" + op_name + "] " + spec.name + ": ";
  if (spec.op->num_inputs >= 0 && static_cast<int>(spec.inputs.size()) != spec.op->num_inputs)
    throw InvalidArgumentError(prefix + "expects " + std::to_string(spec.op->num_inputs) + " inputs, got " +
                               std::to_string(spec.inputs.size()));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Output& in = spec.inputs[i];
    if (!in.node) throw InvalidArgumentError(prefix + "input " + std::to_string(i) + " is null");
    if (&in.node->graph() != this)
      throw InvalidArgumentError(prefix + "input " + std::to_string(i) + " (" + in.node->name() +
                                 ") is from another graph");
    if (in.index < 0 || in.index >= in.node->num_outputs())
      throw InvalidArgumentError(prefix + "input " + std::to_string(i) + " refers to output " +
                                 std::to_string(in.index) + " of " + in.node->name() + ", which has " +
                                 std::to_string(in.node->num_outputs()) + " outputs");
  }
  for (Node* c : spec.control_inputs)
    if (!c || &c->graph() != this)
      throw InvalidArgumentError(prefix + "control input is null or from another graph");

  auto node = std::make_unique<Node>();
  node->id_ = static_cast<int>(nodes_.size());
  node->name_ = std::move(spec.name);
  node->op_ = spec.op;
  node->attrs_ = std::move(spec.attrs);
  node->inputs_ = std::move(spec.inputs);
  node->control_inputs_ = std::move(spec.control_inputs);
  node->device_ = keep_device(canonical_device(spec.device));
  node->location_ = spec.location.unknown() ? &kUnknownSourceLocation : &locations_[locations_.intern(spec.location)];
  node->graph_ = this;

  std::vector<DType> in_dtypes;
  std::vector<Shape> in_shapes;
  in_dtypes.reserve(node->inputs_.size());
  in_shapes.reserve(node->inputs_.size());
  for (const Output& in : node->inputs_) {
    in_dtypes.push_back(in.dtype());
    in_shapes.push_back(in.shape());
  }
  ShapeContext ctx(*node, in_dtypes, in_shapes);
  if (node->op_->shape) {
    try {
      node->op_->shape(ctx);
      // An output whose element count overflows is refused here, where the node is known,
      // not later by whatever first counts its elements (a kernel, the cost model).
      for (const Shape& s : ctx.output_shapes()) (void)s.num_elements();
    } catch (const Error& e) {
      // Errors raised below the rule (a Shape whose element count overflows, ...) do not know
      // the node; the user needs it to find the call at fault.
      if (std::string_view(e.what()).starts_with(prefix)) throw;
      throw_error(e.code(), prefix + e.what());
    }
  }
  node->output_dtypes_ = ctx.output_dtypes();
  node->output_shapes_ = ctx.output_shapes();
  if (node->op_->num_outputs >= 0 && node->num_outputs() != node->op_->num_outputs)
    throw InternalError(prefix + "shape rule produced " + std::to_string(node->num_outputs()) +
                        " outputs, op declares " + std::to_string(node->op_->num_outputs));

  // Nodes built by the user's calls (those with a call site); not those read from a file.
  if (capture_call_stacks_ && !node->location_->file.empty()) {
    uintptr_t pcs[kMaxCallStackDepth];
    const int depth = capture_call_stack(pcs, kMaxCallStackDepth, /*skip=*/1);  // from our caller
    node->call_stack_ = call_stacks_.intern({pcs, static_cast<size_t>(depth)});
  }

  Node* raw = node.get();
  by_name_.emplace(raw->name_, raw);
  nodes_.push_back(std::move(node));
  return raw;
}

const std::string* Graph::keep_device(std::string device) {
  if (!devices_.empty() && devices_.back() == device) return &devices_.back();
  if (auto it = device_index_.find(device); it != device_index_.end()) return it->second;
  const std::string& kept = devices_.emplace_back(std::move(device));
  device_index_.emplace(kept, &kept);
  return &kept;
}

Node* Graph::find_node(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

Output Graph::output_by_name(std::string_view name) const {
  int index = 0;
  std::string_view node_name = name;
  if (auto colon = name.rfind(':'); colon != std::string_view::npos) {
    auto digits = name.substr(colon + 1);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && p == digits.data() + digits.size()) node_name = name.substr(0, colon);
    else index = 0;
  }
  Node* n = find_node(node_name);
  if (!n) throw NotFoundError("no node named '" + std::string(node_name) + "' in the graph");
  if (index < 0 || index >= n->num_outputs())
    throw NotFoundError("node '" + n->name() + "' has no output " + std::to_string(index));
  return n->output(index);
}

bool Graph::name_in_use(std::string_view name) const {
  return by_name_.count(std::string(name)) > 0 || name_counters_.count(std::string(name)) > 0;
}

std::string Graph::unique_name(std::string_view base) {
  std::string name(base);
  auto it = name_counters_.find(name);
  if (it == name_counters_.end() && !by_name_.count(name)) {
    name_counters_[name] = 0;
    return name;
  }
  int& counter = name_counters_[name];
  std::string candidate;
  do {
    candidate = name + "_" + std::to_string(++counter);
  } while (by_name_.count(candidate) || name_counters_.count(candidate));
  name_counters_[candidate] = 0;
  return candidate;
}

void Graph::add_to_collection(const std::string& key, Node* node) { collections_[key].push_back(node); }

const std::vector<Node*>& Graph::collection(const std::string& key) const {
  static const std::vector<Node*> empty;
  auto it = collections_.find(key);
  return it == collections_.end() ? empty : it->second;
}

std::string canonical_device(std::string_view device) {
  static const std::string kPrefix = "/job:localhost/replica:0/task:0/device:";
  if (device.empty()) return kPrefix + "CPU:0";
  std::string d(device);
  if (d.rfind("/job:", 0) == 0) {
    auto pos = d.find("/device:");
    if (pos == std::string::npos) throw InvalidArgumentError("unsupported device '" + d + "'");
    d = d.substr(pos + 8);
  }
  if (d.rfind("/device:", 0) == 0) d = d.substr(8);
  if (!d.empty() && d[0] == '/') d = d.substr(1);
  auto colon = d.find(':');
  std::string type = d.substr(0, colon);
  for (auto& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string index = colon == std::string::npos ? "0" : d.substr(colon + 1);
  bool digits = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
  if (type == "GPU" && digits)
    throw InvalidArgumentError("unsupported device '" + std::string(device) +
                               "': no GPU device is registered (this build places ops on CPU devices only, e.g. "
                               "/cpu:0; there is no soft placement)");
  if (type != "CPU" || !digits)
    throw InvalidArgumentError("unsupported device '" + std::string(device) +
                               "': this build places ops on CPU devices only (e.g. /cpu:0)");
  return kPrefix + "CPU:" + index;
}

}  // namespace stepscope
