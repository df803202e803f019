#include "noderuntime/transport/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tessel::transport {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;

// kTables[0] is the classic byte table; kTables[k][b] is the CRC of byte b followed by k zero
// bytes, so eight table lookups advance the CRC over eight bytes at once.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    tables[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t prev = tables[k - 1][b];
      tables[k][b] = (prev >> 8) ^ tables[0][prev & 0xFFu];
    }
  }
  return tables;
}

constexpr auto kTables = make_tables();

uint32_t load_le32(const std::byte* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

uint32_t crc32c_extend_portable(uint32_t crc, std::span<const std::byte> data) {
  const std::byte* p = data.data();
  size_t n = data.size();
  crc = ~crc;
  while (n >= 8) {
    const uint32_t lo = load_le32(p) ^ crc;
    const uint32_t hi = load_le32(p + 4);
    crc = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^ kTables[5][(lo >> 16) & 0xFFu] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFFu] ^ kTables[2][(hi >> 8) & 0xFFu] ^
          kTables[1][(hi >> 16) & 0xFFu] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ static_cast<uint32_t>(*p++)) & 0xFFu];
  return ~crc;
}

#if defined(__x86_64__)
namespace {

// SSE4.2's crc32 instruction computes this very polynomial, eight bytes per instruction.
__attribute__((target("sse4.2"))) uint32_t crc32c_extend_sse42(uint32_t crc,
                                                               std::span<const std::byte> data) {
  const std::byte* p = data.data();
  size_t n = data.size();
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);  // little-endian, as the instruction expects
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p++));
  return ~c32;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");

}  // namespace
#endif

uint32_t crc32c_extend(uint32_t crc, std::span<const std::byte> data) {
#if defined(__x86_64__)
  if (kHaveSse42) return crc32c_extend_sse42(crc, data);
#endif
  return crc32c_extend_portable(crc, data);
}

}  // namespace tessel::transport
