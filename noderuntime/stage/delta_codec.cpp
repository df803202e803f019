#include "noderuntime/stage/delta_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tessel::stage {
namespace {

size_t blocks_of(size_t count) { return (count + kDeltaBlock - 1) / kDeltaBlock; }

size_t code_bytes(size_t count, int bits) {
  switch (bits) {
    case 32:
      return 4 * count;
    case 8:
      return count;
    case 4:
      return (count + 1) / 2;
    default:
      throw std::invalid_argument("delta codec: bits must be 32, 8 or 4, got " +
                                  std::to_string(bits));
  }
}

int max_code(int bits) { return bits == 8 ? 127 : 7; }

}  // namespace

size_t encoded_words(size_t count, int bits) {
  const size_t scales = bits == 32 ? 0 : 4 * blocks_of(count);
  return (scales + code_bytes(count, bits) + 3) / 4;
}

double payload_bytes_per_element(int bits) { return bits / 8.0; }

void encode_delta(std::span<const float> delta, std::span<float> residual, int bits,
                  std::span<uint32_t> out) {
  const size_t n = delta.size();
  if (out.size() != encoded_words(n, bits) || (bits != 32 && residual.size() != n)) {
    throw std::invalid_argument("delta codec: buffer sizes do not match the delta's");
  }
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  std::memset(bytes, 0, out.size() * 4);
  if (bits == 32) {
    std::memcpy(bytes, delta.data(), 4 * n);
    return;
  }
  const size_t blocks = blocks_of(n);
  unsigned char* codes = bytes + 4 * blocks;
  const int qmax = max_code(bits);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kDeltaBlock, end = std::min(n, begin + kDeltaBlock);
    float largest = 0;
    for (size_t i = begin; i < end; ++i) {
      residual[i] += delta[i];  // the value to send: this delta plus what was lost before
      largest = std::max(largest, std::abs(residual[i]));
    }
    const float scale = largest / static_cast<float>(qmax);
    std::memcpy(bytes + 4 * b, &scale, 4);
    for (size_t i = begin; i < end; ++i) {
      int code = 0;
      if (scale > 0) {
        code = static_cast<int>(std::nearbyint(residual[i] / scale));
        code = std::clamp(code, -qmax, qmax);
      }
      residual[i] -= static_cast<float>(code) * scale;
      if (bits == 8) {
        codes[i] = static_cast<unsigned char>(static_cast<int8_t>(code));
      } else {
        const auto nibble = static_cast<unsigned char>(code + 8);
        codes[i / 2] |= static_cast<unsigned char>(i % 2 == 0 ? nibble : nibble << 4);
      }
    }
  }
}

void add_decoded_delta(std::span<const uint32_t> in, int bits, float weight, std::span<float> sum) {
  const size_t n = sum.size();
  if (in.size() != encoded_words(n, bits)) {
    throw std::invalid_argument("delta codec: the encoding's size does not match the delta's");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(in.data());
  if (bits == 32) {
    for (size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, bytes + 4 * i, 4);
      sum[i] += weight * x;
    }
    return;
  }
  const size_t blocks = blocks_of(n);
  const unsigned char* codes = bytes + 4 * blocks;
  for (size_t b = 0; b < blocks; ++b) {
    float scale;
    std::memcpy(&scale, bytes + 4 * b, 4);
    const size_t begin = b * kDeltaBlock, end = std::min(n, begin + kDeltaBlock);
    for (size_t i = begin; i < end; ++i) {
      const int code = bits == 8
                           ? static_cast<int>(static_cast<int8_t>(codes[i]))
                           : static_cast<int>((codes[i / 2] >> (i % 2 == 0 ? 0 : 4)) & 15) - 8;
      sum[i] += weight * (static_cast<float>(code) * scale);
    }
  }
}

}  // namespace tessel::stage
