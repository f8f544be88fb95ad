// Device and DeviceSet: the host CPU behind the executor, placement by the Scope's device, and
// the error for a device type nobody registered.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "stepscope/core/allocator.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/runtime/device_set.h"
#include "stepscope/runtime/executor_test_util.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

using ::testing::HasSubstr;
using namespace stepscope::testing;

TEST(Device, SessionStartsWithTheHostCpu) {
  Graph g;
  Session sess(g);
  const auto devices = sess.device_set().devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0]->name(), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(devices[0]->device_type(), "CPU");
  EXPECT_EQ(devices[0]->index(), 0);
  EXPECT_EQ(devices[0]->allocator(), cpu_allocator());
  EXPECT_EQ(sess.device_set().host(), devices[0]);
}

TEST(Device, CpuDeviceRunsTheOpsCpuKernel) {
  CpuDevice cpu(3);
  EXPECT_EQ(cpu.name(), "/job:localhost/replica:0/task:0/device:CPU:3");
  EXPECT_EQ(cpu.kernel_for(add_one_op()), add_one_op().kernel);
}

TEST(Device, OtherCpuIndicesAreMadeWhenANodeIsPlacedThere) {
  Graph g;
  Scope s(g);
  auto a = add_one(s.with_device("/cpu:1"), constant(s, Tensor::from_vector<float>({1})));
  Session sess(g);
  EXPECT_EQ(sess.run(a).scalar_value<float>(), 2.0f);
  const auto devices = sess.device_set().devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1]->name(), "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_EQ(devices[1]->allocator(), cpu_allocator());
}

// No GPU device in this build: Scope::with_device refuses "/gpu:0" (as before the Device
// abstraction), and a node that names an unregistered device type gets an error naming it.
TEST(Device, GpuPlacementWithoutAGpuDeviceIsAnInvalidArgument) {
  Graph g;
  Scope s(g);
  EXPECT_THROW(s.with_device("/gpu:0"), InvalidArgumentError);
  try {
    s.with_device("/device:GPU:0");
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'/device:GPU:0': no GPU device is registered"));
  }
  auto a = add_one(s.with_op_name("layer/add"), constant(s, Tensor::from_vector<float>({1})));
  DeviceSet set;
  try {
    set.device_for(*a.node, "/job:localhost/replica:0/task:0/device:GPU:0");
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer/add"));
    EXPECT_THAT(e.what(), HasSubstr("no GPU device is registered"));
    EXPECT_THAT(e.what(), HasSubstr("/job:localhost/replica:0/task:0/device:GPU:0"));
  }
  EXPECT_EQ(set.find("/job:localhost/replica:0/task:0/device:GPU:0"), nullptr);
  EXPECT_EQ(set.devices().size(), 1u);  // nothing made for it
}

TEST(Device, NamesAreUnique) {
  DeviceSet set;
  EXPECT_THROW(set.add(std::make_unique<CpuDevice>(0)), InvalidArgumentError);
  EXPECT_NE(set.add(std::make_unique<CpuDevice>(5)), nullptr);
}

// The kernel a node runs comes from its device, resolved once per plan.
class DoublingCpu final : public Device {
 public:
  DoublingCpu() : Device("CPU", 7, cpu_allocator()) {}
  KernelFn kernel_for(const OpDef& op) const override {
    if (&op != &add_one_op()) return nullptr;
    return [](KernelContext& c) {
      auto in = c.input(0).flat<float>();
      auto out = c.allocate_output(0, DType::kFloat32, c.input(0).shape()).flat<float>();
      for (size_t i = 0; i < in.size(); ++i) out[i] = 2 * in[i];
    };
  }
};

TEST(Device, TheKernelComesFromTheDevice) {
  Graph g;
  Scope s(g);
  auto x = constant(s.with_device("/cpu:7"), Tensor::from_vector<float>({3}));
  auto a = add_one(s.with_device("/cpu:7"), constant(s, Tensor::from_vector<float>({3})));
  Session sess(g);
  sess.device_set().add(std::make_unique<DoublingCpu>());
  EXPECT_EQ(sess.run(a).scalar_value<float>(), 6.0f);
  try {
    sess.run(x);
    FAIL() << "no error";
  } catch (const UnimplementedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("op has no CPU kernel"));
  }
}

// A device tracer runs beside HARDWARE_TRACE and FULL_TRACE steps only, and adds its devices
// after the step's own.
struct CountingTracer final : DeviceTracer {
  CountingTracer(int* starts, int* stops, int* collects) : starts(starts), stops(stops), collects(collects) {}
  int* starts;
  int* stops;
  int* collects;
  void start() override { ++*starts; }
  void stop() override {
    EXPECT_EQ(*stops, *starts - 1);
    ++*stops;
  }
  void collect(StepStats& step) override {
    ++*collects;
    NodeExecStats ns;
    ns.node_name = StepStats::intern("a:TestAddOne");
    ns.all_start_ns = step.base_ns;
    step.dev_stats().push_back({StepStats::intern("/device:GPU:0/stream:all"), {ns}});
  }
};

TEST(Device, TracersRunBesideHardwareAndFullTraces) {
  Graph g;
  Scope s(g);
  auto a = add_one(s.with_op_name("a"), constant(s, Tensor::from_vector<float>({1})));
  Session sess(g);
  int starts = 0, stops = 0, collects = 0;
  sess.device_set().add_tracer(std::make_unique<CountingTracer>(&starts, &stops, &collects));
  for (TraceLevel level :
       {TraceLevel::kNoTrace, TraceLevel::kSoftwareTrace, TraceLevel::kHardwareTrace, TraceLevel::kFullTrace}) {
    RunOptions options;
    options.trace_level = level;
    RunMetadata md;
    sess.run({}, {a}, {}, options, &md);
    const bool traced = level >= TraceLevel::kHardwareTrace;
    ASSERT_EQ(md.step_stats.dev_stats().size(), traced ? 2u : level == TraceLevel::kNoTrace ? 0u : 1u);
    if (traced) {
      EXPECT_EQ(md.step_stats.dev_stats()[0].device, "/job:localhost/replica:0/task:0/device:CPU:0");
      EXPECT_EQ(md.step_stats.dev_stats()[1].device, "/device:GPU:0/stream:all");
    }
  }
  sess.run(a);  // no RunMetadata: nothing traced
  EXPECT_EQ(starts, 2);
  EXPECT_EQ(stops, 2);
  EXPECT_EQ(collects, 2);
}

}  // namespace
}  // namespace stepscope
