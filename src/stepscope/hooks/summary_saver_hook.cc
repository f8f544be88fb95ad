#include "stepscope/hooks/summary_saver_hook.h"

#include "stepscope/hooks/scaffold.h"
#include "stepscope/train/variables.h"

namespace stepscope {

namespace {

SummarySaverHookOptions validated(SummarySaverHookOptions options) {
  if ((options.scaffold == nullptr) == options.summary_op.empty())
    throw InvalidArgumentError("Exactly one of scaffold or summary_op must be provided.");
  return options;
}

}  // namespace

SummarySaverHook::SummarySaverHook(SummarySaverHookOptions options)
    : options_(validated(std::move(options))),
      timer_(options_.save_secs, options_.save_steps, options_.clock, "save_secs", "save_steps"),
      writer_(options_.summary_writer) {}

void SummarySaverHook::begin() {
  if (!writer_ && !options_.output_dir.empty()) writer_ = SummaryWriterCache::get(options_.output_dir);
  next_step_.reset();
  global_step_read_ = Output{};
}

void SummarySaverHook::begin(Graph& graph) {
  begin();
  if (!get_global_step(graph)) throw FailedPreconditionError("Global step should be created to use SummarySaverHook.");
  global_step_read_ = get_or_create_global_step_read(graph);
}

void SummarySaverHook::after_create_session(Session& session, Coordinator&) {
  if (global_step_read_) return;
  if (!get_global_step(session.graph()))
    throw FailedPreconditionError("Global step should be created to use SummarySaverHook.");
  global_step_read_ = get_or_create_global_step_read(session.graph());
}

std::vector<Output> SummarySaverHook::summary_ops() const {
  if (!options_.summary_op.empty()) return options_.summary_op;
  if (Output op = options_.scaffold->summary_op()) return {op};
  return {};
}

std::optional<SessionRunArgs> SummarySaverHook::before_run(SessionRunContext&) {
  request_summary_ = !next_step_ || timer_.should_trigger_for_step(*next_step_);
  fetches_summaries_ = false;
  Fetch::Map requests{{"global_step", global_step_read_}};
  if (request_summary_) {
    std::vector<Output> ops = summary_ops();
    fetches_summaries_ = !ops.empty();
    if (fetches_summaries_) requests.emplace("summary", Fetch(Fetch::List(ops.begin(), ops.end())));
  }
  SessionRunArgs args;
  args.fetches = Fetch(std::move(requests));
  return args;
}

void SummarySaverHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  if (!writer_) return;
  const int64_t stale_global_step = global_step_value(run_values.results["global_step"].tensor());
  int64_t global_step = stale_global_step + 1;
  if (!next_step_ || request_summary_) global_step = global_step_value(run_context.session().run(global_step_read_));

  if (!next_step_) {
    SessionLog start;
    start.status = SessionLog::kStart;
    writer_->add_session_log(start, global_step);
  }

  if (request_summary_) {
    timer_.update_last_triggered_step(global_step);
    if (fetches_summaries_) {
      const FetchResult& summaries = run_values.results["summary"];
      for (size_t i = 0; i < summaries.size(); ++i)
        writer_->add_summary(summaries[i].tensor().scalar_value<std::string>(), global_step);
    }
  }
  next_step_ = global_step + 1;
}

void SummarySaverHook::end(Session&) {
  if (writer_) writer_->flush();
}

}  // namespace stepscope
