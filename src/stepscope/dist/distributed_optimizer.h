// DistributedOptimizer: Horovod's hvd.DistributedOptimizer. Wraps an optimizer so that the
// gradients it applies are averaged over the ranks of the job (allreduce) first:
//
//   GradientDescentOptimizer sgd(0.1 * dist::size());
//   auto train = DistributedOptimizer(sgd).minimize(root, loss, step);
//
// Fusion: dense gradients go in groups of up to fusion_threshold_bytes (Horovod's fusion buffer,
// 64 MiB by default), one fused Allreduce op per group, so many small gradients travel in few MPI
// calls. Groups are formed in reverse variable order — the order back-propagation produces the
// gradients — and each Allreduce's inputs are its group's gradients only, so the executor starts
// it as soon as they are computed while the rest of the backward pass runs (the overlap). The
// groups' Allreduce ops are chained by control dependencies: every rank runs them in the same
// order, one at a time (what MPI requires; see ops/collective_ops.h).
//
// Sparse gradients (IndexedSlices, from embedding lookups) are allgathered by default — values
// and indices of every rank, the values divided by size() — and stay sparse for the optimizer's
// sparse update, as Horovod does; sparse_as_dense densifies them and allreduces instead.
//
// The average divides by dist::size() at run time for dense gradients and at graph building for
// sparse ones: call dist::init() before building the graph.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "stepscope/train/optimizer.h"

namespace stepscope {

struct DistributedOptimizerOptions {
  int64_t fusion_threshold_bytes = int64_t{64} << 20;  // 0: one Allreduce per gradient
  bool sparse_as_dense = false;
};

class DistributedOptimizer {
 public:
  // Wraps `optimizer`, which must outlive this object.
  explicit DistributedOptimizer(Optimizer& optimizer, DistributedOptimizerOptions options = {})
      : optimizer_(&optimizer), options_(options) {}
  // Wraps a temporary optimizer (DistributedOptimizer(GradientDescentOptimizer(0.1))), kept here.
  template <std::derived_from<Optimizer> O>
  requires(!std::is_lvalue_reference_v<O>) explicit DistributedOptimizer(O&& optimizer,
                                                                         DistributedOptimizerOptions options = {})
      : owned_(std::make_shared<std::decay_t<O>>(std::move(optimizer))), optimizer_(owned_.get()), options_(options) {}

  Optimizer& optimizer() const { return *optimizer_; }
  const DistributedOptimizerOptions& options() const { return options_; }

  // The wrapped optimizer's gradients, averaged over the ranks (under "DistributedOptimizer/").
  std::vector<GradAndVar> compute_gradients(const Scope& scope, Output loss, std::vector<Variable> var_list = {});
  Node* apply_gradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                        const Variable* global_step = nullptr) {
    return optimizer_->apply_gradients(scope, grads_and_vars, global_step);
  }
  Node* minimize(const Scope& scope, Output loss, const Variable* global_step = nullptr,
                 std::vector<Variable> var_list = {});
  Node* minimize(const Scope& scope, Output loss, const Variable& global_step) {
    return minimize(scope, loss, &global_step);
  }

  // The collective nodes (fused Allreduce, Allgather) the last compute_gradients built, in the
  // order they run.
  const std::vector<Node*>& collective_nodes() const { return collectives_; }

 private:
  std::shared_ptr<Optimizer> owned_;
  Optimizer* optimizer_;
  DistributedOptimizerOptions options_;
  std::vector<Node*> collectives_;
};

}  // namespace stepscope
