// A device memory arena for parameters and activations: one cudaMalloc up front, then typed
// slices handed out by ArenaLayout's bump pointer (256-byte aligned) and given back in bulk with
// mark()/release_to(). Not thread-safe: one owner, usually the stage runtime's setup code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/arena_layout.h"

namespace tessel::kernels::cuda {

class DeviceArena {
 public:
  explicit DeviceArena(size_t capacity);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // `count` elements of T, uninitialised. Throws std::length_error when the arena is full.
  template <class T>
  T* allocate(int64_t count, const char* what) {
    if (count < 0)
      throw std::invalid_argument("arena: negative count for '" + std::string(what) + "'");
    return reinterpret_cast<T*>(base_ + layout_.reserve(size_t(count) * sizeof(T), what));
  }

  size_t mark() const { return layout_.mark(); }
  void release_to(size_t mark) { layout_.release_to(mark); }
  size_t used() const { return layout_.used(); }
  size_t capacity() const { return layout_.capacity(); }
  size_t high_water() const { return layout_.high_water(); }

 private:
  ArenaLayout layout_;
  std::byte* base_ = nullptr;
};

}  // namespace tessel::kernels::cuda
