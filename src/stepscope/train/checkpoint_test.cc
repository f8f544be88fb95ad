// Saver and the checkpoint index: save/restore through a Session, max_to_keep, the index's exact
// text, latest_checkpoint, and failed restores that must leave every variable unchanged.
#include "stepscope/train/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

template <typename F>
void expect_error(F&& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

// A small model: a float matrix, a double vector in a name scope, an int32 counter, a bool mask
// and the global step.
class CheckpointTest : public ::testing::Test {
 protected:
  CheckpointTest() : root(graph) {
    w = make_variable(root, "w", constant(root, std::vector<float>{1, 2, 3, 4}, Shape{2, 2}));
    b = make_variable(root.with_name_scope("layer/"), "b", constant(root, std::vector<double>{0.5, -0.5}, Shape{2}));
    count = make_variable(root, "count", constant(root, int32_t{3}), /*trainable=*/false);
    mask = make_variable(root, "mask", constant(root, std::vector<bool>{true, false, true}, Shape{3}), false);
    step = get_or_create_global_step(root);
    init = global_variables_initializer(root);
  }

  std::unique_ptr<Session> initialized_session() {
    auto s = std::make_unique<Session>(graph);
    s->run(init);
    return s;
  }
  static void set(Session& s, const Variable& v, const Tensor& value) {
    auto& slot = s.resources().variable(*v.node);
    std::lock_guard<std::mutex> lock(slot.mutex);
    slot.value = value;
  }
  // Reads through the graph, as a user would.
  static Tensor get(Session& s, const Variable& v) { return s.run(v.value()); }
  // Every variable's value, to compare before and after a failed restore.
  std::vector<Tensor> snapshot(Session& s) {
    std::vector<Tensor> out;
    for (const Variable& v : global_variables(graph)) out.push_back(get(s, v).deep_copy());
    return out;
  }
  void expect_unchanged(Session& s, const std::vector<Tensor>& before) {
    auto vars = global_variables(graph);
    for (size_t i = 0; i < vars.size(); ++i) EXPECT_TRUE(tensors_equal(get(s, vars[i]), before[i])) << vars[i].name();
  }
  // Values different from the initial ones.
  void train_a_little(Session& s) {
    set(s, w, Tensor::from_vector<float>({5, 6, 7, 8}, Shape{2, 2}));
    set(s, b, Tensor::from_vector<double>({1.25, 2.5}));
    set(s, count, Tensor::scalar<int32_t>(9));
    set(s, mask, Tensor::from_vector<bool>({false, true, true}));
    set(s, step, Tensor::scalar<int64_t>(42));
  }

  Graph graph;
  Scope root;
  Variable w, b, count, mask, step;
  Node* init = nullptr;
  TempDir dir;
};

TEST_F(CheckpointTest, SaveAndRestoreRoundTrip) {
  auto sess = initialized_session();
  train_a_little(*sess);
  Saver saver(graph);
  EXPECT_EQ(saver.var_list().size(), 5u);
  const std::string prefix = saver.save(*sess, dir.file("model.ckpt"), 42);
  EXPECT_EQ(prefix, dir.file("model.ckpt-42"));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"checkpoint", "model.ckpt-42.safetensors"}));

  SafetensorsFile f = load_checkpoint(prefix);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{
                            {"format", "stepscope.checkpoint"}, {"format_version", "1"}, {"global_step", "42"}}));
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.find("w")->to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(f.find("w")->shape(), (Shape{2, 2}));
  EXPECT_EQ(f.find("layer/b")->to_vector<double>(), (std::vector<double>{1.25, 2.5}));
  EXPECT_EQ(f.find("count")->scalar_value<int32_t>(), 9);
  EXPECT_EQ(f.find("mask")->to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(f.find("global_step")->scalar_value<int64_t>(), 42);

  // Back to the initial values, then restore.
  sess->run(init);
  EXPECT_EQ(get(*sess, w).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  saver.restore(*sess, prefix);
  EXPECT_EQ(get(*sess, w).to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(get(*sess, b).to_vector<double>(), (std::vector<double>{1.25, 2.5}));
  EXPECT_EQ(get(*sess, count).scalar_value<int32_t>(), 9);
  EXPECT_EQ(get(*sess, mask).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(get(*sess, step).scalar_value<int64_t>(), 42);

  // Restoring initializes the variables of a fresh session: no initializer needed.
  Session fresh(graph);
  saver.restore(fresh, prefix);
  EXPECT_EQ(get(fresh, w).to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(get(fresh, step).scalar_value<int64_t>(), 42);
  // The file's name works as well as the prefix.
  Session fresh2(graph);
  saver.restore(fresh2, prefix + ".safetensors");
  EXPECT_EQ(get(fresh2, count).scalar_value<int32_t>(), 9);
}

TEST_F(CheckpointTest, SaveWithoutGlobalStep) {
  auto sess = initialized_session();
  Saver saver(graph);
  EXPECT_EQ(saver.save(*sess, dir.file("model.ckpt")), dir.file("model.ckpt"));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"checkpoint", "model.ckpt.safetensors"}));
  EXPECT_EQ(read_text(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt\"\nall_model_checkpoint_paths: \"model.ckpt\"\n");
  EXPECT_EQ(load_checkpoint(dir.file("model.ckpt")).metadata.count("global_step"), 0u);
  // Saving again under the same name replaces it (listed once).
  saver.save(*sess, dir.file("model.ckpt"));
  EXPECT_THAT(saver.last_checkpoints(), ElementsAre(dir.file("model.ckpt")));
  // A prefix given with the suffix does not get it twice.
  EXPECT_EQ(saver.save(*sess, dir.file("other.safetensors"), 3), dir.file("other-3"));
  EXPECT_TRUE(fs::exists(dir.file("other-3.safetensors")));
}

TEST_F(CheckpointTest, IndexFileExactContent) {
  auto sess = initialized_session();
  Saver saver(graph);
  for (int64_t s : {100, 200, 300}) saver.save(*sess, dir.file("model.ckpt"), s);
  EXPECT_EQ(read_text(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-300\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-100\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-200\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-300\"\n");
  std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
  ASSERT_TRUE(state);
  EXPECT_EQ(state->model_checkpoint_path, dir.file("model.ckpt-300"));
  EXPECT_THAT(state->all_model_checkpoint_paths,
              ElementsAre(dir.file("model.ckpt-100"), dir.file("model.ckpt-200"), dir.file("model.ckpt-300")));
}

TEST_F(CheckpointTest, MaxToKeepDeletesTheOldest) {
  auto sess = initialized_session();
  Saver saver(graph, {.max_to_keep = 2});
  for (int64_t s = 1; s <= 4; ++s) saver.save(*sess, dir.file("model.ckpt"), s);
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{"checkpoint", "model.ckpt-3.safetensors", "model.ckpt-4.safetensors"}));
  EXPECT_THAT(saver.last_checkpoints(), ElementsAre(dir.file("model.ckpt-3"), dir.file("model.ckpt-4")));
  EXPECT_EQ(read_text(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-4\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-3\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-4\"\n");
  // Saving an existing step again makes it the newest: the other one goes next.
  saver.save(*sess, dir.file("model.ckpt"), 3);
  saver.save(*sess, dir.file("model.ckpt"), 5);
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{"checkpoint", "model.ckpt-3.safetensors", "model.ckpt-5.safetensors"}));
}

// A checkpoint's MetaGraphDef (`<prefix>.meta`, written beside it by CheckpointSaverHook) goes
// with it, as TensorFlow's Saver deletes the meta graph of a checkpoint it drops.
TEST_F(CheckpointTest, MaxToKeepDeletesTheMetaGraphsToo) {
  auto sess = initialized_session();
  Saver saver(graph, {.max_to_keep = 2});
  for (int64_t s = 1; s <= 3; ++s) {
    const std::string prefix = saver.save(*sess, dir.file("model.ckpt"), s);
    EXPECT_EQ(meta_graph_file(prefix), prefix + ".meta");
    EXPECT_EQ(meta_graph_file(checkpoint_file(prefix)), prefix + ".meta");
    std::ofstream(meta_graph_file(prefix)) << "meta";
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"checkpoint", "model.ckpt-2.meta", "model.ckpt-2.safetensors",
                                                     "model.ckpt-3.meta", "model.ckpt-3.safetensors"}));
}

TEST_F(CheckpointTest, MaxToKeepZeroKeepsEveryFile) {
  auto sess = initialized_session();
  Saver saver(graph, {.max_to_keep = 0});
  for (int64_t s = 1; s <= 3; ++s) saver.save(*sess, dir.file("model.ckpt"), s);
  EXPECT_EQ(dir.entries().size(), 4u);
  EXPECT_EQ(read_text(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-3\"\nall_model_checkpoint_paths: \"model.ckpt-3\"\n");
}

TEST_F(CheckpointTest, RecoverLastCheckpointsFromAPreviousRun) {
  auto sess = initialized_session();
  {
    Saver first(graph, {.max_to_keep = 3});
    for (int64_t s = 1; s <= 3; ++s) first.save(*sess, dir.file("model.ckpt"), s);
  }
  fs::remove(dir.file("model.ckpt-2.safetensors"));
  Saver second(graph, {.max_to_keep = 3});
  second.recover_last_checkpoints(get_checkpoint_state(dir.path())->all_model_checkpoint_paths);
  EXPECT_THAT(second.last_checkpoints(), ElementsAre(dir.file("model.ckpt-1"), dir.file("model.ckpt-3")));
  second.save(*sess, dir.file("model.ckpt"), 4);
  second.save(*sess, dir.file("model.ckpt"), 5);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"checkpoint", "model.ckpt-3.safetensors",
                                                     "model.ckpt-4.safetensors", "model.ckpt-5.safetensors"}));
}

TEST_F(CheckpointTest, ConcurrentSavesKeepTheIndexConsistent) {
  auto sess = initialized_session();
  Saver saver(graph, {.max_to_keep = 3});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) saver.save(*sess, dir.file("model.ckpt"), t * 100 + i);
    });
  for (auto& th : threads) th.join();
  std::vector<std::string> kept = saver.last_checkpoints();
  ASSERT_EQ(kept.size(), 3u);
  std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
  ASSERT_TRUE(state);
  EXPECT_EQ(state->all_model_checkpoint_paths, kept);
  EXPECT_EQ(state->model_checkpoint_path, kept.back());
  std::vector<std::string> files;
  for (const auto& p : kept) files.push_back(fs::path(p).filename().string() + ".safetensors");
  files.push_back("checkpoint");
  std::sort(files.begin(), files.end());
  EXPECT_EQ(dir.entries(), files);
}

TEST_F(CheckpointTest, LatestCheckpoint) {
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
  EXPECT_FALSE(latest_checkpoint(dir.file("no_such_dir")).has_value());
  EXPECT_FALSE(get_checkpoint_state(dir.path()).has_value());
  auto sess = initialized_session();
  Saver saver(graph);
  saver.save(*sess, dir.file("model.ckpt"), 10);
  saver.save(*sess, dir.file("model.ckpt"), 20);
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-20"));
  // TensorFlow returns None when the index names a checkpoint that is gone.
  fs::remove(dir.file("model.ckpt-20.safetensors"));
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
}

TEST_F(CheckpointTest, IndexAsTensorFlowWritesIt) {
  // Newer TensorFlow adds timestamps; text format allows comments, single quotes and escapes.
  write_text(dir.file("checkpoint"),
             "# written by hand\n"
             "model_checkpoint_path: \"model.ckpt-7\"\n"
             "all_model_checkpoint_paths: 'model.ckpt-6'\n"
             "all_model_checkpoint_paths: \"model\\056ckpt-7\"\n"
             "all_model_checkpoint_paths: \"/abs/path/x\"\n"
             "all_model_checkpoint_timestamps: 1712345678.25\n"
             "last_preserved_timestamp: 1.7e9\n");
  std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
  ASSERT_TRUE(state);
  EXPECT_EQ(state->model_checkpoint_path, dir.file("model.ckpt-7"));
  EXPECT_THAT(state->all_model_checkpoint_paths,
              ElementsAre(dir.file("model.ckpt-6"), dir.file("model.ckpt-7"), "/abs/path/x"));
}

TEST_F(CheckpointTest, IndexRoundTripsOddNames) {
  CheckpointState state{dir.file("we\"ird\\näme\n-1"), {dir.file("a b"), dir.file("we\"ird\\näme\n-1")}};
  update_checkpoint_state(dir.path(), state);
  const std::string text = read_text(dir.file("checkpoint"));
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), "model_checkpoint_path: \"we\\\"ird\\\\n\\303\\244me\\n-1\"\n");
  std::optional<CheckpointState> back = get_checkpoint_state(dir.path());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->model_checkpoint_path, state.model_checkpoint_path);
  EXPECT_EQ(back->all_model_checkpoint_paths, state.all_model_checkpoint_paths);
}

TEST_F(CheckpointTest, CorruptIndexIsDataLoss) {
  const std::string index = dir.file("checkpoint");
  for (const std::string& text :
       {std::string(""), std::string("model_checkpoint_path: \"\"\n"),
        std::string("all_model_checkpoint_paths: \"a\"\n"), std::string("model_checkpoint_path \"a\"\n"),
        std::string("model_checkpoint_path: \"a\n"), std::string("model_checkpoint_path: a\n"),
        std::string("unknown_field: \"a\"\nmodel_checkpoint_path: \"a\"\n"),
        std::string("model_checkpoint_path: \"a\\q\"\n"), std::string("\x01\x02\xff"),
        std::string("last_preserved_timestamp: abc\nmodel_checkpoint_path: \"a\"\n")}) {
    write_text(index, text);
    expect_error([&] { get_checkpoint_state(dir.path()); }, ErrorCode::kDataLoss, {"corrupt checkpoint index", index});
    expect_error([&] { latest_checkpoint(dir.path()); }, ErrorCode::kDataLoss, {index});
  }
}

TEST_F(CheckpointTest, UninitializedVariableIsFailedPrecondition) {
  Session sess(graph);
  Saver saver(graph);
  expect_error([&] { saver.save(sess, dir.file("model.ckpt"), 1); }, ErrorCode::kFailedPrecondition,
               {"uninitialized value w"});
  EXPECT_TRUE(dir.entries().empty());
}

TEST_F(CheckpointTest, SaveIntoMissingDirectoryIsNotFound) {
  auto sess = initialized_session();
  Saver saver(graph);
  const std::string missing = dir.file("missing");
  expect_error([&] { saver.save(*sess, missing + "/model.ckpt", 1); }, ErrorCode::kNotFound, {missing});
  EXPECT_TRUE(dir.entries().empty());
  EXPECT_TRUE(saver.last_checkpoints().empty());
}

TEST_F(CheckpointTest, RestoreMissingFileChangesNothing) {
  auto sess = initialized_session();
  train_a_little(*sess);
  auto before = snapshot(*sess);
  Saver saver(graph);
  expect_error([&] { saver.restore(*sess, dir.file("model.ckpt-9")); }, ErrorCode::kNotFound,
               {dir.file("model.ckpt-9.safetensors")});
  expect_unchanged(*sess, before);
}

TEST_F(CheckpointTest, RestoreCorruptFileChangesNothing) {
  auto sess = initialized_session();
  Saver saver(graph);
  const std::string prefix = saver.save(*sess, dir.file("model.ckpt"), 1);
  const std::string file = prefix + ".safetensors";
  const std::string good = read_text(file);
  train_a_little(*sess);
  auto before = snapshot(*sess);
  for (size_t len : {size_t{0}, size_t{5}, size_t{40}, good.size() - 1}) {
    write_text(file, good.substr(0, len));
    expect_error([&] { saver.restore(*sess, prefix); }, ErrorCode::kDataLoss, {file});
    expect_unchanged(*sess, before);
  }
  std::string flipped = good;
  flipped[12] ^= 0x55;  // inside the JSON header
  write_text(file, flipped);
  EXPECT_THROW(saver.restore(*sess, prefix), Error);
  expect_unchanged(*sess, before);
}

TEST_F(CheckpointTest, RestoreMissingVariableChangesNothing) {
  auto sess = initialized_session();
  // A checkpoint of everything but the global step.
  Saver partial(graph, {.var_list = {w, b, count, mask}});
  const std::string prefix = partial.save(*sess, dir.file("partial"));
  EXPECT_EQ(load_checkpoint(prefix).tensors.size(), 4u);
  train_a_little(*sess);
  auto before = snapshot(*sess);
  Saver all(graph, {.var_list = {w, b, count, mask, step}});  // the absent one last: nothing may be assigned before it
  expect_error([&] { all.restore(*sess, prefix); }, ErrorCode::kNotFound,
               {"global_step", "not found in checkpoint", prefix + ".safetensors"});
  expect_unchanged(*sess, before);
  // A saver of fewer variables ignores the others in the file.
  Saver only_w(graph, {.var_list = {w}});
  only_w.restore(*sess, all.save(*sess, dir.file("full")));
  EXPECT_EQ(get(*sess, w).to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
}

TEST_F(CheckpointTest, RestoreMismatchedShapeOrDtypeChangesNothing) {
  auto sess = initialized_session();
  train_a_little(*sess);
  auto before = snapshot(*sess);
  Saver saver(graph);
  auto other = [&](const std::string& name, const Tensor& w_value) {
    NamedTensors t = {{"w", w_value},
                      {"layer/b", Tensor::from_vector<double>({0, 0})},
                      {"count", Tensor::scalar<int32_t>(0)},
                      {"mask", Tensor::from_vector<bool>({false, false, false})},
                      {"global_step", Tensor::scalar<int64_t>(0)}};
    save_safetensors(dir.file(name + ".safetensors"), t);
    return dir.file(name);
  };
  expect_error(
      [&] {
        saver.restore(*sess, other("shape", Tensor::from_vector<float>({1, 2, 3, 4})));
      },
      ErrorCode::kInvalidArgument, {"'w'", "float32[2,2]", "float32[4]", dir.file("shape.safetensors")});
  expect_unchanged(*sess, before);
  expect_error(
      [&] {
        saver.restore(*sess, other("dtype", Tensor::from_vector<double>({1, 2, 3, 4}, Shape{2, 2})));
      },
      ErrorCode::kInvalidArgument, {"'w'", "float32[2,2]", "float64[2,2]", dir.file("dtype.safetensors")});
  expect_unchanged(*sess, before);
  // A file of the same names from another tool restores fine.
  saver.restore(*sess, other("foreign", Tensor::from_vector<float>({0, 0, 0, 1}, Shape{2, 2})));
  EXPECT_EQ(get(*sess, w).to_vector<float>(), (std::vector<float>{0, 0, 0, 1}));
}

TEST_F(CheckpointTest, NewerFormatVersionIsUnimplemented) {
  auto sess = initialized_session();
  Saver saver(graph, {.var_list = {w}});
  save_safetensors(dir.file("v2.safetensors"),
                   NamedTensors{{"w", Tensor::from_vector<float>({0, 0, 0, 0}, Shape{2, 2})}},
                   {{"format", "stepscope.checkpoint"}, {"format_version", "2"}});
  expect_error([&] { saver.restore(*sess, dir.file("v2")); }, ErrorCode::kUnimplemented, {"format version 2"});
  EXPECT_EQ(get(*sess, w).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(CheckpointTest, SaverArgumentErrors) {
  Graph other;
  Variable foreign = make_variable(Scope(other), "v", constant(Scope(other), 1.0f));
  expect_error(
      [&] {
        Saver s(graph, {.var_list = {w, foreign}});
      },
      ErrorCode::kInvalidArgument, {"'v'", "another graph"});
  expect_error([&] { Saver s(graph, {.var_list = {w, w}}); }, ErrorCode::kInvalidArgument, {"'w'", "twice"});
  expect_error([&] { Saver s(graph, {.var_list = {w, Variable{}}}); }, ErrorCode::kInvalidArgument, {"null"});
  expect_error([&] { Saver s(graph, {.max_to_keep = -1}); }, ErrorCode::kInvalidArgument, {"max_to_keep"});
  Graph empty;
  expect_error([&] { Saver s(empty); }, ErrorCode::kInvalidArgument, {"no variables to save"});
  Saver allowed(empty, {.allow_empty = true});
  Session empty_sess(empty);
  EXPECT_EQ(load_checkpoint(allowed.save(empty_sess, dir.file("nothing"))).tensors.size(), 0u);

  Saver saver(graph);
  Session other_sess(other);
  expect_error([&] { saver.save(other_sess, dir.file("x")); }, ErrorCode::kInvalidArgument, {"another graph"});
  auto sess = initialized_session();
  expect_error([&] { saver.save(*sess, dir.path() + "/"); }, ErrorCode::kInvalidArgument, {"not a file prefix"});
  sess->close();
  expect_error([&] { saver.save(*sess, dir.file("x")); }, ErrorCode::kCancelled, {"closed"});
}

// Issue 12 (9): flipped bits or NaNs in tensor data loaded without a word (554 of 3,000
// mutated files were accepted). Checkpoints carry CRC-32C checksums in their metadata.
TEST_F(CheckpointTest, DamagedTensorDataFailsTheChecksum) {
  auto sess = initialized_session();
  train_a_little(*sess);
  Saver saver(graph);
  const std::string prefix = saver.save(*sess, dir.file("model.ckpt"), 42);
  const std::string file = prefix + ".safetensors";
  const std::string good = read_text(file);
  // The checksums are in the metadata, for other tools to ignore, and removed on load.
  const SafetensorsFile raw = load_safetensors(file);
  EXPECT_EQ(raw.metadata.count("crc32c:w"), 1u);
  EXPECT_EQ(raw.metadata.count("crc32c:__metadata__"), 1u);
  EXPECT_EQ(load_checkpoint(prefix).metadata.count("crc32c:w"), 0u);

  auto before = snapshot(*sess);
  // w is float32[2,2] = {5,6,7,8}; the writer orders by dtype, so its 16 bytes come last but
  // for count (int32, 4 bytes) and mask (bool, 3 bytes).
  const size_t w_at = good.size() - 3 - 4 - 16;
  ASSERT_EQ(good.substr(w_at, 4), std::string("\x00\x00\xa0\x40", 4));  // 5.0f
  for (int bit : {0, 22, 30}) {
    std::string damaged = good;
    damaged[w_at + 1 + bit / 8] ^= static_cast<char>(1 << (bit % 8));
    write_text(file, damaged);
    expect_error([&] { saver.restore(*sess, prefix); }, ErrorCode::kDataLoss,
                 {"corrupt checkpoint '" + file + "'", "checksum mismatch in tensor 'w'"});
    expect_unchanged(*sess, before);
  }
  std::string nan = good;
  nan.replace(w_at, 4, std::string("\x00\x00\xc0\x7f", 4));
  write_text(file, nan);
  expect_error([&] { load_checkpoint(prefix); }, ErrorCode::kDataLoss, {file, "tensor 'w'"});
  // The metadata too: global_step 42 -> 43 is the same length, a valid file otherwise.
  std::string step = good;
  const size_t at = step.find("\"global_step\":\"42\"");
  ASSERT_NE(at, std::string::npos);
  step[at + 16] = '3';
  write_text(file, step);
  expect_error([&] { saver.restore(*sess, prefix); }, ErrorCode::kDataLoss, {file, "checksum mismatch in the metadata"});
  expect_unchanged(*sess, before);
  // A tensor whose name was damaged has no checksum.
  std::string renamed = good;
  const size_t count_at = renamed.find("\"count\":{");
  ASSERT_NE(count_at, std::string::npos);
  renamed[count_at + 1] = 'k';
  write_text(file, renamed);
  expect_error([&] { load_checkpoint(prefix); }, ErrorCode::kDataLoss, {file, "tensor 'kount' has no checksum"});
  write_text(file, good);
  saver.restore(*sess, prefix);
}

TEST_F(CheckpointTest, FilesWithoutChecksumsStillLoad) {
  auto sess = initialized_session();
  Saver saver(graph, {.var_list = {w}});
  save_safetensors(dir.file("old.safetensors"),
                   NamedTensors{{"w", Tensor::from_vector<float>({0, 0, 0, 1}, Shape{2, 2})}},
                   {{"format", "stepscope.checkpoint"}, {"format_version", "1"}});
  saver.restore(*sess, dir.file("old"));
  EXPECT_EQ(get(*sess, w).to_vector<float>(), (std::vector<float>{0, 0, 0, 1}));
}

// Falling back to an older checkpoint happens only when asked, and says which file was skipped.
TEST_F(CheckpointTest, RestoreLatestFallsBackOnlyWhenAsked) {
  auto sess = initialized_session();
  Saver saver(graph);
  for (int64_t s : {1, 2, 3}) {
    set(*sess, step, Tensor::scalar<int64_t>(s));
    saver.save(*sess, dir.file("model.ckpt"), s);
  }
  const std::string newest = dir.file("model.ckpt-3.safetensors");
  std::string bytes = read_text(newest);
  bytes[bytes.size() - 4] ^= 1;  // inside the data
  write_text(newest, bytes);

  Saver other(graph);
  Session fresh(graph);
  expect_error([&] { other.restore_latest(fresh, dir.path()); }, ErrorCode::kDataLoss, {newest});
  std::vector<std::string> warnings;
  const std::optional<std::string> restored = other.restore_latest(
      fresh, dir.path(), {.fall_back_to_older = true, .warn = [&](const std::string& s) { warnings.push_back(s); }});
  EXPECT_EQ(restored, dir.file("model.ckpt-2"));
  EXPECT_EQ(get(fresh, step).scalar_value<int64_t>(), 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("skipping checkpoint '" + newest + "': corrupt checkpoint"));
  EXPECT_THAT(warnings[0], HasSubstr("trying '" + dir.file("model.ckpt-2.safetensors") + "'"));
  EXPECT_EQ(other.last_checkpoints(), (std::vector<std::string>{dir.file("model.ckpt-1"), dir.file("model.ckpt-2"),
                                                                dir.file("model.ckpt-3")}));
  // Every one damaged: the last error.
  for (const char* name : {"model.ckpt-1.safetensors", "model.ckpt-2.safetensors"}) {
    std::string b = read_text(dir.file(name));
    b[b.size() - 4] ^= 1;
    write_text(dir.file(name), b);
  }
  expect_error([&] { other.restore_latest(fresh, dir.path(), {.fall_back_to_older = true, .warn = [](auto&) {}}); },
               ErrorCode::kDataLoss, {dir.file("model.ckpt-1.safetensors")});
  EXPECT_EQ(other.restore_latest(fresh, dir.file("nothing-here")), std::nullopt);
}

// The in-memory parser of the index (a fuzzing entry point) and its size limit.
TEST_F(CheckpointTest, ParseCheckpointStateAndTheIndexSizeLimit) {
  const CheckpointState s =
      parse_checkpoint_state("model_checkpoint_path: \"a-2\"\nall_model_checkpoint_paths: \"a-1\"\n", "mem");
  EXPECT_EQ(s.model_checkpoint_path, "a-2");
  EXPECT_EQ(s.all_model_checkpoint_paths, std::vector<std::string>{"a-1"});
  expect_error([] { parse_checkpoint_state("nonsense", "mem"); }, ErrorCode::kDataLoss, {"'mem'"});
  write_text(dir.file("checkpoint"), "model_checkpoint_path: \"a\"\n");
  fs::resize_file(dir.file("checkpoint"), kMaxCheckpointIndexBytes + 1);
  expect_error([&] { get_checkpoint_state(dir.path()); }, ErrorCode::kDataLoss,
               {dir.file("checkpoint"), "more than the limit of 16777216"});
}

}  // namespace
}  // namespace stepscope
