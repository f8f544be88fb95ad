// What a timeline shows of a collective op's execution beyond any op's args: the MPI call, the
// number of ranks and the bytes each rank sent, so communication can be told from computation.
// A header of its own (not collective_ops.h) because only the profiler's writer needs it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace stepscope {

class Node;

struct CollectiveTraceArgs {
  std::string_view algorithm;  // "MPI_Allreduce", "shared-memory allreduce", ...; "none (one process)" in a job of one
  int64_t ranks = 1;
  // Bytes each rank sends for the op: 2 (n - 1) / n of the buffer for an allreduce (what a ring
  // or a reduce-scatter + allgather sends; Open MPI picks the algorithm, of the same order), the
  // other ranks' share for an allgather, the buffer for a broadcast or a reduce.
  int64_t bytes_moved = 0;
  // An Allreduce of several inputs: which went packed in the fusion buffer (one call for
  // them all) and which had a call of their own (collective_ops.h: kAllreduceDirectBytes). Empty
  // for other ops, a lone input, one process, or when the outputs' sizes are not known.
  std::vector<int> fused_inputs, direct_inputs;
};

// Allreduce, Broadcast, Reduce, Allgather or ReduceScatter.
bool is_collective_op(std::string_view op);
// For a collective op (Allreduce, Broadcast, Reduce, Allgather, ReduceScatter) that produced
// outputs of `output_bytes` (one entry per output; may be empty when unknown), its args in the
// current job (collective_backend()); nullopt for other ops.
std::optional<CollectiveTraceArgs> collective_trace_args(const Node& node, std::span<const int64_t> output_bytes);
// The same from what a profile keeps of a node: its op type, its number of data inputs and the
// number of ranks of the job it ran in (nullopt also for ranks < 1).
std::optional<CollectiveTraceArgs> collective_trace_args(std::string_view op, int num_inputs, int64_t ranks,
                                                         std::span<const int64_t> output_bytes);

}  // namespace stepscope
