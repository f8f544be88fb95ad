// The graph as a tensorflow.GraphDef (tensorflow/core/framework/graph.proto and friends), as
// TensorFlow 1.x's graph.as_graph_def(add_shapes=True) describes it: per node its name, op type,
// inputs ("node", "node:1", "^control"), device and attributes, plus "_output_shapes"; and the
// GraphDef's versions. One description (graph_def_message), two encodings: the wire format
// (TensorBoard's event files, the MetaGraphDef) and the text format (graph.pbtxt, as
// tf.io.write_graph(as_text=True) writes it).
//
//   node {
//     name: "w"
//     op: "Const"
//     attr {
//       key: "_output_shapes"
//       value {
//         list {
//           shape {
//             dim {
//               size: 3
//             }
//           }
//         }
//       }
//     }
//     attr {
//       key: "dtype"
//       value {
//         type: DT_FLOAT
//       }
//     }
//     ...
//   }
//   versions {
//     producer: 134
//   }
//
// Attributes are written sorted by key (protobuf's order for a map field). An attribute's value
// becomes: bool `b`, int64 `i`, double `f` (a float, as in TensorFlow), string `s`, DType `type`,
// Shape `shape` (an unknown size is -1, an unknown rank `unknown_rank: true`), int64 list
// `list { i: ... }`, Tensor `tensor` (dtype, tensor_shape and tensor_content, or string_val for
// strings), and any other object its description as `s`.
#pragma once

#include <string>
#include <string_view>

#include "stepscope/base/proto_message.h"
#include "stepscope/graph/graph.h"

namespace stepscope {

// VersionDef.producer of the GraphDefs stepscope writes. TensorFlow's importers accept any
// producer at or above TF_GRAPH_DEF_VERSION_MIN_PRODUCER (0); this one is from the TensorFlow
// 1.x era whose op semantics stepscope follows.
inline constexpr int kGraphDefProducer = 134;

// The GraphDef message, nodes in the order they were added to the graph.
ProtoMessage graph_def_message(const Graph& graph);
// Serialized (wire format).
std::string graph_def_binary(const Graph& graph);
// Text format.
std::string graph_def_text(const Graph& graph);

// tf.io.write_graph: writes the graph to `<dir>/<name>` (text format unless `as_text` is false)
// atomically (base/file_io.h), creating `dir` if needed; returns the path. Errors name the path:
// PermissionDeniedError (unwritable), FailedPreconditionError (`dir` is not a directory), and
// write_file_atomically's.
std::string write_graph(const Graph& graph, const std::string& dir, const std::string& name, bool as_text = true);

}  // namespace stepscope
