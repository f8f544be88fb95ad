// The advisor's input-pipeline check (XProf's input-bound analysis, for the steps a profile
// kept): the share of the step time spent in the input pipeline's ops (IteratorGetNext and the
// other iterator ops, which block until the next batch is ready), with XProf's thresholds: under
// 5% not input-bound, 5-20% moderately, over 20% highly input-bound; the slowest input op; the
// slowest stages of its pipeline (RunMetadata::input_stages: a traced run times each dataset
// stage, "Iterator::repeat::batch::csv"); and, when the profile holds every run's step timing
// (ProfilerHook's), the same share over all the runs, which decides the suggestion. Part of
// AdvisorOptions::all(). Its option: "step" (default: every kept step).
#pragma once

#include "stepscope/profiler/tfprof/advisor.h"

namespace stepscope {

class InputPipelineChecker : public AdviceChecker {
 public:
  std::string name() const override { return "InputPipelineChecker"; }
  std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>& options,
                                 std::ostream& log) const override;
};

}  // namespace stepscope
