// Optimizers: GradientDescent, Momentum, Adam, LazyAdam, Adagrad, RMSProp. minimize(loss,
// global_step) adds the gradient subgraph (under "gradients/"), one fused update op per
// trainable variable (under the optimizer's name scope), and returns the train op: an AssignAdd
// of the global step that runs after every update (or a NoOp grouping them when no global step
// is given).
//
// Sparse gradients: a variable used only through gather/embedding_lookup gets an IndexedSlices
// gradient (GradAndVar::slices), which apply_gradients hands to the optimizer's sparse update
// (SparseApply*: duplicate indices summed first, only the touched rows of the variable and its
// slots change) instead of the dense one. Adam's too, on purpose unlike TF1's
// AdamOptimizer._apply_sparse, which decays m and v of every row and so moves every row of a
// table on every step: a full-table update per step is what sparse gradients are meant to avoid
// (TF users switched to tf.contrib.opt.LazyAdamOptimizer for it; PyTorch's SparseAdam is lazy too).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stepscope/graph/indexed_slices.h"
#include "stepscope/graph/scope.h"
#include "stepscope/train/variables.h"

namespace stepscope {

struct GradAndVar {
  Output grad;  // dense gradient; null when the loss does not depend on the variable or it is sparse
  Variable var;
  IndexedSlices slices = {};  // the gradient when sparse (then grad is null)

  bool has_gradient() const { return grad || slices; }
};

class Optimizer {
 public:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}
  virtual ~Optimizer() = default;
  const std::string& name() const { return name_; }

  // Gradients of `loss` for `var_list` (default: the trainable variables); sparse ones as slices.
  std::vector<GradAndVar> compute_gradients(const Scope& scope, Output loss, std::vector<Variable> var_list = {});
  // Applies the (non-null) gradients; increments global_step when given.
  Node* apply_gradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                        const Variable* global_step = nullptr);
  Node* minimize(const Scope& scope, Output loss, const Variable* global_step = nullptr,
                 std::vector<Variable> var_list = {});
  Node* minimize(const Scope& scope, Output loss, const Variable& global_step) {
    return minimize(scope, loss, &global_step);
  }

 protected:
  // Called once per apply_gradients under the optimizer's name scope, before the updates.
  virtual void prepare(const Scope& scope, DType dtype) {}
  virtual Output apply_dense(const Scope& scope, Output grad, const Variable& var) = 0;
  // Default: apply_dense of the densified gradient.
  virtual Output apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var);
  // Extra ops that must run after all updates (e.g. Adam's beta powers).
  virtual std::vector<Node*> finish(const Scope& scope, const std::vector<Node*>& updates) { return updates; }

  // A non-trainable variable beside `var` ("<var>/<slot_name>"), zero-initialized.
  Variable zeros_slot(const Variable& var, const std::string& slot_name);
  // The same, every element initialized to `value`.
  Variable constant_slot(const Variable& var, const std::string& slot_name, double value);
  Output scalar_constant(const Scope& scope, const std::string& name, double value, DType dtype);

 private:
  std::string name_;
};

class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(double learning_rate, std::string name = "GradientDescent")
      : Optimizer(std::move(name)), learning_rate_(learning_rate) {}

 protected:
  void prepare(const Scope& scope, DType dtype) override;
  Output apply_dense(const Scope& scope, Output grad, const Variable& var) override;
  Output apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  double learning_rate_;
  Output lr_;
};

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(double learning_rate, double momentum, bool use_nesterov = false, std::string name = "Momentum")
      : Optimizer(std::move(name)), learning_rate_(learning_rate), momentum_(momentum), use_nesterov_(use_nesterov) {}

 protected:
  void prepare(const Scope& scope, DType dtype) override;
  Output apply_dense(const Scope& scope, Output grad, const Variable& var) override;
  Output apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  double learning_rate_, momentum_;
  bool use_nesterov_;
  Output lr_, momentum_t_;
};

// Sparse gradients update only the touched rows of var, m and v (SparseApplyAdam), as
// tf.contrib.opt.LazyAdamOptimizer does.
class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                         double epsilon = 1e-8, std::string name = "Adam")
      : Optimizer(std::move(name)), learning_rate_(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}

 protected:
  void prepare(const Scope& scope, DType dtype) override;
  Output apply_dense(const Scope& scope, Output grad, const Variable& var) override;
  Output apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;
  std::vector<Node*> finish(const Scope& scope, const std::vector<Node*>& updates) override;

 private:
  double learning_rate_, beta1_, beta2_, epsilon_;
  Output lr_, beta1_t_, beta2_t_, epsilon_t_;
  Variable beta1_power_, beta2_power_;
};

// tf.contrib.opt.LazyAdamOptimizer's name for the same updates (slots "<var>/LazyAdam", "_1").
class LazyAdamOptimizer : public AdamOptimizer {
 public:
  explicit LazyAdamOptimizer(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                             double epsilon = 1e-8, std::string name = "LazyAdam")
      : AdamOptimizer(learning_rate, beta1, beta2, epsilon, std::move(name)) {}
};

// TF1's AdagradOptimizer: slot "<var>/Adagrad" (the accumulator) starts at
// initial_accumulator_value; accum += g^2; var -= lr * g / sqrt(accum).
class AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(double learning_rate, double initial_accumulator_value = 0.1, std::string name = "Adagrad");

 protected:
  void prepare(const Scope& scope, DType dtype) override;
  Output apply_dense(const Scope& scope, Output grad, const Variable& var) override;
  Output apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  double learning_rate_, initial_accumulator_value_;
  Output lr_;
};

// TF1's RMSPropOptimizer: slots "<var>/RMSProp" (rms, starts at ones), "<var>/RMSProp_1"
// (momentum, zeros) and, when centered, "<var>/RMSProp_2" (mg, zeros).
// ms = decay ms + (1 - decay) g^2; mom = momentum mom + lr g / sqrt(ms + epsilon) (centered:
// sqrt(ms - mg^2 + epsilon) with mg = decay mg + (1 - decay) g); var -= mom.
struct RMSPropOptions {
  double decay = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-10;
  bool centered = false;
  std::string name = "RMSProp";
};
class RMSPropOptimizer : public Optimizer {
 public:
  explicit RMSPropOptimizer(double learning_rate, double decay = 0.9, double momentum = 0.0, double epsilon = 1e-10,
                            bool centered = false, std::string name = "RMSProp");
  RMSPropOptimizer(double learning_rate, const RMSPropOptions& options)
      : RMSPropOptimizer(learning_rate, options.decay, options.momentum, options.epsilon, options.centered,
                         options.name) {}

 protected:
  void prepare(const Scope& scope, DType dtype) override;
  Output apply_dense(const Scope& scope, Output grad, const Variable& var) override;
  Output apply_sparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  struct Slots {
    Variable ms, mom, mg;
  };
  Slots make_slots(const Variable& var);
  double learning_rate_, decay_, momentum_, epsilon_;
  bool centered_;
  Output lr_, decay_t_, momentum_t_, epsilon_t_;
};

}  // namespace stepscope
