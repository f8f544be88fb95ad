#include "stepscope/train/summary_writer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "stepscope/train/graph_def.h"

namespace stepscope {

namespace {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

// ----- SummaryWriter -----------------------------------------------------------------------

SummaryWriter::SummaryWriter(const std::string& logdir, SummaryWriterOptions options)
    : logdir_(logdir.empty() ? "." : logdir), options_(std::move(options)) {
  file_ = std::make_unique<EventFileWriter>(logdir_, options_.filename_suffix);
  last_path_ = file_->path();
  last_flush_ = steady_now();
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepscope: closing summary writer for '%s': %s\n", logdir_.c_str(), e.what());
  }
}

void SummaryWriter::add_summary(const Summary& summary, std::optional<int64_t> step) {
  Event event;
  event.summary = summary;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Summary::Value& v : event.summary->value) {
      if (!v.metadata) continue;
      if (!seen_summary_tags_.insert(v.tag).second) v.metadata.reset();
    }
  }
  write(std::move(event), step);
}

void SummaryWriter::add_summary(std::string_view serialized_summary, std::optional<int64_t> step) {
  std::string why;
  std::optional<Summary> summary = Summary::parse(serialized_summary, &why);
  if (!summary) throw InvalidArgumentError("add_summary: the bytes given are not a serialized Summary (" + why + ")");
  add_summary(*summary, step);
}

void SummaryWriter::add_scalar(const std::string& tag, float value, std::optional<int64_t> step) {
  add_scalars({{tag, value}}, step);
}

void SummaryWriter::add_scalars(const std::vector<std::pair<std::string, float>>& values, std::optional<int64_t> step) {
  Summary summary;
  for (const auto& [tag, value] : values) summary.value.push_back(Summary::scalar(tag, value));
  add_summary(summary, step);
}

void SummaryWriter::add_session_log(const SessionLog& session_log, std::optional<int64_t> step) {
  Event event;
  event.session_log = session_log;
  write(std::move(event), step);
}

void SummaryWriter::add_graph(const Graph& graph, std::optional<int64_t> step) {
  Event event;
  event.graph_def = graph_def_binary(graph);
  write(std::move(event), step);
}

void SummaryWriter::add_meta_graph(std::string meta_graph_def, std::optional<int64_t> step) {
  Event event;
  event.meta_graph_def = std::move(meta_graph_def);
  write(std::move(event), step);
}

void SummaryWriter::add_run_metadata(const std::string& tag, std::string run_metadata, std::optional<int64_t> step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!run_metadata_tags_.insert(tag).second)
      throw InvalidArgumentError("The provided tag was already used for this event type");
  }
  Event event;
  event.tagged_run_metadata = TaggedRunMetadata{tag, std::move(run_metadata)};
  write(std::move(event), step);
}

void SummaryWriter::add_event(const Event& event) {
  std::lock_guard<std::mutex> lock(mu_);
  write_locked(event);
}

void SummaryWriter::write(Event event, std::optional<int64_t> step) {
  event.wall_time = wall_time_now();
  if (step) event.step = *step;
  std::lock_guard<std::mutex> lock(mu_);
  write_locked(event);
}

void SummaryWriter::write_locked(const Event& event) {
  if (!file_ || file_->closed()) return;  // closed: dropped, as TensorFlow's FileWriter does
  file_->write_event(event);
  ++pending_;
  const double now = steady_now();
  if (pending_ >= options_.max_queue || now - last_flush_ >= options_.flush_secs) {
    pending_ = 0;
    last_flush_ = now;
    file_->flush();
  }
}

void SummaryWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  pending_ = 0;
  last_flush_ = steady_now();
  file_->flush();
  last_path_ = file_->path();
}

void SummaryWriter::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  std::unique_ptr<EventFileWriter> file = std::move(file_);
  last_path_ = file->path();
  file->close();
}

void SummaryWriter::reopen() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_) return;
  file_ = std::make_unique<EventFileWriter>(logdir_, options_.filename_suffix);
  last_path_ = file_->path();
  pending_ = 0;
  last_flush_ = steady_now();
  seen_summary_tags_.clear();  // the new file needs each tag's metadata again
}

std::string SummaryWriter::path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return file_ ? file_->path() : last_path_;
}

bool SummaryWriter::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !file_;
}

// ----- SummaryWriterCache ------------------------------------------------------------------

namespace {

struct WriterCache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<SummaryWriter>> writers;
};

WriterCache& writer_cache() {
  // Destroyed at exit, which closes (and so flushes) the writers nobody else holds.
  static WriterCache cache;
  return cache;
}

std::string cache_key(const std::string& logdir) {
  std::string key = std::filesystem::path(logdir.empty() ? "." : logdir).lexically_normal().string();
  while (key.size() > 1 && key.back() == '/') key.pop_back();
  return key;
}

}  // namespace

std::shared_ptr<SummaryWriter> SummaryWriterCache::get(const std::string& logdir) {
  WriterCache& cache = writer_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  const std::string key = cache_key(logdir);
  auto it = cache.writers.find(key);
  if (it != cache.writers.end()) return it->second;
  // Made before it is cached: a directory where no event file can be created leaves no entry.
  auto writer = std::make_shared<SummaryWriter>(logdir);
  cache.writers.emplace(key, writer);
  return writer;
}

void SummaryWriterCache::clear() {
  std::map<std::string, std::shared_ptr<SummaryWriter>> writers;
  {
    WriterCache& cache = writer_cache();
    std::lock_guard<std::mutex> lock(cache.mu);
    writers.swap(cache.writers);
  }
  for (auto& [dir, writer] : writers) writer->close();
}

}  // namespace stepscope
