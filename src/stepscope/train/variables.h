// Variables as TensorFlow 1.x users know them: a VariableV2 node holding state in the session,
// an initializer (Assign of an initial value), membership of the global / trainable collections,
// global_variables_initializer(), and the global step with the read tensor that hooks fetch.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope {

inline constexpr const char* kGlobalVariables = "variables";
inline constexpr const char* kTrainableVariables = "trainable_variables";
inline constexpr const char* kLocalVariables = "local_variables";
inline constexpr const char* kVariableInitializers = "variable_initializers";
inline constexpr const char* kGlobalStepCollection = "global_step";
inline constexpr const char* kGlobalStepReadCollection = "global_step_read";
// tf.GraphKeys.UPDATE_OPS: ops a training step must run besides the optimizer's updates (the
// moving averages of nn::batch_normalization). See get_update_ops.
inline constexpr const char* kUpdateOps = "update_ops";

struct Variable {
  Node* node = nullptr;         // the VariableV2 node ("w")
  Node* initializer = nullptr;  // "w/Assign"
  Output initial_value;

  Output value() const { return node->output(0); }
  operator Output() const { return value(); }  // NOLINT: variables are used as tensors
  const std::string& name() const { return node->name(); }
  const Shape& shape() const { return node->output_shape(0); }
  DType dtype() const { return node->output_dtype(0); }
  bool trainable() const;
  explicit operator bool() const { return node != nullptr; }

  // The Variable whose VariableV2 node is `node` (InvalidArgumentError for other nodes).
  static Variable from_node(Node* node);
};

// A variable named `name` (made unique under the scope), initialized from `initial_value`
// (which must have a fully defined shape). Trainable variables are what optimizers update and
// what tfprof counts as parameters.
Variable make_variable(const Scope& scope, std::string_view name, Output initial_value, bool trainable = true,
                       CallSite site = CallSite::current());

// A variable of the session rather than the model (TF's LOCAL_VARIABLES): neither global nor
// trainable, so never checkpointed or restored; set by local_variables_initializer(), which a
// Scaffold runs on every new session. The counts behind a streaming metric live in these.
Variable make_local_variable(const Scope& scope, std::string_view name, Output initial_value,
                             CallSite site = CallSite::current());

std::vector<Variable> global_variables(const Graph& graph);
std::vector<Variable> local_variables(const Graph& graph);
std::vector<Variable> trainable_variables(const Graph& graph);

// The nodes of the kUpdateOps collection, in the order they were added (tf.get_collection(
// tf.GraphKeys.UPDATE_OPS)). Make the train op depend on them, as in TensorFlow:
//   auto train = opt.minimize(root.with_control_dependencies(get_update_ops(g)), loss, step);
// (every node minimize adds, gradients included, then waits for the moving-average updates).
std::vector<Node*> get_update_ops(const Graph& graph);

// A NoOp ("init") that runs the initializer of every global variable that exists now.
Node* global_variables_initializer(const Scope& scope, CallSite site = CallSite::current());
// A NoOp ("local_init") that runs the initializer of every local variable that exists now.
Node* local_variables_initializer(const Scope& scope, CallSite site = CallSite::current());
// Same for a chosen list.
Node* variables_initializer(const Scope& scope, const std::vector<Variable>& variables,
                            CallSite site = CallSite::current());

// The int64 scalar "global_step" (created at the graph's root, initial value 0, not trainable).
Variable get_or_create_global_step(const Scope& scope);
// The global step if it exists (a null Variable otherwise).
Variable get_global_step(const Graph& graph);
// "global_step/read": a copy of the global step's value that hooks fetch beside the train op, so
// it is the value before that step's increment (TensorFlow's _get_or_create_global_step_read).
// Null Output when there is no global step.
Output get_or_create_global_step_read(Graph& graph);
// The integer value of a fetched global step (int64 or int32).
int64_t global_step_value(const Tensor& t);

}  // namespace stepscope
