// bf16 on the host, for the tests: round-to-nearest-even conversions of the bit patterns, so the
// CPU twin can be given exactly the values the GPU sees.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace tessel::kernels::cuda::testing {

inline uint16_t to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float from_bf16_bits(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

inline float round_to_bf16(float x) { return from_bf16_bits(to_bf16_bits(x)); }

inline std::vector<float> round_to_bf16(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

}  // namespace tessel::kernels::cuda::testing
