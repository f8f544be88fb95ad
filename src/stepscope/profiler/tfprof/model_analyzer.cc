#include "stepscope/profiler/tfprof/model_analyzer.h"

#include <string>

#include "stepscope/base/error.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

ModelProfile profile(const Graph& graph, const RunMetadata* run_meta, std::string_view cmd,
                     const ProfileOptions& options) {
  if (cmd != "scope" && cmd != "graph" && cmd != "op" && cmd != "code")
    throw InvalidArgumentError("unknown cmd: " + std::string(cmd));
  Profiler profiler(graph);
  if (run_meta) profiler.add_step(0, *run_meta);
  if (cmd == "scope") return profiler.profile_name_scope(options);
  if (cmd == "graph") return profiler.profile_graph(options);
  if (cmd == "op") return profiler.profile_operations(options);
  return profiler.profile_code(options);
}

AdviceProto advise(const Graph& graph, const RunMetadata* run_meta, const AdvisorOptions& options) {
  Profiler profiler(graph);
  if (run_meta) profiler.add_step(0, *run_meta);
  return profiler.advise(options);
}

}  // namespace stepscope
