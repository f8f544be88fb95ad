#include "stepscope/profiler/run_metadata_io.h"

#include <array>
#include <vector>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/proto_wire.h"
#include "stepscope/graph/node_label.h"

namespace stepscope {

namespace pw = proto_wire;

namespace {

// stepscope's own fields (see the header).
constexpr uint32_t kExtBaseNs = 1001, kExtBaseWallNs = 1002, kExtNodeId = 1001, kExtAllocNanos = 1001,
                   kExtGraphDevice = 1001, kExtInputStage = 1001;

// ---- Writing ----

class Writer {
 public:
  explicit Writer(int64_t wall_offset) : offset_(wall_offset) {}

  static void put_int(std::string& out, uint32_t field, int64_t v) {
    if (v != 0) pw::put_int_field(out, field, v);
  }
  static void put_str(std::string& out, uint32_t field, std::string_view s) {
    if (!s.empty()) pw::put_bytes_field(out, field, s);
  }
  // A sub-message built by body(buffer, depth + 1) in the buffer of its depth.
  template <typename Body>
  void message(std::string& out, uint32_t field, size_t depth, Body&& body) {
    std::string& b = buffers_.at(depth);
    b.clear();
    body(b, depth + 1);
    pw::put_bytes_field(out, field, b);
  }

  void allocation_description(std::string& out, const AllocationDescription& ad) {
    put_int(out, 1, ad.requested_bytes);
    put_int(out, 2, ad.allocated_bytes);
    put_str(out, 3, ad.allocator_name);
    put_int(out, 4, ad.allocation_id);
    put_int(out, 5, ad.has_single_reference);
    put_int(out, 6, static_cast<int64_t>(ad.ptr));
  }

  void node(std::string& out, size_t depth, const NodeExecStats& ns) {
    const int64_t start_wall = ns.all_start_ns + offset_, scheduled_wall = ns.scheduled_ns + offset_;
    put_str(out, 1, ns.node_name);
    put_int(out, 2, start_wall / 1000);
    put_int(out, 3, ns.op_start_rel_ns / 1000);
    put_int(out, 4, ns.op_end_rel_ns / 1000);
    put_int(out, 5, ns.all_end_rel_ns / 1000);
    for (const AllocatorMemoryUsed& m : ns.memory) {
      message(out, 6, depth, [&](std::string& b, size_t d) {
        put_str(b, 1, m.allocator_name);
        put_int(b, 2, m.total_bytes);
        put_int(b, 3, m.peak_bytes);
        put_int(b, 4, m.live_bytes);
        put_int(b, 5, m.allocator_bytes_in_use);
        for (const AllocationRecord& r : m.allocation_records) {
          message(b, 6, d, [&](std::string& rb, size_t) {
            put_int(rb, 1, (r.alloc_ns + offset_) / 1000);
            put_int(rb, 2, r.alloc_bytes);
            put_int(rb, kExtAllocNanos, r.alloc_ns + offset_);
          });
        }
      });
    }
    for (const NodeOutput& o : ns.output) {
      message(out, 7, depth, [&](std::string& b, size_t d) {
        put_int(b, 1, o.slot);
        message(b, 3, d, [&](std::string& tb, size_t td) {
          const TensorDescription& t = o.tensor_description;
          put_int(tb, 1, tf_datatype(t.dtype));
          message(tb, 2, td, [&](std::string& sb, size_t sd) {
            for (int64_t dim : t.shape.dims())
              message(sb, 2, sd, [&](std::string& db, size_t) { put_int(db, 1, dim); });
            if (!t.shape.known_rank()) put_int(sb, 3, 1);
          });
          message(tb, 4, td, [&](std::string& ab, size_t) { allocation_description(ab, t.allocation_description); });
        });
      });
    }
    put_str(out, 8, ns.timeline_label);
    put_int(out, 9, scheduled_wall / 1000);
    put_int(out, 10, ns.thread_id);
    for (const AllocationDescription& ad : ns.referenced_tensor)
      message(out, 11, depth, [&](std::string& b, size_t) { allocation_description(b, ad); });
    const MemoryStats& ms = ns.memory_stats;
    if (ms.temp_memory_size || ms.persistent_memory_size || !ms.persistent_tensor_alloc_ids.empty()) {
      message(out, 12, depth, [&](std::string& b, size_t) {
        put_int(b, 1, ms.temp_memory_size);
        put_int(b, 3, ms.persistent_memory_size);
        if (!ms.persistent_tensor_alloc_ids.empty()) {
          std::string packed;
          for (int64_t id : ms.persistent_tensor_alloc_ids) pw::put_varint(packed, static_cast<uint64_t>(id));
          pw::put_bytes_field(b, 5, packed);
        }
      });
    }
    put_int(out, 13, start_wall);
    put_int(out, 14, ns.op_start_rel_ns);
    put_int(out, 15, ns.op_end_rel_ns);
    put_int(out, 16, ns.all_end_rel_ns);
    put_int(out, 17, scheduled_wall);
    if (ns.node_id >= 0) pw::put_int_field(out, kExtNodeId, ns.node_id);
  }

 private:
  int64_t offset_;
  std::array<std::string, 12> buffers_;  // one per nesting depth (RunMetadata ... Dim is 8 deep)
};

// ---- Reading ----

// Where in the message the reader is, for the error message: a chain of frames on the stack.
struct Where {
  const Where* parent;
  const char* field;
  int64_t index = -1;
  std::string str() const {
    std::string s = parent ? parent->str() : "";
    if (!s.empty()) s += ".";
    s += field;
    if (index >= 0) s += "[" + std::to_string(index) + "]";
    return s;
  }
};

[[noreturn]] void corrupt(const Where& w, const std::string& why) {
  throw DataLossError("corrupt RunMetadata: " + w.str() + ": " + why);
}

// Calls f(reader, field, type) for each field of the message; f returns false for a field it
// does not know, which is then skipped.
template <typename F>
void fields(std::string_view bytes, const Where& w, F&& f) {
  pw::Reader r(bytes);
  while (!r.done()) {
    const size_t start = r.position();
    uint32_t field;
    pw::WireType type;
    if (!r.next_field(field, type)) corrupt(w, r.error());
    if (!f(r, field, type) && !r.skip(start, type)) corrupt(w, r.error());
  }
}

int64_t get_int(pw::Reader& r, pw::WireType type, const Where& w, const char* field) {
  int64_t v;
  if (!r.read_int(type, v)) corrupt(Where{&w, field}, r.error());
  return v;
}
// Times in a file are attacker-controlled: every conversion and shift of one is checked, since
// signed overflow is undefined behaviour (UBSan aborts on it; without it, garbage times).
int64_t checked_mul(int64_t a, int64_t b, const Where& w, const char* field) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    corrupt(Where{&w, field}, std::to_string(a) + " x " + std::to_string(b) + " is out of range");
  return r;
}
int64_t checked_sub(int64_t a, int64_t b, const Where& w, const char* field) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    corrupt(Where{&w, field}, std::to_string(a) + " - " + std::to_string(b) + " is out of range");
  return r;
}
// Readers add a node's relative times to its start and subtract one time from another: every
// time a step holds lies within 2^62 ns (146 years) of the epoch, where no such sum or
// difference of two overflows.
int64_t checked_time(int64_t t, const Where& w, const char* field) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  if (t <= -kLimit || t >= kLimit)
    corrupt(Where{&w, field}, std::to_string(t) + " ns is more than 146 years from the epoch");
  return t;
}
// The time `rel` after `start`, checked as above.
int64_t checked_end(int64_t start, int64_t rel, const Where& w, const char* field) {
  int64_t end;
  if (__builtin_add_overflow(start, rel, &end))
    corrupt(Where{&w, field}, std::to_string(start) + " + " + std::to_string(rel) + " is out of range");
  return checked_time(end, w, field);
}

std::string_view get_bytes(pw::Reader& r, pw::WireType type, const Where& w, const char* field) {
  std::string_view v;
  if (!r.read_length_delimited(type, v)) corrupt(Where{&w, field}, r.error());
  return v;
}

class Parser {
 public:
  explicit Parser(StepStats& st) : st_(st) {}

  void step_stats(std::string_view bytes, const Where& w) {
    // The bases first (they follow dev_stats in the bytes): times are read back through them.
    fields(bytes, w, [&](pw::Reader& r, uint32_t field, pw::WireType type) {
      if (field == kExtBaseNs)
        st_.base_ns = get_int(r, type, w, "base_ns");
      else if (field == kExtBaseWallNs)
        st_.base_wall_ns = get_int(r, type, w, "base_wall_ns");
      else
        return false;
      return true;
    });
    offset_ = st_.base_wall_ns != 0 ? checked_sub(st_.base_wall_ns, st_.base_ns, w, "base_wall_ns") : 0;
    int64_t device_index = 0;
    fields(bytes, w, [&](pw::Reader& r, uint32_t field, pw::WireType type) {
      if (field != 1) return false;
      const Where dw{&w, "dev_stats", device_index++};
      DeviceStepStats& dev = st_.dev_stats().emplace_back();
      int64_t node_index = 0;
      fields(get_bytes(r, type, w, "dev_stats"), dw, [&](pw::Reader& dr, uint32_t f, pw::WireType t) {
        if (f == 1) {
          dev.device = StepStats::intern(get_bytes(dr, t, dw, "device"));
        } else if (f == 2) {
          const Where nw{&dw, "node_stats", node_index++};
          dev.node_stats.push_back(node(get_bytes(dr, t, dw, "node_stats"), nw));
        } else {
          return false;
        }
        return true;
      });
      return true;
    });
  }

 private:
  static void allocation_description(std::string_view bytes, const Where& w, AllocationDescription& ad) {
    fields(bytes, w, [&](pw::Reader& r, uint32_t field, pw::WireType type) {
      switch (field) {
        case 1:
          ad.requested_bytes = get_int(r, type, w, "requested_bytes");
          break;
        case 2:
          ad.allocated_bytes = get_int(r, type, w, "allocated_bytes");
          break;
        case 3:
          ad.allocator_name = StepStats::intern(get_bytes(r, type, w, "allocator_name"));
          break;
        case 4:
          ad.allocation_id = get_int(r, type, w, "allocation_id");
          break;
        case 5:
          ad.has_single_reference = get_int(r, type, w, "has_single_reference") != 0;
          break;
        case 6:
          ad.ptr = static_cast<uint64_t>(get_int(r, type, w, "ptr"));
          break;
        default:
          return false;
      }
      return true;
    });
  }

  void tensor_description(std::string_view bytes, const Where& w, TensorDescription& td) {
    fields(bytes, w, [&](pw::Reader& r, uint32_t field, pw::WireType type) {
      if (field == 1) {
        td.dtype = dtype_from_tf_datatype(get_int(r, type, w, "dtype"))
                       .value_or(DType::kFloat32);  // types stepscope lacks: float
      } else if (field == 2) {
        const Where sw{&w, "shape"};
        dims_.clear();
        bool unknown_rank = false;
        fields(get_bytes(r, type, w, "shape"), sw, [&](pw::Reader& sr, uint32_t f, pw::WireType t) {
          if (f == 2) {
            const Where dw{&sw, "dim", static_cast<int64_t>(dims_.size())};
            int64_t size = 0;
            fields(get_bytes(sr, t, sw, "dim"), dw, [&](pw::Reader& dr, uint32_t df, pw::WireType dt) {
              if (df != 1) return false;
              size = get_int(dr, dt, dw, "size");
              return true;
            });
            dims_.push_back(size);
          } else if (f == 3) {
            unknown_rank = get_int(sr, t, sw, "unknown_rank") != 0;
          } else {
            return false;
          }
          return true;
        });
        if (dims_.size() > static_cast<size_t>(Shape::kMaxRank)) corrupt(sw, "more dimensions than stepscope has");
        td.shape = unknown_rank ? Shape::unknown_rank() : Shape(std::span<const int64_t>(dims_));
      } else if (field == 4) {
        allocation_description(get_bytes(r, type, w, "allocation_description"), Where{&w, "allocation_description"},
                               td.allocation_description);
      } else {
        return false;
      }
      return true;
    });
  }

  NodeExecStats node(std::string_view bytes, const Where& w) {
    NodeExecStats ns;
    outputs_.clear();
    memory_.clear();
    referenced_.clear();
    alloc_ids_.clear();
    size_t records_used = 0;
    int64_t start_us = 0, op_start_us = 0, op_end_us = 0, end_us = 0, scheduled_us = 0;
    bool start_ns = false, op_start_ns = false, op_end_ns = false, end_ns = false, scheduled_ns = false;
    fields(bytes, w, [&](pw::Reader& r, uint32_t field, pw::WireType type) {
      switch (field) {
        case 1:
          ns.node_name = StepStats::intern(get_bytes(r, type, w, "node_name"));
          break;
        case 2:
          start_us = get_int(r, type, w, "all_start_micros");
          break;
        case 3:
          op_start_us = get_int(r, type, w, "op_start_rel_micros");
          break;
        case 4:
          op_end_us = get_int(r, type, w, "op_end_rel_micros");
          break;
        case 5:
          end_us = get_int(r, type, w, "all_end_rel_micros");
          break;
        case 6: {
          const Where mw{&w, "memory", static_cast<int64_t>(memory_.size())};
          AllocatorMemoryUsed& m = memory_.emplace_back();
          if (records_.size() <= records_used) records_.emplace_back();
          std::vector<AllocationRecord>& recs = records_[records_used++];
          recs.clear();
          fields(get_bytes(r, type, w, "memory"), mw, [&](pw::Reader& mr, uint32_t f, pw::WireType t) {
            switch (f) {
              case 1:
                m.allocator_name = StepStats::intern(get_bytes(mr, t, mw, "allocator_name"));
                break;
              case 2:
                m.total_bytes = get_int(mr, t, mw, "total_bytes");
                break;
              case 3:
                m.peak_bytes = get_int(mr, t, mw, "peak_bytes");
                break;
              case 4:
                m.live_bytes = get_int(mr, t, mw, "live_bytes");
                break;
              case 5:
                m.allocator_bytes_in_use = get_int(mr, t, mw, "allocator_bytes_in_use");
                break;
              case 6: {
                const Where rw{&mw, "allocation_records", static_cast<int64_t>(recs.size())};
                int64_t micros = 0, nanos = 0, bytes_ = 0;
                bool has_nanos = false;
                fields(get_bytes(mr, t, mw, "allocation_records"), rw,
                       [&](pw::Reader& rr, uint32_t rf, pw::WireType rt) {
                         if (rf == 1)
                           micros = get_int(rr, rt, rw, "alloc_micros");
                         else if (rf == 2)
                           bytes_ = get_int(rr, rt, rw, "alloc_bytes");
                         else if (rf == kExtAllocNanos)
                           nanos = get_int(rr, rt, rw, "alloc_nanos"), has_nanos = true;
                         else
                           return false;
                         return true;
                       });
                const int64_t wall = has_nanos ? nanos : checked_mul(micros, 1000, rw, "alloc_micros");
                recs.push_back(
                    {checked_time(checked_sub(wall, offset_, rw, "alloc_nanos"), rw, "alloc_nanos"), bytes_});
                break;
              }
              default:
                return false;
            }
            return true;
          });
          break;
        }
        case 7: {
          const Where ow{&w, "output", static_cast<int64_t>(outputs_.size())};
          NodeOutput& o = outputs_.emplace_back();
          fields(get_bytes(r, type, w, "output"), ow, [&](pw::Reader& orr, uint32_t f, pw::WireType t) {
            if (f == 1)
              o.slot = static_cast<int32_t>(get_int(orr, t, ow, "slot"));
            else if (f == 3)
              tensor_description(get_bytes(orr, t, ow, "tensor_description"), Where{&ow, "tensor_description"},
                                 o.tensor_description);
            else
              return false;
            return true;
          });
          break;
        }
        case 8:
          ns.timeline_label = StepStats::intern(get_bytes(r, type, w, "timeline_label"));
          break;
        case 9:
          scheduled_us = get_int(r, type, w, "scheduled_micros");
          break;
        case 10:
          ns.thread_id = static_cast<uint32_t>(get_int(r, type, w, "thread_id"));
          break;
        case 11: {
          const Where aw{&w, "referenced_tensor", static_cast<int64_t>(referenced_.size())};
          allocation_description(get_bytes(r, type, w, "referenced_tensor"), aw, referenced_.emplace_back());
          break;
        }
        case 12: {
          const Where mw{&w, "memory_stats"};
          fields(get_bytes(r, type, w, "memory_stats"), mw, [&](pw::Reader& mr, uint32_t f, pw::WireType t) {
            if (f == 1) {
              ns.memory_stats.temp_memory_size = get_int(mr, t, mw, "temp_memory_size");
            } else if (f == 3) {
              ns.memory_stats.persistent_memory_size = get_int(mr, t, mw, "persistent_memory_size");
            } else if (f == 5 && t == pw::WireType::kLengthDelimited) {  // packed
              pw::Reader packed(get_bytes(mr, t, mw, "persistent_tensor_alloc_ids"));
              while (!packed.done()) {
                uint64_t v;
                if (!packed.read_varint(v)) corrupt(Where{&mw, "persistent_tensor_alloc_ids"}, packed.error());
                alloc_ids_.push_back(static_cast<int64_t>(v));
              }
            } else if (f == 5) {
              alloc_ids_.push_back(get_int(mr, t, mw, "persistent_tensor_alloc_ids"));
            } else {
              return false;
            }
            return true;
          });
          break;
        }
        case 13:
          ns.all_start_ns = get_int(r, type, w, "all_start_nanos"), start_ns = true;
          break;
        case 14:
          ns.op_start_rel_ns = get_int(r, type, w, "op_start_rel_nanos"), op_start_ns = true;
          break;
        case 15:
          ns.op_end_rel_ns = get_int(r, type, w, "op_end_rel_nanos"), op_end_ns = true;
          break;
        case 16:
          ns.all_end_rel_ns = get_int(r, type, w, "all_end_rel_nanos"), end_ns = true;
          break;
        case 17:
          ns.scheduled_ns = get_int(r, type, w, "scheduled_nanos"), scheduled_ns = true;
          break;
        case kExtNodeId:
          ns.node_id = static_cast<int32_t>(get_int(r, type, w, "node_id"));
          break;
        default:
          return false;
      }
      return true;
    });
    // A file without the ns fields (older TensorFlow): µs.
    if (!start_ns) ns.all_start_ns = checked_mul(start_us, 1000, w, "all_start_micros");
    if (!op_start_ns) ns.op_start_rel_ns = checked_mul(op_start_us, 1000, w, "op_start_rel_micros");
    if (!op_end_ns) ns.op_end_rel_ns = checked_mul(op_end_us, 1000, w, "op_end_rel_micros");
    if (!end_ns) ns.all_end_rel_ns = checked_mul(end_us, 1000, w, "all_end_rel_micros");
    if (!scheduled_ns) ns.scheduled_ns = checked_mul(scheduled_us, 1000, w, "scheduled_micros");
    ns.all_start_ns = checked_time(checked_sub(ns.all_start_ns, offset_, w, "all_start_nanos"), w, "all_start_nanos");
    ns.scheduled_ns = checked_time(checked_sub(ns.scheduled_ns, offset_, w, "scheduled_nanos"), w, "scheduled_nanos");
    checked_end(ns.all_start_ns, ns.op_start_rel_ns, w, "op_start_rel_nanos");
    checked_end(ns.all_start_ns, ns.op_end_rel_ns, w, "op_end_rel_nanos");
    checked_end(ns.all_start_ns, ns.all_end_rel_ns, w, "all_end_rel_nanos");
    // op_type: from the label, as TensorFlow's timeline finds it.
    if (const ParsedNodeLabel label = parse_node_label(ns.timeline_label); label.valid)
      ns.op_type = StepStats::intern(label.op);

    ns.output = st_.store_outputs(outputs_);
    for (size_t i = 0; i < memory_.size(); ++i) memory_[i].allocation_records = records_[i];
    ns.memory = st_.store_memory(memory_);
    ns.referenced_tensor = st_.store_referenced(referenced_);
    ns.memory_stats.persistent_tensor_alloc_ids = st_.store_alloc_ids(alloc_ids_);
    return ns;
  }

  StepStats& st_;
  int64_t offset_ = 0;
  // Scratch, reused from node to node.
  std::vector<int64_t> dims_;
  std::vector<NodeOutput> outputs_;
  std::vector<AllocatorMemoryUsed> memory_;
  std::vector<std::vector<AllocationRecord>> records_;
  std::vector<AllocationDescription> referenced_;
  std::vector<int64_t> alloc_ids_;
};

}  // namespace

std::string serialize_run_metadata(const RunMetadata& metadata) {
  const StepStats& st = metadata.step_stats;
  Writer w(st.base_wall_ns != 0 ? st.base_wall_ns - st.base_ns : 0);
  std::string out;
  out.reserve(256 + (std::max(st.num_stored_outputs(), st.num_recorded_outputs()) + st.num_stored_records()) * 48);
  if (!st.empty() || st.base_ns || st.base_wall_ns) {
    w.message(out, 1, 0, [&](std::string& b, size_t depth) {
      for (const DeviceStepStats& dev : st.dev_stats()) {
        w.message(b, 1, depth, [&](std::string& db, size_t dd) {
          Writer::put_str(db, 1, dev.device);
          for (const NodeExecStats& ns : dev.node_stats)
            w.message(db, 2, dd, [&](std::string& nb, size_t nd) { w.node(nb, nd, ns); });
        });
      }
      Writer::put_int(b, kExtBaseNs, st.base_ns);
      Writer::put_int(b, kExtBaseWallNs, st.base_wall_ns);
    });
  }
  for (const PartitionGraph& pg : metadata.partition_graphs) {
    w.message(out, 3, 0, [&](std::string& b, size_t depth) {
      for (std::string_view name : pg.node_names) {
        w.message(b, 1, depth, [&](std::string& nb, size_t) {
          Writer::put_str(nb, 1, name);
          Writer::put_str(nb, 4, pg.device);
        });
      }
      Writer::put_str(b, kExtGraphDevice, pg.device);
    });
  }
  for (const InputStage& stage : metadata.input_stages) {
    w.message(out, kExtInputStage, 0, [&](std::string& b, size_t) {
      Writer::put_str(b, 1, stage.node);
      Writer::put_str(b, 2, stage.stage);
      Writer::put_int(b, 3, stage.self_ns);
      Writer::put_int(b, 4, stage.calls);
    });
  }
  return out;
}

namespace {

RunMetadata decode_run_metadata(std::string_view bytes) {
  RunMetadata md;
  const Where root{nullptr, "RunMetadata"};
  int64_t graph_index = 0;
  Parser parser(md.step_stats);
  fields(bytes, root, [&](pw::Reader& r, uint32_t field, pw::WireType type) {
    if (field == 1) {
      parser.step_stats(get_bytes(r, type, root, "step_stats"), Where{&root, "step_stats"});
    } else if (field == 3) {
      const Where gw{&root, "partition_graphs", graph_index++};
      PartitionGraph& pg = md.partition_graphs.emplace_back();
      bool has_device = false;
      fields(get_bytes(r, type, root, "partition_graphs"), gw, [&](pw::Reader& gr, uint32_t f, pw::WireType t) {
        if (f == 1) {
          const Where nw{&gw, "node", static_cast<int64_t>(pg.node_names.size())};
          fields(get_bytes(gr, t, gw, "node"), nw, [&](pw::Reader& nr, uint32_t nf, pw::WireType nt) {
            if (nf == 1) {
              pg.node_names.push_back(StepStats::intern(get_bytes(nr, nt, nw, "name")));
            } else if (nf == 4) {
              const std::string_view device = get_bytes(nr, nt, nw, "device");
              if (!has_device) pg.device = StepStats::intern(device);
            } else {
              return false;
            }
            return true;
          });
        } else if (f == kExtGraphDevice) {
          pg.device = StepStats::intern(get_bytes(gr, t, gw, "device"));
          has_device = true;
        } else {
          return false;
        }
        return true;
      });
    } else if (field == kExtInputStage) {
      const Where sw{&root, "input_stages", static_cast<int64_t>(md.input_stages.size())};
      InputStage& stage = md.input_stages.emplace_back();
      fields(get_bytes(r, type, root, "input_stages"), sw, [&](pw::Reader& sr, uint32_t f, pw::WireType t) {
        switch (f) {
          case 1:
            stage.node = get_bytes(sr, t, sw, "node");
            return true;
          case 2:
            stage.stage = get_bytes(sr, t, sw, "stage");
            return true;
          case 3:
            stage.self_ns = get_int(sr, t, sw, "self_ns");
            return true;
          case 4:
            stage.calls = get_int(sr, t, sw, "calls");
            return true;
          default:
            return false;
        }
      });
    } else {
      return false;
    }
    return true;
  });
  return md;
}

}  // namespace

RunMetadata parse_run_metadata(std::string_view bytes, const std::string& source) {
  if (source.empty()) return decode_run_metadata(bytes);
  try {
    return decode_run_metadata(bytes);
  } catch (const DataLossError& e) {
    throw DataLossError("cannot read '" + source + "': " + e.what());
  }
}

void save_run_metadata(const std::filesystem::path& path, const RunMetadata& metadata) {
  write_file_atomically(path, serialize_run_metadata(metadata), path.extension() == ".gz");
}

RunMetadata load_run_metadata(const std::filesystem::path& path, uint64_t max_decompressed_bytes) {
  return parse_run_metadata(read_file(path, max_decompressed_bytes), path.string());
}

}  // namespace stepscope
