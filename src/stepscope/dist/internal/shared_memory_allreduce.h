// An allreduce for ranks that all run on one host, through an MPI shared-memory window
// (MPI_Win_allocate_shared) instead of MPI_Allreduce. Only built with MPI (mpi.cc uses it).
//
// Why: on one host, Open MPI's MPI_Allreduce moves the data through its shared-memory transport
// in fragments, each copied into a queue and out again, and the average then needs a pass of its
// own. Here each rank reads the others' buffers where they lie: per piece of at most a slot,
//   1. each rank copies into its slot the parts of its input (or inputs, taken back to back)
//      that the other ranks reduce;
//   2. they meet; each rank reduces its own part (one P-th of the piece) from every rank's slot
//      (its own from its inputs where they lie), scaled on the way (the average costs no pass),
//      and writes the result to its output and its slot;
//   3. they meet; each rank copies the other parts' results from their slots to its output.
// Each element is summed by one rank, in rank order, so every rank gets the same bits. Measured
// on the 2-core VM of BENCHMARKS.md's issue 18 section, 2 ranks: 1.1-1.4x the throughput of
// MPI_Allreduce (sum alone) from 64 KiB to 16 MiB, averaging included.
//
// Two sets of slots alternate between pieces, so a rank may start filling the next piece's slot
// while another still copies results out of the last one (it cannot be two pieces behind: step 2
// waits for every rank). The ranks meet by spinning on a counter each in the window, yielding
// the CPU while they wait (ranks may outnumber cores). A rank that dies leaves the others
// waiting here as in any MPI collective: mpirun ends the job (see dist::shutdown).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "stepscope/core/dtype.h"
#include "stepscope/ops/collective_ops.h"

namespace stepscope::dist {

class SharedMemoryAllreduce {
 public:
  // Collective over `comm` (every rank must call it). Null on every rank when the window cannot
  // be made on some rank (no shared memory: the caller keeps MPI_Allreduce); the ranks agree.
  static std::unique_ptr<SharedMemoryAllreduce> create(MPI_Comm comm);
  ~SharedMemoryAllreduce();  // frees the window: collective, like create
  SharedMemoryAllreduce(const SharedMemoryAllreduce&) = delete;
  SharedMemoryAllreduce& operator=(const SharedMemoryAllreduce&) = delete;

  // out[0, count) = scale x (the sum over the ranks of their in[0, count)); in may be out.
  // float32, float64, int32, int64 (scale 1 for the integer ones). Every rank calls it with the
  // same count and dtype; one call at a time per process (it locks).
  void allreduce(const void* in, void* out, int64_t count, DType dtype, double scale);
  // The same over inputs taken back to back (CollectiveBackend::allreduce_gathered), read where
  // they lie: each rank copies the parts the others reduce from them into its slot.
  void allreduce(std::span<const AllreduceInput> inputs, void* out, DType dtype, double scale);

 private:
  SharedMemoryAllreduce(MPI_Win window, int rank, int size, int64_t slot_bytes, std::vector<char*> regions);
  std::atomic<uint64_t>& arrivals(int rank);
  char* slot(int rank, int set) const;
  void meet();

  MPI_Win window_;
  int rank_, size_;
  int64_t slot_bytes_;
  std::vector<char*> regions_;  // each rank's part of the window, as this process maps it
  uint64_t meetings_ = 0;       // how many times this rank has met the others
  uint64_t pieces_ = 0;         // which set of slots the next piece uses
  std::mutex mutex_;
};

}  // namespace stepscope::dist
