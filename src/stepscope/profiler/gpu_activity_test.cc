// GPU activity records (as CUPTI reports them) → the step's StepStats: TensorFlow's three GPU
// devices, names and labels of its GPU tracer, times on the step's clock. Recorded records, no
// GPU: the neutral GpuActivity values, and CUPTI's own structs filled by hand where the CUDA
// headers are installed.
#include "stepscope/profiler/gpu_activity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "stepscope/profiler/cupti_records.h"

namespace stepscope {
namespace {

GpuActivity kernel(uint32_t stream, uint32_t correlation, int64_t start, int64_t end, std::string name) {
  GpuActivity a;
  a.kind = GpuActivityKind::kKernel;
  a.stream_id = stream;
  a.correlation_id = correlation;
  a.start_ns = start;
  a.end_ns = end;
  a.name = std::move(name);
  a.grid[0] = 4, a.grid[1] = 1, a.grid[2] = 1;
  a.block[0] = 256, a.block[1] = 1, a.block[2] = 1;
  a.registers_per_thread = 32;
  a.static_shared_memory = 128;
  return a;
}

GpuActivity copy(uint32_t stream, uint32_t correlation, int64_t start, int64_t end, GpuCopyKind kind, uint64_t bytes) {
  GpuActivity a;
  a.kind = GpuActivityKind::kMemcpy;
  a.stream_id = stream;
  a.correlation_id = correlation;
  a.start_ns = start;
  a.end_ns = end;
  a.copy_kind = kind;
  a.bytes = bytes;
  a.async = true;
  return a;
}

const DeviceStepStats* device(const StepStats& st, std::string_view name) {
  for (const auto& d : st.dev_stats())
    if (d.device == name) return &d;
  return nullptr;
}

std::vector<std::string> device_names(const StepStats& st) {
  std::vector<std::string> out;
  for (const auto& d : st.dev_stats()) out.emplace_back(d.device);
  return out;
}

TEST(GpuActivity, TensorFlowsThreeDevicesNamesAndLabels) {
  GpuCorrelationMap launches;
  launches.add(10, "dense/MatMul", "MatMul", 7, /*launch_ns=*/900, /*thread_id=*/3);
  launches.add(11, "dense/BiasAdd", "BiasAdd", 8, 950, 3);
  launches.add(12, "x/_copy", "Identity", 2, 100, 4);
  const std::vector<GpuActivity> records = {
      kernel(13, 11, 2'000, 2'400, "void bias_add<float>(float*, float const*, int)"),
      kernel(7, 10, 1'000, 1'800, "volta_sgemm_128x64_nn"), copy(7, 12, 200, 700, GpuCopyKind::kHtoD, 4096),
      kernel(7, 99, 3'000, 3'050, "orphan_kernel"),  // no op launched it that we know of
  };
  StepStats st;
  st.dev_stats().push_back({StepStats::intern("/job:localhost/replica:0/task:0/device:CPU:0"), {}});
  add_gpu_activity(st, records, launches, /*gpu_to_step_ns=*/1'000'000);

  EXPECT_THAT(device_names(st),
              ::testing::ElementsAre("/job:localhost/replica:0/task:0/device:CPU:0", "/device:GPU:0/stream:all",
                                     "/device:GPU:0/stream:7", "/device:GPU:0/stream:13", "/device:GPU:0/memcpy"));
  // stream:all: every kernel, in start order; no copies.
  const DeviceStepStats* all = device(st, "/device:GPU:0/stream:all");
  ASSERT_EQ(all->node_stats.size(), 3u);
  const NodeExecStats& mm = all->node_stats[0];
  EXPECT_EQ(mm.node_name, "dense/MatMul:MatMul");
  EXPECT_EQ(mm.op_type, "MatMul");
  EXPECT_EQ(mm.node_id, 7);
  EXPECT_EQ(mm.timeline_label, "volta_sgemm_128x64_nn regs:32 shm:128 grid:4,1,1 block:256,1,1@@dense/MatMul:MatMul");
  EXPECT_EQ(mm.all_start_ns, 1'001'000);  // on the step's clock
  EXPECT_EQ(mm.op_start_rel_ns, 0);
  EXPECT_EQ(mm.op_end_rel_ns, 800);
  EXPECT_EQ(mm.all_end_rel_ns, 800);
  EXPECT_EQ(mm.scheduled_ns, 900);
  EXPECT_EQ(mm.thread_id, 3u);
  EXPECT_EQ(all->node_stats[1].node_name, "dense/BiasAdd:BiasAdd");
  EXPECT_THAT(std::string(all->node_stats[1].timeline_label),
              ::testing::StartsWith("void bias_add<float>(float*, float const*, int) regs:32"));
  // Kept under its kernel's name when the correlation id names no op.
  EXPECT_EQ(all->node_stats[2].node_name, "orphan_kernel");
  EXPECT_EQ(all->node_stats[2].node_id, -1);
  EXPECT_THAT(std::string(all->node_stats[2].timeline_label), ::testing::EndsWith("@@"));

  // Per stream: stream 7 has the copy, the MatMul and the orphan; stream 13 the BiasAdd.
  const DeviceStepStats* s7 = device(st, "/device:GPU:0/stream:7");
  ASSERT_EQ(s7->node_stats.size(), 3u);
  EXPECT_EQ(s7->node_stats[0].node_name, "x/_copy:MEMCPYHtoD");
  EXPECT_EQ(s7->node_stats[1].node_name, "dense/MatMul:MatMul");
  EXPECT_EQ(device(st, "/device:GPU:0/stream:13")->node_stats.size(), 1u);
  // The copies.
  const DeviceStepStats* memcpy = device(st, "/device:GPU:0/memcpy");
  ASSERT_EQ(memcpy->node_stats.size(), 1u);
  EXPECT_EQ(memcpy->node_stats[0].node_name, "x/_copy:MEMCPYHtoD");
  EXPECT_EQ(memcpy->node_stats[0].timeline_label, "MEMCPYHtoD 4096 bytes async");
  EXPECT_EQ(memcpy->node_stats[0].all_start_ns, 1'000'200);
  EXPECT_EQ(memcpy->node_stats[0].all_end_rel_ns, 500);
}

TEST(GpuActivity, MemsetsPeerCopiesSeveralGpusAndBadRecords) {
  GpuCorrelationMap launches;
  launches.add(1, "zeros", "Fill");
  std::vector<GpuActivity> records;
  GpuActivity set;
  set.kind = GpuActivityKind::kMemset;
  set.device_id = 1;
  set.stream_id = 2;
  set.correlation_id = 1;
  set.start_ns = 10, set.end_ns = 20;
  set.bytes = 64;
  records.push_back(set);
  GpuActivity peer = copy(2, 5, 30, 40, GpuCopyKind::kPtoP, 8);
  peer.device_id = 1;
  peer.destination_device = 0;
  peer.async = false;
  records.push_back(peer);
  GpuActivity backwards = kernel(2, 1, 50, 40, "k");  // ends before it starts: dropped
  backwards.device_id = 1;
  records.push_back(backwards);
  records.push_back(kernel(3, 1, 5, 6, "on_gpu0"));
  StepStats st;
  add_gpu_activity(st, records, launches, 0);
  EXPECT_THAT(device_names(st), ::testing::ElementsAre("/device:GPU:0/stream:all", "/device:GPU:0/stream:3",
                                                       "/device:GPU:1/stream:2", "/device:GPU:1/memcpy"));
  const DeviceStepStats* s2 = device(st, "/device:GPU:1/stream:2");
  ASSERT_EQ(s2->node_stats.size(), 2u);
  EXPECT_EQ(s2->node_stats[0].node_name, "zeros:MEMSET");
  EXPECT_EQ(s2->node_stats[0].timeline_label, "MEMSET 64 bytes");
  EXPECT_EQ(s2->node_stats[1].node_name, "MEMCPYPtoP");
  EXPECT_EQ(s2->node_stats[1].timeline_label, "MEMCPYPtoP 8 bytes to device:0");
}

TEST(GpuActivity, CorrelationMap) {
  GpuCorrelationMap m;
  EXPECT_EQ(m.find(1), nullptr);
  m.add(1, "a", "Add", 4);
  ASSERT_NE(m.find(1), nullptr);
  EXPECT_EQ(m.find(1)->op_name, "a");
  EXPECT_EQ(m.find(1)->node_id, 4);
  EXPECT_EQ(m.size(), 1u);
  m.clear();
  EXPECT_EQ(m.find(1), nullptr);
}

// CUPTI's own records (cupti_activity.h, CUDA 13), filled by hand as an activity buffer would
// hold them after a step: a kernel, a copy and a memset.
TEST(CuptiRecords, RecordedKernelCopyAndMemsetBecomeTheStepsGpuDevices) {
#if !defined(STEPSCOPE_HAVE_CUPTI)
  GTEST_SKIP() << "CUPTI headers (cupti_activity.h) not found at configure time: the adapter is not built";
#else
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 5'000;
  k.end = 6'500;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 7;
  k.correlationId = 42;
  k.gridX = 8, k.gridY = 2, k.gridZ = 1;
  k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 2048;
  k.name = "_Z10add_kernelPfPKfi";  // add_kernel(float*, float const*, int)
  CUpti_ActivityMemcpy6 c;
  std::memset(&c, 0, sizeof c);
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  c.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  c.bytes = 1024;
  c.start = 7'000;
  c.end = 7'300;
  c.streamId = 7;
  c.correlationId = 43;
  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 256;
  s.start = 4'000;
  s.end = 4'100;
  s.streamId = 7;
  s.correlationId = 41;
  CUpti_Activity other;
  std::memset(&other, 0, sizeof other);
  other.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;

  std::vector<GpuActivity> records;
  for (const CUpti_Activity* r :
       {reinterpret_cast<const CUpti_Activity*>(&k), reinterpret_cast<const CUpti_Activity*>(&c),
        reinterpret_cast<const CUpti_Activity*>(&s), static_cast<const CUpti_Activity*>(&other)})
    if (auto a = gpu_activity_from_cupti(*r)) records.push_back(*a);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].kind, GpuActivityKind::kKernel);
  EXPECT_EQ(records[0].name, "add_kernel(float*, float const*, int)");
  EXPECT_EQ(records[0].context_id, 1u);
  EXPECT_EQ(records[1].copy_kind, GpuCopyKind::kDtoH);
  EXPECT_TRUE(records[1].async);
  EXPECT_EQ(records[2].kind, GpuActivityKind::kMemset);
  EXPECT_EQ(records[2].bytes, 256u);

  GpuCorrelationMap launches;
  launches.add(41, "y/zeros", "Fill", 3);
  launches.add(42, "y/add", "Add", 4);
  launches.add(43, "y/_fetch", "Identity", 5);
  StepStats st;
  add_gpu_activity(st, records, launches, -4'000);
  EXPECT_THAT(device_names(st),
              ::testing::ElementsAre("/device:GPU:0/stream:all", "/device:GPU:0/stream:7", "/device:GPU:0/memcpy"));
  const NodeExecStats& add = st.dev_stats()[0].node_stats.at(0);
  EXPECT_EQ(add.node_name, "y/add:Add");
  EXPECT_EQ(add.timeline_label,
            "add_kernel(float*, float const*, int) regs:40 shm:2048 grid:8,2,1 block:128,1,1@@y/add:Add");
  EXPECT_EQ(add.all_start_ns, 1'000);
  EXPECT_EQ(add.all_end_rel_ns, 1'500);
  ASSERT_EQ(st.dev_stats()[1].node_stats.size(), 3u);
  EXPECT_EQ(st.dev_stats()[1].node_stats[0].node_name, "y/zeros:MEMSET");
  EXPECT_EQ(st.dev_stats()[2].node_stats.at(0).timeline_label, "MEMCPYDtoH 1024 bytes async");
#endif
}

}  // namespace
}  // namespace stepscope
