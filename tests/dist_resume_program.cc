// The test dist.resume_from_checkpoint (tests/dist_resume_test.sh) runs this program: data-parallel
// training with MonitoredTrainingSession, checkpoints saved by the chief (rank 0), the data of a
// step a function of its global step (so a job resumed from a checkpoint sees the batches an
// uninterrupted one would). Modes:
//
//   mpirun -np 2 dist_resume_program --checkpoint_dir DIR --last_step N [--fail_at_step K] [--out FILE]
//       trains until global step N (resuming from DIR's latest checkpoint when there is one);
//       with --fail_at_step, rank 1 raises before running global step K (and leaves main with
//       exit code 1): the job must then end with an error, not hang. Rank 0 writes the final
//       variables to FILE, one value a line.
//   dist_resume_program --check_checkpoint DIR
//       loads DIR's latest checkpoint (checksums verified) and prints its global step.
//   dist_resume_program --compare FILE1 FILE2
//       exit code 0 when the two files' values agree within float tolerance.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "stepscope/dist/distributed_optimizer.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/broadcast_global_variables_hook.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/toy_classification.h"
#include "stepscope/train/checkpoint.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/variables.h"

using namespace stepscope;

namespace {

constexpr int64_t kRows = 48, kGlobalBatch = 12, kFeatures = 5;

// Reads the global step when the session is created (after the broadcast hook gave every rank
// rank 0's, restored or initial) and keeps the variables' values as the session ends.
struct StepAndValues : SessionRunHook {
  Output step;
  std::vector<Output> vars;
  int64_t start_step = -1;
  std::vector<Tensor> values;
  void after_create_session(Session& session, Coordinator&) override {
    start_step = session.run({}, {step})[0].scalar_value<int64_t>();
  }
  void end(Session& session) override { values = session.run({}, vars); }
};

int train(const std::string& checkpoint_dir, int64_t last_step, int64_t fail_at_step, const std::string& out) {
  dist::init({.shutdown_timeout_secs = 3});
  const int r = dist::rank(), n = dist::size();
  if (kGlobalBatch % n != 0) throw std::runtime_error("the global batch of 12 does not split over the ranks");
  const int64_t per_rank = kGlobalBatch / n;
  std::vector<float> all_x;
  std::vector<int32_t> all_y;
  testing::toy_classification(kRows, kFeatures, all_x, all_y);  // the same on every rank

  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{per_rank, kFeatures});
  Output y = placeholder(root.with_op_name("y"), DType::kInt32, Shape{per_rank});
  // Every rank starts from different weights: rank 0's (initial or restored) reach the others by
  // the broadcast hook.
  const uint64_t seed = 1 + 100 * static_cast<uint64_t>(r);
  Output hidden = nn::dense(root.with_name_scope("hidden"), x, 8, nn::Activation::relu, {.seed = seed});
  Output logits = nn::dense(root.with_name_scope("logits"), hidden, 3, nn::Activation::none, {.seed = seed + 1});
  Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, y, logits));
  Variable step = get_or_create_global_step(root);
  GradientDescentOptimizer sgd(0.2);
  Node* train_op = DistributedOptimizer(sgd).minimize(root, loss, step);

  BroadcastGlobalVariablesHook bcast(0);
  StepAndValues record;
  record.step = step.value();
  for (const Variable& v : trainable_variables(g)) record.vars.push_back(v.value());
  StopAtStepHook stop({.last_step = last_step});
  MonitoredSession sess = MonitoredTrainingSession(g, {.checkpoint_dir = checkpoint_dir,
                                                       .hooks = {&bcast, &record, &stop},
                                                       .save_checkpoint_steps = 5,
                                                       .log_step_count_steps = 0});
  if (r == 0) std::printf("started at global step %lld\n", static_cast<long long>(record.start_step));
  std::fflush(stdout);
  // The batch of global step s: rows [b * 12, b * 12 + 12) with b = s mod 4, rank r's share of
  // them the r-th slice of 12 / size rows.
  Tensor xs(DType::kFloat32, Shape{per_rank, kFeatures});
  Tensor ys(DType::kInt32, Shape{per_rank});
  for (int64_t s = record.start_step; !sess.should_stop(); ++s) {
    if (r == 1 && s == fail_at_step)
      throw std::runtime_error("failing on purpose before global step " + std::to_string(s) + " (--fail_at_step)");
    const int64_t first = (s % (kRows / kGlobalBatch)) * kGlobalBatch + r * per_rank;
    auto xv = xs.flat<float>();
    auto yv = ys.flat<int32_t>();
    for (int64_t i = 0; i < per_rank; ++i) {
      for (int64_t k = 0; k < kFeatures; ++k) xv[i * kFeatures + k] = all_x[(first + i) * kFeatures + k];
      yv[i] = all_y[first + i];
    }
    sess.run(train_op, {{x, xs}, {y, ys}});
  }
  sess.close();
  if (r == 0) {
    std::printf("finished at global step %lld\n", static_cast<long long>(last_step));
    if (!out.empty()) {
      std::ofstream file(out);
      for (const Tensor& t : record.values)
        for (float v : t.flat<float>())
          file << std::to_string(v) << ' ' << std::hexfloat << v << std::defaultfloat << '\n';
      if (!file) throw std::runtime_error("cannot write " + out);
    }
  }
  std::fflush(stdout);
  dist::shutdown();
  return 0;
}

int check_checkpoint(const std::string& dir) {
  const std::optional<std::string> prefix = latest_checkpoint(dir);
  if (!prefix) {
    std::fprintf(stderr, "no checkpoint in %s\n", dir.c_str());
    return 1;
  }
  const SafetensorsFile file = load_checkpoint(*prefix);  // throws when damaged
  const auto it = file.metadata.find("global_step");
  std::printf("latest checkpoint %s: %zu tensors, global step %s\n", prefix->c_str(), file.tensors.size(),
              it == file.metadata.end() ? "?" : it->second.c_str());
  return 0;
}

std::vector<float> read_values(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot read " + path);
  std::vector<float> values;
  std::string decimal, hex;
  while (file >> decimal >> hex) values.push_back(std::strtof(hex.c_str(), nullptr));
  return values;
}

int compare(const std::string& a, const std::string& b) {
  const std::vector<float> x = read_values(a), y = read_values(b);
  if (x.empty() || x.size() != y.size()) {
    std::fprintf(stderr, "%s has %zu values, %s has %zu\n", a.c_str(), x.size(), b.c_str(), y.size());
    return 1;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::abs(x[i] - y[i]) > 1e-5f * (1 + std::abs(y[i]))) {
      std::fprintf(stderr, "value %zu differs: %.9g in %s, %.9g in %s\n", i, x[i], a.c_str(), y[i], b.c_str());
      return 1;
    }
  }
  std::printf("%zu values agree\n", x.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "--check_checkpoint") return check_checkpoint(args[1]);
    if (args.size() == 3 && args[0] == "--compare") return compare(args[1], args[2]);
    std::string dir, out;
    int64_t last_step = -1, fail_at_step = -1;
    for (size_t i = 0; i + 1 < args.size(); i += 2) {
      if (args[i] == "--checkpoint_dir")
        dir = args[i + 1];
      else if (args[i] == "--last_step")
        last_step = std::atoll(args[i + 1].c_str());
      else if (args[i] == "--fail_at_step")
        fail_at_step = std::atoll(args[i + 1].c_str());
      else if (args[i] == "--out")
        out = args[i + 1];
      else
        throw std::invalid_argument("unknown argument " + args[i]);
    }
    if (dir.empty() || last_step <= 0 || args.size() % 2 != 0)
      throw std::invalid_argument(
          "usage: dist_resume_program --checkpoint_dir DIR --last_step N [--fail_at_step K] [--out FILE] | "
          "--check_checkpoint DIR | --compare FILE1 FILE2");
    return train(dir, last_step, fail_at_step, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d failed: %s\n", dist::rank(), e.what());
    return 1;  // dist::shutdown runs at exit
  }
}
