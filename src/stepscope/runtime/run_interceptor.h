// A process-wide observer of Session::run: what TensorFlow's ProfileContext gets by patching
// BaseSession.run. While one is installed, every run of every session asks it whether to trace
// the run, and tells it afterwards, with the RunMetadata of a traced run. Without one a run pays
// one relaxed atomic load.
#pragma once

#include <cstdint>
#include <vector>

#include "stepscope/runtime/run_options.h"

namespace stepscope {

class Node;
class Session;
struct Output;

struct RunCall {
  Session& session;
  const std::vector<Output>& fetches;
  const std::vector<Node*>& targets;
};

class RunInterceptor {
 public:
  virtual ~RunInterceptor() = default;
  // Before the run: true to trace it at FULL_TRACE (into the caller's RunMetadata, or one of the
  // session's own when the caller gave none). `ticket` is handed back to after_run.
  virtual bool before_run(const RunCall& call, int64_t& ticket) = 0;
  // After a run that succeeded; `traced` is its RunMetadata when before_run asked for a trace.
  // An exception from here propagates to the caller of Session::run.
  virtual void after_run(const RunCall& call, int64_t ticket, const RunMetadata* traced) = 0;
};

// Installs `interceptor` (not owned; it must stay alive until removed, and be removed only while
// no session runs). InternalError "Already in context or context not cleaned." when one is
// installed already (TensorFlow's text).
void install_run_interceptor(RunInterceptor* interceptor);
// Removes `interceptor` if it is the one installed.
void remove_run_interceptor(RunInterceptor* interceptor);
// The one installed, or null.
RunInterceptor* current_run_interceptor();

}  // namespace stepscope
