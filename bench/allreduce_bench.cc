// Issue 18's allreduce figure: the fused path DistributedOptimizer builds (one Allreduce op over
// K gradient tensors: the ranks' agreement check, then inputs under 64 KiB packed into one buffer
// and reduced in one call, bigger ones each reduced in place on their own; on one host the calls
// go through dist's shared-memory window) against a bare MPI_Allreduce of one buffer of the same
// total size. Run under mpirun (STEPSCOPE_ALLREDUCE=mpi and -x STEPSCOPE_ALLREDUCE: the op on
// MPI_Allreduce too):
//
//   mpirun -np 2 build/allreduce_bench [--rounds 15] [--json] [--case TOTAL_KIB:TENSORS]
//
// The op is timed four ways: its own time in a traced run with owned inputs (made in the step
// for it alone, as gradients are in training: reduced where their producers wrote them), once
// averaging as DistributedOptimizer does and once summing as the bare call does (on
// MPI_Allreduce the average is one more pass over the data, dividing it); the same with held inputs (Consts it must leave
// alone: copied into a fusion buffer and out to new outputs); and a whole Session::run of the
// held case. For each total size (64 KiB .. 64 MiB of float32) and tensor count K, rounds
// alternate the five (each round: a few repetitions of each, the median kept), and rank 0 prints
// the medians and the throughput ratios bare / fused (target ≥ 0.9). One rank: MPI_Allreduce on
// one process.
//
// Each time is given two ways. "Own" is rank 0's time in the op (or call), which includes waiting
// for a rank that reached it later: in a Session::run the ranks arrive at the op at different
// times (the executor's own work differs between them), while back-to-back bare calls keep them
// in step. "From the last arrival" is the time from the moment the last rank entered the op (or
// call) to the moment the last rank left it (the ranks share one steady clock on one host): the
// collective's own cost, without the ranks' imbalance before it. Ranks on several hosts have no
// common steady clock, so there the second way is left out (n/a, null in --json).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "stepscope/base/clock.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/collective_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

// When one timed thing started and ended on this rank, in steady-clock nanoseconds.
struct Interval {
  int64_t start_ns;
  int64_t end_ns;
};

static_assert(sizeof(Interval) == 2 * sizeof(int64_t), "gathered as two MPI_INT64_T each");

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct Case {
  int64_t total_floats;
  int tensors;
};

// One fused Allreduce over `tensors` tensors, in a session of its own. Its inputs are either
// held (Consts: the op must leave them as they are, so it writes new outputs) or owned (each made
// in the step by a Neg and read by the Allreduce alone, as gradients are in training: the op
// reduces them in their own buffers).
struct FusedAllreduce {
  Graph graph;
  std::vector<Output> outputs;
  std::unique_ptr<Session> session;

  FusedAllreduce(const Case& c, bool owned, ReduceOp op = ReduceOp::kAverage) {
    Scope root(graph);
    std::vector<Output> inputs;
    const int64_t each = c.total_floats / c.tensors;
    for (int t = 0; t < c.tensors; ++t) {
      Output value = constant(root.with_op_name("g" + std::to_string(t)),
                              Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(each), 1.0f)));
      inputs.push_back(owned ? neg(root.with_op_name("grad" + std::to_string(t)), value) : value);
    }
    outputs = allreduce(root.with_op_name("fused"), inputs, op);
    session = std::make_unique<Session>(graph, SessionOptions{.inter_op_threads = 1});
    session->run({}, outputs);  // the plan and the buffers, outside the timing
  }
  void run() { session->run({}, outputs); }
  // When the Allreduce op's kernel started and ended (from a traced run's StepStats).
  Interval op_interval() {
    RunOptions options;
    options.trace_level = TraceLevel::kSoftwareTrace;
    RunMetadata metadata;
    session->run({}, outputs, {}, options, &metadata);
    for (const auto& dev : metadata.step_stats.dev_stats())
      for (const auto& ns : dev.node_stats)
        if (ns.node_name == "fused")
          return {ns.all_start_ns + ns.op_start_rel_ns, ns.all_start_ns + ns.op_end_rel_ns};
    std::fprintf(stderr, "allreduce_bench: the traced run has no node \"fused\"\n");
    std::exit(1);
  }
};

}  // namespace
}  // namespace stepscope

int main(int argc, char** argv) {
  using namespace stepscope;
  int rounds = 15;
  bool json = false;
  std::vector<Case> only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--case" && i + 1 < argc) {  // one case, TOTAL_KIB:TENSORS (profiling)
      long long kib = 0;
      int tensors = 0;
      if (std::sscanf(argv[++i], "%lld:%d", &kib, &tensors) != 2 || kib <= 0 || tensors <= 0) {
        std::fprintf(stderr, "--case wants TOTAL_KIB:TENSORS, e.g. 64:8\n");
        return 2;
      }
      only.push_back({kib * 256, tensors});
    } else {
      std::fprintf(stderr, "usage: mpirun -np N allreduce_bench [--rounds R] [--json] [--case TOTAL_KIB:TENSORS]...\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  dist::init();
  int mpi_started = 0;
  MPI_Initialized(&mpi_started);
  if (!mpi_started) {  // dist::init starts MPI only in a process mpirun started
    std::fprintf(stderr, "allreduce_bench: run it under mpirun (mpirun -np 2 allreduce_bench ...; -np 1 for one rank)\n");
    return 2;
  }
  const bool chief = dist::rank() == 0;
  const bool one_host = dist::local_size() == dist::size();  // one steady clock for every rank
  if (chief && !json)
    std::printf(
        "allreduce over %d ranks (%s), float32, median of %d rounds\n"
        "Throughput ratios are bare / fused (target ≥ 0.9). The op: its own time in a traced run, averaging (as\n"
        "DistributedOptimizer does) unless it says sum (as the bare call does), with inputs held (Consts, left as\n"
        "they are) or owned (made in the step for it alone, as gradients are); the run: a whole Session::run of\n"
        "the held case. Own: rank 0's time, waits for later ranks included; from the last arrival: from the last\n"
        "rank's entry to the last rank's exit.\n"
        "| total | tensors | bare MPI_Allreduce (sum), own | op, owned | op, owned, sum | op, held | run, held "
        "| ratio own: owned | owned sum | held op | held run "
        "| from the last arrival: bare | owned | owned sum | ratio: owned | owned sum |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        dist::size(), dist::describe().c_str(), rounds);
  std::vector<Case> cases = {{16 << 10, 1}, {16 << 10, 8}, {256 << 10, 1}, {256 << 10, 8}, {256 << 10, 64},
                             {4 << 20, 1},  {4 << 20, 8},  {4 << 20, 64},  {16 << 20, 16}};
  if (!only.empty()) cases = only;
  // The median over rounds of each round's median, of rank 0's own time and of the time from the
  // last rank's arrival.
  struct Timing {
    std::vector<double> own, from_last_arrival;
    double own_s() const { return median(own); }
    double from_last_arrival_s() const { return median(from_last_arrival); }
  };
  for (const Case& c : cases) {
    FusedAllreduce held(c, false), owned(c, true), owned_sum(c, true, ReduceOp::kSum);
    std::vector<float> buffer(static_cast<size_t>(c.total_floats), 1.0f);
    const int reps = c.total_floats >= (4 << 20) ? 3 : 20;
    Timing held_runs, held_ops, owned_ops, owned_sum_ops, bares;
    const auto timed = [&](Timing& timing, const std::function<Interval()>& once) {
      dist::barrier();
      std::vector<Interval> mine;
      for (int i = 0; i < reps; ++i) mine.push_back(once());
      std::vector<Interval> all(mine.size() * static_cast<size_t>(dist::size()));  // rank-major
      MPI_Allgather(mine.data(), 2 * reps, MPI_INT64_T, all.data(), 2 * reps, MPI_INT64_T, MPI_COMM_WORLD);
      std::vector<double> own, span;
      for (int i = 0; i < reps; ++i) {
        own.push_back(static_cast<double>(mine[i].end_ns - mine[i].start_ns) * 1e-9);
        int64_t last_start = 0, last_end = 0;
        for (int r = 0; r < dist::size(); ++r) {
          last_start = std::max(last_start, all[static_cast<size_t>(r * reps + i)].start_ns);
          last_end = std::max(last_end, all[static_cast<size_t>(r * reps + i)].end_ns);
        }
        span.push_back(static_cast<double>(last_end - last_start) * 1e-9);
      }
      timing.own.push_back(median(own));
      timing.from_last_arrival.push_back(median(span));
    };
    for (int r = 0; r < rounds; ++r) {
      timed(held_runs, [&] {
        const int64_t t0 = now_ns();
        held.run();
        return Interval{t0, now_ns()};
      });
      timed(held_ops, [&] { return held.op_interval(); });
      timed(owned_ops, [&] { return owned.op_interval(); });
      timed(owned_sum_ops, [&] { return owned_sum.op_interval(); });
      timed(bares, [&] {
        const int64_t t0 = now_ns();
        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(c.total_floats), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        return Interval{t0, now_ns()};
      });
    }
    const double run = held_runs.own_s(), held_op = held_ops.own_s(), owned_op = owned_ops.own_s(),
                 owned_sum_op = owned_sum_ops.own_s(), bare = bares.own_s();
    const double bare_last = bares.from_last_arrival_s(), owned_last = owned_ops.from_last_arrival_s(),
                 owned_sum_last = owned_sum_ops.from_last_arrival_s();
    const double mb = static_cast<double>(c.total_floats) * 4 / (1 << 20);
    char last_json[256] = "null", last_text[256] = "| n/a | n/a | n/a | n/a | n/a |";
    if (one_host) {
      std::snprintf(last_json, sizeof last_json,
                    "{\"bare_s\":%.9f,\"owned_op_s\":%.9f,\"owned_sum_op_s\":%.9f,\"ratio_owned_op\":%.4f,"
                    "\"ratio_owned_sum_op\":%.4f}",
                    bare_last, owned_last, owned_sum_last, bare_last / owned_last, bare_last / owned_sum_last);
      std::snprintf(last_text, sizeof last_text, "| %.1f µs | %.1f µs | %.1f µs | %.3f | %.3f |", bare_last * 1e6,
                    owned_last * 1e6, owned_sum_last * 1e6, bare_last / owned_last, bare_last / owned_sum_last);
    }
    if (chief) {
      if (json)
        std::printf(
            "{\"ranks\":%d,\"total_bytes\":%lld,\"tensors\":%d,\"bare_s\":%.9f,\"owned_op_s\":%.9f,"
            "\"owned_sum_op_s\":%.9f,\"held_op_s\":%.9f,\"held_run_s\":%.9f,\"ratio_owned_op\":%.4f,"
            "\"ratio_owned_sum_op\":%.4f,\"ratio_held_op\":%.4f,\"ratio_held_run\":%.4f,"
            "\"from_last_arrival\":%s}\n",
            dist::size(), static_cast<long long>(c.total_floats * 4), c.tensors, bare, owned_op, owned_sum_op,
            held_op, run, bare / owned_op, bare / owned_sum_op, bare / held_op, bare / run, last_json);
      else
        std::printf(
            "| %.2f MiB | %d | %.1f µs | %.1f µs | %.1f µs | %.1f µs | %.1f µs | %.3f | %.3f | %.3f | %.3f %s\n", mb,
            c.tensors, bare * 1e6, owned_op * 1e6, owned_sum_op * 1e6, held_op * 1e6, run * 1e6, bare / owned_op,
            bare / owned_sum_op, bare / held_op, bare / run, last_text);
      std::fflush(stdout);
    }
  }
  dist::shutdown();
  return 0;
}
