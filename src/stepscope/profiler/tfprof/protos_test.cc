#include "stepscope/profiler/tfprof/protos.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <nlohmann/json.hpp>

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

// A chain of `depth` nodes below `root`, named "n1", "n2", ... by their depth.
template <typename Node>
void add_chain(Node& root, int depth) {
  Node* node = &root;
  for (int i = 1; i <= depth; ++i) {
    node = &node->children.emplace_back();
    node->name = "n" + std::to_string(i);
  }
}

// The depth of a chain, and the name of its last node.
template <typename Node>
std::pair<int, std::string> depth_and_last(const Node& root) {
  const Node* node = &root;
  int depth = 0;
  for (; !node->children.empty(); ++depth) {
    EXPECT_EQ(node->children.size(), 1u);
    node = &node->children[0];
  }
  return {depth, node->name};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// As deep as a view of a 200,000-op chain (or the op view of as many op types): copying,
// writing JSON and freeing recursed once per level and overflowed the stack.
constexpr int kDeep = 200000;

TEST(GraphNodeProtoTree, ChainDeeperThanTheStackCopiesAndWritesJson) {
  GraphNodeProto root;
  root.name = "root";
  add_chain(root, kDeep);
  root.children[0].input_shapes = {{0, {2, 3}}};
  root.children[0].total_float_ops = 7;

  const GraphNodeProto copy(root);
  EXPECT_EQ(depth_and_last(copy), std::make_pair(kDeep, std::string("n200000")));
  EXPECT_EQ(copy.children[0].input_shapes, root.children[0].input_shapes);
  EXPECT_EQ(copy.children[0].total_float_ops, 7);
  GraphNodeProto assigned;
  assigned.name = "before";
  add_chain(assigned, 3);
  assigned = root;
  EXPECT_EQ(depth_and_last(assigned), std::make_pair(kDeep, std::string("n200000")));
  assigned = assigned.children[0];  // a node's own descendant
  EXPECT_EQ(assigned.name, "n1");
  EXPECT_EQ(depth_and_last(assigned), std::make_pair(kDeep - 1, std::string("n200000")));

  const std::string json = to_json(root);
  EXPECT_EQ(json.rfind("{\"name\":\"root\",", 0), 0u);
  EXPECT_EQ(count(json, "\"children\":["), static_cast<size_t>(kDeep) + 1);
  EXPECT_EQ(json.find("\"name\":\"n200000\""), json.rfind("\"name\":"));
  EXPECT_EQ(json.substr(json.size() - 2 * (kDeep + 1)), [] {
    std::string ends;
    for (int i = 0; i <= kDeep; ++i) ends += "]}";
    return ends;
  }());
}

TEST(GraphNodeProtoTree, JsonOfSiblingsAndChildren) {
  GraphNodeProto root;
  root.name = "root";
  root.children.resize(2);
  root.children[0].name = "a";
  root.children[1].name = "b";
  root.children[1].children.resize(2);
  root.children[1].children[0].name = "b/x";
  root.children[1].children[1].name = "b/y";
  const auto j = nlohmann::json::parse(to_json(root));
  ASSERT_EQ(j["children"].size(), 2u);
  EXPECT_EQ(j["children"][0]["name"], "a");
  EXPECT_TRUE(j["children"][0]["children"].empty());
  EXPECT_EQ(j["children"][1]["children"][1]["name"], "b/y");
}

TEST(MultiGraphNodeProtoTree, ChainDeeperThanTheStackCopiesAndWritesJson) {
  MultiGraphNodeProto root;
  root.name = "root";
  add_chain(root, kDeep);
  root.children[0].graph_nodes.resize(2);
  root.children[0].graph_nodes[1].name = "an/add";
  add_chain(root.children[0].graph_nodes[1], 2);
  root.children[0].total_exec_micros = 9;

  MultiGraphNodeProto copy(root);
  EXPECT_EQ(depth_and_last(copy), std::make_pair(kDeep, std::string("n200000")));
  ASSERT_EQ(copy.children[0].graph_nodes.size(), 2u);
  EXPECT_EQ(copy.children[0].graph_nodes[1].name, "an/add");
  EXPECT_EQ(depth_and_last(copy.children[0].graph_nodes[1]), std::make_pair(2, std::string("n2")));
  EXPECT_EQ(copy.children[0].total_exec_micros, 9);
  copy = copy.children[0];
  EXPECT_EQ(depth_and_last(copy), std::make_pair(kDeep - 1, std::string("n200000")));

  const std::string json = to_json(root);
  EXPECT_EQ(count(json, "\"children\":["), static_cast<size_t>(kDeep) + 1 + 1 + 3);  // and the graph nodes' chains
  EXPECT_NE(json.find("\"graph_nodes\":[{\"name\":\"\","), std::string::npos);

  MultiGraphNodeProto small;
  small.name = "root";
  add_chain(small, 2);
  small.children.emplace_back().name = "sibling";
  small.children[0].graph_nodes.resize(1);
  const auto j = nlohmann::json::parse(to_json(small));
  ASSERT_EQ(j["children"].size(), 2u);
  EXPECT_EQ(j["children"][0]["children"][0]["name"], "n2");
  EXPECT_EQ(j["children"][0]["graph_nodes"].size(), 1u);
  EXPECT_EQ(j["children"][1]["name"], "sibling");
}

}  // namespace
}  // namespace stepscope
