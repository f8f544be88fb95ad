#include "stepscope/profiler/run_metadata_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/proto_wire.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/profiler/timeline_test_util.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
namespace pw = proto_wire;

void expect_same(const AllocationDescription& a, const AllocationDescription& b, const std::string& where) {
  EXPECT_EQ(a.requested_bytes, b.requested_bytes) << where;
  EXPECT_EQ(a.allocated_bytes, b.allocated_bytes) << where;
  EXPECT_EQ(a.allocator_name, b.allocator_name) << where;
  EXPECT_EQ(a.allocation_id, b.allocation_id) << where;
  EXPECT_EQ(a.has_single_reference, b.has_single_reference) << where;
  EXPECT_EQ(a.ptr, b.ptr) << where;
}

// Every field of every node.
void expect_same(const StepStats& a, const StepStats& b) {
  EXPECT_EQ(a.base_ns, b.base_ns);
  EXPECT_EQ(a.base_wall_ns, b.base_wall_ns);
  ASSERT_EQ(a.dev_stats().size(), b.dev_stats().size());
  for (size_t d = 0; d < a.dev_stats().size(); ++d) {
    EXPECT_EQ(a.dev_stats()[d].device, b.dev_stats()[d].device);
    ASSERT_EQ(a.dev_stats()[d].node_stats.size(), b.dev_stats()[d].node_stats.size());
    for (size_t i = 0; i < a.dev_stats()[d].node_stats.size(); ++i) {
      const NodeExecStats& x = a.dev_stats()[d].node_stats[i];
      const NodeExecStats& y = b.dev_stats()[d].node_stats[i];
      const std::string where = std::string(x.node_name);
      EXPECT_EQ(x.node_name, y.node_name);
      EXPECT_EQ(x.op_type, y.op_type) << where;
      EXPECT_EQ(x.node_id, y.node_id) << where;
      EXPECT_EQ(x.scheduled_ns, y.scheduled_ns) << where;
      EXPECT_EQ(x.all_start_ns, y.all_start_ns) << where;
      EXPECT_EQ(x.op_start_rel_ns, y.op_start_rel_ns) << where;
      EXPECT_EQ(x.op_end_rel_ns, y.op_end_rel_ns) << where;
      EXPECT_EQ(x.all_end_rel_ns, y.all_end_rel_ns) << where;
      EXPECT_EQ(x.timeline_label, y.timeline_label) << where;
      EXPECT_EQ(x.thread_id, y.thread_id) << where;
      ASSERT_EQ(x.memory.size(), y.memory.size()) << where;
      for (size_t m = 0; m < x.memory.size(); ++m) {
        EXPECT_EQ(x.memory[m].allocator_name, y.memory[m].allocator_name) << where;
        EXPECT_EQ(x.memory[m].total_bytes, y.memory[m].total_bytes) << where;
        EXPECT_EQ(x.memory[m].peak_bytes, y.memory[m].peak_bytes) << where;
        EXPECT_EQ(x.memory[m].live_bytes, y.memory[m].live_bytes) << where;
        EXPECT_EQ(x.memory[m].allocator_bytes_in_use, y.memory[m].allocator_bytes_in_use) << where;
        ASSERT_EQ(x.memory[m].allocation_records.size(), y.memory[m].allocation_records.size()) << where;
        for (size_t r = 0; r < x.memory[m].allocation_records.size(); ++r) {
          EXPECT_EQ(x.memory[m].allocation_records[r].alloc_ns, y.memory[m].allocation_records[r].alloc_ns) << where;
          EXPECT_EQ(x.memory[m].allocation_records[r].alloc_bytes, y.memory[m].allocation_records[r].alloc_bytes)
              << where;
        }
      }
      ASSERT_EQ(x.output.size(), y.output.size()) << where;
      for (size_t o = 0; o < x.output.size(); ++o) {
        EXPECT_EQ(x.output[o].slot, y.output[o].slot) << where;
        EXPECT_EQ(x.output[o].tensor_description.dtype, y.output[o].tensor_description.dtype) << where;
        EXPECT_EQ(x.output[o].tensor_description.shape, y.output[o].tensor_description.shape) << where;
        expect_same(x.output[o].tensor_description.allocation_description,
                    y.output[o].tensor_description.allocation_description, where);
      }
      ASSERT_EQ(x.referenced_tensor.size(), y.referenced_tensor.size()) << where;
      for (size_t t = 0; t < x.referenced_tensor.size(); ++t)
        expect_same(x.referenced_tensor[t], y.referenced_tensor[t], where);
      EXPECT_EQ(x.memory_stats.temp_memory_size, y.memory_stats.temp_memory_size) << where;
      EXPECT_EQ(x.memory_stats.persistent_memory_size, y.memory_stats.persistent_memory_size) << where;
      EXPECT_TRUE(
          std::ranges::equal(x.memory_stats.persistent_tensor_alloc_ids, y.memory_stats.persistent_tensor_alloc_ids))
          << where;
    }
  }
}

TEST(RunMetadataIo, RealTracedStepRoundTripsEveryField) {
  const RunMetadata md = testing::traced_training_step();
  ASSERT_GT(md.step_stats.dev_stats().at(0).node_stats.size(), 10u);
  ASSERT_GT(md.step_stats.num_stored_records(), 0u);
  const RunMetadata back = parse_run_metadata(serialize_run_metadata(md));
  expect_same(md.step_stats, back.step_stats);
  ASSERT_EQ(back.partition_graphs.size(), md.partition_graphs.size());
  for (size_t i = 0; i < md.partition_graphs.size(); ++i) {
    EXPECT_EQ(back.partition_graphs[i].device, md.partition_graphs[i].device);
    EXPECT_EQ(back.partition_graphs[i].node_names, md.partition_graphs[i].node_names);
  }
  // The same bytes again: nothing was lost or added.
  EXPECT_EQ(serialize_run_metadata(back), serialize_run_metadata(md));
  // And its timeline is the same.
  testing::validated(Timeline(back.step_stats).generate_chrome_trace_format(true, true));
}

// The input stages a traced run timed travel in stepscope's own field (TensorFlow skips it), so a
// run_metadata-<step>.pb keeps the slowest input stage as the profile does.
TEST(RunMetadataIo, InputStagesRoundTripInAFieldOfTheirOwn) {
  RunMetadata md = testing::traced_training_step();
  md.input_stages = {{.node = "IteratorGetNext", .stage = "Iterator::repeat::batch", .self_ns = 12345, .calls = 3},
                     {.node = "IteratorGetNext", .stage = "Iterator::repeat::batch::csv", .self_ns = 678, .calls = 96}};
  const std::string bytes = serialize_run_metadata(md);
  const RunMetadata back = parse_run_metadata(bytes);
  EXPECT_EQ(back.input_stages, md.input_stages);
  expect_same(md.step_stats, back.step_stats);
  // Without stages the bytes are TensorFlow's fields alone, as before; the stages follow them.
  md.input_stages.clear();
  const std::string plain = serialize_run_metadata(md);
  EXPECT_GT(bytes.size(), plain.size());
  EXPECT_EQ(bytes.substr(0, plain.size()), plain);
  // A damaged stage is named.
  std::string damaged = bytes.substr(0, bytes.size() - 3);
  try {
    parse_run_metadata(damaged);
    FAIL() << "no error";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("RunMetadata.input_stages"), std::string::npos) << e.what();
  }
}

TEST(RunMetadataIo, EveryFieldOfAHandBuiltStep) {
  RunMetadata md;
  StepStats& st = md.step_stats;
  st.base_ns = 5'000;
  st.base_wall_ns = 1'700'000'000'123'456'789;
  st.dev_stats().push_back({StepStats::intern("/job:localhost/replica:0/task:0/device:CPU:0"), {}});
  NodeExecStats ns;
  ns.node_name = "n";
  ns.op_type = "Op";
  ns.timeline_label = "n = Op(a, b:1)";
  ns.node_id = 0;
  ns.scheduled_ns = 5'001;
  ns.all_start_ns = 5'123;
  ns.op_start_rel_ns = 7;
  ns.op_end_rel_ns = 999;
  ns.all_end_rel_ns = 1'001;
  ns.thread_id = 0xFFFFFFFFu;
  NodeOutput outs[2];
  outs[0].slot = 0;
  outs[0].tensor_description = {DType::kInt64,
                                Shape{2, -1, 3},
                                {.requested_bytes = 48,
                                 .allocated_bytes = 64,
                                 .allocator_name = "cpu",
                                 .allocation_id = 42,
                                 .has_single_reference = true,
                                 .ptr = 0xdeadbeefcafeull}};
  outs[1].slot = 2;
  outs[1].tensor_description.dtype = DType::kBool;
  outs[1].tensor_description.shape = Shape::unknown_rank();
  ns.output = st.store_outputs(outs);
  const AllocationRecord cpu_records[] = {{5'123, 48}, {5'124, 100}, {5'125, -100}};
  const AllocationRecord pool_records[] = {{6'000, 8}, {9'000, -8}};
  AllocatorMemoryUsed mem[2] = {{"cpu", 148, 148, 48, cpu_records, 1 << 20}, {"pool", 8, 8, 0, pool_records, 0}};
  ns.memory = st.store_memory(mem);
  const AllocationDescription referenced[] = {{.requested_bytes = 4, .allocator_name = "cpu", .allocation_id = 7}};
  ns.referenced_tensor = st.store_referenced(referenced);
  const int64_t ids[] = {3, 1'000'000'000'000, 5};
  ns.memory_stats = {.temp_memory_size = 100, .persistent_memory_size = 200, .persistent_tensor_alloc_ids = {}};
  ns.memory_stats.persistent_tensor_alloc_ids = st.store_alloc_ids(ids);
  st.dev_stats()[0].node_stats.push_back(ns);
  NodeExecStats plain;  // all defaults: node_id -1 must come back as -1
  plain.node_name = "plain";
  st.dev_stats()[0].node_stats.push_back(plain);
  md.partition_graphs.push_back({st.dev_stats()[0].device, {"n", "plain"}});
  md.partition_graphs.push_back({"/job:localhost/replica:0/task:0/device:CPU:1", {}});

  const RunMetadata back = parse_run_metadata(serialize_run_metadata(md));
  expect_same(st, back.step_stats);
  EXPECT_EQ(back.step_stats.dev_stats()[0].node_stats[1].node_id, -1);
  ASSERT_EQ(back.partition_graphs.size(), 2u);
  EXPECT_EQ(back.partition_graphs[1].device, "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_EQ(back.partition_graphs[0].node_names, (std::vector<std::string_view>{"n", "plain"}));
}

// What TensorFlow's tools read: µs fields in wall-clock time, ns fields too.
TEST(RunMetadataIo, TensorFlowFieldsAreWallClockMicrosAndNanos) {
  RunMetadata md;
  md.step_stats.base_ns = 1'000;
  md.step_stats.base_wall_ns = 1'700'000'000'000'000'000;
  md.step_stats.dev_stats().push_back({"/cpu:0", {}});
  NodeExecStats ns;
  ns.node_name = "a";
  ns.all_start_ns = 3'500;  // 2.5 µs after the base
  ns.all_end_rel_ns = 2'000;
  md.step_stats.dev_stats()[0].node_stats.push_back(ns);
  const std::string bytes = serialize_run_metadata(md);
  // RunMetadata.step_stats(1).dev_stats(1).node_stats(2): fields 2 and 13.
  auto sub = [](std::string_view msg, uint32_t want) {
    pw::Reader r(msg);
    uint32_t f;
    pw::WireType t;
    std::string_view v;
    while (r.next_field(f, t)) {
      if (f == want && r.read_length_delimited(t, v)) return v;
      r.skip(0, t);
    }
    return std::string_view();
  };
  const std::string_view node = sub(sub(sub(bytes, 1), 1), 2);
  std::map<uint32_t, int64_t> ints;
  pw::Reader r(node);
  uint32_t f;
  pw::WireType t;
  while (r.next_field(f, t)) {
    int64_t v;
    if (t == pw::WireType::kVarint && r.read_int(t, v))
      ints[f] = v;
    else
      r.skip(0, t);
  }
  EXPECT_EQ(ints.at(2), 1'700'000'000'000'002);  // all_start_micros
  EXPECT_EQ(ints.at(13), 1'700'000'000'000'002'500);
  EXPECT_EQ(ints.at(5), 2);
  EXPECT_EQ(ints.at(16), 2'000);
}

// A file as TensorFlow writes it (no ns fields, no stepscope fields): µs become ns.
TEST(RunMetadataIo, ReadsTensorFlowsOwnFiles) {
  std::string node, dev, steps, md;
  pw::put_bytes_field(node, 1, "MatMul");
  pw::put_int_field(node, 2, 1'600'000'000'000'123);
  pw::put_int_field(node, 5, 17);
  pw::put_bytes_field(node, 8, "MatMul = MatMul(x, w)");
  pw::put_int_field(node, 99, 5);  // a field stepscope does not know: skipped
  pw::put_bytes_field(dev, 1, "/job:localhost/replica:0/task:0/device:CPU:0");
  pw::put_bytes_field(dev, 2, node);
  pw::put_bytes_field(steps, 1, dev);
  pw::put_bytes_field(md, 1, steps);
  pw::put_bytes_field(md, 2, "cost graph");  // not read
  const RunMetadata back = parse_run_metadata(md);
  const NodeExecStats& ns = back.step_stats.dev_stats().at(0).node_stats.at(0);
  EXPECT_EQ(ns.all_start_ns, 1'600'000'000'000'123'000);
  EXPECT_EQ(ns.all_end_rel_ns, 17'000);
  EXPECT_EQ(ns.op_type, "MatMul");
  EXPECT_EQ(ns.node_id, -1);
}

class RunMetadataFileTest : public ::testing::Test {
 protected:
  testing::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

TEST_F(RunMetadataFileTest, SaveAndLoadPlainAndGzipped) {
  const RunMetadata md = testing::traced_training_step();
  for (const char* name : {"run_metadata.pb", "run_metadata.pb.gz"}) {
    save_run_metadata(dir_ / name, md);
    expect_same(md.step_stats, load_run_metadata(dir_ / name).step_stats);
  }
  EXPECT_EQ(read_file(dir_ / "run_metadata.pb"), serialize_run_metadata(md));
  EXPECT_THROW(load_run_metadata(dir_ / "absent.pb"), NotFoundError);
}

TEST_F(RunMetadataFileTest, TruncatedFileIsDataLossNamingTheFileAndTheField) {
  const std::string bytes = serialize_run_metadata(testing::traced_training_step());
  const fs::path path = dir_ / "truncated.pb";
  write_file_atomically(path, bytes.substr(0, bytes.size() / 2));
  try {
    load_run_metadata(path);
    FAIL() << "no error";
  } catch (const DataLossError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("RunMetadata.step_stats"), std::string::npos) << what;
  }
  // Every cut inside the step stats (one top-level field) is caught.
  pw::Reader r(bytes);
  uint32_t field;
  pw::WireType type;
  std::string_view step_stats;
  ASSERT_TRUE(r.next_field(field, type) && r.read_length_delimited(type, step_stats));
  for (size_t cut = 1; cut < r.position(); cut += 31)
    EXPECT_THROW(parse_run_metadata(bytes.substr(0, cut)), DataLossError) << cut;
}

TEST_F(RunMetadataFileTest, BadTagIsDataLoss) {
  const fs::path path = dir_ / "bad_tag.pb";
  // Field number 0, then wire type 7 (neither exists).
  for (std::string bytes : {std::string("\x00\x01", 2), std::string("\x0f\x01", 2)}) {
    write_file_atomically(path, bytes);
    try {
      load_run_metadata(path);
      FAIL() << "no error";
    } catch (const DataLossError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
  // A bad tag deep inside: named by its place.
  std::string node, dev, steps, md;
  pw::put_bytes_field(node, 1, "n");
  node += std::string("\x07", 1);  // field 0, wire type 7
  pw::put_bytes_field(dev, 2, node);
  pw::put_bytes_field(steps, 1, dev);
  pw::put_bytes_field(md, 1, steps);
  try {
    parse_run_metadata(md);
    FAIL() << "no error";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("RunMetadata.step_stats.dev_stats[0].node_stats[0]"), std::string::npos)
        << e.what();
  }
  // A known field with the wrong wire type.
  std::string wrong;
  pw::put_int_field(wrong, 1, 5);  // step_stats as a varint
  EXPECT_THROW(parse_run_metadata(wrong), DataLossError);
}

// A node's end is its start plus a relative time, which readers (the critical path, the
// timeline) compute: a start and duration whose sum overflows, or a time past 146 years from
// the epoch, is corrupt (the run_metadata fuzzer found the first). Today's wall clock is fine.
TEST(RunMetadataIo, TimesWhoseEndOverflowsAreCorrupt) {
  auto parse_node = [](int64_t start, int end_field, int64_t rel) {
    std::string node, dev, steps, md;
    pw::put_int_field(node, 13, start);  // all_start_nanos
    pw::put_int_field(node, end_field, rel);
    pw::put_bytes_field(dev, 2, node);
    pw::put_bytes_field(steps, 1, dev);
    pw::put_bytes_field(md, 1, steps);
    return parse_run_metadata(md, "crafted.pb");
  };
  auto error = [&](int64_t start, int end_field, int64_t rel) {
    try {
      parse_node(start, end_field, rel);
    } catch (const DataLossError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  EXPECT_NE(error(INT64_MAX - 4, 16, 401).find("all_start_nanos: 9223372036854775803 ns is more than 146 years"),
            std::string::npos);  // the fuzzer's input
  EXPECT_NE(error((int64_t{1} << 62) - 100, 16, INT64_MAX - 10)
                .find("all_end_rel_nanos: 4611686018427387804 + 9223372036854775797 is out of range"),
            std::string::npos);
  EXPECT_NE(
      error(1, 15, (int64_t{1} << 62) - 1).find("op_end_rel_nanos: 4611686018427387904 ns is more than 146 years"),
      std::string::npos);
  EXPECT_NE(error(int64_t{1} << 62, 16, 0).find("all_start_nanos: 4611686018427387904 ns is more than 146 years"),
            std::string::npos);
  const int64_t now = 1'764'633'600'000'000'000;  // 2025-12-02, wall-clock ns
  const RunMetadata ok = parse_node(now, 16, 1'000'000);
  ASSERT_EQ(ok.step_stats.dev_stats().at(0).node_stats.size(), 1u);
  EXPECT_EQ(ok.step_stats.dev_stats()[0].node_stats[0].all_start_ns +
                ok.step_stats.dev_stats()[0].node_stats[0].all_end_rel_ns,
            now + 1'000'000);
}

// Issue 12 (6): crafted times overflowed int64 when converted (µs x 1000, wall-clock to
// monotonic): undefined behaviour (UBSan aborts) and garbage times. Now a DataLossError naming
// the field and, with a source, the file.
TEST(RunMetadataIo, TimesThatOverflowAreCorrupt) {
  auto wrap = [](const std::string& node, const std::string& step_stats_extra = "") {
    std::string dev, steps, md;
    pw::put_bytes_field(dev, 2, node);
    pw::put_bytes_field(steps, 1, dev);
    steps += step_stats_extra;
    pw::put_bytes_field(md, 1, steps);
    return md;
  };
  auto error = [](const std::string& bytes) {
    try {
      parse_run_metadata(bytes, "crafted.pb");
    } catch (const DataLossError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  for (int field : {2, 3, 4, 5, 9}) {  // the µs times, without their ns twins
    std::string node;
    pw::put_int_field(node, field, INT64_MAX / 100);
    const std::string e = error(wrap(node));
    EXPECT_EQ(e.rfind("cannot read 'crafted.pb': corrupt RunMetadata: RunMetadata.step_stats.dev_stats[0].node_stats[0].", 0), 0u) << e;
    EXPECT_NE(e.find("_micros: 92233720368547758 x 1000 is out of range"), std::string::npos) << e;
  }
  // Wall-clock base minus monotonic base, and a time shifted by it.
  std::string bases;
  pw::put_int_field(bases, 1001, -1);
  pw::put_int_field(bases, 1002, INT64_MAX);
  EXPECT_NE(error(wrap("", bases)).find("step_stats.base_wall_ns: 9223372036854775807 - -1 is out of range"),
            std::string::npos);
  std::string shifted, node;
  pw::put_int_field(shifted, 1001, 1);
  pw::put_int_field(shifted, 1002, 2);  // offset 1
  pw::put_int_field(node, 13, INT64_MIN);
  EXPECT_NE(error(wrap(node, shifted)).find("node_stats[0].all_start_nanos"), std::string::npos);
  std::string record, memory, with_record;
  pw::put_int_field(record, 1, INT64_MIN / 10);
  pw::put_bytes_field(memory, 6, record);
  pw::put_bytes_field(with_record, 6, memory);
  EXPECT_NE(error(wrap(with_record)).find("memory[0].allocation_records[0].alloc_micros"), std::string::npos);
  // Without a source the message is as before.
  EXPECT_THROW(parse_run_metadata(wrap(node, shifted)), DataLossError);
}

}  // namespace
}  // namespace stepscope
