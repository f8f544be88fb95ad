#include "stepscope/hooks/broadcast_global_variables_hook.h"

#include "stepscope/dist/broadcast_variables.h"
#include "stepscope/runtime/session.h"

namespace stepscope {

void BroadcastGlobalVariablesHook::begin(Graph& graph) {
  // Under the root name scope, so the node names (and so the collectives' agreement keys) are the
  // same on every rank whatever scope the hook is created in.
  op_ = broadcast_global_variables(Scope(graph), root_rank_);
}

void BroadcastGlobalVariablesHook::after_create_session(Session& session, Coordinator&) {
  if (!op_) throw FailedPreconditionError("BroadcastGlobalVariablesHook: after_create_session before begin");
  session.run(op_);
}

}  // namespace stepscope
