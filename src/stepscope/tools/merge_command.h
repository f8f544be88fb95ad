// `stepscope merge -o OUT TRACE...`: one Chrome trace for a data-parallel job from the timelines
// its ranks wrote (ProfilerHook's timeline-<step>.json of each rank, stepscope/dist). A part of
// run_cli (cli.h).
//
//   mpirun -np 4 train ...          # each rank writes runs/rank<r>/timeline-100.json
//   stepscope merge -o job-100.json runs/rank*/timeline-100.json
//
// Each input's metadata gives its rank and its clock against rank 0's (rank, clock_offset_ns,
// clock_offset_error_ns: dist::clock_offset); an input without them is the rank of its position.
// The merged trace has every rank's processes, named "rank R: <name>" and grouped rank after rank,
// on one clock: each input's events are moved by its baseTimeNanoseconds minus its clock offset,
// so events that happened at once on two ranks line up (to within the offsets' error bounds,
// recorded in the merged metadata). Flow and object ids are made unique per rank. With
// --stragglers it also prints which rank arrived last at each collective (straggler_report).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace stepscope {

struct MergeCommand {
  CLI::App* command = nullptr;
  std::vector<std::string> inputs;
  std::string output;
  bool stragglers = false;  // also print straggler_report of the merged trace
};

// Adds the "merge" subcommand to `app`, its flags bound to `m`.
void add_merge_command(CLI::App& app, MergeCommand& m);
// Runs it once parsed: reads the inputs (.json or .json.gz), writes the output atomically
// (gzipped when its name ends in .gz); throws an error naming the input at fault.
int run_merge_command(const MergeCommand& m, uint64_t max_decompressed_bytes, std::ostream& out);

// The merge itself, of (name for errors, trace JSON) pairs. InvalidArgumentError naming the input
// for text that is no trace, two inputs of one rank, or an input without baseTimeNanoseconds
// when there are several.
std::string merge_rank_traces(const std::vector<std::pair<std::string, std::string>>& traces);

// The stragglers of a merged trace: for each collective op run (Allreduce, Broadcast, Reduce,
// Allgather, ReduceScatter: the n-th event of one node name on each rank), the rank that started
// it last and how long each other rank waited for it (the last start minus its own start: a
// collective ends on no rank before the last one arrives), then each rank's total wait.
struct CollectiveWait {
  std::string collective;  // its node name, with " #n" from its second run in the trace on
  int64_t last_rank = 0;   // the rank that arrived last
  double max_wait_us = 0;
  std::map<int64_t, double> wait_us;  // by rank, the last rank aside
};
struct Stragglers {
  std::vector<CollectiveWait> collectives;  // the longest waits first
  std::map<int64_t, double> total_wait_us;  // by rank (every rank seen), over every collective
  // {"collectives": [{"collective", "last_rank", "max_wait_us", "wait_us": {"<rank>": us}}...]
  // (at most `top`), "total_wait_us": {"<rank>": us}}
  std::string to_json(size_t top = 20) const;
};
// InvalidArgumentError when `merged_trace` is not a Chrome trace.
Stragglers find_stragglers(const std::string& merged_trace);
// find_stragglers as text, one collective a line, the longest waits first (at most `top`).
std::string straggler_report(const std::string& merged_trace, size_t top = 20);

}  // namespace stepscope
