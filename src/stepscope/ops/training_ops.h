// Training ops: the fused variable updates optimizers apply (TensorFlow's training_ops):
// ApplyGradientDescent, ApplyMomentum, ApplyAdam. Input 0 (and the slot inputs m, v, accum)
// must come straight from VariableV2 nodes. Updates are in place (var, m, v, accum) when only
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

}  // namespace stepscope
