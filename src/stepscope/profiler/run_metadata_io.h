// RunMetadata in TensorFlow's protobuf wire format (tensorflow.RunMetadata of config.proto,
// StepStats of step_stats.proto), so TensorFlow's own tools read what stepscope saves and
// stepscope reads what TensorFlow saved.
//
// Format (field numbers as in TensorFlow's protos; proto3: fields at their default are not
// written; repeated int64 packed; readers skip fields they do not know):
//   RunMetadata         step_stats 1, partition_graphs 3 (GraphDef)
//   StepStats           dev_stats 1
//   DeviceStepStats     device 1, node_stats 2
//   NodeExecStats       node_name 1, all_start_micros 2, op_start_rel_micros 3,
//                       op_end_rel_micros 4, all_end_rel_micros 5, memory 6, output 7,
//                       timeline_label 8, scheduled_micros 9, thread_id 10,
//                       referenced_tensor 11, memory_stats 12, all_start_nanos 13,
//                       op_start_rel_nanos 14, op_end_rel_nanos 15, all_end_rel_nanos 16,
//                       scheduled_nanos 17
//   AllocatorMemoryUsed allocator_name 1, total_bytes 2, peak_bytes 3, live_bytes 4,
//                       allocator_bytes_in_use 5, allocation_records 6
//   AllocationRecord    alloc_micros 1, alloc_bytes 2
//   NodeOutput          slot 1, tensor_description 3
//   TensorDescription   dtype 1 (DataType: DT_FLOAT 1, DT_DOUBLE 2, DT_INT32 3, DT_STRING 7,
//                       DT_INT64 9, DT_BOOL 10), shape 2, allocation_description 4
//   TensorShapeProto    dim 2 (Dim: size 1), unknown_rank 3
//   AllocationDescription requested_bytes 1, allocated_bytes 2, allocator_name 3,
//                       allocation_id 4, has_single_reference 5, ptr 6
//   MemoryStats         temp_memory_size 1, persistent_memory_size 3,
//                       persistent_tensor_alloc_ids 5
//   GraphDef            node 1 (NodeDef: name 1, device 4)
// Times are written as TensorFlow has them: absolute wall-clock times (since the epoch) for
// all_start, scheduled and alloc, in µs and (where the proto has them) in ns. stepscope's
// own fields, numbered from 1001 so TensorFlow's parsers skip them, keep what the proto lacks
// so that a StepStats read back equals the one written:
//   StepStats           base_ns 1001, base_wall_ns 1002 (the step's monotonic and wall-clock
//                       start: the reader turns wall-clock times back into monotonic ones)
//   NodeExecStats       node_id 1001 (absent: -1)
//   AllocationRecord    alloc_nanos 1001
//   GraphDef            device 1001 (a partition's device, even with no node)
//   RunMetadata         input_stages 1001 (InputStage: node 1, stage 2, self_ns 3, calls 4; the
//                       datasets' stages a traced run timed)
// NodeExecStats.op_type is not in the proto: the reader takes it from timeline_label
// ("name = Op(inputs)"), as TensorFlow's timeline does.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "stepscope/base/file_io.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

std::string serialize_run_metadata(const RunMetadata& metadata);
// DataLossError naming what is corrupt (the message's path, e.g.
// "step_stats.dev_stats[0].node_stats[3].output[0]: truncated varint"), and `source` (the file
// the bytes came from) when given.
//
// Limits: every length is checked against the bytes that hold it before anything is read or
// allocated (proto_wire.h), so the decoded metadata is bounded by the input's size; times that
// overflow int64 nanoseconds when converted (µs x 1000, wall-clock to monotonic) are corrupt;
// shapes have at most Shape::kMaxRank dimensions.
RunMetadata parse_run_metadata(std::string_view bytes, const std::string& source = "");
// Atomic (see write_file_atomically); gzipped when the path ends in ".gz".
void save_run_metadata(const std::filesystem::path& path, const RunMetadata& metadata);
// DataLossError naming the file when it is corrupt; NotFoundError when it does not exist;
// ResourceExhaustedError naming it and the limit when a ".gz" file inflates past
// `max_decompressed_bytes`.
RunMetadata load_run_metadata(const std::filesystem::path& path,
                              uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes);

}  // namespace stepscope
