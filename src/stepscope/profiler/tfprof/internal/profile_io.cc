#include "stepscope/profiler/tfprof/internal/profile_io.h"

#include <zlib.h>

#include "stepscope/base/error.h"
#include "stepscope/base/proto_wire.h"
#include "stepscope/base/version.h"

namespace stepscope::tfprof {
namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void u8(uint8_t v) { out_ += static_cast<char>(v); }
  void u32(uint32_t v) {
    char bytes[4];
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    out_.append(bytes, 4);
  }
  // Into a local buffer, then one append: a step's chunk is ~20 varints a node.
  void varint(uint64_t v) {
    uint8_t bytes[10];
    const uint8_t* end = proto_wire::put_varint(bytes, v);
    out_.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(end - bytes));
  }
  void zz(int64_t v) { varint(proto_wire::zigzag(v)); }
  void str(std::string_view s) {
    varint(s.size());
    out_.append(s);
  }
  void dims(const std::vector<int64_t>& d) {
    varint(d.size());
    for (int64_t x : d) zz(x);
  }

 private:
  std::string& out_;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError("corrupt profile file '" + path_ + "': " + what);
  }
  bool done() const { return pos_ == bytes_.size(); }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(bytes_[pos_++]);
  }
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = u8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("bad varint");
  }
  int64_t zz() {
    const uint64_t v = varint();
    return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  }
  // A count of items each taking at least `min_bytes` bytes: bounded by what is left, so a
  // count can never make the reader allocate more than a constant times the file's size.
  size_t count(size_t min_bytes = 1) {
    const uint64_t n = varint();
    if (n > (bytes_.size() - pos_) / min_bytes)
      fail("a count (" + std::to_string(n) + ") exceeds the data (" + std::to_string(bytes_.size() - pos_) +
           " bytes left)");
    return static_cast<size_t>(n);
  }
  // base + a zigzag delta; the sum must fit (signed overflow is undefined behaviour).
  int64_t zz_plus(int64_t base, const char* what) {
    const int64_t delta = zz();
    int64_t sum;
    if (__builtin_add_overflow(base, delta, &sum))
      fail(std::string(what) + " out of range (" + std::to_string(base) + " + " + std::to_string(delta) + ")");
    return sum;
  }
  std::string str() {
    const size_t n = count();
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::vector<int64_t> dims() {
    std::vector<int64_t> d(count());
    for (int64_t& x : d) x = zz();
    return d;
  }
  // Dims as tfprof_dims wrote them ({} for an unknown rank).
  Shape shape() {
    const std::vector<int64_t> d = dims();
    if (d.empty()) return Shape::unknown_rank();
    if (d.size() > static_cast<size_t>(Shape::kMaxRank))
      fail("a shape of rank " + std::to_string(d.size()) + " (at most " + std::to_string(Shape::kMaxRank) + ")");
    for (int64_t x : d)
      if (x < -1) fail("a shape with dimension " + std::to_string(x));
    return Shape(std::span<const int64_t>(d));
  }
  std::string_view take(size_t n) {
    need(n);
    std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  void need(size_t n) const {
    if (n > bytes_.size() - pos_) fail("truncated");
  }
  std::string_view bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::string chunk(char tag, const std::string& payload) {
  std::string out;
  out.reserve(payload.size() + 9);
  Writer w(out);
  w.u8(static_cast<uint8_t>(tag));
  w.u32(static_cast<uint32_t>(payload.size()));
  out += payload;
  w.u32(static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(payload.data()), payload.size())));
  return out;
}

}  // namespace

std::string encode_header() {
  std::string out(kProfileMagic);
  Writer(out).u32(kProfileFormatVersion);
  std::string version;
  Writer(version).str(STEPSCOPE_VERSION);
  return out + chunk('V', version);
}

std::string encode_model_chunk(const ProfileModel& model) {
  std::string p;
  p.reserve(model.nodes.size() * 96);
  Writer w(p);
  w.varint(model.nodes.size());
  for (const ModelNode& n : model.nodes) {
    w.str(n.name);
    w.str(n.op);
    const SourceLocation& site = model.site_of(n);
    w.str(site.file);
    w.varint(static_cast<uint64_t>(site.line < 0 ? 0 : site.line));
    w.str(site.function);
    w.zz(n.graph_id);
    w.varint(n.num_inputs);
    for (const ModelInput& in : model.inputs_of(n)) {
      w.varint(static_cast<uint64_t>(in.node));
      w.zz(in.slot);
    }
    w.varint(n.trainable ? 1 : 0);
    w.dims(n.shape);
    w.zz(n.parameters);
    w.zz(n.static_float_ops);
    w.str(n.data_format);
  }
  return chunk('M', p);
}

std::string encode_traces_chunk(const ProfileModel& model) {
  size_t entries = 0;
  for (const ModelNode& n : model.nodes) entries += n.stack.empty() ? 0 : 1;
  if (entries == 0) return {};
  std::string p;
  Writer w(p);
  w.varint(model.frames.size());
  for (const SourceLocation& f : model.frames) {
    w.str(f.file);
    w.varint(static_cast<uint64_t>(f.line < 0 ? 0 : f.line));
    w.str(f.function);
  }
  w.varint(entries);
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const std::vector<int32_t>& stack = model.nodes[i].stack;
    if (stack.empty()) continue;
    w.varint(i);
    w.varint(stack.size());
    for (int32_t f : stack) w.varint(static_cast<uint64_t>(f));
  }
  return chunk('K', p);
}

std::string encode_collectives_chunk(const ProfileModel& model) {
  size_t entries = 0;
  for (const ModelNode& n : model.nodes) entries += n.collective_ranks > 0 ? 1 : 0;
  if (entries == 0) return {};
  std::string p;
  Writer w(p);
  w.varint(entries);
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    if (model.nodes[i].collective_ranks <= 0) continue;
    w.varint(i);
    w.varint(static_cast<uint64_t>(model.nodes[i].collective_ranks));
  }
  return chunk('C', p);
}

std::string encode_state_chunk(const ProfileModel& model) {
  std::string p;
  Writer w(p);
  w.varint(model.devices.size());
  for (const std::string& d : model.device_labels) w.str(d);
  w.varint(model.miss_accelerator_stream ? 1 : 0);
  w.varint(model.nodes.size());
  for (const ModelNode& n : model.nodes) {
    w.zz(n.device);
    // No shapes for a node whose inputs came from its label (none known).
    w.varint(n.input_shapes_known ? n.num_inputs : 0);
    if (n.input_shapes_known)
      for (const ModelInput& in : model.inputs_of(n)) w.dims(tfprof_dims(in.shape));
  }
  return chunk('D', p);
}

std::string encode_step_chunk(int64_t step, const StepData& data) {
  std::string p;
  p.reserve(data.nodes.size() * 24 + data.execs.size() * 24 + 32);
  Writer w(p);
  w.zz(step);
  w.zz(data.base_ns);
  w.zz(data.base_wall_ns);
  w.varint(data.nodes.size());
  for (const NodeStep& r : data.nodes) {
    w.varint(static_cast<uint64_t>(r.node));
    w.varint(static_cast<uint64_t>(r.run_count));
    w.zz(r.accelerator_micros);
    w.zz(r.cpu_micros);
    w.zz(r.requested_bytes);
    w.zz(r.peak_bytes);
    w.zz(r.residual_bytes);
    w.zz(r.output_bytes);
    w.zz(r.float_ops);
    w.zz(r.all_start_micros);
    w.zz(r.latest_end_micros - r.all_start_micros);
  }
  w.varint(data.execs.size());
  for (const ExecRecord& e : data.execs) {
    w.varint(static_cast<uint64_t>(e.node));
    w.varint(static_cast<uint64_t>(e.device));
    w.varint(e.thread_id);
    w.zz(e.all_start_ns - data.base_ns);
    w.zz(e.scheduled_ns - e.all_start_ns);
    w.zz(e.op_start_rel_ns);
    w.zz(e.op_end_rel_ns);
    w.zz(e.all_end_rel_ns);
  }
  std::string out = chunk('S', p);
  if (data.memory) {
    // 'B': the step's peak memory by kind, right after its 'S'.
    std::string b;
    Writer wb(b);
    wb.zz(step);
    wb.zz(data.memory->peak_bytes);
    wb.zz(data.memory->persistent_bytes);
    wb.zz(data.memory->transient_peak_bytes);
    wb.zz(data.memory->peak_time_ns);
    wb.varint(kNumMemoryKinds);
    for (int64_t bytes : data.memory->bytes) wb.zz(bytes);
    out += chunk('B', b);
  }
  if (!data.input_stages.empty()) {
    // 'I': the input pipelines' stages, after the step's 'S' (and 'B').
    std::string p2;
    Writer wi(p2);
    wi.zz(step);
    wi.varint(data.input_stages.size());
    for (const InputStage& s : data.input_stages) {
      wi.str(s.node);
      wi.str(s.stage);
      wi.zz(s.self_ns);
      wi.zz(s.calls);
    }
    out += chunk('I', p2);
  }
  return out;
}

std::string encode_dropped_chunk(const ProfileModel& model) {
  size_t entries = 0;
  for (const DroppedTotals& d : model.dropped) entries += d.steps > 0;
  if (entries == 0) return {};
  std::string p;
  Writer w(p);
  w.varint(entries);
  for (size_t i = 0; i < model.dropped.size(); ++i) {
    const DroppedTotals& d = model.dropped[i];
    if (d.steps == 0) continue;
    w.varint(i);
    w.varint(static_cast<uint64_t>(d.steps));
    for (int64_t NodeStats::*field : kSummedNodeStats) w.zz(d.sums.*field);
  }
  return chunk('A', p);
}

std::string encode_timings_chunk(const StepTimings& timings) {
  if (timings.empty()) return {};
  std::string p;
  p.reserve(timings.size() * 16 + 16);
  Writer w(p);
  w.varint(timings.size());
  w.zz(timings.dropped());
  int64_t previous = 0;
  for (const StepTimingRecord& r : timings.records()) {
    // Wrapping, not undefined, for steps far apart.
    w.zz(static_cast<int64_t>(static_cast<uint64_t>(r.step) - static_cast<uint64_t>(previous)));
    previous = r.step;
    for (int64_t v : {r.wall_ns, r.busy_ns, r.input_ns, r.idle_ns, r.hooks_ns}) w.zz(v);
  }
  return chunk('T', p);
}

std::string encode_end_chunk(size_t num_steps) {
  std::string p;
  Writer(p).varint(num_steps);
  return chunk('E', p);
}

ProfileModel decode_profile(std::string_view bytes, const std::string& path) {
  Reader file(bytes, path);
  if (bytes.size() < kProfileMagic.size() || bytes.substr(0, kProfileMagic.size()) != kProfileMagic)
    file.fail("not a stepscope profile (bad magic)");
  file.take(kProfileMagic.size());
  if (const uint32_t version = file.u32(); version != kProfileFormatVersion)
    file.fail("unsupported format version " + std::to_string(version));

  ProfileModel model;
  bool have_model = false, have_state = false, have_timings = false, have_collectives = false, ended = false;
  size_t num_steps = 0;
  while (!file.done()) {
    if (ended) file.fail("data after the end chunk");
    const char tag = static_cast<char>(file.u8());
    const uint32_t size = file.u32();
    const std::string_view payload = file.take(size);
    const uint32_t crc = file.u32();
    if (crc != static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(payload.data()), payload.size())))
      file.fail(std::string("checksum mismatch in chunk '") + tag + "'");
    Reader r(payload, path);
    const size_t n = model.nodes.size();
    auto node_index = [&](uint64_t v) -> int32_t {
      if (v >= n) r.fail("node index out of range");
      return static_cast<int32_t>(v);
    };
    switch (tag) {
      case 'V':
        if (have_model || !model.stepscope_version.empty()) r.fail("misplaced version chunk");
        model.stepscope_version = r.str();
        break;
      case 'M': {
        if (have_model) r.fail("two model chunks");
        have_model = true;
        const size_t count = r.count(12);
        std::vector<ModelInput> inputs;
        for (size_t i = 0; i < count; ++i) {
          ModelNode m;
          m.name = r.str();
          m.op = r.str();
          SourceLocation site;
          site.file = r.str();
          site.line = static_cast<int>(r.varint());
          site.function = r.str();
          m.site = model.intern_site(site);
          // Graph ids index a table (by_graph_id_); every node of a graph is in the model, so
          // an id is below the model's node count.
          const int64_t graph_id = r.zz();
          if (graph_id < -1 || graph_id >= static_cast<int64_t>(count))
            r.fail("node '" + m.name + "': graph_id " + std::to_string(graph_id) + " is out of range [-1, " +
                   std::to_string(count) + ")");
          m.graph_id = static_cast<int32_t>(graph_id);
          const size_t num_inputs = r.count(2);
          inputs.clear();
          for (size_t k = 0; k < num_inputs; ++k) {
            const uint64_t producer = r.varint();
            if (producer >= count) r.fail("input index out of range");
            inputs.push_back({.node = static_cast<int32_t>(producer), .slot = static_cast<int32_t>(r.zz())});
          }
          model.set_inputs(m, inputs);
          m.trainable = (r.varint() & 1) != 0;
          m.shape = r.dims();
          m.parameters = r.zz();
          m.static_float_ops = r.zz();
          m.data_format = r.str();
          if (model.find(m.name) >= 0) r.fail("duplicate node name '" + m.name + "'");
          model.add_node(std::move(m));
        }
        break;
      }
      case 'K': {
        if (!have_model || have_state || !model.frames.empty()) r.fail("misplaced code traces chunk");
        const size_t frames = r.count(3);
        for (size_t i = 0; i < frames; ++i) {
          SourceLocation f;
          f.file = r.str();
          f.line = static_cast<int>(r.varint());
          f.function = r.str();
          if (model.intern_frame(f) != static_cast<int32_t>(i)) r.fail("duplicate frame");
        }
        const size_t entries = r.count(2);
        for (size_t i = 0; i < entries; ++i) {
          ModelNode& m = model.nodes[node_index(r.varint())];
          if (!m.stack.empty()) r.fail("node '" + m.name + "' has two stacks");
          const size_t depth = r.count(1);
          if (depth == 0) r.fail("empty stack");
          if (depth > kMaxStackFrames)
            r.fail("node '" + m.name + "' has a stack of " + std::to_string(depth) + " frames (at most " +
                   std::to_string(kMaxStackFrames) + ")");
          for (size_t k = 0; k < depth; ++k) {
            const uint64_t f = r.varint();
            if (f >= frames) r.fail("frame index out of range");
            m.stack.push_back(static_cast<int32_t>(f));
          }
        }
        break;
      }
      case 'C': {
        if (!have_model || have_state || have_collectives) r.fail("misplaced collectives chunk");
        have_collectives = true;
        const size_t entries = r.count(2);
        for (size_t i = 0; i < entries; ++i) {
          ModelNode& m = model.nodes[node_index(r.varint())];
          const uint64_t ranks = r.varint();
          if (ranks < 1 || ranks > static_cast<uint64_t>(INT32_MAX))
            r.fail("node '" + m.name + "': collective ranks " + std::to_string(ranks) + " out of range");
          m.collective_ranks = static_cast<int32_t>(ranks);
        }
        break;
      }
      case 'D': {
        if (!have_model || have_state) r.fail("misplaced state chunk");
        have_state = true;
        const size_t devices = r.count();
        for (size_t i = 0; i < devices; ++i) {
          std::string label = r.str();
          if (model.intern_device(label) != static_cast<int32_t>(i)) r.fail("duplicate device '" + label + "'");
        }
        model.miss_accelerator_stream = (r.varint() & 1) != 0;
        if (r.count() != n) r.fail("node count mismatch");
        for (ModelNode& m : model.nodes) {
          const int64_t device = r.zz();
          if (device < -1 || device >= static_cast<int64_t>(devices)) r.fail("device index out of range");
          m.device = static_cast<int32_t>(device);
          const size_t shapes = r.count();
          if (shapes != 0 && shapes != m.num_inputs) r.fail("input count mismatch");
          m.input_shapes_known = shapes != 0 || m.num_inputs == 0;
          const std::span<ModelInput> inputs = model.inputs_of(m);
          for (size_t k = 0; k < shapes; ++k) inputs[k].shape = r.shape();
        }
        break;
      }
      case 'S': {
        if (!have_state) r.fail("step chunk before the state chunk");
        if (have_timings) r.fail("step chunk after the step timings chunk");
        const int64_t step = r.zz();
        if (model.steps.count(step)) r.fail("step " + std::to_string(step) + " appears twice");
        StepData& data = model.steps[step];
        data.base_ns = r.zz();
        data.base_wall_ns = r.zz();
        data.nodes.resize(r.count(11));
        for (NodeStep& s : data.nodes) {
          s.node = node_index(r.varint());
          s.run_count = static_cast<int32_t>(r.varint());
          s.accelerator_micros = r.zz();
          s.cpu_micros = r.zz();
          s.requested_bytes = r.zz();
          s.peak_bytes = r.zz();
          s.residual_bytes = r.zz();
          s.output_bytes = r.zz();
          s.float_ops = r.zz();
          s.all_start_micros = r.zz();
          s.latest_end_micros = r.zz_plus(s.all_start_micros, "latest_end_micros");
        }
        data.execs.resize(r.count(8));
        for (ExecRecord& e : data.execs) {
          e.node = node_index(r.varint());
          const uint64_t device = r.varint();
          if (device >= model.devices.size()) r.fail("device index out of range");
          e.device = static_cast<int32_t>(device);
          e.thread_id = static_cast<uint32_t>(r.varint());
          e.all_start_ns = r.zz_plus(data.base_ns, "all_start_ns");
          e.scheduled_ns = r.zz_plus(e.all_start_ns, "scheduled_ns");
          e.op_start_rel_ns = r.zz();
          e.op_end_rel_ns = r.zz();
          e.all_end_rel_ns = r.zz();
        }
        ++num_steps;
        break;
      }
      case 'B': {
        const int64_t step = r.zz();
        auto it = model.steps.find(step);
        if (it == model.steps.end() || it->second.memory)
          r.fail("memory chunk of step " + std::to_string(step) + " without its step chunk");
        MemoryByKind m;
        m.peak_bytes = r.zz();
        m.persistent_bytes = r.zz();
        m.transient_peak_bytes = r.zz();
        m.peak_time_ns = r.zz();
        if (r.varint() != kNumMemoryKinds) r.fail("memory chunk with a different number of kinds");
        for (int64_t& bytes : m.bytes) bytes = r.zz();
        it->second.memory = m;
        break;
      }
      case 'I': {
        const int64_t step = r.zz();
        auto it = model.steps.find(step);
        if (it == model.steps.end() || !it->second.input_stages.empty() || have_timings)
          r.fail("input stages chunk of step " + std::to_string(step) + " without its step chunk");
        std::vector<InputStage> stages(r.count(4));
        for (InputStage& s : stages) {
          s.node = r.str();
          s.stage = r.str();
          s.self_ns = r.zz();
          s.calls = r.zz();
        }
        it->second.input_stages = std::move(stages);
        break;
      }
      case 'A': {
        if (!have_state || num_steps > 0 || !model.dropped.empty()) r.fail("misplaced dropped-steps chunk");
        model.dropped.resize(n);
        const size_t entries = r.count();
        for (size_t i = 0; i < entries; ++i) {
          DroppedTotals& d = model.dropped[node_index(r.varint())];
          const uint64_t steps = r.varint();
          if (steps > static_cast<uint64_t>(INT32_MAX)) r.fail("dropped step count out of range");
          d.steps = static_cast<int64_t>(steps);
          NodeStats& s = d.sums;
          for (int64_t NodeStats::*field : kSummedNodeStats) s.*field = r.zz();
          // Wrapping, not undefined, on a hostile file.
          s.exec_micros = static_cast<int64_t>(static_cast<uint64_t>(s.accelerator_exec_micros) +
                                               static_cast<uint64_t>(s.cpu_exec_micros));
        }
        break;
      }
      case 'T': {
        if (!have_state || have_timings) r.fail("misplaced step timings chunk");
        have_timings = true;
        std::vector<StepTimingRecord> records(r.count(6));
        const int64_t dropped = r.zz();
        if (dropped < 0) r.fail("negative count of dropped step timings");
        int64_t previous = 0;
        for (StepTimingRecord& t : records) {
          t.step = previous = r.zz_plus(previous, "step");
          for (int64_t* v : {&t.wall_ns, &t.busy_ns, &t.input_ns, &t.idle_ns, &t.hooks_ns}) *v = r.zz();
        }
        model.step_timings.assign(std::move(records), dropped);
        break;
      }
      case 'E':
        if (r.varint() != num_steps) r.fail("step count mismatch");
        ended = true;
        break;
      default:
        file.fail(std::string("unknown chunk '") + tag + "'");
    }
    if (!r.done()) r.fail(std::string("trailing bytes in chunk '") + tag + "'");
  }
  if (!ended) file.fail("truncated (no end chunk)");
  if (!have_state) file.fail("no state chunk");
  model.recompute_derived();
  return model;
}

}  // namespace stepscope::tfprof
