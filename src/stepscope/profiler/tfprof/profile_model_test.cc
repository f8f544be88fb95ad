// ProfileModel's own rules (the views' tests cover what they show of it).
#include "stepscope/profiler/tfprof/profile_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope::tfprof {
namespace {

using testing::model_of;

// order_by_name sorts on packed 16-byte prefixes first: it must still give std::string's order
// where names share 16 bytes or more, end inside them, or hold bytes above 0x7f.
TEST(ProfileModel, OrderByNameIsTheStringOrder) {
  const std::vector<std::string> names = {
      "block12/Add_3",        "block1/Add",           "a",
      "abcdefghijklmnopq",    "abcdefghijklmnop",     "abcdefghijklmnopA",
      "abcdefghijklmnopz/x",  "abcdefgh",             "abcdefgh/",
      "Z",                    "\xc3\xa9t\xc3\xa9",    "e-x",
      "e/x",                  "e0",                   "",
      std::string("a\0b", 3), "gradients/long/scope/name/Add_1", "gradients/long/scope/name/Add"};
  const ProfileModel model = model_of(names);
  std::vector<std::string> got;
  for (int32_t i : model.order_by_name()) got.push_back(model.nodes[i].name);
  std::vector<std::string> expected = names;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected);
}

// A model synced with two graphs of the same names in turn gives its nodes each graph's inputs
// (kept in one array: the replaced ones are dropped on the way, the nodes' kept).
TEST(ProfileModel, NodesTakeTheInputsOfTheGraphSyncedLast) {
  using testing::add_node;
  using testing::test_op;
  // a -> b -> c in one, a -> c and b -> c (and b as a control input) in the other.
  Graph chain, fan;
  Node* a = add_node(chain, "a", "Const");
  Node* b = add_node(chain, "b", "Identity", {a});
  add_node(chain, "c", "Identity", {b});
  Node* a2 = add_node(fan, "a", "Const");
  Node* b2 = add_node(fan, "b", "Const");
  NodeSpec c2;
  c2.name = "c";
  c2.op = &test_op("Add");
  c2.inputs = {a2->output(0), b2->output(0)};
  c2.control_inputs = {b2};
  fan.add_node(std::move(c2));
  ProfileModel model;
  const auto inputs_of = [&](const char* name) {
    std::vector<std::pair<std::string, int32_t>> got;  // (producer, slot)
    for (const ModelInput& in : model.inputs_of(model.nodes[model.find(name)]))
      got.emplace_back(model.nodes[in.node].name, in.slot);
    return got;
  };
  using Inputs = std::vector<std::pair<std::string, int32_t>>;
  for (int round = 0; round < 5; ++round) {
    model.sync_graph(chain);
    EXPECT_EQ(inputs_of("a"), Inputs{});
    EXPECT_EQ(inputs_of("b"), (Inputs{{"a", 0}}));
    EXPECT_EQ(inputs_of("c"), (Inputs{{"b", 0}}));
    model.sync_graph(fan);
    EXPECT_EQ(inputs_of("b"), Inputs{});
    EXPECT_EQ(inputs_of("c"), (Inputs{{"a", 0}, {"b", 0}, {"b", -1}}));
  }
  EXPECT_EQ(model.nodes.size(), 3u);
}

}  // namespace
}  // namespace stepscope::tfprof
