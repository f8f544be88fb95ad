// Collective ops: Allreduce, Broadcast, Reduce, Allgather and ReduceScatter across the ranks of a
// data-parallel job (Horovod's model: one process per worker, the same graph on every rank).
//
// The ops are declared here, with the others, so that shape rules, costs and gradients live in one
// place and every graph can hold them; the communication itself goes through a CollectiveBackend.
// The default backend is one process (size 1: every collective is the identity, Broadcast's root
// must be 0); dist::init() (stepscope/dist/mpi.h) installs the MPI one. Backends are process-wide
// because MPI is.
//
// Ordering: a collective's kernel blocks its thread until every rank has reached the same
// collective, and MPI requires every rank to run collectives in the same order. Collectives that
// may be ready at the same time in one step must therefore be ordered by control dependencies
// (DistributedOptimizer and broadcast_global_variables chain theirs). Each collective first checks
// that all ranks agree on its node and element count, so an ordering mistake is an
// InternalError naming the node, not a hang on mismatched buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope {

// One of the buffers an allreduce takes back to back (CollectiveBackend::allreduce_gathered):
// `count` elements at `data`, or that many zeros where data is null.
struct AllreduceInput {
  const void* data = nullptr;
  int64_t count = 0;
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What runs the collectives ("MPI (Open MPI v4.1.4, ...)", "local (one process)"), for people to read.
  virtual std::string describe() const = 0;

  // Every rank passes the same `key` (a hash of the node name and element count); false when they
  // differ. The backend's way to catch collectives run in different orders on different ranks.
  virtual bool agree(uint64_t key) = 0;
  // True when every rank runs on this host (MPI's shared-memory transport carries the data).
  virtual bool on_one_host() const { return size() == 1; }
  // out[0, count) = scale x the sum over ranks of in[0, count); `in` may be `out` (dtype
  // float32/float64/int32/int64; scale is 1 for the integer ones: the average is for floating
  // dtypes). Taking the scale lets a backend fold the average into a pass it makes anyway.
  virtual void allreduce(const void* in, void* out, int64_t count, DType dtype, double scale) = 0;
  // out[0, total) = scale x the sum over ranks of the inputs taken back to back (total: the sum
  // of their counts; none of them may lie in out). The same call, to the other ranks, as an
  // allreduce of `total` elements. This default copies the inputs into out and reduces it in
  // place; a backend that can read them where they lie skips that copy.
  virtual void allreduce_gathered(std::span<const AllreduceInput> inputs, void* out, DType dtype, double scale);
  // What allreduce calls, for the timeline's and tfprof's args.
  virtual std::string_view allreduce_algorithm() const { return "MPI_Allreduce"; }
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // On root: data = the sum over ranks; elsewhere data is left alone.
  virtual void reduce_sum(void* data, int64_t count, DType dtype, int root) = 0;
  // out[r] = the value of rank r (out has size() entries).
  virtual void allgather_int64(int64_t value, int64_t* out) = 0;
  // out = the concatenation, in rank order, of every rank's `in` (bytes[r] bytes from rank r).
  virtual void allgatherv(const void* in, void* out, std::span<const int64_t> bytes) = 0;
  // out = elements [offset_r, offset_r + counts[rank]) of the sum over ranks of `in`, where
  // offset_r is the sum of counts of the lower ranks (in has the sum of all counts).
  virtual void reduce_scatter_sum(const void* in, void* out, std::span<const int64_t> counts, DType dtype) = 0;
};

// The backend collective kernels use (the one-process one until set).
CollectiveBackend& collective_backend();
// Replaces it (null: back to one process). Not while a step runs.
void set_collective_backend(std::shared_ptr<CollectiveBackend> backend);

enum class ReduceOp { kSum, kAverage };

// An Allreduce input of at least this many bytes gets its own collective call, in place on its
// output; smaller ones (two or more) are fused: reduced in one call, where their producers wrote
// them back to back (OpDef::contiguous_inputs), or else through a fusion buffer.
inline constexpr int64_t kAllreduceDirectBytes = 64 << 10;
// Which of an Allreduce's inputs (given their sizes in bytes) travel in the fusion buffer.
std::vector<bool> allreduce_fused_inputs(std::span<const int64_t> input_bytes);
// Where the ranks share one host and MPI_Allreduce carries the data, a buffer of at least
// kAllreducePiecedBytes (an input reduced on its own, or the fusion buffer) is reduced in pieces
// of kAllreducePieceBytes, one call each (dist/mpi.cc says why).
inline constexpr int64_t kAllreducePiecedBytes = 8 << 20;
inline constexpr int64_t kAllreducePieceBytes = 256 << 10;

// out[0, n) = in[0, n) x factor (in may be out; a plain copy for factor 1 or an integer dtype),
// in one pass: for a backend that scales on the way into its buffer.
void copy_scaled(const void* in, void* out, int64_t n, DType dtype, double factor);

// The sum (or average: floating dtypes only) over ranks of each input; outputs have the inputs'
// dtypes and shapes (all inputs one dtype). Of several inputs, those under
// kAllreduceDirectBytes travel fused in one buffer, one collective call for them all (what
// DistributedOptimizer builds); a larger one (or a lone one) is reduced on its own. An input only
// this op holds (a gradient in training) is reduced in its own buffer, which becomes the output;
// others are left alone and their outputs are new tensors. Gradient: the same allreduce of the
// outputs' gradients.
std::vector<Output> allreduce(const Scope& scope, const std::vector<Output>& inputs, ReduceOp op = ReduceOp::kSum,
                              CallSite site = CallSite::current());
Output allreduce(const Scope& scope, Output x, ReduceOp op = ReduceOp::kSum, CallSite site = CallSite::current());
// Rank root_rank's x on every rank. Gradient: the gradients' sum on the root, zero elsewhere (Reduce).
Output broadcast(const Scope& scope, Output x, int root_rank, CallSite site = CallSite::current());
// On root_rank the sum over ranks of x, elsewhere zeros. Gradient: Broadcast from the root.
Output reduce(const Scope& scope, Output x, int root_rank, CallSite site = CallSite::current());
// Every rank's x concatenated along dim 0 in rank order (dims after 0 must agree; dim 0 may
// differ). Gradient: this rank's rows of the gradients' sum (ReduceScatter).
Output allgather(const Scope& scope, Output x, CallSite site = CallSite::current());
// This rank's rows of the sum over ranks of x: rows [offset, offset + like.dim(0)), offset the sum
// of like.dim(0) over the lower ranks; `like` only gives the row count. Gradient: Allgather.
Output reduce_scatter(const Scope& scope, Output x, Output like, CallSite site = CallSite::current());

}  // namespace stepscope
