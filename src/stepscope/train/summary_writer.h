// SummaryWriter: TensorFlow 1.x's tf.summary.FileWriter — adds summaries, session logs, the
// graph and tagged run metadata to a TensorBoard event file in a log directory — and
// SummaryWriterCache, one shared writer per directory (tf.summary.FileWriterCache), which the
// hooks use when given only an output_dir.
//
//   auto writer = SummaryWriterCache::get("runs/digits");
//   writer->add_scalar("loss", 0.25f, /*step=*/100);
//   writer->flush();   // runs/digits/events.out.tfevents.<seconds>.<host> now holds it
//
// Events are stamped with the wall-clock time. They are buffered; they reach the file when
// `max_queue` events are pending, when `flush_secs` have passed since the last flush (checked as
// events are added: there is no background thread), on flush() and on close(). Write failures
// are thrown from the call that writes (see EventFileWriter). All methods are thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stepscope/graph/graph.h"
#include "stepscope/train/event_file.h"

namespace stepscope {

struct SummaryWriterOptions {
  int max_queue = 10;                // pending events that trigger a flush
  double flush_secs = 120;           // seconds after which an add flushes what is pending
  std::string filename_suffix = {};  // appended to the event file's name
};

class SummaryWriter {
 public:
  // Creates the directory if needed and a new event file in it (see EventFileWriter for the
  // name and the errors), holding the file_version event.
  explicit SummaryWriter(const std::string& logdir, SummaryWriterOptions options = {});
  ~SummaryWriter();  // close(); an error there goes to stderr
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // The `step` of each add is the global step the event belongs to; without one the event has
  // step 0 (TensorFlow's global_step=None).
  //
  // A Summary, as a summary op's output would be written. The metadata of a tag is kept only on
  // its first value in each file (TensorBoard reads it from there), as FileWriter does.
  void add_summary(const Summary& summary, std::optional<int64_t> step = std::nullopt);
  // A serialized Summary (the string a summary op outputs); InvalidArgumentError if it is not one.
  void add_summary(std::string_view serialized_summary, std::optional<int64_t> step = std::nullopt);
  // Shorthands for summaries of simple values.
  void add_scalar(const std::string& tag, float value, std::optional<int64_t> step = std::nullopt);
  void add_scalars(const std::vector<std::pair<std::string, float>>& values,
                   std::optional<int64_t> step = std::nullopt);
  // SessionLog START / STOP / CHECKPOINT (with checkpoint_path) events.
  void add_session_log(const SessionLog& session_log, std::optional<int64_t> step = std::nullopt);
  // The graph as a serialized GraphDef (TensorBoard's Graphs tab): per node its name, op type,
  // inputs ("node", "node:1", "^control"), device, attributes and "_output_shapes"
  // (train/graph_def.h).
  void add_graph(const Graph& graph, std::optional<int64_t> step = std::nullopt);
  // A MetaGraphDef event holding `meta_graph_def` (the bytes of a serialized MetaGraphDef, e.g.
  // meta_graph_def_binary() of train/meta_graph.h, as given): TensorFlow's add_meta_graph.
  void add_meta_graph(std::string meta_graph_def, std::optional<int64_t> step = std::nullopt);
  // A TaggedRunMetadata event holding `run_metadata` (the bytes of a serialized RunMetadata, as
  // given) under `tag`; a tag used before by this writer is InvalidArgumentError ("The provided
  // tag was already used for this event type").
  void add_run_metadata(const std::string& tag, std::string run_metadata, std::optional<int64_t> step = std::nullopt);
  // Any event, written as given (wall_time and step included).
  void add_event(const Event& event);

  // Writes pending events and syncs the file.
  void flush();
  // Flushes and closes the file. Events added afterwards are dropped, as in TensorFlow, until
  // reopen(). Idempotent.
  void close();
  // After close(): starts a new event file in the same directory.
  void reopen();

  const std::string& logdir() const { return logdir_; }
  // The file being written (the last one after close()).
  std::string path() const;
  bool closed() const;

 private:
  void write(Event event, std::optional<int64_t> step);  // stamps wall_time, takes the lock
  void write_locked(const Event& event);

  const std::string logdir_;
  const SummaryWriterOptions options_;
  mutable std::mutex mu_;
  std::unique_ptr<EventFileWriter> file_;
  std::string last_path_;
  int pending_ = 0;
  double last_flush_ = 0;
  std::set<std::string> seen_summary_tags_;  // tags whose metadata this file already has
  std::set<std::string> run_metadata_tags_;
};

// One SummaryWriter per log directory, shared by whoever asks for it (TensorFlow's
// FileWriterCache). Directories are compared after lexical normalisation ("runs/x/" and
// "runs/./x" are the same; "" is "."). A writer stays cached until clear().
class SummaryWriterCache {
 public:
  static std::shared_ptr<SummaryWriter> get(const std::string& logdir);
  // Closes every cached writer and forgets them (holders keep a closed writer).
  static void clear();
};

}  // namespace stepscope
