// The bookkeeping of a bump allocator over [0, capacity): offsets only, no memory, so it is
// testable without a GPU. DeviceArena (arena.h) puts it over one cudaMalloc.
//
// Parameters are reserved once and kept; activations of a micro-batch are reserved after a
// mark() and given back together with release_to(mark), last in first out, so a step allocates
// nothing from the driver.
#pragma once

#include <cstddef>

namespace tessel::kernels::cuda {

class ArenaLayout {
 public:
  // cudaMalloc's own alignment: enough for 16-byte vector loads, cuBLASLt and cp.async.
  static constexpr size_t kAlignment = 256;

  explicit ArenaLayout(size_t capacity) : capacity_(capacity) {}

  // The offset of `bytes` new bytes, kAlignment-aligned. Throws std::length_error naming `what`
  // and the sizes when they do not fit.
  size_t reserve(size_t bytes, const char* what);

  size_t mark() const { return used_; }
  // Gives back everything reserved since `mark`. Throws std::invalid_argument for a mark beyond
  // what is in use (one from before an earlier release).
  void release_to(size_t mark);

  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  // The most that was ever in use: what a run needs, to size the next one.
  size_t high_water() const { return high_water_; }

 private:
  size_t capacity_;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

}  // namespace tessel::kernels::cuda
