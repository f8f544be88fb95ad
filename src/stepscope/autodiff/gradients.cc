#include "stepscope/autodiff/gradients.h"

#include <map>

#include "stepscope/graph/op_def.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/sparse_ops.h"

namespace stepscope {
namespace {

Output dense_of(const Scope& s, const Gradient& g) { return g.is_sparse() ? to_dense(s, g.slices) : g.dense; }

// The sum of `parts`: dense when any part is dense (sparse parts densified), else the slices
// concatenated (values and indices; int64 indices when their dtypes differ).
Gradient aggregate(const Scope& s, const std::vector<Gradient>& parts) {
  if (parts.size() == 1) return parts[0];
  bool all_sparse = true;
  for (const Gradient& p : parts) all_sparse &= p.is_sparse();
  if (!all_sparse) {
    Output total = dense_of(s, parts[0]);
    for (size_t i = 1; i < parts.size(); ++i) total = add(s, total, dense_of(s, parts[i]));
    return {total, {}};
  }
  bool same_index_dtype = true;
  for (const Gradient& p : parts) same_index_dtype &= p.slices.indices.dtype() == parts[0].slices.indices.dtype();
  std::vector<Output> values, indices;
  for (const Gradient& p : parts) {
    values.push_back(p.slices.values);
    indices.push_back(same_index_dtype ? p.slices.indices : cast(s, p.slices.indices, DType::kInt64));
  }
  return {Output{}, {concat(s, values, 0), concat(s, indices, 0), parts[0].slices.dense_shape}};
}

std::vector<Gradient> compute_gradients(const Scope& scope, const std::vector<Output>& ys,
                                        const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                        bool keep_sparse) {
  if (ys.empty()) throw InvalidArgumentError("gradients: ys is empty");
  if (!grad_ys.empty() && grad_ys.size() != ys.size())
    throw InvalidArgumentError("gradients: " + std::to_string(grad_ys.size()) + " grad_ys for " +
                               std::to_string(ys.size()) + " ys");
  Graph& graph = scope.graph();
  for (const Output& o : ys)
    if (!o || o.graph() != &graph) throw InvalidArgumentError("gradients: a y is null or from another graph");
  for (const Output& o : xs)
    if (!o || o.graph() != &graph) throw InvalidArgumentError("gradients: an x is null or from another graph");

  // Nodes between xs and ys: reachable forward from an x and backward from a y. Node ids are
  // topological, so one sweep each way suffices.
  const int n = graph.num_nodes();
  std::vector<char> from_x(n, 0), to_y(n, 0);
  for (const Output& x : xs) from_x[x.node->id()] = 1;
  for (int id = 0; id < n; ++id) {
    if (from_x[id]) continue;
    for (const Output& in : graph.node(id)->inputs())
      if (from_x[in.node->id()]) {
        from_x[id] = 1;
        break;
      }
  }
  for (const Output& y : ys) to_y[y.node->id()] = 1;
  for (int id = n - 1; id >= 0; --id)
    if (to_y[id])
      for (const Output& in : graph.node(id)->inputs()) to_y[in.node->id()] = 1;

  Scope grad_scope = scope.with_name_scope("gradients");
  // Pending contributions per (node id, output index).
  std::map<std::pair<int, int>, std::vector<Gradient>> contributions;
  for (size_t i = 0; i < ys.size(); ++i) {
    Output g = grad_ys.empty() ? ones_like(grad_scope, ys[i]) : grad_ys[i];
    contributions[{ys[i].node->id(), ys[i].index}].push_back({g, {}});
  }
  auto summed = [&](const Scope& s, std::vector<Gradient>& parts) -> Gradient {
    if (parts.empty()) return Gradient{};
    Gradient total = aggregate(s, parts);
    parts.assign(1, total);
    return total;
  };

  for (int id = n - 1; id >= 0; --id) {
    if (!from_x[id] || !to_y[id]) continue;
    Node* node = graph.node(id);
    std::vector<Gradient> out_sums(node->num_outputs());
    bool any = false;
    for (int o = 0; o < node->num_outputs(); ++o) {
      auto it = contributions.find({id, o});
      if (it == contributions.end()) continue;
      out_sums[o] = summed(grad_scope, it->second);
      any = true;
    }
    if (!any) continue;
    // xs stop the backward walk only if no other x lies further back; TF keeps going.
    bool needs_inputs = false;
    for (const Output& in : node->inputs())
      if (from_x[in.node->id()]) needs_inputs = true;
    if (!needs_inputs) continue;
    // Slices pass through Identity (a variable's read) as they are.
    if (node->op_type() == "Identity" && out_sums[0].is_sparse()) {
      const Output& in = node->input(0);
      contributions[{in.node->id(), in.index}].push_back(out_sums[0]);
      continue;
    }
    std::vector<Output> out_grads(node->num_outputs());
    for (int o = 0; o < node->num_outputs(); ++o)
      if (out_sums[o]) out_grads[o] = dense_of(grad_scope, out_sums[o]);
    const OpDef& op = node->op();
    Scope node_scope = grad_scope.with_name_scope(node->name() + "_grad");
    if (const SparseGradientFn sparse_rule = sparse_gradient_rule(node->op_type())) {
      const Output& in = node->input(0);
      if (from_x[in.node->id()]) {
        IndexedSlices slices = sparse_rule(node_scope, *node, out_grads);
        contributions[{in.node->id(), in.index}].push_back({Output{}, slices});
      }
      continue;
    }
    const GradientFn rule = op.gradient;
    if (!rule)
      throw NotFoundError("No gradient defined for operation '" + node->name() +
                          "' (op type: " + std::string(node->op_type()) + ")");
    std::vector<Output> in_grads = rule(node_scope, *node, out_grads);
    if (static_cast<int>(in_grads.size()) != node->num_inputs())
      throw InternalError("gradient rule of " + std::string(node->op_type()) + " returned " +
                          std::to_string(in_grads.size()) + " gradients for " + std::to_string(node->num_inputs()) +
                          " inputs");
    for (int i = 0; i < node->num_inputs(); ++i) {
      const Output& in = node->input(i);
      if (!in_grads[i] || !from_x[in.node->id()]) continue;
      contributions[{in.node->id(), in.index}].push_back({in_grads[i], {}});
    }
  }

  std::vector<Gradient> result;
  result.reserve(xs.size());
  for (const Output& x : xs) {
    auto it = contributions.find({x.node->id(), x.index});
    result.push_back(it == contributions.end() ? Gradient{} : summed(grad_scope, it->second));
    if (!keep_sparse && result.back().is_sparse()) {
      Gradient dense{dense_of(grad_scope, result.back()), {}};
      result.back() = dense;
      if (it != contributions.end()) it->second.assign(1, dense);  // the same x listed twice: one densify
    }
  }
  return result;
}

}  // namespace

std::vector<Output> gradients(const Scope& scope, const std::vector<Output>& ys, const std::vector<Output>& xs,
                              const std::vector<Output>& grad_ys) {
  std::vector<Output> result;
  for (const Gradient& g : compute_gradients(scope, ys, xs, grad_ys, /*keep_sparse=*/false)) result.push_back(g.dense);
  return result;
}

std::vector<Gradient> gradients_with_indexed_slices(const Scope& scope, const std::vector<Output>& ys,
                                                    const std::vector<Output>& xs, const std::vector<Output>& grad_ys) {
  return compute_gradients(scope, ys, xs, grad_ys, /*keep_sparse=*/true);
}

}  // namespace stepscope
