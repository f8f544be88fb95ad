#include "stepscope/train/variables.h"

#include <algorithm>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/ops/state_ops.h"

namespace stepscope {

bool Variable::trainable() const {
  const auto& t = node->graph().collection(kTrainableVariables);
  return std::find(t.begin(), t.end(), node) != t.end();
}

Variable Variable::from_node(Node* node) {
  if (!node || node->op_type() != "VariableV2")
    throw InvalidArgumentError("'" + (node ? node->name() : std::string("null")) + "' is not a variable");
  Variable v;
  v.node = node;
  const auto& inits = node->graph().collection(kVariableInitializers);
  for (Node* init : inits) {
    if (init->input(0).node == node) {
      v.initializer = init;
      v.initial_value = init->input(1);
      break;
    }
  }
  return v;
}

namespace {

enum class Kind { global, trainable, local };

Variable new_variable(const Scope& scope, std::string_view name, Output initial_value, Kind kind, CallSite site) {
  if (!initial_value) throw InvalidArgumentError("variable '" + std::string(name) + "' has no initial value");
  const Shape& shape = initial_value.shape();
  if (!shape.fully_defined())
    throw InvalidArgumentError("variable '" + std::string(name) + "': the initial value " + initial_value.name() +
                               " must have a fully defined shape, got " + shape.to_string());
  Output var = variable(scope.with_op_name(name), shape, initial_value.dtype(), site);
  Graph& g = scope.graph();
  Scope own = scope.with_name_scope(var.node->name() + "/");
  Variable v;
  v.node = var.node;
  v.initial_value = initial_value;
  v.initializer = assign(own.with_op_name("Assign"), var, initial_value, true, site).node;
  g.add_to_collection(kind == Kind::local ? kLocalVariables : kGlobalVariables, v.node);
  g.add_to_collection(kVariableInitializers, v.initializer);
  if (kind == Kind::trainable) g.add_to_collection(kTrainableVariables, v.node);
  return v;
}

std::vector<Variable> variables_of(const Graph& graph, const char* collection) {
  std::vector<Variable> out;
  for (Node* n : graph.collection(collection)) out.push_back(Variable::from_node(n));
  return out;
}

}  // namespace

Variable make_variable(const Scope& scope, std::string_view name, Output initial_value, bool trainable, CallSite site) {
  return new_variable(scope, name, initial_value, trainable ? Kind::trainable : Kind::global, site);
}

Variable make_local_variable(const Scope& scope, std::string_view name, Output initial_value, CallSite site) {
  return new_variable(scope, name, initial_value, Kind::local, site);
}

std::vector<Variable> global_variables(const Graph& graph) { return variables_of(graph, kGlobalVariables); }
std::vector<Variable> local_variables(const Graph& graph) { return variables_of(graph, kLocalVariables); }
std::vector<Variable> trainable_variables(const Graph& graph) { return variables_of(graph, kTrainableVariables); }
std::vector<Node*> get_update_ops(const Graph& graph) { return graph.collection(kUpdateOps); }

Node* variables_initializer(const Scope& scope, const std::vector<Variable>& variables, CallSite site) {
  std::vector<Node*> deps;
  for (const Variable& v : variables)
    if (v.initializer) deps.push_back(v.initializer);
  return no_op(scope.with_op_name("init"), deps, site);
}

Node* global_variables_initializer(const Scope& scope, CallSite site) {
  return variables_initializer(scope, global_variables(scope.graph()), site);
}

Node* local_variables_initializer(const Scope& scope, CallSite site) {
  std::vector<Node*> deps;
  for (const Variable& v : local_variables(scope.graph())) deps.push_back(v.initializer);
  return no_op(scope.with_op_name("local_init"), deps, site);
}

Variable get_global_step(const Graph& graph) {
  const auto& c = graph.collection(kGlobalStepCollection);
  return c.empty() ? Variable{} : Variable::from_node(c.front());
}

Variable get_or_create_global_step(const Scope& scope) {
  Graph& g = scope.graph();
  if (Variable existing = get_global_step(g)) return existing;
  Scope root = Scope(g).with_name_scope("global_step/");
  Output zero = constant(root.with_op_name("Initializer/zeros"), int64_t{0});
  Variable v = make_variable(Scope(g), "global_step", zero, /*trainable=*/false);
  g.add_to_collection(kGlobalStepCollection, v.node);
  return v;
}

Output get_or_create_global_step_read(Graph& graph) {
  const auto& cached = graph.collection(kGlobalStepReadCollection);
  if (!cached.empty()) return cached.front()->output(0);
  Variable step = get_global_step(graph);
  if (!step) return Output{};
  Output read = identity(Scope(graph).with_name_scope("global_step/").with_op_name("read"), step.value());
  graph.add_to_collection(kGlobalStepReadCollection, read.node);
  return read;
}

int64_t global_step_value(const Tensor& t) {
  return t.dtype() == DType::kInt32 ? t.scalar_value<int32_t>() : t.scalar_value<int64_t>();
}

}  // namespace stepscope
