// The stepscope side of the model suite (BENCHMARKS.md "Model suite"; bench/compare_models.py
// runs it beside bench/pytorch_models.py). A plain program, one model per run:
//
//   model_bench --model lenet [--threads 2] [--steps N] [--warmup W]
//     builds the model (bench/models.h), runs W warm-up steps, times N steps one by one and
//     prints one JSON line: model, side, threads, median_ms, min_ms, steps, page_faults_per_step
//     (minor faults over the timed steps / N), max_rss_kib (peak RSS of the process),
//     flops_per_step, parameters, loss (after the last step; null when not finite).
//   mpirun -np 2 model_bench --model mlp --distributed ...
//     the same, data-parallel: DistributedOptimizer averages the gradients over the ranks (each
//     its own batch); rank 0 prints the line, with "ranks".
//   model_bench --list
//     one JSON line per model: name, description, default_steps, flops_per_step, parameters.
//   model_bench --gemm-peak [--size 1024] [--repeats 5]
//     the machine's single-core sgemm rate: a 1024^3 MatMul in a one-node Session on one
//     thread, best of the repeats, as {"gemm_peak_gflops": ..., "openblas_core": ...}.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "models.h"
#include "stepscope/base/error.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/blas.h"
#include "stepscope/ops/linalg_ops.h"

namespace stepscope::bench {
namespace {

struct Usage {
  int64_t minor_faults;
  int64_t max_rss_kib;
};

Usage usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_minflt, u.ru_maxrss};
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// JSON string contents: the names and descriptions here are plain ASCII without quotes.
std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

int run_model(const ModelEntry& entry, int threads, int steps, int warmup) {
  auto model = entry.build();
  Session session(model->g, {.inter_op_threads = threads, .intra_op_threads = threads});
  session.run(model->init);
  for (int i = 0; i < warmup; ++i) session.run(model->feeds, {}, {model->train});
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(steps));
  const Usage before = usage();
  for (int i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    session.run(model->feeds, {}, {model->train});
    ms.push_back(ms_since(start));
  }
  const Usage after = usage();
  const float loss = session.run(model->loss, model->feeds).flat<float>()[0];
  // What a traced step of the model keeps until it is read (a flight recorder's ring holds that
  // a step): its recorded stream's bytes a node. Outside the timing and the usage figures.
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  RunMetadata metadata;
  session.run(model->feeds, {}, {model->train}, traced, &metadata);
  const double recorded_bytes_per_node = static_cast<double>(metadata.step_stats.num_recorded_bytes()) /
                                         static_cast<double>(std::max<size_t>(1, metadata.step_stats.num_recorded_nodes()));
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  // The median: the middle step, or the mean of the two middle ones.
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  if (dist::rank() != 0) return 0;  // a data-parallel job: rank 0 speaks for it
  std::printf(
      "{\"model\": %s, \"side\": \"stepscope\", \"ranks\": %d, \"threads\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, "
      "\"steps\": %d, \"page_faults_per_step\": %.2f, \"max_rss_kib\": %lld, \"flops_per_step\": %.0f, "
      "\"parameters\": %lld, \"recorded_bytes_per_node\": %.1f, \"loss\": %s}\n",
      quoted(entry.name).c_str(), dist::size(), threads, median, sorted.front(), steps,
      static_cast<double>(after.minor_faults - before.minor_faults) / steps, static_cast<long long>(after.max_rss_kib),
      model->flops_per_step, static_cast<long long>(model->parameters), recorded_bytes_per_node,
      std::isfinite(loss) ? std::to_string(loss).c_str() : "null");
  return 0;
}

int list_models() {
  for (const ModelEntry& entry : bench_models()) {
    auto model = entry.build();
    std::printf(
        "{\"name\": %s, \"description\": %s, \"default_steps\": %d, \"flops_per_step\": %.0f, \"parameters\": %lld}\n",
        quoted(entry.name).c_str(), quoted(entry.description).c_str(), entry.default_steps, model->flops_per_step,
        static_cast<long long>(model->parameters));
  }
  return 0;
}

int gemm_peak(int64_t size, int repeats) {
  Tensor a(DType::kFloat32, Shape{size, size}), b(DType::kFloat32, Shape{size, size});
  for (float& v : a.flat<float>()) v = 0.5f;
  for (float& v : b.flat<float>()) v = 0.25f;
  Graph g;
  Scope root(g);
  Output product = matmul(root, constant(root, a), constant(root, b));
  Session session(g, {.inter_op_threads = 1, .intra_op_threads = 1});
  session.run(product);  // warm-up: the primitive's JIT code, the output's pages
  double best_ms = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    session.run(product);
    const double ms = ms_since(start);
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  const double gflops = 2.0 * static_cast<double>(size) * size * size / (best_ms * 1e6);
  std::printf(
      "{\"gemm_peak_gflops\": %.2f, \"size\": %lld, \"best_ms\": %.3f, \"repeats\": %d, \"openblas_core\": %s}\n",
      gflops, static_cast<long long>(size), best_ms, repeats, quoted(blas::core_name()).c_str());
  return 0;
}

int usage_error(const char* message) {
  std::fprintf(stderr,
               "model_bench: %s\n"
               "usage: model_bench --model NAME [--threads T] [--steps N] [--warmup W] [--distributed] [--json]\n"
               "       model_bench --list\n"
               "       model_bench --gemm-peak [--size S] [--repeats R]\n"
               "models:",
               message);
  for (const ModelEntry& entry : bench_models())
    std::fprintf(stderr, " %.*s", static_cast<int>(entry.name.size()), entry.name.data());
  std::fprintf(stderr, "\n");
  return 2;
}

int main_impl(int argc, char** argv) {
  std::string model_name;
  int threads = 1, steps = 0, warmup = -1, repeats = 5;
  int64_t size = 1024;
  bool list = false, peak = false, distributed = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    auto number = [&](auto& out) {
      const char* v = value();
      if (!v) return false;
      char* end = nullptr;
      const long long parsed = std::strtoll(v, &end, 10);
      if (*end != '\0' || parsed < 0) return false;
      out = static_cast<std::remove_reference_t<decltype(out)>>(parsed);
      return true;
    };
    if (arg == "--model") {
      const char* v = value();
      if (!v) return usage_error("--model needs a name");
      model_name = v;
    } else if (arg == "--threads") {
      if (!number(threads) || threads < 1) return usage_error("--threads needs a number >= 1");
    } else if (arg == "--steps") {
      if (!number(steps) || steps < 1) return usage_error("--steps needs a number >= 1");
    } else if (arg == "--warmup") {
      if (!number(warmup)) return usage_error("--warmup needs a number >= 0");
    } else if (arg == "--size") {
      if (!number(size) || size < 1) return usage_error("--size needs a number >= 1");
    } else if (arg == "--repeats") {
      if (!number(repeats) || repeats < 1) return usage_error("--repeats needs a number >= 1");
    } else if (arg == "--distributed") {
      distributed = true;
    } else if (arg == "--json") {
      // The only output format; accepted for symmetry with bench/pytorch_models.py.
    } else if (arg == "--list") {
      list = true;
    } else if (arg == "--gemm-peak") {
      peak = true;
    } else if (arg == "--help" || arg == "-h") {
      usage_error("benchmarks one model's training step");
      return 0;
    } else {
      return usage_error(("unknown argument " + arg).c_str());
    }
  }
  if (list) return list_models();
  if (peak) return gemm_peak(size, repeats);
  if (model_name.empty()) return usage_error("--model, --list or --gemm-peak is needed");
  const ModelEntry* entry = find_bench_model(model_name);
  if (!entry) return usage_error(("unknown model " + model_name).c_str());
  if (steps == 0) steps = entry->default_steps;
  if (warmup < 0) warmup = std::max(2, steps / 5);
  if (distributed) {
    dist::init();
    set_distributed_training(true);
  }
  const int rc = run_model(*entry, threads, steps, warmup);
  if (distributed) dist::shutdown();
  return rc;
}

}  // namespace
}  // namespace stepscope::bench

int main(int argc, char** argv) {
  try {
    return stepscope::bench::main_impl(argc, argv);
  } catch (const stepscope::Error& e) {
    std::fprintf(stderr, "model_bench: %s\n", e.what());
    return 1;
  }
}
