#include "stepscope/train/summary_writer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <type_traits>
#include <variant>

#include "stepscope/base/proto_wire.h"
#include "stepscope/graph/node.h"

namespace stepscope {

namespace wire = proto_wire;

namespace {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ----- GraphDef (tensorflow/core/framework/graph.proto and friends) ------------------------

std::string shape_proto(const Shape& s) {
  std::string out;
  if (!s.known_rank()) {
    wire::put_int_field(out, 3, 1);  // unknown_rank
    return out;
  }
  for (int64_t d : s.dims()) {
    std::string dim;
    if (d != 0) wire::put_int_field(dim, 1, d);  // -1 stands for an unknown size, as in TensorFlow
    wire::put_bytes_field(out, 2, dim);
  }
  return out;
}

std::string tensor_proto(const Tensor& t) {
  std::string out;
  if (!t.initialized()) return out;
  wire::put_int_field(out, 1, tf_datatype(t.dtype()));
  wire::put_bytes_field(out, 2, shape_proto(t.shape()));
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.flat<std::string>()) wire::put_bytes_field(out, 8, s);
  } else if (t.bytes() > 0) {
    wire::put_bytes_field(out, 4, std::string_view(static_cast<const char*>(t.raw_data()), t.bytes()));
  }
  return out;
}

std::string attr_value_proto(const AttrValue& value) {
  std::string out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          wire::put_int_field(out, 5, v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          wire::put_int_field(out, 3, v);
        } else if constexpr (std::is_same_v<T, double>) {
          wire::put_float_field(out, 4, static_cast<float>(v));
        } else if constexpr (std::is_same_v<T, std::string>) {
          wire::put_bytes_field(out, 2, v);
        } else if constexpr (std::is_same_v<T, DType>) {
          wire::put_int_field(out, 6, tf_datatype(v));
        } else if constexpr (std::is_same_v<T, Shape>) {
          wire::put_bytes_field(out, 7, shape_proto(v));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string packed, list;
          for (int64_t i : v) wire::put_varint(packed, static_cast<uint64_t>(i));
          if (!packed.empty()) wire::put_bytes_field(list, 3, packed);
          wire::put_bytes_field(out, 1, list);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          wire::put_bytes_field(out, 8, tensor_proto(v));
        } else {
          wire::put_bytes_field(out, 2, v ? v->describe() : std::string());
        }
      },
      value);
  return out;
}

void put_attr(std::string& node_def, std::string_view key, const std::string& value_proto) {
  std::string entry;
  wire::put_bytes_field(entry, 1, key);
  wire::put_bytes_field(entry, 2, value_proto);
  wire::put_bytes_field(node_def, 5, entry);
}

std::string input_name(const Output& in) {
  return in.index == 0 ? in.node->name() : in.node->name() + ":" + std::to_string(in.index);
}

std::string graph_def_proto(const Graph& graph) {
  std::string out;
  for (const auto& node : graph.nodes()) {
    std::string def;
    wire::put_bytes_field(def, 1, node->name());
    wire::put_bytes_field(def, 2, node->op_type());
    for (const Output& in : node->inputs()) wire::put_bytes_field(def, 3, input_name(in));
    for (const Node* c : node->control_inputs()) wire::put_bytes_field(def, 3, "^" + c->name());
    if (!node->device().empty()) wire::put_bytes_field(def, 4, node->device());
    for (const auto& [key, value] : node->attrs().items()) put_attr(def, key, attr_value_proto(value));
    if (node->num_outputs() > 0) {
      std::string shapes;
      for (int i = 0; i < node->num_outputs(); ++i)
        wire::put_bytes_field(shapes, 7, shape_proto(node->output_shape(i)));
      std::string value;
      wire::put_bytes_field(value, 1, shapes);
      put_attr(def, "_output_shapes", value);
    }
    wire::put_bytes_field(out, 1, def);
  }
  return out;
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
  event.graph_def = graph_def_proto(graph);
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
