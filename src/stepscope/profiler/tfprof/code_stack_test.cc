// The code view as TensorFlow's tree of call sites: each node's creation stack (captured by the
// Graph, symbolised by the profiler) is a path from the root, outermost frame first.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/symbolizer.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/testing/temp_dir.h"

// The user's code: outside namespace stepscope (without debug info, the symboliser tells the
// library's frames by their namespace), not inlined, and no tail calls (the asm after each call),
// so each function keeps its frame.
__attribute__((noinline)) stepscope::Output stack_test_layer(const stepscope::Scope& s, stepscope::Output x) {
  stepscope::Output y = stepscope::square(s, x);  // kLayerLine
  asm volatile("" ::: "memory");
  return y;
}
constexpr int kLayerLine = __LINE__ - 4;

__attribute__((noinline)) stepscope::Output stack_test_model(const stepscope::Scope& s, stepscope::Output x) {
  stepscope::Output h = stack_test_layer(s.with_name_scope("first"), x);
  asm volatile("" ::: "memory");
  stepscope::Output y = stack_test_layer(s.with_name_scope("second"), h);
  asm volatile("" ::: "memory");
  return y;
}

namespace stepscope {
namespace {

// "file:line:function" -> "function".
std::string function_of(const std::string& trace) {
  const size_t first = trace.find(':');
  const size_t second = first == std::string::npos ? first : trace.find(':', first + 1);
  return second == std::string::npos ? trace : trace.substr(second + 1);
}

// The path of names from the root's child to the entry holding `node`; empty when absent.
bool path_to(const MultiGraphNodeProto& p, const std::string& node, std::vector<std::string>& path) {
  for (const GraphNodeProto& g : p.graph_nodes)
    if (g.name == node) return true;
  for (const MultiGraphNodeProto& c : p.children) {
    path.push_back(c.name);
    if (path_to(c, node, path)) return true;
    path.pop_back();
  }
  return false;
}

// Whether the build gave the frame its file and line (debug info: the project's -g1).
bool has_line_tables(const std::string& trace) { return trace.rfind("??:", 0) != 0; }

int depth_of(const MultiGraphNodeProto& p) {
  int d = 0;
  for (const MultiGraphNodeProto& c : p.children) d = std::max(d, 1 + depth_of(c));
  return d;
}

void collect_names(const MultiGraphNodeProto& p, std::vector<std::string>& out) {
  for (const MultiGraphNodeProto& c : p.children) {
    out.push_back(c.name);
    collect_names(c, out);
  }
}

class CodeStackTest : public ::testing::Test {
 protected:
  explicit CodeStackTest(bool capture = true) {
    graph_.set_capture_call_stacks(capture);
    Scope root(graph_);
    Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{4});
    stack_test_model(root.with_name_scope("model"), x);
  }
  MultiGraphProfile code(ProfileOptionBuilder b = ProfileOptionBuilder()) const {
    Profiler profiler(graph_);
    std::ostringstream log;
    profiler.set_log(&log);
    return profiler.profile_code(b.with_empty_output().select({"float_ops"}).build());
  }
  Graph graph_;
};

TEST_F(CodeStackTest, NodesCarryTheirStacks) {
  const Node* square = graph_.find_node("model/first/Square");
  ASSERT_NE(square, nullptr);
  EXPECT_GE(square->call_stack().size(), 5u);
  // The two calls of the layer (two lines of stack_test_model) are two stacks; the
  // nodes of one call share theirs.
  EXPECT_NE(square->call_stack_id(), graph_.find_node("model/second/Square")->call_stack_id());
  ASSERT_EQ(symbolize_address(0).size(), 1u);
  EXPECT_EQ(symbolize_address(0)[0].function, "");
}

TEST_F(CodeStackTest, TreeOfCallSitesOutermostFirst) {
  MultiGraphProfile p = code();
  for (const char* node : {"model/first/Square", "model/second/Square"}) {
    std::vector<std::string> path;
    ASSERT_TRUE(path_to(p.root, node, path)) << p.text();
    ASSERT_GE(path.size(), 4u) << p.text();
    // ... -> the fixture's constructor -> stack_test_model -> stack_test_layer -> the stepscope
    // function called.
    const size_t n = path.size();
    EXPECT_EQ(function_of(path[n - 4]), "CodeStackTest") << p.text();
    EXPECT_EQ(function_of(path[n - 3]), "stack_test_model") << p.text();
    // The innermost user frame has the exact line of the call (std::source_location's).
    EXPECT_EQ(path[n - 2], "code_stack_test.cc:" + std::to_string(kLayerLine) + ":stack_test_layer") << p.text();
    EXPECT_NE(path[n - 1].find("square"), std::string::npos) << p.text();  // the API called
    // main is the outermost frame; nothing of the C library before it.
    EXPECT_EQ(function_of(path[0]), "main") << p.text();
  }
  std::vector<std::string> first, second;
  path_to(p.root, "model/first/Square", first);
  path_to(p.root, "model/second/Square", second);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::vector(first.begin(), first.end() - 3), std::vector(second.begin(), second.end() - 3));
  if (has_line_tables(first[first.size() - 3])) {
    // The two calls of stack_test_layer are two lines of stack_test_model: two frames.
    EXPECT_EQ(first[first.size() - 3].rfind("code_stack_test.cc:", 0), 0u);
    EXPECT_NE(first[first.size() - 3], second[second.size() - 3]);
  } else {
    // Without line tables a frame is "??:0:function": the two calls are one frame.
    EXPECT_EQ(first, second);
  }
  // Totals over subtrees: the root counts both squares' float ops.
  EXPECT_EQ(p.root.total_float_ops, 8);
  // The text is tfprof's: two spaces of indentation per frame.
  EXPECT_NE(p.text().find("\n" + std::string(2 * first.size(), ' ') + first.back() + " ("), std::string::npos)
      << p.text();
}

TEST_F(CodeStackTest, MaxDepthCountsFrames) {
  const MultiGraphProfile all = code();
  const int full = depth_of(all.root);
  ASSERT_GE(full, 4);
  for (int max_depth : {1, 2, 3}) {
    MultiGraphProfile p = code(std::move(ProfileOptionBuilder().with_max_depth(max_depth)));
    EXPECT_EQ(depth_of(p.root), max_depth - 1) << p.text();  // the root is depth 1, as in TensorFlow
    EXPECT_EQ(p.root.total_float_ops, all.root.total_float_ops);
  }
}

TEST_F(CodeStackTest, StartAndTrimNameRegexes) {
  MultiGraphProfile p = code(std::move(ProfileOptionBuilder().with_node_names({.start = {{".*:stack_test_model"}}})));
  // A frame is a line: the two lines of stack_test_model that call the layer are two frames (one
  // "??:0:stack_test_model" without line tables), each with its call of the layer below.
  ASSERT_FALSE(p.root.children.empty()) << p.text();
  const size_t calls = has_line_tables(p.root.children[0].name) ? 2 : 1;
  ASSERT_EQ(p.root.children.size(), calls) << p.text();
  for (const MultiGraphNodeProto& c : p.root.children) {
    EXPECT_EQ(function_of(c.name), "stack_test_model");
    ASSERT_EQ(c.children.size(), 1u) << p.text();
    EXPECT_EQ(function_of(c.children[0].name), "stack_test_layer");
  }
  EXPECT_EQ(p.root.total_float_ops, 8);

  // trim: a matching frame and what is below it are not shown (TFCode::PrintScope).
  p = code(std::move(ProfileOptionBuilder().with_node_names({.trim = {{".*:stack_test_layer"}}})));
  std::vector<std::string> names;
  collect_names(p.root, names);
  bool model = false;
  for (const std::string& name : names) {
    EXPECT_NE(function_of(name), "stack_test_layer") << p.text();
    EXPECT_EQ(name.find("square"), std::string::npos) << p.text();
    model = model || function_of(name) == "stack_test_model";
  }
  EXPECT_TRUE(model) << p.text();

  // show/hide over the frame names: hidden frames' children move up to the shown ancestor.
  p = code(std::move(ProfileOptionBuilder().with_node_names({.show = {{".*:stack_test_.*"}}})));
  names.clear();
  collect_names(p.root, names);
  ASSERT_EQ(p.root.children.size(), calls) << p.text();
  EXPECT_EQ(names.size(), 2 * calls) << p.text();  // each stack_test_model line and the layer's line
  for (const MultiGraphNodeProto& c : p.root.children) {
    EXPECT_EQ(function_of(c.name), "stack_test_model");
    EXPECT_EQ(c.children.size(), 1u) << p.text();
  }
  EXPECT_EQ(p.root.total_float_ops, 8);
  p = code(std::move(ProfileOptionBuilder().with_node_names({.hide = {{".*:stack_test_.*"}}})));
  names.clear();
  collect_names(p.root, names);
  for (const std::string& name : names) EXPECT_EQ(name.find(":stack_test_"), std::string::npos) << p.text();
  EXPECT_EQ(p.root.total_float_ops, 8);
}

TEST_F(CodeStackTest, SavedProfilesKeepTheTree) {
  Profiler profiler(graph_);
  std::ostringstream log;
  profiler.set_log(&log);
  const ProfileOptions o = ProfileOptionBuilder().with_empty_output().select({"float_ops"}).build();
  const MultiGraphProfile before = profiler.profile_code(o);
  const testing::TempDir dir;
  const std::string path = dir / "code_stack_test.profile";
  profiler.save(path);
  Profiler loaded = Profiler::load(path);
  loaded.set_log(&log);
  EXPECT_FALSE(loaded.model().frames.empty());
  const MultiGraphProfile after = loaded.profile_code(o);
  EXPECT_EQ(after.text(), before.text());
  EXPECT_EQ(to_json(after.root), to_json(before.root));
  EXPECT_GE(depth_of(after.root), 4);
}

class CodeStackOffTest : public CodeStackTest {
 protected:
  CodeStackOffTest() : CodeStackTest(false) {}
};

TEST_F(CodeStackOffTest, WithoutStacksTheViewIsFlat) {
  EXPECT_TRUE(graph_.find_node("model/first/Square")->call_stack().empty());
  MultiGraphProfile p = code();
  std::vector<std::string> names;
  collect_names(p.root, names);
  EXPECT_EQ(depth_of(p.root), 1) << p.text();
  const std::string layer = "code_stack_test.cc:" + std::to_string(kLayerLine) + ":stack_test_layer";
  EXPECT_NE(std::find(names.begin(), names.end(), layer), names.end()) << p.text();
  // And a saved profile without stacks (as every profile written before them) reads back flat.
  Profiler profiler(graph_);
  std::ostringstream log;
  profiler.set_log(&log);
  const testing::TempDir dir;
  const std::string path = dir / "code_stack_off_test.profile";
  profiler.save(path);
  Profiler loaded = Profiler::load(path);
  loaded.set_log(&log);
  EXPECT_TRUE(loaded.model().frames.empty());
  EXPECT_EQ(loaded.profile_code(ProfileOptionBuilder().with_empty_output().select({"float_ops"}).build()).text(),
            p.text());
}

}  // namespace
}  // namespace stepscope
