// ProfileModel's own rules (the views' tests cover what they show of it).
#include "stepscope/profiler/tfprof/profile_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace stepscope::tfprof {
namespace {

ProfileModel model_of(const std::vector<std::string>& names) {
  ProfileModel model;
  for (const std::string& name : names) {
    ModelNode node;
    node.name = name;
    node.op = "NoOp";
    model.add_node(std::move(node));
  }
  return model;
}

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

}  // namespace
}  // namespace stepscope::tfprof
