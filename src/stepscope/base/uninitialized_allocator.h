// std::allocator, except that an item made with no arguments (vector::resize) is left as its
// memory was: for an array of an implicit-lifetime type (an aggregate, a trivially copyable
// struct) that a writer fills item by item right after. Growing such an array then writes
// nothing, so new memory is first written where the writer writes it (a step's output
// descriptions: on pages a thread beside the step has mapped), not by a pass of default
// values on the thread that grows it. Items made with arguments (copies) are made as usual.
#pragma once

#include <memory>
#include <new>
#include <utility>

namespace stepscope {

template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() noexcept = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U*) noexcept {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

}  // namespace stepscope
