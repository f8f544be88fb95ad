// The GraphDef encodings: the text format against a golden file's worth of text (what
// tf.io.write_graph(as_text=True) prints for the same nodes), the wire format byte by byte for a
// tiny graph (file-formats.md A5) and through protoc --decode_raw, an independent decoder.
#include "stepscope/train/graph_def.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "stepscope/base/file_io.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/registry.h"
#include "stepscope/testing/protoc.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// A placeholder, a constant, a NoOp carrying one attribute of every kind, and a MatMul with a
// control input on a device.
struct SmallGraph {
  SmallGraph() {
    Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
    Output w = constant(root.with_op_name("w"), Tensor::from_vector<float>({1, 0.5f, -2}, Shape{3, 1}));
    AttrMap attrs{{"b", true},
                  {"i", int64_t{-2}},
                  {"f", 0.1},
                  {"s", std::string("a\"b\n\x01\xc3\xa9")},
                  {"T", DType::kInt64},
                  {"list", std::vector<int64_t>{1, 300}},
                  {"empty_list", std::vector<int64_t>{}},
                  {"scalar_shape", Shape{}},
                  {"unknown_shape", Shape::unknown_rank()},
                  {"names", Tensor::from_vector<std::string>({"p", "q\t"})}};
    Node* n = root.with_op_name("attrs").add_node(op_def("NoOp"), {}, std::move(attrs), CallSite::current());
    matmul(root.with_op_name("y").with_control_dependencies({n}).with_device("/cpu:0"), x, w);
  }
  Graph graph;
  Scope root{graph};
};

// What Python protobuf's text_format.MessageToString(graph_def, float_format='') prints for
// SmallGraph (checked by parsing this text into the GraphDef message and printing it again).
constexpr const char* kSmallGraphText = R"(node {
  name: "x"
  op: "Placeholder"
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  attr {
    key: "_output_shapes"
    value {
      list {
        shape {
          dim {
            size: -1
          }
          dim {
            size: 3
          }
        }
      }
    }
  }
  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
  attr {
    key: "shape"
    value {
      shape {
        dim {
          size: -1
        }
        dim {
          size: 3
        }
      }
    }
  }
}
node {
  name: "w"
  op: "Const"
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  attr {
    key: "_output_shapes"
    value {
      list {
        shape {
          dim {
            size: 3
          }
          dim {
            size: 1
          }
        }
      }
    }
  }
  attr {
    key: "value"
    value {
      tensor {
        dtype: DT_FLOAT
        tensor_shape {
          dim {
            size: 3
          }
          dim {
            size: 1
          }
        }
        tensor_content: "\000\000\200?\000\000\000?\000\000\000\300"
      }
    }
  }
}
node {
  name: "attrs"
  op: "NoOp"
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  attr {
    key: "T"
    value {
      type: DT_INT64
    }
  }
  attr {
    key: "b"
    value {
      b: true
    }
  }
  attr {
    key: "empty_list"
    value {
      list {
      }
    }
  }
  attr {
    key: "f"
    value {
      f: 0.10000000149011612
    }
  }
  attr {
    key: "i"
    value {
      i: -2
    }
  }
  attr {
    key: "list"
    value {
      list {
        i: 1
        i: 300
      }
    }
  }
  attr {
    key: "names"
    value {
      tensor {
        dtype: DT_STRING
        tensor_shape {
          dim {
            size: 2
          }
        }
        string_val: "p"
        string_val: "q\t"
      }
    }
  }
  attr {
    key: "s"
    value {
      s: "a\"b\n\001\303\251"
    }
  }
  attr {
    key: "scalar_shape"
    value {
      shape {
      }
    }
  }
  attr {
    key: "unknown_shape"
    value {
      shape {
        unknown_rank: true
      }
    }
  }
}
node {
  name: "y"
  op: "MatMul"
  input: "x"
  input: "w"
  input: "^attrs"
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  attr {
    key: "_output_shapes"
    value {
      list {
        shape {
          dim {
            size: -1
          }
          dim {
            size: 1
          }
        }
      }
    }
  }
  attr {
    key: "transpose_a"
    value {
      b: false
    }
  }
  attr {
    key: "transpose_b"
    value {
      b: false
    }
  }
}
versions {
  producer: 134
}
)";

TEST(GraphDefText, MatchesWriteGraphAsText) {
  SmallGraph g;
  EXPECT_EQ(graph_def_text(g.graph), kSmallGraphText);
}

// node { name: "n" op: "NoOp" device: <44 bytes> } versions { producer: 134 }, by the wire
// rules of A5: keys (field << 3 | wire type) 0a, 12, 22 (length-delimited) and 08 (varint);
// lengths as varints (the node: 3 + 6 + 2 + 44 = 55 = 0x37); 134 = 0x86 0x01.
TEST(GraphDefBinary, BytesOfATinyGraph) {
  Graph graph;
  Scope root(graph);
  no_op(root.with_op_name("n"));
  const std::string device = "/job:localhost/replica:0/task:0/device:CPU:0";  // every node has one
  ASSERT_EQ(graph.find_node("n")->device(), device);
  ASSERT_EQ(device.size(), 44u);
  const std::string expected =
      std::string("\x0a\x37\x0a\x01n\x12\x04NoOp\x22\x2c", 13) + device + std::string("\x22\x03\x08\x86\x01", 5);
  EXPECT_EQ(graph_def_binary(graph), expected);
  EXPECT_EQ(graph_def_text(graph),
            "node {\n  name: \"n\"\n  op: \"NoOp\"\n  device: \"" + device + "\"\n}\nversions {\n  producer: 134\n}\n");
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// protoc reads the bytes back: as raw fields (four nodes, field 1, and the versions, field 4)
// and with TensorFlow's schema (names, inputs, device, attributes by key with their values).
TEST(GraphDefBinary, ProtocDecodesTheNodesAndAttributes) {
  SmallGraph g;
  const std::string bytes = graph_def_binary(g.graph);
  std::optional<std::string> raw = testing::protoc_decode_raw(bytes);
  if (!raw) GTEST_SKIP() << testing::kNoProtoc;
  const testing::ProtoText raw_tree = testing::parse_proto_text(*raw);
  ASSERT_EQ(raw_tree.children.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(raw_tree.children[i].key, "1");
  EXPECT_EQ(raw_tree.children[4].key, "4");
  EXPECT_EQ(raw_tree.children[4].one("1").value, "134");

  const testing::ProtoText def = testing::parse_proto_text(*testing::protoc_decode(bytes, "tensorflow.GraphDef"));
  std::vector<const testing::ProtoText*> nodes = def.all("node");
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0]->one("name").value, quoted("x"));
  EXPECT_EQ(nodes[0]->one("op").value, quoted("Placeholder"));
  const testing::ProtoText& y = *nodes[3];
  EXPECT_EQ(y.one("name").value, quoted("y"));
  EXPECT_EQ(y.one("op").value, quoted("MatMul"));
  std::vector<std::string> inputs;
  for (const auto* in : y.all("input")) inputs.push_back(in->value);
  EXPECT_THAT(inputs, ::testing::ElementsAre(quoted("x"), quoted("w"), quoted("^attrs")));
  EXPECT_EQ(y.one("device").value, quoted(g.graph.find_node("y")->device()));
  // The NoOp's attributes, by key, each with the value of its kind.
  std::map<std::string, const testing::ProtoText*> attrs;
  std::vector<std::string> keys;
  for (const auto* attr : nodes[2]->all("attr")) {
    keys.push_back(attr->one("key").value);
    attrs[attr->one("key").value] = &attr->one("value");
  }
  EXPECT_THAT(keys, ::testing::ElementsAre(quoted("T"), quoted("b"), quoted("empty_list"), quoted("f"), quoted("i"),
                                           quoted("list"), quoted("names"), quoted("s"), quoted("scalar_shape"),
                                           quoted("unknown_shape")));
  EXPECT_EQ(attrs[quoted("T")]->one("type").value, "DT_INT64");
  EXPECT_EQ(attrs[quoted("b")]->one("b").value, "true");
  EXPECT_TRUE(attrs[quoted("empty_list")]->one("list").children.empty());
  EXPECT_EQ(attrs[quoted("f")]->one("f").value, "0.1");  // C++'s text format: the shortest float
  EXPECT_EQ(attrs[quoted("i")]->one("i").value, "-2");
  std::vector<std::string> list;
  for (const auto* i : attrs[quoted("list")]->one("list").all("i")) list.push_back(i->value);
  EXPECT_THAT(list, ::testing::ElementsAre("1", "300"));
  const testing::ProtoText& names = attrs[quoted("names")]->one("tensor");
  EXPECT_EQ(names.one("dtype").value, "DT_STRING");
  EXPECT_EQ(names.one("tensor_shape").one("dim").one("size").value, "2");
  EXPECT_EQ(names.all("string_val").size(), 2u);
  EXPECT_EQ(attrs[quoted("s")]->one("s").value, "\"a\\\"b\\n\\001\\303\\251\"");
  EXPECT_TRUE(attrs[quoted("scalar_shape")]->one("shape").children.empty());
  EXPECT_EQ(attrs[quoted("unknown_shape")]->one("shape").one("unknown_rank").value, "true");
  // The constant's value: float32 [3,1] as raw little-endian bytes.
  const testing::ProtoText& value = *nodes[1]->all("attr")[1];
  EXPECT_EQ(value.one("key").value, quoted("value"));
  EXPECT_EQ(value.one("value").one("tensor").one("tensor_content").value,
            "\"\\000\\000\\200?\\000\\000\\000?\\000\\000\\000\\300\"");
  EXPECT_EQ(def.one("versions").one("producer").value, "134");
}

TEST(WriteGraph, WritesTextOrBinaryAtomically) {
  SmallGraph g;
  TempDir dir;
  const std::string path = write_graph(g.graph, dir / "sub", "graph.pbtxt");
  EXPECT_EQ(path, dir / "sub/graph.pbtxt");
  EXPECT_EQ(read_file(path), graph_def_text(g.graph));
  EXPECT_EQ(read_file(write_graph(g.graph, dir.path(), "graph.pb", /*as_text=*/false)), graph_def_binary(g.graph));
  EXPECT_THAT(dir.entries(), ::testing::ElementsAre("graph.pb", "sub"));  // no temporary left
}

TEST(WriteGraph, ADirectoryThatIsAFileIsAnErrorNamingIt) {
  Graph graph;
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  try {
    write_graph(graph, dir / "file", "graph.pbtxt");
    FAIL() << "no error";
  } catch (const FailedPreconditionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'" + dir / "file" + "'"));
  }
}

}  // namespace
}  // namespace stepscope
