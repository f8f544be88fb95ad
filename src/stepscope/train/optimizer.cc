#include "stepscope/train/optimizer.h"

#include <algorithm>

#include "stepscope/autodiff/gradients.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/sparse_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/ops/training_ops.h"

namespace stepscope {

std::vector<GradAndVar> Optimizer::compute_gradients(const Scope& scope, Output loss, std::vector<Variable> var_list) {
  if (var_list.empty()) var_list = trainable_variables(scope.graph());
  if (var_list.empty()) throw InvalidArgumentError("No variables to optimize.");
  if (!is_floating(loss.dtype()))
    throw InvalidArgumentError("loss " + loss.name() + " must be float32 or float64, got " +
                               std::string(dtype_name(loss.dtype())));
  std::vector<Output> xs;
  for (const Variable& v : var_list) xs.push_back(v.value());
  std::vector<Gradient> grads = gradients_with_indexed_slices(scope, {loss}, xs);
  std::vector<GradAndVar> out;
  for (size_t i = 0; i < var_list.size(); ++i) out.push_back({grads[i].dense, var_list[i], grads[i].slices});
  return out;
}

Node* Optimizer::apply_gradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                                 const Variable* global_step) {
  std::vector<const GradAndVar*> with_grads;
  for (const auto& gv : grads_and_vars)
    if (gv.has_gradient()) with_grads.push_back(&gv);
  if (with_grads.empty()) {
    std::string names;
    for (const auto& gv : grads_and_vars) names += (names.empty() ? "" : ", ") + gv.var.name();
    throw InvalidArgumentError("No gradients provided for any variable: [" + names + "]");
  }
  Scope opt_scope = scope.with_name_scope(name_);
  prepare(opt_scope, with_grads.front()->var.dtype());
  std::vector<Node*> updates;
  for (const GradAndVar* gv : with_grads) {
    Scope var_scope = opt_scope.with_name_scope("update_" + gv->var.name());
    updates.push_back(gv->grad ? apply_dense(var_scope, gv->grad, gv->var).node
                               : apply_sparse(var_scope, gv->slices, gv->var).node);
  }
  std::vector<Node*> deps = finish(opt_scope, updates);
  if (global_step && *global_step) {
    Scope after = scope.with_control_dependencies(deps).with_op_name(opt_scope.name_prefix());
    Output one = constant(opt_scope.with_op_name("global_step_increment"), int64_t{1});
    return assign_add(after, global_step->value(), one).node;
  }
  return no_op(scope.with_op_name(opt_scope.name_prefix()), deps);
}

Node* Optimizer::minimize(const Scope& scope, Output loss, const Variable* global_step, std::vector<Variable> var_list) {
  return apply_gradients(scope, compute_gradients(scope, loss, std::move(var_list)), global_step);
}

Output Optimizer::apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  return apply_dense(scope, to_dense(scope, grad), var);
}

Variable Optimizer::constant_slot(const Variable& var, const std::string& slot_name, double value) {
  Tensor init_value(var.dtype(), var.shape());
  if (var.dtype() == DType::kFloat64) {
    std::fill_n(init_value.data<double>(), init_value.num_elements(), value);
  } else if (var.dtype() == DType::kFloat32) {
    std::fill_n(init_value.data<float>(), init_value.num_elements(), static_cast<float>(value));
  } else {
    throw InvalidArgumentError("slot " + slot_name + " of " + var.name() + ": var must be float32 or float64");
  }
  Scope s = Scope(var.node->graph()).with_name_scope(var.name() + "/" + slot_name + "/");
  Output init = constant(s.with_op_name("Initializer/Const"), init_value);
  return make_variable(Scope(var.node->graph()), var.name() + "/" + slot_name, init, /*trainable=*/false);
}

Variable Optimizer::zeros_slot(const Variable& var, const std::string& slot_name) {
  Tensor zeros(var.dtype(), var.shape());
  std::memset(zeros.raw_data(), 0, static_cast<size_t>(zeros.bytes()));
  Scope s = Scope(var.node->graph()).with_name_scope(var.name() + "/" + slot_name + "/");
  Output init = constant(s.with_op_name("Initializer/zeros"), zeros);
  return make_variable(Scope(var.node->graph()), var.name() + "/" + slot_name, init, /*trainable=*/false);
}

Output Optimizer::scalar_constant(const Scope& scope, const std::string& name, double value, DType dtype) {
  Tensor t(dtype, Shape{});
  if (dtype == DType::kFloat64) t.data<double>()[0] = value;
  else t.data<float>()[0] = static_cast<float>(value);
  return constant(scope.with_op_name(name), t);
}

void GradientDescentOptimizer::prepare(const Scope& scope, DType dtype) {
  lr_ = scalar_constant(scope, "learning_rate", learning_rate_, dtype);
}
Output GradientDescentOptimizer::apply_dense(const Scope& scope, Output grad, const Variable& var) {
  return apply_gradient_descent(scope, var.value(), lr_, grad);
}
Output GradientDescentOptimizer::apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  return sparse_apply_gradient_descent(scope, var.value(), lr_, grad.values, grad.indices);
}

void MomentumOptimizer::prepare(const Scope& scope, DType dtype) {
  lr_ = scalar_constant(scope, "learning_rate", learning_rate_, dtype);
  momentum_t_ = scalar_constant(scope, "momentum", momentum_, dtype);
}
Output MomentumOptimizer::apply_dense(const Scope& scope, Output grad, const Variable& var) {
  Variable accum = zeros_slot(var, name());
  return apply_momentum(scope, var.value(), accum.value(), lr_, grad, momentum_t_, use_nesterov_);
}
Output MomentumOptimizer::apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  Variable accum = zeros_slot(var, name());
  return sparse_apply_momentum(scope, var.value(), accum.value(), lr_, grad.values, grad.indices, momentum_t_,
                               use_nesterov_);
}

void AdamOptimizer::prepare(const Scope& scope, DType dtype) {
  lr_ = scalar_constant(scope, "learning_rate", learning_rate_, dtype);
  beta1_t_ = scalar_constant(scope, "beta1", beta1_, dtype);
  beta2_t_ = scalar_constant(scope, "beta2", beta2_, dtype);
  epsilon_t_ = scalar_constant(scope, "epsilon", epsilon_, dtype);
  Graph& g = scope.graph();
  if (!beta1_power_) {
    beta1_power_ = make_variable(Scope(g), "beta1_power", scalar_constant(Scope(g), "beta1_power/Initializer/value", beta1_, dtype), false);
    beta2_power_ = make_variable(Scope(g), "beta2_power", scalar_constant(Scope(g), "beta2_power/Initializer/value", beta2_, dtype), false);
  }
}
Output AdamOptimizer::apply_dense(const Scope& scope, Output grad, const Variable& var) {
  Variable m = zeros_slot(var, name());
  Variable v = zeros_slot(var, name() + "_1");
  return apply_adam(scope, var.value(), m.value(), v.value(), beta1_power_.value(), beta2_power_.value(), lr_,
                    beta1_t_, beta2_t_, epsilon_t_, grad);
}
std::vector<Node*> AdamOptimizer::finish(const Scope& scope, const std::vector<Node*>& updates) {
  Scope after = scope.with_control_dependencies(updates);
  Node* b1 = assign(after.with_op_name("update_beta1_power"), beta1_power_.value(),
                    mul(after, beta1_power_.value(), beta1_t_)).node;
  Node* b2 = assign(after.with_op_name("update_beta2_power"), beta2_power_.value(),
                    mul(after, beta2_power_.value(), beta2_t_)).node;
  std::vector<Node*> all = updates;
  all.push_back(b1);
  all.push_back(b2);
  return all;
}

}  // namespace stepscope

namespace stepscope {

Output AdamOptimizer::apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  Variable m = zeros_slot(var, name());
  Variable v = zeros_slot(var, name() + "_1");
  return sparse_apply_adam(scope, var.value(), m.value(), v.value(), beta1_power_.value(), beta2_power_.value(), lr_,
                           beta1_t_, beta2_t_, epsilon_t_, grad.values, grad.indices);
}

AdagradOptimizer::AdagradOptimizer(double learning_rate, double initial_accumulator_value, std::string name)
    : Optimizer(std::move(name)), learning_rate_(learning_rate), initial_accumulator_value_(initial_accumulator_value) {
  if (!(initial_accumulator_value > 0))
    throw InvalidArgumentError("initial_accumulator_value must be positive: " +
                               std::to_string(initial_accumulator_value));
}
void AdagradOptimizer::prepare(const Scope& scope, DType dtype) {
  lr_ = scalar_constant(scope, "learning_rate", learning_rate_, dtype);
}
Output AdagradOptimizer::apply_dense(const Scope& scope, Output grad, const Variable& var) {
  Variable accum = constant_slot(var, name(), initial_accumulator_value_);
  return apply_adagrad(scope, var.value(), accum.value(), lr_, grad);
}
Output AdagradOptimizer::apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  Variable accum = constant_slot(var, name(), initial_accumulator_value_);
  return sparse_apply_adagrad(scope, var.value(), accum.value(), lr_, grad.values, grad.indices);
}

RMSPropOptimizer::RMSPropOptimizer(double learning_rate, double decay, double momentum, double epsilon, bool centered,
                                   std::string name)
    : Optimizer(std::move(name)),
      learning_rate_(learning_rate),
      decay_(decay),
      momentum_(momentum),
      epsilon_(epsilon),
      centered_(centered) {}
void RMSPropOptimizer::prepare(const Scope& scope, DType dtype) {
  lr_ = scalar_constant(scope, "learning_rate", learning_rate_, dtype);
  decay_t_ = scalar_constant(scope, "decay", decay_, dtype);
  momentum_t_ = scalar_constant(scope, "momentum", momentum_, dtype);
  epsilon_t_ = scalar_constant(scope, "epsilon", epsilon_, dtype);
}
// TF1's slot order: rms, then mg when centered, then momentum.
RMSPropOptimizer::Slots RMSPropOptimizer::make_slots(const Variable& var) {
  Slots s;
  s.ms = constant_slot(var, name(), 1.0);
  if (centered_) s.mg = zeros_slot(var, name() + "_1");
  s.mom = zeros_slot(var, name() + (centered_ ? "_2" : "_1"));
  return s;
}
Output RMSPropOptimizer::apply_dense(const Scope& scope, Output grad, const Variable& var) {
  Slots s = make_slots(var);
  if (centered_)
    return apply_centered_rms_prop(scope, var.value(), s.mg.value(), s.ms.value(), s.mom.value(), lr_, decay_t_,
                                   momentum_t_, epsilon_t_, grad);
  return apply_rms_prop(scope, var.value(), s.ms.value(), s.mom.value(), lr_, decay_t_, momentum_t_, epsilon_t_, grad);
}
Output RMSPropOptimizer::apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  Slots s = make_slots(var);
  if (centered_)
    return sparse_apply_centered_rms_prop(scope, var.value(), s.mg.value(), s.ms.value(), s.mom.value(), lr_, decay_t_,
                                          momentum_t_, epsilon_t_, grad.values, grad.indices);
  return sparse_apply_rms_prop(scope, var.value(), s.ms.value(), s.mom.value(), lr_, decay_t_, momentum_t_, epsilon_t_,
                               grad.values, grad.indices);
}

}  // namespace stepscope
