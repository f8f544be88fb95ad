#include "stepscope/dist/broadcast_variables.h"

#include "stepscope/ops/collective_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/train/variables.h"

namespace stepscope {

Node* broadcast_global_variables(const Scope& scope, int root_rank, CallSite site) {
  if (root_rank < 0)
    throw InvalidArgumentError("broadcast_global_variables: root_rank must be >= 0, got " + std::to_string(root_rank));
  const Scope s = scope.with_name_scope("broadcast_global_variables");
  std::vector<Node*> assigns;
  Node* previous = nullptr;
  for (const Variable& var : global_variables(scope.graph())) {
    const Scope chained = previous ? s.with_control_dependencies({previous}) : s;
    Output value = broadcast(chained, var.value(), root_rank, site);
    previous = value.node;
    assigns.push_back(assign(s, var.value(), value, true, site).node);
  }
  return no_op(scope.with_op_name(s.name_prefix()), assigns, site);
}

}  // namespace stepscope
