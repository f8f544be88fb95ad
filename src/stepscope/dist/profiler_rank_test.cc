// The profiler sees a distributed step: the collective ops are traced like any op (with their
// FLOPs, the MPI call and the bytes sent), and in a job of several processes each rank's timeline
// records its rank.
#include <gtest/gtest.h>

#include <filesystem>

#include "stepscope/base/file_io.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/temp_dir.h"
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
  const std::string args = "\"algorithm\":\"" + std::string(n == 1 ? "none (one process)" : "MPI_Allreduce") +
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

}  // namespace
}  // namespace stepscope
