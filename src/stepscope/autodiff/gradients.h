// Reverse-mode automatic differentiation on the graph: gradients(ys, xs) adds the nodes that
// compute d(sum(ys * grad_ys))/dx for each x, under a "gradients/" name scope (one
// "<forward node>_grad" scope per differentiated node, as TensorFlow does, so tfprof and
// timelines show the backward pass by forward layer). The rules live with each op (OpDef::gradient).
#pragma once

#include <vector>

#include "stepscope/graph/indexed_slices.h"
#include "stepscope/graph/scope.h"

namespace stepscope {

// One gradient per x; a null Output where x does not influence any y (TensorFlow's None).
// grad_ys defaults to ones shaped like each y. Errors: LookupError-style NotFoundError
// "No gradient defined for operation 'name' (op type: Op)" for an op on the path without a rule.
// Sparse gradients (Gather's w.r.t. its params) are densified (UnsortedSegmentSum) here.
std::vector<Output> gradients(const Scope& scope, const std::vector<Output>& ys, const std::vector<Output>& xs,
                              const std::vector<Output>& grad_ys = {});

// A gradient that is either dense (`dense`) or IndexedSlices (`slices`), TensorFlow's
// Tensor-or-IndexedSlices.
struct Gradient {
  Output dense;
  IndexedSlices slices;

  bool is_sparse() const { return static_cast<bool>(slices); }
  explicit operator bool() const { return dense || slices; }
};

// gradients(), keeping sparse gradients sparse, as tf.gradients does: an x whose every
// contribution is IndexedSlices (ops with a sparse_gradient_rule, i.e. Gather of x, possibly
// through Identity) gets IndexedSlices; several are aggregated by concatenating their values and
// indices (duplicates stay, to be summed by whoever applies them). Where a sparse contribution
// meets a dense one, or must flow on through any other op, it is densified (to_dense).
std::vector<Gradient> gradients_with_indexed_slices(const Scope& scope, const std::vector<Output>& ys,
                                                    const std::vector<Output>& xs,
                                                    const std::vector<Output>& grad_ys = {});

}  // namespace stepscope
