// Checkpoints as TensorFlow 1.x users know them (tf.train.Saver, tf.train.latest_checkpoint),
// stored as safetensors files so that other tools can open them.
//
// A checkpoint is one file `<prefix>.safetensors` (e.g. runs/mnist/model.ckpt-1000.safetensors)
// holding every saved variable under its node name ("hidden/dense/kernel", "global_step"), with
// metadata {"format": "stepscope.checkpoint", "format_version": "1", "global_step": "1000"}.
// Beside it, the text file `checkpoint` lists the checkpoints the saver keeps, in TensorFlow's
// CheckpointState text format with paths relative to the directory:
//
//   model_checkpoint_path: "model.ckpt-1000"
//   all_model_checkpoint_paths: "model.ckpt-800"
//   all_model_checkpoint_paths: "model.ckpt-900"
//   all_model_checkpoint_paths: "model.ckpt-1000"
//
// Both files are replaced atomically, so a crash never leaves a half-written checkpoint or index.
//
// Checksums: the metadata also holds "crc32c:<tensor name>" for every tensor (CRC-32C of its
// bytes) and "crc32c:__metadata__" (of the other entries, "key\0value\0" in key order), each as
// 8 lowercase hex digits; other safetensors readers ignore them. load_checkpoint and restore
// verify them when present (a mismatch is a DataLossError naming the file and the tensor) and
// remove them from the metadata they return; files without them (older stepscope, other tools)
// load as before. A damaged newest checkpoint is an error unless the restore is asked to fall
// back (RestoreOptions::fall_back_to_older).
//
// Limits: the index file is at most kMaxCheckpointIndexBytes; the checkpoint file has
// safetensors.h's (header length, offsets, dtype x shape against the data size, overflow).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/runtime/session.h"
#include "stepscope/train/safetensors.h"
#include "stepscope/train/variables.h"

namespace stepscope {

inline constexpr const char* kCheckpointSuffix = ".safetensors";
// The MetaGraphDef written beside a checkpoint (`<prefix>.meta`, train/meta_graph.h).
inline constexpr const char* kMetaGraphSuffix = ".meta";
inline constexpr const char* kCheckpointIndexName = "checkpoint";
inline constexpr const char* kCheckpointFormat = "stepscope.checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;

struct SaverOptions {
  // The variables to save and restore; empty means every global variable when the Saver is made.
  std::vector<Variable> var_list = {};
  // Checkpoints kept on disk; older ones are deleted as new ones are saved. 0 keeps every file
  // (the index then lists only the latest, as in TensorFlow).
  int max_to_keep = 5;
  // Without it, a Saver with nothing to save is an error (TensorFlow's "No variables to save").
  bool allow_empty = false;
};

class Saver {
 public:
  explicit Saver(Graph& graph, SaverOptions options = {});
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Writes the variables' current values to `<save_path_prefix>-<global_step>.safetensors`
  // (without "-<step>" when global_step is negative), records it in the directory's index and
  // deletes the checkpoints beyond max_to_keep, oldest first (with the `<prefix>.meta` beside
  // each, as TensorFlow deletes the MetaGraphDef of a checkpoint it drops). Returns the checkpoint's prefix
  // ("runs/x/model.ckpt-100"), which restore() takes. FailedPreconditionError names a variable
  // that is not initialized; file-system errors name the path. Thread-safe.
  std::string save(Session& session, const std::string& save_path_prefix, int64_t global_step = -1);

  // Assigns every variable of the saver its value in the checkpoint `path_prefix` (a path ending
  // in ".safetensors" is taken as the file itself). Everything is checked before any variable
  // changes: a missing or corrupt file (NotFoundError / DataLossError naming it), a variable
  // absent from the file (NotFoundError naming both) or stored with another dtype or shape
  // (InvalidArgumentError naming both) leaves every variable as it was. Extra tensors in the file
  // are ignored.
  void restore(Session& session, const std::string& path_prefix);

  struct RestoreOptions {
    // When the newest checkpoint is corrupt (DataLossError: damaged bytes, failed checksum),
    // try the older ones the index lists, newest first, reporting each file skipped and why.
    // Off by default: resuming from an older state silently is the user's decision to make.
    bool fall_back_to_older = false;
    // Where the skipped files are reported; empty: stderr ("WARNING: skipping checkpoint ...").
    std::function<void(const std::string&)> warn = {};
  };
  // Restores the newest checkpoint listed in `dir`'s index (see above for the fallback) and
  // adopts the listed ones (recover_last_checkpoints). Returns the prefix restored, nullopt when
  // `dir` has no index. Errors as restore() (the last one tried, when falling back).
  std::optional<std::string> restore_latest(Session& session, const std::string& dir,
                                            const RestoreOptions& options);
  std::optional<std::string> restore_latest(Session& session, const std::string& dir) {
    return restore_latest(session, dir, RestoreOptions{});
  }

  // The checkpoints this saver keeps, oldest first (prefixes as save() returned them).
  std::vector<std::string> last_checkpoints() const;
  // Adopts checkpoints written earlier (e.g. by a previous run: pass
  // get_checkpoint_state(dir)->all_model_checkpoint_paths) so that max_to_keep counts them;
  // prefixes whose file is gone are dropped.
  void recover_last_checkpoints(const std::vector<std::string>& prefixes);
  const std::vector<Variable>& var_list() const { return options_.var_list; }

 private:
  Graph& graph_;
  SaverOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::string> last_checkpoints_;
};

// The index of a checkpoint directory, paths joined with the directory unless absolute.
struct CheckpointState {
  std::string model_checkpoint_path;
  std::vector<std::string> all_model_checkpoint_paths;
};

// The index file's limit: it lists file names, so 16 MiB is far beyond any real one.
inline constexpr uint64_t kMaxCheckpointIndexBytes = uint64_t{16} << 20;

// Reads `<dir>/checkpoint`: nullopt when there is none; DataLossError naming it when it cannot
// be parsed, names no model_checkpoint_path or is larger than kMaxCheckpointIndexBytes.
std::optional<CheckpointState> get_checkpoint_state(const std::string& dir);
// The index's text format in memory, paths as written (get_checkpoint_state joins them with the
// directory); `source` names the text in errors. DataLossError as get_checkpoint_state.
CheckpointState parse_checkpoint_state(std::string_view text, const std::string& source);
// Writes `<dir>/checkpoint` atomically; paths inside `dir` are stored relative to it.
void update_checkpoint_state(const std::string& dir, const CheckpointState& state);
// The prefix of the newest checkpoint in `dir`, nullopt when there is none or its file is gone
// (as tf.train.latest_checkpoint returns None); DataLossError for a corrupt index.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// `<prefix>.safetensors` (or `prefix` itself when it already names the file).
std::string checkpoint_file(const std::string& prefix);
// `<prefix>.meta`, the MetaGraphDef file of a checkpoint (a trailing ".safetensors" dropped).
std::string meta_graph_file(const std::string& prefix);
bool checkpoint_exists(const std::string& prefix);
// Every tensor of a checkpoint (tf.train.load_checkpoint), its checksums verified (see above);
// errors as load_safetensors, naming the checkpoint.
SafetensorsFile load_checkpoint(const std::string& prefix);

}  // namespace stepscope
