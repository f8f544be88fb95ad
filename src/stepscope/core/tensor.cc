#include "stepscope/core/tensor.h"

#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <vector>

#include "stepscope/base/clock.h"

namespace stepscope {

static_assert(sizeof(Buffer) <= 64, "the buffer header must fit before the 64-byte aligned data");

Buffer* Buffer::create(Allocator* allocator, DType dtype, int64_t num_elements) {
  // A count that fits may still overflow once multiplied by the element size (or with the
  // header added), and a wrapped size would allocate too little.
  int64_t requested = 0;
  if (num_elements < 0 || __builtin_mul_overflow(num_elements, static_cast<int64_t>(dtype_size(dtype)), &requested) ||
      requested > std::numeric_limits<int64_t>::max() - static_cast<int64_t>(kHeaderSize))
    throw InvalidArgumentError("cannot allocate a " + std::string(dtype_name(dtype)) + " buffer of " +
                               std::to_string(num_elements) + " elements: its size in bytes overflows 64 bits");
  const size_t total = kHeaderSize + static_cast<size_t>(requested);
  int64_t id = 0;
  void* block = allocator->allocate(total, kAlignment, &id);
  auto* b = new (block) Buffer();
  b->dtype_ = dtype;
  b->requested_bytes_ = requested;
  b->allocator_ = allocator;
  b->allocation_id_ = id;
  if (dtype == DType::kString) {
    auto* s = static_cast<std::string*>(b->data());
    for (int64_t i = 0; i < num_elements; ++i) new (s + i) std::string();
  }
  RecordingScope& rec = current_recording();
  if (rec.recorder) [[unlikely]] {
    b->recorder_ = rec.recorder;
    b->generation_ = rec.generation;
    b->node_ = rec.node;
    rec.log->events.push_back(
        {rec.time_ns ? rec.time_ns : now_ns(), requested, id, allocator, allocator->bytes_in_use(), rec.node});
  }
  return b;
}

int64_t Buffer::packed_offsets(std::span<const int64_t> bytes, std::span<int64_t> offsets) {
  int64_t at = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    offsets[i] = at;
    at += (bytes[i] + static_cast<int64_t>(kAlignment) - 1) / static_cast<int64_t>(kAlignment) *
          static_cast<int64_t>(kAlignment);
  }
  return at;
}

void Buffer::create_packed(Allocator* allocator, DType dtype, std::span<const int64_t> num_elements,
                           std::span<Buffer*> out) {
  if (dtype == DType::kString) throw InvalidArgumentError("cannot pack string buffers");
  const size_t k = num_elements.size();
  std::vector<int64_t> bytes(k), offsets(k);
  for (size_t i = 0; i < k; ++i) {
    if (num_elements[i] < 0 || num_elements[i] > (int64_t{1} << 40))
      throw InvalidArgumentError("cannot pack a buffer of " + std::to_string(num_elements[i]) + " elements");
    bytes[i] = num_elements[i] * static_cast<int64_t>(dtype_size(dtype));
  }
  // The allocation: its own header, then the packed buffers' headers, then their elements.
  const int64_t headers = static_cast<int64_t>(k * kHeaderSize);
  const int64_t data_bytes = packed_offsets(bytes, offsets);
  if (headers + data_bytes > std::numeric_limits<int32_t>::max())
    throw InvalidArgumentError("cannot pack " + std::to_string(data_bytes) + " bytes: at most 2 GiB");
  Buffer* block = create(allocator, DType::kBool, headers + data_bytes);
  char* base = static_cast<char*>(block->data());
  char* data = base + headers;
  for (size_t i = 0; i < k; ++i) {
    const int64_t end = offsets[i] + bytes[i];
    const int64_t next = i + 1 < k ? offsets[i + 1] : data_bytes;
    if (next > end) std::memset(data + end, 0, static_cast<size_t>(next - end));  // reduced with the rest
    auto* b = new (base + i * kHeaderSize) Buffer();
    b->dtype_ = dtype;
    b->requested_bytes_ = bytes[i];
    b->allocator_ = allocator;  // for allocated_bytes(); the allocation is the pack's
    b->pack_ = block;
    b->data_offset_ = static_cast<int32_t>(headers - static_cast<int64_t>(i * kHeaderSize) + offsets[i]);
    out[i] = b;
  }
  if (k == 0) return block->release();
  if (k > 1) block->add_ref(static_cast<int32_t>(k - 1));  // one reference a packed buffer
}

void Buffer::destroy() {
  if (pack_) {
    Buffer* pack = pack_;
    this->~Buffer();
    return pack->release();
  }
  if (dtype_ == DType::kString) {
    auto* s = static_cast<std::string*>(data());
    const int64_t n = requested_bytes_ / static_cast<int64_t>(sizeof(std::string));
    for (int64_t i = 0; i < n; ++i) s[i].~basic_string();
  }
  Allocator* allocator = allocator_;
  const size_t total = kHeaderSize + static_cast<size_t>(requested_bytes_);
  AllocationRecorder* recorder = recorder_;
  const uint64_t generation = generation_;
  const int64_t id = allocation_id_, bytes = requested_bytes_;
  const int32_t node = node_;
  this->~Buffer();
  allocator->deallocate(this, total);
  if (recorder) [[unlikely]] {
    RecordingScope& rec = current_recording();
    if (rec.recorder == recorder && rec.generation == generation) {  // a thread of the recorded step
      rec.log->events.push_back(
          {rec.time_ns ? rec.time_ns : now_ns(), -bytes, id, allocator, allocator->bytes_in_use(), node});
    } else if (recorder->generation() == generation) {
      recorder->record_other(generation, {now_ns(), -bytes, id, allocator, allocator->bytes_in_use(), node});
    }
  }
}

Tensor::Tensor(DType dtype, const Shape& shape, Allocator* allocator) : dtype_(dtype), shape_(shape) {
  // One pass checks the shape and counts the elements (this runs for every output of every op).
  int64_t n = 1;
  bool known = shape.known_rank(), overflow = false;
  for (int64_t d : shape.dims()) {
    known &= d >= 0;
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  if (!known) throw InvalidArgumentError("cannot allocate a tensor of partially known shape " + shape.to_string());
  if (overflow)
    throw InvalidArgumentError("cannot allocate a tensor of shape " + shape.to_string() +
                               ": its element count overflows 64 bits; check the dimensions");
  buffer_ = Buffer::create(allocator, dtype, n);
}

int64_t Tensor::offset_of(std::initializer_list<int64_t> index) const {
  if (static_cast<int>(index.size()) != rank())
    throw InvalidArgumentError("index of rank " + std::to_string(index.size()) + " into tensor of shape " +
                               shape_.to_string());
  int64_t offset = 0;
  int i = 0;
  for (int64_t idx : index) {
    if (idx < 0 || idx >= shape_.dim(i))
      throw InvalidArgumentError("index " + std::to_string(idx) + " out of range for dimension " + std::to_string(i) +
                                 " of shape " + shape_.to_string());
    offset = offset * shape_.dim(i) + idx;
    ++i;
  }
  return offset;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  if (shape.num_elements() != num_elements())
    throw InvalidArgumentError("cannot reshape a tensor of shape " + shape_.to_string() + " (" +
                               std::to_string(num_elements()) + " elements) to " + shape.to_string());
  Tensor t(*this);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::deep_copy(Allocator* allocator) const {
  if (!initialized()) return Tensor();
  Tensor t(dtype_, shape_, allocator);
  if (dtype_ == DType::kString) {
    auto src = flat<std::string>();
    auto dst = t.flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else {
    std::memcpy(t.raw_data(), raw_data(), static_cast<size_t>(bytes()));
  }
  return t;
}

std::string Tensor::debug_string(int max_elements) const {
  if (!initialized()) return "<uninitialized tensor>";
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_.to_string() << " [";
  const int64_t n = num_elements();
  for (int64_t i = 0; i < n && i < max_elements; ++i) {
    if (i) os << ' ';
    if (dtype_ == DType::kString) {
      os << '"' << data<std::string>()[i] << '"';
    } else {
      dispatch_numeric(dtype_, [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_same_v<T, bool>)
          os << (data<bool>()[i] ? "true" : "false");
        else
          os << +data<T>()[i];
      });
    }
  }
  if (n > max_elements) os << " ...";
  os << ']';
  return os.str();
}

bool tensors_equal(const Tensor& a, const Tensor& b) {
  if (a.initialized() != b.initialized()) return false;
  if (!a.initialized()) return true;
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  if (a.dtype() == DType::kString) {
    auto x = a.flat<std::string>(), y = b.flat<std::string>();
    return std::equal(x.begin(), x.end(), y.begin());
  }
  return std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.bytes())) == 0;
}

}  // namespace stepscope
