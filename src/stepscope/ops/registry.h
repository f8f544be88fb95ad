// The registry with every op family of stepscope registered (built on first use).
#pragma once

#include <string_view>

#include "stepscope/graph/op_registry.h"

namespace stepscope {

const OpRegistry& op_registry();
// op_registry().get(name).
const OpDef& op_def(std::string_view name);

// One registration function per family file.
void register_array_ops(OpRegistry& registry);
void register_collective_ops(OpRegistry& registry);
void register_control_ops(OpRegistry& registry);
void register_data_ops(OpRegistry& registry);
void register_linalg_ops(OpRegistry& registry);
void register_math_ops(OpRegistry& registry);
void register_metric_ops(OpRegistry& registry);
void register_nn_ops(OpRegistry& registry);
void register_random_ops(OpRegistry& registry);
void register_reduction_ops(OpRegistry& registry);
void register_sparse_ops(OpRegistry& registry);
void register_state_ops(OpRegistry& registry);
void register_summary_ops(OpRegistry& registry);
void register_training_ops(OpRegistry& registry);

}  // namespace stepscope
