#include "stepscope/testing/protoc.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "stepscope/testing/temp_dir.h"

namespace stepscope::testing {

namespace fs = std::filesystem;

const char* const kTensorFlowSubsetProto = R"(syntax = "proto3";
package tensorflow;

enum DataType {
  DT_INVALID = 0;
  DT_FLOAT = 1;
  DT_DOUBLE = 2;
  DT_INT32 = 3;
  DT_STRING = 7;
  DT_INT64 = 9;
  DT_BOOL = 10;
}
message TensorShapeProto {
  message Dim {
    int64 size = 1;
    string name = 2;
  }
  repeated Dim dim = 2;
  bool unknown_rank = 3;
}
message TensorProto {
  DataType dtype = 1;
  TensorShapeProto tensor_shape = 2;
  int32 version_number = 3;
  bytes tensor_content = 4;
  repeated float float_val = 5 [packed = true];
  repeated double double_val = 6 [packed = true];
  repeated int32 int_val = 7 [packed = true];
  repeated bytes string_val = 8;
  repeated int64 int64_val = 10 [packed = true];
  repeated bool bool_val = 11 [packed = true];
}
message AttrValue {
  message ListValue {
    repeated bytes s = 2;
    repeated int64 i = 3 [packed = true];
    repeated float f = 4 [packed = true];
    repeated bool b = 5 [packed = true];
    repeated DataType type = 6 [packed = true];
    repeated TensorShapeProto shape = 7;
    repeated TensorProto tensor = 8;
  }
  oneof value {
    bytes s = 2;
    int64 i = 3;
    float f = 4;
    bool b = 5;
    DataType type = 6;
    TensorShapeProto shape = 7;
    TensorProto tensor = 8;
    ListValue list = 1;
    string placeholder = 9;
  }
}
message NodeDef {
  string name = 1;
  string op = 2;
  repeated string input = 3;
  string device = 4;
  map<string, AttrValue> attr = 5;
}
message VersionDef {
  int32 producer = 1;
  int32 min_consumer = 2;
  repeated int32 bad_consumers = 3;
}
message GraphDef {
  repeated NodeDef node = 1;
  VersionDef versions = 4;
}
message OpDef {
  string name = 1;
}
message OpList {
  repeated OpDef op = 1;
}
message VariableDef {
  string variable_name = 1;
  string initial_value_name = 6;
  string initializer_name = 2;
  string snapshot_name = 3;
  bool is_resource = 5;
  bool trainable = 7;
}
message SaverDef {
  string filename_tensor_name = 1;
  string save_tensor_name = 2;
  string restore_op_name = 3;
  int32 max_to_keep = 4;
  bool sharded = 5;
  float keep_checkpoint_every_n_hours = 6;
  int32 version = 7;
}
message CollectionDef {
  message NodeList {
    repeated string value = 1;
  }
  // TensorFlow's BytesList holds `repeated bytes value = 1`; stepscope's are serialized
  // VariableDefs, which have the same wire form as embedded messages: declared so, protoc
  // shows their fields.
  message BytesList {
    repeated VariableDef value = 1;
  }
  message Int64List {
    repeated int64 value = 1 [packed = true];
  }
  message FloatList {
    repeated float value = 1 [packed = true];
  }
  oneof kind {
    NodeList node_list = 1;
    BytesList bytes_list = 2;
    Int64List int64_list = 3;
    FloatList float_list = 4;
  }
}
message MetaGraphDef {
  message MetaInfoDef {
    string meta_graph_version = 1;
    OpList stripped_op_list = 2;
    repeated string tags = 4;
    string tensorflow_version = 5;
    string tensorflow_git_version = 6;
    bool stripped_default_attrs = 7;
  }
  MetaInfoDef meta_info_def = 1;
  GraphDef graph_def = 2;
  SaverDef saver_def = 3;
  map<string, CollectionDef> collection_def = 4;
}
)";

bool have_protoc() {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string_view rest(path);
  while (true) {
    const size_t colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    if (!dir.empty() && ::access((fs::path(dir) / "protoc").c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) return false;
    rest.remove_prefix(colon + 1);
  }
}

namespace {

std::string run_protoc(const std::string& args, std::string_view bytes,
                       std::string_view schema = kTensorFlowSubsetProto) {
  TempDir dir;
  const std::string input = dir / "message.bin";
  std::ofstream(input, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::ofstream(dir / "tensorflow_subset.proto") << schema;
  const std::string command = "cd '" + dir.path() + "' && protoc " + args + " < '" + input + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "cannot run " << command;
    return std::string();
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << " failed:\n" << out;
  return out;
}

}  // namespace

std::optional<std::string> protoc_decode_raw(std::string_view bytes) {
  if (!have_protoc()) return std::nullopt;
  return run_protoc("--decode_raw", bytes);
}

std::optional<std::string> protoc_decode(std::string_view bytes, std::string_view type) {
  if (!have_protoc()) return std::nullopt;
  return run_protoc("--decode=" + std::string(type) + " tensorflow_subset.proto", bytes);
}

std::optional<std::string> protoc_decode_with_schema(std::string_view bytes, std::string_view schema,
                                                     std::string_view type) {
  if (!have_protoc()) return std::nullopt;
  return run_protoc("--decode=" + std::string(type) + " tensorflow_subset.proto", bytes, schema);
}

std::vector<const ProtoText*> ProtoText::all(std::string_view n) const {
  std::vector<const ProtoText*> out;
  for (const ProtoText& c : children)
    if (c.key == n) out.push_back(&c);
  return out;
}

const ProtoText& ProtoText::one(std::string_view n) const {
  static const ProtoText none;
  std::vector<const ProtoText*> found = all(n);
  EXPECT_EQ(found.size(), 1u) << "field " << n << " of " << (key.empty() ? "the message" : key);
  return found.size() == 1 ? *found.front() : none;
}

ProtoText parse_proto_text(std::string_view text) {
  ProtoText root;
  std::vector<ProtoText*> stack{&root};
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty()) continue;
    if (line == "}") {
      EXPECT_GT(stack.size(), 1u) << "unbalanced protoc output";
      if (stack.size() > 1) stack.pop_back();
      continue;
    }
    ProtoText field;
    if (line.ends_with(" {")) {
      field.key = line.substr(0, line.size() - 2);
      stack.back()->children.push_back(std::move(field));
      stack.push_back(&stack.back()->children.back());
    } else {
      const size_t colon = line.find(": ");
      field.key = line.substr(0, colon);
      field.value = colon == std::string_view::npos ? std::string() : std::string(line.substr(colon + 2));
      stack.back()->children.push_back(std::move(field));
    }
  }
  EXPECT_EQ(stack.size(), 1u) << "unbalanced protoc output";
  return root;
}

}  // namespace stepscope::testing
