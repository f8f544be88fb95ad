// The graph as a tensorflow.MetaGraphDef (tensorflow/core/protobuf/meta_graph.proto), as
// TensorFlow 1.x's tf.train.export_meta_graph writes it beside each checkpoint
// (`model.ckpt-<step>.meta`) and CheckpointSaverHook into the event file:
//
//   MetaGraphDef   meta_info_def 1, graph_def 2 (train/graph_def.h), collection_def 4
//                  (map<string, CollectionDef>, by key)
//   MetaInfoDef    stripped_op_list 2 (OpList: op 1, one OpDef per op type used, sorted, with
//                  its name 1 only), tensorflow_version 5 ("stepscope <version>")
//   CollectionDef  node_list 1 (NodeList: value 1) or bytes_list 2 (BytesList: value 1)
//
// Every non-empty collection of the graph is written. Those of variables ("variables",
// "trainable_variables", "local_variables") hold a serialized VariableDef per variable, as
// TensorFlow's to_proto does: variable_name 1 ("w:0"), initializer_name 2 ("w/Assign"),
// snapshot_name 3 (the variable's value, "w:0": stepscope has no "w/read" node),
// initial_value_name 6, trainable 7. The others are node lists: a node with outputs is named by
// its first output ("global_step:0", "loss/Summary:0"), as TensorFlow names a collection's
// tensors, a node without (a NoOp such as "init") by its name, as TensorFlow names operations.
//
// Not written: saver_def (stepscope's Saver has no save and restore ops in the graph, and a
// SaverDef without their names makes tf.train.import_meta_graph fail), meta_graph_version and
// tags (TensorFlow leaves them empty unless asked), signature_def, asset_file_def and
// object_graph_def (SavedModel's), stripped_default_attrs (false: the default, left out).
#pragma once

#include <string>

#include "stepscope/base/proto_message.h"
#include "stepscope/graph/graph.h"

namespace stepscope {

ProtoMessage meta_graph_def_message(const Graph& graph);
// Serialized (wire format): the bytes of a `.meta` file and of an Event's meta_graph_def.
std::string meta_graph_def_binary(const Graph& graph);
// tf.train.export_meta_graph(filename): writes meta_graph_def_binary to `path` atomically
// (base/file_io.h: errors name the path).
void export_meta_graph(const Graph& graph, const std::string& path);

}  // namespace stepscope
