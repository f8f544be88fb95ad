// The process-wide tables a StepStats names things by, never freed (a step may be read during
// static destruction, and a StepStats outlives its Session and Graph): its strings (intern), and
// the shapes and allocator names its recorded outputs hold by index (intern_shape,
// allocator_index).
#include "stepscope/runtime/step_stats.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace stepscope {

namespace {

// The strings of every trace, kept for the process's life: an open-addressing hash set over
// strings packed in 64 KiB blocks. One malloc and one hash node a string made a plan's first
// traced run ~1 µs a node on a 100,000-node graph (issue 16's scale table); a plan now interns
// its labels as one string (Executor::Plan::names).
class InternTable {
 public:
  // `owned`, when given, holds s and is kept as the copy (no copy made) if s is new and big.
  std::string_view intern(std::string_view s, std::string* owned = nullptr) {
    const size_t hash = hash_of(s);
    std::lock_guard<std::mutex> lock(mutex_);
    reserve(1);
    return insert(s, hash, owned);
  }

 private:
  struct Slot {
    size_t hash = 0;
    const char* data = nullptr;  // null: empty slot
    size_t size = 0;
  };
  static constexpr size_t kBlockBytes = 64 << 10;

  // Room for n more strings at most half full.
  void reserve(size_t n) {
    if ((size_ + n) * 2 <= slots_.size()) return;
    size_t capacity = std::max<size_t>(1024, slots_.size());
    while ((size_ + n) * 2 > capacity) capacity *= 2;
    grow(capacity);
  }

  // A big string (a plan's labels, tens of MB) is hashed on a sample: its size, 64 bytes of
  // every 4 KiB and its end, not one more pass over all of it. Equal strings still hash alike;
  // strings that differ only elsewhere cost a comparison.
  static size_t hash_of(std::string_view s) {
    constexpr size_t kWhole = 64 << 10, kStride = 4096, kSample = 64;
    if (s.size() <= kWhole) return std::hash<std::string_view>{}(s);
    size_t hash = std::hash<size_t>{}(s.size());
    for (size_t at = 0; at < s.size(); at += kStride)
      hash = hash * 31 + std::hash<std::string_view>{}(s.substr(at, kSample));
    return hash ^ std::hash<std::string_view>{}(s.substr(s.size() - kSample));
  }

  std::string_view insert(std::string_view s, size_t hash, std::string* owned) {
    if (s.empty()) return {"", 0};  // a view with data(): "set" to the readers that test it
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (!slot.data) {
        slot = {hash, owned && s.size() > kBlockBytes / 4 ? adopt(std::move(*owned)) : store(s), s.size()};
        ++size_;
        return {slot.data, slot.size};
      }
      if (slot.hash == hash && slot.size == s.size() && std::memcmp(slot.data, s.data(), s.size()) == 0)
        return {slot.data, slot.size};
    }
  }

  const char* adopt(std::string&& s) {
    adopted_.push_back(std::make_unique<std::string>(std::move(s)));  // a big string's buffer moves as it is
    return adopted_.back()->data();
  }

  const char* store(std::string_view s) {
    if (s.size() > kBlockBytes / 4) {  // a block of its own; the current one stays in use
      blocks_.push_back(std::make_unique_for_overwrite<char[]>(s.size()));
      std::memcpy(blocks_.back().get(), s.data(), s.size());
      return blocks_.back().get();
    }
    if (s.size() > block_left_) {
      blocks_.push_back(std::make_unique_for_overwrite<char[]>(kBlockBytes));
      block_next_ = blocks_.back().get();
      block_left_ = kBlockBytes;
    }
    char* at = block_next_;
    std::memcpy(at, s.data(), s.size());
    block_next_ += s.size();
    block_left_ -= s.size();
    return at;
  }

  void grow(size_t capacity) {
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (!slot.data) continue;
      size_t i = slot.hash & mask;
      while (slots_[i].data) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  std::mutex mutex_;
  std::vector<Slot> slots_;  // a power of two, at most half full
  size_t size_ = 0;
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<std::unique_ptr<std::string>> adopted_;
  char* block_next_ = nullptr;
  size_t block_left_ = 0;
};

InternTable& intern_table() {
  static auto* table = new InternTable();  // never destroyed: views may be read during static destruction
  return *table;
}

}  // namespace

std::string_view StepStats::intern(std::string_view s) { return intern_table().intern(s); }
std::string_view StepStats::intern(std::string&& s) {
  const std::string_view view = s;
  return intern_table().intern(view, &s);
}

namespace {

// The process's interned shapes, in chunks that never move or go (steps may be read during
// static destruction): a reader finds a shape by its index without a lock.
constexpr uint32_t kShapesAChunk = 1024;
constexpr uint32_t kShapeChunks = 256;
struct ShapeTable {
  std::mutex mutex;
  std::unordered_map<std::string, const StepStats::InternedShape*> by_dims;
  std::atomic<StepStats::InternedShape*> chunks[kShapeChunks] = {};
  uint32_t size = 0;
};
ShapeTable& shape_table() {
  static auto* table = new ShapeTable();
  return *table;
}

// The allocators' names, by index from 1 (a handful: one an allocator).
constexpr size_t kAllocatorNames = 4096;
struct AllocatorNames {
  std::mutex mutex;
  std::string_view names[kAllocatorNames];
  uint16_t size = 1;
};
AllocatorNames& allocator_names() {
  static auto* names = new AllocatorNames();
  return *names;
}

}  // namespace

const StepStats::InternedShape* StepStats::intern_shape(const Shape& shape) {
  ShapeTable& table = shape_table();
  const auto dims = std::as_bytes(shape.dims());
  std::string key(reinterpret_cast<const char*>(dims.data()), dims.size());
  key.push_back(static_cast<char>(shape.rank()));  // an unknown rank has no dims either
  std::lock_guard<std::mutex> lock(table.mutex);
  if (const auto it = table.by_dims.find(key); it != table.by_dims.end()) return it->second;
  if (table.size == kShapesAChunk * kShapeChunks) return nullptr;
  const uint32_t index = table.size;
  std::atomic<InternedShape*>& chunk = table.chunks[index / kShapesAChunk];
  // Raw memory: only the pages of shapes made are ever written (a process's first traced step
  // would otherwise write 80 KB for its few shapes).
  if (!chunk.load(std::memory_order_relaxed))
    chunk.store(static_cast<InternedShape*>(::operator new(sizeof(InternedShape) * kShapesAChunk)),
                std::memory_order_release);
  InternedShape* interned = new (chunk.load(std::memory_order_relaxed) + index % kShapesAChunk) InternedShape{shape, index};
  table.by_dims.emplace(std::move(key), interned);
  ++table.size;
  return interned;
}

const Shape& StepStats::interned_shape(uint32_t index) {
  return shape_table().chunks[index / kShapesAChunk].load(std::memory_order_acquire)[index % kShapesAChunk].shape;
}

uint16_t StepStats::allocator_index(std::string_view name) {
  AllocatorNames& table = allocator_names();
  std::lock_guard<std::mutex> lock(table.mutex);
  for (uint16_t i = 1; i < table.size; ++i)
    if (table.names[i] == name) return i;
  if (table.size == kAllocatorNames) return 0;
  table.names[table.size] = intern(name);
  return table.size++;
}

std::string_view StepStats::allocator_name(uint16_t index) { return allocator_names().names[index]; }

}  // namespace stepscope
