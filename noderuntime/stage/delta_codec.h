// The wire form of a parameter delta in the low-communication mode (outer_sync.h): fp32 as is, or
// quantised to 8 or 4 bits per element with one fp32 scale per block of kDeltaBlock elements
// (symmetric, round to nearest: code = round(x / scale), scale = the block's largest |x| over
// 127 or 7), with error feedback: what quantisation lost is kept by the sender and added to its
// next delta, so nothing is lost for good, only late.
//
// Encoded: the scales (fp32, one per block; none at 32 bits), then the codes (int8 at 8 bits;
// two per byte at 4 bits, low nibble first, stored as code + 8), padded with zeros to whole
// 4-byte words (what crosses the transport is an int32 tensor of encoded_words()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tessel::stage {

// Elements per scale: small enough that one outlier spoils few codes, large enough that the
// scales cost little (4 / 128 bytes per element).
inline constexpr size_t kDeltaBlock = 128;

// 4-byte words of the encoding of `count` elements at `bits` (32, 8 or 4).
size_t encoded_words(size_t count, int bits);
// Bytes per element on the wire, scales and padding aside: 4, 1 or 0.5.
double payload_bytes_per_element(int bits);

// Encodes delta + residual into `out` (encoded_words(delta.size(), bits) words) and leaves in
// `residual` what the encoding lost (zero at 32 bits, where residual may be empty).
void encode_delta(std::span<const float> delta, std::span<float> residual, int bits,
                  std::span<uint32_t> out);
// Adds weight x the decoded values of `in` (count elements at `bits`) to `sum`.
void add_decoded_delta(std::span<const uint32_t> in, int bits, float weight, std::span<float> sum);

}  // namespace tessel::stage
