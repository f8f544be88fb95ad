// The MetaGraphDef: byte by byte for a tiny graph (file-formats.md A5) and, for a graph with
// variables and collections, through protoc --decode_raw, an independent decoder.
#include "stepscope/train/meta_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "stepscope/base/file_io.h"
#include "stepscope/base/version.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/protoc.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/train/graph_def.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

using ::testing::ElementsAre;
using testing::ProtoText;

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// meta_info_def 1 { stripped_op_list 2 { op 1 { name 1: "NoOp" } } tensorflow_version 5 }
// graph_def 2 { <the GraphDef of graph_def_test's BytesOfATinyGraph> }, no collection.
TEST(MetaGraphDef, BytesOfATinyGraph) {
  Graph graph;
  Scope root(graph);
  no_op(root.with_op_name("n"));
  const std::string version = "stepscope " STEPSCOPE_VERSION;
  ASSERT_LT(version.size(), 100u);
  std::string info =
      std::string("\x12\x08\x0a\x06\x0a\x04NoOp", 10) + "\x2a" + static_cast<char>(version.size()) + version;
  const std::string graph_def = graph_def_binary(graph);  // 62 bytes: see graph_def_test
  ASSERT_EQ(graph_def.size(), 62u);
  const std::string expected = "\x0a" + std::string(1, static_cast<char>(info.size())) + info + "\x12\x3e" + graph_def;
  EXPECT_EQ(meta_graph_def_binary(graph), expected);
}

TEST(MetaGraphDef, ProtocDecodesGraphAndCollections) {
  Graph graph;
  Scope root(graph);
  get_or_create_global_step(root);
  Variable w = make_variable(root, "w", constant(root.with_op_name("w_init"), 1.5f));
  global_variables_initializer(root);
  Output loss = square(root.with_op_name("loss"), w);
  graph.add_to_collection(kUpdateOps, loss.node);
  const std::string bytes = meta_graph_def_binary(graph);

  // The raw structure: meta_info_def 1, graph_def 2, then one collection_def 4 per collection.
  std::optional<std::string> raw = testing::protoc_decode_raw(bytes);
  if (!raw) GTEST_SKIP() << testing::kNoProtoc;
  std::vector<std::string> top;
  for (const ProtoText& f : testing::parse_proto_text(*raw).children) top.push_back(f.key);
  EXPECT_THAT(top, ElementsAre("1", "2", "4", "4", "4", "4", "4"));

  const ProtoText meta = testing::parse_proto_text(*testing::protoc_decode(bytes, "tensorflow.MetaGraphDef"));
  // meta_info_def: the op types used, sorted, and stepscope's version.
  const ProtoText& info = meta.one("meta_info_def");
  std::vector<std::string> ops;
  for (const ProtoText* op : info.one("stripped_op_list").all("op")) ops.push_back(op->one("name").value);
  EXPECT_THAT(ops,
              ElementsAre(quoted("Assign"), quoted("Const"), quoted("NoOp"), quoted("Square"), quoted("VariableV2")));
  EXPECT_EQ(info.one("tensorflow_version").value, quoted("stepscope " STEPSCOPE_VERSION));
  EXPECT_TRUE(meta.all("saver_def").empty());

  // graph_def: every node, by name, in order.
  std::vector<std::string> names, expected_names;
  for (const ProtoText* node : meta.one("graph_def").all("node")) names.push_back(node->one("name").value);
  for (const auto& node : graph.nodes()) expected_names.push_back(quoted(node->name()));
  EXPECT_EQ(names, expected_names);

  // collection_def, by key: variables as VariableDefs, the others as node lists.
  std::vector<std::string> keys;
  std::map<std::string, const ProtoText*> collections;
  for (const ProtoText* entry : meta.all("collection_def")) {
    keys.push_back(entry->one("key").value);
    collections[entry->one("key").value] = &entry->one("value");
  }
  EXPECT_THAT(keys, ElementsAre(quoted(kGlobalStepCollection), quoted(kTrainableVariables), quoted(kUpdateOps),
                                quoted(kVariableInitializers), quoted(kGlobalVariables)));
  EXPECT_EQ(collections[quoted(kGlobalStepCollection)]->one("node_list").one("value").value, quoted("global_step:0"));
  EXPECT_EQ(collections[quoted(kUpdateOps)]->one("node_list").one("value").value, quoted("loss:0"));
  std::vector<std::string> initializers;
  for (const ProtoText* v : collections[quoted(kVariableInitializers)]->one("node_list").all("value"))
    initializers.push_back(v->value);
  EXPECT_THAT(initializers, ElementsAre(quoted("global_step/Assign:0"), quoted("w/Assign:0")));
  const ProtoText& def = collections[quoted(kTrainableVariables)]->one("bytes_list").one("value");
  EXPECT_EQ(def.one("variable_name").value, quoted("w:0"));
  EXPECT_EQ(def.one("initial_value_name").value, quoted("w_init:0"));
  EXPECT_EQ(def.one("initializer_name").value, quoted("w/Assign"));
  EXPECT_EQ(def.one("snapshot_name").value, quoted("w:0"));
  EXPECT_EQ(def.one("trainable").value, "true");
  std::vector<const ProtoText*> globals = collections[quoted(kGlobalVariables)]->one("bytes_list").all("value");
  ASSERT_EQ(globals.size(), 2u);
  EXPECT_EQ(globals[0]->one("variable_name").value, quoted("global_step:0"));
  EXPECT_TRUE(globals[0]->all("trainable").empty());  // false: not written
}

TEST(MetaGraphDef, ExportWritesTheBytes) {
  Graph graph;
  Scope root(graph);
  get_or_create_global_step(root);
  testing::TempDir dir;
  export_meta_graph(graph, dir / "model.ckpt-0.meta");
  EXPECT_EQ(read_file(dir / "model.ckpt-0.meta"), meta_graph_def_binary(graph));
  EXPECT_THAT(dir.entries(), ElementsAre("model.ckpt-0.meta"));
}

}  // namespace
}  // namespace stepscope
