// TensorFlow's model_analyzer.profile() and advise(): one-shot views of a graph and, optionally,
// one traced step, without keeping a Profiler.
//
//   auto params = profile(graph);  // the trainable variables' parameters, by name scope
//   auto ops = profile(graph, &run_metadata, "op", ProfileOptionBuilder::time_and_memory());
//   AdviceProto advice = advise(graph, &run_metadata);
#pragma once

#include <string_view>
#include <variant>

#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/profiler.h"

namespace stepscope {

// The result of profile(): GraphProfile for "scope" and "graph", MultiGraphProfile for "op" and
// "code" (TensorFlow's GraphNodeProto / MultiGraphNodeProto).
using ModelProfile = std::variant<GraphProfile, MultiGraphProfile>;

// The view `cmd` of `graph` with `run_meta` added as step 0 (when given), printed as the options
// say (stdout by default, as TensorFlow). InvalidArgumentError "unknown cmd: <cmd>" for another
// command; options are taken as leniently as Profiler's methods take them.
ModelProfile profile(const Graph& graph, const RunMetadata* run_meta = nullptr, std::string_view cmd = "scope",
                     const ProfileOptions& options = ProfileOptionBuilder::trainable_variables_parameter());

// The advisor's checkers (all by default) on `graph` and `run_meta`; the report is printed on
// stdout as Profiler::advise does, and returned.
AdviceProto advise(const Graph& graph, const RunMetadata* run_meta = nullptr,
                   const AdvisorOptions& options = AdvisorOptions::all());

// The text of a profile() result.
inline const std::string& text_of(const ModelProfile& p) {
  return std::visit([](const auto& r) -> const std::string& { return r.text(); }, p);
}

}  // namespace stepscope
