#include "stepscope/dist/mpi.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "stepscope/base/clock.h"
#include "stepscope/base/error.h"
#include "stepscope/ops/collective_ops.h"

#ifdef STEPSCOPE_HAVE_MPI
#include <mpi.h>

#include "stepscope/dist/internal/shared_memory_allreduce.h"
#endif

namespace stepscope::dist {
namespace {

struct State {
  double shutdown_timeout_secs = 30;
  ClockOffset clock;
  bool initialized = false;
  bool started_mpi = false;  // init called MPI_Init_thread, so shutdown finalizes
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
};
std::mutex state_mutex;
State state;

#ifdef STEPSCOPE_HAVE_MPI

// mpirun (Open MPI's, and PMIx launchers) tells its processes so in the environment; a process
// started by hand stays one process instead of trying an MPI singleton (which, with Open MPI 4,
// forks an orted and fails in containers without one).
bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

// MPI_ERRORS_RETURN is set on the communicators used, so a failed call comes back here.
void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw UnavailableError(std::string(call) + " failed: " + mpi_error(code));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    default:
      throw InvalidArgumentError("MPI: dtype " + std::string(dtype_name(dtype)) + " cannot be summed");
  }
}

int int_count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    throw InvalidArgumentError(std::string(what) + ": " + std::to_string(n) +
                               " is more than one MPI call can move (INT_MAX elements)");
  return static_cast<int>(n);
}

class MpiBackend : public CollectiveBackend {
 public:
  MpiBackend(MPI_Comm comm, MPI_Comm control, int rank, int size, bool on_one_host, bool thread_multiple,
             std::string library)
      : comm_(comm),
        control_(control),
        rank_(rank),
        size_(size),
        on_one_host_(on_one_host),
        thread_multiple_(thread_multiple),
        library_(std::move(library)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool on_one_host() const override { return on_one_host_; }
  std::string describe() const override {
    return "MPI (" + library_ + ", " + (thread_multiple_ ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED") +
           (shared_ ? "; allreduce through a shared-memory window" : "") + ")";
  }
  void allreduce_gathered(std::span<const AllreduceInput> inputs, void* out, DType dtype, double scale) override {
    if (shared_) return shared_->allreduce(inputs, out, dtype, scale);
    CollectiveBackend::allreduce_gathered(inputs, out, dtype, scale);
  }
  std::string_view allreduce_algorithm() const override {
    return shared_ ? "shared-memory allreduce" : "MPI_Allreduce";
  }

  // Ranks on one host: Allreduce through `shared` instead of MPI_Allreduce (null: MPI_Allreduce).
  // Set once by init, before any step; released (collectively) by shutdown.
  void use_shared_memory(std::unique_ptr<SharedMemoryAllreduce> shared) { shared_ = std::move(shared); }

  bool agree(uint64_t key) override {
    // One allreduce of (key, ~key) with MAX gives (max key, ~min key): equal keys iff max == min.
    uint64_t v[2] = {key, ~key};
    auto lock = serialize();
    check(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, comm_), "MPI_Allreduce");
    return v[0] == ~v[1];
  }
  void allreduce(const void* in, void* out, int64_t count, DType dtype, double scale) override {
    if (shared_) return shared_->allreduce(in, out, count, dtype, scale);
    const MPI_Datatype type = mpi_type(dtype);
    const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
    // In place on out, the input going into it already scaled (the average of n ranks is the sum
    // of each rank's 1/n of its value): that one pass is the copy a non-in-place MPI_Allreduce
    // makes before reducing anyway. Where the ranks share one host and the buffer is 8 MiB or
    // more, in pieces of 256 KiB, each scaled right before its call (so it is still in cache when
    // MPI reads it): measured on Open MPI's shared-memory transport, with and without CMA's single
    // copy, 1.3-1.9x faster than one call from 8 to 16 MiB (2.8x at 64 MiB without CMA), slower
    // at 4 MiB with CMA (0.9x). Across hosts, where a call costs a network latency, unmeasured:
    // one call (of at most INT_MAX elements: MPI's counts are int), which MPI segments itself.
    const int64_t piece = on_one_host_ && count * esize >= kAllreducePiecedBytes ? kAllreducePieceBytes / esize
                                                                                 : int64_t{INT_MAX};
    auto lock = serialize();
    for (int64_t done = 0; done < count;) {
      const int64_t n = std::min(count - done, piece);
      char* p = static_cast<char*>(out) + done * esize;
      copy_scaled(static_cast<const char*>(in) + done * esize, p, n, dtype, scale);
      check(MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(n), type, MPI_SUM, comm_), "MPI_Allreduce");
      done += n;
    }
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    auto lock = serialize();
    for (int64_t done = 0; done < bytes;) {
      const int n = static_cast<int>(std::min<int64_t>(bytes - done, INT_MAX));
      check(MPI_Bcast(static_cast<char*>(data) + done, n, MPI_BYTE, root, comm_), "MPI_Bcast");
      done += n;
    }
  }
  void reduce_sum(void* data, int64_t count, DType dtype, int root) override {
    const MPI_Datatype type = mpi_type(dtype);
    const int n = int_count(count, "MPI_Reduce");
    auto lock = serialize();
    check(MPI_Reduce(rank_ == root ? MPI_IN_PLACE : data, data, n, type, MPI_SUM, root, comm_), "MPI_Reduce");
  }
  void allgather_int64(int64_t value, int64_t* out) override {
    auto lock = serialize();
    check(MPI_Allgather(&value, 1, MPI_INT64_T, out, 1, MPI_INT64_T, comm_), "MPI_Allgather");
  }
  void allgatherv(const void* in, void* out, std::span<const int64_t> bytes) override {
    std::vector<int> counts(size_), displs(size_);
    int64_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      counts[r] = int_count(bytes[r], "MPI_Allgatherv");
      displs[r] = int_count(offset, "MPI_Allgatherv");
      offset += bytes[r];
    }
    auto lock = serialize();
    check(MPI_Allgatherv(in, counts[rank_], MPI_BYTE, out, counts.data(), displs.data(), MPI_BYTE, comm_),
          "MPI_Allgatherv");
  }
  void reduce_scatter_sum(const void* in, void* out, std::span<const int64_t> counts, DType dtype) override {
    const MPI_Datatype type = mpi_type(dtype);
    std::vector<int> n(size_);
    for (int r = 0; r < size_; ++r) n[r] = int_count(counts[r], "MPI_Reduce_scatter");
    auto lock = serialize();
    check(MPI_Reduce_scatter(in, out, n.data(), type, MPI_SUM, comm_), "MPI_Reduce_scatter");
  }

  MPI_Comm comm() const { return comm_; }
  // Collective: every rank, after they met in shutdown.
  void release_shared_memory() { shared_.reset(); }
  MPI_Comm control() const { return control_; }

  // True when every rank called it within `timeout_secs` (see dist::shutdown). On the control
  // communicator: a rank may still be inside a collective of comm_, waiting for this one.
  bool meet(double timeout_secs) {
    MPI_Request request;
    {
      auto lock = serialize();
      check(MPI_Ibarrier(control_, &request), "MPI_Ibarrier");
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_secs);
    for (;;) {
      int done = 0;
      {
        auto lock = serialize();
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      }
      if (done) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void barrier() {
    auto lock = serialize();
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }

 private:
  // Below MPI_THREAD_MULTIPLE, MPI calls from several threads must not overlap.
  std::unique_lock<std::mutex> serialize() {
    return thread_multiple_ ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mutex_);
  }

  MPI_Comm comm_, control_;
  int rank_, size_;
  bool on_one_host_, thread_multiple_;
  std::string library_;
  std::mutex mutex_;
  std::unique_ptr<SharedMemoryAllreduce> shared_;
};

std::shared_ptr<MpiBackend> mpi_backend;

// Cristian's algorithm against rank 0, one rank at a time: rank 0 notes t0, rank r answers with
// its time tr, rank 0 notes t1; then rank 0's clock read (t0 + t1) / 2 when rank r's read tr, to
// within (t1 - t0) / 2. The round with the shortest trip wins; rank 0 sends each rank its result.
ClockOffset estimate_clock_offset(MPI_Comm comm, int rank, int size) {
  constexpr int kRounds = 16, kTag = 7;
  ClockOffset mine;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      ClockOffset best{0, INT64_MAX};
      for (int round = 0; round < kRounds; ++round) {
        int64_t tr = 0;
        const int64_t t0 = wall_ns();
        check(MPI_Send(&t0, 1, MPI_INT64_T, r, kTag, comm), "MPI_Send");
        check(MPI_Recv(&tr, 1, MPI_INT64_T, r, kTag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
        const int64_t t1 = wall_ns();
        if (t1 < t0) continue;  // the wall clock was set back meanwhile: this round says nothing
        const int64_t error = (t1 - t0 + 1) / 2;
        if (error < best.error_ns) best = {tr - (t0 + (t1 - t0) / 2), error};
      }
      const int64_t result[2] = {best.offset_ns, best.error_ns};
      check(MPI_Send(result, 2, MPI_INT64_T, r, kTag, comm), "MPI_Send");
    }
  } else {
    for (int round = 0; round < kRounds; ++round) {
      int64_t t0 = 0;
      check(MPI_Recv(&t0, 1, MPI_INT64_T, 0, kTag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      const int64_t tr = wall_ns();
      check(MPI_Send(&tr, 1, MPI_INT64_T, 0, kTag, comm), "MPI_Send");
    }
    int64_t result[2];
    check(MPI_Recv(result, 2, MPI_INT64_T, 0, kTag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    mine = {result[0], result[1]};
  }
  return mine;
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, len);
  const size_t comma = s.find(',');  // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
  return comma == std::string::npos ? s : s.substr(0, comma);
}

#endif  // STEPSCOPE_HAVE_MPI

void shutdown_at_exit() { shutdown(); }

}  // namespace

void init(const InitOptions& options) {
  std::lock_guard lock(state_mutex);
  if (state.initialized) return;
  state.shutdown_timeout_secs = options.shutdown_timeout_secs;
#ifdef STEPSCOPE_HAVE_MPI
  int already = 0, finalized = 0;
  MPI_Initialized(&already);
  MPI_Finalized(&finalized);
  if (finalized)
    throw FailedPreconditionError("dist::init after dist::shutdown: MPI cannot start twice in one process");
  if (launched_by_mpirun() || already) {
    int provided = MPI_THREAD_SINGLE;
    if (!already) {
      const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (code != MPI_SUCCESS) throw UnavailableError("dist::init: MPI_Init_thread failed: " + mpi_error(code));
      state.started_mpi = true;
    } else {
      MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      if (state.started_mpi) MPI_Finalize();
      state.started_mpi = false;
      throw UnavailableError("dist::init: the MPI library gives thread level " + std::to_string(provided) +
                             ", and kernels run on several threads: it needs MPI_THREAD_SERIALIZED or better");
    }
    // A communicator of our own, so collectives of the user's other MPI code never match ours.
    MPI_Comm comm, local;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &state.rank);
    MPI_Comm_size(comm, &state.size);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, state.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &state.local_rank);
    MPI_Comm_size(local, &state.local_size);
    MPI_Comm_free(&local);
    MPI_Comm control;
    MPI_Comm_dup(comm, &control);
    MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
    mpi_backend = std::make_shared<MpiBackend>(comm, control, state.rank, state.size, state.local_size == state.size,
                                               provided >= MPI_THREAD_MULTIPLE, library_version());
    // Ranks on one host reduce through shared memory unless STEPSCOPE_ALLREDUCE=mpi (on every
    // rank; the ranks agree, since making the window is collective).
    if (state.local_size == state.size && state.size > 1) {
      const char* choice = std::getenv("STEPSCOPE_ALLREDUCE");
      int shared = !(choice && std::string_view(choice) == "mpi");
      MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MIN, comm);
      if (shared) mpi_backend->use_shared_memory(SharedMemoryAllreduce::create(comm));
    }
    set_collective_backend(mpi_backend);
    state.clock = estimate_clock_offset(control, state.rank, state.size);
  }
#endif
  state.initialized = true;
  static bool registered = false;
  if (!std::exchange(registered, true)) std::atexit(shutdown_at_exit);
}

void shutdown() {
  std::lock_guard lock(state_mutex);
  if (!state.initialized) return;
  set_collective_backend(nullptr);
#ifdef STEPSCOPE_HAVE_MPI
  if (mpi_backend) {
    if (!mpi_backend->meet(state.shutdown_timeout_secs)) {
      std::fprintf(stderr,
                   "stepscope dist: rank %d is shutting down, but not every rank reached dist::shutdown within "
                   "%g s (another rank is still in a step, maybe waiting for this one in a collective): aborting the "
                   "job\n",
                   state.rank, state.shutdown_timeout_secs);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mpi_backend->release_shared_memory();
    MPI_Comm comm = mpi_backend->comm(), control = mpi_backend->control();
    mpi_backend.reset();
    MPI_Comm_free(&comm);
    MPI_Comm_free(&control);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (state.started_mpi && !finalized) MPI_Finalize();
#endif
  state = State{};
}

bool initialized() {
  std::lock_guard lock(state_mutex);
  return state.initialized;
}
int rank() {
  std::lock_guard lock(state_mutex);
  return state.rank;
}
int size() {
  std::lock_guard lock(state_mutex);
  return state.size;
}
int local_rank() {
  std::lock_guard lock(state_mutex);
  return state.local_rank;
}
int local_size() {
  std::lock_guard lock(state_mutex);
  return state.local_size;
}
std::string describe() { return collective_backend().describe(); }
ClockOffset clock_offset() {
  std::lock_guard lock(state_mutex);
  return state.clock;
}

void barrier() {
#ifdef STEPSCOPE_HAVE_MPI
  std::shared_ptr<MpiBackend> backend;
  {
    std::lock_guard lock(state_mutex);
    backend = mpi_backend;
  }
  if (backend) backend->barrier();
#endif
}

}  // namespace stepscope::dist
