// tfprof's pprof output (output=pprof:outfile=F): the displayed view as pprof's profile.proto
// (https://github.com/google/pprof/blob/main/proto/profile.proto), which the profiler writes
// gzipped, so `pprof -top F`, `pprof -http=: F` and other pprof tools read it.
//
// As TensorFlow's tfprof_code.cc (PprofProfileImpl): exactly one select value, one of micros,
// accelerator_micros, cpu_micros, bytes, peak_bytes, residual_bytes, output_bytes, params or
// float_ops; sample types [("count", "count"), (<select>, "microseconds" | "bytes" | "count")]
// and the comment TensorFlow writes for that value; string_table[0] = ""; one sample per graph
// node, values [1, the node's value], labelled "graph node:" = its name; functions numbered from
// 1 and named "<file base without extension>:<function>" (" (gradient)" kept for the gradient
// frames), locations numbered from 1; a sample's location ids leaf first.
//
// Where it differs from TensorFlow (whose code view pairs each caller's line with its callee's
// function and leaves the outermost frame out): each displayed row of the code view is one
// location, its frame's line in its frame's function, so pprof attributes every line to the
// function it is in and the outermost frame is kept. default_sample_type is the select value.
//
// Beyond TensorFlow (which only has the code view): the scope view (a location per displayed
// node, named by its full name; a node's own value sampled on its path from the top scope) and
// the op view (a sample per graph node on [node, op type]). Rows whose value is 0 are left out
// there. The graph view (a DAG, not a tree) is not supported.
#pragma once

#include <string>
#include <string_view>

#include "stepscope/profiler/tfprof/protos.h"

namespace stepscope::tfprof {

// "" when `select` (ProfileOptions::select) suits pprof output, else TensorFlow's message
// ("Can only select 1 attribute for pprof output.", "pprof doesn't support -select=<s>").
std::string pprof_select_error(const std::vector<std::string>& select);

// The serialized (not gzipped) Profile of the view `cmd` ("code", "op" or "scope") displayed as
// `root`, for `select` (one value, checked by pprof_select_error).
std::string pprof_profile(std::string_view cmd, const MultiGraphNodeProto& root, std::string_view select);
std::string pprof_profile(std::string_view cmd, const GraphNodeProto& root, std::string_view select);

}  // namespace stepscope::tfprof
