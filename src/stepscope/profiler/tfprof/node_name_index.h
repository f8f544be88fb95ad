// ProfileModel's node indices by name (and the scope tree's entries by scope name): open
// addressing over names the caller keeps, so an entry costs no copy of its name and no
// allocation of its own (an unordered_map<string, int> cost two, and a cache miss on each probe
// of a big graph). A name's first entry keeps it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace stepscope::tfprof {

class NodeNameIndex {
 public:
  // name_of(index) is the name of node `index` (the index holds no names of its own).
  template <class NameOf>
  int32_t find(std::string_view name, const NameOf& name_of) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(name);
    for (size_t at = h & mask_;; at = (at + 1) & mask_) {
      const Slot& slot = slots_[at];
      if (slot.index < 0) return -1;
      if (slot.tag == tag(h) && name_of(slot.index) == name) return slot.index;
    }
  }

  // Adds node `index` under `name`, unless a node of that name is there already.
  template <class NameOf>
  void insert(std::string_view name, int32_t index, const NameOf& name_of) {
    if (2 * (size_ + 1) > slots_.size()) grow(size_ + 1, name_of);
    insert_hashed(hash(name), name, index, name_of);
  }

  // The node of that name if there is one, else `index`, added under `name`: one probe where
  // find() then insert() make two.
  template <class NameOf>
  int32_t find_or_insert(std::string_view name, int32_t index, const NameOf& name_of) {
    return find_or_insert_hashed(hash(name), name, index, name_of);
  }
  // The same for a name whose hash(name) is known, and a request for the slot where its probe
  // starts: made a few names ahead, the probe then finds it in cache (on a big graph each
  // probe is a cache miss otherwise).
  template <class NameOf>
  int32_t find_or_insert_hashed(uint64_t h, std::string_view name, int32_t index, const NameOf& name_of) {
    if (2 * (size_ + 1) > slots_.size()) grow(size_ + 1, name_of);
    return insert_hashed(h, name, index, name_of);
  }
  // The entry hashed `h` that is_it(entry) says is the one sought, if there is one, else
  // `index`, added under `h`: for a caller whose entries are not told apart by their names (the
  // scope tree's, by their parent and last component). hash_of(entry) is an entry's `h` again,
  // for growing.
  template <class IsIt, class HashOf>
  int32_t find_or_insert_if(uint64_t h, int32_t index, const IsIt& is_it, const HashOf& hash_of) {
    if (2 * (size_ + 1) > slots_.size()) grow_by(size_ + 1, hash_of);
    return probe(h, index, is_it);
  }
  void prefetch(uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>()(s); }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t index = -1;
  };
  static uint32_t tag(uint64_t h) { return static_cast<uint32_t>(h >> 32); }

  // With room for one more. Returns the index now under `name`.
  template <class NameOf>
  int32_t insert_hashed(uint64_t h, std::string_view name, int32_t index, const NameOf& name_of) {
    return probe(h, index, [&](int32_t other) { return name_of(other) == name; });
  }
  // With room for one more: the entry hashed `h` that is_it() takes, else `index` added.
  template <class IsIt>
  int32_t probe(uint64_t h, int32_t index, const IsIt& is_it) {
    for (size_t at = h & mask_;; at = (at + 1) & mask_) {
      Slot& slot = slots_[at];
      if (slot.index < 0) {
        slot = {tag(h), index};
        ++size_;
        return index;
      }
      if (slot.tag == tag(h) && is_it(slot.index)) return slot.index;
    }
  }

 public:
  // Nodes first .. last - 1 under their names (name_of), in that order, as insert() one by one
  // would. The hashes first, then the probes with the slots a few names ahead already on their
  // way from memory: on a big graph each probe is a cache miss, and this way they overlap.
  template <class NameOf>
  void insert_range(int32_t first, int32_t last, const NameOf& name_of) {
    if (last <= first) return;
    reserve(size_ + static_cast<size_t>(last - first), name_of);
    std::vector<uint64_t> hashes(static_cast<size_t>(last - first));
    for (int32_t i = first; i < last; ++i) hashes[i - first] = hash(name_of(i));
    constexpr size_t kAhead = 16;
    for (size_t k = 0; k < hashes.size(); ++k) {
      if (k + kAhead < hashes.size()) __builtin_prefetch(&slots_[hashes[k + kAhead] & mask_]);
      const int32_t index = first + static_cast<int32_t>(k);
      insert_hashed(hashes[k], name_of(index), index, name_of);
    }
  }

  // Room for `n` names without growing.
  template <class NameOf>
  void reserve(size_t n, const NameOf& name_of) {
    if (2 * n > slots_.size()) grow(n, name_of);
  }
  // The same for an index filled by find_or_insert_if (hash_of as there).
  template <class HashOf>
  void reserve_by(size_t n, const HashOf& hash_of) {
    if (2 * n > slots_.size()) grow_by(n, hash_of);
  }

 private:
  template <class NameOf>
  void grow(size_t n, const NameOf& name_of) {
    grow_by(n, [&](int32_t index) { return hash(name_of(index)); });
  }
  template <class HashOf>
  void grow_by(size_t n, const HashOf& hash_of) {
    size_t capacity = 16;
    while (capacity < 2 * n) capacity *= 2;
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    mask_ = capacity - 1;
    for (const Slot& slot : old) {
      if (slot.index < 0) continue;
      for (size_t at = hash_of(slot.index) & mask_;; at = (at + 1) & mask_) {
        if (slots_[at].index >= 0) continue;
        slots_[at] = slot;
        break;
      }
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// Sorts `items` by name_of(item), ascending. Sorted on the names' first 16 bytes packed
// big-endian (most names differ there), whole names compared only on a tie: the sort then
// rarely reads a name, which on a big graph is a cache miss each time. Equal names keep their
// order.
template <class NameOf>
void sort_by_name(std::vector<int32_t>& items, const NameOf& name_of) {
  if (items.size() < 2) return;
  struct Key {
    uint64_t high, low;
    int32_t item;
  };
  const auto packed = [](std::string_view name, size_t from) {
    uint64_t v = 0;
    for (size_t i = from; i < from + 8; ++i)
      v = (v << 8) | (i < name.size() ? static_cast<unsigned char>(name[i]) : 0u);
    return v;
  };
  std::vector<Key> keys(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string_view name = name_of(items[i]);
    keys[i] = {packed(name, 0), packed(name, 8), items[i]};
  }
  // A merge sort: names in graph order ("add", "add_1", ..., "add_99" in scope after scope) drive
  // std::sort's introsort to its heap-sort fallback (5x slower here at 10^5 names, 5.5x at 10^6).
  std::stable_sort(keys.begin(), keys.end(), [&](const Key& a, const Key& b) {
    if (a.high != b.high) return a.high < b.high;
    if (a.low != b.low) return a.low < b.low;
    return name_of(a.item) < name_of(b.item);
  });
  for (size_t i = 0; i < keys.size(); ++i) items[i] = keys[i].item;
}

}  // namespace stepscope::tfprof
