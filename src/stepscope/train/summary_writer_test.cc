#include "stepscope/train/summary_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "stepscope/base/proto_wire.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::TempDir;

double now_secs() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(SummaryWriter, WritesEveryKindOfEventAtItsStep) {
  TempDir dir;
  const double before = now_secs();
  SummaryWriter writer(dir.path());
  writer.add_scalar("loss", 0.75f, 3);
  writer.add_scalars({{"a", 1.0f}, {"b", 2.0f}}, 4);
  writer.add_summary(Summary{{Summary::scalar("c", -1.5f)}});  // no step: 0
  writer.add_session_log(SessionLog{SessionLog::kStart, "", ""}, 5);
  writer.add_session_log(SessionLog{SessionLog::kCheckpoint, dir / "model.ckpt-6", ""}, 6);
  writer.add_run_metadata("step_7", std::string("\x08\x01\x00\xFF", 4), 7);
  writer.add_session_log(SessionLog{SessionLog::kStop, "", ""}, 8);
  writer.flush();
  const double after = now_secs();

  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 8u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].step, 3);
  EXPECT_EQ(events[1].scalars(), (std::map<std::string, float>{{"loss", 0.75f}}));
  EXPECT_EQ(events[2].step, 4);
  EXPECT_EQ(events[2].scalars(), (std::map<std::string, float>{{"a", 1.0f}, {"b", 2.0f}}));
  EXPECT_EQ(events[3].step, 0);
  EXPECT_EQ(events[3].scalars().at("c"), -1.5f);
  EXPECT_EQ(events[4].session_log->status, SessionLog::kStart);
  EXPECT_EQ(events[4].step, 5);
  EXPECT_EQ(events[5].session_log->status, SessionLog::kCheckpoint);
  EXPECT_EQ(events[5].session_log->checkpoint_path, dir / "model.ckpt-6");
  EXPECT_EQ(events[6].tagged_run_metadata->tag, "step_7");
  EXPECT_EQ(events[6].tagged_run_metadata->run_metadata, std::string("\x08\x01\x00\xFF", 4));
  EXPECT_EQ(events[6].step, 7);
  EXPECT_EQ(events[7].session_log->status, SessionLog::kStop);
  for (const Event& e : events) {
    EXPECT_GE(e.wall_time, before - 1);
    EXPECT_LE(e.wall_time, after + 1);
  }
}

TEST(SummaryWriter, SerializedSummariesAreParsedAndBadBytesRejected) {
  TempDir dir;
  SummaryWriter writer(dir.path());
  writer.add_summary(Summary{{Summary::scalar("x", 2.0f)}}.serialize(), 10);
  EXPECT_THAT(
      [&] {
        try {
          writer.add_summary(std::string_view("\x0A\x05\x0A", 3), 11);
        } catch (const InvalidArgumentError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("add_summary: the bytes given are not a serialized Summary"));
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 10);
  EXPECT_EQ(events[1].scalars().at("x"), 2.0f);
}

TEST(SummaryWriter, MetadataIsKeptOnlyOnEachTagsFirstValueInAFile) {
  TempDir dir;
  SummaryWriter writer(dir.path());
  Summary::Value v = Summary::scalar("acc", 0.5f);
  v.metadata = std::string("\x0A\x09\x0A\x07scalars", 11);
  Summary::Value other = Summary::scalar("other", 1.0f);  // no metadata: untouched
  writer.add_summary(Summary{{v, other}}, 1);
  writer.add_summary(Summary{{v}}, 2);
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].summary->value[0].metadata, v.metadata);
  EXPECT_FALSE(events[1].summary->value[1].metadata);
  EXPECT_FALSE(events[2].summary->value[0].metadata);
  // A new file needs the metadata again.
  writer.reopen();
  writer.add_summary(Summary{{v}}, 3);
  writer.close();
  events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].summary->value[0].metadata, v.metadata);
}

TEST(SummaryWriter, RunMetadataTagsMayNotRepeat) {
  TempDir dir;
  SummaryWriter writer(dir.path());
  writer.add_run_metadata("step_2", "a", 2);
  try {
    writer.add_run_metadata("step_2", "b", 3);
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "The provided tag was already used for this event type");
  }
  writer.close();
  EXPECT_EQ(read_events(writer.path()).size(), 2u);
}

TEST(SummaryWriter, EventsAreBufferedUntilMaxQueueOrFlush) {
  TempDir dir;
  SummaryWriter writer(dir.path(), {.max_queue = 3});
  writer.add_scalar("x", 1, 1);
  writer.add_scalar("x", 2, 2);
  EXPECT_EQ(read_events(writer.path()).size(), 1u);  // only the version event is on disk
  writer.add_scalar("x", 3, 3);                      // the third pending event flushes
  EXPECT_EQ(read_events(writer.path()).size(), 4u);
  writer.add_scalar("x", 4, 4);
  EXPECT_EQ(read_events(writer.path()).size(), 4u);
  writer.flush();
  EXPECT_EQ(read_events(writer.path()).size(), 5u);
}

TEST(SummaryWriter, FlushSecsFlushesOnTheNextAdd) {
  TempDir dir;
  SummaryWriter writer(dir.path(), {.max_queue = 1000, .flush_secs = 0.05});
  writer.add_scalar("x", 1, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  writer.add_scalar("x", 2, 2);
  EXPECT_EQ(read_events(writer.path()).size(), 3u);
}

TEST(SummaryWriter, ClosedWriterDropsEventsUntilReopened) {
  TempDir dir;
  SummaryWriter writer(dir.path());
  const std::string first = writer.path();
  writer.add_scalar("x", 1, 1);
  writer.close();
  EXPECT_TRUE(writer.closed());
  writer.add_scalar("x", 2, 2);  // dropped, as in TensorFlow
  writer.flush();
  writer.close();
  EXPECT_EQ(read_events(first).size(), 2u);
  writer.reopen();
  EXPECT_FALSE(writer.closed());
  EXPECT_NE(writer.path(), first);
  writer.add_scalar("x", 3, 3);
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 3);
  EXPECT_EQ(list_event_files(dir.path()).size(), 2u);
}

TEST(SummaryWriter, DestructorFlushes) {
  TempDir dir;
  std::string path;
  {
    SummaryWriter writer(dir.path());
    path = writer.path();
    writer.add_scalar("x", 1, 1);
  }
  EXPECT_EQ(read_events(path).size(), 2u);
}

TEST(SummaryWriter, ConcurrentAddsAllArriveIntact) {
  TempDir dir;
  SummaryWriter writer(dir.path(), {.max_queue = 7});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&writer, t] {
      for (int i = 0; i < 250; ++i) writer.add_scalar("t" + std::to_string(t), static_cast<float>(i), i);
    });
  for (auto& th : threads) th.join();
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 1001u);
  std::map<std::string, int> count;
  for (const Event& e : events)
    for (const auto& [tag, value] : e.scalars()) {
      EXPECT_EQ(value, static_cast<float>(e.step));
      ++count[tag];
    }
  EXPECT_EQ(count, (std::map<std::string, int>{{"t0", 250}, {"t1", 250}, {"t2", 250}, {"t3", 250}}));
}

// ----- add_graph ---------------------------------------------------------------------------

namespace wire = proto_wire;

struct NodeDefView {
  std::string name, op, device;
  std::vector<std::string> inputs;
  std::map<std::string, std::string> attrs;  // key -> serialized AttrValue
};

std::vector<NodeDefView> decode_graph_def(std::string_view graph_def) {
  std::vector<NodeDefView> nodes;
  wire::Reader r(graph_def);
  uint32_t field;
  wire::WireType type;
  std::string_view b;
  while (!r.done()) {
    EXPECT_TRUE(r.next_field(field, type));
    EXPECT_TRUE(r.read_length_delimited(type, b));
    if (field == 4) continue;  // versions
    EXPECT_EQ(field, 1u);
    NodeDefView n;
    wire::Reader nr(b);
    while (!nr.done()) {
      std::string_view v;
      EXPECT_TRUE(nr.next_field(field, type));
      EXPECT_TRUE(nr.read_length_delimited(type, v));
      if (field == 1) n.name = v;
      if (field == 2) n.op = v;
      if (field == 3) n.inputs.emplace_back(v);
      if (field == 4) n.device = v;
      if (field == 5) {
        wire::Reader er(v);
        std::string key, value;
        while (!er.done()) {
          std::string_view kv;
          EXPECT_TRUE(er.next_field(field, type));
          EXPECT_TRUE(er.read_length_delimited(type, kv));
          (field == 1 ? key : value) = kv;
        }
        n.attrs[key] = value;
      }
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

TEST(SummaryWriter, AddGraphWritesAGraphDefTensorBoardCanDraw) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  Output w = constant(root.with_op_name("w"), Tensor::from_vector<float>({1, 2, 3}, Shape{3, 1}));
  Node* init = no_op(root.with_op_name("init"));
  Output y = matmul(root.with_name_scope("layer").with_control_dependencies({init}), x, w);

  TempDir dir;
  SummaryWriter writer(dir.path());
  writer.add_graph(g);
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  ASSERT_TRUE(events[1].graph_def);
  std::vector<NodeDefView> nodes = decode_graph_def(*events[1].graph_def);
  ASSERT_EQ(nodes.size(), static_cast<size_t>(g.num_nodes()));
  const NodeDefView& mm = nodes.back();
  EXPECT_EQ(mm.name, y.node->name());
  EXPECT_EQ(mm.op, "MatMul");
  EXPECT_THAT(mm.inputs, ElementsAre("x", "w", "^init"));
  EXPECT_EQ(mm.device, y.node->device());
  // _output_shapes: list { shape { dim { size: -1 } dim { size: 1 } } }
  std::string shape_dims;
  wire::put_bytes_field(shape_dims, 2, "\x08\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01");
  wire::put_bytes_field(shape_dims, 2, "\x08\x01");
  std::string list, value;
  wire::put_bytes_field(list, 7, shape_dims);
  wire::put_bytes_field(value, 1, list);
  EXPECT_EQ(mm.attrs.at("_output_shapes"), value);
  // The placeholder's dtype attr is a DataType enum (DT_FLOAT = 1).
  EXPECT_EQ(nodes[0].name, "x");
  EXPECT_EQ(nodes[0].attrs.at("dtype"), std::string("\x30\x01", 2));
  // The constant's value is a TensorProto with the raw floats.
  const std::string& tensor = nodes[1].attrs.at("value");
  EXPECT_EQ(static_cast<unsigned char>(tensor[0]), 0x42);  // field 8, length-delimited
  EXPECT_NE(
      tensor.find(std::string(reinterpret_cast<const char*>(w.node->attrs().get<Tensor>("value").raw_data()), 12)),
      std::string::npos);
}

// A MetaGraphDef event (Event field 9) holds the bytes given, as TensorFlow's add_meta_graph.
TEST(SummaryWriter, AddMetaGraphWritesTheBytesAsGiven) {
  TempDir dir;
  SummaryWriter writer(dir.path());
  const std::string meta("\x0a\x00\x12\x00", 4);
  writer.add_meta_graph(meta, 7);
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  ASSERT_TRUE(events[1].meta_graph_def);
  EXPECT_EQ(*events[1].meta_graph_def, meta);
  EXPECT_EQ(events[1].step, 7);
  EXPECT_FALSE(events[1].graph_def);
}

// ----- SummaryWriterCache ------------------------------------------------------------------

TEST(SummaryWriterCache, OneWriterPerDirectory) {
  TempDir dir;
  SummaryWriterCache::clear();
  std::shared_ptr<SummaryWriter> a = SummaryWriterCache::get(dir / "a");
  EXPECT_EQ(SummaryWriterCache::get(dir / "a"), a);
  EXPECT_EQ(SummaryWriterCache::get(dir / "a/"), a);
  EXPECT_EQ(SummaryWriterCache::get(dir / "./a"), a);
  std::shared_ptr<SummaryWriter> b = SummaryWriterCache::get(dir / "b");
  EXPECT_NE(a, b);
  EXPECT_EQ(a->logdir(), dir / "a");
  EXPECT_EQ(list_event_files(dir / "a").size(), 1u);  // created at once, as FileWriter does
  a->add_scalar("x", 1, 1);
  SummaryWriterCache::clear();  // closes (so flushes) them
  EXPECT_TRUE(a->closed());
  EXPECT_EQ(read_events(a->path()).size(), 2u);
  std::shared_ptr<SummaryWriter> a2 = SummaryWriterCache::get(dir / "a");
  EXPECT_NE(a2, a);
  EXPECT_FALSE(a2->closed());
  SummaryWriterCache::clear();
}

TEST(SummaryWriterCache, ADirectoryWithoutEventFilesLeavesNoEntry) {
  TempDir dir;
  SummaryWriterCache::clear();
  std::ofstream(dir / "file") << "x";  // a file where a directory should be
  EXPECT_THROW(SummaryWriterCache::get(dir / "file/logs"), Error);
  SummaryWriterCache::clear();  // nothing broken left behind
  std::filesystem::remove(dir / "file");
  EXPECT_NE(SummaryWriterCache::get(dir / "file/logs"), nullptr);  // and a later get works
  SummaryWriterCache::clear();
}

}  // namespace
}  // namespace stepscope
