// The processes of a data-parallel job (Horovod's model: one process per worker, started by
// `mpirun -np N program`), over Open MPI.
//
//   dist::init();                       // once, before building the graph
//   auto data = Dataset::csv(...).shard(dist::size(), dist::rank()).batch(64);
//   ... DistributedOptimizer(opt).minimize(...) ...
//   dist::shutdown();                   // or at exit
//
// Without MPI (a build with STEPSCOPE_MPI=OFF) or in a process not started by mpirun, the job is
// this one process: size() == 1, rank() == 0, and the collective ops are the identity.
#pragma once

#include <cstdint>
#include <string>

namespace stepscope::dist {

struct InitOptions {
  // How long shutdown() waits for every rank to reach it before aborting the job (see shutdown).
  double shutdown_timeout_secs = 30;
};

// Starts MPI (MPI_Init_thread asking for MPI_THREAD_MULTIPLE: kernels run on the executor's
// threads) when the process was started by mpirun, and installs the MPI collective backend
// (ops/collective_ops.h). A second call does nothing. UnavailableError when MPI cannot start, or
// gives less than MPI_THREAD_SERIALIZED.
void init(const InitOptions& options = {});
// Finalizes MPI (when init started it) and goes back to one process. Also run at exit, so a rank
// that leaves main early — an error caught at the top, a return — gets here while the others may
// be waiting for it in a collective of a step: MPI_Finalize would then wait for them forever.
// So the ranks first meet here, on a communicator of their own; when they have not all come
// within shutdown_timeout_secs, this rank writes why to stderr and aborts the whole job
// (MPI_Abort: mpirun ends every rank), instead of hanging.
void shutdown();
bool initialized();

int rank();        // 0 .. size() - 1 (0 before init)
int size();        // the number of processes in the job (1 before init)
int local_rank();  // the rank among the job's processes on this machine
int local_size();
// How the collectives run: "MPI (Open MPI v4.1.4, MPI_THREAD_MULTIPLE)", with "; allreduce through a
// shared-memory window" when every rank runs on this host (init makes one MPI_Win_allocate_shared
// window, and the Allreduce op reduces through it: docs/distributed.md; STEPSCOPE_ALLREDUCE=mpi
// on every rank keeps MPI_Allreduce), or "local (one process)".
std::string describe();

// Returns when every rank has called it.
void barrier();

// Where this rank's wall clock (wall_ns(): the base every trace records, baseTimeNanoseconds)
// stands against rank 0's, estimated by init(): ping-pongs with rank 0 over MPI, the one with the
// shortest round trip kept. Rank 0's time = this rank's time - offset_ns, within +- error_ns
// (half that round trip). Zero and zero on rank 0 and in one process. For putting the ranks'
// traces on one clock; the wall clock, not the monotonic one, because traces are anchored to it
// (and the monotonic clocks of two machines have no common origin at all).
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t error_ns = 0;
};
ClockOffset clock_offset();

}  // namespace stepscope::dist
