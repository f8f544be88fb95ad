// broadcast_global_variables: Horovod's hvd.broadcast_global_variables. One op that sets every
// global variable (trainable or not: optimizer slots and the global step too) to its value on
// root_rank, so that all ranks start training from the same state whatever their initializers
// drew. Run it once after the variables are initialized (BroadcastGlobalVariablesHook does).
#pragma once

#include "stepscope/graph/scope.h"

namespace stepscope {

// A NoOp named "broadcast_global_variables" (under `scope`) grouping one Broadcast + Assign per
// global variable of scope's graph at the time of the call. The Broadcasts are chained by control
// dependencies, one order on every rank (ops/collective_ops.h).
Node* broadcast_global_variables(const Scope& scope, int root_rank, CallSite site = CallSite::current());

}  // namespace stepscope
