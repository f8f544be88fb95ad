#include "stepscope/dist/distributed_optimizer.h"

#include "stepscope/ops/collective_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/sparse_ops.h"

namespace stepscope {

std::vector<GradAndVar> DistributedOptimizer::compute_gradients(const Scope& scope, Output loss,
                                                                std::vector<Variable> var_list) {
  std::vector<GradAndVar> grads = optimizer_->compute_gradients(scope, loss, std::move(var_list));
  const Scope s = scope.with_name_scope("DistributedOptimizer");
  collectives_.clear();
  // Each collective after the previous one (see the header: one order on every rank).
  auto chained = [&] { return collectives_.empty() ? s : s.with_control_dependencies({collectives_.back()}); };

  std::vector<size_t> group;  // indices into grads of the dense gradients of the open group
  int64_t group_bytes = 0;
  auto flush = [&] {
    if (group.empty()) return;
    std::vector<Output> inputs;
    for (size_t i : group) inputs.push_back(grads[i].grad);
    std::vector<Output> averaged = allreduce(chained(), inputs, ReduceOp::kAverage);
    collectives_.push_back(averaged.front().node);
    for (size_t k = 0; k < group.size(); ++k) grads[group[k]].grad = averaged[k];
    group.clear();
    group_bytes = 0;
  };

  // Reverse variable order: the last layer's gradients are computed first.
  for (size_t j = grads.size(); j-- > 0;) {
    GradAndVar& gv = grads[j];
    if (gv.slices && options_.sparse_as_dense) {
      gv.grad = to_dense(s, gv.slices);
      gv.slices = {};
    }
    if (gv.slices) {
      flush();
      const double inverse_size = 1.0 / collective_backend().size();
      Output indices = allgather(chained(), gv.slices.indices);
      collectives_.push_back(indices.node);
      Output values = allgather(chained(), gv.slices.values);
      collectives_.push_back(values.node);
      gv.slices.values = inverse_size == 1.0 ? values : mul(s, values, inverse_size);
      gv.slices.indices = indices;
      continue;
    }
    if (!gv.grad) continue;
    const Shape& shape = gv.grad.shape();
    const int64_t bytes = shape.fully_defined()
                              ? shape.num_elements() * static_cast<int64_t>(dtype_size(gv.grad.dtype()))
                              : options_.fusion_threshold_bytes;  // unknown: a group of its own
    if (!group.empty() &&
        (grads[group.front()].grad.dtype() != gv.grad.dtype() || group_bytes + bytes > options_.fusion_threshold_bytes))
      flush();
    group.push_back(j);
    group_bytes += bytes;
  }
  flush();
  return grads;
}

Node* DistributedOptimizer::minimize(const Scope& scope, Output loss, const Variable* global_step,
                                     std::vector<Variable> var_list) {
  return apply_gradients(scope, compute_gradients(scope, loss, std::move(var_list)), global_step);
}

}  // namespace stepscope
