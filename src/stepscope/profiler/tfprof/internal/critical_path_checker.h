// The advisor's checker of our own (no peer has one): the critical path of a traced step — the
// chain of ops that determined its wall time, each op's share, the waits between them, and the
// parallelism the executor got (profiler/critical_path.h). Part of AdvisorOptions::all(), so
// profiler.advise() reports it after TensorFlow's checkers. Its options: "step" (default: the
// latest step added) and "max_rows" (default 15).
#pragma once

#include "stepscope/profiler/tfprof/advisor.h"

namespace stepscope {

class CriticalPathChecker : public AdviceChecker {
 public:
  std::string name() const override { return "CriticalPathChecker"; }
  std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>& options,
                                 std::ostream& log) const override;
};

}  // namespace stepscope
