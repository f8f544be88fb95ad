// Training ops: the fused variable updates optimizers apply (TensorFlow's training_ops):
// ApplyGradientDescent, ApplyMomentum, ApplyAdam, ApplyAdagrad, ApplyRMSProp,
// ApplyCenteredRMSProp, and their sparse forms SparseApply* for IndexedSlices gradients (grad
// [N, D...] for the rows indices [N] of a var [V, D...]): those sum the gradient rows of
// duplicate indices first (as TF1's optimizers do with unique + unsorted_segment_sum) and update
// only the touched rows of var and of its slots; every other row keeps its bits. An index
// outside [0, V) is an InvalidArgumentError. Input 0 (and the slot inputs m, v, accum, ms, mom,
// mg) must come straight from VariableV2 nodes. Updates are in place (var, m, v, accum) when only
// the variable and the op's own input hold the value, and copy-on-write otherwise: the new value
// goes into a fresh buffer swapped into the variable, so a value read earlier in the step (by an
// op still running, or fetched by the user) never changes under its reader.
#pragma once

#include "stepscope/graph/scope.h"

namespace stepscope {

// var -= alpha * delta
Output apply_gradient_descent(const Scope& scope, Output var, Output alpha, Output delta,
                              CallSite site = CallSite::current());
// accum = accum * momentum + grad; var -= lr * accum  (Nesterov: var -= lr * (grad + momentum * accum))
Output apply_momentum(const Scope& scope, Output var, Output accum, Output lr, Output grad, Output momentum,
                      bool use_nesterov = false, CallSite site = CallSite::current());
// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
// m = beta1 * m + (1 - beta1) * grad;  v = beta2 * v + (1 - beta2) * grad^2
// var -= lr_t * m / (sqrt(v) + epsilon)
Output apply_adam(const Scope& scope, Output var, Output m, Output v, Output beta1_power, Output beta2_power,
                  Output lr, Output beta1, Output beta2, Output epsilon, Output grad,
                  CallSite site = CallSite::current());
// accum += grad^2; var -= lr * grad / sqrt(accum)
Output apply_adagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                     CallSite site = CallSite::current());
// ms = rho * ms + (1 - rho) * grad^2; mom = momentum * mom + lr * grad / sqrt(ms + epsilon); var -= mom
Output apply_rms_prop(const Scope& scope, Output var, Output ms, Output mom, Output lr, Output rho, Output momentum,
                      Output epsilon, Output grad, CallSite site = CallSite::current());
// mg = rho * mg + (1 - rho) * grad; ms as above; mom = momentum * mom + lr * grad / sqrt(ms - mg^2 + epsilon);
// var -= mom
Output apply_centered_rms_prop(const Scope& scope, Output var, Output mg, Output ms, Output mom, Output lr, Output rho,
                               Output momentum, Output epsilon, Output grad, CallSite site = CallSite::current());

// Sparse forms (see above): the same update on the rows `indices` names.
Output sparse_apply_gradient_descent(const Scope& scope, Output var, Output alpha, Output grad, Output indices,
                                     CallSite site = CallSite::current());
Output sparse_apply_momentum(const Scope& scope, Output var, Output accum, Output lr, Output grad, Output indices,
                             Output momentum, bool use_nesterov = false, CallSite site = CallSite::current());
Output sparse_apply_adagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad, Output indices,
                            CallSite site = CallSite::current());
Output sparse_apply_rms_prop(const Scope& scope, Output var, Output ms, Output mom, Output lr, Output rho,
                             Output momentum, Output epsilon, Output grad, Output indices,
                             CallSite site = CallSite::current());
Output sparse_apply_centered_rms_prop(const Scope& scope, Output var, Output mg, Output ms, Output mom, Output lr,
                                      Output rho, Output momentum, Output epsilon, Output grad, Output indices,
                                      CallSite site = CallSite::current());
// Lazy Adam (tf.contrib.opt.LazyAdamOptimizer's update): m, v and var change on the touched rows
// only. (TF1's AdamOptimizer._apply_sparse instead decays m and v on every row and moves every
// row of var: AdamOptimizer does that, through ApplyAdam on the densified gradient.)
Output sparse_apply_adam(const Scope& scope, Output var, Output m, Output v, Output beta1_power, Output beta2_power,
                         Output lr, Output beta1, Output beta2, Output epsilon, Output grad, Output indices,
                         CallSite site = CallSite::current());

}  // namespace stepscope
