#include "stepscope/runtime/internal/executor_plan.h"

#include <algorithm>
#include <unordered_map>

#include "stepscope/base/error.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/kernel_context.h"

namespace stepscope {

size_t Executor::KeyHash::operator()(const std::vector<int64_t>& key) const {
  size_t h = 1469598103934665603ull;
  for (int64_t v : key) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
  return h;
}

namespace {

int64_t slot_key(const Output& o) { return static_cast<int64_t>(o.node->id()) << 16 | o.index; }

bool is_ref_input(const Node& node, int i) { return i < 32 && (node.op().ref_inputs >> i & 1u); }

// A node is cheap when its outputs are small and known: running it inline beats a thread hop.
bool is_expensive(const Node& node) {
  constexpr int64_t kCheapElements = 16384;
  if (node.op().flops) {
    std::vector<Shape> in, out;
    for (const auto& i : node.inputs()) in.push_back(i.shape());
    for (int i = 0; i < node.num_outputs(); ++i) out.push_back(node.output_shape(i));
    for (const auto& s : in)
      if (!s.fully_defined()) return true;
    for (const auto& s : out)
      if (!s.fully_defined()) return true;
    return node.op().flops({node, in, out}) > 4 * kCheapElements;
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    int64_t n = node.output_shape(i).num_elements();
    if (n < 0 || n > kCheapElements) return true;
  }
  return false;
}

// The feeds' slots, grouped per node in output order (so a fed node's outputs are consecutive
// slots, as a node's are), and the fed nodes that do not run, which traced steps record.
// Feeds are traced with code marked cold (here, describe_fed in executor.cc, add_fed_nodes): kept out
// of the budget GCC inlines with across this file, so that what it inlines into run_node (the
// traced log's push_back) stays as it was.
[[gnu::cold]] void place_feeds(Executor::Plan& plan, const FeedList& feeds, const std::vector<char>& needed,
                               DeviceSet& device_set) {
  plan.num_item_devices = plan.devices.size();
  std::vector<int> by_output(feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) by_output[i] = static_cast<int>(i);
  std::sort(by_output.begin(), by_output.end(),
            [&](int a, int b) { return slot_key(feeds[a].first) < slot_key(feeds[b].first); });
  plan.feed_slots.resize(feeds.size());
  for (size_t k = 0; k < by_output.size(); ++k) {
    const Node* node = feeds[by_output[k]].first.node;
    plan.feed_slots[by_output[k]] = plan.num_slots++;
    // A node that runs anyway (another of its outputs is needed) is recorded when it runs.
    if (needed[node->id()]) continue;
    if (k > 0 && feeds[by_output[k - 1]].first.node == node) {
      plan.fed_nodes.back().num_slots++;
      continue;
    }
    auto dev = std::find(plan.devices.begin(), plan.devices.end(), node->device());
    if (dev == plan.devices.end()) {
      plan.placed.push_back(device_set.device_for(*node));
      dev = plan.devices.insert(dev, node->device());
    }
    plan.fed_nodes.push_back({node, plan.num_slots - 1, 1, static_cast<int>(dev - plan.devices.begin())});
  }
}

// The packs of the items that want inputs contiguous (OpDef::contiguous_inputs). A pack is
// planned when every input it names has a fully known shape and a producer that runs in the
// step on a CPU device, each output at most once in all packs; otherwise that consumer gets none
// (its kernel then works as without).
[[gnu::cold]] void plan_packs(Executor::Plan& plan, const std::vector<int>& plan_index,
                              const std::unordered_map<int64_t, int>& fed) {
  constexpr int64_t kMaxPackBytes = int64_t{1} << 30;  // create_packed's limit is 2 GiB
  auto on_cpu = [&](const Executor::Plan::Item& item) { return plan.placed[item.device]->device_type() == "CPU"; };
  for (const Executor::Plan::Item& consumer : plan.items) {
    const Node& node = *consumer.node;
    if (!node.op().contiguous_inputs || !on_cpu(consumer) || node.num_inputs() < 2) continue;
    std::vector<int64_t> bytes(node.num_inputs());
    bool known = true;
    for (int i = 0; i < node.num_inputs() && known; ++i) {
      const Shape& shape = node.input(i).shape();
      known = shape.fully_defined() && node.input(i).dtype() != DType::kString;
      if (known) bytes[i] = shape.num_elements() * static_cast<int64_t>(dtype_size(node.input(i).dtype()));
    }
    if (!known) continue;
    const std::vector<int> wanted = node.op().contiguous_inputs(node, bytes);
    if (wanted.size() < 2) continue;
    for (int i : wanted)
      if (i < 0 || i >= node.num_inputs()) throw InternalError(node_error_message(node, "contiguous_inputs out of range"));
    const DType dtype = node.input(wanted[0]).dtype();
    int64_t total = 0;
    bool ok = true;
    for (size_t k = 0; k < wanted.size() && ok; ++k) {
      const int i = wanted[k];
      const Output& in = node.input(i);
      ok = !is_ref_input(node, i) && in.dtype() == dtype && !fed.count(slot_key(in));
      const Executor::Plan::Item* producer = ok ? &plan.items[plan_index[in.node->id()]] : nullptr;
      ok = ok && on_cpu(*producer) &&
           (producer->placements < 0 || plan.placements[producer->placements + in.index].pack < 0);
      for (size_t j = 0; j < k && ok; ++j) ok = node.input(wanted[j]) != in;  // one place an output
      total += bytes[i];
    }
    if (!ok || total > kMaxPackBytes) continue;
    const int32_t pack = static_cast<int32_t>(plan.packs.size());
    plan.packs.push_back({dtype, {}});
    for (size_t k = 0; k < wanted.size(); ++k) {
      const Output& in = node.input(wanted[k]);
      Executor::Plan::Item& producer = plan.items[plan_index[in.node->id()]];
      if (producer.placements < 0) {
        producer.placements = static_cast<int>(plan.placements.size());
        plan.placements.resize(plan.placements.size() + producer.num_outputs);
      }
      plan.placements[producer.placements + in.index] = {pack, static_cast<int32_t>(k)};
      plan.packs.back().counts.push_back(in.shape().num_elements());
    }
  }
}

}  // namespace

std::shared_ptr<Executor::Plan> Executor::build_plan(const FeedList& feeds, const std::vector<Output>& fetches,
                                                     const std::vector<Node*>& targets) const {
  auto plan = std::make_shared<Plan>();
  const int n = graph_.num_nodes();
  std::unordered_map<int64_t, int> fed;  // slot_key -> feed index
  for (size_t i = 0; i < feeds.size(); ++i) fed.emplace(slot_key(feeds[i].first), static_cast<int>(i));

  // 1. Prune: walk back from fetches and targets, stopping at fed outputs.
  std::vector<char> needed(n, 0);
  std::vector<const Node*> stack;
  auto want = [&](const Node* node) {
    if (!needed[node->id()]) {
      needed[node->id()] = 1;
      stack.push_back(node);
    }
  };
  for (const Output& f : fetches)
    if (!fed.count(slot_key(f))) want(f.node);
  for (Node* t : targets) want(t);
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    for (int i = 0; i < node->num_inputs(); ++i)
      if (!is_ref_input(*node, i) && !fed.count(slot_key(node->input(i)))) want(node->input(i).node);
    for (const Node* c : node->control_inputs()) want(c);
  }

  // 2. Node ids are topological (inputs exist before a node is added), so id order works.
  std::vector<int> plan_index(n, -1);
  for (int id = 0; id < n; ++id) {
    if (!needed[id]) continue;
    const Node* node = graph_.node(id);
    if (node->op_type() == "Placeholder")
      throw InvalidArgumentError(node_error_message(*node, "You must feed a value for placeholder tensor '" +
                                                               node->name() + "' with dtype " +
                                                               std::string(dtype_name(node->output_dtype(0))) +
                                                               " and shape " + node->output_shape(0).to_string()));
    // The node's device, once per plan (a step only reads the kernel it gave).
    auto dev = std::find(plan->devices.begin(), plan->devices.end(), node->device());
    if (dev == plan->devices.end()) {
      plan->placed.push_back(devices_.device_for(*node));
      dev = plan->devices.insert(dev, node->device());
    }
    const Device& device = *plan->placed[dev - plan->devices.begin()];
    const KernelFn kernel = device.kernel_for(node->op());
    if (!kernel) throw UnimplementedError(node_error_message(*node, "op has no " + device.device_type() + " kernel"));
    plan_index[id] = static_cast<int>(plan->items.size());
    Plan::Item item{};
    item.node = node;
    item.node_id = node->id();
    item.kernel = kernel;
    item.num_inputs = node->num_inputs();
    item.num_outputs = node->num_outputs();
    item.output_base = plan->num_slots;
    plan->num_slots += item.num_outputs;
    item.expensive = is_expensive(*node);
    item.input = node->op_type().starts_with("IteratorGetNext");
    item.device = static_cast<int>(dev - plan->devices.begin());
    item.placements = -1;
    plan->items.push_back(item);
  }
  place_feeds(*plan, feeds, needed, devices_);
  const int empty_slot = plan->num_slots++;  // what reference inputs read: never written
  plan->initial_refs.assign(plan->num_slots, 0);
  plan->dtypes.assign(plan->num_slots, DType::kFloat32);
  for (const auto& item : plan->items)
    for (int i = 0; i < item.num_outputs; ++i) plan->dtypes[item.output_base + i] = item.node->output_dtype(i);

  auto slot_of = [&](const Output& o) {
    auto it = fed.find(slot_key(o));
    if (it != fed.end()) return plan->feed_slots[it->second];
    return plan->items[plan_index[o.node->id()]].output_base + o.index;
  };

  // 3. Edges: input slots, successor lists (grouped per producer), pending counts.
  std::vector<std::vector<int>> succ(plan->items.size());
  for (size_t p = 0; p < plan->items.size(); ++p) {
    Plan::Item& item = plan->items[p];
    item.input_base = static_cast<int>(plan->input_slots.size());
    for (int i = 0; i < item.num_inputs; ++i) {
      const Output& in = item.node->input(i);
      if (is_ref_input(*item.node, i)) {
        plan->input_slots.push_back(empty_slot);
        plan->initial_refs[empty_slot]++;
        continue;
      }
      int slot = slot_of(in);
      plan->input_slots.push_back(slot);
      plan->initial_refs[slot]++;
      if (!fed.count(slot_key(in))) {
        succ[plan_index[in.node->id()]].push_back(static_cast<int>(p));
        item.initial_pending++;
      }
    }
    for (const Node* c : item.node->control_inputs()) {
      succ[plan_index[c->id()]].push_back(static_cast<int>(p));
      item.initial_pending++;
    }
  }
  for (size_t p = 0; p < plan->items.size(); ++p) {
    plan->items[p].succ_begin = static_cast<int>(plan->successors.size());
    plan->successors.insert(plan->successors.end(), succ[p].begin(), succ[p].end());
    plan->items[p].succ_end = static_cast<int>(plan->successors.size());
    if (plan->items[p].initial_pending == 0) plan->roots.push_back(static_cast<int>(p));
  }
  // Variable reads first (see run()).
  auto is_state_read = [&](int p) { return plan->items[p].node->op_type() == "VariableV2"; };
  plan->num_state_roots = static_cast<size_t>(
      std::stable_partition(plan->roots.begin(), plan->roots.end(), is_state_read) - plan->roots.begin());
  // Then the cheap roots (constants, small outputs): the caller runs them too, before the rest.
  // A thread hop costs more than they do, and a pool thread slow to wake would hold back their
  // consumers (a Const started 40 us into a 60 us step showed up on its critical path).
  auto is_cheap = [&](int p) { return !plan->items[p].expensive; };
  const auto others = plan->roots.begin() + static_cast<std::ptrdiff_t>(plan->num_state_roots);
  plan->num_inline_roots =
      static_cast<size_t>(std::stable_partition(others, plan->roots.end(), is_cheap) - plan->roots.begin());
  for (const Output& f : fetches) {
    int slot = slot_of(f);
    plan->fetch_slots.push_back(slot);
    plan->initial_refs[slot]++;  // never released during the step: the fetch holds it
  }
  // Feeds are held by the run state until the end too (they are owned by the caller anyway).
  for (int slot : plan->feed_slots) plan->initial_refs[slot]++;
  plan_packs(*plan, plan_index, fed);
  return plan;
}

std::shared_ptr<const Executor::Plan> Executor::plan_for(const FeedList& feeds, const std::vector<Output>& fetches,
                                                         const std::vector<Node*>& targets) {
  std::vector<int64_t> key;
  key.reserve(feeds.size() + fetches.size() + targets.size() + 2);
  for (const auto& f : feeds) key.push_back(slot_key(f.first));
  key.push_back(-1);
  for (const auto& f : fetches) key.push_back(slot_key(f));
  key.push_back(-2);
  for (const Node* t : targets) key.push_back(t->id());
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  auto plan = build_plan(feeds, fetches, targets);
  prepare_traced_steps(*plan);  // where told that steps will be traced, or the plan is small
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return cache_.emplace(std::move(key), std::move(plan)).first->second;
}

int Executor::num_cached_plans() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return static_cast<int>(cache_.size());
}

// The plan's names (see names()), into names_table_.
void Executor::Plan::make_names() const {
  // The labels are written back to back into one buffer (Node::timeline_label's text, no
  // allocation a label) and interned as one string: one hash over the buffer instead of a
  // table probe a label (a cache miss each on a big graph). A label starts with the node's
  // name, so the name is a view into it. Op types repeat: each is interned when it differs
  // from the one before.
  std::string labels;
  labels.reserve(items.size() * 48);
  struct Label {
    size_t end, name_size;     // in `labels`: where the label ends, how much of it is the name
    std::string_view op_type;  // the node's own
  };
  std::vector<Label> written;
  written.reserve(items.size());
  std::vector<NodeLabelInput> inputs;
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    // The names are made beside a first traced step, which may be over before them: the next
    // traced step may ask this thread to map its new memory meanwhile (see name_beside).
    if (i % 256 == 0) map_what_was_asked();
    // A big graph's nodes are far apart in memory, and this loop waited on their cache misses
    // (~230 ns a node at 10^6): their lines are asked for 16 items ahead, and once there, 8
    // ahead, the name's and the inputs' (in Node's layout, name_ and inputs_ lie in its first 96 bytes).
    if (i + 16 < n) {
      const char* far = reinterpret_cast<const char*>(items[i + 16].node);
      __builtin_prefetch(far);
      __builtin_prefetch(far + 48);
      __builtin_prefetch(far + 95);
    }
    if (i + 8 < n) {
      const Node* near = items[i + 8].node;
      __builtin_prefetch(near->name().data());
      __builtin_prefetch(near->inputs().data());
    }
    const Item& item = items[i];
    inputs.clear();
    for (const Output& in : item.node->inputs()) inputs.push_back({.node = in.node->name(), .output = in.index});
    append_node_label(labels, item.node->name(), item.node->op_type(), inputs);
    written.push_back({labels.size(), item.node->name().size(), item.node->op_type()});
  }
  const std::string_view interned = StepStats::intern(std::move(labels));
  std::string_view op_type, interned_op_type;
  StepStats::PlanNames& table = *names_table_;
  table.items.clear();  // what a failed try left
  table.fed.clear();
  table.devices.clear();
  table.items.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    const size_t begin = i ? written[i - 1].end : 0;
    const std::string_view label = interned.substr(begin, written[i].end - begin);
    if (written[i].op_type != op_type) {
      op_type = written[i].op_type;
      interned_op_type = StepStats::intern(op_type);
    }
    table.items.push_back({label.substr(0, written[i].name_size), interned_op_type, label, item.node_id,
                           item.output_base, item.num_outputs, item.device});
  }
  for (const auto& d : devices) table.devices.push_back(StepStats::intern(d));
  // A fed node computed nothing in the step: its label names no inputs.
  for (const FedNode& f : fed_nodes)
    table.fed.push_back({StepStats::intern(f.node->name()), StepStats::intern(f.node->op_type()),
                         StepStats::intern(format_node_label(f.node->name(), f.node->op_type(), {})), f.node->id(),
                         f.first_slot, f.num_slots, f.device});
}

}  // namespace stepscope
