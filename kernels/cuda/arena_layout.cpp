#include "kernels/cuda/arena_layout.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tessel::kernels::cuda {

size_t ArenaLayout::reserve(size_t bytes, const char* what) {
  const size_t offset = (used_ + kAlignment - 1) / kAlignment * kAlignment;
  if (offset > capacity_ || bytes > capacity_ - offset) {
    throw std::length_error("arena: '" + std::string(what) + "' needs " + std::to_string(bytes) +
                            " bytes but only " +
                            std::to_string(capacity_ - std::min(offset, capacity_)) + " of " +
                            std::to_string(capacity_) + " are free");
  }
  used_ = offset + bytes;
  high_water_ = std::max(high_water_, used_);
  return offset;
}

void ArenaLayout::release_to(size_t mark) {
  if (mark > used_) {
    throw std::invalid_argument("arena: release_to(" + std::to_string(mark) + ") is beyond the " +
                                std::to_string(used_) + " bytes in use");
  }
  used_ = mark;
}

}  // namespace tessel::kernels::cuda
