// CRC32C: the published check values, agreement with a bit-at-a-time reference on every
// length and alignment (the instruction's path and the software one), and extension over split
// buffers.
#include "noderuntime/transport/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace tessel::transport {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text));
}

uint32_t bitwise_crc32c(std::span<const std::byte> data) {
  uint32_t crc = ~0u;
  for (std::byte b : data) {
    crc ^= static_cast<uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c({}), 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  std::vector<std::byte> zeros(32, std::byte{0}), ones(32, std::byte{0xFF}), ascending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<std::byte>(i);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, AgreesWithBitwiseReferenceOnEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<std::byte> data(300);
  for (auto& b : data) b = static_cast<std::byte>(rng());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t length = 0; length + offset <= 120; ++length) {
      const auto piece = std::span(data).subspan(offset, length);
      ASSERT_EQ(crc32c(piece), bitwise_crc32c(piece))
          << "offset " << offset << " length " << length;
      // The software path too, which machines without SSE4.2 take.
      ASSERT_EQ(crc32c_extend_portable(0, piece), bitwise_crc32c(piece))
          << "offset " << offset << " length " << length;
    }
  }
}

TEST(Crc32c, ExtendingOverPiecesEqualsTheWhole) {
  std::mt19937 rng(11);
  std::vector<std::byte> data(4099);
  for (auto& b : data) b = static_cast<std::byte>(rng());
  const uint32_t whole = crc32c(data);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{1000}, data.size()}) {
    const auto all = std::span(data);
    EXPECT_EQ(crc32c_extend(crc32c(all.first(split)), all.subspan(split)), whole) << split;
  }
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::vector<std::byte> data(64, std::byte{0x5A});
  const uint32_t clean = crc32c(data);
  for (size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_NE(crc32c(data), clean) << "bit " << bit;
    data[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace tessel::transport
