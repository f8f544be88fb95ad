#include "stepscope/ops/registry.h"

namespace stepscope {

const OpRegistry& op_registry() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    register_array_ops(*r);
    register_collective_ops(*r);
    register_control_ops(*r);
    register_data_ops(*r);
    register_linalg_ops(*r);
    register_math_ops(*r);
    register_metric_ops(*r);
    register_nn_ops(*r);
    register_random_ops(*r);
    register_reduction_ops(*r);
    register_sparse_ops(*r);
    register_state_ops(*r);
    register_summary_ops(*r);
    register_training_ops(*r);
    return r;
  }();
  return *registry;
}

const OpDef& op_def(std::string_view name) { return op_registry().get(name); }

}  // namespace stepscope
