// The profiler sees a distributed step: the collective ops are traced like any op (with their
// FLOPs, the MPI call and the bytes sent), and in a job of several processes each rank's timeline
// records its rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "stepscope/base/file_io.h"
#include "stepscope/dist/distributed_optimizer.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/collective_ops.h"
#include "stepscope/profiler/tfprof/format.h"
#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/tools/tools_test_util.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

TEST(DistProfiler, TimelinesShowTheCollectivesAndTheRank) {
  const int r = dist::rank(), n = dist::size();
  testing::TempDir dir;
  Graph g;
  Scope root(g);
  Variable step = get_or_create_global_step(root);
  Output y = allreduce(root.with_op_name("grads"), constant(root, Tensor::from_vector(std::vector<float>(120, 1.0f))));
  Node* train = assign_add(root.with_control_dependencies({y.node}), step.value(), constant(root, int64_t{1})).node;
  ProfilerHook profiler({.save_steps = 1, .output_dir = dir.path(), .save_run_metadata = false, .save_profile = false});
  {
    MonitoredSession sess = MonitoredTrainingSession(g, {.hooks = {&profiler}, .log_step_count_steps = 0});
    for (int i = 0; i < 3; ++i) sess.run(train);
    sess.close();
  }
  std::string trace;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().filename().string().starts_with("timeline-")) trace = read_file(entry.path());
  ASSERT_FALSE(trace.empty()) << "no timeline in " << dir.path();
  EXPECT_NE(trace.find("\"args\":{\"name\":\"grads\",\"op\":\"Allreduce\""), std::string::npos) << trace;
  // 120 floats: 480 bytes; an allreduce sends 2 (n - 1) / n of them from each rank.
  const std::string args = "\"algorithm\":\"" +
                           std::string(n == 1 ? "none (one process)" : collective_backend().allreduce_algorithm()) +
                           "\",\"ranks\":" + std::to_string(n) +
                           ",\"bytes_moved\":" + std::to_string(2 * (n - 1) * 480 / n);
  EXPECT_NE(trace.find(args), std::string::npos) << args << " not in " << trace;
  if (n == 1) {
    EXPECT_EQ(trace.find("\"metadata\""), std::string::npos);
  } else {
    EXPECT_NE(trace.find("\"metadata\":{\"rank\":" + std::to_string(r) + ",\"size\":" + std::to_string(n)),
              std::string::npos);
    EXPECT_NE(trace.find(",\"clock_offset_ns\":" + std::to_string(dist::clock_offset().offset_ns) +
                         ",\"clock_offset_error_ns\":" + std::to_string(dist::clock_offset().error_ns) + "}"),
              std::string::npos);
    EXPECT_NE(trace.find("\"flops\":" + std::to_string(120 * (n - 1) / n)), std::string::npos);
  }
}

// A fused Allreduce's event says which inputs went through the fusion buffer and which had an
// MPI_Allreduce of their own (what the kernel did, from the outputs' sizes).
TEST(DistProfiler, TimelinesSayWhichAllreduceInputsWentFused) {
  const int n = dist::size();
  testing::TempDir dir;
  Graph g;
  Scope root(g);
  Variable step = get_or_create_global_step(root);
  Output small = constant(root, Tensor::from_vector(std::vector<float>(10, 1.0f)));
  Output large = constant(root, Tensor::from_vector(std::vector<float>(kAllreduceDirectBytes / 4, 1.0f)));
  std::vector<Output> y = allreduce(root.with_op_name("mixed"), {small, large, small});
  Node* train = assign_add(root.with_control_dependencies({y[0].node}), step.value(), constant(root, int64_t{1})).node;
  ProfilerHook profiler({.save_steps = 1, .output_dir = dir.path(), .save_run_metadata = false, .save_profile = false});
  {
    MonitoredSession sess = MonitoredTrainingSession(g, {.hooks = {&profiler}, .log_step_count_steps = 0});
    for (int i = 0; i < 2; ++i) sess.run(train);
    sess.close();
  }
  std::string trace;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().filename().string().starts_with("timeline-")) trace = read_file(entry.path());
  ASSERT_FALSE(trace.empty()) << "no timeline in " << dir.path();
  const std::string expected =
      n == 1
          ? "\"algorithm\":\"none (one process)\",\"ranks\":1,\"bytes_moved\":0,\"thread_id\""
          : "\"algorithm\":\"" + std::string(collective_backend().allreduce_algorithm()) +
                " (fused buffer for the small inputs, one call per large input)\",\"ranks\":" +
                std::to_string(n) +
                ",\"bytes_moved\":" + std::to_string(2 * (n - 1) * (80 + kAllreduceDirectBytes) / n) +
                ",\"fused_inputs\":[0,2],\"direct_inputs\":[1]";
  EXPECT_NE(trace.find(expected), std::string::npos) << expected << " not in " << trace;
}

// tfprof's op view gives a collective op type's MPI call, ranks and bytes moved (from the
// outputs' bytes it counts), and a saved profile keeps them.
TEST(DistProfiler, TfprofOpViewShowsTheCollectives) {
  const int n = dist::size();
  Graph g;
  Scope root(g);
  Output y = allreduce(root.with_op_name("grads"), constant(root, Tensor::from_vector(std::vector<float>(4096, 1.0f))));
  Session sess(g);
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  sess.run({}, {y}, {}, options, &md);
  Profiler profiler(g);
  profiler.add_step(1, md);
  // No floors: in one process the Allreduce forwards its input (no bytes of its own).
  ProfileOptions o = ProfileOptionBuilder().select({"bytes", "micros", "output_bytes"}).build();
  o.output = "none";
  const MultiGraphProfile ops = profiler.profile_operations(o);
  const MultiGraphNodeProto* allreduce_row = nullptr;
  for (const MultiGraphNodeProto* p = &ops.root; !p->children.empty(); p = &p->children[0])
    if (p->children[0].name == "Allreduce") allreduce_row = &p->children[0];
  ASSERT_NE(allreduce_row, nullptr) << ops.text();
  if (n > 1) {
    EXPECT_GE(allreduce_row->output_bytes, 4096 * 4);
  }
  const std::string line = "\n  collective: " +
                           std::string(n == 1 ? "none (one process)" : collective_backend().allreduce_algorithm()) +
                           ", ranks: " + std::to_string(n) +
                           ", bytes_moved: " + tfprof::format_memory(2 * (n - 1) * allreduce_row->output_bytes / n) +
                           "\n";
  EXPECT_NE(ops.text().find(line), std::string::npos) << line << " not in\n" << ops.text();
  EXPECT_EQ(ops.text().find("collective:"), ops.text().find(line) + 3) << "one collective op type, one line";
  // Saved and read back (the 'C' chunk), in a process that need not be part of the job.
  Profiler back = Profiler::parse(profiler.serialize_to_string(), "profile");
  EXPECT_NE(back.profile_operations(o).text().find(line), std::string::npos);
}

// End to end: every rank's ProfilerHook writes its timeline of a training step with a fused
// Allreduce, and `stepscope merge` makes one valid trace of them with every rank's group and a
// straggler report naming the collective. The ranks share a directory named after the mpirun job.
TEST(DistProfiler, TheRanksTimelinesMergeIntoOneValidTrace) {
  const int r = dist::rank(), n = dist::size();
  const char* job = std::getenv("PMIX_NAMESPACE");
  const std::filesystem::path shared =
      std::filesystem::temp_directory_path() /
      ("stepscope_dist_merge_" + (job ? std::string(job) : "pid" + std::to_string(::getpid())));
  const std::filesystem::path mine = shared / ("rank" + std::to_string(r));
  std::filesystem::remove_all(mine);
  {
    Graph g;
    Scope root(g);
    Variable step = get_or_create_global_step(root);
    Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{8, 4});
    Output h = nn::dense(root.with_name_scope("dense"), x, 3, nn::Activation::relu, {.seed = 1});
    GradientDescentOptimizer sgd(0.1);
    Node* train = DistributedOptimizer(sgd).minimize(root, reduce_mean(root, h), step);
    ProfilerHook profiler(
        {.save_steps = 2, .output_dir = mine.string(), .save_run_metadata = false, .save_profile = false});
    MonitoredSession sess = MonitoredTrainingSession(g, {.hooks = {&profiler}, .log_step_count_steps = 0});
    Tensor xs(DType::kFloat32, Shape{8, 4});
    for (float& v : xs.flat<float>()) v = 0.25f * (r + 1);
    for (int i = 0; i < 3; ++i) sess.run(train, {{x, xs}});
    sess.close();
  }
  dist::barrier();  // every rank's timeline is written
  if (r == 0) {
    std::vector<std::string> files;
    for (int k = 0; k < n; ++k) files.push_back((shared / ("rank" + std::to_string(k)) / "timeline-2.json").string());
    const std::string out = (shared / "job.json").string();
    const testing::CliResult merged = testing::cli([&] {
      std::vector<std::string> args = {"merge", "--stragglers", "-o", out};
      args.insert(args.end(), files.begin(), files.end());
      return args;
    }());
    EXPECT_EQ(merged.code, 0) << merged.err;
    std::printf("%s", merged.out.c_str());  // the straggler report, for whoever reads the log
    const std::string trace = read_file(out);
    for (const TraceProblem& p : validate_chrome_trace(trace))
      if (!p.warning) ADD_FAILURE() << p.rule << ": " << p.message;
    for (int k = 0; k < n; ++k)
      EXPECT_NE(trace.find("\"rank " + std::to_string(k) + ": "), std::string::npos) << "rank " << k;
    if (n > 1) {
      EXPECT_NE(merged.out.find("DistributedOptimizer/Allreduce  rank "), std::string::npos) << merged.out;
    } else {
      EXPECT_NE(merged.out.find("no collective ran on two ranks or more"), std::string::npos) << merged.out;
    }
  }
  dist::barrier();  // rank 0 has read them
  if (r == 0) std::filesystem::remove_all(shared);
}

}  // namespace
}  // namespace stepscope
