#include "stepscope/profiler/tfprof/internal/profile_io.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "stepscope/base/error.h"
#include "stepscope/base/version.h"

namespace stepscope::tfprof {
namespace {

// Hand-made pieces of a profile file (profile_io.h's layout), for inputs the encoder never makes.
void varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}
void zz(std::string& out, int64_t v) { varint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
std::string chunk(char tag, const std::string& payload) {
  std::string out(1, tag);
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  u32(static_cast<uint32_t>(payload.size()));
  out += payload;
  u32(static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(payload.data()), payload.size())));
  return out;
}

// One node "a" on one device; the CRCs are right, so only the content is at fault.
ProfileModel one_node_model(int32_t graph_id = 0) {
  ProfileModel model;
  ModelNode a;
  a.name = "a";
  a.op = "Const";
  a.graph_id = graph_id;
  model.nodes.push_back(a);  // not add_node: that would index graph_id
  model.devices = {"/job:localhost/replica:0/task:0/device:cpu:0"};
  model.device_labels = {"/job:localhost/replica:0/task:0/device:CPU:0"};
  return model;
}

std::string decode_error(const std::string& bytes) {
  try {
    decode_profile(bytes, "crafted.profile");
  } catch (const DataLossError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ProfileIo, ValidHandMadeFileDecodes) {
  const ProfileModel model = one_node_model();
  const ProfileModel back = decode_profile(
      encode_header() + encode_model_chunk(model) + encode_state_chunk(model) + encode_end_chunk(0), "x");
  ASSERT_EQ(back.nodes.size(), 1u);
  EXPECT_EQ(back.nodes[0].graph_id, 0);
  EXPECT_EQ(back.stepscope_version, STEPSCOPE_VERSION);
}

// The collective ops' ranks (the 'C' chunk) round-trip; files without it load with none.
TEST(ProfileIo, CollectiveRanksRoundTripAndAreChecked) {
  ProfileModel model = one_node_model();
  model.nodes[0].op = "Allreduce";
  model.nodes[0].collective_ranks = 4;
  const std::string head = encode_header() + encode_model_chunk(model);
  const std::string tail = encode_state_chunk(model) + encode_end_chunk(0);
  EXPECT_EQ(decode_profile(head + encode_collectives_chunk(model) + tail, "x").nodes[0].collective_ranks, 4);
  EXPECT_EQ(decode_profile(head + tail, "x").nodes[0].collective_ranks, 0);
  EXPECT_TRUE(encode_collectives_chunk(one_node_model()).empty());  // no collective: no chunk

  std::string zero_ranks;
  varint(zero_ranks, 1);
  varint(zero_ranks, 0);
  varint(zero_ranks, 0);
  EXPECT_NE(decode_error(head + chunk('C', zero_ranks) + tail).find("node 'a': collective ranks 0 out of range"),
            std::string::npos);
  std::string no_such_node;
  varint(no_such_node, 1);
  varint(no_such_node, 7);
  varint(no_such_node, 2);
  EXPECT_NE(decode_error(head + chunk('C', no_such_node) + tail).find("node index out of range"), std::string::npos);
  EXPECT_NE(decode_error(head + encode_state_chunk(model) + encode_collectives_chunk(model) + encode_end_chunk(0))
                .find("misplaced collectives chunk"),
            std::string::npos);
}

// Files written before the version chunk existed have none, and still load.
TEST(ProfileIo, CodeTracesRoundTripAndAreChecked) {
  ProfileModel model = one_node_model();
  model.nodes[0].stack = {model.intern_frame({"/u/main.cc", 3, "main"}), model.intern_frame({"", 0, "f(int)"})};
  const std::string head = encode_header() + encode_model_chunk(model);
  const std::string tail = encode_state_chunk(model) + encode_end_chunk(0);
  const ProfileModel back = decode_profile(head + encode_traces_chunk(model) + tail, "x");
  ASSERT_EQ(back.frames.size(), 2u);
  EXPECT_EQ(back.frames[0].file, "/u/main.cc");
  EXPECT_EQ(back.frames[0].line, 3);
  EXPECT_EQ(back.frames[1].function, "f(int)");
  EXPECT_EQ(back.nodes[0].stack, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(encode_traces_chunk(one_node_model()).empty());  // no stacks: no chunk

  std::string frames;  // one frame
  varint(frames, 1);
  varint(frames, 4);
  frames += "a.cc";
  varint(frames, 1);
  varint(frames, 1);
  frames += "f";
  auto entry = [](uint64_t node, uint64_t depth, uint64_t frame) {
    std::string e;
    varint(e, 1);
    varint(e, node);
    varint(e, depth);
    if (depth) varint(e, frame);
    return e;
  };
  EXPECT_NE(decode_error(head + chunk('K', frames + entry(0, 1, 1)) + tail).find("frame index out of range"),
            std::string::npos);
  EXPECT_NE(decode_error(head + chunk('K', frames + entry(1, 1, 0)) + tail).find("node index out of range"),
            std::string::npos);
  EXPECT_NE(decode_error(head + chunk('K', frames + entry(0, 0, 0)) + tail).find("empty stack"), std::string::npos);
  // Deeper than any stack stepscope captures (the code view would be as deep).
  std::string deep = frames;
  varint(deep, 1);
  varint(deep, 0);
  varint(deep, kMaxStackFrames + 1);
  deep.append(kMaxStackFrames + 1, '\0');
  EXPECT_NE(decode_error(head + chunk('K', deep) + tail).find("node 'a' has a stack of 4097 frames (at most 4096)"),
            std::string::npos);
  std::string deepest = frames;  // as deep as allowed
  varint(deepest, 1);
  varint(deepest, 0);
  varint(deepest, kMaxStackFrames);
  deepest.append(kMaxStackFrames, '\0');
  EXPECT_EQ(decode_profile(head + chunk('K', deepest) + tail, "x").nodes[0].stack.size(), kMaxStackFrames);
  // After the state chunk, it is misplaced.
  EXPECT_NE(decode_error(encode_header() + encode_model_chunk(model) + encode_state_chunk(model) +
                         chunk('K', frames + entry(0, 1, 0)) + encode_end_chunk(0))
                .find("misplaced code traces chunk"),
            std::string::npos);
}

TEST(ProfileIo, FileWithoutVersionChunkDecodes) {
  const ProfileModel model = one_node_model();
  std::string header(kProfileMagic);
  header += std::string("\x01\x00\x00\x00", 4);  // format version 1, LE
  const ProfileModel back =
      decode_profile(header + encode_model_chunk(model) + encode_state_chunk(model) + encode_end_chunk(0), "x");
  ASSERT_EQ(back.nodes.size(), 1u);
  EXPECT_EQ(back.stepscope_version, "");
}

// Issue 12 (3): one node's graph_id set to 4e8 made loading take 1.6 GB and 33 s (a table
// indexed by it); at INT32_MAX it died with an untyped "vector::_M_fill_insert". A graph id is
// below the model's node count, so anything else is corrupt.
TEST(ProfileIo, GraphIdBeyondTheNodeCountIsCorrupt) {
  for (int32_t id : {400'000'000, INT32_MAX, 1, -2}) {
    const ProfileModel model = one_node_model(id);
    const std::string e =
        decode_error(encode_header() + encode_model_chunk(model) + encode_state_chunk(model) + encode_end_chunk(0));
    EXPECT_EQ(e, "corrupt profile file 'crafted.profile': node 'a': graph_id " + std::to_string(id) +
                     " is out of range [-1, 1)");
  }
}

// Counts are bounded by the bytes left divided by the smallest encoding of one item.
TEST(ProfileIo, CountsBeyondTheDataAreCorrupt) {
  std::string model;
  varint(model, 1000);  // 1000 nodes need at least 12,000 bytes
  model += std::string(100, '\0');
  EXPECT_NE(decode_error(encode_header() + chunk('M', model)).find("a count (1000) exceeds the data (100 bytes left)"),
            std::string::npos);
}

// Issue 12 (6): times rebuilt from deltas overflowed int64 (undefined behaviour).
TEST(ProfileIo, TimesThatOverflowAreCorrupt) {
  const ProfileModel model = one_node_model();
  const std::string head = encode_header() + encode_model_chunk(model) + encode_state_chunk(model);
  {
    std::string s;
    zz(s, 1), zz(s, INT64_MAX), zz(s, 0);   // step, base_ns, base_wall_ns
    varint(s, 0), varint(s, 1);              // no node steps, one exec
    varint(s, 0), varint(s, 0), varint(s, 0);  // node, device, thread
    zz(s, 1);                                // all_start_ns - base_ns: overflows
    for (int i = 0; i < 4; ++i) zz(s, 0);
    EXPECT_NE(decode_error(head + chunk('S', s) + encode_end_chunk(1)).find("all_start_ns out of range"),
              std::string::npos);
  }
  {
    std::string s;
    zz(s, 1), zz(s, 0), zz(s, 0);
    varint(s, 1);
    varint(s, 0), varint(s, 1);              // node, run_count
    for (int i = 0; i < 7; ++i) zz(s, 0);    // micros, bytes, float_ops
    zz(s, INT64_MAX), zz(s, 1);              // all_start_micros, then the end's delta: overflows
    varint(s, 0);
    EXPECT_NE(decode_error(head + chunk('S', s) + encode_end_chunk(1)).find("latest_end_micros out of range"),
              std::string::npos);
  }
}

TEST(ProfileIo, StepTimingsRoundTripAndAreChecked) {
  ProfileModel model = one_node_model();
  model.step_timings.add({.step = 5, .wall_ns = 1000, .busy_ns = 900, .input_ns = 100, .idle_ns = 50, .hooks_ns = 7});
  model.step_timings.add({.step = 3, .wall_ns = 2000, .busy_ns = 1900, .input_ns = 0, .idle_ns = 0, .hooks_ns = 0});
  const std::string head = encode_header() + encode_model_chunk(model) + encode_state_chunk(model);
  const std::string timings = encode_timings_chunk(model.step_timings);
  const ProfileModel back = decode_profile(head + timings + encode_end_chunk(0), "x");
  EXPECT_EQ(back.step_timings.records(), model.step_timings.records());
  EXPECT_EQ(back.step_timings.dropped(), 0);
  EXPECT_EQ(encode_timings_chunk(StepTimings()), "");  // none: no chunk

  EXPECT_NE(decode_error(encode_header() + encode_model_chunk(model) + timings + encode_state_chunk(model) +
                         encode_end_chunk(0))
                .find("misplaced step timings chunk"),
            std::string::npos);
  EXPECT_NE(decode_error(head + timings + timings + encode_end_chunk(0)).find("misplaced step timings chunk"),
            std::string::npos);
  StepData step;
  EXPECT_NE(decode_error(head + timings + encode_step_chunk(1, step) + encode_end_chunk(1))
                .find("step chunk after the step timings chunk"),
            std::string::npos);
  std::string huge;
  varint(huge, 1000000);  // records the chunk cannot hold
  zz(huge, 0);
  EXPECT_NE(decode_error(head + chunk('T', huge) + encode_end_chunk(0)).find("exceeds the data"), std::string::npos);
  std::string negative;
  varint(negative, 0);
  zz(negative, -1);
  EXPECT_NE(decode_error(head + chunk('T', negative) + encode_end_chunk(0)).find("negative count"), std::string::npos);
  std::string overflow;  // a step delta past int64
  varint(overflow, 2);
  zz(overflow, 0);
  zz(overflow, INT64_MAX);
  for (int i = 0; i < 5; ++i) zz(overflow, 0);
  zz(overflow, 1);
  for (int i = 0; i < 5; ++i) zz(overflow, 0);
  EXPECT_NE(decode_error(head + chunk('T', overflow) + encode_end_chunk(0)).find("step out of range"),
            std::string::npos);
}

TEST(ProfileIo, InputStagesRoundTripAndAreChecked) {
  const ProfileModel model = one_node_model();
  StepData step;
  step.input_stages = {{"IteratorGetNext", "Iterator::batch", 1500, 1},
                       {"IteratorGetNext", "Iterator::batch::csv", 90000, 64}};
  const std::string head = encode_header() + encode_model_chunk(model) + encode_state_chunk(model);
  const std::string chunks = encode_step_chunk(7, step);
  const ProfileModel back = decode_profile(head + chunks + encode_end_chunk(1), "x");
  EXPECT_EQ(back.steps.at(7).input_stages, step.input_stages);
  // Without its step, or twice, it is corrupt.
  const std::string stages_only = chunks.substr(encode_step_chunk(7, StepData()).size());
  EXPECT_NE(decode_error(head + stages_only + encode_end_chunk(0)).find("input stages chunk of step 7 without"),
            std::string::npos);
  EXPECT_NE(decode_error(head + chunks + stages_only + encode_end_chunk(1)).find("input stages chunk of step 7"),
            std::string::npos);
}

}  // namespace
}  // namespace stepscope::tfprof
