// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every tensor message's
// payload and header. Software slicing-by-8 (eight 256-entry tables, eight bytes per step):
// portable, no SSE4.2 required, and a few GB/s per core, so it never dominates a 1 GB/s link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tessel::transport {

// Extends `crc` (the value returned for the bytes before `data`; 0 to start) over `data`:
// crc32c_extend(crc32c_extend(0, a), b) == crc32c(a followed by b).
uint32_t crc32c_extend(uint32_t crc, std::span<const std::byte> data);

inline uint32_t crc32c(std::span<const std::byte> data) { return crc32c_extend(0, data); }

}  // namespace tessel::transport
