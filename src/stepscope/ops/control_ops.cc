#include "stepscope/ops/control_ops.h"

#include "stepscope/ops/registry.h"

namespace stepscope {

Node* no_op(const Scope& scope, const std::vector<Node*>& deps, CallSite site) {
  return scope.with_control_dependencies(deps).add_node(op_def("NoOp"), {}, {}, site);
}

Node* group(const Scope& scope, const std::vector<Node*>& deps, CallSite site) {
  return no_op(scope, deps, site);
}

void register_control_ops(OpRegistry& registry) {
  registry.add({.name = "NoOp",
                .num_inputs = 0,
                .num_outputs = 0,
                .shape = [](ShapeContext&) {},
                .kernel = [](KernelContext&) {},
                .not_differentiable = true,
                .doc = "Does nothing; runs after its control inputs."});
}

}  // namespace stepscope
