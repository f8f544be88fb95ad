// What a timeline shows of a collective op's execution beyond any op's args: the MPI call, the
// number of ranks and the bytes each rank sent, so communication can be told from computation.
// A header of its own (not collective_ops.h) because only the profiler's writer needs it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stepscope {

class Node;

struct CollectiveTraceArgs {
  std::string_view algorithm;  // "MPI_Allreduce", ...; "none (one process)" in a job of one
  int64_t ranks = 1;
  // Bytes each rank sends for the op: 2 (n - 1) / n of the buffer for an allreduce (what a ring
  // or a reduce-scatter + allgather sends; Open MPI picks the algorithm, of the same order), the
  // other ranks' share for an allgather, the buffer for a broadcast or a reduce.
  int64_t bytes_moved = 0;
};

// For a collective op (Allreduce, Broadcast, Reduce, Allgather, ReduceScatter) that produced
// `output_bytes`, its args in the current job (collective_backend()); nullopt for other ops.
std::optional<CollectiveTraceArgs> collective_trace_args(const Node& node, int64_t output_bytes);

}  // namespace stepscope
