// The saved profile: a compact binary file holding a ProfileModel (graph model, devices, every
// step's per-node statistics and execution records), so a profile reopens without its Graph.
//
// Layout (format version 1):
//   "SSTFPROF"                magic, 8 bytes
//   u32 version               little-endian, 1
//   chunks                    each: u8 tag, u32 payload size (LE), payload, u32 CRC-32 of the
//                             payload (zlib's crc32, LE)
// Chunks, in this order: 'V' (the stepscope version that wrote the file: a string; files written
// before it existed have none), 'M' (the graph model), 'K' (optional: code traces), 'D' (devices
// and what the steps taught about the nodes), one 'S' per step (ascending), 'E' (end: the number of 'S' chunks).
// Numbers inside payloads are LEB128 varints, signed ones zigzag-encoded ("zz"); a string is a varint length and its
// bytes.
//   M: varint num_nodes; per node: string name, string op, string file, varint line,
//      string function, zz graph_id, varint num_inputs, per input (varint producer, zz slot;
//      slot -1 = control input), varint flags (bit 0: trainable), varint rank, zz dims (the
//      variable's shape), zz parameters, zz static_float_ops, string data_format.
//   K (optional; files without it, e.g. all written before it existed, have no stacks: the code
//      view shows each node's source location alone): varint num_frames; per frame: string
//      file, varint line, string function; varint num_entries; per entry: varint node, varint
//      depth, depth varint frame indices (the node's stack, outermost frame first).
//   C (optional, after M and K, before D; files without it, e.g. all written before it existed,
//      have no collective ops' ranks: the op view then shows no collective line): varint
//      num_entries; per entry: varint node, varint ranks (ModelNode::collective_ranks).
//   D: varint num_devices, strings (as the steps spelled them); varint flags (bit 0: missing accelerator stream);
//      varint num_nodes; per node: zz device, varint num_inputs, per input shape (varint size,
//      zz dims; size 0 = unknown).
//   S: zz step, zz base_ns, zz base_wall_ns; varint num_node_steps; per node step: varint node,
//      varint run_count, zz accelerator_micros, zz cpu_micros, zz requested, zz peak,
//      zz residual, zz output bytes, zz float_ops, zz all_start_micros,
//      zz latest_end_micros - all_start_micros; varint num_execs; per exec: varint node,
//      varint device, varint thread_id, zz all_start_ns - base_ns, zz scheduled_ns -
//      all_start_ns, zz op_start_rel_ns, zz op_end_rel_ns, zz all_end_rel_ns.
//   A (optional, after D, before the S chunks; only when the model dropped steps, see
//      ProfileModel::max_steps): varint num_entries; per entry: varint node, varint steps,
//      zz run_count, zz accelerator_micros, zz cpu_micros, zz requested, zz peak, zz residual,
//      zz output bytes, zz float_ops — the sums over the dropped steps. Files without it (all
//      written before it existed) mean nothing was dropped.
//   B (optional, right after a step's 'S'; steps added without their graph have none): zz step,
//      zz peak_bytes, zz persistent_bytes, zz transient_peak_bytes, zz peak_time_ns, varint
//      number of kinds (5), zz bytes of each MemoryKind (memory_kinds.h).
//   I (optional, right after a step's 'S' (and 'B'); steps without input stages have none): zz
//      step, varint num_stages; per stage: string node, string stage, zz self_ns, zz calls
//      (RunMetadata::input_stages).
//   T (optional, after the S chunks; only when step timings were added): varint num_records,
//      zz dropped (older records the ring let go); per record: zz step - previous step (the
//      first: - 0), zz wall_ns, zz busy_ns, zz input_ns, zz idle_ns, zz hooks_ns
//      (StepTimingRecord).
//   E: varint num_steps.
// A step's chunk never changes once written, so a Profiler encodes each step once and saving
// is writing the chunks out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stepscope/profiler/tfprof/profile_model.h"

namespace stepscope::tfprof {

inline constexpr std::string_view kProfileMagic = "SSTFPROF";
inline constexpr uint32_t kProfileFormatVersion = 1;

// The file header (magic, format version, and the 'V' chunk naming the stepscope version).
std::string encode_header();
// One chunk each (tag, size, payload, CRC).
std::string encode_model_chunk(const ProfileModel& model);
// The 'K' chunk; empty when no node has a stack.
std::string encode_traces_chunk(const ProfileModel& model);
// The 'C' chunk; empty when no node is a collective op.
std::string encode_collectives_chunk(const ProfileModel& model);
std::string encode_state_chunk(const ProfileModel& model);
std::string encode_step_chunk(int64_t step, const StepData& data);
// The 'A' chunk; empty when the model dropped no step.
std::string encode_dropped_chunk(const ProfileModel& model);
// The 'T' chunk; empty when there are no step timings.
std::string encode_timings_chunk(const StepTimings& timings);
std::string encode_end_chunk(size_t num_steps);

// Parses a whole file; DataLossError "corrupt profile file '<path>': <what>" on anything
// malformed (bad magic, unknown version, truncation, CRC mismatch, out-of-range indices).
//
// Limits, all from the file itself, checked before anything is allocated: a chunk's size is
// within the bytes left; a count of items is at most the bytes left divided by the smallest
// encoding of one item (model node 12 bytes, input 2, frame 3, stack entry 2, frame index 1, node step
// 11, exec 8), so memory stays a
// constant times the file's size; node indices are below the node count, graph_id in [-1, node
// count), device indices below the device count; times rebuilt from deltas must fit int64.
ProfileModel decode_profile(std::string_view bytes, const std::string& path);

}  // namespace stepscope::tfprof
