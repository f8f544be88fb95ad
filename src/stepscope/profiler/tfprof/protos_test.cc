#include "stepscope/profiler/tfprof/protos.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace stepscope {
namespace {

TEST(InputShapes, EntriesComeBackInOrderWithTheirDims) {
  InputShapes shapes;
  EXPECT_TRUE(shapes.empty());
  EXPECT_EQ(shapes.begin(), shapes.end());
  const std::vector<int64_t> matrix{32, 8};
  shapes.add(0, matrix);
  shapes.add(1, {});  // an unknown shape
  shapes.add(3, std::vector<int64_t>{1});
  EXPECT_FALSE(shapes.empty());
  EXPECT_EQ(shapes.size(), 3u);
  std::vector<int32_t> indices;
  std::vector<std::vector<int64_t>> dims;
  for (const auto& [index, d] : shapes) {
    indices.push_back(index);
    dims.emplace_back(d.begin(), d.end());
  }
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(dims, (std::vector<std::vector<int64_t>>{{32, 8}, {}, {1}}));
  EXPECT_EQ(shapes.at(0), matrix);
  EXPECT_TRUE(shapes.at(1).empty());
  EXPECT_EQ(std::distance(shapes.begin(), shapes.end()), 3);
  EXPECT_TRUE(shapes.contains(3));
  EXPECT_FALSE(shapes.contains(2));
}

TEST(InputShapes, AtAnInputWithoutAShapeThrowsNamingIt) {
  const InputShapes shapes{{0, {4}}};
  try {
    shapes.at(2);
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "no input shape for input 2");
  }
}

TEST(InputShapes, EqualWhenTheSameEntries) {
  InputShapes built;
  built.reserve(2, 3);
  built.add(0, std::vector<int64_t>{2, 3});
  built.add(1, std::vector<int64_t>{3});
  EXPECT_EQ(built, (InputShapes{{0, {2, 3}}, {1, {3}}}));
  EXPECT_NE(built, (InputShapes{{0, {2}}, {1, {3, 3}}}));  // the same numbers, split otherwise
  EXPECT_NE(built, (InputShapes{{0, {2, 3}}, {2, {3}}}));
  built.clear();
  EXPECT_TRUE(built.empty());
  EXPECT_EQ(built, InputShapes());
}

TEST(InputShapes, JsonIsAnObjectKeyedByTheInputIndex) {
  GraphNodeProto node;
  node.name = "add";
  node.input_shapes = {{0, {2, 3}}, {1, {}}};
  const std::string json = to_json(node);
  EXPECT_NE(json.find("\"input_shapes\":{\"0\":[2,3],\"1\":[]}"), std::string::npos) << json;
}

TEST(DeviceList, OneCopyOfEachNameThatStaysWhereItIs) {
  const std::span<const std::string> cpu = device_list("/job:localhost/replica:0/task:0/device:CPU:0");
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(cpu[0], "/job:localhost/replica:0/task:0/device:CPU:0");
  const std::span<const std::string> gpu = device_list("/job:localhost/replica:0/task:0/device:GPU:0");
  EXPECT_EQ(gpu[0], "/job:localhost/replica:0/task:0/device:GPU:0");
  EXPECT_NE(gpu.data(), cpu.data());
  for (int i = 0; i < 1000; ++i) device_list("/job:worker/replica:0/task:" + std::to_string(i) + "/device:CPU:0");
  EXPECT_EQ(device_list(std::string("/job:localhost/replica:0/task:0/device:CPU:0")).data(), cpu.data());
  EXPECT_EQ(cpu[0], "/job:localhost/replica:0/task:0/device:CPU:0");  // not moved by the names that came after
}

// In a child process: the bound, once reached, stays for the rest of the process.
TEST(DeviceListDeathTest, KeepsABoundedNumberOfNames) {
  EXPECT_EXIT(
      {
        const std::span<const std::string> first = device_list("/job:bounded/replica:0/task:0/device:CPU:0");
        for (size_t i = 0; i < kMaxDeviceNames; ++i) device_list("/job:hostile/task:" + std::to_string(i));
        const bool bounded = device_list("/job:one/more")[0] == kTooManyDeviceNames &&
                             device_list("/job:and/another").data() == device_list("/job:one/more").data();
        // Names kept before the bound still have their own list.
        const bool kept = device_list("/job:bounded/replica:0/task:0/device:CPU:0").data() == first.data();
        std::fprintf(stderr, "bounded %d kept %d\n", bounded, kept);
        std::exit(bounded && kept ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "bounded 1 kept 1");
}

TEST(DeviceList, JsonWritesTheNodesDevicesAsAnArray) {
  GraphNodeProto node;
  node.name = "add";
  EXPECT_NE(to_json(node).find("\"devices\":[]"), std::string::npos);
  node.devices = device_list("/device:CPU:0");
  EXPECT_NE(to_json(node).find("\"devices\":[\"/device:CPU:0\"]"), std::string::npos) << to_json(node);
}

}  // namespace
}  // namespace stepscope
