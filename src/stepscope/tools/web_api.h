// The JSON API behind `stepscope serve`'s pages (web_assets.h), read-only, over the runs under the
// served directory (run_catalog.h). Paths are relative to that directory ("." is the directory
// itself) and confined to it as every other path the server takes.
//
//   /api/runs                   {"title", "jobs": [{"path", "ranks"}...] (the data-parallel jobs:
//                               directories of two or more rank<N> runs with timelines), "runs":
//                               [{"path", "event_files", "traces", "has_profile", "modified"}...]}
//   /api/run/<run>              RunSummary::to_json: scalars by tag ({"points", "data": [[step,
//                               value, wall_time]...]}, long series thinned to 2,000 points), the
//                               traced steps' wall times, traces, RunMetadata files, the profile,
//                               and the files that could not be read
//   /api/tfprof/<run>?view=scope|graph|op|code&<tfprof option>=<value>...
//                               {"view", "steps", "root": the view's JSON (profiler.h)}; options
//                               by tfprof's flag names (max_depth, min_micros, order_by, select=a,b,
//                               account_type_regexes=..., step, ...), ProfileOptionBuilder's
//                               defaults for the others, checked as the command line checks them
//   /api/advise/<run>[?step=N][&what_if=OP&speedup=K]
//                               {"step", "steps", "advice": {"checkers": ...}, "critical_path":
//                               CriticalPath::to_json of the step (the latest by default),
//                               "trace": the step's timeline or null, "what_if": WhatIf::to_json
//                               of the step replayed with OP (a node or op type) K times faster
//                               (default 2), or null}
//   /api/job/<job>              RankJob::to_json of a data-parallel job's directory (rank_jobs.h:
//                               its rank<N> runs, each one's traced steps, and each step's ranks)
//   /api/stragglers/<job>[?step=N]
//                               {"step" (the latest traced by default), "trace": the merged
//                               timeline's path for /viewer/<trace>?merged=1, "stragglers":
//                               Stragglers::to_json of the step's ranks merged (merge_command.h)}
//   /api/merged/<job>/timeline-<N>.json
//                               the ranks' timelines of step N merged into one Chrome trace, on
//                               rank 0's clock (merge_rank_traces)
//   /api/memory/<run>[?step=N]  {"step", "steps", "memory_by_kind": MemoryByKind::to_json of the
//                               step's peak (the latest by default), or null when the profile
//                               has none for it}
//
// Errors are JSON too, {"error": "..."}: 400 for a bad option (tfprof's words), 404 for a run or
// step that is not there, 422 for a file that is damaged (naming it, relative to the directory).
#pragma once

#include <optional>
#include <string_view>

#include "stepscope/tools/trace_server.h"

namespace stepscope {

// The reply to a GET of `path` (decoded, starting "/api/") with `query` (raw), or nothing when
// `path` is not one of the routes above.
std::optional<HttpReply> handle_api_request(const ServedDirectory& served, std::string_view path,
                                            std::string_view query);

}  // namespace stepscope
