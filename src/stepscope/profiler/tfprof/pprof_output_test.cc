// tfprof's pprof output: the gzipped profile.proto of the code, scope and op views, decoded by
// protoc with pprof's schema (the fields of github.com/google/pprof's proto/profile.proto).
#include "stepscope/testing/temp_dir.h"
#include "stepscope/profiler/tfprof/internal/pprof_output.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "stepscope/base/file_io.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"
#include "stepscope/testing/protoc.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using stepscope::testing::ProtoText;
using tfprof::testing::add_exec;
using tfprof::testing::add_node;
using tfprof::testing::kCpu;

constexpr const char* kProfileProto = R"(syntax = "proto3";
package perftools.profiles;
message Profile {
  repeated ValueType sample_type = 1;
  repeated Sample sample = 2;
  repeated Mapping mapping = 3;
  repeated Location location = 4;
  repeated Function function = 5;
  repeated string string_table = 6;
  int64 drop_frames = 7;
  int64 keep_frames = 8;
  int64 time_nanos = 9;
  int64 duration_nanos = 10;
  ValueType period_type = 11;
  int64 period = 12;
  repeated int64 comment = 13;
  int64 default_sample_type = 14;
}
message ValueType { int64 type = 1; int64 unit = 2; }
message Sample { repeated uint64 location_id = 1; repeated int64 value = 2; repeated Label label = 3; }
message Label { int64 key = 1; int64 str = 2; int64 num = 3; int64 num_unit = 4; }
message Mapping { uint64 id = 1; }
message Location { uint64 id = 1; uint64 mapping_id = 2; uint64 address = 3; repeated Line line = 4; bool is_folded = 5; }
message Line { uint64 function_id = 1; int64 line = 2; }
message Function { uint64 id = 1; int64 name = 2; int64 system_name = 3; int64 filename = 4; int64 start_line = 5; }
)";

// A decoded profile, with its indices resolved.
struct Pprof {
  std::vector<std::string> strings;
  std::vector<std::pair<std::string, std::string>> sample_types;
  struct Sample {
    std::vector<std::string> frames;  // leaf first: "function@file:line"
    std::vector<int64_t> values;
    std::string node;  // the "graph node:" label
  };
  std::map<std::string, Sample> samples;  // by node
  std::vector<std::string> comments;
  std::string default_sample_type;
};

std::string unquote(const std::string& v) { return v.size() >= 2 && v[0] == '"' ? v.substr(1, v.size() - 2) : v; }
int64_t num(const ProtoText& t, std::string_view key) {
  for (const ProtoText* c : t.all(key)) return std::stoll(c->value);
  return 0;
}

std::optional<Pprof> decode(const fs::path& file) {
  const std::string raw = read_file(file, kDefaultMaxDecompressedBytes, Gunzip::kNever);
  EXPECT_TRUE(is_gzip(raw)) << file;
  const std::string bytes = gunzip(raw, file.string());
  const auto text = stepscope::testing::protoc_decode_with_schema(bytes, kProfileProto, "perftools.profiles.Profile");
  if (!text) return std::nullopt;
  const ProtoText tree = stepscope::testing::parse_proto_text(*text);
  Pprof p;
  for (const ProtoText* s : tree.all("string_table")) p.strings.push_back(unquote(s->value));
  auto str = [&](int64_t i) { return i >= 0 && static_cast<size_t>(i) < p.strings.size() ? p.strings[i] : "<bad>"; };
  for (const ProtoText* t : tree.all("sample_type"))
    p.sample_types.emplace_back(str(num(*t, "type")), str(num(*t, "unit")));
  std::map<int64_t, std::string> functions, locations;
  for (const ProtoText* f : tree.all("function")) {
    EXPECT_EQ(num(*f, "name"), num(*f, "system_name"));
    functions[num(*f, "id")] = str(num(*f, "name")) + "@" + str(num(*f, "filename"));
  }
  for (const ProtoText* l : tree.all("location")) {
    const ProtoText& line = l->one("line");
    locations[num(*l, "id")] = functions.at(num(line, "function_id")) + ":" + std::to_string(num(line, "line"));
  }
  // Ids from 1, dense.
  EXPECT_EQ(functions.empty() ? 0 : functions.rbegin()->first, static_cast<int64_t>(functions.size()));
  EXPECT_EQ(locations.empty() ? 0 : locations.rbegin()->first, static_cast<int64_t>(locations.size()));
  for (const ProtoText* s : tree.all("sample")) {
    Pprof::Sample sample;
    for (const ProtoText* id : s->all("location_id")) sample.frames.push_back(locations.at(std::stoll(id->value)));
    for (const ProtoText* v : s->all("value")) sample.values.push_back(std::stoll(v->value));
    const ProtoText& label = s->one("label");
    EXPECT_EQ(str(num(label, "key")), "graph node:");
    sample.node = str(num(label, "str"));
    p.samples[sample.node] = sample;
  }
  for (const ProtoText* c : tree.all("comment")) p.comments.push_back(str(std::stoll(c->value)));
  p.default_sample_type = str(num(tree, "default_sample_type"));
  return p;
}

class PprofOutputTest : public ::testing::Test {
 protected:
  PprofOutputTest() {
    g_.set_capture_call_stacks(false);
    const SourceLocation model{"/home/u/model.cc", 10, "stepscope::Output build_model(stepscope::Scope&)"};
    const SourceLocation train{"/home/u/train.cc", 5, "int main()"};
    Node* w = add_node(g_, "layer/w", "VariableV2", {}, Shape{4, 4}, 0, model);
    Node* mm = add_node(g_, "layer/MatMul", "MatMul", {w}, Shape{4, 4}, 128, model);
    Node* relu = add_node(g_, "layer/act/Relu", "Relu", {mm}, Shape{4, 4}, 16, model);
    Node* loss = add_node(g_, "loss", "Mean", {relu}, Shape(), 16, train);
    g_.add_to_collection("trainable_variables", w);
    RunMetadata md;
    add_exec(md, *w, kCpu, {.start_us = 1000, .duration_us = 3, .requested_bytes = 64});
    add_exec(md, *mm, kCpu, {.start_us = 1010, .duration_us = 40, .requested_bytes = 64});
    add_exec(md, *relu, kCpu, {.start_us = 1060, .duration_us = 7, .requested_bytes = 64});
    add_exec(md, *loss, kCpu, {.start_us = 1070, .duration_us = 5, .requested_bytes = 4});
    profiler_ = std::make_unique<Profiler>(g_);
    profiler_->set_stdout(&out_);
    profiler_->set_log(&log_);
    profiler_->add_step(1, md);
    file_ = fs::path(dir_.path()) / "pprof_output_test.pb.gz";  // a directory of its own: ctest runs tests at once
  }
  ~PprofOutputTest() override { fs::remove(file_); }
  ProfileOptions options(std::vector<std::string> select) {
    return ProfileOptionBuilder().select(select).with_pprof_output(file_.string()).build();
  }
  Graph g_;
  std::unique_ptr<Profiler> profiler_;
  std::ostringstream out_, log_;
  stepscope::testing::TempDir dir_;
  fs::path file_;
};

TEST_F(PprofOutputTest, CodeViewAsTensorFlowWritesIt) {
  profiler_->profile_code(options({"micros"}));
  EXPECT_EQ(log_.str(), "");
  EXPECT_EQ(out_.str(), "\nRun pprof -png --nodecount=100 --sample_index=1 <" + file_.string() + ">\n");
  const auto p = decode(file_);
  if (!p) GTEST_SKIP() << stepscope::testing::kNoProtoc;
  ASSERT_FALSE(p->strings.empty());
  EXPECT_EQ(p->strings[0], "");
  using Types = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p->sample_types, (Types{{"count", "count"}, {"micros", "microseconds"}}));
  EXPECT_EQ(p->comments, std::vector<std::string>{"Sum of accelerator execution time and cpu execution time."});
  EXPECT_EQ(p->default_sample_type, "micros");
  // One sample per graph node, [1, its micros], at its line: "<file base>:<function>" as TensorFlow names it.
  ASSERT_EQ(p->samples.size(), 4u);
  EXPECT_EQ(p->samples.at("layer/MatMul").frames, std::vector<std::string>{"model:build_model@model.cc:10"});
  EXPECT_EQ(p->samples.at("layer/MatMul").values, (std::vector<int64_t>{1, 40}));
  EXPECT_EQ(p->samples.at("layer/w").values, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(p->samples.at("loss").frames, std::vector<std::string>{"train:main@train.cc:5"});
  EXPECT_EQ(p->samples.at("loss").values, (std::vector<int64_t>{1, 5}));
}

TEST_F(PprofOutputTest, UnitsAndCommentsFollowTheSelectedValue) {
  profiler_->profile_code(options({"bytes"}));
  auto p = decode(file_);
  if (!p) GTEST_SKIP() << stepscope::testing::kNoProtoc;
  EXPECT_EQ(p->sample_types.at(1), std::make_pair(std::string("bytes"), std::string("bytes")));
  EXPECT_EQ(p->comments.at(0), "Sum of operation total memory requests, excluding deallocations.");
  EXPECT_EQ(p->samples.at("loss").values, (std::vector<int64_t>{1, 4}));
  profiler_->profile_code(options({"params"}));
  p = decode(file_);
  EXPECT_EQ(p->sample_types.at(1), std::make_pair(std::string("params"), std::string("count")));
  EXPECT_EQ(p->samples.at("layer/w").values, (std::vector<int64_t>{1, 16}));
}

TEST_F(PprofOutputTest, ScopeViewSamplesEachNodeOnItsScopePath) {
  profiler_->profile_name_scope(options({"micros"}));
  const auto p = decode(file_);
  if (!p) GTEST_SKIP() << stepscope::testing::kNoProtoc;
  // Leaf first: the node, then its enclosing scopes ("layer/act" has no node: a synthetic row).
  EXPECT_EQ(p->samples.at("layer/act/Relu").frames,
            (std::vector<std::string>{"layer/act/Relu@:0", "layer/act@:0", "layer@:0"}));
  EXPECT_EQ(p->samples.at("layer/act/Relu").values, (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(p->samples.at("loss").frames, std::vector<std::string>{"loss@:0"});
  EXPECT_EQ(p->samples.size(), 4u);
}

TEST_F(PprofOutputTest, OpViewSamplesEachNodeUnderItsOpType) {
  profiler_->profile_operations(options({"micros"}));
  const auto p = decode(file_);
  if (!p) GTEST_SKIP() << stepscope::testing::kNoProtoc;
  EXPECT_EQ(p->samples.at("layer/MatMul").frames, (std::vector<std::string>{"layer/MatMul@:0", "MatMul@:0"}));
  EXPECT_EQ(p->samples.at("layer/MatMul").values, (std::vector<int64_t>{1, 40}));
  EXPECT_EQ(p->samples.size(), 4u);
}

// Views as deep as a 200,000-op chain (or code stacks that deep): the rows were walked by
// recursion, once per level, and overflowed the stack.
TEST(PprofDeepView, ChainDeeperThanTheStack) {
  constexpr int kDeep = 200000;
  GraphNodeProto scope_root;
  GraphNodeProto* node = &scope_root;
  for (int i = 1; i <= kDeep; ++i) {
    node = &node->children.emplace_back();
    node->name = "n" + std::to_string(i);
  }
  node->float_ops = 5;  // one sample, whose path is the whole chain
  const std::string scope = tfprof::pprof_profile("scope", scope_root, "float_ops");
  EXPECT_GT(scope.size(), static_cast<size_t>(2 * kDeep));  // a location and function a row
  EXPECT_NE(scope.find("n200000"), std::string::npos);

  MultiGraphNodeProto code_root;
  MultiGraphNodeProto* row = &code_root;
  for (int i = 1; i <= kDeep; ++i) {
    row = &row->children.emplace_back();
    row->name = "model.cc:" + std::to_string(i) + ":f" + std::to_string(i);
  }
  row->graph_nodes.emplace_back().name = "deepest";
  row->graph_nodes.back().float_ops = 5;
  const std::string code = tfprof::pprof_profile("code", code_root, "float_ops");
  EXPECT_GT(code.size(), static_cast<size_t>(2 * kDeep));
  EXPECT_NE(code.find("model:f200000"), std::string::npos);
  EXPECT_NE(code.find("deepest"), std::string::npos);
}

TEST(PprofSelect, OneSupportedValue) {
  EXPECT_EQ(tfprof::pprof_select_error({"micros"}), "");
  EXPECT_EQ(tfprof::pprof_select_error({"micros", "micros"}), "");
  EXPECT_EQ(tfprof::pprof_select_error({"micros", "bytes"}), "Can only select 1 attribute for pprof output.");
  EXPECT_EQ(tfprof::pprof_select_error({}), "Can only select 1 attribute for pprof output.");
  EXPECT_EQ(tfprof::pprof_select_error({"device"}), "pprof doesn't support -select=device");
}

// pprof itself, when installed (Go's `go tool pprof` or the standalone `pprof`).
TEST_F(PprofOutputTest, PprofReadsIt) {
  std::string tool;
  if (std::system("command -v pprof >/dev/null 2>&1") == 0)
    tool = "pprof";
  else if (std::system("command -v go >/dev/null 2>&1") == 0)
    tool = "go tool pprof";
  if (tool.empty()) GTEST_SKIP() << "neither pprof nor go is on the PATH";
  profiler_->profile_code(options({"micros"}));
  const fs::path listing = fs::path(dir_.path()) / "pprof_top.txt";
  ASSERT_EQ(std::system((tool + " -top " + file_.string() + " > " + listing.string() + " 2>&1").c_str()), 0)
      << read_file(listing);
  EXPECT_NE(read_file(listing).find("model:build_model"), std::string::npos) << read_file(listing);
  fs::remove(listing);
}

}  // namespace
}  // namespace stepscope
