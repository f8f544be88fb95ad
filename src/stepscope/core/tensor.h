// Tensor: a dtype, a shape and a reference-counted, 64-byte aligned buffer from an
// Allocator. Copies are cheap (they share the buffer); deep_copy() makes an independent one.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "stepscope/base/error.h"
#include "stepscope/core/allocator.h"
#include "stepscope/core/dtype.h"
#include "stepscope/core/shape.h"

namespace stepscope {

// The block behind a tensor: this header, then the aligned elements, in one allocation; or one
// of several buffers packed into one allocation (see create_packed).
class Buffer {
 public:
  static constexpr size_t kAlignment = 64;
  static Buffer* create(Allocator* allocator, DType dtype, int64_t num_elements);
  // Buffers of one dtype whose elements lie back to back in one allocation, each starting at the
  // next kAlignment boundary after the one before (packed_offsets), the padding zeroed: for an op
  // that wants its inputs contiguous (a fused allreduce reduces them in one call where they lie,
  // TensorFlow's ScopedAllocator). Each is a buffer of its own, with its own references; the
  // allocation (allocated and recorded as one) is freed with the last of them. Fills `out`, one
  // buffer per count, each holding one reference the caller owns. Not for strings.
  static void create_packed(Allocator* allocator, DType dtype, std::span<const int64_t> num_elements,
                            std::span<Buffer*> out);
  // Where packed data of these sizes in bytes starts, from the first's start (the layout of
  // create_packed); returns the total, padding included.
  static int64_t packed_offsets(std::span<const int64_t> bytes, std::span<int64_t> offsets);
  // The allocation a packed buffer shares with the others of its pack; null for a buffer of its own.
  const Buffer* pack() const { return pack_; }

  void* data() { return reinterpret_cast<char*>(this) + data_offset_; }
  const void* data() const { return reinterpret_cast<const char*>(this) + data_offset_; }
  int64_t requested_bytes() const { return requested_bytes_; }
  // What the allocator really set aside for this buffer, header included.
  int64_t allocated_bytes() const {
    if (pack_) {  // its part of the pack: its header and its elements to the next one's start
      const auto align = static_cast<int64_t>(kAlignment);
      return static_cast<int64_t>(kHeaderSize) + (requested_bytes_ + align - 1) / align * align;
    }
    return static_cast<int64_t>(
        allocator_->allocated_size(kHeaderSize + static_cast<size_t>(requested_bytes_), kAlignment));
  }
  int64_t allocation_id() const { return allocation_id_; }
  const Allocator* allocator() const { return allocator_; }
  void add_ref(int32_t n = 1) { refs_.fetch_add(n, std::memory_order_relaxed); }
  // The last reference skips the locked decrement: with a count of 1 nobody else holds one to
  // add to it from (the acquire pairs with the release of earlier holders' decrements).
  void release() {
    if (refs_.load(std::memory_order_acquire) == 1 || refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }
  bool unique() const { return refs_.load(std::memory_order_acquire) == 1; }
  int32_t ref_count() const { return refs_.load(std::memory_order_acquire); }

 private:
  static constexpr size_t kHeaderSize = 64;
  Buffer() = default;
  void destroy();

  std::atomic<int32_t> refs_{1};
  int32_t node_ = -1;  // the recording scope's node, when allocated while recording
  Buffer* pack_ = nullptr;  // packed: the allocation, which this buffer holds a reference to
  int64_t requested_bytes_ = 0;
  int64_t allocation_id_ = 0;
  Allocator* allocator_ = nullptr;
  AllocationRecorder* recorder_ = nullptr;  // set when allocated while recording ...
  uint64_t generation_ = 0;                 // ... that recording of it
  int32_t data_offset_ = kHeaderSize;  // from this header to the elements
  DType dtype_ = DType::kFloat32;
};

class Tensor {
 public:
  Tensor() = default;  // uninitialized: no dtype, no buffer
  Tensor(DType dtype, const Shape& shape, Allocator* allocator = cpu_allocator());
  // Takes over one reference to `buffer`, which holds shape.num_elements() elements of dtype.
  static Tensor adopt(DType dtype, const Shape& shape, Buffer* buffer) {
    Tensor t;
    t.dtype_ = dtype, t.shape_ = shape, t.buffer_ = buffer;
    return t;
  }
  Tensor(const Tensor& other) : dtype_(other.dtype_), shape_(other.shape_), buffer_(other.buffer_) {
    if (buffer_) buffer_->add_ref();
  }
  Tensor(Tensor&& other) noexcept : dtype_(other.dtype_), shape_(other.shape_), buffer_(other.buffer_) {
    other.buffer_ = nullptr;
  }
  Tensor& operator=(const Tensor& other) {
    if (this != &other) {
      if (other.buffer_) other.buffer_->add_ref();
      if (buffer_) buffer_->release();
      dtype_ = other.dtype_, shape_ = other.shape_, buffer_ = other.buffer_;
    }
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      if (buffer_) buffer_->release();
      dtype_ = other.dtype_, shape_ = other.shape_, buffer_ = other.buffer_;
      other.buffer_ = nullptr;
    }
    return *this;
  }
  ~Tensor() {
    if (buffer_) buffer_->release();
  }

  // Convenience constructors (tests, feeds, constants).
  template <typename T>
  static Tensor scalar(T value) {
    Tensor t(dtype_of<T>, Shape{});
    t.data<T>()[0] = value;
    return t;
  }
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }

  bool initialized() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return shape_.num_elements(); }
  int64_t bytes() const { return num_elements() * static_cast<int64_t>(dtype_size(dtype_)); }
  const Buffer* buffer() const { return buffer_; }
  bool shares_buffer_with(const Tensor& other) const { return buffer_ && buffer_ == other.buffer_; }
  // True when this is the only reference to the buffer (safe to overwrite in place).
  bool buffer_unique() const { return buffer_ && buffer_->unique(); }
  // The references to the buffer, this one included (0: no buffer).
  int32_t buffer_ref_count() const { return buffer_ ? buffer_->ref_count() : 0; }
  // For one Tensor that stands for several holders at once (an executor's output slot, read by
  // each of its consumers): counts `n` more references to the buffer, each given back by the
  // buffer's release() while this Tensor still holds its own, so that buffer_unique() of any
  // copy sees every reader. No-op on an uninitialized tensor.
  void add_holders(int32_t n) {
    if (buffer_) buffer_->add_ref(n);
  }

  void* raw_data() { return buffer_ ? buffer_->data() : nullptr; }
  const void* raw_data() const { return buffer_ ? buffer_->data() : nullptr; }
  template <typename T>
  T* data() {
    check_type(dtype_of<T>);
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>);
    return static_cast<const T*>(raw_data());
  }
  template <typename T>
  std::span<T> flat() {
    return {data<T>(), static_cast<size_t>(num_elements())};
  }
  template <typename T>
  std::span<const T> flat() const {
    return {data<T>(), static_cast<size_t>(num_elements())};
  }
  template <typename T>
  std::vector<T> to_vector() const {
    auto f = flat<T>();
    return {f.begin(), f.end()};
  }
  template <typename T>
  T scalar_value() const {
    if (num_elements() != 1)
      throw InvalidArgumentError("expected a tensor of one element, got shape " + shape_.to_string());
    return data<T>()[0];
  }
  // Element at a multi-index (bounds-checked; for tests and debugging).
  template <typename T>
  const T& at(std::initializer_list<int64_t> index) const {
    return data<T>()[offset_of(index)];
  }

  // Same buffer, another shape with the same number of elements.
  Tensor reshaped(const Shape& shape) const;
  Tensor deep_copy(Allocator* allocator = cpu_allocator()) const;
  // "float32[2,3] [1 2 3 4 5 6]", eliding after max_elements.
  std::string debug_string(int max_elements = 16) const;

 private:
  void check_type(DType expected) const {
    if (expected != dtype_)
      throw InvalidArgumentError("tensor has dtype " + std::string(dtype_name(dtype_)) + ", accessed as " +
                                 std::string(dtype_name(expected)));
  }
  int64_t offset_of(std::initializer_list<int64_t> index) const;

  DType dtype_ = DType::kFloat32;
  Shape shape_;
  Buffer* buffer_ = nullptr;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  if (shape.num_elements() != static_cast<int64_t>(values.size()))
    throw InvalidArgumentError("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                               shape.to_string());
  Tensor t(dtype_of<T>, shape);
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

// Element-wise equality of dtype, shape and values (exact; tests use tolerances themselves).
bool tensors_equal(const Tensor& a, const Tensor& b);

}  // namespace stepscope
