#include "stepscope/train/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "stepscope/base/file_io.h"
#include "stepscope/base/proto_message.h"
#include "stepscope/train/event_file.h"  // crc32c

namespace stepscope {

namespace fs = std::filesystem;

namespace {

bool ends_with_suffix(const std::string& s) { return s.ends_with(kCheckpointSuffix); }

std::string parent_dir(const std::string& path) {
  std::string dir = fs::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

std::string index_path(const std::string& dir) { return (fs::path(dir) / kCheckpointIndexName).string(); }

void check_session(const Graph& graph, Session& session, const char* what) {
  if (&session.graph() != &graph)
    throw InvalidArgumentError(std::string("Saver::") + what + ": the session runs another graph than the saver's");
  if (session.closed()) throw CancelledError("Attempted to use a closed Session.");
}

// ---------------------------------------------------------------------------------------------
// Checksums (see checkpoint.h): "crc32c:<tensor>" per tensor and "crc32c:__metadata__" for the
// other metadata, as 8 hex digits, in the file's __metadata__ so other tools still read it.

constexpr std::string_view kCrcPrefix = "crc32c:";
const std::string kMetadataCrcKey = std::string(kCrcPrefix) + "__metadata__";

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

uint32_t tensor_crc(const Tensor& t) { return crc32c(t.raw_data(), static_cast<size_t>(t.bytes())); }

// Every metadata entry but the checksums, "key\0value\0" in key order (std::map's).
uint32_t metadata_crc(const std::map<std::string, std::string>& metadata) {
  uint32_t crc = 0;
  for (const auto& [k, v] : metadata) {
    if (k.starts_with(kCrcPrefix)) continue;
    crc = crc32c(k.data(), k.size() + 1, crc);  // with the terminating NUL as a separator
    crc = crc32c(v.data(), v.size() + 1, crc);
  }
  return crc;
}

void add_checksums(const NamedTensors& tensors, std::map<std::string, std::string>& metadata) {
  metadata[kMetadataCrcKey] = hex8(metadata_crc(metadata));
  for (const auto& [name, t] : tensors) metadata[std::string(kCrcPrefix) + name] = hex8(tensor_crc(t));
}

[[noreturn]] void checksum_failed(const std::string& file, const std::string& what) {
  throw DataLossError("corrupt checkpoint '" + file + "': " + what +
                      " (the file was damaged after it was written; restore an older checkpoint)");
}

// Checks a file's checksums when it has them (older files and other tools' have none) and
// removes them from its metadata. DataLossError naming the file and the tensor at fault.
void verify_checksums(SafetensorsFile& file, const std::string& name) {
  auto& md = file.metadata;
  if (auto first = md.lower_bound(std::string(kCrcPrefix)); first == md.end() || !first->first.starts_with(kCrcPrefix))
    return;
  auto bad = [&](const std::string& what) { checksum_failed(name, what); };
  auto stored = [&](const std::string& key, const std::string& what) {
    auto it = md.find(key);
    if (it == md.end()) checksum_failed(name, what + " has no checksum while the file has checksums");
    return it->second;
  };
  if (const std::string want = stored(kMetadataCrcKey, "the metadata"), got = hex8(metadata_crc(md)); want != got)
    bad("checksum mismatch in the metadata (stored " + want + ", computed " + got + ")");
  for (const auto& [tensor, t] : file.tensors) {
    const std::string want = stored(std::string(kCrcPrefix) + tensor, "tensor '" + tensor + "'");
    if (const std::string got = hex8(tensor_crc(t)); want != got)
      bad("checksum mismatch in tensor '" + tensor + "' (stored " + want + ", computed " + got + ")");
  }
  // Every checksum belongs to a tensor (or is the metadata's): one more means a tensor's name
  // was damaged or a tensor dropped.
  if (std::erase_if(md, [&](const auto& entry) { return entry.first.starts_with(kCrcPrefix); }) !=
      file.tensors.size() + 1)
    bad("a checksum names no tensor of the file");
}

std::string describe(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + shape.to_string(); }

// ---------------------------------------------------------------------------------------------
// The index: protobuf text format, as TensorFlow's text_format writes and reads it.

class IndexParser {
 public:
  IndexParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  CheckpointState parse() {
    CheckpointState state;
    bool has_model_path = false;
    for (;;) {
      skip_space_and_comments();
      if (pos_ >= text_.size()) break;
      std::string key = identifier();
      skip_space_and_comments();
      if (!consume(':')) fail("expected ':' after " + key);
      skip_space_and_comments();
      if (key == "model_checkpoint_path") {
        state.model_checkpoint_path = string_value();  // text_format.Merge: the last one wins
        has_model_path = true;
      } else if (key == "all_model_checkpoint_paths") {
        state.all_model_checkpoint_paths.push_back(string_value());
      } else if (key == "all_model_checkpoint_timestamps" || key == "last_preserved_timestamp") {
        number_value();  // written by newer TensorFlow; stepscope does not use them
      } else {
        fail("unknown field '" + key + "'");
      }
      skip_space_and_comments();
      if (pos_ < text_.size() && (text_[pos_] == ',' || text_[pos_] == ';')) ++pos_;
    }
    if (!has_model_path || state.model_checkpoint_path.empty()) fail("no model_checkpoint_path");
    return state;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n';
    throw DataLossError("corrupt checkpoint index '" + path_ + "' (line " + std::to_string(line) + "): " + why);
  }
  bool consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  std::string identifier() {
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (pos_ == start) fail("expected a field name");
    return std::string(text_.substr(start, pos_ - start));
  }
  void number_value() {
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
                                   text_[pos_] == '-' || text_[pos_] == '+'))
      ++pos_;
    std::string token(text_.substr(start, pos_ - start));
    char* end = nullptr;
    errno = 0;
    std::strtod(token.c_str(), &end);
    if (token.empty() || end != token.c_str() + token.size()) fail("expected a number");
  }
  // One or more adjacent quoted strings (text format concatenates them).
  std::string string_value() {
    std::string out;
    bool any = false;
    for (;;) {
      if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) break;
      any = true;
      const char quote = text_[pos_++];
      for (;;) {
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated string");
        char c = text_[pos_++];
        if (c == quote) break;
        if (c != '\\') {
          out += c;
          continue;
        }
        if (pos_ >= text_.size()) fail("unterminated string");
        char e = text_[pos_++];
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'a':
            out += '\a';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'v':
            out += '\v';
            break;
          case '?':
            out += '?';
            break;
          case '"':
            out += '"';
            break;
          case '\'':
            out += '\'';
            break;
          case '\\':
            out += '\\';
            break;
          case 'x': {
            int v = 0, digits = 0;
            while (digits < 2 && pos_ < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
              v = v * 16 + std::stoi(std::string(1, text_[pos_++]), nullptr, 16);
              ++digits;
            }
            if (digits == 0) fail("bad \\x escape");
            out += static_cast<char>(v);
            break;
          }
          default:
            if (e >= '0' && e <= '7') {
              int v = e - '0', digits = 1;
              while (digits < 3 && pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '7') {
                v = v * 8 + (text_[pos_++] - '0');
                ++digits;
              }
              if (v > 255) fail("bad octal escape");
              out += static_cast<char>(v);
            } else {
              fail(std::string("bad escape \\") + e);
            }
        }
      }
      skip_space_and_comments();
    }
    if (!any) fail("expected a quoted string");
    return out;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// `path` as the index stores it: relative to `dir` (os.path.relpath, as TensorFlow's
// save_relative_paths), so that a directory can be moved or copied whole.
std::string relative_to(const std::string& path, const std::string& dir) {
  std::error_code ec;
  fs::path abs_dir = fs::absolute(dir, ec).lexically_normal();
  if (ec) return path;
  fs::path abs_path = fs::absolute(path, ec).lexically_normal();
  if (ec) return path;
  fs::path rel = abs_path.lexically_relative(abs_dir);
  return rel.empty() ? path : rel.string();
}

void remove_checkpoint_files(const std::string& prefix) {
  std::error_code ec;
  fs::remove(checkpoint_file(prefix), ec);  // like TensorFlow: a checkpoint already gone is fine
  fs::remove(meta_graph_file(prefix), ec);  // and its MetaGraphDef, when one was written
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string checkpoint_file(const std::string& prefix) {
  return ends_with_suffix(prefix) ? prefix : prefix + kCheckpointSuffix;
}

std::string meta_graph_file(const std::string& prefix) {
  const std::string base =
      ends_with_suffix(prefix) ? prefix.substr(0, prefix.size() - std::strlen(kCheckpointSuffix)) : prefix;
  return base + kMetaGraphSuffix;
}

bool checkpoint_exists(const std::string& prefix) {
  std::error_code ec;
  return fs::is_regular_file(checkpoint_file(prefix), ec);
}

SafetensorsFile load_checkpoint(const std::string& prefix) {
  SafetensorsFile file;
  try {
    file = load_safetensors(checkpoint_file(prefix));
  } catch (const Error& e) {
    throw_error(e.code(), "cannot read checkpoint '" + prefix + "': " + e.what());
  }
  verify_checksums(file, checkpoint_file(prefix));
  return file;
}

CheckpointState parse_checkpoint_state(std::string_view text, const std::string& source) {
  return IndexParser(text, source).parse();
}

std::optional<CheckpointState> get_checkpoint_state(const std::string& dir) {
  const std::string path = index_path(dir);
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (!fs::exists(status)) return std::nullopt;
  if (!fs::is_regular_file(status)) throw DataLossError("corrupt checkpoint index '" + path + "': not a regular file");
  // The size first: a hostile or broken index is refused before it is read.
  if (const uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxCheckpointIndexBytes)
    throw DataLossError("corrupt checkpoint index '" + path + "': " + std::to_string(size) +
                        " bytes, more than the limit of " + std::to_string(kMaxCheckpointIndexBytes) +
                        " (an index lists file names; delete or rewrite it)");
  std::string text;
  try {
    text = read_file(path, 0, Gunzip::kNever);
  } catch (const Error& e) {
    throw_error(e.code(), std::string("cannot read checkpoint index: ") + e.what());
  }
  CheckpointState state = parse_checkpoint_state(text, path);
  auto join = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (fs::path(dir) / p).string(); };
  state.model_checkpoint_path = join(state.model_checkpoint_path);
  for (auto& p : state.all_model_checkpoint_paths) p = join(p);
  return state;
}

void update_checkpoint_state(const std::string& dir, const CheckpointState& state) {
  std::vector<std::string> all = state.all_model_checkpoint_paths;
  // TensorFlow's generate_checkpoint_state_proto: the latest is always the last listed.
  if (all.empty() || all.back() != state.model_checkpoint_path) all.push_back(state.model_checkpoint_path);
  std::string text =
      "model_checkpoint_path: \"" + proto_text_escape(relative_to(state.model_checkpoint_path, dir)) + "\"\n";
  for (const auto& p : all) text += "all_model_checkpoint_paths: \"" + proto_text_escape(relative_to(p, dir)) + "\"\n";
  write_file_atomically(index_path(dir), text, /*gzip=*/false, /*sync=*/true);
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  std::optional<CheckpointState> state = get_checkpoint_state(dir);
  if (!state || !checkpoint_exists(state->model_checkpoint_path)) return std::nullopt;
  return state->model_checkpoint_path;
}

// ---------------------------------------------------------------------------------------------

Saver::Saver(Graph& graph, SaverOptions options) : graph_(graph), options_(std::move(options)) {
  if (options_.var_list.empty()) options_.var_list = global_variables(graph_);
  if (options_.var_list.empty() && !options_.allow_empty) throw InvalidArgumentError("Saver: no variables to save");
  if (options_.max_to_keep < 0)
    throw InvalidArgumentError("Saver: max_to_keep must be >= 0, got " + std::to_string(options_.max_to_keep));
  std::set<std::string> names;
  for (const Variable& v : options_.var_list) {
    if (!v) throw InvalidArgumentError("Saver: var_list holds a null variable");
    if (&v.node->graph() != &graph_)
      throw InvalidArgumentError("Saver: variable '" + v.name() + "' is from another graph");
    if (v.node->op_type() != "VariableV2") throw InvalidArgumentError("Saver: '" + v.name() + "' is not a variable");
    if (!names.insert(v.name()).second)
      throw InvalidArgumentError("Saver: variable '" + v.name() + "' is listed twice");
  }
}

std::string Saver::save(Session& session, const std::string& save_path_prefix, int64_t global_step) {
  check_session(graph_, session, "save");
  std::string base = save_path_prefix;
  if (ends_with_suffix(base)) base.resize(base.size() - std::strlen(kCheckpointSuffix));
  if (base.empty() || base.back() == '/')
    throw InvalidArgumentError("Saver::save: '" + save_path_prefix +
                               "' is not a file prefix (expected e.g. 'dir/model.ckpt')");
  const std::string prefix = global_step >= 0 ? base + "-" + std::to_string(global_step) : base;
  const std::string file = checkpoint_file(prefix);

  // Take every value first: nothing is written when one variable is not initialized. The
  // training kernels replace a slot's tensor rather than write into it, so holding a reference
  // is a consistent snapshot of each variable.
  NamedTensors tensors;
  tensors.reserve(options_.var_list.size());
  for (const Variable& v : options_.var_list) {
    auto& slot = session.resources().variable(*v.node);
    Tensor value;
    {
      std::lock_guard<std::mutex> lock(slot.mutex);
      value = slot.value;
    }
    if (!value.initialized())
      throw FailedPreconditionError("Attempting to use uninitialized value " + v.name() + " (saving checkpoint '" +
                                    file + "')");
    tensors.emplace_back(v.name(), std::move(value));
  }
  std::map<std::string, std::string> metadata = {{"format", kCheckpointFormat},
                                                 {"format_version", std::to_string(kCheckpointFormatVersion)}};
  if (global_step >= 0) metadata["global_step"] = std::to_string(global_step);
  add_checksums(tensors, metadata);
  save_safetensors(file, tensors, metadata);

  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> kept = last_checkpoints_, to_delete;
  if (options_.max_to_keep > 0) {
    std::erase(kept, prefix);
    kept.push_back(prefix);
    while (static_cast<int>(kept.size()) > options_.max_to_keep) {
      to_delete.push_back(kept.front());
      kept.erase(kept.begin());
    }
  }
  // The index first, then the deletions: a crash in between leaves extra files, never an index
  // naming a deleted checkpoint.
  update_checkpoint_state(parent_dir(prefix), CheckpointState{prefix, kept});
  last_checkpoints_ = std::move(kept);
  for (const auto& old : to_delete) remove_checkpoint_files(old);
  return prefix;
}

void Saver::restore(Session& session, const std::string& path_prefix) {
  check_session(graph_, session, "restore");
  SafetensorsFile file = load_checkpoint(path_prefix);
  const std::string name = checkpoint_file(path_prefix);
  if (auto it = file.metadata.find("format"); it != file.metadata.end() && it->second == kCheckpointFormat) {
    auto version = file.metadata.find("format_version");
    if (version == file.metadata.end() || version->second != std::to_string(kCheckpointFormatVersion))
      throw UnimplementedError("checkpoint '" + name + "' has format version " +
                               (version == file.metadata.end() ? std::string("(none)") : version->second) +
                               "; this stepscope reads version " + std::to_string(kCheckpointFormatVersion));
  }
  std::unordered_map<std::string_view, const Tensor*> by_name;
  for (const auto& [n, t] : file.tensors) by_name.emplace(n, &t);
  // Check every variable before assigning any, so a bad checkpoint changes nothing.
  std::vector<const Tensor*> values;
  values.reserve(options_.var_list.size());
  for (const Variable& v : options_.var_list) {
    auto it = by_name.find(v.name());
    if (it == by_name.end())
      throw NotFoundError("Key " + v.name() + " not found in checkpoint '" + name + "' (restoring variable '" +
                          v.name() + "')");
    const Tensor& t = *it->second;
    if (t.dtype() != v.dtype() || !v.shape().compatible_with(t.shape()))
      throw InvalidArgumentError("cannot restore variable '" + v.name() + "' of " + describe(v.dtype(), v.shape()) +
                                 " from checkpoint '" + name + "', which holds it as " +
                                 describe(t.dtype(), t.shape()));
    values.push_back(&t);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    auto& slot = session.resources().variable(*options_.var_list[i].node);
    std::lock_guard<std::mutex> lock(slot.mutex);
    slot.value = *values[i];
  }
}

std::optional<std::string> Saver::restore_latest(Session& session, const std::string& dir,
                                                const RestoreOptions& options) {
  std::optional<CheckpointState> state = get_checkpoint_state(dir);
  if (!state || state->model_checkpoint_path.empty()) return std::nullopt;
  // Newest first: the latest, then the others the index keeps, newest to oldest.
  std::vector<std::string> candidates{state->model_checkpoint_path};
  if (options.fall_back_to_older)
    for (auto it = state->all_model_checkpoint_paths.rbegin(); it != state->all_model_checkpoint_paths.rend(); ++it)
      if (std::find(candidates.begin(), candidates.end(), *it) == candidates.end()) candidates.push_back(*it);
  for (size_t i = 0;; ++i) {
    try {
      restore(session, candidates[i]);
      recover_last_checkpoints(state->all_model_checkpoint_paths);
      return candidates[i];
    } catch (const DataLossError& e) {
      if (i + 1 == candidates.size()) throw;
      const std::string line = "skipping checkpoint '" + checkpoint_file(candidates[i]) + "': " + e.what() +
                               "; trying '" + checkpoint_file(candidates[i + 1]) + "'";
      if (options.warn)
        options.warn(line);
      else
        std::cerr << "WARNING: " << line << std::endl;
    }
  }
}

std::vector<std::string> Saver::last_checkpoints() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_checkpoints_;
}

void Saver::recover_last_checkpoints(const std::vector<std::string>& prefixes) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_checkpoints_.clear();
  for (const auto& p : prefixes)
    if (checkpoint_exists(p) &&
        std::find(last_checkpoints_.begin(), last_checkpoints_.end(), p) == last_checkpoints_.end())
      last_checkpoints_.push_back(p);
}

}  // namespace stepscope
