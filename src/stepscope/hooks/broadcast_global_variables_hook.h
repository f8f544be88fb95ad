// BroadcastGlobalVariablesHook: Horovod's hvd.BroadcastGlobalVariablesHook. Adds
// broadcast_global_variables(root_rank) to the graph in begin() and runs it right after the
// session is created (after initialization or restore), and again after each recovery, so every
// rank trains from root_rank's variables.
//
//   BroadcastGlobalVariablesHook bcast(0);
//   auto sess = MonitoredTrainingSession({.is_chief = dist::rank() == 0, .hooks = {&bcast, ...}});
#pragma once

#include "stepscope/hooks/session_run_hook.h"

namespace stepscope {

class BroadcastGlobalVariablesHook : public SessionRunHook {
 public:
  explicit BroadcastGlobalVariablesHook(int root_rank = 0) : root_rank_(root_rank) {}

  void begin(Graph& graph) override;
  void after_create_session(Session& session, Coordinator& coord) override;

  // The op begin() added (null before).
  Node* broadcast_op() const { return op_; }

 private:
  int root_rank_;
  Node* op_ = nullptr;
};

}  // namespace stepscope
