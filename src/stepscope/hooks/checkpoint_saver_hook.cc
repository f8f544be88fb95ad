#include "stepscope/hooks/checkpoint_saver_hook.h"

#include <filesystem>
#include <sstream>
#include <system_error>
#include <tuple>

#include "stepscope/base/file_io.h"
#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/train/graph_def.h"
#include "stepscope/train/meta_graph.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return (fs::path(dir) / name).string();
}

std::string describe_listener(const CheckpointSaverListener* l) {
  std::ostringstream out;
  out << "<CheckpointSaverListener at " << static_cast<const void*>(l) << ">";
  return out.str();
}

// Checked before the timer is made, as in the reference.
CheckpointSaverOptions checked(CheckpointSaverOptions options) {
  if (options.saver && options.scaffold) throw InvalidArgumentError("You cannot provide both saver and scaffold.");
  return options;
}

}  // namespace

CheckpointSaverHook::CheckpointSaverHook(CheckpointSaverOptions options)
    : options_(checked(std::move(options))),
      save_path_(join_path(options_.checkpoint_dir, options_.checkpoint_basename)),
      timer_(options_.save_secs, options_.save_steps, options_.clock, "save_secs", "save_steps") {
  options_.log.log_info("Create CheckpointSaverHook.");
}

CheckpointSaverHook::~CheckpointSaverHook() = default;

void CheckpointSaverHook::start(Graph* graph) {
  // Made here rather than by the summary writer, for an error that names the directory.
  if (!options_.checkpoint_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options_.checkpoint_dir, ec);
    if (ec) {
      const std::string msg =
          "CheckpointSaverHook: cannot create checkpoint directory '" + options_.checkpoint_dir + "': " + ec.message();
      if (ec == std::errc::permission_denied || ec == std::errc::read_only_file_system)
        throw PermissionDeniedError(msg);
      throw FailedPreconditionError(msg);
    }
  }
  summary_writer_ = SummaryWriterCache::get(options_.checkpoint_dir);
  // Resolved again at the first save: the hook may be reused with another graph.
  saver_ = nullptr;
  owned_saver_.reset();
  meta_graph_of_ = {0, -1, 0};
  global_step_read_ = graph ? global_step_read_for(*graph, "CheckpointSaverHook") : Output{};
  for (CheckpointSaverListener* l : options_.listeners) l->begin();
}

void CheckpointSaverHook::begin() { start(nullptr); }
void CheckpointSaverHook::begin(Graph& graph) { start(&graph); }

Output CheckpointSaverHook::global_step_read(Session& session) {
  if (!global_step_read_) global_step_read_ = global_step_read_for(session.graph(), "CheckpointSaverHook");
  return global_step_read_;
}

Saver& CheckpointSaverHook::saver(Session& session) {
  if (saver_) return *saver_;
  if (options_.saver) {
    saver_ = options_.saver;
  } else if (options_.scaffold) {
    // The scaffold makes its saver when it is finalized (when the session is created).
    if (!options_.scaffold->saver())
      throw FailedPreconditionError("CheckpointSaverHook: the scaffold has no saver yet (finalize() makes it)");
    saver_ = options_.scaffold->saver();
  } else {
    owned_saver_ = std::make_unique<Saver>(session.graph(), SaverOptions{.max_to_keep = 5, .allow_empty = true});
    saver_ = owned_saver_.get();
  }
  // Checkpoints of an earlier run in the same directory count towards max_to_keep, as when
  // TensorFlow restores through the saver.
  if (saver_->last_checkpoints().empty())
    if (auto state = get_checkpoint_state(options_.checkpoint_dir.empty() ? "." : options_.checkpoint_dir))
      saver_->recover_last_checkpoints(state->all_model_checkpoint_paths);
  return *saver_;
}

void CheckpointSaverHook::after_create_session(Session& session, Coordinator&) {
  const int64_t global_step = global_step_value(session.run(global_step_read(session)));
  if (options_.save_graph_def) {
    // Written here rather than in begin(): other hooks may still add to the graph there.
    const Graph& graph = session.graph();
    try {
      write_graph(graph, options_.checkpoint_dir, kGraphFileName);
    } catch (const Error& e) {
      throw_error(e.code(), "CheckpointSaverHook: cannot write the graph into '" +
                                join_path(options_.checkpoint_dir, kGraphFileName) + "': " + e.what());
    }
    if (summary_writer_) {
      summary_writer_->add_graph(graph);
      summary_writer_->add_meta_graph(meta_graph(graph));
    }
  }
  // The checkpoint saved here is the state at step `global_step`, before any training.
  save(session, global_step);
  timer_.update_last_triggered_step(global_step);
}

std::optional<SessionRunArgs> CheckpointSaverHook::before_run(SessionRunContext& run_context) {
  return SessionRunArgs{.fetches = global_step_read(run_context.session())};
}

void CheckpointSaverHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  const int64_t stale_global_step = global_step_value(run_values.results.tensor());
  if (!timer_.should_trigger_for_step(stale_global_step + options_.steps_per_run)) return;
  // The fetched step is from before the run; decide on the step the run really reached.
  Session& session = run_context.session();
  const int64_t global_step = global_step_value(session.run(global_step_read(session)));
  if (timer_.should_trigger_for_step(global_step)) {
    timer_.update_last_triggered_step(global_step);
    if (save(session, global_step)) run_context.request_stop();
  }
}

void CheckpointSaverHook::end(Session& session) {
  const int64_t last_step = global_step_value(session.run(global_step_read(session)));
  if (last_step != timer_.last_triggered_step()) save(session, last_step);
  for (CheckpointSaverListener* l : options_.listeners) l->end(session, last_step);
  if (summary_writer_) summary_writer_->flush();
}

bool CheckpointSaverHook::save(Session& session, int64_t step) {
  const std::string step_str = std::to_string(step);
  options_.log.log_info("Calling checkpoint listeners before saving checkpoint " + step_str + "...");
  for (CheckpointSaverListener* l : options_.listeners) l->before_save(session, step);

  options_.log.log_info("Saving checkpoints for " + step_str + " into " + save_path_ + ".");
  Saver& s = saver(session);
  std::string prefix;
  try {
    prefix = s.save(session, save_path_, step);
  } catch (const Error& e) {
    throw_error(e.code(), "CheckpointSaverHook: cannot save the checkpoint for step " + step_str + " into '" +
                              save_path_ + "-" + step_str + kCheckpointSuffix + "': " + e.what());
  }
  if (options_.save_graph_def) {
    const std::string meta_file = meta_graph_file(prefix);
    try {
      write_file_atomically(meta_file, meta_graph(session.graph()));
    } catch (const Error& e) {
      throw_error(e.code(), "CheckpointSaverHook: cannot write the MetaGraphDef for step " + step_str + " into '" +
                                meta_file + "': " + e.what());
    }
  }
  if (summary_writer_)
    summary_writer_->add_session_log(SessionLog{.status = SessionLog::kCheckpoint, .checkpoint_path = save_path_},
                                     step);

  options_.log.log_info("Calling checkpoint listeners after saving checkpoint " + step_str + "...");
  bool should_stop = false;
  for (CheckpointSaverListener* l : options_.listeners) {
    if (l->after_save(session, step)) {
      options_.log.log_info("A CheckpointSaverListener requested that training be stopped. listener: " +
                            describe_listener(l));
      should_stop = true;
    }
  }
  return should_stop;
}

const std::string& CheckpointSaverHook::meta_graph(const Graph& graph) {
  // Collections may grow while the node count stays (a graph not finalized): count them too.
  size_t collected = 0;
  for (const auto& [key, nodes] : graph.collections()) collected += nodes.size() + 1;
  const std::tuple<uint64_t, int, size_t> of{graph.id(), graph.num_nodes(), collected};
  if (meta_graph_of_ != of) {
    meta_graph_ = meta_graph_def_binary(graph);
    meta_graph_of_ = of;
  }
  return meta_graph_;
}

}  // namespace stepscope
