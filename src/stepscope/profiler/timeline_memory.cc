// Timeline's memory: tensor lifetimes, the allocators' counters and maximums, from the step's
// allocation records, or from the outputs' descriptions as TensorFlow does when a step has none.
#include <algorithm>
#include <map>

#include "stepscope/profiler/internal/timeline_impl.h"

namespace stepscope {

using timeline_internal::kNever;

// The step's allocation records, per allocator, paired into buffers (an allocation with its
// free); each output tensor takes the buffer it was allocated in, so its object lives exactly
// as long as its memory did.
void Timeline::Impl::analyze_memory(size_t k) {
  Step& step = steps[k];
  const size_t first_series = series.size();
  auto series_of = [&](std::string_view allocator) -> Series& {
    for (size_t i = first_series; i < series.size(); ++i)
      if (series[i].allocator == allocator) return series[i];
    series.push_back({allocator, static_cast<int32_t>(k), {}, {}});
    return series.back();
  };
  std::vector<uint32_t> open;  // intervals of the current node and allocator not yet freed
  struct Alias {
    std::string_view allocator;
    int64_t id;
    int32_t tensor;
    bool operator<(const Alias& o) const { return id != o.id ? id < o.id : allocator < o.allocator; }
  };
  std::vector<Alias> aliases;
  bool has_records = false;
  for (size_t i = step.node_begin; i < step.node_end && !has_records; ++i)
    for (const AllocatorMemoryUsed& m : nodes[i].ns->memory) has_records |= !m.allocation_records.empty();
  if (!has_records) {
    need_dataflow();  // TensorFlow's rule frees each output at its last use
    memory_from_outputs(k, series_of);
  }
  for (size_t i = step.node_begin; i < step.node_end && has_records; ++i) {
    const Node& n = nodes[i];
    const NodeExecStats& ns = *n.ns;
    for (const AllocatorMemoryUsed& m : ns.memory) {
      if (m.allocation_records.empty()) continue;
      Series& s = series_of(m.allocator_name);
      const uint32_t first_interval = static_cast<uint32_t>(intervals.size());
      open.clear();
      for (const AllocationRecord& r : m.allocation_records) {
        const int64_t t = r.alloc_ns + step.shift;
        if (r.alloc_bytes >= 0) {
          open.push_back(static_cast<uint32_t>(intervals.size()));
          s.points.push_back({t, r.alloc_bytes, static_cast<uint32_t>(intervals.size())});
          intervals.push_back({t, kNever, r.alloc_bytes});
          continue;
        }
        // A free: of the latest open buffer of that size (buffers of one size allocated at
        // the same moment are interchangeable).
        auto it = std::find_if(open.rbegin(), open.rend(),
                               [&](uint32_t iv) { return intervals[iv].bytes == -r.alloc_bytes; });
        if (it == open.rend()) continue;  // a free without its allocation: not this step's buffer
        intervals[*it].free = t;
        s.points.push_back({t, r.alloc_bytes, *it});
        open.erase(std::next(it).base());
      }
      // Outputs allocated here take the buffer of their size that lived longest.
      for (uint32_t o = 0; o < ns.output.size(); ++o) {
        const AllocationDescription& ad = ns.output[o].tensor_description.allocation_description;
        if (ad.allocator_name != m.allocator_name) continue;
        int32_t best = -1;
        for (uint32_t iv = first_interval; iv < intervals.size(); ++iv) {
          const Interval& v = intervals[iv];
          if (v.tensor >= 0 || v.bytes != ad.requested_bytes) continue;
          if (best < 0 || v.free > intervals[best].free) best = static_cast<int32_t>(iv);
        }
        if (best < 0) continue;
        const int32_t t = static_cast<int32_t>(n.tensor_begin + o);
        Interval& v = intervals[best];
        v.tensor = t;
        Tensor& tensor = tensors[t];
        tensor.recorded = true;
        tensor.create = v.alloc;
        tensor.destroy = v.free == kNever ? step.end : v.free;
        if (ad.allocation_id != 0) aliases.push_back({ad.allocator_name, ad.allocation_id, t});
      }
    }
  }
  // Outputs that forward a buffer allocated in the step (Identity, Reshape, ...) live as long
  // as that buffer.
  if (!std::is_sorted(aliases.begin(), aliases.end())) std::sort(aliases.begin(), aliases.end());  // usually in order
  if (!aliases.empty()) {
    for (size_t i = step.node_begin; i < step.node_end; ++i) {
      const Node& n = nodes[i];
      for (uint32_t o = 0; o < n.ns->output.size(); ++o) {
        Tensor& tensor = tensors[n.tensor_begin + o];
        if (tensor.recorded) continue;
        const AllocationDescription& ad = n.ns->output[o].tensor_description.allocation_description;
        const Alias key{ad.allocator_name, ad.allocation_id, -1};
        auto it = std::lower_bound(aliases.begin(), aliases.end(), key);
        if (it == aliases.end() || key < *it || ad.allocation_id == 0) continue;
        const Tensor& owner = tensors[it->tensor];
        tensor.recorded = true;
        tensor.create = std::max(n.start, owner.create);
        tensor.destroy = std::max(tensor.create, owner.end_of_life());
      }
    }
  }
  // Running totals, in time order (a node's records are in order already; a stable sort keeps
  // each allocation before its free at equal times). The maximum: first reached wins.
  for (size_t i = first_series; i < series.size(); ++i) {
    Series& s = series[i];
    const auto by_time = [](const Point& a, const Point& b) { return a.time < b.time; };
    if (!std::is_sorted(s.points.begin(), s.points.end(), by_time))  // one thread's step is in order
      std::stable_sort(s.points.begin(), s.points.end(), by_time);
    s.totals.resize(s.points.size());
    int64_t total = 0;
    for (size_t p = 0; p < s.points.size(); ++p) {
      const Point& pt = s.points[p];
      // Saturating: the byte counts of a hostile file must not overflow (real ones are far below).
      if (__builtin_add_overflow(total, pt.delta, &total))
        total = pt.delta > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
      s.totals[p] = total;
      if (pt.delta >= 0) {
        intervals[pt.interval].alloc_pos = static_cast<uint32_t>(p);
      } else {
        intervals[pt.interval].free_pos = static_cast<uint32_t>(p);
      }
      if (total > s.max_bytes) {
        s.max_bytes = total;
        s.max_pos = p;
      }
    }
  }
}

// TensorFlow's rules for a step without allocation records (what most RunMetadata files real
// TensorFlow writes hold): each output is a buffer of its requested_bytes in its allocator,
// allocated when its producer starts and freed at its last use (the tensor's last_unref); at
// equal times frees come first, then smaller allocations, then by tensor name (TF's tuple sort).
template <typename SeriesOf>
void Timeline::Impl::memory_from_outputs(size_t k, SeriesOf& series_of) {
  const Step& step = steps[k];
  const size_t first_series = series.size();
  for (size_t i = step.node_begin; i < step.node_end; ++i) {
    const Node& n = nodes[i];
    for (uint32_t o = 0; o < n.ns->output.size(); ++o) {
      const AllocationDescription& ad = n.ns->output[o].tensor_description.allocation_description;
      if (ad.allocator_name.empty()) continue;  // no description: no memory to draw
      Series& sr = series_of(ad.allocator_name);
      const int32_t t = static_cast<int32_t>(n.tensor_begin + o);
      const Tensor& tensor = tensors[t];
      const auto iv = static_cast<uint32_t>(intervals.size());
      const int64_t free = std::max(tensor.create, tensor.last_unref);
      intervals.push_back({tensor.create, free, ad.requested_bytes, t});
      sr.points.push_back({tensor.create, ad.requested_bytes, iv});
      sr.points.push_back({free, -ad.requested_bytes, iv});
    }
  }
  for (size_t i = first_series; i < series.size(); ++i) {
    std::vector<Point>& points = series[i].points;
    std::sort(points.begin(), points.end(), [&](const Point& a, const Point& b) {
      if (a.time != b.time) return a.time < b.time;
      if (a.delta != b.delta) return a.delta < b.delta;
      return tensor_name(tensors[intervals[a.interval].tensor]) < tensor_name(tensors[intervals[b.interval].tensor]);
    });
  }
}

void Timeline::Impl::need_memory() const {
  std::call_once(memory_done, [this] {
    auto* self = const_cast<Impl*>(this);
    for (size_t k = 0; k < steps.size(); ++k) self->analyze_memory(k);
  });
}

std::map<std::string, AllocationMaximum> Timeline::Impl::maximums() const {
  need_memory();
  std::map<std::string, AllocationMaximum> result;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    auto [it, inserted] = result.try_emplace(std::string(s.allocator));
    AllocationMaximum& m = it->second;
    if (!inserted && s.max_bytes <= m.num_bytes) continue;
    const Step& step = steps[s.step];
    m.timestamp_ns = s.points[s.max_pos].time - step.shift;
    m.num_bytes = s.max_bytes;
    m.tensors.clear();
    m.tensor_bytes.clear();
    m.untracked_bytes = 0;
    for (const Point& p : s.points) {
      if (p.delta < 0) continue;
      const Interval& v = intervals[p.interval];
      if (v.alloc_pos > s.max_pos || v.free_pos <= s.max_pos) continue;
      if (v.tensor < 0) {
        m.untracked_bytes += v.bytes;
        continue;
      }
      std::string name = tensor_name(tensors[v.tensor]);
      m.tensor_bytes[name] += v.bytes;
      m.tensors.push_back(std::move(name));
    }
    std::sort(m.tensors.begin(), m.tensors.end());
    m.tensors.erase(std::unique(m.tensors.begin(), m.tensors.end()), m.tensors.end());
  }
  return result;
}

}  // namespace stepscope
