// Issue 18's allreduce figure: the fused path DistributedOptimizer builds (one Allreduce op over
// K gradient tensors: the ranks' agreement check, then inputs under 64 KiB copied into one buffer
// and reduced in one MPI_Allreduce, bigger ones each copied into its output already averaged and
// reduced in place there) against a bare MPI_Allreduce of one buffer of the same total size. Run
// under mpirun:
//
//   mpirun -np 2 build/allreduce_bench [--rounds 15] [--json]
//
// For each total size (64 KiB .. 64 MiB of float32) and tensor count K, rounds alternate the two
// (each round: a few repetitions of each, the median kept), and rank 0 prints the medians and
// the throughput ratio bare / fused (target ≥ 0.9). One rank: MPI_Allreduce on one process.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "stepscope/dist/mpi.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/collective_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct Case {
  int64_t total_floats;
  int tensors;
};

// One fused Allreduce over `tensors` variables' values, in a session of its own.
struct FusedAllreduce {
  Graph graph;
  std::vector<Output> outputs;
  std::unique_ptr<Session> session;

  explicit FusedAllreduce(const Case& c) {
    Scope root(graph);
    std::vector<Output> inputs;
    const int64_t each = c.total_floats / c.tensors;
    for (int t = 0; t < c.tensors; ++t)
      inputs.push_back(constant(root.with_op_name("g" + std::to_string(t)),
                                Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(each), 1.0f))));
    outputs = allreduce(root.with_op_name("fused"), inputs, ReduceOp::kAverage);
    session = std::make_unique<Session>(graph, SessionOptions{.inter_op_threads = 1});
    session->run({}, outputs);  // the plan and the buffers, outside the timing
  }
  void run() { session->run({}, outputs); }
};

}  // namespace
}  // namespace stepscope

int main(int argc, char** argv) {
  using namespace stepscope;
  int rounds = 15;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: mpirun -np N allreduce_bench [--rounds R] [--json]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  dist::init();
  const bool chief = dist::rank() == 0;
  if (chief && !json)
    std::printf(
        "allreduce over %d ranks (%s), float32, median of %d rounds\n"
        "| total | tensors | fused Allreduce op | bare MPI_Allreduce | fused throughput / bare (target ≥ 0.9) |\n"
        "|---|---|---|---|---|\n",
        dist::size(), dist::describe().c_str(), rounds);
  const std::vector<Case> cases = {{16 << 10, 1},   {16 << 10, 8}, {256 << 10, 1}, {256 << 10, 8},
                                   {256 << 10, 64}, {4 << 20, 8},  {4 << 20, 64},  {16 << 20, 16}};
  for (const Case& c : cases) {
    FusedAllreduce fused(c);
    std::vector<float> buffer(static_cast<size_t>(c.total_floats), 1.0f);
    const int reps = c.total_floats >= (4 << 20) ? 3 : 20;
    std::vector<double> fused_times, bare_times;
    for (int r = 0; r < rounds; ++r) {
      dist::barrier();
      std::vector<double> f, b;
      for (int i = 0; i < reps; ++i) {
        const double t0 = seconds_now();
        fused.run();
        f.push_back(seconds_now() - t0);
      }
      dist::barrier();
      for (int i = 0; i < reps; ++i) {
        const double t0 = seconds_now();
        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(c.total_floats), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        b.push_back(seconds_now() - t0);
      }
      fused_times.push_back(median(f));
      bare_times.push_back(median(b));
    }
    const double tf = median(fused_times), tb = median(bare_times);
    const double mb = static_cast<double>(c.total_floats) * 4 / (1 << 20);
    if (chief) {
      if (json)
        std::printf(
            "{\"ranks\":%d,\"total_bytes\":%lld,\"tensors\":%d,\"fused_s\":%.9f,\"bare_s\":%.9f,\"ratio\":%.4f}\n",
            dist::size(), static_cast<long long>(c.total_floats * 4), c.tensors, tf, tb, tb / tf);
      else
        std::printf("| %.2f MiB | %d | %.1f µs | %.1f µs | %.3f |\n", mb, c.tensors, tf * 1e6, tb * 1e6, tb / tf);
      std::fflush(stdout);
    }
  }
  dist::shutdown();
  return 0;
}
